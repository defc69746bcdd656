"""Every per-step total, speed-up and verdict reads the memory section's fit decision; the summary
applies its own p10/p90 tie rule and says when a verdict is by medians; a line with nothing to
compare is never bold."""

from __future__ import annotations

import re

from helpers_report import gemm_row, results_of

from benchmark_model_kernels.plan import memory
from benchmark_model_kernels.report import markdown, md_rollup, recipe_totals
from benchmark_model_kernels.report.analysis import QUANT, VLLM, Analysis
from benchmark_model_kernels.report.md_text import NO_FIT_MARK, TIE_TEXT
from benchmark_model_kernels.report.memory import memory_section
from benchmark_model_kernels.report.plan_entries import plan_of

#: One GEMM big enough that its weights decide the fit: 2 layers of N=K=16384, 1 GiB in BF16.
N = K = 16384


def _spread(us: float, width: float) -> dict:
    return dict(p10_us=us - width, p50_us=us, p90_us=us + width, n_samples=30)


def _rows(bf16_us=10.0, fp8_us=5.0, width: float | None = 0.5) -> list[dict]:
    """qkv_proj at M=8: BF16 (torch, vLLM's default) and FP8 per-tensor (cudnn); with a +-width
    p10-p90 spread, none when width is None."""
    def extra(us):
        return _spread(us, width) if width is not None else {}
    return [gemm_row("qkv_proj", 8, "bf16", "torch", "torch.linear", bf16_us, n=N, k=K, **extra(bf16_us)),
            gemm_row("qkv_proj", 8, "fp8", "cudnn", "bmm_fp8", fp8_us, scheme="per_tensor", n=N, k=K,
                     **extra(fp8_us))]


def _results(rows: list[dict], memory_gb: float | None = None) -> dict:
    results = results_of(rows, gemms=("qkv_proj",), moe=False,
                         model=dict(name="big", source="test", model_type="t", architecture="T",
                                    hidden_size=K, vocab_size=32000, tie_word_embeddings=False))
    for g in results["plan"]["gemms"]:
        g.update(n=N, k=K)
    if memory_gb is not None:
        results["environment"]["gpu"]["memory_gb"] = memory_gb
    return results


def _between_fp8_and_bf16(results: dict) -> tuple[float, str]:
    """A GPU size (GB) whose 0.92 share holds the FP8 weights and reserve but not the BF16 ones,
    found with plan/memory.py's own arithmetic, and the text the BF16 lines must read there."""
    plan = plan_of(results)
    need = {r: memory.estimate(plan, r, "bf16", 10**12) for r in ("bf16", "fp8")}
    bf16, fp8 = ((e.weight_bytes + e.reserve_bytes) for e in (need["bf16"], need["fp8"]))
    assert fp8 < bf16  # the FP8 weights are half the BF16 ones
    gb = round((bf16 + fp8) / 2 / memory.VLLM_GPU_MEMORY_UTILIZATION / 1e9, 3)
    e, e8 = (memory.estimate(plan, r, "bf16", int(gb * 1e9)) for r in ("bf16", "fp8"))
    assert not memory.fits(e, plan, 1, 0) and memory.fits(e8, plan, 1, 0)
    text = (f"does not fit (needs {memory.gib(e.weight_bytes + e.reserve_bytes)} GiB, "
            f"GPU has {memory.gib(e.usable_bytes)} GiB)")
    return gb, text


def _summary_row(lines, title: str) -> str:
    return next(line for line in lines if line.startswith(f"| {title} |"))


def test_a_recipe_one_gpu_cannot_hold_has_no_plain_total_speedup_or_verdict():
    results = _results(_rows())
    gb, no_fit = _between_fp8_and_bf16(results)
    a = Analysis(_results(_rows(), gb), "w")
    assert a.no_fit("bf16").text == no_fit and a.no_fit("fp8.per_tensor") is None
    summary = markdown.summary_lines(a)
    # the BF16 lines say so instead of a number
    assert _summary_row(summary, "BF16 vLLM default") == f"| BF16 vLLM default | {no_fit} |"
    assert _summary_row(summary, "BF16 best measured") == f"| BF16 best measured | {no_fit} |"
    # FP8's speed-up over a reference that does not fit is marked, and said what it is
    assert _summary_row(summary, "FP8 per-tensor (checkpoint scheme) best measured").endswith(
        f"| 10.0 (2.00x{NO_FIT_MARK}) |")
    assert any(line.startswith(f"- {NO_FIT_MARK}: a speed-up over the BF16 vLLM default total, which does "
                               "not fit one GPU") for line in summary)
    assert any(line.startswith(f"- BF16 {no_fit} on one GPU of this run") for line in summary)
    # BF16 is left out of both fastest lines: on the vLLM basis nothing that fits is complete
    v_vllm, v_best = (recipe_totals.summary_verdicts(a, b)[0] for b in (VLLM, QUANT))
    assert v_vllm.fastest == "" and v_vllm.not_fit == ("bf16",)
    assert v_best.fastest == "fp8.per_tensor" and v_best.not_fit == ("bf16",) and not v_best.compared
    assert _summary_row(summary, "fastest, vLLM default") == (
        "| fastest, vLLM default | no complete total that fits one GPU (BF16 left out: does not fit) |")
    assert _summary_row(summary, "fastest, best measured") == (
        "| fastest, best measured | FP8 per-tensor (only complete total that fits one GPU) |")


