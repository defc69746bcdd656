"""analysis.py: best backend and baseline per module, speed-ups, the per-step roll-up, crossovers,
warnings, roofline peaks and the summary's ranking, checked on the hand-made tiny_mixed.json (the
expected numbers are worked out by hand from it in the comments next to them) and one real run."""

from __future__ import annotations

import pytest
from helpers_report import H200_QWEN, entry, fixture

from benchmark_model_kernels.core.plan_schema import Plan
from benchmark_model_kernels.core.results_schema import load_results, rows_of
from benchmark_model_kernels.report import analysis, recipe_totals
from benchmark_model_kernels.report.analysis import (
    ATTN,
    BASELINE,
    KERNEL,
    LM_HEAD,
    MLP,
    MOE,
    QUANT,
    ROUTER,
    VLLM,
    Analysis,
)
from benchmark_model_kernels.report.roofline_peaks import roofline_peaks

# --------------------------------------------------------------------------- cells


def test_best_backend_and_baseline(tiny):
    qkv, down = entry(tiny, "qkv_proj"), entry(tiny, "down_proj")
    # BF16 M=1: torch 10, cudnn 8 -> best cudnn; the baseline stays torch (what vLLM runs).
    best = tiny.cell(qkv, 1, "bf16", KERNEL)
    assert (best.us, best.backend) == (8.0, "cudnn")
    base = tiny.baseline(qkv, 1)
    assert (base.us, base.backend) == (10.0, "torch")
    # down_proj M=1: torch FAILED -> baseline falls back to the best BF16 (cudnn 6).
    base = tiny.baseline(down, 1)
    assert (base.us, base.backend) == (6.0, "cudnn")


def test_with_quant_basis_never_borrows_the_kernel_only_number(tiny):
    qkv = entry(tiny, "qkv_proj")
    # FP8 M=1: cudnn kernel 5 / +quant 7; cublas kernel 4 / +quant FAILED.
    # +quant basis best: cudnn 7 -- NOT cublas 4 (its quantized-input cost is unknown).
    c = tiny.cell(qkv, 1, "fp8.per_tensor", QUANT)
    assert (c.us, c.backend, c.row.with_quant) == (7.0, "cudnn", True)
    # Kernel-only best: cublas 4.
    k = tiny.cell(qkv, 1, "fp8.per_tensor", KERNEL)
    assert (k.us, k.backend, k.row.with_quant) == (4.0, "cublas", False)


def test_speedups(tiny):
    qkv, down = entry(tiny, "qkv_proj"), entry(tiny, "down_proj")
    assert analysis.speedup(tiny.baseline(qkv, 1), tiny.cell(qkv, 1, "fp8.per_tensor", QUANT)) == pytest.approx(10 / 7)
    assert analysis.speedup(tiny.baseline(qkv, 1), tiny.cell(qkv, 1, "fp8.per_tensor", KERNEL)) == pytest.approx(2.5)
    # baseline cudnn 6 (torch failed) vs FP8 +quant 7: a slow-down, reported as such.
    assert analysis.speedup(tiny.baseline(down, 1), tiny.cell(down, 1, "fp8.per_tensor", QUANT)) == pytest.approx(6 / 7)
    # no number on either side -> no speed-up (never 0 or inf)
    assert analysis.speedup(tiny.baseline(qkv, 1), tiny.cell(qkv, 1, "nvfp4")) is None


def test_missing_cells_say_why(tiny):
    qkv, lm, experts = entry(tiny, "qkv_proj"), entry(tiny, "lm_head"), entry(tiny, "experts")
    c = tiny.cell(qkv, 1, "nvfp4")
    assert (c.us, c.status) == (None, "unsupported") and "SM100" in c.reason
    assert tiny.cell(lm, 1, "fp8.per_tensor").status == "not measured"
    assert tiny.cell(experts, 1, "bf16").status == "unsupported"
    assert tiny.cell(experts, 16, "bf16").us == 50.0


# --------------------------------------------------------------------------- the plan


def test_the_plan_is_read_through_its_schema(tiny):
    assert isinstance(tiny.plan, Plan) and tiny.label == "tiny-moe TP=1 EP=1"
    assert [e.name for e in tiny.entries][:len(tiny.plan.gemms)] == [g.name for g in tiny.plan.gemms]
    assert Analysis(dict(fixture("tiny_mixed"), plan=None), "runs/nks").label == "nks"  # no plan: the workdir


# --------------------------------------------------------------------------- roll-up


