"""The run loop: Cases -> one Row each -> results.json (+ CSV, testlist, driver.log, report).

In: a Plan and the parsed run flags (`run_from_args`, what both CLIs call; `run_from_request` once
flags.validate_args has checked them), or the checked RunRequest and its planned Cases
(`run_plan`). Out: the workdir's files (workdir.py lists them) and the exit code. `run_start`
records the machine and opens the result cache; each case goes to `case_execution` (the worker
pool, pool.py; its output becomes an Outcome, outcome.py, and a Row with roofline numbers), on
several GPUs through `gpu_fanout`; results.json (`results_file`) is rewritten as rows come in.

Exit codes: 0 every row ok/unsupported; 1 some row failed (after everything is written);
2 bad input (one `error:` line, nothing written or overwritten); 128 + the signal when stopped by
SIGINT (130), SIGTERM (143) or SIGHUP (129): the rows so far are written, --resume continues (the
worker ends with the run however the run ends: pool.py, lifetime.py).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time
from typing import Callable, Iterable, TextIO

from ..cases import build as case_building
from ..cases.attention import DEFAULT_SWEEP, AttentionSweep, mark_unfit
from ..cases.capabilities import HAND, Capabilities, PendingProbe, default_answer_dir, load_capabilities, start_probe
from ..core.case_schema import Case
from ..core.errors import UsageError, cli_main
from ..core.files import disk_full_as_usage_error, write_text_atomic
from ..core.plan_schema import Plan
from ..core.results_schema import RESULTS_JSON, Row, derived_run_id, load_results
from . import lifetime, phases
from .case_execution import CaseExecutor, annotate
from .flags import Gpu, RunRequest, validate_args
from .gpu_fanout import run_on_every_gpu
from .interrupts import interrupt_exit_code, interrupt_signal, stop_signals_raise
from .pool import no_download_note
from .progress import EtaEstimator, progress_line
from .results_file import ResultsFile
from .run_start import EnvironmentProbe, cache_note, gpus_note, open_cache, recorded_environment, results_header
from .workdir import (
    PREV_RESULTS,
    TESTLIST,
    check_resume_plan,
    check_workdir,
    dry_run,
    load_kept,
    make_workdir,
    testlist_text,
    workdir_lock,
)

#: Renders the report of finished workdirs and returns its path (the CLIs pass
#: `report.report.write_report`); None writes no report.
ReportWriter = Callable[[list[str]], str]


#: What the installed FlashInfer says about its backends, given the --flashinfer_repo
#: (`cases.capabilities.load_capabilities`; tests stand in a table of their own).
CapabilityProbe = Callable[[str | None], Capabilities]


def kept_capabilities(flashinfer_repo: str | None) -> Capabilities:
    """The run's probe: FlashInfer's answer, kept per build, driver checkout and probe code in the
    per-user cache folder (`load_capabilities`)."""
    return load_capabilities(flashinfer_repo, cache_dir=default_answer_dir())


def start_kept_capabilities(flashinfer_repo: str | None) -> PendingProbe:
    """`kept_capabilities`, started: the probe child (seconds when FlashInfer's answer is not kept
    yet) runs while the caller plans, and dies with this process however it ends (the kernel's
    parent-death signal, lifetime.set_parent_death_signal: planning ends at once on a stop signal
    with os._exit, which runs no cleanup). The caller closes it when it will not wait for it."""
    parent = os.getpid()

    def die_with_the_run() -> None:
        lifetime.set_parent_death_signal()
        if os.getppid() != parent:  # the run ended before the signal was asked for
            os._exit(1)

    return start_probe(flashinfer_repo, cache_dir=default_answer_dir(), preexec_fn=die_with_the_run)


def plan_cases(plan: Plan, ms: Iterable[int], dtypes: Iterable[str], backends: Iterable[str] | None,
               compute_capability: tuple[int, int] | None, modes: Iterable[str] = ("graph",),
               caps: Capabilities = HAND, attention: AttentionSweep = DEFAULT_SWEEP,
               search_moe_tiles: bool = False) -> list[Case]:
    """The plan's cases under these filters (build_cases, which also refuses duplicate case ids),
    each once per timing mode; a --backends value that matches no case is a UsageError naming the
    backends there are. `caps`: what the installed FlashInfer says about its backends;
    `attention`: what the attention cases cover; `search_moe_tiles`: the Triton MoE `tuned` twins too."""
    ms = list(ms)
    built = case_building.build_cases(plan, ms, list(dtypes), list(backends) if backends else None,
                                      compute_capability, caps, attention, search_moe_tiles)
    if backends:
        seen = {c.backend for c in built}
        for b in backends:
            if b not in seen:
                everything = case_building.build_cases(plan, ms, list(dtypes), None, compute_capability,
                                                       caps, attention)
                known = " ".join(sorted({c.backend for c in everything})) or "(none)"
                raise UsageError("--backends", b, f"matches no case of this plan and these --dtypes; "
                                 f"choose from: {known}")
    return case_building.with_modes(built, list(modes))


class Runner:
    """Runs the cases of `results` that have no row yet through `executor` (those that need no
    worker first, then kernel-only cases), on one GPU slot or spread over every slot of
    `executor.devices`, recording each row in `results` with its roofline numbers for `gpu` and a
    progress line on `progress`."""

    def __init__(self, results: ResultsFile, executor: CaseExecutor, gpu: Gpu | None,
                 progress: TextIO | None = None):
        self.results, self.executor, self.gpu = results, executor, gpu
        self.cases = results.cases
        self.progress = progress if progress is not None else sys.stderr
        # Worker threads (one per GPU) share the rows, results.json and the progress.
        self.lock = results.lock
        self.slots = len(executor.devices)
        self._saved_at = 0.0

    def run_one(self, case: Case, slot: int = 0) -> Row:
        """`case`'s row, run on GPU slot `slot` (a with_quant case adds to its base case's row)."""
        base = self.results.rows.get(case.base_case_id) if case.with_quant else None
        return self.executor.run_one(case, slot, base)

    def row_of(self, case: Case, slot: int) -> Row:
        return annotate(self.run_one(case, slot), self.gpu)

    def stop_worker(self, slot: int) -> None:
        self.executor.stop_worker(slot)

    def kill_workers(self) -> None:
        self.executor.kill_workers()

    def run(self) -> list[Row]:
        os.makedirs(self.executor.case_dir, exist_ok=True)
        todo = [c for c in self.cases if c.case_id not in self.results.rows]
        # Kernel-only cases first: a with_quant row adds its quant time to its base row's time.
        todo.sort(key=lambda c: c.with_quant)
        self._todo, self._done = todo, 0
        self._estimator, self._t0 = EtaEstimator(), time.monotonic()
        try:
            # Rows that need no worker first (decided before launch, copied from the result
            # cache): they come in seconds, before the first timed case's worker start and JIT.
            timed = []
            for case in todo:
                started = time.monotonic()
                row = self.executor.row_at_once(case)
                if row is None:
                    timed.append(case)
                else:
                    self.record(case, annotate(row, self.gpu), started)
            if self.slots == 1 and any(not c.with_quant for c in timed):
                # The worker's own start-up (imports, CUDA) overlaps the warm-up's builds.
                self.executor.start_worker(0)
            warm_started = time.monotonic()
            warm = self.executor.warm_up(timed)
            if warm is not None:
                phases.clock().add_inner("jit warm-up", time.monotonic() - warm_started)
                phases.clock().warm_up_cases.update(warm.case_seconds)
            if self.slots == 1:
                for case in timed:
                    started = time.monotonic()
                    self.record(case, self.row_of(case, 0), started)
            else:
                run_on_every_gpu(self, timed)
            self.executor.record_built([c for c in timed if c.case_id in self.results.rows
                                        and self.results.rows[c.case_id].status == "ok"
                                        and not self.results.rows[c.case_id].origin])
        finally:
            self.executor.stop_workers()
        return [self.results.rows[c.case_id] for c in self.cases]

    def record(self, case: Case, row: Row, started: float) -> None:
        with self.lock:
            self.results.rows[case.case_id] = row
            # A timed row is on disk before the next case starts. Rows that cost nothing to make
            # again (decided before launch, copied from the cache) are written at most every
            # SAVE_EVERY_S: a sweep has hundreds of them, and a --resume after a kill re-makes the
            # few not yet written at once.
            how, now = _how_obtained(case, row), time.monotonic()
            timed = how not in ("cache", "decided")
            if timed or now - self._saved_at >= SAVE_EVERY_S:
                self.results.save()
                self._saved_at = now
            self._done += 1
            if how != "cache":  # a copied row says nothing of how long the timed ones take
                self._estimator.record(case, time.monotonic() - started)
            group = " ".join(x for x in (how, case.kind, case.backend, case.dtype, case.variant) if x) if timed else ""
            phases.clock().add_job(how, time.monotonic() - started, group)
            left = [c for c in self._todo if c.case_id not in self.results.rows]
            print(progress_line(self._done, len(self._todo), case, row, time.monotonic() - self._t0,
                                self._estimator.eta(left)), file=self.progress, flush=True)


#: Seconds between results.json writes while only rows that cost nothing to re-make come in.
SAVE_EVERY_S = 1.0


def _how_obtained(case: Case, row: Row) -> str:
    """The `cases_by_job` bucket of a row: copied from the cache, decided before launch, or the
    worker job that timed it."""
    if row.origin:
        return "cache"
    if case.skip_reason:
        return "decided"
    return case.job


def exit_code(rows: Iterable[Row]) -> int:
    """0 iff no row failed or came out incorrect."""
    return 1 if any(r.status in ("failed", "incorrect") for r in rows) else 0


def run_plan(request: RunRequest, cases: list[Case], *, plan: Plan | None = None, caps: Capabilities = HAND,
             environment: EnvironmentProbe, report: ReportWriter | None = None,
             command: list[str] | None = None, progress: TextIO | None = None) -> int:
    """Run `cases` (planned from `plan`, None for cases made by hand; `caps`: what FlashInfer said
    about its backends) into `request.workdir` (which check_workdir accepted) under the request's
    settings, result cache and GPUs; write every output; exit code. `command`: what results.json
    records as the command (None: this process's argv)."""
    progress = progress if progress is not None else sys.stderr
    workdir, settings = request.workdir, request.settings
    os.makedirs(workdir, exist_ok=True)
    kept, n_prev = load_kept(workdir, cases, settings, progress) if request.resume else ({}, 0)
    if request.resume:
        print(f"resume: kept {len(kept)} of {n_prev} earlier rows; "
              f"{len(cases) - len(kept)} cases to run or re-decide", file=progress)
    write_text_atomic(os.path.join(workdir, TESTLIST), testlist_text(cases, settings))
    timestamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    clock = phases.clock()
    with clock.phase("environment"):
        machine = recorded_environment(environment, request.flashinfer_repo)
    header = results_header(request, plan, caps, machine, timestamp, command)
    if request.resume and kept:
        header["notes"]["resumed"] = f"{len(kept)} rows kept from the previous run (results.prev.json)"
        # A resumed run is the same run continued: its rows keep the run id they were written under.
        header["run_id"] = derived_run_id(load_results(os.path.join(workdir, PREV_RESULTS)))
    cache = open_cache(request.cache_dir, request.gpu, machine, header["run_id"], timestamp, workdir, progress)
    if cache is not None:
        header["notes"]["result_cache"] = cache_note(cache)
    if request.devices and len(request.devices) > 1:
        header["notes"]["gpus"] = gpus_note(request.devices)
    results = ResultsFile(workdir, cases, header, kept)
    runner = Runner(results, CaseExecutor(request, machine or {}, cache, progress), request.gpu, progress)
    results.save()
    if any(c.driver_args and not c.skip_reason for c in cases):
        print(no_download_note(os.environ), file=progress)
        print(header["notes"]["capabilities"], file=progress)
    with stop_signals_raise():  # SIGTERM and SIGHUP end the run as Ctrl-C does
        try:
            with clock.phase("cases"):
                rows = runner.run()
        except KeyboardInterrupt as interrupt:
            return _save_interrupted(results, interrupt, progress)
    with clock.phase("write"):
        # The timings so far ride in results.json; the report's own seconds come after it is read.
        header["timings"] = clock.as_dict()
        results.save()
        results.write_csv()
    if report is not None:
        with clock.phase("report"):
            _write_report(report, workdir, progress)
    failed = [r for r in rows if r.status == "failed"]
    incorrect = [r for r in rows if r.status == "incorrect"]
    n_ok = sum(r.status == "ok" for r in rows)
    copied = sum(bool(r.origin) for r in rows)
    print(f"{len(rows)} rows: {n_ok} ok, {len(rows) - n_ok - len(failed) - len(incorrect)} unsupported, "
          f"{len(failed)} failed, {len(incorrect)} incorrect"
          + (f" ({copied} copied from the result cache)" if copied else "")
          + f" -> {os.path.join(workdir, RESULTS_JSON)}", file=progress)
    if plan is not None and plan.unsupported:
        print(f"note: the plan has {len(plan.unsupported)} module(s) it could not place; they have "
              "no rows (see the plan in results.json)", file=progress)
    print(clock.line(), file=progress)
    return exit_code(rows)


def _save_interrupted(results: ResultsFile, interrupt: KeyboardInterrupt, progress: TextIO) -> int:
    """Write the rows measured before `interrupt` (and where the time went until then), say how
    to resume; 128 + its signal."""
    results.header["timings"] = phases.clock().as_dict()  # its "cases" phase ends at the signal
    results.save()
    results.write_csv()
    try:
        print(f"interrupted by {interrupt_signal(interrupt).name} after {len(results.ordered())} of "
              f"{len(results.cases)} rows; results.json and the CSV hold them; continue with the "
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
                  report: ReportWriter | None = None, resume_may_start_fresh: bool = False,
                  capabilities: CapabilityProbe = kept_capabilities) -> int:
    """Run (or dry-run) `plan` as the parsed flags say; returns the exit code (prints usage errors
    as one `error:` line and returns 2 itself, so callers need no try/except).
    `resume_may_start_fresh`: this is one run of a sweep resumed with --resume; without a
    results.json it starts fresh instead of being refused."""
    if (resume_may_start_fresh and args.resume and args.workdir
            and not os.path.isfile(os.path.join(args.workdir, RESULTS_JSON))):
        args = argparse.Namespace(**{**vars(args), "resume": False})  # not started yet: fresh
    return cli_main(lambda: run_from_request(validate_args(args), plan, environment=environment, report=report,
                                             capabilities=capabilities))


def run_from_request(request: RunRequest, plan: Plan, *, environment: EnvironmentProbe,
                     report: ReportWriter | None = None,
                     capabilities: CapabilityProbe = kept_capabilities) -> int:
    """Plan the cases of `request` (raises UsageError when there are none), create its workdir, and
    dry-run or run them; returns the exit code. Backend support per GPU comes from the installed
    FlashInfer where it answers (`capabilities`), else from the hand table; the output says which."""
    gpu = request.gpu
    with phases.clock().phase("capabilities"):
        caps = capabilities(request.flashinfer_repo)
    cases = plan_cases(plan, request.ms, request.dtypes, request.backends, gpu[1] if gpu else None,
                       request.settings.modes, caps, request.settings.attention_sweep,
                       request.settings.search_moe_tiles)
    if request.gpu_memory_bytes:
        cases = mark_unfit(cases, plan, request.dtypes, request.gpu_memory_bytes)
    if not cases:
        raise UsageError("--dtypes", " ".join(request.dtypes), "no cases to run for this plan; "
                         "widen --dtypes/--backends")
    make_workdir(request.workdir)
    rerun = "free space and run the same command again" if request.dry_run else \
        "free space and rerun with --resume (results.json holds every row written so far)"
    # One run per workdir, dry runs included; the lock ends with the process, however it ends.
    with disk_full_as_usage_error("--workdir", request.workdir, rerun), workdir_lock(request.workdir):
        check_workdir(request.workdir, request.resume)  # again: a run may have finished meanwhile
        if request.resume:
            check_resume_plan(request.workdir, plan.to_dict())  # rows of another model: refused
        if request.dry_run:
            print(f"backend support per GPU from {caps.origin}")
            return dry_run(cases, request.settings, request.workdir, gpu=gpu)
        return run_plan(request, cases, plan=plan, caps=caps, environment=environment, report=report)


__all__ = [
    "CapabilityProbe",
    "kept_capabilities",
    "start_kept_capabilities",
    "ReportWriter",
    "Runner",
    "exit_code",
    "plan_cases",
    "run_from_args",
    "run_plan",
    "run_from_request",
]
