"""Runner plumbing with the stand-in driver: statuses, crash isolation, timeouts, results.json after
every case, resume, the overwrite guard, CSV and exit codes. Synthetic numbers, never measurements."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from benchmark_model_kernels.run import runner
from benchmark_model_kernels.errors import UsageError
from benchmark_model_kernels.run.results import CSV_COLUMNS, RunSettings, load_results

from helpers_runner import (
    CUDA_ERROR,
    CUPTI_FALLBACK,
    FAKE_REPO,
    HANG,
    NO_AUTOTUNE,
    NO_CONFIG,
    NOT_ON_CC,
    SEGFAULT,
    VALUE_ERROR,
    gemm_case,
    moe_case,
)

GPU = ("NVIDIA H200", (9, 0))


def settings(tmp_path, **kw):
    kw.setdefault("case_timeout", 30.0)
    kw.setdefault("autotune_cache", str(tmp_path / "w" / "autotune_cache.json"))
    return RunSettings(num_iters=3, dry_run_iters=1, **kw)


class ResultsWatcher(io.StringIO):
    """Progress stream that, at every progress line, records how many rows results.json holds."""

    def __init__(self, workdir):
        super().__init__()
        self.workdir, self.seen = workdir, []

    def write(self, s):
        if s.startswith("["):
            self.seen.append(len(load_results(self.workdir)["rows"]))
        return super().write(s)


def run(tmp_path, cases, *, resume=False, **kw):
    workdir = str(tmp_path / "w")
    progress = ResultsWatcher(workdir)
    rc = runner.run_plan(None, cases, settings(tmp_path, **kw), workdir, FAKE_REPO, GPU,
                         resume=resume, command=["test"], progress=progress,
                         environment=lambda repo: {"fake": True})
    return rc, load_results(workdir), progress, workdir


def by_id(results):
    return {r["case_id"]: r for r in results["rows"]}


def test_statuses_reasons_and_crash_isolation(tmp_path):
    cases = [gemm_case(4096), gemm_case(SEGFAULT), gemm_case(NO_CONFIG, backend="cutlass"),
             gemm_case(NOT_ON_CC), gemm_case(VALUE_ERROR), gemm_case(CUDA_ERROR),
             gemm_case(4096, m=64), gemm_case(512, skip="mm_fp4 needs SM100+; this GPU is sm_90"),
             moe_case()]
    rc, res, progress, workdir = run(tmp_path, cases)
    rows = by_id(res)
    assert [r["case_id"] for r in res["rows"]] == [c.case_id for c in cases]  # case order
    st = {cid: r["status"] for cid, r in rows.items()}
    ok_ids = {cases[0].case_id, cases[6].case_id, cases[8].case_id}
    assert {cid for cid, s in st.items() if s == "ok"} == ok_ids
    assert st[cases[2].case_id] == st[cases[3].case_id] == st[cases[7].case_id] == "unsupported"
    assert st[cases[1].case_id] == st[cases[4].case_id] == st[cases[5].case_id] == "failed"
    assert rows[cases[1].case_id]["reason"].startswith("worker exited with signal 11 (SIGSEGV); last output:")
    assert "does not support backend 'cutlass' with capability 90" in rows[cases[2].case_id]["reason"]
    assert "not supported on compute capability 9.0" in rows[cases[3].case_id]["reason"]
    assert rows[cases[4].case_id]["reason"].startswith("[ERROR] Error: Unsupported res dtype")
    assert "illegal memory access" in rows[cases[5].case_id]["reason"]
    assert rows[cases[7].case_id]["reason"] == "mm_fp4 needs SM100+; this GPU is sm_90"
    ok = rows[cases[0].case_id]
    assert ok["timer"] == "cupti" and ok["median_us"] > 0 and ok["phys_n"] == 4096
    assert rows[cases[8].case_id]["intermediate"] == 768 and rows[cases[8].case_id]["routing_method"] == "renormalize"
    assert rc == 1
    # results.json was rewritten after every case, before its progress line
    assert progress.seen == list(range(1, len(cases) + 1))
    assert "incomplete" not in res["notes"]
    # driver.log delimits every launched case; the skipped one was never launched
    log = open(os.path.join(workdir, "driver.log")).read()
    assert log.count("===== BEGIN ") == len(cases) - 1
    assert f"===== END {cases[0].case_id}: ok =====" in log
    assert "Segmentation fault" in log
    # CSV derived from results.json, with the schema's columns
    with open(os.path.join(workdir, "combined_results.csv")) as f:
        table = list(csv.reader(f))
    assert tuple(table[0]) == CSV_COLUMNS and len(table) == len(cases) + 1
    # testlist: every driver case, the known-unsupported one commented out
    tl = open(os.path.join(workdir, "testlist.txt")).read().splitlines()
    live = [ln for ln in tl if ln and not ln.startswith("#")]
    assert len(live) == len(cases) - 1 and all(ln.startswith("--routine ") for ln in live)
    assert any(ln.startswith("# unsupported (mm_fp4 needs SM100+") for ln in tl)
    assert res["command"] == ["test"] and res["environment"] == {"fake": True}
    assert res["settings"]["num_iters"] == 3 and "timing" in res["notes"]


def test_all_ok_exits_zero_and_progress_has_eta(tmp_path):
    rc, res, progress, _ = run(tmp_path, [gemm_case(4096), gemm_case(2048)])
    assert rc == 0 and all(r["status"] == "ok" for r in res["rows"])
    lines = progress.getvalue().splitlines()
    assert lines[0].startswith("[1/2] gemm g4096 m=8 bf16 cudnn ... ok ") and "ETA" in lines[0]


def test_timeout_fails_only_that_case(tmp_path):
    rc, res, _, _ = run(tmp_path, [gemm_case(HANG), gemm_case(4096)], case_timeout=2.0)
    rows = by_id(res)
    assert rows[gemm_case(HANG).case_id]["reason"].startswith("timed out after 2 s")
    assert rows[gemm_case(4096).case_id]["status"] == "ok" and rc == 1


def test_cupti_fallback_policy(tmp_path):
    rc, res, _, _ = run(tmp_path, [gemm_case(CUPTI_FALLBACK)])
    row = res["rows"][0]
    assert row["status"] == "failed" and row["median_us"] is None and row["timer"] == "cuda_graph"
    assert rc == 1
    rc, res, _, _ = run(tmp_path / "b", [gemm_case(CUPTI_FALLBACK)], allow_cuda_events=True)
    assert res["rows"][0]["status"] == "ok" and res["rows"][0]["timer"] == "cuda_graph" and rc == 0


def test_backend_that_cannot_autotune_is_timed_untuned(tmp_path):
    rc, res, _, workdir = run(tmp_path, [gemm_case(NO_AUTOTUNE, backend="cublaslt")])
    row = res["rows"][0]
    assert row["status"] == "ok" and "not autotuned" in row["reason"] and rc == 0
    assert "retrying without --autotune" in open(os.path.join(workdir, "driver.log")).read()


def test_with_quant_rows_follow_their_base(tmp_path):
    cases = [gemm_case(VALUE_ERROR, dtype="fp8"), gemm_case(VALUE_ERROR, dtype="fp8", with_quant=True),
             gemm_case(NO_CONFIG, dtype="fp8"), gemm_case(NO_CONFIG, dtype="fp8", with_quant=True)]
    rc, res, _, _ = run(tmp_path, cases)
    rows = by_id(res)
    assert rows[cases[1].case_id]["status"] == "failed"
    assert rows[cases[1].case_id]["reason"].startswith("base case failed: [ERROR] Error:")
    assert rows[cases[3].case_id]["status"] == "unsupported"
    assert rows[cases[3].case_id]["reason"].startswith("base case unsupported: [INFO]")


def test_resume_runs_only_missing_and_failed(tmp_path):
    a, b, c = gemm_case(4096), gemm_case(VALUE_ERROR), gemm_case(NOT_ON_CC)
    rc, first, _, workdir = run(tmp_path, [a, b, c])
    assert rc == 1
    d = gemm_case(2048)
    rc, second, progress, _ = run(tmp_path, [a, b, c, d], resume=True)
    assert rc == 1
    log = open(os.path.join(workdir, "driver.log")).read()
    assert log.count(f"BEGIN {a.case_id} ") == 1  # kept, not re-run
    assert log.count(f"BEGIN {c.case_id} ") == 1  # runtime-unsupported kept too
    assert log.count(f"BEGIN {b.case_id} ") == 2  # failed: re-run
    assert log.count(f"BEGIN {d.case_id} ") == 1  # new
    assert by_id(second)[a.case_id] == by_id(first)[a.case_id]
    assert [r["case_id"] for r in second["rows"]] == [a.case_id, b.case_id, c.case_id, d.case_id]
    assert json.load(open(os.path.join(workdir, "results.prev.json")))["rows"] == first["rows"]
    assert "resumed" in second["notes"]


def test_resume_reruns_a_kept_id_whose_shape_changed(tmp_path):
    a = gemm_case(4096, name="qkv")
    run(tmp_path, [a])
    changed = gemm_case(2048, name="qkv")  # same case id, new N (e.g. another --tp)
    assert changed.case_id == a.case_id
    _, res, _, _ = run(tmp_path, [changed], resume=True)
    assert res["rows"][0]["n"] == 2048


def test_overwrite_guard(tmp_path):
    run(tmp_path, [gemm_case(4096)])
    with pytest.raises(UsageError, match="already holds results.json; pass --resume"):
        runner.check_workdir(str(tmp_path / "w"), resume=False)
    assert runner.check_workdir(str(tmp_path / "w"), resume=True) == str(tmp_path / "w")
    with pytest.raises(UsageError, match="--workdir"):
        runner.check_workdir(None, resume=False)


def test_exit_code_and_summary_table():
    from benchmark_model_kernels.run.results import Row

    base = dict(kind="gemm", name="x", modules="", layers=1, m=1, dtype="bf16", backend="b",
                routine="r", variant="", with_quant=False)
    assert runner.exit_code([Row(case_id="a", status="ok", **base), Row(case_id="b", status="unsupported", **base)]) == 0
    assert runner.exit_code([Row(case_id="a", status="failed", **base)]) == 1
    table = runner.summary_table([gemm_case(1), gemm_case(2, skip="no"), gemm_case(3, backend="torch")])
    assert "bf16   cudnn" in table and "total" in table.splitlines()[-1]


def test_dry_run_writes_testlist_and_cases_json_only(tmp_path):
    workdir = str(tmp_path / "d")
    out = io.StringIO()
    cases = [gemm_case(4096), gemm_case(512, skip="needs SM100"), gemm_case(4096, backend="torch")]
    assert runner.dry_run(cases, settings(tmp_path), workdir, out) == 0
    assert sorted(os.listdir(workdir)) == ["cases.json", "testlist.txt"]
    listing = json.load(open(os.path.join(workdir, "cases.json")))["cases"]
    assert [c["job"] for c in listing] == ["driver", "driver", "torch"]
    assert listing[1]["skip_reason"] == "needs SM100" and listing[2]["driver_argv"] == []
    assert "dry run: 3 cases" in out.getvalue()


# ------------------------------------------------------------------ the real driver (H200 only)
from conftest import requires_gpu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@requires_gpu
def test_real_driver_end_to_end_on_the_gpu(tmp_path):
    """One shape through the real FlashInfer driver + torch baseline: numbers, CUPTI, no failure."""
    from benchmark_model_kernels import cli_builtin
    from benchmark_model_kernels.run.driver import has_driver

    repo = os.environ.get("FLASHINFER_REPO", os.path.join(ROOT, ".devbundle", "flashinfer"))
    if not has_driver(repo):
        pytest.skip(f"no FlashInfer checkout at {repo} (set FLASHINFER_REPO)")
    w = str(tmp_path / "w")
    rc = cli_builtin.main(["--nks", "6144,4096,qkv", "--ms", "8", "--dtypes", "bf16", "fp8",
                           "--backends", "cudnn", "cublas", "cutlass", "torch",
                           "--flashinfer_repo", repo, "--workdir", w,
                           "--num_iters", "10", "--dry_run_iters", "3", "--case_timeout", "600"])
    res = load_results(w)
    rows = {r["case_id"]: r for r in res["rows"]}
    failed = {k: r["reason"] for k, r in rows.items() if r["status"] == "failed"}
    assert rc == 0 and not failed, failed
    for cid in ("gemm.qkv.m8.bf16.cudnn", "gemm.qkv.m8.fp8.cudnn", "gemm.qkv.m8.fp8.cublas",
                "gemm.qkv.m8.bf16.torch"):
        assert rows[cid]["status"] == "ok" and rows[cid]["timer"] == "cupti", rows[cid]
        assert 2.0 < rows[cid]["median_us"] < 500.0  # M=8 N=6144 K=4096 is ~10-20 us on an H200
    assert rows["gemm.qkv.m8.fp8.cutlass"]["status"] == "unsupported"
    q = rows["gemm.qkv.m8.fp8.cudnn.q"]
    assert q["status"] == "ok" and 0 < q["quant_us"] < q["median_us"]
    assert q["median_us"] == pytest.approx(rows["gemm.qkv.m8.fp8.cudnn"]["median_us"] + q["quant_us"])
    assert os.path.isfile(os.path.join(w, "autotune_cache.json"))


def test_eta_ignores_start_up_and_skipped_cases_and_prices_each_job_kind():
    est = runner.EtaEstimator()
    driver = [gemm_case(64 * i) for i in range(1, 6)]
    torch_case = gemm_case(64, backend="torch", name="t")
    quant = gemm_case(64, name="q", with_quant=True)
    skipped = gemm_case(64, name="s", skip="needs SM100+")
    est.record(driver[0], 30.0)  # worker start-up + JIT build
    est.record(skipped, 0.0)
    est.record(driver[1], 2.0)
    assert est.eta(driver[2:]) is None  # two timed cases: too early to say
    est.record(torch_case, 1.0)
    # driver: 2 s each (the 30 s start-up left out); torch's only case so far is its best guess;
    # quant has no case yet: the steady average of everything (2 s); skipped cases cost nothing.
    assert est.eta([driver[2], driver[3], torch_case, quant, skipped]) == pytest.approx(2 + 2 + 1 + 2)
    est.record(quant, 0.5)
    est.record(quant, 0.1)
    assert est.eta([quant, quant]) == pytest.approx(0.2)


def test_progress_line_says_the_eta_is_an_estimate():
    row = runner.row_from_case(gemm_case(64), runner.Outcome("ok", "", 12.34, 0.1, "cupti"))
    assert runner.progress_line(3, 120, gemm_case(64), row, 75, 61).endswith(
        "... ok 12.3 us  (elapsed 1:15, ETA ~1:01)")
    assert runner.progress_line(1, 120, gemm_case(64), row, 9, None).endswith("ETA after warm-up)")
