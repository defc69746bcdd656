"""The comparison of several layouts: beside every per-rank M, each run's GPUs (TP x DP) and the
global batch that M is (M x DP sequences per decode step), on the committed H200 runs of
Qwen3-30B-A3B at TP=1, TP=4 and TP=1 EP=8 (examples/h200/vllm_default/)."""

from __future__ import annotations

import os

from helpers_report import ROOT

from benchmark_model_kernels.core.results_schema import load_results
from benchmark_model_kernels.report import markdown
from benchmark_model_kernels.report.analysis import Analysis, run_labels
from benchmark_model_kernels.report.figures import COMPARISON_SUBTITLE, COMPARISON_TITLE, comparison_tick_labels
from benchmark_model_kernels.report.run_scale import BATCH_ROW_WORDS, EQUAL_M_TEXT, RunScale

EXAMPLES = os.path.join(ROOT, "examples", "h200", "vllm_default")
RUNS = ("qwen3-30b-a3b_tp1", "qwen3-30b-a3b_tp4", "qwen3-30b-a3b_tp1_ep8")


def _analyses() -> list[Analysis]:
    return [Analysis(load_results(os.path.join(EXAMPLES, name)), os.path.join(EXAMPLES, name)) for name in RUNS]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_each_run_shows_its_gpus_and_the_global_batch_per_m():
    analyses = _analyses()
    assert [RunScale.of(a).gpus for a in analyses] == [1, 4, 8]
    assert [a.ms for a in analyses] == [[1, 8, 64, 512]] * 3
    text = "\n".join(markdown.comparison_section(analyses, []))
    bf16 = text.split("### BF16\n", 1)[1].split("\n### ", 1)[0]
    header = next(ln for ln in bf16.splitlines() if ln.startswith("| run |"))
    assert _cells(header) == ["run", "GPUs", "total", "M=1", "M=8", "M=64", "M=512"]
    batch_rows = [_cells(ln) for ln in bf16.splitlines() if f"| {BATCH_ROW_WORDS} |" in ln]
    assert batch_rows == [
        ["#1 qwen3-30b-a3b TP=1 EP=1", "1 (TP=1)", BATCH_ROW_WORDS,
         "1 seq / 1 GPU", "8 seq / 1 GPU", "64 seq / 1 GPU", "512 seq / 1 GPU"],
        ["#2 qwen3-30b-a3b TP=4 EP=1", "4 (TP=4)", BATCH_ROW_WORDS,
         "1 seq / 4 GPUs", "8 seq / 4 GPUs", "64 seq / 4 GPUs", "512 seq / 4 GPUs"],
        ["#3 qwen3-30b-a3b TP=1 EP=8", "8 (TP=1 DP=8 EP)", BATCH_ROW_WORDS,
         "8 seq / 8 GPUs", "64 seq / 8 GPUs", "512 seq / 8 GPUs", "4096 seq / 8 GPUs"],
    ]
    # every total row names its run's GPUs too, and the sentence under each table says why
    totals = [_cells(ln) for ln in bf16.splitlines() if "| best measured |" in ln or "| vLLM default |" in ln]
    assert [c[1] for c in totals] == ["1 (TP=1)"] * 2 + ["4 (TP=4)"] * 2 + ["8 (TP=1 DP=8 EP)"] * 2
    assert f"\n\n{EQUAL_M_TEXT}" in bf16
    assert text.count(EQUAL_M_TEXT) == text.count("| run | GPUs |")
    assert "scripts/deploy.py" in EQUAL_M_TEXT and "references/deployment.md" in EQUAL_M_TEXT


def test_the_comparison_figure_labels_each_run_with_its_gpus_and_global_batch():
    analyses = _analyses()
    labels = run_labels(analyses)
    assert [t.splitlines()[-1] for t in comparison_tick_labels(analyses, labels, 64)] == [
        "64 seq / 1 GPU", "64 seq / 4 GPUs", "512 seq / 8 GPUs"]
    assert "not equal load" in COMPARISON_TITLE and "TP x DP" in COMPARISON_SUBTITLE
    assert "M x DP" in COMPARISON_SUBTITLE


def test_a_single_run_report_has_no_comparison_scale():
    a = _analyses()[2]
    text = "\n".join(markdown.workdir_section(a, []))
    assert BATCH_ROW_WORDS not in text and EQUAL_M_TEXT not in text


def test_a_run_without_a_plan_has_an_unknown_scale():
    scale = RunScale(None)
    assert (scale.gpus, scale.global_batch(8), scale.batch_text(8)) == (None, None, "unknown")
    assert scale.gpus_text.startswith("unknown")
