"""Each FP8 scheme is its own recipe; the report leads with what vLLM runs. Checked on a hand-made
H200 run (the expected numbers are worked out by hand next to them): scheme-split cells and
totals, the vLLM-default total complete and incomplete with its reason, the row marks, the torch
MoE label and the expert-parallel token text."""

from __future__ import annotations

import pytest
from helpers_report import entry, gemm_row, moe_row, results_of

from benchmark_model_kernels.core.results_schema import row_from_dict
from benchmark_model_kernels.report import markdown, md_module_tables
from benchmark_model_kernels.report.analysis import (
    BASELINE,
    QUANT,
    ROUTER,
    VLLM,
    Analysis,
    backend_label,
    recipe_of,
)
from benchmark_model_kernels.report.recipe_totals import summary_reference, summary_verdicts


def _rows() -> list[dict]:
    """qkv_proj, router (x2 each) and experts (x2) at M=1 and M=8 on an H200. No row records
    scheme or vllm_default: both come from today's rules (test_row_facts.py)."""
    rows = []
    for m, (torch_us, cudnn_us, triton_us, composite_us) in {1: (10, 8, 30, 90), 8: (12, 13, 40, 100)}.items():
        rows += [gemm_row("qkv_proj", m, "bf16", "torch", "torch.linear", torch_us),
                 gemm_row("qkv_proj", m, "bf16", "cudnn", "mm_bf16", cudnn_us),
                 gemm_row("router", m, "bf16", "torch", "torch.linear", 2.0),
                 moe_row(m, "bf16", "triton", "triton.fused_moe", triton_us),
                 moe_row(m, "bf16", "torch", "torch._grouped_mm", composite_us),
                 moe_row(m, "fp8", "cutlass", "cutlass_fused_moe", None, status="unsupported",
                         reason="cutlass_fused_moe needs SM100")]
    for m, (pt, tok, moe_pt, moe_tok, composite) in {1: (6, 3, 20, None, 50), 8: (8, 5, 25, 22, 60)}.items():
        for q in (False, True):  # the +quant twin costs 1 us more
            rows += [gemm_row("qkv_proj", m, "fp8", "cudnn", "bmm_fp8", pt + q, with_quant=q),
                     gemm_row("qkv_proj", m, "fp8", "torch", "torch._scaled_mm", tok + q, "per_token",
                              with_quant=q),
                     moe_row(m, "fp8", "triton", "triton.fused_moe", moe_pt + q, "per_tensor", with_quant=q),
                     moe_row(m, "fp8", "triton", "triton.fused_moe", moe_tok and moe_tok + q, "per_token",
                             with_quant=q, **({} if moe_tok else {"reason": "boom"})),
                     moe_row(m, "fp8", "torch", "torch._scaled_grouped_mm", composite + q, with_quant=q)]
    return rows


#: The plan's checkpoint: per-tensor FP8 with static activation scales, whose MoE vLLM runs on
#: FlashInfer's SM90 CUTLASS kernel.
STATIC = dict(name="hand-made", source="test", model_type="t", architecture="T", fp8_activation_scales="static")


@pytest.fixture(scope="module")
def run() -> Analysis:
    return Analysis(results_of(_rows(), model=STATIC), "hand-made")


# --------------------------------------------------------------------------- scheme split


def test_rows_of_two_schemes_never_share_a_cell(run):
    qkv, experts = entry(run, "qkv_proj"), entry(run, "experts")
    assert run.recipes == ["bf16", "fp8.per_tensor", "fp8.per_token"]
    # M=1 qkv: per-token torch +quant 4 us is faster than per-tensor cudnn +quant 7 us, yet the
    # per-tensor cell stays 7: a faster row of another scheme never stands in.
    assert (run.cell(qkv, 1, "fp8.per_tensor").us, run.cell(qkv, 1, "fp8.per_tensor").backend) == (7.0, "cudnn")
    assert run.cell(qkv, 1, "fp8.per_token").backend == "torch/per_token"
    for e in run.entries:
        for m in run.ms:
            for d in run.recipes:
                assert {recipe_of(r) for r in run.rows_for(e, m, d)} <= {d}
    # the torch MoE composite takes per-token scales: it is in the per-token cell only
    assert run.cell(experts, 1, "fp8.per_token").backend == "torch composite"
    assert run.cell(experts, 1, "fp8.per_tensor").backend == "triton/per_tensor"


