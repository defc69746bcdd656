"""On a GPU: percentiles, correctness checks (a corrupted output is caught as `incorrect`), eager
launch counts and the driver's own samples and --refcheck, through the real backends.

Run on the GPU machine (the `measurements` recipe of benchmarks/evidence/ does): the torch and
Triton tests need CUDA; the driver tests also the FlashInfer checkout at $FLASHINFER_REPO (default
.devbundle/flashinfer) and the flashinfer wheel.
"""

from __future__ import annotations

import dataclasses
import os
import statistics

import pytest

from benchmark_model_kernels.cases.build import build_cases, plan_from_shapes, with_modes
from benchmark_model_kernels.core.case_schema import Case, GemmShape, MoeShape
from benchmark_model_kernels.core.plan_schema import Routing
from benchmark_model_kernels.core.results_schema import RunSettings, load_results
from benchmark_model_kernels.kernels import torch_ops, triton_fp8_gemm, triton_ops
from benchmark_model_kernels.kernels.timing import bench
from benchmark_model_kernels.kernels.triton_moe import fused
from benchmark_model_kernels.run import runner
from benchmark_model_kernels.run.outcome import WorkerReply, classify_python_case, row_from_case
from helpers_runner import run_request

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Absolute: the driver test changes into the checkout's benchmarks/ before importing from it.
FLASHINFER_REPO = os.path.abspath(os.environ.get("FLASHINFER_REPO",
                                                 os.path.join(ROOT, ".devbundle", "flashinfer")))
SETTINGS = RunSettings(num_iters=20, dry_run_iters=3, autotune=False)


def _torch_gemm(routine="torch.linear", dtype="bf16", variant="", m=64, n=1024, k=512) -> Case:
    shape = GemmShape(m, n, k)
    return Case(case_id=f"gemm.g.m{m}.{dtype}.torch{'.' + variant if variant else ''}", kind="gemm", name="g",
                modules=(), layers=1, m=m, dtype=dtype, backend="torch", routine=routine, logical=shape,
                physical=shape, variant=variant)


def _torch_moe(m=16) -> Case:
    shape = MoeShape(m, 512, 256, 8, 8, 2)
    return Case(case_id=f"moe.e.m{m}.bf16.torch", kind="moe", name="e", modules=(), layers=1, m=m,
                dtype="bf16", backend="torch", routine="torch._grouped_mm", logical=shape, physical=shape,
                activation="Swiglu", routing=Routing(method="renormalize"))


def _row(case, measurement):
    m = dataclasses.asdict(measurement)
    m["samples_us"] = list(measurement.samples_us)
    out = classify_python_case("", WorkerReply({"measurement": m}), SETTINGS)
    return row_from_case(case, out)


CORRUPTIONS = {
    "scaled by 1.5": lambda out: out * 1.5,
    "one row negated": lambda out: torch.cat([-out[:1], out[1:]]),
    "zeros": lambda out: torch.zeros_like(out),
}


@pytest.mark.parametrize("case", [_torch_gemm(), _torch_gemm("torch._scaled_mm", "fp8", "per_token"),
                                  _torch_gemm("torch._scaled_mm", "fp8", "per_tensor"), _torch_moe()],
                         ids=lambda c: c.routine + c.variant)
def test_a_torch_row_passes_its_check_and_records_its_percentiles(case):
    row = _row(case, torch_ops.run_case(case, SETTINGS))
    assert row.status == "ok" and row.check == "passed", row.check_note
    assert row.rel_l2_err < 1e-2 and row.n_samples == SETTINGS.num_iters
    assert row.p10_us <= row.p50_us <= row.p90_us <= row.p99_us
    assert row.p50_us == pytest.approx(row.median_us)


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
@pytest.mark.parametrize("case", [_torch_gemm(), _torch_moe()], ids=lambda c: c.routine)
def test_a_corrupted_torch_output_is_caught_as_incorrect(case, corruption, monkeypatch):
    real_build = torch_ops.build

    def corrupted_build(c, device="cuda"):
        op = real_build(c, device)
        return dataclasses.replace(op, fn=lambda *args: CORRUPTIONS[corruption](op.fn(*args)))

    monkeypatch.setattr(torch_ops, "build", corrupted_build)
    row = _row(case, torch_ops.run_case(case, SETTINGS))
    assert row.status == "incorrect" and row.check == "failed", row.check_note
    assert "beyond tolerance" in row.reason and row.median_us is not None
    assert runner.exit_code([row]) == 1


