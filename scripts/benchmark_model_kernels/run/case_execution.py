"""One case -> one Row: served from the result cache or timed by a GPU slot's worker.

In: a Case, the run's RunRequest (settings, FlashInfer checkout, workdir, GPUs), the result cache
and, for a with_quant case, the row of its kernel-only base case. Out: the Row (roofline numbers are
`annotate`'s) and what ran appended to driver.log (the case's own log in cases/ moves there). A
case decided before launch (skip_reason) or a driver case without a driver starts no worker.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
import threading
from dataclasses import asdict, replace
from typing import Any, TextIO

from ..core.case_schema import Case
from ..core.results_schema import Row, RunSettings
from ..kernels.timing import sum_percentiles
from . import jit_warmup, roofline
from .argv import case_settings, driver_argv, tactic_cap, tuning_buckets
from .cache import ResultCache
from .driver_fills import GPU_FILL_MIN_NUMEL
from .flags import Gpu, RunRequest
from .outcome import Outcome, WorkerReply, classify_driver_case, classify_python_case, read_driver_csv, row_from_case
from .pool import WorkerPool
from .workdir import CASE_DIR, DRIVER_LOG


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


class CaseExecutor:
    """Runs cases on one WorkerPool per GPU slot (the request's `devices`: the CUDA_VISIBLE_DEVICES
    value each worker is pinned to; none given, one worker on whatever GPU the run sees), appending
    to driver.log. A `cache` serves the cases it holds and keeps what this run measures.
    `environment`: the run's machine record (what a missing driver's reason names)."""

    def __init__(self, request: RunRequest, environment: dict[str, Any], cache: ResultCache | None = None,
                 progress: TextIO | None = None):
        self.settings, self.flashinfer_repo = request.settings, request.flashinfer_repo
        self.workdir = request.workdir
        self.case_dir = os.path.join(request.workdir, CASE_DIR)
        self.devices: list[str | None] = list(request.devices or [None])
        self.missing_driver = missing_driver_reason(environment)
        self.environment = environment
        self.jit_warmup = request.jit_warmup
        self.cache = cache
        self.progress = progress if progress is not None else sys.stderr
        self.pools: dict[int, WorkerPool] = {}
        # Worker threads (one per GPU) append to the one driver.log.
        self._log_lock = threading.Lock()

    # -- the workers
    def _pool(self, slot: int) -> WorkerPool:
        """The worker pool of GPU slot `slot` (made on first use: a run served wholly from the
        cache starts no worker)."""
        if slot not in self.pools:
            device = self.devices[slot]
            log = "worker.log" if device is None else f"worker.gpu{device}.log"
            self.pools[slot] = WorkerPool(self.flashinfer_repo, os.path.join(self.case_dir, log),
                                          device=device)
        return self.pools[slot]

    def stop_worker(self, slot: int) -> None:
        """Stop GPU slot `slot`'s worker, if it started one."""
        if slot in self.pools:
            self.pools[slot].stop(kill=True)

    def stop_workers(self) -> None:
        for pool in self.pools.values():
            pool.stop(kill=True)

    def kill_workers(self) -> None:
        """Kill every worker now (a stop signal): the case each was running is not a measurement."""
        for pool in list(self.pools.values()):
            pool.kill()

    def start_worker(self, slot: int = 0) -> None:
        """Start GPU slot `slot`'s worker now (from the thread that runs its cases), so that its
        start-up overlaps what comes before the first case."""
        pool = self._pool(slot)
        if not pool.alive():
            pool.start()

    def warm_up(self, cases: list[Case]) -> jit_warmup.WarmUp | None:
        """One small case per kernel family of `cases` not yet built on this machine, run side by
        side before they are timed (jit_warmup.py); None when it did not run (--no_jit_warmup, a
        single family, or every family warm)."""
        if not self.jit_warmup:
            return None
        runnable = [c for c in cases if c.job != "driver" or self.flashinfer_repo]
        if len(jit_warmup.representatives(runnable, self.settings)) < 2:
            return None  # one family: the timed pass builds it as fast
        record = jit_warmup.WarmRecord(jit_warmup.caches_identity(self.environment))
        return jit_warmup.warm_up(
            runnable, lambda case, settings: self.worker_request(case, case.job, settings)[0], self.settings,
            record, flashinfer_repo=self.flashinfer_repo, log_dir=os.path.join(self.case_dir, "jit_warmup"),
            device=self.devices[0], progress=self.progress)

    def record_built(self, cases: list[Case]) -> None:
        """Add the families of `cases` that a worker ran ok to the warm-up record: their kernels
        are built now, so a later run on these caches needs no warm-up for them. A cuDNN shape
        whose tactic came from the autotune file had only that plan's kernels compiled; recorded
        all the same, a later run that tunes it again compiles the rest in its timed pass."""
        if not self.jit_warmup:
            return
        keys = [jit_warmup.warm_key(c, self.settings) for c in jit_warmup.representatives(cases, self.settings)]
        if keys:
            try:
                jit_warmup.WarmRecord(jit_warmup.caches_identity(self.environment)).add(keys)
            except OSError:
                pass  # unrecorded, a later run warms these families again

    # -- one case
    def worker_request(self, case: Case, job: str, settings: RunSettings | None = None
                       ) -> tuple[dict[str, Any], list[str] | None]:
        """(the worker's request for `job` of `case` under `settings` (the run's by default), the
        driver argv or None)."""
        stem = os.path.join(self.case_dir, case.case_id + (".quant" if job == "quant" else ""))
        settings = case_settings(case, settings or self.settings)
        req: dict[str, Any] = {"job": job, "case_id": case.case_id, "log_path": stem + ".log",
                               "csv_path": stem + ".csv", "settings": asdict(settings)}
        argv = None
        if job == "driver":
            argv = driver_argv(case, settings)
            req["argv"] = argv
            buckets = tuning_buckets(case, settings)
            if buckets:
                req["tuning_buckets"] = list(buckets)
            cap = tactic_cap(case, settings)
            if cap:
                req["tactic_cap"] = cap
            if case.kind == "attention" and settings.attention_fill == "gpu":
                req["gpu_fill_min_numel"] = GPU_FILL_MIN_NUMEL
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
        req, argv = self.worker_request(case, job)
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

    def row_at_once(self, case: Case) -> Row | None:
        """`case`'s row when no worker is needed for it: decided before launch, or a kernel-only
        case the result cache holds; else None (`run_one` then times it).
        The runner takes these first, so a run's first rows come in seconds, not after the first
        timed case's worker start and JIT build."""
        if case.skip_reason or (case.job == "driver" and not self.flashinfer_repo):
            return self.run_one(case)
        if case.with_quant or self.cache is None:
            return None
        hit = self.cache.get(self.cache.record(case, case.job, self.settings))
        if hit is None:
            return None
        row = replace(row_from_case(case, hit.outcome), origin=hit.origin)
        self._append_log(case, None, None, row, hit.origin)
        return row

    def run_one(self, case: Case, slot: int = 0, base: Row | None = None) -> Row:
        """`case`'s row, timed by GPU slot `slot`'s worker where it is timed; `base`: a with_quant
        case's base row (None: not in this run)."""
        if case.skip_reason:
            return row_from_case(case, Outcome("unsupported", case.skip_reason))
        if case.job == "driver" and not self.flashinfer_repo:
            return row_from_case(case, Outcome("failed", self.missing_driver))
        if case.with_quant:
            return self._run_with_quant(case, slot, base)
        outcome, argv, log_path, origin = self._execute(case, case.job, slot)
        row = replace(row_from_case(case, outcome), origin=origin)
        self._append_log(case, argv, log_path, row, origin)
        return row

    def _run_with_quant(self, case: Case, slot: int, base: Row | None) -> Row:
        if base is None:
            return row_from_case(case, Outcome("failed", f"base case {case.base_case_id} is not in this run"))
        if base.status == "unsupported":
            return row_from_case(case, Outcome("unsupported", f"base case unsupported: {base.reason}"))
        if base.status == "incorrect":
            return row_from_case(case, Outcome("incorrect", f"base case incorrect: {base.reason}"))
        if base.status != "ok" or base.median_us is None:
            return row_from_case(case, Outcome("failed", f"base case failed: {base.reason}"))
        q, argv, log_path, origin = self._execute(case, "quant", slot)
        row = with_quant_row(case, base, q)
        # The sum holds the base row's number too: copied if either part was.
        row = replace(row, origin="; ".join(dict.fromkeys(o for o in (origin, base.origin) if o)))
        self._append_log(case, argv, log_path, row, origin)
        return row

    def _append_log(self, case: Case, argv: list[str] | None, log_path: str | None, row: Row,
                    origin: str = "") -> None:
        try:
            with open(log_path or "", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        with self._log_lock, open(os.path.join(self.workdir, DRIVER_LOG), "a") as log:
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


def with_quant_row(case: Case, base: Row, q: Outcome) -> Row:
    """A with_quant case's row from its ok base row and its activation-quantization outcome `q`:
    the sum of the two when both are ok, else why not (the origin is the caller's)."""
    if q.status != "ok" or q.median_us is None:
        word = "unsupported" if q.status == "unsupported" else "failed"
        return row_from_case(case, Outcome(q.status, f"activation quantization {word}: {q.reason}",
                                           timer=q.timer))
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
    return replace(row, **sum_spread(base, q))


def sum_spread(base: Row, quant: Outcome) -> dict[str, Any]:
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


__all__ = ["CaseExecutor", "annotate", "missing_driver_reason", "sum_spread", "with_quant_row"]
