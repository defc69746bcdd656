"""Driver plumbing: argv, CSV parsing, outcome classification, and the restartable worker.

Classification is checked against the driver's own message formats (research/flashinfer_driver.md
sections 1.5, 1.6, 2) and, when present, against output captured from the real driver on the H200
(tests/fixtures/driver/*.log|csv). The worker is exercised with a stand-in driver for plumbing only.
"""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.run import driver
from benchmark_model_kernels.run.driver import Outcome, WorkerPool, WorkerReply, case_from_dict, case_to_dict, classify_driver_case, classify_python_case, driver_argv, read_driver_csv
from benchmark_model_kernels.run.results import RunSettings

from helpers_runner import CUPTI_FALLBACK, FAKE_REPO, HANG, SEGFAULT, gemm_case, moe_case

S = RunSettings()
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "driver")


# ---------------------------------------------------------------------------------------- argv
def test_driver_argv_appends_timing_flags_verbose_and_case_tag():
    c = gemm_case(4096)
    s = RunSettings(num_iters=7, dry_run_iters=2, autotune=True, autotune_cache="/w/at.json")
    argv = driver_argv(c, s)
    assert argv[: len(c.driver_args)] == list(c.driver_args)
    tail = argv[len(c.driver_args):]
    assert tail == ["--num_iters", "7", "--dry_run_iters", "2", "--autotune", "--autotune_cache",
                    "/w/at.json", "-v", "--case_tag", c.case_id]


def test_driver_argv_no_autotune_means_no_cache_and_no_graph_flag():
    s = RunSettings(autotune=False, cuda_graph=False, autotune_cache="/w/at.json")
    argv = driver_argv(gemm_case(4096), s)
    assert "--autotune" not in argv and "--autotune_cache" not in argv
    assert "--no_cuda_graph" in argv


def test_case_json_round_trip_gemm_and_moe():
    for c in (gemm_case(4096, skip="x"), moe_case()):
        assert case_from_dict(case_to_dict(c)) == c


# ----------------------------------------------------------------------------------------- CSV
def test_read_driver_csv_keeps_first_of_duplicate_columns(tmp_path):
    p = tmp_path / "out.csv"
    p.write_text("routine,median_time,top_k,num_tokens,top_k,case_tag\n"
                 "mm_bf16,0.0196,8,16,99,t1\n")
    rows = read_driver_csv(str(p))
    assert rows == [{"routine": "mm_bf16", "median_time": "0.0196", "top_k": "8",
                     "num_tokens": "16", "case_tag": "t1"}]


def test_read_driver_csv_missing_or_header_only(tmp_path):
    assert read_driver_csv(str(tmp_path / "nope.csv")) == []
    (tmp_path / "h.csv").write_text("routine,median_time\n")
    assert read_driver_csv(str(tmp_path / "h.csv")) == []


# ------------------------------------------------------------------------------ classification
ROW = {"routine": "mm_bf16", "median_time": "0.0196", "std_time": "0.0004", "backend": "cudnn_autotune"}


def test_row_is_ok_in_microseconds_timed_with_cupti():
    out = classify_driver_case("[PERF] cudnn ...", [ROW], WorkerReply({}), S)
    assert out.status == "ok" and out.timer == "cupti"
    assert out.median_us == pytest.approx(19.6) and out.std_us == pytest.approx(0.4)


