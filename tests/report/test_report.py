"""report.py: the written report (one workdir, several, empty, all failed) and the CLI's one-line
errors, on the hand-made results.json files of tests/fixtures/results/ (see the README there); the
expected numbers are worked out by hand from tiny_mixed.json in test_analysis.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers_report import FIXTURES, ROOT, fixture, workdir

from benchmark_model_kernels.core.results_schema import load_results
from benchmark_model_kernels.report import markdown, recipe_totals, report
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.report import write_report


def test_write_report_single_workdir(tmp_path):
    wd = workdir(tmp_path, "tiny_mixed")
    before = open(os.path.join(wd, "results.json"), "rb").read()
    path = write_report([wd])
    assert path == os.path.join(wd, "report.md")
    text = open(path).read()
    assert open(os.path.join(wd, "results.json"), "rb").read() == before  # never touched
    assert "# Kernel benchmark: tiny-moe TP=1 EP=1" in text
    assert "NVIDIA H200" in text and "hand-made fixture: not a measurement" in text
    assert "2 of 28 rows FAILED" in text and "timed with CUDA events" in text
    assert "NOT end-to-end latency" in text and "communication" in text
    assert "62.0 (incomplete: 1 of 5 modules missing)" in text
    assert "| BF16 best | 62.0 (incomplete: 1 of 5 modules missing) | 208 (1.00x) |" in text
    assert "7.00 cudnn (1.43x)" in text            # FP8 +quant qkv M=1
    assert "4.00 cublas (2.50x)" in text           # FP8 kernel-only qkv M=1
    assert "7.00 cudnn (0.86x vs cudnn bf16)" in text  # baseline named when torch has no number
    assert "8.00 cudnn; vLLM default torch 10.0" in text  # BF16 best with vLLM's default beside it
    assert "12.0 torch [vLLM]" in text             # ...and marked where vLLM's default wins
    assert "not measured" in text and "unsupported" in text
    assert "Not in the roll-up: NVFP4" in text
    assert "padded: K 48->64 (fp8 cudnn)" in text
    assert "quant timing crashed | CUDA error" in text  # the failed row's own reason, verbatim
    for png in ("fig_time_vs_m.png", "fig_rollup.png"):
        assert os.path.getsize(os.path.join(wd, png)) > 10_000 and f"]({png})" in text
    assert "fig_roofline.png" not in text  # tiny rows carry no flops/bytes: no roofline drawn


def _brute_force_bf16_total(results: dict, m: int) -> float:
    """Independent check: min over ok BF16 kernel rows per module, times its per-step count."""
    best: dict[str, tuple[float, int]] = {}
    for r in results["rows"]:
        if r["dtype"] == "bf16" and r["m"] == m and r.get("status") == "ok" and not r["with_quant"]:
            t = best.get(r["name"], (float("inf"), 0))[0]
            best[r["name"]] = (min(t, r["median_us"]), r["layers"])
    return sum(t * n for t, n in best.values())


def test_comparison_report(tmp_path):
    w1 = workdir(tmp_path, "llama8b_like_tp1", "runs/tp1")
    w2 = workdir(tmp_path, "llama8b_like_tp2", "runs/tp2")
    path = write_report([w1, w2])  # no --out: the common parent
    assert path == str(tmp_path / "runs" / "report.md")
    text = open(path).read()
    assert "#1 llama-3.1-8b TP=1 EP=1" in text and "#2 llama-3.1-8b TP=2 EP=1" in text
    assert "fig_comparison.png" in text and os.path.isfile(tmp_path / "runs" / "fig_comparison.png")
    assert "Not compared (no run has a number): NVFP4" in text
    for w, res in ((w1, fixture("llama8b_like_tp1")), (w2, fixture("llama8b_like_tp2"))):
        expected = markdown.fmt_us(_brute_force_bf16_total(res, 512))
        assert Analysis(load_results(w), w).rollup("bf16", 512).total_us == pytest.approx(
            _brute_force_bf16_total(res, 512))
        assert f" {expected} |" in text
    # each run's section keeps its own figures, prefixed so they never collide
    for n in (1, 2):
        for fig in ("time_vs_m", "roofline", "rollup"):
            assert os.path.isfile(tmp_path / "runs" / f"fig_{n}_llama-3.1-8b_TP_{n}_EP_1_{fig}.png")
    assert "lm_head FP8 per-tensor cublas at M=1" in text and "CUBLAS_STATUS_NOT_SUPPORTED" in text


@pytest.mark.parametrize("name", ["empty", "all_failed"])
def test_empty_and_all_failed_do_not_crash(tmp_path, name):
    wd = workdir(tmp_path, name)
    text = open(write_report([wd])).read()
    if name == "empty":
        assert "results.json has no rows" in text
    else:
        assert "no row has a number" in text and "4 of 4 rows FAILED" in text
        assert "driver exited with code 1" in text and "qkv_proj BF16 torch at M=1,8" in text
        assert "no number (all 1 modules missing)" in text
        assert not [f for f in os.listdir(wd) if f.endswith(".png")]


def test_recipe_without_any_number_gets_no_rollup_total(tmp_path):
    # NVFP4 on an H200: every NVFP4 row is unsupported. Its total would otherwise hold only the
    # modules vLLM keeps in BF16 (router, lm_head) and read as a cheap quantized step.
    d = json.loads(open(os.path.join(FIXTURES, "tiny_mixed.json")).read())
    for r in d["rows"]:
        if r["dtype"] == "nvfp4":
            r.update(status="unsupported", median_us=None, reason="needs SM100+")
    (tmp_path / "results.json").write_text(json.dumps(d))
    a = Analysis(d, str(tmp_path))
    assert not a.has_number("nvfp4")
    assert all(v[0] != "nvfp4" for v in recipe_totals.rollup_variants(a))
    md = open(write_report([str(tmp_path)])).read()
    assert "Not in the roll-up: NVFP4" in md


# --------------------------------------------------------------------------- CLI


def test_cli_success_prints_path(tmp_path, capsys):
    wd = workdir(tmp_path, "all_failed")
    out = tmp_path / "elsewhere"
    assert report.main([wd, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.md")
    assert not os.path.exists(os.path.join(wd, "report.md"))


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    def err(argv):
        assert report.main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
        return lines[0]

    assert "WORKDIR=" in err([str(tmp_path / "nope")])
    (tmp_path / "empty_dir").mkdir()
    assert "has no results.json" in err([str(tmp_path / "empty_dir")])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text("{not json")
    assert "not valid JSON" in err([str(bad)])
    assert (bad / "results.json").read_text() == "{not json"  # left as it was
    future = tmp_path / "future"
    future.mkdir()
    (future / "results.json").write_text(json.dumps({"schema_version": 2, "rows": []}))
    assert "schema_version 2" in err([str(future)])
    wd = workdir(tmp_path, "tiny_mixed")
    (tmp_path / "afile").write_text("x")
    assert "--out=" in err([wd, "--out", str(tmp_path / "afile")])
    assert "did you mean --out?" in err([wd, "--ou", "x"])  # allow_abbrev=False
    assert err([]).startswith("error: WORKDIR=(missing)")  # argparse's own errors: one line too


def test_default_out_dir_rules(tmp_path):
    assert report.default_out_dir(["a/b"]) == "a/b"
    assert report.default_out_dir([str(tmp_path / "x" / "1"), str(tmp_path / "x" / "2")]) == str(tmp_path / "x")
    with pytest.raises(report.UsageError):
        report.default_out_dir(["/a", "/b"])


def test_thin_cli_script_help():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "report.py"), "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--out" in proc.stdout and "examples" in proc.stdout


def test_a_malformed_plan_is_one_line_exit_2(tmp_path, capsys):
    d = fixture("tiny_mixed")
    del d["plan"]["model"]
    (tmp_path / "results.json").write_text(json.dumps(d))
    assert report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has a malformed plan" in err[0]