def test_totals_are_per_scheme_and_bf16_kept_modules_count_under_every_scheme(run):
    # FP8 per-tensor +quant M=1: qkv 7*2 + router 2*2 (BF16, kept by vLLM) + experts 21*2 = 60
    assert run.rollup("fp8.per_tensor", 1).total_us == pytest.approx(60.0)
    # FP8 per-token +quant M=1: qkv 4*2 + router 4 + experts (triton failed) composite 51*2 = 114
    assert run.rollup("fp8.per_token", 1).total_us == pytest.approx(114.0)
    for d in ("fp8.per_tensor", "fp8.per_token"):
        for basis in (QUANT, VLLM):
            r = run.rollup(d, 8, basis)
            assert r.kept == ("router",) and r.by_kind[ROUTER] == pytest.approx(4.0)


def test_module_tables_list_each_scheme_separately(run):
    text = "\n".join(markdown.workdir_section(run, []))
    for title in ("### FP8 per-tensor (checkpoint scheme), kernel + activation quantization",
                  "### FP8 per-token, kernel + activation quantization",
                  "### FP8 per-token, kernel only"):
        assert title in text
    per_tensor = text.split("### FP8 per-tensor (checkpoint scheme), kernel + activation")[1].split("###")[0]
    assert "7.00 cudnn (1.43x)" in per_tensor and "torch/per_token" not in per_tensor
    assert "| FP8 per-token best +quant | 114 (" in text  # the roll-up has one line per scheme


# --------------------------------------------------------------------------- vLLM default


def test_bf16_vllm_default_is_complete_and_is_the_reference(run):
    # torch F.linear (same) for the GEMMs, Triton fused_moe (design) for MoE on SM90:
    # M=1: qkv 10*2 + router 2*2 + experts 30*2 = 84; M=8: 12*2 + 4 + 40*2 = 108
    assert [run.rollup("bf16", m, VLLM).total_us for m in (1, 8)] == [pytest.approx(84.0), pytest.approx(108.0)]
    assert run.rollup("bf16", 1, VLLM).complete
    assert summary_reference(run) == ("bf16", VLLM, "BF16 vLLM default")
    # best measured: M=1 FP8 per-tensor 60 (84/60 = 1.40x); M=8 per-token 6*2 + 4 + 23*2 = 62
    best = {v.m: v for v in summary_verdicts(run, QUANT)}
    assert (best[1].fastest, best[1].speedup) == ("fp8.per_tensor", pytest.approx(1.4))
    assert (best[8].fastest, best[8].speedup) == ("fp8.per_token", pytest.approx(108 / 62))
    # on the vLLM-default basis only BF16 is complete
    assert [v.fastest for v in summary_verdicts(run, VLLM)] == ["bf16", "bf16"]


def test_incomplete_vllm_default_says_which_kernel_is_not_timed_and_why(run):
    tensor = run.rollup("fp8.per_tensor", 1, VLLM)
    assert tensor.missing == ("qkv_proj", "experts") and tensor.no_number
    why = dict(zip(tensor.missing, map(str, tensor.why_missing), strict=True))
    # the dispatch table's own `missing` text for the dense GEMM...
    assert why["qkv_proj"].startswith("run vLLM CUTLASS cutlass_scaled_mm (static per-tensor activations), not "
                                      "timed here: vLLM's own CUTLASS")
    # ...and the default row's reason when one exists but has no number
    assert "FlashInfer CUTLASS fused MoE" in why["experts"] and "cutlass_fused_moe needs SM100" in why["experts"]
    # per-token: vLLM runs its own CUTLASS grouped GEMM, which no row times; the Triton fallback is
    # named as the closest timed row where it has a number (it failed at M=1)
    token1, token8 = run.rollup("fp8.per_token", 1, VLLM), run.rollup("fp8.per_token", 8, VLLM)
    assert token1.missing == token8.missing == ("qkv_proj", "experts")
    assert "closest timed" not in str(token1.why_missing[1]) and token1.why_missing[1].closest_us is None
    assert str(token8.why_missing[1]).startswith("run vLLM CUTLASS grouped GEMM (CutlassExpertsFp8), not timed here")
    assert str(token8.why_missing[1]).endswith("; closest timed: triton/per_token 23.0 us [fallback]")
    assert str(token8.why_missing[0]).endswith("; closest timed: torch/per_token 6.00 us [fallback]")
    # the closest row is data, not only words: the Summary groups it per reason without parsing
    gap = token8.why_missing[1]
    assert (gap.closest_label, gap.closest_us) == ("triton/per_token [fallback]", 23.0)
    text = "\n".join(markdown.summary_lines(run))
    assert ("- **FP8 per-tensor (checkpoint scheme) vLLM default** is incomplete: dense GEMMs (qkv_proj) "
            "run vLLM CUTLASS cutlass_scaled_mm (static per-tensor activations), not timed here: vLLM's own "
            "CUTLASS kernel") in text
    assert ("MoE layers (experts) run vLLM CUTLASS grouped GEMM (CutlassExpertsFp8), not timed here: "
            "vLLM's own CUTLASS grouped GEMM") in text
    # one clause per reason, the closest timed row's number where it has one (not at M=1)
    assert "closest timed: triton/per_token [fallback] (experts 23.0 us at M=8)" in text