def test_rollup_complete_and_split_by_kind(tiny):
    # M=16 BF16 best: qkv 12*2 + down 20*2 + lm_head 40*1 + router 2*2 + experts 50*2 = 208
    r = tiny.rollup("bf16", 16)
    assert r.complete and r.total_us == pytest.approx(208.0)
    assert r.by_kind == pytest.approx({ATTN: 24.0, MLP: 40.0, LM_HEAD: 40.0, ROUTER: 4.0, MOE: 100.0})


def test_rollup_incomplete_is_a_partial_sum_never_zero_filled(tiny):
    # M=1 BF16 best: qkv 8*2 + down 6*2 + lm_head 30 + router 2*2 = 62; experts unsupported -> missing
    r = tiny.rollup("bf16", 1)
    assert not r.complete and r.missing == ("experts",) and r.n_modules == 5
    assert r.total_us == pytest.approx(62.0)
    # baseline M=1: qkv torch 10*2 + down cudnn 6*2 (torch failed) + 30 + 4 = 66
    assert tiny.rollup(BASELINE, 1).total_us == pytest.approx(66.0)
    # FP8 +quant M=1: qkv 7*2 + down 7*2 = 28, plus lm_head 30 and router 2*2 at their BF16 baseline
    # time (vLLM keeps them unquantized) = 62; experts were not measured in FP8 -> missing
    f = tiny.rollup("fp8.per_tensor", 1, QUANT)
    assert f.total_us == pytest.approx(62.0)
    assert set(f.missing) == {"experts"}
    assert f.by_kind["lm_head"] == pytest.approx(30.0) and f.by_kind["router"] == pytest.approx(4.0)
    # FP8 kernel-only M=16: qkv 9*2 + down 13*2 = 44, + lm_head 40 + router 2*2 (BF16) = 88
    assert tiny.rollup("fp8.per_tensor", 16, KERNEL).total_us == pytest.approx(88.0)


def test_rollup_is_computed_once_per_recipe_basis_and_m(tiny):
    assert tiny.rollup("fp8.per_tensor", 16, KERNEL) is tiny.rollup("fp8.per_tensor", 16, KERNEL)
    assert tiny.rollup("fp8.per_tensor", 16, KERNEL) is not tiny.rollup("fp8.per_tensor", 16, QUANT)


# --------------------------------------------------------------------------- crossovers


def test_crossovers_from_fixture(tiny):
    qkv, down, lm = entry(tiny, "qkv_proj"), entry(tiny, "down_proj"), entry(tiny, "lm_head")
    assert tiny.crossover(qkv, "fp8.per_tensor", QUANT).text() == "M=1"
    # down_proj +quant: 7 vs baseline 6 at M=1 (loses), 15 vs 20 at M=16 (wins)
    x = tiny.crossover(down, "fp8.per_tensor", QUANT)
    assert (x.first_win, x.wins, x.compared) == (16, (16,), (1, 16))
    # kernel only: 5 vs 6 at M=1 already wins
    assert tiny.crossover(down, "fp8.per_tensor", KERNEL).first_win == 1
    assert tiny.crossover(lm, "fp8.per_tensor").text() == "no data"
    assert tiny.crossover(qkv, "nvfp4").text() == "no data"


# --------------------------------------------------------------------------- warnings and peaks


def test_version_mismatch_is_warned_even_when_the_environment_did_not():
    res = fixture("tiny_mixed")
    env = dict(res["environment"], warnings=[],
               versions={"flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.7.4"})
    warns = Analysis(dict(res, environment=env)).warnings()
    assert any("0.6.17" in w and "0.7.4" in w for w in warns)
    assert not any("FlashInfer wheel" in w for w in Analysis(res).warnings())  # same release: quiet


def test_the_version_warning_is_the_environments_own_and_never_repeated():
    from benchmark_model_kernels.doctor.environment import version_warnings

    res = fixture("tiny_mixed")
    versions = {"flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.7.4"}
    recorded = version_warnings(versions, "/src/flashinfer")  # what the run itself records
    run = dict(res, command=[*res["command"], "--flashinfer_repo", "/src/flashinfer"])
    quiet = dict(run, environment=dict(res["environment"], warnings=[], versions=versions))
    assert Analysis(quiet).warnings()[:1] == recorded  # the same rule and text as doctor/environment.py
    loud = dict(run, environment=dict(res["environment"], warnings=recorded, versions=versions))
    assert sum("FlashInfer wheel" in w for w in Analysis(loud).warnings()) == 1


