"""--gpus: one worker pinned to each GPU, rows merged in a one-GPU run's order, one GPU model only.

The GPUs are a made-up list (CUDA_VISIBLE_DEVICES values handed to stand-in-driver workers, which
print what they were given); the numbers are synthetic, so the rows must be equal exactly."""

from __future__ import annotations

import io
import os
import re
import signal
import threading
import time

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.results_schema import load_results
from benchmark_model_kernels.run import devices, runner
from helpers_runner import FAKE_REPO, GPU, HANG, NO_CONFIG, VALUE_ERROR, gemm_case, moe_case, run_request, settings
from support import write_tiny_llama

TIMING_FREE = ("median_us", "std_us", "tflops", "tb_per_sec", "pct_peak_tflops", "pct_peak_bandwidth")


def cases():
    out = [gemm_case(n, m=m) for n in (512, 1024, 2048) for m in (1, 8, 64)]
    out += [gemm_case(VALUE_ERROR), gemm_case(NO_CONFIG), moe_case(m=8), gemm_case(4096, skip="not on sm_90")]
    return out


def run_on(tmp_path, name, gpus, todo, **kw):
    workdir = str(tmp_path / name)
    progress = io.StringIO()
    rc = runner.run_plan(run_request(todo, workdir, settings(tmp_path), devices=gpus, **kw), todo,
                         command=["test"], progress=progress, environment=lambda repo: {})
    return rc, load_results(workdir), progress.getvalue(), workdir


def devices_of_cases(workdir):
    """case id -> the CUDA_VISIBLE_DEVICES its stand-in driver process saw (from driver.log)."""
    log = open(os.path.join(workdir, "driver.log")).read()
    return dict(re.findall(r"\[FAKE\] pid \d+ case (\S+) CUDA_VISIBLE_DEVICES=(\S+)", log))


def test_rows_from_several_gpus_merge_into_the_order_and_values_of_a_one_gpu_run(tmp_path):
    todo = cases()
    rc1, one, _, _ = run_on(tmp_path, "one", None, todo)
    rc4, four, progress, workdir = run_on(tmp_path, "four", ["3", "5", "6", "7"], todo)
    assert rc1 == rc4 == 1
    assert [r["case_id"] for r in four["rows"]] == [c.case_id for c in todo]
    assert four["rows"] == one["rows"]
    seen = devices_of_cases(workdir)
    assert set(seen.values()) <= {"3", "5", "6", "7"} and len(set(seen.values())) >= 2
    assert len(seen) == len([c for c in todo if not c.skip_reason])  # every launched case, pinned
    assert progress.count("] ") >= len(todo) and "4 GPUs" in four["notes"]["gpus"]
    for dev in ("3", "5", "6", "7"):
        log = os.path.join(workdir, "cases", f"worker.gpu{dev}.log")
        if os.path.exists(log):
            assert f"started on CUDA_VISIBLE_DEVICES={dev}" in open(log).read()


def test_with_quant_rows_wait_for_their_base_on_another_gpu(tmp_path):
    todo = [gemm_case(VALUE_ERROR, dtype="fp8"), gemm_case(VALUE_ERROR, dtype="fp8", with_quant=True),
            gemm_case(NO_CONFIG, dtype="fp8"), gemm_case(NO_CONFIG, dtype="fp8", with_quant=True)]
    _, one, _, _ = run_on(tmp_path, "one", None, todo)
    _, two, _, _ = run_on(tmp_path, "two", ["0", "1"], todo)
    assert two["rows"] == one["rows"]
    assert two["rows"][1]["reason"].startswith("base case failed")
    assert two["rows"][3]["status"] == "unsupported"


def test_a_stop_signal_ends_every_gpu_worker_and_keeps_the_finished_rows(tmp_path):
    todo = [gemm_case(512), gemm_case(HANG), gemm_case(HANG, name="h2"), gemm_case(1024)]
    pids = []

    def interrupt_when_hanging():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            log = os.path.join(tmp_path, "w", "cases")
            found = [f for f in os.listdir(log)] if os.path.isdir(log) else []
            if sum(f.endswith(".log") and (f.startswith("gemm.g6662") or f.startswith("gemm.h2"))
                   for f in found) >= 2:  # both hanging cases have started
                time.sleep(0.5)
                break
            time.sleep(0.05)
        for name in os.listdir(os.path.join(tmp_path, "w", "cases")):
            if name.startswith("worker.gpu"):
                text = open(os.path.join(tmp_path, "w", "cases", name)).read()
                pids.extend(int(p) for p in re.findall(r"worker pid (\d+) started", text))
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=interrupt_when_hanging, daemon=True).start()
    rc, results, progress, _ = run_on(tmp_path, "w", ["0", "1"], todo)
    assert rc == 128 + signal.SIGTERM
    assert "interrupted by SIGTERM" in progress
    done = {r["case_id"] for r in results["rows"]}
    assert "gemm.g512.m8.bf16.cudnn" in done and not any("6662" in c or "h2" in c for c in done)
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_check_gpus_pins_through_cuda_visible_devices_and_refuses_mixed_models(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    same = lambda numbers: ["NVIDIA H200"] * len(numbers)  # noqa: E731
    assert devices.check_gpus("0,1,3", same) == ["0", "1", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,GPU-abc")
    assert devices.check_gpus("2,0", same) == ["GPU-abc", "4"]
    with pytest.raises(UsageError, match="no device 3"):
        devices.check_gpus("3", same)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with pytest.raises(UsageError, match="GPU 1 is a NVIDIA H100 80GB HBM3 but GPU 0 is a NVIDIA H200"):
        devices.check_gpus("0,1", lambda n: ["NVIDIA H200", "NVIDIA H100 80GB HBM3"])
    for bad in ("", "a,b", "-1", "0,0"):
        with pytest.raises(UsageError, match="--gpus"):
            devices.check_gpus(bad, same)


def test_check_gpus_without_nvml_or_a_device_is_one_usage_error():
    def no_device(numbers):
        raise RuntimeError("NVML Shared Library Not Found")

    with pytest.raises(UsageError, match="cannot be read through NVML"):
        devices.check_gpus("0,1", no_device)


def test_the_cli_spreads_a_run_over_gpus_and_writes_the_one_gpu_rows(tmp_path, monkeypatch, capsys):

    from benchmark_model_kernels import cli_model
    from benchmark_model_kernels.run import flags

    model = write_tiny_llama(tmp_path / "tiny", num_hidden_layers=1)
    monkeypatch.setattr(flags, "detect_gpu", lambda: GPU)
    monkeypatch.setattr(flags.devices, "nvml_names", lambda numbers: ["NVIDIA H200"] * len(numbers))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    common = [str(model), "--ms", "1", "8", "--dtypes", "bf16", "--backends", "cudnn", "cublaslt",
              "--flashinfer_repo", FAKE_REPO, "--no_cache"]
    assert cli_model.main([*common, "--workdir", str(tmp_path / "one")]) == 0
    assert cli_model.main([*common, "--workdir", str(tmp_path / "two"), "--gpus", "0,1"]) == 0
    capsys.readouterr()
    one, two = (load_results(str(tmp_path / w)) for w in ("one", "two"))
    assert [r["case_id"] for r in two["rows"]] == [r["case_id"] for r in one["rows"]]
    assert [r["median_us"] for r in two["rows"]] == [r["median_us"] for r in one["rows"]]
    assert set(devices_of_cases(str(tmp_path / "two")).values()) == {"0", "1"}
    assert "2 GPUs" in two["notes"]["gpus"] and "gpus" not in one["notes"]