def _triton_block_gemm() -> Case:
    shape = GemmShape(16, 512, 512)
    return Case(case_id="gemm.g.m16.fp8.triton.block128", kind="gemm", name="g", modules=(), layers=1, m=16,
                dtype="fp8", backend="triton", routine="triton.block_fp8_mm", logical=shape, physical=shape,
                variant="block128", scheme="block128")


def _triton_moe() -> Case:
    shape = MoeShape(16, 512, 256, 8, 16, 2)
    return Case(case_id="moe.e.m16.bf16.triton", kind="moe", name="e", modules=(), layers=1, m=16, dtype="bf16",
                backend="triton", routine="triton.fused_moe", logical=shape, physical=shape, activation="Swiglu",
                routing=Routing(method="renormalize"))


def _store_default_tiles(case: Case, settings: RunSettings) -> None:
    """The kernel's default tiles in the run's tile cache for a searched (MoE) row: the test checks
    outputs, not the search. A block-FP8 GEMM row runs vLLM's tiles and searches nothing."""
    from benchmark_model_kernels.kernels import triton_tuning
    from benchmark_model_kernels.kernels.triton_moe import tuning

    if case.kind == "gemm":
        return
    gpu, version = triton_ops._gpu_key()
    p = triton_ops.moe_problem(case)
    key = tuning.config_key(p, gpu, version)
    config = tuning.default_config(p.scheme, p.num_tokens, top_k=p.top_k, local_experts=p.local_experts)
    triton_tuning.store_config(triton_ops.cache_dir(settings), key, config,
                               lambda c: tuning.validate_config(c, p.scheme))


@pytest.mark.parametrize("make", [_triton_block_gemm, _triton_moe], ids=["block_fp8_mm", "fused_moe"])
def test_triton_rows_pass_and_a_corrupted_triton_output_is_incorrect(make, tmp_path, monkeypatch):
    settings = dataclasses.replace(SETTINGS, autotune_cache=str(tmp_path / "autotune_cache.json"))
    case = make()
    _store_default_tiles(case, settings)
    good = _row(case, triton_ops.run_case(case, settings))
    assert good.status == "ok" and good.check == "passed", good.check_note
    if case.kind == "gemm":  # no table for 512 x 512: vLLM's default config, no search, no cache
        assert "w8a8_triton_block_scaled_mm default config" in good.reason, good.reason
        assert good.reason.endswith(": 64,128,128,32,4,2"), good.reason
        assert not os.path.exists(triton_ops.cache_dir(settings))
    module, name = ((triton_fp8_gemm, "make_block_fp8_gemm") if case.kind == "gemm"
                    else (fused, "make_fused_moe"))
    real = getattr(module, name)

    def corrupted(*args, **kwargs):
        fn, fn_args = real(*args, **kwargs)
        return (lambda *a: fn(*a) * 1.5), fn_args

    monkeypatch.setattr(module, name, corrupted)
    bad = _row(case, triton_ops.run_case(case, settings))  # tiles from the cache now
    assert bad.status == "incorrect" and "rel L2" in bad.reason


def test_eager_timing_counts_the_launches_of_one_call():
    x = torch.randn(4096, device="cuda")

    def two_kernels(x):
        return x.mul(2.0).add(1.0)

    eager = bench(two_kernels, dataclasses.replace(SETTINGS, cuda_graph=False), input_args=(x,))
    graph = bench(two_kernels, SETTINGS, input_args=(x,))
    assert eager.launches_per_call == 2.0, eager.note
    assert graph.launches_per_call is None and len(eager.samples_us) == SETTINGS.num_iters
    assert statistics.median(eager.samples_us) == pytest.approx(eager.median_us)


def _driver_available() -> str:
    if not os.path.isfile(os.path.join(FLASHINFER_REPO, "benchmarks", "flashinfer_benchmark.py")):
        return f"no FlashInfer driver at {FLASHINFER_REPO} (set FLASHINFER_REPO)"
    try:
        import flashinfer  # noqa: F401
    except ImportError as e:
        return f"flashinfer wheel not importable: {e}"
    return ""


def _run(tmp_path, cases, settings):
    workdir = str(tmp_path / "w")
    request = run_request(cases, workdir, settings, repo=FLASHINFER_REPO, gpu=("gpu", (9, 0)))
    rc = runner.run_plan(request, cases, command=["test"], environment=lambda repo: {})
    return rc, {r["case_id"]: r for r in load_results(workdir)["rows"]}


