"""The run loop: Cases -> one Row each -> results.json (+ CSV, testlist, driver.log, report).

In: a Plan and the parsed run flags (`run_from_args`, what both CLIs call; `run_from_request` once
flags.validate_args has checked them), or the planned Cases, RunSettings and a checked workdir
(`run_plan`). Out: the workdir's files (workdir.py lists them)
and the exit code. Each case goes to the worker pool (pool.py), its output becomes an Outcome
(outcome.py) and a Row with roofline numbers; results.json is rewritten after every case.

Exit codes: 0 every row ok/unsupported; 1 some row failed (after everything is written);
2 bad input (one `error:` line, nothing written or overwritten); 128 + the signal when stopped by
SIGINT (130), SIGTERM (143) or SIGHUP (129): the rows so far are written, --resume continues (the
worker ends with the run however the run ends: pool.py, lifetime.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import math
import os
import shlex
import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Iterable, TextIO

from .. import __version__
from ..cases import build as case_building
from ..cases.capabilities import HAND, Capabilities, load_capabilities
from ..cases.schema import Case
from ..errors import UsageError, cli_main
from ..files import disk_full_as_usage_error, write_json_atomic, write_text_atomic
from ..plan.schema import Plan
from . import roofline
from .argv import case_settings, driver_argv
from .flags import Gpu, RunRequest, validate_args
from .interrupts import interrupt_exit_code, interrupt_signal, stop_signals_raise
from .outcome import (
    Outcome,
    WorkerReply,
    classify_driver_case,
    classify_python_case,
    read_driver_csv,
    row_from_case,
)
from .pool import WorkerPool, no_download_note
from .progress import EtaEstimator, progress_line
from .quant_timing import QUANT_TIMING_NOTE
from .results import (
    RESULTS_CSV,
    RESULTS_JSON,
    RESULTS_SCHEMA_VERSION,
    Row,
    RunSettings,
    csv_text,
    derived_run_id,
    load_results,
    new_run_id,
    run_facts,
)
from .timing import sum_percentiles
from .workdir import (
    CASE_DIR,
    DRIVER_LOG,
    PREV_RESULTS,
    TESTLIST,
    check_workdir,
    dry_run,
    load_kept,
    make_workdir,
    testlist_text,
    workdir_lock,
)

#: What the run records as results.json["environment"], given the --flashinfer_repo (the CLIs pass
#: `env.environment.collect`; the run stage itself does not probe the machine).
EnvironmentProbe = Callable[[str | None], dict[str, Any]]
#: Renders the report of finished workdirs and returns its path (the CLIs pass
#: `report.report.write_report`); None writes no report.
ReportWriter = Callable[[list[str]], str]

TIMING_NOTE = (
    "Driver rows: FlashInfer's benchmarks/flashinfer_benchmark.py run in-process by a worker "
    "(bench_gpu_time: CUPTI kernel spans, cold L2 flushed before every iteration, CUDA graph "
    "unless --no_cuda_graph), median and std over --num_iters after --dry_run_iters warm-ups. "
    "torch rows: the same bench_gpu_time. Each row's `timer` says what timed it. Every timed row "
    "keeps its per-iteration times (samples_us) and their p10/p50/p90/p99; driver rows get them "
    "from the bench_gpu_time call the driver makes (run/driver_capture.py). Eager rows (--modes "
    "eager) time without CUDA graphs and count the launches of one call with CUPTI."
)


#: What the installed FlashInfer says about its backends, given the --flashinfer_repo
#: (`cases.capabilities.load_capabilities`; tests stand in a table of their own).
CapabilityProbe = Callable[[str | None], Capabilities]


def plan_cases(plan: Plan, ms: Iterable[int], dtypes: Iterable[str], backends: Iterable[str] | None,
               compute_capability: tuple[int, int] | None, modes: Iterable[str] = ("graph",),
               caps: Capabilities = HAND) -> list[Case]:
    """The plan's cases under these filters (build_cases, which also refuses duplicate case ids),
    each once per timing mode; a --backends value that matches no case is a UsageError naming the
    backends there are. `caps`: what the installed FlashInfer says about its backends."""
    ms = list(ms)
    built = case_building.build_cases(plan, ms, list(dtypes), list(backends) if backends else None,
                                      compute_capability, caps)
    if backends:
        seen = {c.backend for c in built}
        for b in backends:
            if b not in seen:
                everything = case_building.build_cases(plan, ms, list(dtypes), None, compute_capability,
                                                       caps)
                known = " ".join(sorted({c.backend for c in everything})) or "(none)"
                raise UsageError("--backends", b, f"matches no case of this plan and these --dtypes; "
                                 f"choose from: {known}")
    return case_building.with_modes(built, list(modes))


def missing_driver_reason(environment: dict[str, Any]) -> str:
    """A driver row's reason under --no_driver: the driver it needs and where to get it."""
    wheel = (environment.get("versions") or {}).get("flashinfer_wheel")
    release = f"flashinfer-python {wheel}" if wheel else "the installed flashinfer-python"
    tag = f"v{wheel.split('+', 1)[0]}" if wheel else "v<its version>"
    return (f"set-up: no FlashInfer driver (--no_driver): this row runs benchmarks/"
            f"flashinfer_benchmark.py of {release}, which its wheel does not ship; get it with "
            f"git clone --depth 1 --branch {tag} https://github.com/flashinfer-ai/flashinfer "
            f"~/flashinfer and pass --flashinfer_repo ~/flashinfer")