def test_probe_rejection_is_unsupported_quoting_the_driver():
    log = ("[INFO] cutlass backend does not support this configuration: BackendSupportedError: "
           "bmm_fp8 does not support backend 'cutlass' with capability 90\n"
           "[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S)
    assert out.status == "unsupported"
    assert out.reason == ("[INFO] cutlass backend does not support this configuration: "
                          "BackendSupportedError: bmm_fp8 does not support backend 'cutlass' with capability 90")


def test_capability_table_skip_is_unsupported():
    log = ("[WARNING] cutlass for routine cutlass_fused_moe is not supported on compute capability 9.0. "
           "Skipping.\n[ERROR] No backends to test. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S)
    assert out.status == "unsupported" and "compute capability 9.0" in out.reason


def test_probe_fault_is_failed_not_unsupported():
    log = ("[INFO] cudnn backend does not support this configuration: OutOfMemoryError: CUDA out of "
           "memory. Tried to allocate 2.00 GiB\n[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S)
    assert out.status == "failed" and "out of memory" in out.reason


def test_no_backends_without_reason_is_failed():
    out = classify_driver_case("[ERROR] No backends to test. Exiting.\n", [], WorkerReply({}), S)
    assert out.status == "failed" and "without a reason" in out.reason


def test_exception_quotes_the_error_line():
    log = ("[ERROR] Error running test: --routine mm_bf16 ...\n"
           "[ERROR] Error: Unsupported output dtype: float64.\nTraceback ...\n")
    out = classify_driver_case(log, [], WorkerReply({"exception": "ValueError: Unsupported output dtype: float64."}), S)
    assert out.status == "failed"
    assert out.reason == "[ERROR] Error: Unsupported output dtype: float64. (ValueError)"


def test_argparse_exit_quotes_the_usage_error():
    log = "usage: flashinfer_benchmark.py [-h] ...\nflashinfer_benchmark.py: error: argument --m: invalid int value: 'x'\n"
    out = classify_driver_case(log, [], WorkerReply({"systemexit": "exit code 2"}), S)
    assert out.status == "failed"
    assert out.reason == "driver rejected its arguments: flashinfer_benchmark.py: error: argument --m: invalid int value: 'x'"


def test_lost_worker_reason_has_the_last_output():
    out = classify_driver_case("[INFO] Running testMmBf16\nFatal Python error: Segmentation fault\n", [],
                               WorkerReply(lost="worker exited with signal 11 (SIGSEGV)"), S)
    assert out.status == "failed"
    assert out.reason.startswith("worker exited with signal 11 (SIGSEGV); last output: ")
    assert "Segmentation fault" in out.reason


def test_silence_is_failed_with_the_tail():
    out = classify_driver_case("[INFO] args = Namespace()\n", [], WorkerReply({}), S)
    assert out.status == "failed" and "no result row" in out.reason and "Namespace" in out.reason


FALLBACK = "UserWarning: CUPTI is not installed. Try 'pip install -U cupti-python'. Falling back to CUDA events for benchmarking."


def test_cupti_fallback_fails_the_row_unless_allowed():
    reply = WorkerReply({"warnings": [FALLBACK]})
    out = classify_driver_case("", [ROW], reply, S)
    assert out.status == "failed" and out.median_us is None and out.timer == "cuda_graph"
    assert "CUPTI is not installed" in out.reason and "--allow_cuda_events" in out.reason
    ok = classify_driver_case("", [ROW], reply, RunSettings(allow_cuda_events=True, cuda_graph=False))
    assert ok.status == "ok" and ok.timer == "cuda_events" and ok.median_us == pytest.approx(19.6)


def test_autotune_dropped_is_a_caveat_on_an_ok_row():
    out = classify_driver_case("", [ROW], WorkerReply({"autotune_dropped": True}), S)
    assert out.status == "ok" and "not autotuned" in out.reason


def test_python_case_outcomes():
    m = {"median_us": 12.0, "std_us": 0.5, "timer": "cupti", "note": ""}
    assert classify_python_case("", WorkerReply({"measurement": m}), S) == Outcome("ok", "", 12.0, 0.5, "cupti")
    u = classify_python_case("", WorkerReply({"unsupported": "torch._scaled_mm needs SM89+"}), S)
    assert u == Outcome("unsupported", "torch._scaled_mm needs SM89+")
    ev = dict(m, timer="cuda_events", note="CUPTI is not installed ... Falling back to CUDA events")
    f = classify_python_case("", WorkerReply({"measurement": ev}), S)
    assert f.status == "failed" and "CUPTI is not installed" in f.reason


# ---------------------------------------------------- real driver output captured on the H200
#: fixture -> (backend of the case, expected status, text the reason or number must show).
#: Files come from tests/fixtures/driver/capture.sh (see its README); skipped until captured.
CAPTURED = {
    "mm_bf16": ("cublaslt", "ok", 19.0),
    "bmm_fp8": ("cublas", "ok", 11.0),
    "mm_fp4": ("cutlass", "unsupported",
               "[INFO] cutlass backend does not support this configuration: BackendSupportedError: "
               "mm_fp4 does not support backend 'cutlass' with capability 90"),
    "mm_fp8": ("trtllm_low_latency", "unsupported", "RuntimeError: Artifact not found locally"),
    "moe_cutlass": ("cutlass", "unsupported",
                    "[WARNING] cutlass for routine cutlass_fused_moe is not supported on compute "
                    "capability 9.0. Skipping."),
    "moe_trtllm_fp8": ("trtllm", "unsupported", "not supported on compute capability 9.0"),
    "moe_trtllm_fp4": ("trtllm", "unsupported", "not supported on compute capability 9.0"),
    # single-case mode: the exception propagates (the worker would answer with its text)
    "moe_cutedsl": ("cute-dsl", "failed", "ImportError: cannot import name 'CuteDslMoEWrapper'"),
}


def _captured(name):
    log = os.path.join(FIXTURES, f"{name}.log")
    if not os.path.isfile(log):
        pytest.skip(f"tests/fixtures/driver/{name}.log not captured yet")
    with open(log, errors="replace") as f:
        return f.read(), read_driver_csv(os.path.join(FIXTURES, f"{name}.csv"))


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_classify_output_captured_from_the_real_driver(name):
    backend, status, expect = CAPTURED[name]
    text, rows = _captured(name)
    answer = {}
    if not rows and "Traceback" in text:  # what the worker answers for a propagated exception
        answer["exception"] = text.strip().splitlines()[-1]
    out = classify_driver_case(text, rows, WorkerReply(answer), S, backend)
    assert out.status == status, out.reason
    if status == "ok":
        assert out.timer == "cupti" and out.median_us == pytest.approx(expect, rel=0.15)
    else:
        assert expect in out.reason


def test_captured_probe_message_spanning_lines_is_quoted_whole():
    text, rows = _captured("mm_bf16")
    statements = driver.support_statements(text)
    cutile = next(s for s in statements if s.startswith("[INFO] cutile"))
    assert "No valid config found" in cutile and "'tileiras' compiler not found" in cutile
    assert any("No module named 'cutlass'" in s for s in statements)
    # the row for the case's own backend is picked, not the first row
    assert driver.pick_row(rows, "tinygemm")["backend"] == "tinygemm"


def test_captured_testlist_csv_rows_and_the_bad_shape_message():
    text, rows = _captured("testlist")
    assert [(r["case_tag"], r["backend"]) for r in rows] == [
        ("tl_1", "cudnn_autotune"), ("tl_1", "cublaslt_autotune"),
        ("tl_2", "cublas_autotune"), ("tl_2", "cudnn_autotune")]
    assert all(float(r["median_time"]) > 0 for r in rows)
    assert any(s.startswith("[INFO] tinygemm backend does not support this configuration: RuntimeError")
               for s in driver.support_statements(text))


# ---------------------------------------------------------------- the worker (stand-in driver)
def _req(tmp_path, case, settings=S):
    stem = tmp_path / case.case_id
    return {"job": "driver", "case_id": case.case_id, "argv": driver_argv(case, settings),
            "log_path": f"{stem}.log", "csv_path": f"{stem}.csv", "settings": {}}


def test_worker_survives_a_segfault_and_a_hang(tmp_path):
    pool = WorkerPool(FAKE_REPO, str(tmp_path / "worker.log"))
    try:
        ok = gemm_case(4096)
        r = pool.run(_req(tmp_path, ok), timeout=30)
        assert not r.lost and read_driver_csv(str(tmp_path / f"{ok.case_id}.csv"))
        crash = gemm_case(SEGFAULT)
        r = pool.run(_req(tmp_path, crash), timeout=30)
        assert r.lost == "worker exited with signal 11 (SIGSEGV)"
        # faulthandler wrote the Python stack into the case's own log
        assert "Segmentation fault" in (tmp_path / f"{crash.case_id}.log").read_text()
        hang = gemm_case(HANG)
        r = pool.run(_req(tmp_path, hang), timeout=2)
        assert r.lost.startswith("timed out after 2 s")
        r = pool.run(_req(tmp_path, gemm_case(4096, m=16)), timeout=30)
        assert not r.lost
        assert pool.starts == 3  # a fresh worker after each of the two losses
    finally:
        pool.stop(kill=True)


def test_worker_records_the_cupti_warning_in_every_case(tmp_path):
    pool = WorkerPool(FAKE_REPO, str(tmp_path / "worker.log"))
    try:
        for m in (1, 2):  # Python shows a warning once per process by default; we need it twice
            r = pool.run(_req(tmp_path, gemm_case(CUPTI_FALLBACK, m=m)), timeout=30)
            assert any("Falling back to CUDA events" in w for w in r.answer["warnings"])
    finally:
        pool.stop(kill=True)


def test_worker_env_disables_downloads_and_keeps_pythonpath(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/opt/fi-site")
    env = WorkerPool(FAKE_REPO, str(tmp_path / "w.log"))._env()
    assert env["FLASHINFER_NO_DOWNLOAD"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep) == [driver.SCRIPTS_DIR, "/opt/fi-site"]


def test_only_the_untuned_retry_decides_the_outcome():
    log = ("[INFO] cutile backend does not support autotune\n[ERROR] No backends passed validation. Exiting.\n"
           f"{driver.RETRY_MARKER}\n"
           "[INFO] cutile backend does not support this configuration: ValueError: No valid config found in search space.\n"
           "FileNotFoundError: 'tileiras' compiler not found\n"
           "[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({"autotune_dropped": True}), S, "cutile")
    assert out == Outcome("unsupported", "[INFO] cutile backend does not support this configuration: "
                          "ValueError: No valid config found in search space. "
                          "FileNotFoundError: 'tileiras' compiler not found")
