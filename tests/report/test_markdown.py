"""markdown.py: the module-kind table of references/report.md, the summary lines and a workdir's
section, rendered from the hand-made tiny_mixed.json and one real H200 run."""

from __future__ import annotations

import os

import pytest
from helpers_report import H200_QWEN, ROOT

from benchmark_model_kernels.core.results_schema import load_results
from benchmark_model_kernels.report import analysis, markdown, recipe_totals
from benchmark_model_kernels.report.analysis import Analysis


def test_reference_doc_carries_the_module_kind_table():
    with open(os.path.join(ROOT, "references", "report.md")) as f:
        assert markdown.module_kind_table_markdown() in f.read()


def test_summary_lines_rank_only_complete_totals(tiny):
    # the totals behind these lines: test_analysis.py's summary test (rows = lines, columns = M)
    text = "\n".join(markdown.summary_lines(tiny))
    assert "| recipe | M=1 | M=16 |" in text
    # no row of tiny_mixed has percentiles: the ratio of medians stands, and the summary says so
    assert "| BF16 best measured | incomplete | 208 (1.00x) |" in text
    assert "are by medians only (no row recorded p10/p90)" in text
    # FP8 is incomplete at M=16: BF16 won nothing, so neither the line nor its cell is bold
    assert "| fastest, best measured | no complete total | BF16 (only complete total) |" in text
    assert "| fastest, vLLM default | no complete total | no complete total |" in text
    assert "**" not in next(ln for ln in text.splitlines() if "fastest, best measured" in ln)
    assert "NVFP4: no number on this GPU (e.g. mm_fp4 cutlass needs SM100+" in text
    assert "**2 rows failed**" in text


@pytest.mark.parametrize("us,text", [(None, "-"), (1234.4, "1,234"), (19.64, "19.6"), (2.414, "2.41")])
def test_fmt_us_keeps_about_three_digits(us, text):
    assert markdown.fmt_us(us) == text


def test_real_h200_section_puts_the_answer_first():
    a = Analysis(load_results(H200_QWEN), H200_QWEN)
    verdicts = {v.m: v for v in recipe_totals.summary_verdicts(a, analysis.QUANT)}
    written = markdown.workdir_section(a, [])
    assert written.index("## Summary") < written.index("## Warnings")  # the answer comes first
    assert f"**FP8 per-token** ({markdown.fmt_x(verdicts[8].speedup)}; " in "\n".join(written)
    # router and lm_head stay BF16 under FP8 in vLLM: said so, not "not measured"
    assert any(line.startswith("| router (N=128 K=2048) x48 | BF16 (kept by vLLM) |") for line in written)