def test_a_plan_without_per_tensor_activation_scales_has_no_per_tensor_default():
    a = Analysis(results_of(_rows()), "old plan")
    why = a.rollup("fp8.per_tensor", 1, VLLM).why_missing
    assert all("the plan predates the record of whether per-tensor activation scales are static or "
               "dynamic" in str(w) for w in why)


def test_summary_table_leads_with_vllm_default_and_best_measured_per_recipe(run):
    lines = markdown.summary_lines(run)
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| recipe | M=1 | M=8 |"
    assert [row.split(" | ")[0] for row in table[1:]] == [
        "| BF16 vLLM default", "| BF16 best measured",
        "| FP8 per-tensor (checkpoint scheme) vLLM default", "| FP8 per-tensor (checkpoint scheme) best measured",
        "| FP8 per-token vLLM default", "| FP8 per-token best measured",
        # only BF16's vLLM-default total is complete: that line compares nothing, so it is not bold
        "| fastest, vLLM default", "| **fastest, best measured**"]
    assert "| fastest, vLLM default | BF16 (only complete total) | BF16 (only complete total) |" in table
    assert "| BF16 vLLM default | 84.0 | 108 |" in table
    assert "| FP8 per-tensor (checkpoint scheme) best measured | 60.0 (1.40x) | 74.0 (1.46x) |" in table
    # these rows recorded no p10/p90: the verdict says it is by medians
    medians = "by medians only: no p10/p90 recorded"
    assert (f"| **fastest, best measured** | **FP8 per-tensor** (1.40x; {medians}) | "
            f"**FP8 per-token** (1.74x; {medians}) |") in table


def test_cells_mark_vllm_default_rows_and_name_the_default_when_another_wins(run):
    text = "\n".join(markdown.workdir_section(run, []))
    assert "| qkv_proj (N=64 K=32) x2 | 8.00 cudnn; vLLM default torch 10.0 | 12.0 torch [vLLM] |" in text
    # rows recorded before `timed_as`: every Triton row then searched its own tiles
    assert "30.0 triton [vLLM design, tuned tiles] (torch composite 90.0)" in text
    # quantized MoE cells compare with vLLM's BF16 default (triton 40 / 23 = 1.74x), not the composite;
    # per-token Triton is vLLM's fallback (it runs its CUTLASS grouped GEMM on SM90)
    assert "23.0 triton/per_token [fallback] (1.74x vs triton bf16)" in text
    assert "51.0 torch composite (0.59x vs triton bf16)" in text  # vLLM's design failed at M=1


def test_the_checkpoint_scheme_leads_the_fp8_lines():
    model = dict(name="m", source="s", model_type="t", architecture="A", fp8_scheme="per_token",
                 fp8_scheme_source="compressed-tensors ... strategy='channel'")
    a = Analysis(results_of(_rows(), model=model), "w")
    assert a.recipes == ["bf16", "fp8.per_token", "fp8.per_tensor"]
    assert a.recipe_title("fp8.per_token") == "FP8 per-token (checkpoint scheme)"
    assert a.recipe_title("fp8.per_tensor") == "FP8 per-tensor"
    text = "\n".join(markdown.summary_lines(a))
    assert "FP8 scheme this checkpoint runs with in vLLM: **FP8 per-token** (compressed-tensors" in text
    assert text.index("| FP8 per-token (checkpoint scheme) vLLM default") < text.index("| FP8 per-tensor vLLM")


# --------------------------------------------------------------------------- honest labels


def test_the_torch_moe_row_is_a_composite_never_a_vllm_kernel(run):
    composite = row_from_dict(moe_row(1, "bf16", "torch", "torch._grouped_mm", 90.0))
    assert backend_label(composite) == "torch composite"
    assert backend_label(row_from_dict(gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 1.0))) == "torch"
    text = "\n".join(markdown.workdir_section(run, []))
    assert ("for MoE, `torch composite`: a PyTorch composite (torch._grouped_mm + sort/gather/index_add), "
            "not a vLLM kernel (torch._scaled_grouped_mm in FP8)") in text
    assert "`F.linear` on cuBLAS for GEMMs (vLLM's default BF16 GEMM)" in text
    assert "unquantized path" not in text and "vLLM's kernel" not in text
    assert "`triton` rows = vLLM's design in this tool's Triton code" in text


