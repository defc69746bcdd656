"""Where a run's wall time goes: the phase clock's arithmetic, and the timings a run records.

Runs use the stand-in driver (synthetic numbers, plumbing only)."""

from __future__ import annotations

import io
import json
import os
import time
from dataclasses import replace

import pytest
from test_cache import MACHINE

from benchmark_model_kernels.core.results_schema import load_results
from benchmark_model_kernels.run import phases, runner
from helpers_runner import gemm_case, run_request, settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_phases_add_up_and_the_rest_is_other():
    clock = phases.PhaseClock(startup_s=1.5)
    with clock.phase("plan"):
        time.sleep(0.02)
    clock.add("cases", 2.0)
    clock.add("cases", 1.0)
    clock.add_job("driver", 0.75, "driver gemm cudnn fp8")
    clock.add_job("driver", 0.25, "driver gemm cudnn fp8")
    clock.add_job("cache", 0.01)
    d = clock.as_dict()
    assert list(d["phases_s"]) == ["start-up", "plan", "cases"]  # the order a run passes them
    assert d["phases_s"]["cases"] == 3.0 and d["phases_s"]["start-up"] == 1.5
    assert 0.02 <= d["phases_s"]["plan"] < 1.0
    assert d["cases_by_job"] == {"cache": {"rows": 1, "s": 0.01}, "driver": {"rows": 2, "s": 1.0}}
    # the worker's rows again by family; the first row carries the family's first-use costs
    assert d["cases_by_backend"] == {"driver gemm cudnn fp8": {"rows": 2, "s": 1.0, "first_s": 0.75}}
    # The phases here claim more than the clock has run: nothing is left for "other".
    assert d["other_s"] == 0.0 and d["wall_s"] >= 1.5
    assert "jit_warm_up_cases" not in d  # no warm-up ran
    clock.warm_up_cases.update({"attention.attn.decode.m8.kv1024.bf16.fa2": 41.2345})
    assert clock.as_dict()["jit_warm_up_cases"] == {"attention.attn.decode.m8.kv1024.bf16.fa2": 41.234}
    line = clock.line()
    assert line.startswith("wall ") and "plan 0.0" in line and "cases 3.0" in line
    assert "(cases: cache 1 rows 0.0 s, driver 2 rows 1.0 s)" in line


def test_only_the_first_run_of_a_process_counts_its_start_up(monkeypatch):
    monkeypatch.setattr(phases, "_BEGUN", [False])  # as in a fresh process
    first = phases.next_clock()
    second = phases.next_clock()
    assert phases.clock() is second
    if phases.process_age_s() is not None:  # Linux
        assert first.seconds["start-up"] > 0
    assert "start-up" not in second.seconds


def test_process_age_is_seconds_since_start():
    age = phases.process_age_s()
    assert age is None or 0 < age < 24 * 3600


def test_a_run_records_its_timings_and_prints_them(tmp_path, monkeypatch):
    monkeypatch.setattr(phases, "_BEGUN", [True])  # not the process's first run: no start-up
    workdir = str(tmp_path / "w")
    progress = io.StringIO()
    cases = [gemm_case(512), gemm_case(1024), replace(gemm_case(2048), skip_reason="not on this GPU")]
    phases.next_clock()
    run_settings = replace(settings(tmp_path), autotune_cache=os.path.join(workdir, "a.json"))
    rc = runner.run_plan(run_request(cases, workdir, run_settings), cases, command=["test"], progress=progress,
                         environment=lambda repo: MACHINE)
    assert rc == 0
    timings = load_results(workdir)["timings"]
    assert set(timings["phases_s"]) == {"environment", "cases"}
    assert timings["cases_by_job"]["driver"]["rows"] == 2
    assert timings["cases_by_job"]["decided"]["rows"] == 1
    by_backend = timings["cases_by_backend"]
    assert sum(v["rows"] for v in by_backend.values()) == 2 and all(k.startswith("driver gemm ") for k in by_backend)
    assert sum(v["s"] for v in timings["cases_by_job"].values()) <= timings["phases_s"]["cases"] + 1e-3
    assert progress.getvalue().splitlines()[-1].startswith("wall ")
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(ROOT, "references", "results.schema.json")) as f:
        published = json.load(f)["properties"]["timings"]
    jsonschema.validate(timings, published)


def test_an_interrupted_run_records_its_timings_up_to_the_signal(tmp_path, monkeypatch):
    workdir = str(tmp_path / "w")
    real = runner.Runner.run_one
    calls = []

    def interrupted_on_the_second(self, case, slot=0):
        calls.append(case.case_id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, case, slot)

    monkeypatch.setattr(runner.Runner, "run_one", interrupted_on_the_second)
    monkeypatch.setattr(phases, "_BEGUN", [True])
    phases.next_clock()
    cases = [gemm_case(512), gemm_case(1024)]
    run_settings = replace(settings(tmp_path), autotune_cache=os.path.join(workdir, "a.json"))
    rc = runner.run_plan(run_request(cases, workdir, run_settings), cases, command=["test"],
                         progress=io.StringIO(), environment=lambda repo: MACHINE)
    results = load_results(workdir)
    assert rc == 130 and len(results["rows"]) == 1
    assert set(results["timings"]["phases_s"]) == {"environment", "cases"}
    assert results["timings"]["cases_by_job"]["driver"]["rows"] == 1


def test_a_phase_inside_another_is_not_counted_twice():
    clock = phases.PhaseClock(0.0)
    with clock.phase("cases"):
        clock.add_inner("jit warm-up", 5.0)
        with clock.phase("report"):
            pass
    d = clock.as_dict()["phases_s"]
    # the block took ~0 s, of which 5 s are said to be the warm-up's: "cases" keeps the rest
    assert d["jit warm-up"] == 5.0 and d["cases"] == pytest.approx(-5.0, abs=0.5)
    assert list(d) == ["start-up", "jit warm-up", "cases", "report"]