def test_a_real_run_records_samples_checks_and_launches_for_driver_and_torch_rows(tmp_path):
    why = _driver_available()
    if why:
        pytest.skip(why)
    cc = torch.cuda.get_device_capability()
    cases = build_cases(plan_from_shapes([(1024, 512, "g")]), [8], ["bf16"], ["cudnn", "torch"], cc)
    cases = with_modes(cases, ["graph", "eager"])
    settings = dataclasses.replace(SETTINGS, autotune_cache=str(tmp_path / "autotune_cache.json"),
                                   modes=("graph", "eager"))
    rc, rows = _run(tmp_path, cases, settings)
    assert rc == 0, {k: r["reason"] for k, r in rows.items()}
    for case in cases:
        r = rows[case.case_id]
        assert r["status"] == "ok" and r["mode"] == case.mode, r["reason"]
        assert r["n_samples"] == settings.num_iters, r["spread_note"]  # the driver's own samples too
        assert r["p10_us"] <= r["p50_us"] <= r["p90_us"] <= r["p99_us"]
        assert r["check"] == "passed", r["check_note"]
        if case.mode == "eager":
            assert r["launches_per_call"] is not None and r["launches_per_call"] >= 1, r["reason"]
        else:
            assert r["launches_per_call"] is None
    driver = next(c for c in cases if c.backend == "cudnn" and c.mode == "graph")
    assert "--refcheck" in rows[driver.case_id]["check_note"]


def test_a_corrupted_driver_output_fails_the_drivers_refcheck_as_incorrect(tmp_path, monkeypatch):
    why = _driver_available()
    if why:
        pytest.skip(why)
    import sys

    import flashinfer

    from benchmark_model_kernels.run import worker
    from benchmark_model_kernels.run.argv import driver_argv
    from benchmark_model_kernels.run.outcome import classify_driver_case, read_driver_csv

    cc = torch.cuda.get_device_capability()
    case = build_cases(plan_from_shapes([(1024, 512, "g")]), [8], ["bf16"], ["cudnn"], cc)[0]
    real = flashinfer.mm_bf16
    monkeypatch.setattr(flashinfer, "mm_bf16", lambda *a, **k: -real(*a, **k))
    monkeypatch.syspath_prepend(os.path.join(FLASHINFER_REPO, "benchmarks"))
    monkeypatch.chdir(os.path.join(FLASHINFER_REPO, "benchmarks"))
    for name in [m for m in sys.modules if m == "flashinfer_benchmark" or m.startswith("routines")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(worker, "_driver_modules", None)
    req = {"job": "driver", "case_id": case.case_id, "log_path": str(tmp_path / "c.log"),
           "csv_path": str(tmp_path / "c.csv"), "argv": driver_argv(case, SETTINGS)}
    answer = worker.run_request(req)
    log = open(req["log_path"]).read()
    out = classify_driver_case(log, read_driver_csv(req["csv_path"]), WorkerReply(answer), SETTINGS,
                               case.backend, case.routine)
    assert out.status == "incorrect" and "cos_sim" in out.reason, out.reason
    assert runner.exit_code([row_from_case(case, out)]) == 1


def test_the_tactic_cap_cuts_flashinfers_own_cudnn_tactic_search():
    """--autotune_tactics on FlashInfer's real autotuner: a cuDNN mm_bf16 tuned inside the
    worker's cap profiles only the first N of the plans cuDNN offers, the cut is reported, the
    result is still right, and the autotuner's filter is put back after."""
    flashinfer = pytest.importorskip("flashinfer")
    from flashinfer.autotuner import AutoTuner

    from benchmark_model_kernels.run import worker

    a = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    tuner = AutoTuner.get()
    before = tuner._blocklist
    out: dict = {}
    with worker._tactic_cap_scope(2, out), flashinfer.autotune(True):
        got = flashinfer.mm_bf16(a, b, backend="cudnn")
    assert tuner._blocklist is before
    cut = [c for c in out.get("tactic_cap", []) if c[1].startswith("Cudnn")]
    assert cut, out  # cuDNN offered more than 2 plans for this shape
    assert all(kept == 2 and offered > 2 for _op, _runner, kept, offered in cut), cut
    ref = a.float() @ b.float()
    assert torch.linalg.norm(got.float() - ref) / torch.linalg.norm(ref) < 0.01