# --------------------------------------------------------------------------- expert parallelism


def _ep_rows(with_num_tokens: bool) -> list[dict]:
    extra = (lambda m: {"num_tokens": 4 * m}) if with_num_tokens else (lambda m: {})
    return [row for m in (1, 8) for row in (
        gemm_row("qkv_proj", m, "bf16", "torch", "torch.linear", 10.0),
        moe_row(m, "bf16", "triton", "triton.fused_moe", 30.0, experts=2, **extra(m)))]


def test_ep_moe_cells_say_how_many_tokens_the_layer_runs():
    a = Analysis(results_of(_ep_rows(True), tp=1, ep=4, tokens_per_m=4, gemms=("qkv_proj",)), "ep")
    assert entry(a, "experts").tokens_per_m == 4 and entry(a, "qkv_proj").tokens_per_m == 1
    text = "\n".join(markdown.workdir_section(a, []))
    assert "| experts (H=64 I=128 E=8/8 top-2, num_tokens=4M) x2 |" in text
    assert "M = tokens of one rank's attention per step; an MoE layer under expert parallelism runs " \
           "num_tokens = M*EP/TP" in text
    assert "Here the MoE layers run num_tokens = 4M." in text
    assert not any("num_tokens was recorded" in w for w in a.warnings())
    tp1 = Analysis(results_of(_ep_rows(True)[:1]), "tp1")
    comparison = "\n".join(markdown.comparison_section([tp1, a], []))
    assert "Under expert parallelism an MoE row's M is the tokens on ONE rank" not in comparison
    assert "M = tokens of one rank's attention per step" in comparison
    assert "MoE tokens per run: #1 num_tokens = M, #2 num_tokens = 4M." in comparison


def test_ep_rows_written_before_num_tokens_are_flagged():
    # the plan (written before tokens_per_m) gives EP/TP = 4; the old rows ran num_tokens = M
    a = Analysis(results_of(_ep_rows(False), tp=1, ep=4, gemms=("qkv_proj",)), "old-ep")
    assert entry(a, "experts").tokens_per_m == 1
    assert any("experts: its rows ran num_tokens = 1M, but under TP=1 EP=4 vLLM's MoE layer runs 4M" in w
               for w in a.warnings())
    assert "num_tokens=" not in md_module_tables._module_cell(entry(a, "experts"))


def test_baseline_roll_up_keeps_the_torch_rows(run):
    # the per-step roll-up section keeps the BF16 baseline: torch everywhere it ran,
    # the composite for MoE: M=1 qkv 10*2 + router 2*2 + experts 90*2 = 204
    assert run.rollup(BASELINE, 1).total_us == pytest.approx(204.0)
    assert "| BF16 baseline (torch where it ran) | 204 |" in "\n".join(markdown.workdir_section(run, []))


def test_qwen3_moe_router_counts_its_fp8_rows_under_online_per_tensor_only():
    # vLLM's online fp8_per_tensor quantizes Qwen3-MoE's router (vllm_rules/layers.py
    # QUANTIZED_ROUTERS): its FP8 rows count there; the per-token recipe (a checkpoint) keeps it BF16.
    qwen = dict(STATIC, architecture="Qwen3MoeForCausalLM", fp8_activation_scales="dynamic")
    rows = [r for r in _rows() if r["m"] == 1]
    rows += [gemm_row("router", 1, "fp8", "torch", "torch._scaled_mm", 1.0 + q, "per_tensor", with_quant=q)
             for q in (False, True)]
    a = Analysis(results_of(rows, model=qwen), "hand-made")
    per_tensor, per_token = a.rollup("fp8.per_tensor", 1), a.rollup("fp8.per_token", 1)
    # per-tensor +quant M=1: qkv 7*2 + router (FP8 +quant) 2*2 + experts 21*2 = 60, router not kept
    assert per_tensor.kept == () and per_tensor.by_kind[ROUTER] == pytest.approx(4.0)
    assert per_token.kept == ("router",)
    assert a.kept_text() == ("Quantized totals count router at its BF16 time under FP8 per-token (vLLM "
                             "quantizes it under FP8 per-tensor, where its quantized rows count): vLLM "
                             "keeps them unquantized.")
    # the same rows under a model class that builds its router unquantized: kept under both
    deepseek = Analysis(results_of(rows, model=dict(qwen, architecture="DeepseekV3ForCausalLM")), "x")
    assert deepseek.rollup("fp8.per_tensor", 1).kept == ("router",)
    assert deepseek.kept_text().startswith("Quantized totals count router at their BF16 time under every recipe")