def test_the_rollup_and_comparison_mark_the_same_totals():
    gb, no_fit = _between_fp8_and_bf16(_results(_rows()))
    a = Analysis(_results(_rows(), gb), "w")
    rollup = md_rollup.rollup_lines(a)
    # the kernel time stays in the roll-up, marked, with no speed-up
    assert _summary_row(rollup, "BF16 baseline (torch where it ran)") == (
        f"| BF16 baseline (torch where it ran) | 20.0, {no_fit} |")
    assert _summary_row(rollup, "BF16 vLLM default") == f"| BF16 vLLM default | 20.0, {no_fit} |"
    assert "| 8 | BF16 vLLM default (does not fit) |" in "\n".join(rollup)
    assert _summary_row(rollup, "FP8 per-tensor (checkpoint scheme) best kernel only").endswith(
        f"| 10.0 (2.00x{NO_FIT_MARK}) |")
    comparison = markdown.comparison_section([a, a], [])
    bf16 = comparison[comparison.index("### BF16") + 1:comparison.index("### FP8 per-tensor")]
    totals = [line for line in bf16 if "| vLLM default |" in line or "| best measured |" in line]
    assert len(totals) == 4 and all(line.endswith(f"| {no_fit} |") for line in totals)


def test_the_memory_section_makes_the_same_decision():
    gb, no_fit = _between_fp8_and_bf16(_results(_rows()))
    text = "\n".join(memory_section(_results(_rows(), gb), [8]))
    bf16 = next(line for line in text.splitlines() if line.startswith("| bf16 |"))
    fp8 = next(line for line in text.splitlines() if line.startswith("| fp8 |"))
    assert no_fit in bf16 and "does not fit" not in fp8


def test_a_gpu_that_holds_every_recipe_marks_nothing():
    a = Analysis(_results(_rows(), 150.8), "w")
    assert a.no_fit("bf16") is None
    text = "\n".join(markdown.workdir_section(a, []))
    assert not re.search(r"does not fit \(needs \d", text) and NO_FIT_MARK not in text
    assert "| **fastest, best measured** | **FP8 per-tensor** (2.00x) |" in text


def test_a_speedup_within_the_p10_p90_ranges_is_a_tie_not_a_gain():
    # BF16 20 us [19, 21] vs FP8 19 us [18, 20] (x2 layers: [38, 42] vs [36, 40]): they overlap
    a = Analysis(_results(_rows(10.0, 9.5, width=0.5), 150.8), "w")
    summary = markdown.summary_lines(a)
    fp8 = _summary_row(summary, "FP8 per-tensor (checkpoint scheme) best measured")
    assert fp8 == f"| FP8 per-tensor (checkpoint scheme) best measured | 19.0, {TIE_TEXT} |"
    assert "1.05x" not in "\n".join(summary)
    fastest = _summary_row(summary, "**fastest, best measured**")
    assert fastest == f"| **fastest, best measured** | {TIE_TEXT}: FP8 per-tensor = BF16 |"
    assert any(line.startswith(f"- **{TIE_TEXT}**: the two totals' p10-p90 ranges") for line in summary)
    # the roll-up section applies the same rule to its speed-ups
    assert _summary_row(md_rollup.rollup_lines(a), "FP8 per-tensor (checkpoint scheme) best kernel only").endswith(
        f"| 19.0, {TIE_TEXT} |")


def test_a_speedup_beyond_the_ranges_stays_a_gain_and_bold():
    a = Analysis(_results(_rows(10.0, 5.0, width=0.5), 150.8), "w")
    summary = markdown.summary_lines(a)
    assert _summary_row(summary, "FP8 per-tensor (checkpoint scheme) best measured").endswith("| 10.0 (2.00x) |")
    assert "| **fastest, best measured** | **FP8 per-tensor** (2.00x) |" in summary
    assert not any("by medians" in line for line in summary)


def test_without_percentiles_the_verdict_says_it_is_by_medians():
    a = Analysis(_results(_rows(10.0, 9.9, width=None), 150.8), "w")
    v = recipe_totals.summary_verdicts(a, QUANT)[0]
    assert v.by_medians == "only" and not v.speedup_tie
    summary = markdown.summary_lines(a)
    # no ranges to compare: the ratio of medians stands, and says what it is
    assert "| **fastest, best measured** | **FP8 per-tensor** (1.01x; by medians only: no p10/p90 recorded) |" \
        in summary
    assert any("are by medians only (no row recorded p10/p90)" in line for line in summary)


def test_some_rows_without_percentiles_make_the_verdict_partly_by_medians():
    rows = _rows(10.0, 5.0, width=0.5)
    for key in ("p10_us", "p90_us"):
        rows[0].pop(key)  # the BF16 row recorded none
    a = Analysis(_results(rows, 150.8), "w")
    assert a.rollup("bf16", 8).by_medians == "only" and a.rollup("fp8.per_tensor", 8).by_medians == ""
    assert recipe_totals.summary_verdicts(a, QUANT)[0].by_medians == "partly"
    assert "partly by medians: some rows recorded no p10/p90" in "\n".join(markdown.summary_lines(a))


def test_a_line_with_only_one_complete_total_is_not_bold():
    rows = _rows()[:1]  # BF16 only: nothing to compare it with
    a = Analysis(_results(rows, 150.8), "w")
    summary = markdown.summary_lines(a)
    for basis in ("vLLM default", "best measured"):
        line = _summary_row(summary, f"fastest, {basis}")
        assert line == f"| fastest, {basis} | BF16 (only complete total) |" and "**" not in line
