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
import json
import math
import os
import shlex
import sys
import threading
import time
from dataclasses import asdict, replace
from typing import Any, Callable, Iterable, TextIO

from ..cases import build as case_building
from ..cases.attention import DEFAULT_SWEEP, AttentionSweep, mark_unfit
from ..cases.capabilities import HAND, Capabilities, default_answer_dir, load_capabilities
from ..core.case_schema import Case
from ..core.errors import UsageError, cli_main
from ..core.files import disk_full_as_usage_error, write_text_atomic
from ..core.plan_schema import Plan
from ..core.results_schema import (
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
from ..core.version import __version__
from ..kernels.quant_timing import QUANT_TIMING_NOTE
from ..kernels.timing import sum_percentiles
from . import phases, roofline
from .argv import case_settings, driver_argv, tuning_buckets
from .cache import ResultCache, machine_fingerprint, missing_machine_fields
from .flags import Gpu, RunRequest, validate_args
from .interrupts import interrupt_exit_code, interrupt_signal, stop_signals_raise
from .outcome import Outcome, WorkerReply, classify_driver_case, classify_python_case, read_driver_csv, row_from_case
from .pool import WorkerPool, no_download_note
from .progress import EtaEstimator, progress_line
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


def kept_capabilities(flashinfer_repo: str | None) -> Capabilities:
    """The run's probe: FlashInfer's answer, kept per build, driver checkout and probe code in the
    per-user cache folder (`load_capabilities`)."""
    return load_capabilities(flashinfer_repo, cache_dir=default_answer_dir())


def plan_cases(plan: Plan, ms: Iterable[int], dtypes: Iterable[str], backends: Iterable[str] | None,
               compute_capability: tuple[int, int] | None, modes: Iterable[str] = ("graph",),
               caps: Capabilities = HAND, attention: AttentionSweep = DEFAULT_SWEEP) -> list[Case]:
    """The plan's cases under these filters (build_cases, which also refuses duplicate case ids),
    each once per timing mode; a --backends value that matches no case is a UsageError naming the
    backends there are. `caps`: what the installed FlashInfer says about its backends;
    `attention`: what the attention cases cover."""
    ms = list(ms)
    built = case_building.build_cases(plan, ms, list(dtypes), list(backends) if backends else None,
                                      compute_capability, caps, attention)
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
    """Runs cases through one WorkerPool per GPU (`devices`: the CUDA_VISIBLE_DEVICES value each
    worker is pinned to; [None], the default, is one worker on whatever GPU the run sees),
    appending to driver.log and rewriting results.json. A `cache` serves the cases it holds
    and keeps what this run measures."""

    def __init__(self, cases: list[Case], settings: RunSettings, workdir: str,
                 flashinfer_repo: str | None, header: dict[str, Any],
                 gpu: Gpu | None, kept: dict[str, Row] | None = None,
                 progress: TextIO | None = None, cache: ResultCache | None = None,
                 devices: list[str | None] | None = None):
        self.cases, self.settings, self.workdir = cases, settings, workdir
        self.flashinfer_repo, self.header, self.gpu = flashinfer_repo, header, gpu
        self.rows: dict[str, Row] = dict(kept or {})
        self.progress = progress if progress is not None else sys.stderr
        self.case_dir = os.path.join(workdir, CASE_DIR)
        self.missing_driver = missing_driver_reason(header.get("environment") or {})
        self.cache = cache
        self.devices: list[str | None] = list(devices or [None])
        self.pools: dict[int, WorkerPool] = {}
        # Worker threads (one per GPU) share the rows, results.json, driver.log and the progress.
        self._lock = threading.RLock()
        self._row_texts: dict[str, tuple[Row, str]] = {}
        self._saved_at = 0.0
        self._header_texts: dict[str, str] = {}

    # -- files
    def _ordered(self) -> list[Row]:
        return [self.rows[c.case_id] for c in self.cases if c.case_id in self.rows]

    def _head(self, ordered: list[Row]) -> dict[str, Any]:
        """The payload without its rows (they come last)."""
        payload = dict(self.header)
        notes = dict(payload.get("notes") or {})
        if len(ordered) < len(self.cases):
            notes["incomplete"] = (f"{len(ordered)} of {len(self.cases)} cases have rows "
                                   "(run in progress or interrupted)")
        payload["notes"] = notes
        return payload

    def payload(self) -> dict[str, Any]:
        ordered = self._ordered()
        return {**self._head(ordered), "rows": [asdict(r) for r in ordered]}

    def save(self) -> None:
        with self._lock:
            write_text_atomic(os.path.join(self.workdir, RESULTS_JSON), self.payload_text())

    def payload_text(self) -> str:
        """json.dumps(self.payload(), indent=1) + newline, the text write_json_atomic writes, made
        from each row's text cached when the row is recorded: results.json is rewritten after every
        case, and re-encoding every row and the plan each time cost seconds per hundred cases
        (quadratic in the cases) on a sweep of several hundred rows."""
        ordered = self._ordered()
        members = []
        for key, value in self._head(ordered).items():
            if key in self.header and key != "notes":
                text = self._header_text(key)
            else:
                text = _indent(json.dumps(value, indent=1), " ")
            members.append(f" {json.dumps(key)}: {text}")
        rows = ("[\n" + ",\n".join("  " + _indent(self._row_text(r), "  ") for r in ordered)
                + "\n ]") if ordered else "[]"
        members.append(f' "rows": {rows}')
        return "{\n" + ",\n".join(members) + "\n}\n"

    def _row_text(self, row: Row) -> str:
        cached = self._row_texts.get(row.case_id)
        if cached is None or cached[0] is not row:
            cached = (row, json.dumps(asdict(row), indent=1))
            self._row_texts[row.case_id] = cached
        return cached[1]

    def _header_text(self, key: str) -> str:
        """A header member's JSON (the header is fixed once the runner exists; notes are not)."""
        if key not in self._header_texts:
            self._header_texts[key] = _indent(json.dumps(self.header[key], indent=1), " ")
        return self._header_texts[key]

    def _append_log(self, case: Case, argv: list[str] | None, log_path: str | None, row: Row,
                    origin: str = "") -> None:
        try:
            with open(log_path or "", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        with self._lock, open(os.path.join(self.workdir, DRIVER_LOG), "a") as log:
            log.write(f"===== BEGIN {case.case_id} =====\n")
            if origin:
                log.write(f"(not run: copied from the {origin})\n")
            elif argv:
                log.write(f"$ flashinfer_benchmark.py {shlex.join(argv)}\n")
            elif not case.skip_reason:
                what = "quant_timing.measure_quant" if case.with_quant else "torch_ops.run_case"
                log.write(f"$ {what}({case.routine} {case.variant or ''}".rstrip() + ")\n")
            log.write(text if text.endswith("\n") or not text else text + "\n")
            log.write(f"===== END {case.case_id}: {row.status}"
                      + (f": {row.reason}" if row.reason else "") + " =====\n")
        if log_path and os.path.exists(log_path):
            os.remove(log_path)

    # -- one case
    def _pool(self, slot: int) -> WorkerPool:
        """The worker pool of GPU slot `slot` (made on first use: a run served wholly from the
        cache starts no worker)."""
        if slot not in self.pools:
            device = self.devices[slot]
            log = "worker.log" if device is None else f"worker.gpu{device}.log"
            self.pools[slot] = WorkerPool(self.flashinfer_repo, os.path.join(self.case_dir, log),
                                          device=device)
        return self.pools[slot]

    def _request(self, case: Case, job: str) -> tuple[dict[str, Any], list[str] | None]:
        stem = os.path.join(self.case_dir, case.case_id + (".quant" if job == "quant" else ""))
        settings = case_settings(case, self.settings)
        req: dict[str, Any] = {"job": job, "case_id": case.case_id, "log_path": stem + ".log",
                               "csv_path": stem + ".csv", "settings": asdict(settings)}
        argv = None
        if job == "driver":
            argv = driver_argv(case, settings)
            req["argv"] = argv
            buckets = tuning_buckets(case, settings)
            if buckets:
                req["tuning_buckets"] = list(buckets)
        else:
            req["case"] = case.to_dict()
        return req, argv

    def _execute(self, case: Case, job: str, slot: int = 0
                 ) -> tuple[Outcome, list[str] | None, str | None, str]:
        """(outcome, driver argv, case log, origin): from the cache (origin says where it was
        measured; no argv, no log) or timed now by GPU slot `slot`'s worker (origin "")."""
        record = self.cache.record(case, job, self.settings) if self.cache else None
        if self.cache and record:
            hit = self.cache.get(record)
            if hit is not None:
                return hit.outcome, None, None, hit.origin
        outcome, argv, log_path = self._time(case, job, slot)
        if self.cache and record and not self.cache.put(record, outcome, case.case_id) \
                and self.cache.write_error:
            print(f"warning: result cache not written: {self.cache.write_error}", file=self.progress)
            self.cache.write_error = ""
        return outcome, argv, log_path, ""

    def _time(self, case: Case, job: str, slot: int) -> tuple[Outcome, list[str] | None, str]:
        req, argv = self._request(case, job)
        for stale in (req["log_path"], req["csv_path"]):
            if os.path.exists(stale):
                os.remove(stale)
        pool = self._pool(slot)
        reply: WorkerReply = pool.run(req, self.settings.case_timeout)
        try:
            with open(req["log_path"], errors="replace") as f:
                log_text = f.read()
        except OSError:
            log_text = ""
        if reply.lost and not log_text.strip():
            # Died before the case started writing (start-up): the worker log says why.
            log_text = _tail_file(pool.worker_log)
        settings = case_settings(case, self.settings)
        if job == "driver":
            outcome = classify_driver_case(log_text, read_driver_csv(req["csv_path"]), reply,
                                           settings, case.backend, case.routine)
        else:
            outcome = classify_python_case(log_text, reply, settings)
        return outcome, argv, req["log_path"]

    def run_one(self, case: Case, slot: int = 0) -> Row:
        if case.skip_reason:
            return row_from_case(case, Outcome("unsupported", case.skip_reason))
        if case.job == "driver" and not self.flashinfer_repo:
            return row_from_case(case, Outcome("failed", self.missing_driver))
        if case.with_quant:
            return self._run_with_quant(case, slot)
        outcome, argv, log_path, origin = self._execute(case, case.job, slot)
        row = replace(row_from_case(case, outcome), origin=origin)
        self._append_log(case, argv, log_path, row, origin)
        return row

    def _run_with_quant(self, case: Case, slot: int) -> Row:
        base = self.rows.get(case.base_case_id)
        if base is None:
            return row_from_case(case, Outcome("failed", f"base case {case.base_case_id} is not in this run"))
        if base.status == "unsupported":
            return row_from_case(case, Outcome("unsupported", f"base case unsupported: {base.reason}"))
        if base.status == "incorrect":
            return row_from_case(case, Outcome("incorrect", f"base case incorrect: {base.reason}"))
        if base.status != "ok" or base.median_us is None:
            return row_from_case(case, Outcome("failed", f"base case failed: {base.reason}"))
        q, argv, log_path, origin = self._execute(case, "quant", slot)
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
        # The sum holds the base row's number too: copied if either part was.
        row = replace(row, origin="; ".join(dict.fromkeys(o for o in (origin, base.origin) if o)))
        self._append_log(case, argv, log_path, row, origin)
        return row

    # -- all cases
    def run(self) -> list[Row]:
        os.makedirs(self.case_dir, exist_ok=True)
        todo = [c for c in self.cases if c.case_id not in self.rows]
        # Kernel-only cases first: a with_quant row adds its quant time to its base row's time.
        todo.sort(key=lambda c: c.with_quant)
        self._todo, self._done = todo, 0
        self._estimator, self._t0 = EtaEstimator(), time.monotonic()
        try:
            if len(self.devices) == 1:
                for case in todo:
                    started = time.monotonic()
                    self._record(case, annotate(self.run_one(case), self.gpu), started)
            else:
                self._run_on_every_gpu(todo)
        finally:
            for pool in self.pools.values():
                pool.stop(kill=True)
        return [self.rows[c.case_id] for c in self.cases]

    def _record(self, case: Case, row: Row, started: float) -> None:
        with self._lock:
            self.rows[case.case_id] = row
            # A timed row is on disk before the next case starts. Rows that cost nothing to make
            # again (decided before launch, copied from the cache) are written at most every
            # SAVE_EVERY_S: a sweep has hundreds of them, and a --resume after a kill re-makes the
            # few not yet written at once.
            how, now = _how_obtained(case, row), time.monotonic()
            if how not in ("cache", "decided") or now - self._saved_at >= SAVE_EVERY_S:
                self.save()
                self._saved_at = now
            self._done += 1
            self._estimator.record(case, time.monotonic() - started)
            phases.clock().add_job(how, time.monotonic() - started)
            left = [c for c in self._todo if c.case_id not in self.rows]
            print(progress_line(self._done, len(self._todo), case, row, time.monotonic() - self._t0,
                                self._estimator.eta(left)), file=self.progress, flush=True)

    def _run_on_every_gpu(self, todo: list[Case]) -> None:
        """One thread per GPU slot takes the next case in `todo` order; a with_quant case waits
        until its base case has a row. Rows land in self.rows by case id, so results.json lists
        them in case order, as a run on one GPU does. A stop signal reaches this (main) thread:
        it kills every worker, and the rows finished so far are what the run keeps."""
        queue = list(todo)
        pending = {c.case_id for c in todo}
        ready = threading.Condition(self._lock)
        stopping = threading.Event()
        errors: list[BaseException] = []
        # Each thread sets its own event when done (its worker reaped): Thread.join interrupted by
        # the stop signal can report a running thread as ended (Python 3.11), so it is not used.
        finished = [threading.Event() for _ in self.devices]

        def next_case() -> Case | None:
            with ready:
                if stopping.is_set() or not queue:
                    return None
                case = queue.pop(0)
                if case.with_quant:
                    ready.wait_for(lambda: stopping.is_set() or case.base_case_id not in pending)
                return None if stopping.is_set() else case

        def work(slot: int) -> None:
            try:
                while (case := next_case()) is not None:
                    started = time.monotonic()
                    row = annotate(self.run_one(case, slot), self.gpu)
                    if stopping.is_set():
                        return  # its worker was killed under it: not a measurement
                    with ready:
                        self._record(case, row, started)
                        pending.discard(case.case_id)
                        ready.notify_all()
            except BaseException as e:  # noqa: BLE001  (re-raised by the main thread)
                errors.append(e)
                stopping.set()
                with ready:
                    ready.notify_all()
            finally:
                # This thread started the worker, whose parent-death signal fires when the thread
                # ends: stop it first.
                if slot in self.pools:
                    self.pools[slot].stop(kill=True)
                finished[slot].set()

        threads = [threading.Thread(target=work, args=(slot,), name=f"gpu-slot-{slot}", daemon=True)
                   for slot in range(len(self.devices))]
        for t in threads:
            t.start()
        try:
            for done in finished:
                while not done.wait(0.2):
                    pass
        except BaseException:
            stopping.set()
            with ready:
                ready.notify_all()
            for pool in list(self.pools.values()):
                pool.kill()
            for done in finished:
                done.wait(STOP_WAIT_S)
            raise
        if errors:
            raise errors[0]


#: Seconds a stopped multi-GPU run waits for each worker thread to reap its killed worker.
STOP_WAIT_S = 10.0


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


def _indent(text: str, by: str) -> str:
    """JSON text of a nested value: every line after its first indented `by` more."""
    return text.replace("\n", "\n" + by)


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


def open_cache(cache_dir: str | None, gpu: Gpu | None, environment: dict[str, Any], run_id: str,
               timestamp: str, workdir: str, progress: TextIO) -> ResultCache | None:
    """The result cache of this run, or None (--no_cache, or the machine is not known well enough
    for a number to be reused: then it says so on `progress`)."""
    if not cache_dir:
        return None
    machine = machine_fingerprint(gpu, environment)
    missing = missing_machine_fields(machine)
    if missing:
        print(f"note: result cache not used: this machine's {', '.join(missing)} unknown, so no "
              "number can be matched to it; every case is timed", file=progress)
        return None
    return ResultCache(os.path.abspath(cache_dir), machine, run_id, timestamp, workdir)


def run_plan(plan: Plan | None, cases: list[Case], settings: RunSettings, workdir: str,
             flashinfer_repo: str | None, gpu: Gpu | None, *,
             resume: bool = False, command: list[str] | None = None,
             progress: TextIO | None = None, environment: EnvironmentProbe,
             report: ReportWriter | None = None, caps: Capabilities = HAND,
             cache_dir: str | None = None, devices: list[str | None] | None = None) -> int:
    """Run `cases` into `workdir` (which check_workdir accepted); write every output; exit code.
    `cache_dir`: the result cache to read and extend (None: time every case); `devices`: one
    worker per entry, pinned to that CUDA_VISIBLE_DEVICES value (None: one unpinned worker)."""
    progress = progress if progress is not None else sys.stderr
    os.makedirs(workdir, exist_ok=True)
    kept, n_prev = load_kept(workdir, cases, settings) if resume else ({}, 0)
    if resume:
        print(f"resume: kept {len(kept)} of {n_prev} earlier rows; "
              f"{len(cases) - len(kept)} cases to run or re-decide", file=progress)
    write_text_atomic(os.path.join(workdir, TESTLIST), testlist_text(cases, settings))
    timestamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    clock = phases.clock()
    with clock.phase("environment"):
        machine = _environment(environment, flashinfer_repo)
    header = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "run_id": new_run_id(timestamp),
        "tool": {"name": "benchmark-model-kernels", "version": __version__},
        "command": list(command if command is not None else sys.argv),
        "timestamp": timestamp,
        "environment": machine,
        "settings": asdict(settings),
        "plan": plan.to_dict() if plan is not None else None,
        "notes": _notes(caps),
    }
    if resume and kept:
        header["notes"]["resumed"] = f"{len(kept)} rows kept from the previous run (results.prev.json)"
        # A resumed run is the same run continued: its rows keep the run id they were written under.
        header["run_id"] = derived_run_id(load_results(os.path.join(workdir, PREV_RESULTS)))
    cache = open_cache(cache_dir, gpu, machine, header["run_id"], timestamp, workdir, progress)
    if cache is not None:
        header["notes"]["result_cache"] = (
            f"{cache.folder}: a row whose `origin` is set was not timed by this run but copied "
            "from the run it names, measured on this GPU model with these driver, CUDA, torch, "
            "FlashInfer and triton versions and these timing settings (--no_cache times every case)")
    if devices and len(devices) > 1:
        header["notes"]["gpus"] = (f"cases spread over {len(devices)} GPUs of one model "
                                   f"(CUDA_VISIBLE_DEVICES {', '.join(map(str, devices))}), one worker each")
    runner = Runner(cases, settings, workdir, flashinfer_repo, header, gpu, kept, progress,
                    cache=cache, devices=devices)
    runner.save()
    if any(c.driver_args and not c.skip_reason for c in cases):
        print(no_download_note(os.environ), file=progress)
        print(header["notes"]["capabilities"], file=progress)
    with stop_signals_raise():  # SIGTERM and SIGHUP end the run as Ctrl-C does
        try:
            with clock.phase("cases"):
                rows = runner.run()
        except KeyboardInterrupt as interrupt:
            return _save_interrupted(runner, interrupt, progress)
    with clock.phase("write"):
        # The timings so far ride in results.json; the report's own seconds come after it is read.
        header["timings"] = clock.as_dict()
        runner.save()
        write_text_atomic(os.path.join(workdir, RESULTS_CSV), csv_text(rows, run_facts(runner.payload())))
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


def _save_interrupted(runner: Runner, interrupt: KeyboardInterrupt, progress: TextIO) -> int:
    """Write the rows measured before `interrupt` (and where the time went until then), say how
    to resume; 128 + its signal."""
    runner.header["timings"] = phases.clock().as_dict()  # its "cases" phase ends at the signal
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
                     capabilities: CapabilityProbe = kept_capabilities) -> int:
    """Plan the cases of `request` (raises UsageError when there are none), create its workdir, and
    dry-run or run them; returns the exit code. Backend support per GPU comes from the installed
    FlashInfer where it answers (`capabilities`), else from the hand table; the output says which."""
    gpu = request.gpu
    with phases.clock().phase("capabilities"):
        caps = capabilities(request.flashinfer_repo)
    cases = plan_cases(plan, request.ms, request.dtypes, request.backends, gpu[1] if gpu else None,
                       request.settings.modes, caps, request.settings.attention_sweep)
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
        if request.dry_run:
            print(f"backend support per GPU from {caps.origin}")
            return dry_run(cases, request.settings, request.workdir, gpu=gpu)
        return run_plan(plan, cases, request.settings, request.workdir, request.flashinfer_repo, gpu,
                        resume=request.resume, environment=environment, report=report, caps=caps,
                        cache_dir=request.cache_dir, devices=list(request.devices) if request.devices else None)


__all__ = [
    "CapabilityProbe",
    "kept_capabilities",
    "EnvironmentProbe",
    "ReportWriter",
    "Runner",
    "TIMING_NOTE",
    "annotate",
    "exit_code",
    "open_cache",
    "plan_cases",
    "run_from_args",
    "run_plan",
    "run_from_request",
]
