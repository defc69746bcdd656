"""report.py: best-backend choice, speed-ups, roll-up, crossovers and the written report, checked on
small HAND-MADE results.json files (tests/fixtures/results/, see the README there). The expected
numbers below are worked out by hand from tiny_mixed.json in the comments next to them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmark_model_kernels.report import report
from benchmark_model_kernels.report.report import ATTN, KERNEL, LM_HEAD, MLP, MOE, OTHER, QUANT, ROUTER, Analysis, Cell, best_cell, crossover, honest_rows, module_kind, write_report
from benchmark_model_kernels.run.results import Row, load_results, rows_of

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "results")
ROOT = os.path.dirname(os.path.dirname(HERE))


def fixture(name: str) -> dict:
    with open(os.path.join(FIXTURES, f"{name}.json")) as f:
        return json.load(f)


def workdir(tmp_path, name: str, sub: str | None = None) -> str:
    path = tmp_path / (sub or name)
    path.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, f"{name}.json"), path / "results.json")
    return str(path)


@pytest.fixture(scope="module")
def tiny() -> Analysis:
    return Analysis(fixture("tiny_mixed"), "tiny")


def entry(a: Analysis, name: str):
    return next(e for e in a.entries if e.name == name)


def row(**kw) -> Row:
    base = dict(case_id="c", kind="gemm", name="qkv_proj", modules="m", layers=1, m=1, dtype="fp8",
                backend="cudnn", routine="bmm_fp8", variant="", with_quant=False)
    base.update(kw)
    return Row(**base)


# --------------------------------------------------------------------------- module kinds


@pytest.mark.parametrize("name,kind,expected", [
    ("qkv_proj", "gemm", ATTN), ("o_proj", "gemm", ATTN), ("mla.q_b_proj", "gemm", ATTN),
    ("gdn.in_proj_qkvz", "gemm", ATTN), ("mamba.in_proj", "gemm", ATTN), ("indexer.wq_b", "gemm", ATTN),
    ("gate_up_proj", "gemm", MLP), ("gate_up_proj[dense]", "gemm", MLP), ("up_proj", "gemm", MLP),
    ("down_proj[dense]", "gemm", MLP), ("shared_expert.gate_up_proj", "gemm", MLP),
    ("shared_expert.down_proj", "gemm", MLP),
    ("router", "gemm", ROUTER), ("shared_expert_gate", "gemm", ROUTER),
    ("lm_head", "gemm", LM_HEAD), ("experts", "moe", MOE), ("something_new", "gemm", OTHER),
    ("mlatent_proj", "gemm", OTHER),  # "mla." is a prefix family, not a substring match
])
def test_module_kind_table(name, kind, expected):
    assert module_kind(name, kind) == expected


def test_every_planner_role_has_a_roll_up_kind():
    from benchmark_model_kernels.plan.planner import ROLE_ORDER

    for role in ROLE_ORDER:
        name = role + "x" if role.endswith(".") else role
        assert module_kind(name) != OTHER, role


def test_reference_doc_carries_the_module_kind_table():
    with open(os.path.join(ROOT, "references", "report.md")) as f:
        assert report.module_kind_table_markdown() in f.read()


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
    # Honest (+quant) best: cudnn 7 -- NOT cublas 4 (its quantized-input cost is unknown).
    c = tiny.cell(qkv, 1, "fp8", QUANT)
    assert (c.us, c.backend, c.row.with_quant) == (7.0, "cudnn", True)
    # Kernel-only best: cublas 4.
    k = tiny.cell(qkv, 1, "fp8", KERNEL)
    assert (k.us, k.backend, k.row.with_quant) == (4.0, "cublas", False)


def test_speedups(tiny):
    qkv, down = entry(tiny, "qkv_proj"), entry(tiny, "down_proj")
    assert report.speedup(tiny.baseline(qkv, 1), tiny.cell(qkv, 1, "fp8", QUANT)) == pytest.approx(10 / 7)
    assert report.speedup(tiny.baseline(qkv, 1), tiny.cell(qkv, 1, "fp8", KERNEL)) == pytest.approx(2.5)
    # baseline cudnn 6 (torch failed) vs FP8 +quant 7: a slow-down, reported as such.
    assert report.speedup(tiny.baseline(down, 1), tiny.cell(down, 1, "fp8", QUANT)) == pytest.approx(6 / 7)
    # no number on either side -> no speed-up (never 0 or inf)
    assert report.speedup(tiny.baseline(qkv, 1), tiny.cell(qkv, 1, "nvfp4")) is None


def test_missing_cells_say_why(tiny):
    qkv, lm, experts = entry(tiny, "qkv_proj"), entry(tiny, "lm_head"), entry(tiny, "experts")
    c = tiny.cell(qkv, 1, "nvfp4")
    assert (c.us, c.status) == (None, "unsupported") and "SM100" in c.reason
    assert tiny.cell(lm, 1, "fp8").status == "not measured"
    assert tiny.cell(experts, 1, "bf16").status == "unsupported"
    assert tiny.cell(experts, 16, "bf16").us == 50.0


def test_best_cell_status_precedence_and_bad_ok_rows():
    failed = row(status="failed", reason="boom")
    unsup = row(status="unsupported", reason="sm90", backend="cutlass")
    assert best_cell([failed, unsup]).status == "failed"  # anything unexpected outranks "unsupported"
    assert best_cell([unsup]).status == "unsupported"
    assert best_cell([]).status == "not measured"
    # an "ok" row without a usable time is not a number
    c = best_cell([row(status="ok", median_us=None), row(status="ok", median_us=float("nan"))])
    assert c.us is None and c.status == "failed" and "ok row without a time" in c.reason


def test_honest_rows_keeps_a_failed_quant_twin():
    k = row(status="ok", median_us=4.0)
    q = row(status="failed", with_quant=True, reason="quant crashed")
    other = row(backend="torch", routine="torch._scaled_mm", variant="per_tensor", status="ok", median_us=9.0)
    picked = honest_rows([k, q, other])
    assert q in picked and k not in picked and other in picked
    assert best_cell(picked).us == 9.0


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
    assert tiny.rollup("bf16_baseline", 1).total_us == pytest.approx(66.0)
    # FP8 +quant M=1: qkv 7*2 + down 7*2 = 28, plus lm_head 30 and router 2*2 at their BF16 baseline
    # time (vLLM keeps them unquantized) = 62; experts were not measured in FP8 -> missing
    f = tiny.rollup("fp8", 1, QUANT)
    assert f.total_us == pytest.approx(62.0)
    assert set(f.missing) == {"experts"}
    assert f.by_kind["lm_head"] == pytest.approx(30.0) and f.by_kind["router"] == pytest.approx(4.0)
    # FP8 kernel-only M=16: qkv 9*2 + down 13*2 = 44, + lm_head 40 + router 2*2 (BF16) = 88
    assert tiny.rollup("fp8", 16, KERNEL).total_us == pytest.approx(88.0)


# --------------------------------------------------------------------------- crossovers


def test_crossovers_from_fixture(tiny):
    qkv, down, lm = entry(tiny, "qkv_proj"), entry(tiny, "down_proj"), entry(tiny, "lm_head")
    assert tiny.crossover(qkv, "fp8", QUANT).text() == "M=1"
    # down_proj +quant: 7 vs baseline 6 at M=1 (loses), 15 vs 20 at M=16 (wins)
    x = tiny.crossover(down, "fp8", QUANT)
    assert (x.first_win, x.wins, x.compared) == (16, (16,), (1, 16))
    # kernel only: 5 vs 6 at M=1 already wins
    assert tiny.crossover(down, "fp8", KERNEL).first_win == 1
    assert tiny.crossover(lm, "fp8").text() == "no data"
    assert tiny.crossover(qkv, "nvfp4").text() == "no data"


def _c(us):
    return Cell(row(status="ok", median_us=us), "ok") if us is not None else Cell(None, "failed", "x")


def test_crossover_text_cases():
    ms = [1, 8, 64, 512]
    base = [_c(10), _c(10), _c(10), _c(10)]
    assert crossover(base, [_c(11)] * 4, ms).text() == "never in this sweep (M=1..512)"
    x = crossover(base, [_c(11), _c(9), _c(12), _c(8)], ms)
    assert x.first_win == 8 and x.text() == "M=8 (loses again at M=64)"
    # a hole below the crossover is named: the crossover might be earlier
    x = crossover(base, [_c(None), _c(11), _c(9), _c(8)], ms)
    assert x.text() == "M=64; no data at M=1"
    assert crossover(base, [_c(10)] * 4, ms).first_win is None  # a tie is not a win


# --------------------------------------------------------------------------- the written report


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
    assert "8.00 cudnn (torch 10.0)" in text       # BF16 best with the baseline beside it
    assert "not measured" in text and "unsupported" in text
    assert "Not in the roll-up: NVFP4" in text
    assert "padded: K 48->64 (fp8 cudnn)" in text
    assert "quant timing crashed | CUDA error" in text  # the failed row's own reason, verbatim
    for png in ("fig_time_vs_m.png", "fig_rollup.png"):
        assert os.path.getsize(os.path.join(wd, png)) > 10_000 and f"]({png})" in text
    assert "fig_roofline.png" not in text  # tiny rows carry no flops/bytes: no roofline drawn


def test_roofline_uses_the_runs_own_peaks():
    a = Analysis(fixture("llama8b_like_tp1"), "w")
    peaks, bw, note = report.roofline_peaks(a)
    assert peaks["bf16"] == pytest.approx(989.0, rel=0.01) and peaks["fp8"] == pytest.approx(1979.0, rel=0.01)
    assert bw == pytest.approx(4.8, rel=0.01) and "the run used" in note


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
        expected = report.fmt_us(_brute_force_bf16_total(res, 512))
        assert Analysis(load_results(w), w).rollup("bf16", 512).total_us == pytest.approx(
            _brute_force_bf16_total(res, 512))
        assert f" {expected} |" in text
    # each run's section keeps its own figures, prefixed so they never collide
    for n in (1, 2):
        for fig in ("time_vs_m", "roofline", "rollup"):
            assert os.path.isfile(tmp_path / "runs" / f"fig_{n}_llama-3.1-8b_TP_{n}_EP_1_{fig}.png")
    assert "lm_head fp8 cublas at M=1" in text and "CUBLAS_STATUS_NOT_SUPPORTED" in text


@pytest.mark.parametrize("name", ["empty", "all_failed"])
def test_empty_and_all_failed_do_not_crash(tmp_path, name):
    wd = workdir(tmp_path, name)
    text = open(write_report([wd])).read()
    if name == "empty":
        assert "results.json has no rows" in text
    else:
        assert "no row has a number" in text and "4 of 4 rows FAILED" in text
        assert "driver exited with code 1" in text and "qkv_proj bf16 torch at M=1,8" in text
        assert "no number (all 1 modules missing)" in text
        assert not [f for f in os.listdir(wd) if f.endswith(".png")]


def test_time_vs_m_figures_stay_bounded(tmp_path):
    base = fixture("tiny_mixed")
    proto = next(r for r in base["rows"] if r["status"] == "ok" and r["kind"] == "gemm")
    rows = [dict(proto, name=f"mod{i}", case_id=f"gemm.mod{i}.m{m}", m=m) for i in range(14) for m in (1, 8)]
    results = dict(base, rows=rows, plan=None)
    wd = tmp_path / "big"
    wd.mkdir()
    (wd / "results.json").write_text(json.dumps(results))
    text = open(write_report([str(wd)])).read()
    assert "fig_time_vs_m_1.png" in text and "fig_time_vs_m_2.png" in text  # 12 + 2 panels
    assert len(Analysis(results).entries) == 14


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


def test_rows_of_fixture_round_trip():
    # fixtures stay loadable through the results schema (Row defaults fill the omitted fields)
    for name in ("tiny_mixed", "llama8b_like_tp1", "all_failed", "empty"):
        rows = rows_of(fixture(name))
        assert all(r.status in ("ok", "unsupported", "failed") for r in rows)


def test_roofline_peaks_fall_back_to_the_datasheet_table():
    res = fixture("llama8b_like_tp1")
    stripped = [{k: v for k, v in r.items() if not k.startswith("pct_peak")} for r in res["rows"]]
    peaks, bw, note = report.roofline_peaks(Analysis(dict(res, rows=stripped)))
    from benchmark_model_kernels.run import roofline

    h200 = roofline.find_peak("NVIDIA H200", (9, 0))
    assert peaks["bf16"] == h200.bf16_tflops and peaks["fp8"] == h200.fp8_tflops
    assert bw == h200.hbm_tb_per_sec and "datasheet" in note
    assert "nvfp4" not in peaks  # H200 has no FP4 tensor cores: no ceiling, never a made-up one
    unknown = dict(res, rows=stripped, environment={"gpu": {"name": "Mystery GPU 9000"}})
    peaks, bw, note = report.roofline_peaks(Analysis(unknown))
    assert (peaks, bw) == ({}, None) and note.startswith("no ceilings drawn")


def test_version_mismatch_is_warned_even_when_the_environment_did_not():
    res = fixture("tiny_mixed")
    env = dict(res["environment"], warnings=[],
               versions={"flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.7.4"})
    warns = Analysis(dict(res, environment=env)).warnings()
    assert any("0.6.17" in w and "0.7.4" in w for w in warns)
    assert not any("FlashInfer wheel" in w for w in Analysis(res).warnings())  # same release: quiet


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
    assert all(v[0] != "nvfp4" for v in report._rollup_variants(a))
    md = open(write_report([str(tmp_path)])).read()
    assert "Not in the roll-up: NVFP4" in md


# --------------------------------------------------------------------------- summary


def test_summary_ranks_only_complete_totals_and_prefers_the_baseline_on_a_tie(tiny):
    v1, v16 = report.summary_verdicts(tiny)
    # M=1: experts have no number in any recipe -> no total is complete, nothing is ranked
    assert v1.m == 1 and v1.fastest == "" and v1.speedup is None and len(v1.not_ranked) == 3
    # M=16: baseline 208 == BF16 best 208 (see the roll-up test); FP8 misses experts -> not ranked
    assert dict(v16.totals) == {"BF16 baseline (torch where it ran)": pytest.approx(208.0),
                                "BF16 best": pytest.approx(208.0), "FP8 best +quant": None}
    assert v16.fastest.startswith("BF16 baseline") and v16.speedup == pytest.approx(1.0)
    assert v16.not_ranked == ("FP8 best +quant",)
    # kernel-only is not a candidate when +quant rows exist (vLLM pays the quantization)
    assert [t for *_, t in report.summary_candidates(tiny)] == [
        "BF16 baseline (torch where it ran)", "BF16 best", "FP8 best +quant"]
    text = "\n".join(report.summary_lines(tiny))
    assert "| 16 | 208 | 208 (1.00x) | incomplete | BF16 baseline |" in text
    assert "NVFP4: no number on this GPU (e.g. mm_fp4 cutlass needs SM100+" in text
    assert "**2 rows failed**" in text


def test_summary_answers_fp8_vs_bf16_for_the_real_h200_qwen_run():
    # references/examples/h200: real H200 rows. The verdict must agree with that report's roll-up
    # totals: M=1 FP8 +quant 6,078 us > BF16 best 5,530 us; from M=8 on FP8 +quant is fastest.
    path = os.path.join(ROOT, "references", "examples", "h200", "qwen3-30b-a3b_tp1", "results.json")
    a = Analysis(load_results(path), path)
    verdicts = {v.m: v for v in report.summary_verdicts(a)}
    assert verdicts[1].fastest == "BF16 best"
    for m in (8, 64, 512):
        v = verdicts[m]
        assert v.fastest == "FP8 best +quant"
        assert v.speedup == pytest.approx(a.rollup("bf16_baseline", m).total_us / a.rollup("fp8", m).total_us)
        assert v.speedup > 1.1
    written = report.workdir_section(a, [])
    assert written.index("## Summary") < written.index("## Warnings")  # the answer comes first
    assert f"**FP8 best +quant** ({report.fmt_x(verdicts[8].speedup)} vs baseline)" in "\n".join(written)
    # router and lm_head stay BF16 under FP8 in vLLM: said so, not "not measured"
    assert any(line.startswith("| router (N=128 K=2048) x48 | BF16 (kept by vLLM) |") for line in written)