def annotate(row: Row, gpu: Gpu | None) -> Row:
    """Roofline numbers (flops, bytes, TFLOP/s, % of peak); the row unchanged if that fails."""
    try:
        return roofline.annotate(row, gpu[0] if gpu else "", gpu[1] if gpu else None)
    except Exception as e:  # noqa: BLE001  (a roofline bug must not lose a measurement)
        print(f"warning: roofline annotation of {row.case_id} failed: {e}", file=sys.stderr)
        return row


class Runner:
    """Runs cases through one WorkerPool, appending to driver.log and rewriting results.json."""

    def __init__(self, cases: list[Case], settings: RunSettings, workdir: str,
                 flashinfer_repo: str | None, header: dict[str, Any],
                 gpu: Gpu | None, kept: dict[str, Row] | None = None,
                 progress: TextIO | None = None):
        self.cases, self.settings, self.workdir = cases, settings, workdir
        self.flashinfer_repo, self.header, self.gpu = flashinfer_repo, header, gpu
        self.rows: dict[str, Row] = dict(kept or {})
        self.progress = progress if progress is not None else sys.stderr
        self.case_dir = os.path.join(workdir, CASE_DIR)
        self.pool: WorkerPool | None = None
        self.missing_driver = missing_driver_reason(header.get("environment") or {})

    # -- files
    def payload(self) -> dict[str, Any]:
        ordered = [self.rows[c.case_id] for c in self.cases if c.case_id in self.rows]
        payload = dict(self.header)
        notes = dict(payload.get("notes") or {})
        if len(ordered) < len(self.cases):
            notes["incomplete"] = (f"{len(ordered)} of {len(self.cases)} cases have rows "
                                   "(run in progress or interrupted)")
        payload["notes"] = notes
        payload["rows"] = [asdict(r) for r in ordered]
        return payload

    def save(self) -> None:
        write_json_atomic(os.path.join(self.workdir, RESULTS_JSON), self.payload())

    def _append_log(self, case: Case, argv: list[str] | None, log_path: str, row: Row) -> None:
        try:
            with open(log_path, errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        with open(os.path.join(self.workdir, DRIVER_LOG), "a") as log:
            log.write(f"===== BEGIN {case.case_id} =====\n")
            if argv:
                log.write(f"$ flashinfer_benchmark.py {shlex.join(argv)}\n")
            elif not case.skip_reason:
                what = "quant_timing.measure_quant" if case.with_quant else "torch_backend.run_case"
                log.write(f"$ {what}({case.routine} {case.variant or ''}".rstrip() + ")\n")
            log.write(text if text.endswith("\n") or not text else text + "\n")
            log.write(f"===== END {case.case_id}: {row.status}"
                      + (f": {row.reason}" if row.reason else "") + " =====\n")
        if os.path.exists(log_path):
            os.remove(log_path)

    # -- one case
    def _pool(self) -> WorkerPool:
        if self.pool is None:
            self.pool = WorkerPool(self.flashinfer_repo, os.path.join(self.case_dir, "worker.log"))
        return self.pool

    def _request(self, case: Case, job: str) -> tuple[dict[str, Any], list[str] | None]:
        stem = os.path.join(self.case_dir, case.case_id + (".quant" if job == "quant" else ""))
        settings = case_settings(case, self.settings)
        req: dict[str, Any] = {"job": job, "case_id": case.case_id, "log_path": stem + ".log",
                               "csv_path": stem + ".csv", "settings": asdict(settings)}
        argv = None
        if job == "driver":
            argv = driver_argv(case, settings)
            req["argv"] = argv
        else:
            req["case"] = case.to_dict()
        return req, argv

    def _execute(self, case: Case, job: str) -> tuple[Outcome, list[str] | None, str]:
        req, argv = self._request(case, job)
        for stale in (req["log_path"], req["csv_path"]):
            if os.path.exists(stale):
                os.remove(stale)
        reply: WorkerReply = self._pool().run(req, self.settings.case_timeout)
        try:
            with open(req["log_path"], errors="replace") as f:
                log_text = f.read()
        except OSError:
            log_text = ""
        if reply.lost and not log_text.strip():
            # Died before the case started writing (start-up): the worker log says why.
            log_text = _tail_file(os.path.join(self.case_dir, "worker.log"))
        settings = case_settings(case, self.settings)
        if job == "driver":
            outcome = classify_driver_case(log_text, read_driver_csv(req["csv_path"]), reply,
                                           settings, case.backend, case.routine)
        else:
            outcome = classify_python_case(log_text, reply, settings)
        return outcome, argv, req["log_path"]

    def run_one(self, case: Case) -> Row:
        if case.skip_reason:
            return row_from_case(case, Outcome("unsupported", case.skip_reason))
        if case.job == "driver" and not self.flashinfer_repo:
            return row_from_case(case, Outcome("failed", self.missing_driver))
        if case.with_quant:
            return self._run_with_quant(case)
        outcome, argv, log_path = self._execute(case, case.job)
        row = row_from_case(case, outcome)
        self._append_log(case, argv, log_path, row)
        return row

    def _run_with_quant(self, case: Case) -> Row:
        base = self.rows.get(case.base_case_id)
        if base is None:
            return row_from_case(case, Outcome("failed", f"base case {case.base_case_id} is not in this run"))
        if base.status == "unsupported":
            return row_from_case(case, Outcome("unsupported", f"base case unsupported: {base.reason}"))
        if base.status == "incorrect":
            return row_from_case(case, Outcome("incorrect", f"base case incorrect: {base.reason}"))
        if base.status != "ok" or base.median_us is None:
            return row_from_case(case, Outcome("failed", f"base case failed: {base.reason}"))
        q, argv, log_path = self._execute(case, "quant")
        if q.status != "ok" or q.median_us is None:
            word = "unsupported" if q.status == "unsupported" else "failed"
            row = row_from_case(case, Outcome(q.status, f"activation quantization {word}: {q.reason}",
                                              timer=q.timer))
        else:
            timer = base.timer if q.timer == base.timer else next(t for t in (q.timer, base.timer) if t != "cupti")
            std = math.hypot(base.std_us or 0.0, q.std_us or 0.0)
            reason = "; ".join(x for x in (base.reason, q.reason) if x)
            check = {k: getattr(base, k) for k in ("check", "max_abs_err", "rel_l2_err", "argmax_match",
                                                   "check_note")}
            launches = (None if base.launches_per_call is None or q.launches_per_call is None
                        else base.launches_per_call + q.launches_per_call)
            row = row_from_case(case, Outcome("ok", reason, base.median_us + q.median_us, std, timer,
                                              launches_per_call=launches, check=check),
                                quant_us=q.median_us)
            row = dataclasses.replace(row, **_sum_spread(base, q))
        self._append_log(case, argv, log_path, row)
        return row

    # -- all cases
    def run(self) -> list[Row]:
        os.makedirs(self.case_dir, exist_ok=True)
        todo = [c for c in self.cases if c.case_id not in self.rows]
        # Kernel-only cases first: a with_quant row adds its quant time to its base row's time.
        todo.sort(key=lambda c: c.with_quant)
        estimator = EtaEstimator()
        t0 = time.monotonic()
        try:
            for i, case in enumerate(todo, 1):
                started = time.monotonic()
                row = annotate(self.run_one(case), self.gpu)
                self.rows[case.case_id] = row
                self.save()
                estimator.record(case, time.monotonic() - started)
                eta = estimator.eta(todo[i:])
                print(progress_line(i, len(todo), case, row, time.monotonic() - t0, eta),
                      file=self.progress, flush=True)
        finally:
            if self.pool is not None:
                self.pool.stop(kill=True)
        return [self.rows[c.case_id] for c in self.cases]


def _sum_spread(base: Row, quant: Outcome) -> dict[str, Any]:
    """Percentile fields of a with_quant row: the distribution of kernel + quantization sums
    (timing.sum_percentiles over the two sample sets), or why there are none."""
    if not base.samples_us or not quant.samples_us:
        part = "kernel" if not base.samples_us else "activation quantization"
        return {"spread_note": f"no percentiles: the {part} part has no per-iteration times"}
    return {**sum_percentiles(base.samples_us, quant.samples_us),
            "n_samples": min(len(base.samples_us), len(quant.samples_us)), "samples_us": None,
            "spread_note": f"percentiles of kernel + quantization over every pair of their "
                           f"{len(base.samples_us)} x {len(quant.samples_us)} samples (timed separately)"}


def _tail_file(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _environment(probe: EnvironmentProbe, flashinfer_repo: str | None) -> dict[str, Any]:
    try:
        return probe(flashinfer_repo)
    except Exception as e:  # noqa: BLE001  (recording the machine must never lose a run)
        return {"warnings": [f"environment.collect failed: {type(e).__name__}: {e}"]}


def _notes(caps: Capabilities) -> dict[str, Any]:
    return {"timing": TIMING_NOTE, "quant_timing": QUANT_TIMING_NOTE,
            "downloads": no_download_note(os.environ),
            "capabilities": f"backend support per GPU from {caps.origin}"}


def exit_code(rows: Iterable[Row]) -> int:
    """0 iff no row failed or came out incorrect."""
    return 1 if any(r.status in ("failed", "incorrect") for r in rows) else 0


def run_plan(plan: Plan | None, cases: list[Case], settings: RunSettings, workdir: str,
             flashinfer_repo: str | None, gpu: Gpu | None, *,
             resume: bool = False, command: list[str] | None = None,
             progress: TextIO | None = None, environment: EnvironmentProbe,
             report: ReportWriter | None = None, caps: Capabilities = HAND) -> int:
    """Run `cases` into `workdir` (which check_workdir accepted); write every output; exit code."""
    progress = progress if progress is not None else sys.stderr
    os.makedirs(workdir, exist_ok=True)
    kept, n_prev = load_kept(workdir, cases) if resume else ({}, 0)
    if resume:
        print(f"resume: kept {len(kept)} of {n_prev} earlier rows; "
              f"{len(cases) - len(kept)} cases to run or re-decide", file=progress)
    write_text_atomic(os.path.join(workdir, TESTLIST), testlist_text(cases, settings))
    timestamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    header = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "run_id": new_run_id(timestamp),
        "tool": {"name": "benchmark-model-kernels", "version": __version__},
        "command": list(command if command is not None else sys.argv),
        "timestamp": timestamp,
        "environment": _environment(environment, flashinfer_repo),
        "settings": asdict(settings),
        "plan": plan.to_dict() if plan is not None else None,
        "notes": _notes(caps),
    }
    if resume and kept:
        header["notes"]["resumed"] = f"{len(kept)} rows kept from the previous run (results.prev.json)"
        # A resumed run is the same run continued: its rows keep the run id they were written under.
        header["run_id"] = derived_run_id(load_results(os.path.join(workdir, PREV_RESULTS)))
    runner = Runner(cases, settings, workdir, flashinfer_repo, header, gpu, kept, progress)
    runner.save()
    if any(c.driver_args and not c.skip_reason for c in cases):
        print(no_download_note(os.environ), file=progress)
        print(header["notes"]["capabilities"], file=progress)
    with stop_signals_raise():  # SIGTERM and SIGHUP end the run as Ctrl-C does
        try:
            rows = runner.run()
        except KeyboardInterrupt as interrupt:
            return _save_interrupted(runner, interrupt, progress)
    runner.save()
    write_text_atomic(os.path.join(workdir, RESULTS_CSV), csv_text(rows, run_facts(runner.payload())))
    if report is not None:
        _write_report(report, workdir, progress)
    failed = [r for r in rows if r.status == "failed"]
    incorrect = [r for r in rows if r.status == "incorrect"]
    n_ok = sum(r.status == "ok" for r in rows)
    print(f"{len(rows)} rows: {n_ok} ok, {len(rows) - n_ok - len(failed) - len(incorrect)} unsupported, "
          f"{len(failed)} failed, {len(incorrect)} incorrect -> {os.path.join(workdir, RESULTS_JSON)}",
          file=progress)
    if plan is not None and plan.unsupported:
        print(f"note: the plan has {len(plan.unsupported)} module(s) it could not place; they have "
              "no rows (see the plan in results.json)", file=progress)
    return exit_code(rows)


def _save_interrupted(runner: Runner, interrupt: KeyboardInterrupt, progress: TextIO) -> int:
    """Write the rows measured before `interrupt`, say how to resume; 128 + its signal."""
    runner.save()
    done = [runner.rows[c.case_id] for c in runner.cases if c.case_id in runner.rows]
    write_text_atomic(os.path.join(runner.workdir, RESULTS_CSV), csv_text(done, run_facts(runner.payload())))
    try:
        print(f"interrupted by {interrupt_signal(interrupt).name} after {len(done)} of "
              f"{len(runner.cases)} rows; results.json and the CSV hold them; continue with the "
              "same command plus --resume", file=progress, flush=True)
    except OSError:  # a SIGHUP's terminal may be gone; the rows are written, which is what counts
        pass
    return interrupt_exit_code(interrupt)


def _write_report(report: ReportWriter, workdir: str, progress: TextIO) -> None:
    try:
        path = report([workdir])
        print(f"report: {path}", file=progress)
    except Exception as e:  # noqa: BLE001  (the report must never lose results)
        print(f"warning: report not written: {type(e).__name__}: {e}", file=progress)


def run_from_args(args: argparse.Namespace, plan: Plan, *, environment: EnvironmentProbe,
                  report: ReportWriter | None = None, resume_may_start_fresh: bool = False) -> int:
    """Run (or dry-run) `plan` as the parsed flags say; returns the exit code (prints usage errors
    as one `error:` line and returns 2 itself, so callers need no try/except).
    `resume_may_start_fresh`: this is one run of a sweep resumed with --resume; without a
    results.json it starts fresh instead of being refused."""
    if (resume_may_start_fresh and args.resume and args.workdir
            and not os.path.isfile(os.path.join(args.workdir, RESULTS_JSON))):
        args = argparse.Namespace(**{**vars(args), "resume": False})  # not started yet: fresh
    return cli_main(lambda: run_from_request(validate_args(args), plan, environment=environment, report=report))


def run_from_request(request: RunRequest, plan: Plan, *, environment: EnvironmentProbe,
                     report: ReportWriter | None = None,
                     capabilities: CapabilityProbe = load_capabilities) -> int:
    """Plan the cases of `request` (raises UsageError when there are none), create its workdir, and
    dry-run or run them; returns the exit code. Backend support per GPU comes from the installed
    FlashInfer where it answers (`capabilities`), else from the hand table; the output says which."""
    gpu = request.gpu
    caps = capabilities(request.flashinfer_repo)
    cases = plan_cases(plan, request.ms, request.dtypes, request.backends, gpu[1] if gpu else None,
                       request.settings.modes, caps)
    if not cases:
        raise UsageError("--dtypes", " ".join(request.dtypes), "no cases to run for this plan; "
                         "widen --dtypes/--backends")
    make_workdir(request.workdir)
    rerun = "free space and run the same command again" if request.dry_run else \
        "free space and rerun with --resume (results.json holds every row written so far)"
    # One run per workdir, dry runs included; the lock ends with the process, however it ends.
    with disk_full_as_usage_error("--workdir", request.workdir, rerun), workdir_lock(request.workdir):
        check_workdir(request.workdir, request.resume)  # again: a run may have finished meanwhile
        if request.dry_run:
            print(f"backend support per GPU from {caps.origin}")
            return dry_run(cases, request.settings, request.workdir, gpu=gpu)
        return run_plan(plan, cases, request.settings, request.workdir, request.flashinfer_repo, gpu,
                        resume=request.resume, environment=environment, report=report, caps=caps)


__all__ = [
    "CapabilityProbe",
    "EnvironmentProbe",
    "ReportWriter",
    "Runner",
    "TIMING_NOTE",
    "annotate",
    "exit_code",
    "plan_cases",
    "run_from_args",
    "run_plan",
    "run_from_request",
]
