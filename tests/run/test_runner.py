"""The run loop with the stand-in driver: statuses, crash isolation, timeouts, results.json after
every case, resume, CSV and exit codes. Synthetic numbers, never measurements."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from dataclasses import replace

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.results_schema import (
    CSV_COLUMNS,
    Row,
    RunSettings,
    load_results,
    results_text,
    row_records,
    rows_of,
)
from benchmark_model_kernels.run import case_execution, runner
from benchmark_model_kernels.run.results_file import ResultsFile
from helpers_runner import (
    CUDA_ERROR,
    CUPTI_FALLBACK,
    GPU,
    HANG,
    NO_AUTOTUNE,
    NO_CONFIG,
    NOT_ON_CC,
    SEGFAULT,
    VALUE_ERROR,
    by_id,
    gemm_case,
    moe_case,
    run_cases,
    run_request,
    settings,
)
from support import requires_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# ------------------------------------------------------------------ one run of every kind of case
#: One case per behaviour of the stand-in driver, run once for the tests below (a worker start and
#: two restarts: too slow to repeat per test).
OK = gemm_case(4096)
CRASH = gemm_case(SEGFAULT)
REJECTED = gemm_case(NO_CONFIG, backend="cutlass")
NOT_ON_THIS_CC = gemm_case(NOT_ON_CC)
RAISES = gemm_case(VALUE_ERROR)
CUDA_FAULT = gemm_case(CUDA_ERROR)
OK_M64 = gemm_case(4096, m=64)
KNOWN_UNSUPPORTED = gemm_case(512, skip="mm_fp4 needs SM100+; this GPU is sm_90")
MOE = moe_case()
MIXED = [OK, CRASH, REJECTED, NOT_ON_THIS_CC, RAISES, CUDA_FAULT, OK_M64, KNOWN_UNSUPPORTED, MOE]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """(exit code, results.json, progress stream, workdir) of one run of MIXED."""
    return run_cases(tmp_path_factory.mktemp("mixed"), MIXED)


def test_mixed_run_keeps_case_order_and_exits_1(mixed):
    rc, res, _, _ = mixed
    assert [r["case_id"] for r in res["rows"]] == [c.case_id for c in MIXED]  # case order
    assert rc == 1


def test_each_case_gets_its_status(mixed):
    st = {cid: r["status"] for cid, r in by_id(mixed[1]).items()}
    ok_ids = {OK.case_id, OK_M64.case_id, MOE.case_id}
    assert {cid for cid, s in st.items() if s == "ok"} == ok_ids
    assert st[REJECTED.case_id] == st[NOT_ON_THIS_CC.case_id] == st[KNOWN_UNSUPPORTED.case_id] == "unsupported"
    assert st[CRASH.case_id] == st[RAISES.case_id] == st[CUDA_FAULT.case_id] == "failed"


def test_ok_rows_are_timed_with_cupti_and_carry_their_shapes(mixed):
    rows = by_id(mixed[1])
    ok = rows[OK.case_id]
    assert ok["timer"] == "cupti" and ok["median_us"] > 0 and ok["phys_n"] == 4096
    assert rows[MOE.case_id]["intermediate"] == 768 and rows[MOE.case_id]["routing_method"] == "renormalize"


def test_crash_fails_only_its_case_quoting_the_last_output(mixed):
    rows = by_id(mixed[1])
    assert rows[CRASH.case_id]["reason"].startswith("worker exited with signal 11 (SIGSEGV); last output:")
    assert "Segmentation fault" in open(os.path.join(mixed[3], "driver.log")).read()


def test_probe_rejection_and_capability_skip_are_unsupported_in_the_drivers_words(mixed):
    rows = by_id(mixed[1])
    assert "does not support backend 'cutlass' with capability 90" in rows[REJECTED.case_id]["reason"]
    assert "not supported on compute capability 9.0" in rows[NOT_ON_THIS_CC.case_id]["reason"]


def test_known_unsupported_case_keeps_its_reason_and_is_never_launched(mixed):
    _, res, _, workdir = mixed
    assert by_id(res)[KNOWN_UNSUPPORTED.case_id]["reason"] == "mm_fp4 needs SM100+; this GPU is sm_90"
    log = open(os.path.join(workdir, "driver.log")).read()
    assert f"BEGIN {KNOWN_UNSUPPORTED.case_id} " not in log


def test_driver_exception_and_cuda_error_are_failed_quoting_them(mixed):
    rows = by_id(mixed[1])
    assert rows[RAISES.case_id]["reason"].startswith("[ERROR] Error: Unsupported res dtype")
    assert "illegal memory access" in rows[CUDA_FAULT.case_id]["reason"]


def test_results_json_holds_every_timed_case_before_its_progress_line(mixed):
    """A timed row is written before its progress line; a row decided before launch (nothing to
    lose: --resume decides it again at once) may wait for the next write, at most a second."""
    _, res, progress, _ = mixed
    for i, case in enumerate(MIXED, 1):
        if not case.skip_reason:
            assert progress.seen[i - 1] == i, case.case_id
    assert progress.seen == sorted(progress.seen) and len(res["rows"]) == len(MIXED)
    assert "incomplete" not in res["notes"]


def test_driver_log_delimits_every_launched_case(mixed):
    log = open(os.path.join(mixed[3], "driver.log")).read()
    assert log.count("===== BEGIN ") == len(MIXED) - 1  # all but the known-unsupported one
    assert f"===== END {OK.case_id}: ok =====" in log


def test_csv_is_derived_from_results_with_the_schema_columns(mixed):
    with open(os.path.join(mixed[3], "combined_results.csv")) as f:
        table = list(csv.reader(f))
    assert tuple(table[0]) == CSV_COLUMNS and len(table) == len(MIXED) + 1
    run_id = mixed[1]["run_id"]
    assert run_id and all(line[0] == run_id for line in table[1:])  # every line names its run


def test_testlist_holds_every_driver_case_the_known_unsupported_one_commented_out(mixed):
    tl = open(os.path.join(mixed[3], "testlist.txt")).read().splitlines()
    live = [ln for ln in tl if ln and not ln.startswith("#")]
    assert len(live) == len(MIXED) - 1 and all(ln.startswith("--routine ") for ln in live)
    assert any(ln.startswith("# unsupported (mm_fp4 needs SM100+") for ln in tl)


def test_results_header_records_command_environment_settings_and_notes(mixed):
    res = mixed[1]
    assert res["command"] == ["test"] and res["environment"] == {"fake": True}
    assert res["settings"]["num_iters"] == 3 and "timing" in res["notes"]


# ------------------------------------------------------------------------------- single behaviours
def test_all_ok_exits_zero_and_progress_has_eta(tmp_path):
    rc, res, progress, _ = run_cases(tmp_path, [gemm_case(4096), gemm_case(2048)])
    assert rc == 0 and all(r["status"] == "ok" for r in res["rows"])
    downloads, support, *lines = progress.getvalue().splitlines()
    # The run says what FLASHINFER_NO_DOWNLOAD its worker gets and who decided backend support,
    # and records both.
    assert downloads.startswith("FLASHINFER_NO_DOWNLOAD") and res["notes"]["downloads"] == downloads
    assert support.startswith("backend support per GPU from ") and res["notes"]["capabilities"] == support
    assert lines[0].startswith("[1/2] gemm g4096 m=8 bf16 cudnn ... ok ") and "ETA" in lines[0]


def test_timeout_fails_only_that_case(tmp_path):
    rc, res, _, _ = run_cases(tmp_path, [gemm_case(HANG), gemm_case(4096)], case_timeout=2.0)
    rows = by_id(res)
    assert rows[gemm_case(HANG).case_id]["reason"].startswith("timed out after 2 s")
    assert rows[gemm_case(4096).case_id]["status"] == "ok" and rc == 1


def test_cupti_fallback_policy(tmp_path):
    rc, res, _, _ = run_cases(tmp_path, [gemm_case(CUPTI_FALLBACK)])
    row = res["rows"][0]
    assert row["status"] == "failed" and row["median_us"] is None and row["timer"] == "cuda_graph"
    assert rc == 1
    rc, res, _, _ = run_cases(tmp_path / "b", [gemm_case(CUPTI_FALLBACK)], allow_cuda_events=True)
    assert res["rows"][0]["status"] == "ok" and res["rows"][0]["timer"] == "cuda_graph" and rc == 0


def test_backend_that_cannot_autotune_is_timed_untuned(tmp_path):
    rc, res, _, workdir = run_cases(tmp_path, [gemm_case(NO_AUTOTUNE, backend="cublaslt")])
    row = res["rows"][0]
    assert row["status"] == "ok" and "not autotuned" in row["reason"] and rc == 0
    assert "retrying without --autotune" in open(os.path.join(workdir, "driver.log")).read()


def test_with_quant_rows_follow_their_base(tmp_path):
    cases = [gemm_case(VALUE_ERROR, dtype="fp8"), gemm_case(VALUE_ERROR, dtype="fp8", with_quant=True),
             gemm_case(NO_CONFIG, dtype="fp8"), gemm_case(NO_CONFIG, dtype="fp8", with_quant=True)]
    rc, res, _, _ = run_cases(tmp_path, cases)
    rows = by_id(res)
    assert rows[cases[1].case_id]["status"] == "failed"
    assert rows[cases[1].case_id]["reason"].startswith("base case failed: [ERROR] Error:")
    assert rows[cases[3].case_id]["status"] == "unsupported"
    assert rows[cases[3].case_id]["reason"].startswith("base case unsupported: [INFO]")


def test_resume_runs_only_missing_and_failed(tmp_path):
    a, b, c = gemm_case(4096), gemm_case(VALUE_ERROR), gemm_case(NOT_ON_CC)
    rc, first, _, workdir = run_cases(tmp_path, [a, b, c])
    assert rc == 1
    d = gemm_case(2048)
    rc, second, progress, _ = run_cases(tmp_path, [a, b, c, d], resume=True)
    assert rc == 1
    log = open(os.path.join(workdir, "driver.log")).read()
    assert log.count(f"BEGIN {a.case_id} ") == 1  # kept, not re-run
    assert log.count(f"BEGIN {c.case_id} ") == 1  # runtime-unsupported kept too
    assert log.count(f"BEGIN {b.case_id} ") == 2  # failed: re-run
    assert log.count(f"BEGIN {d.case_id} ") == 1  # new
    assert by_id(second)[a.case_id] == by_id(first)[a.case_id]
    assert [r["case_id"] for r in second["rows"]] == [a.case_id, b.case_id, c.case_id, d.case_id]
    assert row_records(json.load(open(os.path.join(workdir, "results.prev.json")))) == first["rows"]
    assert "resumed" in second["notes"]


def test_resume_under_other_timing_settings_is_refused_and_nothing_is_touched(tmp_path):
    """Kept rows and new ones must be one measurement: a --resume whose timing settings differ
    from the run it continues is a usage error, and the workdir is left as it was."""
    a, b = gemm_case(4096), gemm_case(2048)
    run_cases(tmp_path, [a], autotune_buckets="all")
    workdir = str(tmp_path / "w")
    before = open(os.path.join(workdir, "results.json")).read()
    with pytest.raises(UsageError, match=r"autotune_buckets='all' \(now 'timed'\).*command"):
        run_cases(tmp_path, [a, b], resume=True, autotune_buckets="timed")
    assert open(os.path.join(workdir, "results.json")).read() == before
    assert not os.path.exists(os.path.join(workdir, "results.prev.json"))
    with pytest.raises(UsageError, match=r"cold_l2=True \(now False\)"):
        run_cases(tmp_path, [a, b], resume=True, autotune_buckets="all", cold_l2=False)
    # Settings that do not change a number (the per-case timeout) may differ.
    rc, res, _, _ = run_cases(tmp_path, [a, b], resume=True, autotune_buckets="all", case_timeout=99.0)
    assert [r["case_id"] for r in res["rows"]] == [a.case_id, b.case_id]


def test_a_results_json_from_before_autotune_buckets_resumes_as_all(tmp_path):
    """A results.json written before --autotune_buckets existed was tuned at every bucket."""
    a, b = gemm_case(4096), gemm_case(2048)
    run_cases(tmp_path, [a], autotune_buckets="all")
    path = str(tmp_path / "w" / "results.json")
    payload = json.load(open(path))
    del payload["settings"]["autotune_buckets"]
    json.dump(payload, open(path, "w"))
    with pytest.raises(UsageError, match="autotune_buckets='all'"):
        run_cases(tmp_path, [a, b], resume=True)  # the default, timed
    _, res, _, _ = run_cases(tmp_path, [a, b], resume=True, autotune_buckets="all")
    assert res["notes"]["resumed"].startswith("1 rows kept")


def test_resume_reruns_a_kept_id_whose_shape_changed(tmp_path):
    a = gemm_case(4096, name="qkv")
    run_cases(tmp_path, [a])
    changed = gemm_case(2048, name="qkv")  # same case id, new N (e.g. another --tp)
    assert changed.case_id == a.case_id
    _, res, _, _ = run_cases(tmp_path, [changed], resume=True)
    assert res["rows"][0]["n"] == 2048


def test_resume_reruns_an_moe_row_timed_at_other_num_tokens(tmp_path):
    """A results.json from before EP token accounting ran an EP>TP MoE row at num_tokens = M; the
    same case id now means M*EP/TP tokens, so the row is timed again, never kept."""
    old = moe_case(m=8)
    _, first, _, workdir = run_cases(tmp_path, [old])
    path = os.path.join(workdir, "results.json")
    payload = json.load(open(path))
    for row in payload["rows"]:
        row.pop("num_tokens")  # as written before the field
    json.dump(payload, open(path, "w"))
    wide = replace(old, logical=replace(old.logical, num_tokens=64),
                   physical=replace(old.physical, num_tokens=64))
    _, res, _, _ = run_cases(tmp_path, [wide], resume=True)
    assert res["rows"][0]["num_tokens"] == 64
    log = open(os.path.join(workdir, "driver.log")).read()
    assert log.count(f"BEGIN {old.case_id} ") == 2
    _, again, _, _ = run_cases(tmp_path, [wide], resume=True)
    assert open(os.path.join(workdir, "driver.log")).read().count(f"BEGIN {old.case_id} ") == 2


def test_exit_code():
    base = dict(kind="gemm", name="x", modules="", layers=1, m=1, dtype="bf16", backend="b",
                routine="r", variant="", with_quant=False)
    ok_and_unsupported = [Row(case_id="a", status="ok", **base), Row(case_id="b", status="unsupported", **base)]
    assert runner.exit_code(ok_and_unsupported) == 0
    assert runner.exit_code([Row(case_id="a", status="failed", **base)]) == 1


# ------------------------------------------------------------------ the real driver (H200 only)
@requires_gpu
def test_real_driver_end_to_end_on_the_gpu(tmp_path):
    """One shape through the real FlashInfer driver + torch baseline: numbers, CUPTI, no failure."""
    from benchmark_model_kernels import cli_builtin
    from benchmark_model_kernels.run.pool import has_driver

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


def test_without_a_driver_the_driver_rows_say_what_is_missing(tmp_path):
    """--no_driver (no FlashInfer checkout: no PyPI wheel ships benchmarks/): no worker is asked to run
    a driver case; each driver row is failed with the driver it needs and how to get it."""
    workdir = str(tmp_path / "w")
    cases = [gemm_case(4096), gemm_case(4096, backend="cudnn", name="q", with_quant=True)]
    request = run_request(cases, workdir, RunSettings(num_iters=3, dry_run_iters=1), repo=None, gpu=None)
    rc = runner.run_plan(request, cases, command=["test"], progress=io.StringIO(),
                         environment=lambda repo: {"versions": {"flashinfer_wheel": "0.7.4"}})
    rows = by_id(load_results(workdir))
    assert rc == 1
    driver = rows[cases[0].case_id]
    assert driver["status"] == "failed" and driver["reason"].startswith(
        "set-up: no FlashInfer driver (--no_driver): this row runs benchmarks/flashinfer_benchmark.py "
        "of flashinfer-python 0.7.4")
    assert "git clone --depth 1 --branch v0.7.4 https://github.com/flashinfer-ai/flashinfer" in driver["reason"]
    assert not os.path.exists(os.path.join(workdir, "cases", "worker.log"))  # no worker started


def test_no_driver_contradicts_a_checkout(tmp_path):
    from benchmark_model_kernels.run import flags as run_flags

    args = argparse.Namespace(workdir=str(tmp_path / "w"), resume=False, num_iters=3, dry_run_iters=1,
                              case_timeout=60.0, ms=[8], dtypes=["bf16"], backends=None,
                              dry_run=False, flashinfer_repo=str(tmp_path), no_driver=True,
                              assume_cc=None, autotune_cache=None, no_cuda_graph=False,
                              no_autotune=False, allow_cuda_events=False)
    with pytest.raises(UsageError, match="--no_driver"):
        run_flags.validate_args(args)


def test_every_mode_is_its_own_row_and_eager_runs_without_cuda_graphs(tmp_path):
    from benchmark_model_kernels.cases.build import with_modes

    cases = with_modes([gemm_case(4096)], ["graph", "eager"])
    rc, res, _, workdir = run_cases(tmp_path, cases, modes=("graph", "eager"))
    rows = by_id(res)
    assert rc == 0 and [rows[c.case_id]["mode"] for c in cases] == ["graph", "eager"]
    assert all(rows[c.case_id]["status"] == "ok" for c in cases)
    testlist = open(os.path.join(workdir, "testlist.txt")).read().splitlines()
    eager_line = next(line for line in testlist if cases[1].case_id in line)
    assert "--no_cuda_graph" in eager_line and "--refcheck" in eager_line
    assert "--no_cuda_graph" not in next(line for line in testlist if f"{cases[0].case_id} " in line + " ")
    # The stand-in driver has no routines.gemm: the rows say why they have no percentiles.
    assert "no bench_gpu_time call" in rows[cases[0].case_id]["spread_note"]
    assert res["settings"]["modes"] == ["graph", "eager"]


def test_a_with_quant_rows_spread_is_that_of_kernel_plus_quantization_sums():
    import dataclasses

    import numpy as np

    from benchmark_model_kernels.core.results_schema import Row
    from benchmark_model_kernels.run.outcome import Outcome

    base = Row(case_id="b", kind="gemm", name="g", modules="", layers=1, m=1, dtype="fp8", backend="cudnn",
               routine="bmm_fp8", variant="", with_quant=False, median_us=10.0, status="ok",
               samples_us=[9.0, 10.0, 11.0, 30.0])
    quant = Outcome("ok", "", 2.0, 0.1, "cupti", samples_us=(1.5, 2.0, 2.5))
    got = case_execution.sum_spread(base, quant)
    sums = [x + y for x in base.samples_us for y in quant.samples_us]
    assert got["p90_us"] == pytest.approx(np.percentile(sums, 90))
    assert got["n_samples"] == 3 and got["samples_us"] is None
    assert "4 x 3 samples" in got["spread_note"]
    legacy = dataclasses.replace(base, samples_us=None)
    assert case_execution.sum_spread(legacy, quant) == {
        "spread_note": "no percentiles: the kernel part has no per-iteration times"}
def test_results_text_is_the_json_of_the_payload_at_every_step(tmp_path):
    # results.json is written from cached row texts (it is rewritten after every case): the text
    # must be exactly results_text of the payload, rows or none, changed rows included, one row a line.
    cases = [gemm_case(512), gemm_case(VALUE_ERROR), moe_case(m=8)]
    header = {"schema_version": 1, "plan": {"nested": [1, {"a": "é"}]}, "notes": {"x": "y"}}
    r = ResultsFile(str(tmp_path), cases, header)
    assert r.payload_text() == results_text(r.payload()) and json.loads(r.payload_text()) == r.payload()
    rc, results, _, workdir = run_cases(tmp_path, cases)
    for row in rows_of(results):
        r.rows[row.case_id] = row
        assert r.payload_text() == results_text(r.payload())
    r.rows[cases[0].case_id] = replace(r.rows[cases[0].case_id], median_us=123.0, samples_us=[1.0, 2.5])
    assert json.loads(r.payload_text())["rows"][0]["median_us"] == 123.0
    # The file leaves out null fields: read back with every field, it is the payload.
    written = json.loads(r.payload_text())
    assert r.payload_text() == results_text(r.payload()) and {**written, "rows": row_records(written)} == r.payload()
    text = open(os.path.join(workdir, "results.json"), encoding="utf-8").read()
    assert text == results_text(load_results(workdir))
    lines = text.splitlines()
    rows_at = lines.index(' "rows": [')
    assert row_records({"rows": [json.loads(line.strip().rstrip(",")) for line in lines[rows_at + 1:-2]]}) \
        == results["rows"]


@pytest.mark.parametrize("devices", [None, ["0", "1"]])
def test_the_eta_learns_from_how_long_each_case_took(tmp_path, monkeypatch, devices):
    import time

    from benchmark_model_kernels.run.outcome import Outcome, row_from_case

    def slow(self, case, slot=0):
        time.sleep(0.2)
        return row_from_case(case, Outcome("ok", "", 1.0, 0.0, "cupti"))

    monkeypatch.setattr(runner.Runner, "run_one", slow)
    # Every case timed (without a driver they would be decided at once, needing no worker).
    monkeypatch.setattr(case_execution.CaseExecutor, "row_at_once", lambda self, case: None)
    cases = [gemm_case(n) for n in (64, 128, 256, 512)]
    request = run_request(cases, str(tmp_path), settings(tmp_path), repo=None, devices=devices)
    r = runner.Runner(ResultsFile(str(tmp_path), cases, {"notes": {}}),
                      case_execution.CaseExecutor(request, {}), GPU)
    r.run()
    timed = r._estimator.seconds["driver"]
    assert len(timed) == 4 and min(timed) >= 0.2


def test_rows_that_need_no_worker_come_first_and_results_keep_case_order(tmp_path):
    """Decided and cached rows print at once, before the first timed case (its worker start and
    JIT); results.json still lists every row in case order."""
    machine = {"versions": {"driver": "570.1", "cuda_runtime": "12.9", "torch": "2.11.0",
                            "flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.6.17"}}
    cache_dir = str(tmp_path / "cache")

    def run(name, cases):
        workdir = str(tmp_path / name)
        progress = io.StringIO()
        run_settings = replace(settings(tmp_path), autotune_cache=os.path.join(workdir, "at.json"))
        runner.run_plan(run_request(cases, workdir, run_settings, cache_dir=cache_dir), cases,
                        command=["test"], progress=progress, environment=lambda repo: machine)
        return load_results(workdir), [ln for ln in progress.getvalue().splitlines() if ln.startswith("[")]

    run("a", [gemm_case(4096)])
    cases = [gemm_case(2048), gemm_case(4096), KNOWN_UNSUPPORTED]
    res, lines = run("b", cases)
    assert [r["case_id"] for r in res["rows"]] == [c.case_id for c in cases]
    assert [ln.split(" ... ")[0].split("] ")[1] for ln in lines] == [
        "gemm g4096 m=8 bf16 cudnn", "gemm g512 m=8 bf16 cudnn", "gemm g2048 m=8 bf16 cudnn"]
    assert by_id(res)[gemm_case(4096).case_id]["origin"].startswith("result cache: run ")
