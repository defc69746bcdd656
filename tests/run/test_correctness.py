"""Tolerance decisions of the correctness check (CPU): what passes, what is `incorrect`, and why."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.cases.build import with_modes
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.kernels import torch_ops
from benchmark_model_kernels.kernels.correctness import (
    DRIVER_REFCHECK,
    TOLERANCES,
    Errors,
    check_output,
    decide,
    errors,
    tolerance,
)
from benchmark_model_kernels.run.outcome import Outcome, WorkerReply, classify_driver_case, driver_check, with_check
from helpers_runner import gemm_case, moe_case

torch = pytest.importorskip("torch")

BF16_GEMM = tolerance("gemm", "bf16")


def _gemm(m=64, n=512, k=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = (torch.randn(n, k, generator=g) * k ** -0.5).to(torch.bfloat16)
    return x, w, x.float() @ w.float().T


def test_a_bf16_rounded_output_passes_with_its_numbers():
    x, w, ref = _gemm()
    out = ref.to(torch.bfloat16)  # exactly one BF16 rounding of the exact product
    r = check_output(out, ref, "gemm", "bf16", "FP32 x @ w.T")
    assert r.passed and r.check == "passed"
    assert 0 < r.rel_l2_err < 5e-3 and r.max_abs_err > 0 and r.argmax_match > 0.9
    assert "rel L2" in r.note and "FP32 x @ w.T" in r.note


@pytest.mark.parametrize("corrupt, broken", [
    (lambda o: o * 1.5, "rel L2"),                         # a wrong scale
    (lambda o: o.flip(1), "rel L2"),                        # columns permuted
    (lambda o: torch.zeros_like(o), "rel L2"),              # nothing written
    (lambda o: o.index_fill(0, torch.tensor([3]), 50.0), "max abs"),  # one row of garbage
])
def test_a_corrupted_output_fails_naming_what_broke(corrupt, broken):
    _, _, ref = _gemm()
    r = check_output(corrupt(ref.to(torch.bfloat16)), ref, "gemm", "bf16", "ref")
    assert r.check == "failed" and broken in r.note and r.note.startswith("beyond tolerance")


def test_nan_output_fails_without_numbers():
    _, _, ref = _gemm()
    out = ref.clone()
    out[0, 0] = float("nan")
    r = check_output(out, ref, "gemm", "bf16", "ref")
    assert r.check == "failed" and "NaN or infinite" in r.note and r.rel_l2_err is None


def test_small_noise_in_one_row_passes_rel_l2_but_a_flipped_argmax_beyond_a_tie_fails():
    ref = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 50 + [[0.0, 1.0, 0.0, 0.0]] * 50)
    out = ref.clone()
    out[0] = torch.tensor([0.99, 1.0, 0.0, 0.0])  # row 0 now peaks at column 1; gap 1.0 is no tie
    err = errors(out, ref, BF16_GEMM.argmax_tie)
    assert err.argmax_match == pytest.approx(0.99) and err.argmax_unexplained == 1
    r = decide(err, tolerance("gemm", "bf16"), gemm=True, reference="ref")
    assert r.check == "failed" and "argmax differs beyond a near-tie in 1 of 100 rows" in r.note


def test_an_argmax_flip_between_near_tied_columns_is_allowed():
    ref = torch.tensor([[1.0, 0.999, 0.0]] * 10)
    out = ref.clone()
    out[0] = torch.tensor([0.998, 0.999, 0.0])
    err = errors(out, ref, BF16_GEMM.argmax_tie)
    assert err.argmax_match == pytest.approx(0.9) and err.argmax_unexplained == 0


def test_moe_rows_have_no_argmax_and_fp8_moe_allows_the_requantization_error():
    ref = torch.randn(32, 256, generator=torch.Generator().manual_seed(1))
    noise = torch.randn(32, 256, generator=torch.Generator().manual_seed(2))
    out = ref + 0.03 * ref.abs().mean() * noise  # ~3% relative: FP8 e4m3 rounding between GEMMs
    assert check_output(out, ref, "moe", "fp8", "ref").passed
    assert check_output(out, ref, "moe", "bf16", "ref").check == "failed"
    assert check_output(out, ref, "moe", "fp8", "ref").argmax_match is None


def test_decide_on_the_boundary():
    tol = TOLERANCES[("gemm", "fp8")]
    at = Errors(max_abs_err=tol.max_abs, ref_max_abs=1.0, rel_l2_err=tol.rel_l2, rows=4)
    assert decide(at, tol, True, "ref").passed
    over = Errors(max_abs_err=tol.max_abs, ref_max_abs=1.0, rel_l2_err=tol.rel_l2 * 1.01, rows=4)
    assert not decide(over, tol, True, "ref").passed


def test_every_recipe_the_project_times_has_a_tolerance():
    for kind in ("gemm", "moe"):
        for dtype in ("bf16", "fp8"):
            assert tolerance(kind, dtype).rel_l2 > 0
    with pytest.raises(KeyError, match="nvfp4"):
        tolerance("gemm", "nvfp4")


def test_the_torch_references_match_their_ops_on_the_cpu():
    """The FP32 references of the torch backend, against its own ops run on the CPU."""
    case = gemm_case(512, k=256, backend="torch", m=16)
    case = case.__class__(**{**case.__dict__, "routine": "torch.linear", "driver_args": ()})
    op = torch_ops.build(case, "cpu")
    r = check_output(op.fn(*op.args), torch_ops.reference(case, op), "gemm", "bf16", "ref")
    assert r.passed, r.note
    moe = moe_case(128, m=8)
    moe = moe.__class__(**{**moe.__dict__, "backend": "torch", "routine": "torch._grouped_mm",
                           "driver_args": (), "activation": "Swiglu"})
    mop = torch_ops.build(moe, "cpu")
    assert check_output(mop.fn(*mop.args), torch_ops.reference(moe, mop), "moe", "bf16", "ref").passed


def test_an_incorrect_check_makes_the_row_incorrect_with_its_numbers():
    check = {"check": "failed", "check_note": "beyond tolerance: rel L2 0.5 > 0.01", "rel_l2_err": 0.5,
             "max_abs_err": 3.0, "argmax_match": 0.1}
    out = with_check(Outcome("ok", "tiles from the cache", 12.0, 0.5, "cupti"), check)
    assert out.status == "incorrect" and "rel L2 0.5 > 0.01" in out.reason and out.median_us == 12.0
    assert with_check(Outcome("ok", "", 1.0), {"check": "passed", "check_note": "x"}).status == "ok"


def test_driver_rows_report_the_drivers_refcheck_or_why_there_is_none():
    assert driver_check("mm_bf16", RunSettings())["check"] == "passed"
    assert "no reference check" in driver_check("cutlass_fused_moe", RunSettings())["check_note"]
    assert driver_check("mm_bf16", RunSettings(check=False)) == {"check": "", "check_note": "not checked (--no_check)"}
    assert set(DRIVER_REFCHECK) >= {"mm_bf16", "bmm_fp8"}


def test_a_driver_refcheck_mismatch_is_incorrect_quoting_the_cosine():
    exc = "AssertionError: [ERROR] Backend cudnn output mismatch with cos_sim=0.42"
    log = "[ERROR] Output tensor mismatch from backend cudnn with cos_sim=0.42\n[ERROR] Error: " + exc
    out = classify_driver_case(log, [], WorkerReply({"exception": exc}), RunSettings(), "cudnn", "mm_bf16")
    assert out.status == "incorrect" and "cos_sim=0.42" in out.reason
    assert out.check["check"] == "failed"


def test_eager_twins_are_checked_like_their_graph_rows():
    graph, eager = with_modes([gemm_case(4096)], ["graph", "eager"])
    assert (graph.routine, graph.dtype) == (eager.routine, eager.dtype)


def _torch_case(routine, dtype, variant="", moe=False):
    from benchmark_model_kernels.core.case_schema import Case, GemmShape, MoeShape
    from benchmark_model_kernels.core.plan_schema import Routing

    if moe:
        shape = MoeShape(16, 128, 64, 4, 8, 2)
        return Case(case_id="moe.e.m16.torch", kind="moe", name="e", modules=(), layers=1, m=16, dtype=dtype,
                    backend="torch", routine=routine, logical=shape, physical=shape, activation="Swiglu",
                    routing=Routing(method="renormalize"))
    shape = GemmShape(16, 256, 128)
    return Case(case_id="gemm.g.m16.torch", kind="gemm", name="g", modules=(), layers=1, m=16, dtype=dtype,
                backend="torch", routine=routine, logical=shape, physical=shape, variant=variant)


@pytest.mark.parametrize("variant", ["per_tensor", "per_token"])
def test_the_fp8_gemm_reference_is_the_bf16_product_up_to_quantization(variant):
    bf16 = torch_ops.build(_torch_case("torch.linear", "bf16"), "cpu")
    fp8_case = _torch_case("torch._scaled_mm", "fp8", variant)
    fp8 = torch_ops.build(fp8_case, "cpu")  # same seed: the quantized x and w of the BF16 op
    ref = torch_ops.reference(fp8_case, fp8)
    assert errors(ref, torch_ops.reference(_torch_case("torch.linear", "bf16"), bf16)).rel_l2_err < 0.08


def test_the_fp8_moe_reference_dequantizes_the_same_experts():
    bf16_case = _torch_case("torch._grouped_mm", "bf16", moe=True)
    fp8_case = _torch_case("torch._scaled_grouped_mm", "fp8", moe=True)
    ref16 = torch_ops.reference(bf16_case, torch_ops.build(bf16_case, "cpu"))
    ref8 = torch_ops.reference(fp8_case, torch_ops.build(fp8_case, "cpu"))
    assert ref8.shape == ref16.shape == (16, 128)
    assert errors(ref8, ref16).rel_l2_err < 0.1