def test_roofline_uses_the_runs_own_peaks():
    a = Analysis(fixture("llama8b_like_tp1"), "w")
    peaks, bw, note = roofline_peaks(a)
    assert peaks["bf16"] == pytest.approx(989.0, rel=0.01) and peaks["fp8"] == pytest.approx(1979.0, rel=0.01)
    assert bw == pytest.approx(4.8, rel=0.01) and "the run used" in note


def test_roofline_peaks_fall_back_to_the_datasheet_table():
    res = fixture("llama8b_like_tp1")
    stripped = [{k: v for k, v in r.items() if not k.startswith("pct_peak")} for r in res["rows"]]
    peaks, bw, note = roofline_peaks(Analysis(dict(res, rows=stripped)))
    from benchmark_model_kernels.run import roofline

    h200 = roofline.find_peak("NVIDIA H200", (9, 0))
    assert peaks["bf16"] == h200.bf16_tflops and peaks["fp8"] == h200.fp8_tflops
    assert bw == h200.hbm_tb_per_sec and "datasheet" in note
    assert "nvfp4" not in peaks  # H200 has no FP4 tensor cores: no ceiling, never a made-up one
    unknown = dict(res, rows=stripped, environment={"gpu": {"name": "Mystery GPU 9000"}})
    peaks, bw, note = roofline_peaks(Analysis(unknown))
    assert (peaks, bw) == ({}, None) and note.startswith("no ceilings drawn")


def test_rows_of_fixture_round_trip():
    # fixtures stay loadable through the results schema (Row defaults fill the omitted fields)
    for name in ("tiny_mixed", "llama8b_like_tp1", "all_failed", "empty"):
        rows = rows_of(fixture(name))
        assert all(r.status in ("ok", "unsupported", "failed") for r in rows)


# --------------------------------------------------------------------------- summary


def test_summary_ranks_only_complete_totals_and_prefers_bf16_on_a_tie(tiny):
    # The BF16 vLLM default misses experts (vLLM's Triton MoE: no triton row) and down_proj at M=1
    # (its torch row failed), so the speed-ups divide the BF16 baseline.
    assert recipe_totals.summary_reference(tiny) == (BASELINE, QUANT, "BF16 baseline (torch where it ran)")
    v1, v16 = recipe_totals.summary_verdicts(tiny, QUANT)
    # M=1: experts have no number in any recipe -> no total is complete, nothing is ranked
    assert v1.m == 1 and v1.fastest == "" and v1.speedup is None and len(v1.not_ranked) == 2
    # M=16: BF16 best 208 == baseline 208 (see the roll-up test); FP8 per-tensor misses experts
    assert dict(v16.totals) == {"bf16": pytest.approx(208.0), "fp8.per_tensor": None}
    assert v16.fastest == "bf16" and v16.speedup == pytest.approx(1.0)
    assert v16.not_ranked == ("fp8.per_tensor",)
    # kernel-only is not a candidate (vLLM pays the quantization); NVFP4 has no number: no line
    assert [t for *_, t in recipe_totals.summary_candidates(tiny, QUANT)] == [
        "BF16 best measured", "FP8 per-tensor (checkpoint scheme) best measured"]
    # on the vLLM-default basis nothing is complete: the FP8 GEMMs run vLLM's own CUTLASS kernel
    assert all(v.fastest == "" for v in recipe_totals.summary_verdicts(tiny, VLLM))


def test_summary_answers_fp8_vs_bf16_for_the_real_h200_qwen_run():
    # examples/h200: real H200 rows. FP8 per-tensor has no MoE number there (the torch MoE row
    # takes per-token scales), so its total is incomplete and never ranked: the schemes are not
    # mixed into one "FP8" total. M=1 BF16 best 5,530 us < FP8 per-token 6,573 us; from M=8 on
    # FP8 per-token is fastest.
    a = Analysis(load_results(H200_QWEN), H200_QWEN)
    verdicts = {v.m: v for v in recipe_totals.summary_verdicts(a, QUANT)}
    assert verdicts[1].fastest == "bf16"
    for m in (8, 64, 512):
        v = verdicts[m]
        assert v.fastest == "fp8.per_token" and "fp8.per_tensor" in v.not_ranked
        assert v.speedup == pytest.approx(a.rollup(BASELINE, m).total_us / a.rollup("fp8.per_token", m).total_us)
        assert v.speedup > 1.1
