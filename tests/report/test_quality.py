"""The report on measurement quality: spread and ties, correctness, eager vs graph, old files."""

from __future__ import annotations

from helpers_report import H200_QWEN, gemm_row, results_of, row

from benchmark_model_kernels.core.results_schema import load_results
from benchmark_model_kernels.report import analysis, markdown, quality, recipe_totals
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.cells import Cell, clear_win, crossover
from benchmark_model_kernels.report.row_facts import NO_CHECK_RECORDED, NO_SPREAD_RECORDED


def _spread(us, width):
    return dict(p10_us=us - width, p50_us=us, p90_us=us + width, p99_us=us + 2 * width, n_samples=30,
                check="passed", check_note="rel L2 1e-3 vs ref", rel_l2_err=1e-3, max_abs_err=0.01,
                argmax_match=1.0, mode="graph")


def _two_recipes(fp8_us, width):
    """qkv_proj (x2) in BF16 at 10 us and FP8 at `fp8_us`, both with a +-`width` spread."""
    rows = [gemm_row("qkv_proj", 8, "bf16", "torch", "torch.linear", 10.0, **_spread(10.0, width)),
            gemm_row("qkv_proj", 8, "fp8", "cudnn", "bmm_fp8", fp8_us, scheme="per_tensor",
                     **_spread(fp8_us, width))]
    return Analysis(results_of(rows, gemms=("qkv_proj",), moe=False))


def test_a_win_smaller_than_the_spread_is_a_tie():
    a = _two_recipes(9.5, width=1.0)
    v = {x.m: x for x in recipe_totals.summary_verdicts(a, analysis.QUANT)}[8]
    assert v.fastest == "fp8.per_tensor" and v.ties == ("bf16",)
    text = "\n".join(markdown.workdir_section(a, []))
    # a tie is printed as one, nothing of it bold, and each total's speed-up cell is a tie too
    assert "| **fastest, best measured** | tie (p10-p90 overlap): FP8 per-tensor = BF16 |" in text
    assert "| FP8 per-tensor (checkpoint scheme) best measured | 19.0, tie (p10-p90 overlap) |" in text


def test_a_win_larger_than_the_spread_stays_a_win():
    a = _two_recipes(5.0, width=1.0)
    v = {x.m: x for x in recipe_totals.summary_verdicts(a, analysis.QUANT)}[8]
    assert v.fastest == "fp8.per_tensor" and v.ties == ()
    assert a.rollup("fp8.per_tensor", 8).spread == (8.0, 12.0)  # (p10, p90) x 2 layers


def test_crossover_within_the_spread_is_a_tie_not_a_win():
    b, c = row(median_us=10.0, p10_us=9.0, p90_us=11.0), row(median_us=9.8, p10_us=9.0, p90_us=10.6)
    x = crossover([Cell(b, "ok")], [Cell(c, "ok")], [8])
    assert x.first_win is None and x.ties == (8,) and "tie within the p10-p90 spread at M=8" in x.text()
    assert clear_win((1.0, 2.0), (2.5, 3.0)) and not clear_win((1.0, 2.6), (2.5, 3.0))


def test_rows_without_percentiles_compare_by_their_medians_as_before():
    b, c = row(median_us=10.0), row(median_us=9.9)
    assert crossover([Cell(b, "ok")], [Cell(c, "ok")], [8]).first_win == 8


def test_incorrect_rows_have_no_number_and_are_listed_with_their_numbers():
    bad = gemm_row("qkv_proj", 8, "fp8", "cublas", "bmm_fp8", 3.0, scheme="per_tensor", status="incorrect",
                   check="failed", check_note="beyond tolerance: rel L2 0.9 > 0.01", rel_l2_err=0.9,
                   reason="output incorrect: beyond tolerance: rel L2 0.9 > 0.01", mode="graph")
    rows = [gemm_row("qkv_proj", 8, "bf16", "torch", "torch.linear", 10.0, **_spread(10.0, 0.1)),
            gemm_row("qkv_proj", 8, "fp8", "cudnn", "bmm_fp8", 6.0, scheme="per_tensor", **_spread(6.0, 0.1)),
            bad]
    a = Analysis(results_of(rows, gemms=("qkv_proj",), moe=False))
    assert a.cell(a.entries[0], 8, "fp8.per_tensor").backend == "cudnn"  # the fast garbage does not win
    text = "\n".join(markdown.workdir_section(a, []))
    assert "1 of 3 rows INCORRECT" in text and "**Incorrect rows**" in text
    assert "qkv_proj FP8 per-tensor cublas at M=8 (graph): beyond tolerance: rel L2 0.9" in text


def test_eager_rows_stay_out_of_the_tables_and_show_their_launch_overhead():
    graph = gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 4.0, **_spread(4.0, 0.1))
    eager = gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 9.0, **{**_spread(9.0, 0.3), "mode": "eager"},
                     launches_per_call=2.0)
    eager["case_id"] = graph["case_id"] + ".eager"
    a = Analysis(results_of([graph, eager], gemms=("qkv_proj",), moe=False))
    assert a.mode == "graph" and a.modes == ["graph", "eager"] and len(a.rows) == 1
    assert a.rollup("bf16", 1).total_us == 8.0  # 4 us x 2 layers: the eager row is not added
    assert quality.eager_pairs(a) == [(a.all_rows[0], a.all_rows[1])]
    text = "\n".join(quality.launch_lines(a))
    assert "| qkv_proj BF16 torch | 1 | 4.00 | 9.00 | +5.00 | 2.25x | 2 |" in text


def test_a_run_timed_only_eagerly_reports_its_eager_rows():
    eager = gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 9.0, mode="eager")
    a = Analysis(results_of([eager], gemms=("qkv_proj",), moe=False))
    assert a.mode == "eager" and a.rollup("bf16", 1).total_us == 18.0


def test_an_old_results_json_loads_renders_and_is_marked_not_filled_in():
    results = load_results(H200_QWEN)
    a = Analysis(results, H200_QWEN)
    timed = [r for r in a.all_rows if r.median_us is not None]
    assert timed and all(r.mode == "graph" for r in a.all_rows)
    assert all(r.spread_note == NO_SPREAD_RECORDED and r.check_note == NO_CHECK_RECORDED for r in timed)
    assert all(r.p50_us is None and r.check == "" for r in timed)
    text = "\n".join(markdown.workdir_section(a, []))
    assert "## Measurement quality" in text and NO_SPREAD_RECORDED in text


def test_an_old_no_cuda_graph_run_is_read_as_eager():
    results = results_of([gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 9.0)], gemms=("qkv_proj",),
                         moe=False)
    results["settings"] = {"cuda_graph": False}
    assert Analysis(results).all_rows[0].mode == "eager"
