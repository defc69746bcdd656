"""The result cache: what its key holds, what a hit copies into results.json, and --resume with it.

Runs use the stand-in driver (synthetic numbers, plumbing only) and a made-up machine record."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
from dataclasses import replace

import pytest

from benchmark_model_kernels.core.case_schema import GemmShape
from benchmark_model_kernels.core.results_schema import RunSettings, load_results
from benchmark_model_kernels.report import report
from benchmark_model_kernels.run import cache as result_cache
from benchmark_model_kernels.run import run_start, runner
from benchmark_model_kernels.run.outcome import Outcome
from helpers_runner import GPU, VALUE_ERROR, gemm_case, run_request, settings

MACHINE = {"versions": {"driver": "570.1", "cuda_runtime": "12.9", "torch": "2.11.0",
                        "flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.6.17"}}


def machine(**versions):
    return result_cache.machine_fingerprint(GPU, {"versions": {**MACHINE["versions"], **versions}})


def key(case, *, job="driver", run_settings=None, fingerprint=None):
    record = result_cache.key_record(fingerprint or machine(), case, job, run_settings or RunSettings(),
                                     result_cache.code_digest(job))
    return result_cache.cache_key(record)


def test_the_same_case_under_other_labels_has_the_same_key():
    # lm_head of two models at the same per-rank shape: one timing serves both.
    a = gemm_case(4096, name="lm_head")
    b = replace(a, case_id="gemm.lm_head.m8.bf16.cudnn.other", modules=("lm_head",), layers=1,
                vllm_default="same")
    assert key(a) == key(b)
    assert key(a, run_settings=RunSettings(autotune_cache="/x/a.json", case_timeout=5)) == key(a)


def test_a_shape_token_count_backend_or_scheme_change_misses():
    a = gemm_case(4096)
    assert key(gemm_case(4096, k=128)) != key(a)
    assert key(gemm_case(4096, m=64)) != key(a)
    assert key(gemm_case(4096, backend="cublas")) != key(a)
    assert key(replace(a, physical=GemmShape(8, 4160, 64))) != key(a)
    assert key(replace(a, scheme="per_token")) != key(a)
    assert key(a, job="torch") != key(a)


def test_a_version_gpu_or_timer_setting_change_misses():
    a = gemm_case(4096)
    for change in ({"torch": "2.12.0"}, {"driver": "575.0"}, {"flashinfer_wheel": "0.6.18"},
                   {"cuda_runtime": "13.0"}, {"flashinfer_checkout_commit": "abc"},
                   {"flashinfer_jit_cache": "0.6.18.post1"}):
        assert key(a, fingerprint=machine(**change)) != key(a), change
    other_gpu = result_cache.machine_fingerprint(("NVIDIA H100", (9, 0)), MACHINE)
    assert key(a, fingerprint=other_gpu) != key(a)
    for run_settings in (RunSettings(num_iters=100), RunSettings(cuda_graph=False),
                         RunSettings(autotune=False), RunSettings(dry_run_iters=1)):
        assert key(a, run_settings=run_settings) != key(a)


def test_a_machine_without_gpu_or_versions_is_not_cached(tmp_path):
    progress = io.StringIO()
    assert run_start.open_cache(str(tmp_path), None, MACHINE, "r", "t", "w", progress) is None
    assert "gpu" in progress.getvalue()
    assert run_start.open_cache(str(tmp_path), GPU, {"versions": {}}, "r", "t", "w", progress) is None
    assert "driver, torch unknown" in progress.getvalue()


def run_into(tmp_path, name, cases, cache_dir, **kw):
    workdir = str(tmp_path / name)
    progress = io.StringIO()
    run_settings = replace(settings(tmp_path), autotune_cache=os.path.join(workdir, "at.json"))
    rc = runner.run_plan(run_request(cases, workdir, run_settings, cache_dir=cache_dir, **kw), cases,
                         command=["test"], progress=progress, environment=lambda repo: MACHINE)
    return rc, load_results(workdir), progress.getvalue(), workdir


def test_a_second_run_copies_cached_rows_with_their_origin_and_starts_no_worker(tmp_path):
    cache_dir = str(tmp_path / "cache")
    cases = [gemm_case(512), gemm_case(1024), gemm_case(VALUE_ERROR)]
    rc1, first, _, _ = run_into(tmp_path, "a", cases, cache_dir)
    assert rc1 == 1 and all(r["origin"] == "" for r in first["rows"])
    # Another model with the same shapes under other names: the ok rows are served from the cache.
    renamed = [replace(c, case_id=c.case_id.replace("gemm.", "gemm.other_"), name="o_proj") for c in cases]
    rc2, second, progress, workdir = run_into(tmp_path, "b", renamed, cache_dir)
    rows = second["rows"]
    assert rc2 == 1
    for before, after in zip(first["rows"][:2], rows[:2], strict=True):
        assert after["median_us"] == before["median_us"] and after["status"] == "ok"
        assert after["origin"] == (f"result cache: run {first['run_id']} at {first['timestamp']} "
                                   f"({tmp_path / 'a'}, {before['case_id']})")
        assert after["name"] == "o_proj" and after["tflops"] is not None  # labels and roofline are its own
    assert rows[2]["status"] == "failed" and rows[2]["origin"] == ""  # a failure is tried again
    assert "2 copied from the result cache" in progress
    assert "result_cache" in second["notes"] and second["run_id"] != first["run_id"]
    log = open(os.path.join(workdir, "driver.log")).read()
    assert log.count("(not run: copied from the result cache: run ") == 2
    # The report says so too: a copied number is never shown as measured by this run.
    text = open(report.write_report([workdir])).read()
    assert "| Copied from the result cache | 2 of 3 rows: not timed by this run;" in text
    first_report = open(report.write_report([str(tmp_path / "a")])).read()
    assert "Copied from the result cache" not in first_report


def test_no_cache_times_every_case_again(tmp_path):
    cache_dir = str(tmp_path / "cache")
    run_into(tmp_path, "a", [gemm_case(512)], cache_dir)
    _, again, _, _ = run_into(tmp_path, "b", [gemm_case(512)], None)
    assert again["rows"][0]["origin"] == "" and "result_cache" not in again["notes"]


def test_resume_and_the_cache_agree(tmp_path):
    # A run interrupted after two cases keeps them on --resume; a fresh workdir gets the same rows
    # from the cache, each naming the run that measured it.
    cache_dir = str(tmp_path / "cache")
    cases = [gemm_case(512), gemm_case(1024), gemm_case(2048)]
    _, partial, _, workdir = run_into(tmp_path, "a", cases[:2], cache_dir)
    _, resumed, _, _ = run_into(tmp_path, "a", cases, cache_dir, resume=True)
    assert resumed["run_id"] == partial["run_id"]  # a resumed run is the same run, continued
    assert [r["origin"] for r in resumed["rows"]] == ["", "", ""]
    _, fresh, _, _ = run_into(tmp_path, "b", cases, cache_dir)
    assert [r["median_us"] for r in fresh["rows"]] == [r["median_us"] for r in resumed["rows"]]
    assert [r["origin"].split(" at ")[0] for r in fresh["rows"]] == [
        f"result cache: run {partial['run_id']}"] * 2 + [f"result cache: run {resumed['run_id']}"]
    # --resume of the fresh workdir keeps the copied rows with their origin.
    _, again, _, _ = run_into(tmp_path, "b", cases, cache_dir, resume=True)
    assert [r["origin"] for r in again["rows"]] == [r["origin"] for r in fresh["rows"]]


def test_with_quant_rows_from_the_cache_name_it(tmp_path):
    c = gemm_case(512, dtype="fp8")
    q = gemm_case(512, dtype="fp8", with_quant=True)
    cache = result_cache.ResultCache(str(tmp_path / "c"), machine(), "run1", "2026-12-01T00:00:00+00:00", "w")
    cache.put(cache.record(q, "quant", settings(tmp_path)), Outcome("ok", "", 1.5, 0.1, "cupti"), q.case_id)
    _, results, _, _ = run_into(tmp_path, "a", [c, q], str(tmp_path / "c"))
    base, with_quant = results["rows"]
    assert base["origin"] == "" and with_quant["quant_us"] == 1.5
    assert with_quant["median_us"] == base["median_us"] + 1.5
    assert with_quant["origin"] == f"result cache: run run1 at 2026-12-01T00:00:00+00:00 (w, {q.case_id})"


def test_quantization_of_the_same_activation_is_timed_once_for_every_backend():
    cudnn = gemm_case(512, dtype="fp8", with_quant=True, routine="bmm_fp8")
    cublas = gemm_case(1024, dtype="fp8", with_quant=True, routine="bmm_fp8", backend="cublas")
    torch_per_tensor = replace(gemm_case(2048, dtype="fp8", with_quant=True, backend="torch",
                                         routine="torch._scaled_mm"), variant="per_tensor")
    assert key(cudnn, job="quant") == key(cublas, job="quant") == key(torch_per_tensor, job="quant")
    assert key(cudnn, job="quant") != key(cudnn)  # the kernel itself is another measurement
    for other in (replace(torch_per_tensor, variant="per_token"), replace(cudnn, variant="block128"),
                  gemm_case(512, dtype="fp8", with_quant=True, k=128),
                  gemm_case(512, m=64, dtype="fp8", with_quant=True)):
        assert key(other, job="quant") != key(cudnn, job="quant")


def _hammer(folder, n):
    cache = result_cache.ResultCache(folder, machine(), f"pid{os.getpid()}", "t", "w")
    record = cache.record(gemm_case(512), "driver", RunSettings())
    for i in range(n):
        cache.put(record, Outcome("ok", "", float(i + 1), 0.0, "cupti"), "c")
        assert cache.get(record) is not None


def test_two_processes_writing_one_entry_never_leave_a_torn_file(tmp_path):
    folder = str(tmp_path / "c")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(folder, 200)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    (entry,) = [os.path.join(root, f) for root, _, fs in os.walk(folder) for f in fs]
    assert json.load(open(entry))["outcome"]["median_us"] == 200.0


def test_a_case_that_saw_no_gpu_is_not_stored(tmp_path):
    cache = result_cache.ResultCache(str(tmp_path), machine(), "r", "t", "w")
    record = cache.record(gemm_case(512, backend="torch"), "torch", RunSettings())
    assert not cache.put(record, Outcome("unsupported", "the torch backend needs a CUDA GPU; none is visible"), "c")
    assert cache.get(record) is None
    assert cache.put(record, Outcome("unsupported", "mm_fp4 cutlass needs SM100+; this GPU is sm_90"), "c")
    assert cache.get(record).outcome.status == "unsupported"


def test_an_unreadable_entry_is_a_miss(tmp_path):
    cache = result_cache.ResultCache(str(tmp_path), machine(), "r", "t", "w")
    record = cache.record(gemm_case(512), "driver", RunSettings())
    cache.put(record, Outcome("ok", "", 1.0, 0.0, "cupti"), "c")
    (entry,) = [os.path.join(root, f) for root, _, fs in os.walk(tmp_path) for f in fs]
    open(entry, "w").write("{")
    assert cache.get(record) is None


def test_an_entry_keeps_the_samples_and_check_of_the_measurement(tmp_path):
    cache = result_cache.ResultCache(str(tmp_path), machine(), "r", "t", "w")
    record = cache.record(gemm_case(512), "driver", RunSettings())
    measured = Outcome("ok", "", 2.0, 0.1, "cupti", samples_us=(1.5, 2.0, 2.5), launches_per_call=3.0,
                       check={"check": "passed", "max_abs_err": 0.01})
    cache.put(record, measured, "c")
    assert cache.get(record).outcome == measured
    # An eager case runs without CUDA graphs: another key than its graph twin.
    eager = replace(gemm_case(512), mode="eager")
    assert cache.record(eager, "driver", RunSettings())["timing"]["cuda_graph"] is False
    assert result_cache.cache_key(cache.record(eager, "driver", RunSettings())) != result_cache.cache_key(record)
    both_modes = RunSettings(modes=("graph", "eager"))
    assert result_cache.cache_key(cache.record(gemm_case(512), "driver", both_modes)) == result_cache.cache_key(record)


# ---------------------------------------------------------------- a shared folder: entries checked when read


def _stored_entry(tmp_path, outcome=None):
    """A cache with one entry for gemm_case(512) (driver job): (cache, record, entry path)."""
    cache = result_cache.ResultCache(str(tmp_path / "c"), machine(), "r", "t", "w", notices=io.StringIO())
    record = cache.record(gemm_case(512), "driver", RunSettings())
    assert cache.put(record, outcome or Outcome("ok", "", 2.0, 0.1, "cupti"), "c")
    (entry,) = [os.path.join(root, f) for root, _, fs in os.walk(tmp_path / "c") for f in fs]
    return cache, record, entry


def _poison(entry, **outcome):
    data = json.load(open(entry))
    data["outcome"].update(outcome)
    with open(entry, "w") as f:
        json.dump(data, f)


@pytest.mark.parametrize("outcome, said", [
    ({"median_us": -5.0}, "outcome.median_us=-5.0: must be a time in microseconds, 0 or more"),
    ({"median_us": float("nan")}, "outcome.median_us=NaN: must be a time"),
    ({"median_us": None}, 'outcome.median_us=null: an "ok" row is a measurement'),
    ({"median_us": "fast"}, 'outcome.median_us="fast": must be a number'),
    ({"median_us": 0.0}, 'outcome.median_us=0.0: an "ok" row is a measurement'),
    ({"median_us": float("inf")}, "outcome.median_us=Infinity: must be a number"),
    ({"std_us": -1.0}, "outcome.std_us=-1.0: must be a time"),
    ({"samples_us": [1.0, -2.0]}, "outcome.samples_us[1]=-2.0: must be a time"),
    ({"samples_us": "1,2"}, "outcome.samples_us=\"1,2\": must be a list of numbers"),
    ({"status": "failed"}, "its status 'failed'"),
    ({"status": "great"}, "outcome.status=\"great\": must be one of"),
    ({"timer": "stopwatch"}, "outcome.timer=\"stopwatch\": must be one of"),
    ({"check": {"bogus": 1}}, "its outcome.check is not an object of correctness fields"),
    ({"check": {"max_abs_err": "small"}}, "outcome.max_abs_err=\"small\": must be a number"),
    ({"extra_field": 1}, "its outcome has fields no outcome has (extra_field)"),
    ({"reason": "the torch backend needs a CUDA GPU; none is visible"}, "is never stored"),
])
def test_a_bad_entry_is_ignored_said_once_and_timed_again(tmp_path, outcome, said):
    cache, record, entry = _stored_entry(tmp_path)
    _poison(entry, **outcome)
    assert cache.get(record) is None and cache.get(record) is None
    lines = cache.notices.getvalue().splitlines()
    assert len(lines) == 1, lines  # said once, however often the key is asked for
    assert lines[0].startswith(f"warning: result cache entry {entry} ignored: ") and said in lines[0]
    assert lines[0].endswith("; the case is timed again")
    assert cache.hits == 0 and cache.ignored == [entry]
    # The case's new measurement replaces the bad entry.
    assert cache.put(record, Outcome("ok", "", 3.0, 0.1, "cupti"), "c") and cache.get(record).outcome.median_us == 3.0


@pytest.mark.parametrize("damage", ["wrong_key", "origin", "list", "symlink", "fifo", "directory", "huge"])
def test_an_entry_of_the_wrong_shape_or_kind_is_ignored_and_never_read_through(tmp_path, damage):
    cache, record, entry = _stored_entry(tmp_path)
    data = json.load(open(entry))
    if damage == "wrong_key":
        data["key"] = "0" * 64
    elif damage == "origin":
        data["origin"] = "someone"
    if damage in ("wrong_key", "origin"):
        json.dump(data, open(entry, "w"))
    elif damage == "list":
        open(entry, "w").write("[]")
    elif damage == "symlink":  # points at a valid entry elsewhere: still never followed
        os.rename(entry, tmp_path / "elsewhere.json")
        os.symlink(tmp_path / "elsewhere.json", entry)
    elif damage == "fifo":  # reading it would block the run for good
        os.unlink(entry)
        os.mkfifo(entry)
    elif damage == "directory":
        os.unlink(entry)
        os.mkdir(entry)
    elif damage == "huge":
        with open(entry, "ab") as f:
            f.truncate(result_cache.MAX_ENTRY_BYTES + 1)
    assert cache.get(record) is None
    assert cache.notices.getvalue().count("\n") == 1 and f"entry {entry} ignored" in cache.notices.getvalue()


def test_a_run_re_times_a_poisoned_entry_and_its_resume_keeps_no_poisoned_row(tmp_path):
    cache_dir = str(tmp_path / "cache")
    _, first, _, _ = run_into(tmp_path, "a", [gemm_case(512)], cache_dir)
    (entry,) = [os.path.join(root, f) for root, _, fs in os.walk(cache_dir) for f in fs]
    _poison(entry, median_us=-5.0)
    rc, second, progress, workdir = run_into(tmp_path, "b", [gemm_case(512)], cache_dir)
    row = second["rows"][0]
    assert rc == 0 and row["status"] == "ok" and row["median_us"] > 0 and row["origin"] == ""
    assert progress.count(f"warning: result cache entry {entry} ignored: outcome.median_us=-5.0") == 1
    assert json.load(open(entry))["outcome"]["median_us"] == row["median_us"]  # healed
    # A results.json that holds such a row (written before the check): --resume times it again.
    payload = json.load(open(os.path.join(workdir, "results.json")))
    payload["rows"][0]["median_us"] = None
    json.dump(payload, open(os.path.join(workdir, "results.json"), "w"))
    rc, resumed, progress, _ = run_into(tmp_path, "b", [gemm_case(512)], None, resume=True)
    assert rc == 0 and resumed["rows"][0]["median_us"] > 0
    assert "resume: kept 0 of 1 earlier rows" in progress
    assert progress.count("are not valid rows and are timed again (first: rows[0].median_us=null") == 1


def test_an_unwritable_cache_is_said_once_when_opened_and_its_entries_are_still_read(tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    run_into(tmp_path, "a", [gemm_case(512)], str(cache_dir))
    # The folder refuses new files (a read-only share; as root a chmod would not show it).
    monkeypatch.setattr(result_cache, "check_writable_folder", lambda folder: "Read-only file system")
    rc, results, progress, _ = run_into(tmp_path, "b", [gemm_case(512), gemm_case(1024), gemm_case(2048)],
                                        str(cache_dir))
    assert rc == 0 and results["rows"][0]["origin"].startswith("result cache: run ")
    assert [r["origin"] for r in results["rows"][1:]] == ["", ""]
    warnings = [ln for ln in progress.splitlines() if "cannot be written" in ln or "not written" in ln]
    assert warnings == [f"warning: result cache {cache_dir} cannot be written (Read-only file system): its "
                        "entries are read, but none of this run's rows is stored in it"]
    assert progress.index(warnings[0]) < progress.index("[1/3]")  # up front, before the first case
    assert sum(len(fs) for _, _, fs in os.walk(cache_dir)) == 1  # nothing stored


def test_a_cache_folder_that_cannot_be_made_is_said_once_and_the_run_goes_on(tmp_path):
    (tmp_path / "afile").write_text("")
    rc, results, progress, _ = run_into(tmp_path, "b", [gemm_case(512), gemm_case(1024)],
                                        str(tmp_path / "afile" / "cache"))
    assert rc == 0 and all(r["status"] == "ok" for r in results["rows"])
    assert progress.count("cannot be written") == 1 and "afile is not a folder" in progress
    assert "not written" not in progress
