"""Orchestration: plan -> cases -> rows -> results.json (+ CSV, testlist, driver.log, report).

Both CLIs share this: `benchmark_via_builtin.py` (explicit shapes or a plan JSON) and
`benchmark_model.py` (the planner's plan, in-process). They call `add_run_arguments(parser)` and
then `run_from_args(args, plan) -> exit code`.

Workdir contents:
  testlist.txt          every driver case's argv, runnable with the real driver's --testlist
  cases.json            (--dry_run) the planned cases with their skip reasons
  driver.log            everything printed per case, delimited by the case id
  results.json          the source of truth, rewritten atomically after EVERY case
  combined_results.csv  derived from results.json at the end
  cases/<case_id>.csv   each driver case's raw CSV;  cases/worker.log  worker start-up output
  autotune_cache.json   FlashInfer's autotuner cache (default location; --autotune_cache moves it)

Exit codes: 0 every row ok/unsupported; 1 some row failed (after everything is written);
2 bad input (one `error:` line, nothing written or overwritten).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, Iterable, List, Optional, TextIO

from .. import __version__
from ..cases import build as case_building
from ..cases.build import check_filters
from ..cases.schema import DTYPES, Case, GemmShape, MoeShape
from ..errors import EXIT_USAGE, UsageError
from ..files import write_json_atomic, write_text_atomic
from ..plan.schema import Plan
from . import roofline
from .driver import (
    Outcome,
    WorkerPool,
    WorkerReply,
    case_to_dict,
    classify_driver_case,
    classify_python_case,
    driver_argv,
    has_driver,
    read_driver_csv,
)
from .quant_timing import QUANT_TIMING_NOTE
from .results import (
    RESULTS_CSV,
    RESULTS_JSON,
    RESULTS_SCHEMA_VERSION,
    Row,
    RunSettings,
    csv_text,
    load_results,
    rows_of,
)

#: What the run records as results.json["environment"], given the --flashinfer_repo (the CLIs pass
#: `env.environment.collect`; the run stage itself does not probe the machine).
EnvironmentProbe = Callable[[Optional[str]], Dict[str, Any]]
#: Renders the report of finished workdirs and returns its path (the CLIs pass
#: `report.report.write_report`); None writes no report.
ReportWriter = Callable[[List[str]], str]

#: M values (tokens per rank per step) swept when --ms is not given: the SKILL.md "balanced"
#: sweep, decode (1, 8) to prefill-sized (512) steps.
DEFAULT_MS = (1, 8, 64, 512)
TESTLIST = "testlist.txt"
CASES_JSON = "cases.json"
DRIVER_LOG = "driver.log"
CASE_DIR = "cases"
PREV_RESULTS = "results.prev.json"
DEFAULT_AUTOTUNE_CACHE = "autotune_cache.json"
TIMING_NOTE = (
    "Driver rows: FlashInfer's benchmarks/flashinfer_benchmark.py run in-process by a worker "
    "(bench_gpu_time: CUPTI kernel spans, cold L2 flushed before every iteration, CUDA graph "
    "unless --no_cuda_graph), median and std over --num_iters after --dry_run_iters warm-ups. "
    "torch rows: the same bench_gpu_time. Each row's `timer` says what timed it."
)


# ------------------------------------------------------------------------------------------------
# Arguments


def add_run_arguments(parser: argparse.ArgumentParser, *, with_ms: bool = True) -> None:
    """The run flags shared by both CLIs (pass with_ms=False if the caller defines --ms)."""
    g = parser.add_argument_group("running (FlashInfer driver and torch baseline)")
    g.add_argument(
        "--flashinfer_repo", metavar="PATH",
        help="FlashInfer source checkout whose benchmarks/flashinfer_benchmark.py times the cases, "
        "e.g. --flashinfer_repo ~/flashinfer (its tag must match the installed wheel). Not needed "
        "with --dry_run or when every --backends is torch.")
    g.add_argument(
        "--workdir", metavar="DIR",
        help="Output directory, e.g. --workdir runs/llama8b-tp1. Created if missing; one that "
        "already holds results.json is refused unless --resume.")
    if with_ms:
        g.add_argument(
            "--ms", type=int, nargs="+", metavar="M", default=list(DEFAULT_MS),
            help="Tokens per rank per step to sweep, e.g. --ms 1 8 64 512 "
            f"(default {' '.join(map(str, DEFAULT_MS))}).")
    g.add_argument(
        "--dtypes", nargs="+", metavar="DTYPE", choices=DTYPES, default=list(DTYPES),
        help="Recipes to time, e.g. --dtypes bf16 fp8 (default: all of bf16 fp8 nvfp4).")
    g.add_argument(
        "--backends", nargs="+", metavar="BACKEND", default=None,
        help="Only these backends, e.g. --backends cudnn cublas torch (default: every backend "
        "planned for each recipe).")
    g.add_argument(
        "--num_iters", type=int, default=RunSettings.num_iters,
        help=f"Measured iterations per case, e.g. --num_iters 100 (default {RunSettings.num_iters}).")
    g.add_argument(
        "--dry_run_iters", type=int, default=RunSettings.dry_run_iters,
        help="Warm-up iterations per case (also autotune warm-up calls), e.g. --dry_run_iters 10 "
        f"(default {RunSettings.dry_run_iters}).")
    g.add_argument(
        "--no_cuda_graph", action="store_true",
        help="Time plain launches instead of replaying a CUDA graph (adds launch overhead).")
    g.add_argument(
        "--no_autotune", action="store_true",
        help="Skip FlashInfer's autotuner (default tactics; faster, usually slower kernels).")
    g.add_argument(
        "--autotune_cache", metavar="PATH",
        help="FlashInfer autotuner cache to load and extend, e.g. --autotune_cache "
        "runs/tuned.json to reuse tuning across workdirs (default <workdir>/autotune_cache.json).")
    g.add_argument(
        "--case_timeout", type=float, default=RunSettings.case_timeout, metavar="SECONDS",
        help="Kill a case (and its worker) after this many seconds, e.g. --case_timeout 300; the "
        f"case is failed, the rest go on (default {RunSettings.case_timeout:g}; the first case of "
        "a kernel family includes its JIT build).")
    g.add_argument(
        "--dry_run", action="store_true",
        help="Write testlist.txt and cases.json and print the case summary; run nothing, no GPU.")
    g.add_argument(
        "--assume_cc", metavar="MAJOR.MINOR", default=None,
        help="With --dry_run on a machine without that GPU: mark cases unsupported as on a GPU of "
        "this compute capability, e.g. --assume_cc 9.0 (H100/H200) or --assume_cc 10.0 (B200).")
    g.add_argument(
        "--resume", action="store_true",
        help="Continue in an existing --workdir: keep its ok/unsupported rows, run the missing "
        "and failed cases.")
    g.add_argument(
        "--allow_cuda_events", action="store_true",
        help="Accept rows FlashInfer timed with CUDA events/graphs because CUPTI was unavailable "
        "(otherwise those rows are failed).")


def check_settings(args: argparse.Namespace) -> None:
    """The numeric run flags (iterations, timeout); raises UsageError. (--ms, --dtypes and
    --backends are checked by cases.check_filters, the rule build_cases applies.)"""
    if args.num_iters < 1:
        raise UsageError("--num_iters", args.num_iters, "must be at least 1, e.g. --num_iters 30")
    if args.dry_run_iters < 0:
        raise UsageError("--dry_run_iters", args.dry_run_iters, "must be 0 or more, e.g. --dry_run_iters 5")
    if not args.case_timeout > 0 or math.isinf(args.case_timeout):
        raise UsageError("--case_timeout", args.case_timeout,
                         "must be a positive, finite number of seconds, e.g. --case_timeout 300")


def settings_from_args(args: argparse.Namespace, workdir: str) -> RunSettings:
    check_settings(args)
    cache = args.autotune_cache or os.path.join(workdir, DEFAULT_AUTOTUNE_CACHE)
    return RunSettings(
        dry_run_iters=args.dry_run_iters,
        num_iters=args.num_iters,
        cuda_graph=not args.no_cuda_graph,
        autotune=not args.no_autotune,
        autotune_cache=os.path.abspath(cache),
        allow_cuda_events=args.allow_cuda_events,
        case_timeout=float(args.case_timeout),
    )


def _existing_ancestor(path: str) -> str:
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_workdir(workdir: str | None, resume: bool) -> str:
    """The absolute workdir; refuses to overwrite results (raises UsageError)."""
    if not workdir:
        raise UsageError("--workdir", workdir, "is required to run or dry-run; e.g. --workdir runs/llama8b")
    path = os.path.abspath(workdir)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError("--workdir", workdir, "exists and is not a directory; choose a new --workdir")
    base = _existing_ancestor(path)
    if not os.path.isdir(base):
        raise UsageError("--workdir", workdir, f"{base} is a file, so the folder cannot be created "
                         "there; choose another --workdir")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError("--workdir", workdir, f"{base} is not writable; choose a writable --workdir")
    if os.path.isfile(os.path.join(path, RESULTS_JSON)) and not resume:
        raise UsageError(
            "--workdir", workdir,
            "already holds results.json; pass --resume to continue it or choose a new --workdir")
    return path


def make_workdir(path: str) -> None:
    """Create the workdir (and prove it writable) before anything is written into it."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as e:
        raise UsageError("--workdir", path, f"cannot be created or written ({e.strerror}); choose a "
                         "writable --workdir") from None


def validate_args(args: argparse.Namespace, workdirs: list[str] | None = None, *,
                  resume_may_start_fresh: bool = False) -> tuple[str, tuple[int, int]] | None:
    """Every check of the run flags that needs no plan, so that a bad flag fails at once, before
    the (slow) planning and preview. `workdirs`: the run folders (a sweep's sub-workdirs; default
    [args.workdir]). --resume needs a results.json in every one of them, or, with
    `resume_may_start_fresh` (a sweep, where later runs may not have started), in at least one.
    Returns the GPU the cases are planned for: the visible one, the --assume_cc stand-in for
    --dry_run, or None (--dry_run without a GPU). Raises UsageError."""
    workdirs = workdirs or [args.workdir]
    for w in dict.fromkeys([args.workdir, *workdirs]):  # a sweep's parent, then its runs
        check_workdir(w, args.resume)
    if args.resume:
        have = [w for w in workdirs if os.path.isfile(os.path.join(w, RESULTS_JSON))]
        if (not have) if resume_may_start_fresh else len(have) < len(workdirs):
            missing = next(w for w in workdirs if w not in have)
            raise UsageError("--resume", missing, "there is no results.json to resume there; drop "
                             "--resume to start a new run, or give the workdir of the interrupted run")
    check_settings(args)
    backends = args.backends or None
    check_filters(getattr(args, "ms", None) or DEFAULT_MS, args.dtypes, backends)
    torch_only = bool(backends) and all(b == "torch" for b in backends)
    if not args.dry_run and not torch_only:
        if not args.flashinfer_repo:
            raise UsageError("--flashinfer_repo", None, "is required to run driver cases; pass a "
                             "FlashInfer checkout, or --backends torch, or --dry_run")
        if not has_driver(args.flashinfer_repo):
            raise UsageError("--flashinfer_repo", args.flashinfer_repo,
                             "has no benchmarks/flashinfer_benchmark.py; pass the root of a "
                             "FlashInfer source checkout whose tag matches the installed wheel")
    assume = getattr(args, "assume_cc", None)
    if assume:
        cc = parse_cc(assume)
        if not args.dry_run:
            raise UsageError("--assume_cc", assume, "only applies to --dry_run; a real run uses "
                             "the compute capability of the GPU it runs on")
        return (f"assumed sm_{cc[0]}{cc[1]}", cc)
    gpu = detect_gpu()  # also for --dry_run when a GPU is there: skip reasons for it
    if gpu is None and not args.dry_run:
        raise UsageError("--dry_run", "(not given)", "no CUDA GPU is visible to torch; run on a GPU "
                         "machine, or add --dry_run to only plan the cases")
    return gpu


def detect_gpu() -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of CUDA device 0, or None without a usable GPU."""
    try:
        import torch  # lazy: not needed for --dry_run
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))
    except Exception:  # noqa: BLE001
        return None


def plan_cases(plan: Plan, ms: Iterable[int], dtypes: Iterable[str], backends: Iterable[str] | None,
               compute_capability: tuple[int, int] | None) -> list[Case]:
    ms = list(ms)
    built = case_building.build_cases(plan, ms, list(dtypes), list(backends) if backends else None,
                               compute_capability)
    if backends:
        seen = {c.backend for c in built}
        for b in backends:
            if b not in seen:
                everything = case_building.build_cases(plan, ms, list(dtypes), None, compute_capability)
                known = " ".join(sorted({c.backend for c in everything})) or "(none)"
                raise UsageError("--backends", b, f"matches no case of this plan and these --dtypes; "
                                 f"choose from: {known}")
    ids = [c.case_id for c in built]
    if len(set(ids)) != len(ids):  # would break --resume and the driver's case tags
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RuntimeError(f"build_cases produced the case id {dup} twice")
    return built


# ------------------------------------------------------------------------------------------------
# Files


def testlist_text(cases: Iterable[Case], settings: RunSettings) -> str:
    """Driver argv lines (real driver --testlist format); known-unsupported ones commented out."""
    lines = ["# FlashInfer driver testlist written by benchmark-model-kernels; run it with",
             "#   python3 <flashinfer>/benchmarks/flashinfer_benchmark.py --testlist testlist.txt "
             "--output_path out.csv"]
    for c in cases:
        if not c.driver_args or c.with_quant:
            continue
        line = shlex.join(driver_argv(c, settings))
        lines.append(f"# unsupported ({c.skip_reason}): {line}" if c.skip_reason else line)
    return "\n".join(lines) + "\n"


def job_of(case: Case) -> str:
    """Which worker path runs a case: the quant timer, the torch baseline, or the driver."""
    if case.with_quant:
        return "quant"
    if case.backend == "torch" or not case.driver_args:
        return "torch"
    return "driver"


def row_from_case(case: Case, outcome: Outcome, quant_us: float | None = None) -> Row:
    """A results Row: the case's logical/physical shape + the outcome (no roofline yet)."""
    shape: dict[str, Any] = {}
    lg, ph = case.logical, case.physical
    if isinstance(lg, GemmShape):
        shape = {"n": lg.n, "k": lg.k, "phys_n": ph.n, "phys_k": ph.k}
    elif isinstance(lg, MoeShape):
        shape = {"hidden": lg.hidden, "intermediate": lg.intermediate, "experts": lg.experts,
                 "global_experts": lg.global_experts, "top_k": lg.top_k,
                 "phys_hidden": ph.hidden, "phys_intermediate": ph.intermediate,
                 "activation": case.activation,
                 "routing_method": case.routing.method if case.routing else ""}
    return Row(
        case_id=case.case_id, kind=case.kind, name=case.name, modules="|".join(case.modules),
        layers=case.layers, m=case.m, dtype=case.dtype, backend=case.backend, routine=case.routine,
        variant=case.variant, with_quant=case.with_quant, **shape,
        median_us=outcome.median_us, std_us=outcome.std_us, quant_us=quant_us,
        status=outcome.status, reason=outcome.reason, timer=outcome.timer,
    )


def annotate(row: Row, gpu: tuple[str, tuple[int, int]] | None) -> Row:
    """Roofline numbers (flops, bytes, TFLOP/s, % of peak); the row unchanged if that fails."""
    try:
        return roofline.annotate(row, gpu[0] if gpu else "", gpu[1] if gpu else None)
    except Exception as e:  # noqa: BLE001  (a roofline bug must not lose a measurement)
        print(f"warning: roofline annotation of {row.case_id} failed: {e}", file=sys.stderr)
        return row


def _same_case(row: Row, fresh: Row) -> bool:
    """A kept row still describes the case planned now (same shape, routine, recipe)."""
    keys = ("kind", "name", "m", "dtype", "backend", "routine", "variant", "with_quant", "n", "k",
            "phys_n", "phys_k", "hidden", "intermediate", "experts", "global_experts", "top_k",
            "phys_hidden", "phys_intermediate", "activation", "routing_method")
    return all(getattr(row, k) == getattr(fresh, k) for k in keys)


# ------------------------------------------------------------------------------------------------
# Running


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def progress_line(i: int, total: int, case: Case, row: Row, elapsed: float, eta: float | None) -> str:
    width = len(str(total))
    what = (f"[{i:>{width}}/{total}] {case.kind} {case.name} m={case.m} {case.dtype} {case.backend}"
            + (f" {case.variant}" if case.variant else "") + (" +quant" if case.with_quant else ""))
    if row.status == "ok":
        result = f"ok {row.median_us:.1f} us"
    else:
        result = f"{row.status}: {row.reason[:100]}"
    eta_s = f"~{_clock(eta)}" if eta is not None else "after warm-up"
    return f"{what} ... {result}  (elapsed {_clock(elapsed)}, ETA {eta_s})"


class EtaEstimator:
    """Time left for the cases still to run, from the wall time of the ones run so far.

    Why not elapsed / done * left: the first case of each job kind pays the worker start-up, the
    torch/FlashInfer imports and JIT builds (6 s for a 10 us GEMM on the H200), cases skipped as
    unsupported take no time, and a quant-timing case costs far less than a driver case. So: one
    average per job kind ("driver", "torch", "quant"; see `job_of`) that leaves out the first case
    of that kind, skipped cases count zero, and no estimate before MIN_TIMED cases have run. On the
    H200 logs in references/examples/h200 (qwen3-30b-a3b_tp1.txt) this cuts the over-estimate
    after the third case from about 3x to about 1.6x; it stays an estimate (later JIT builds and
    autotuning are not foreseeable), hence "ETA ~"."""

    MIN_TIMED = 3

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    def record(self, case: Case, seconds: float) -> None:
        if not case.skip_reason:
            self.seconds.setdefault(job_of(case), []).append(seconds)

    def _average(self, values: list[float]) -> float:
        steady = values[1:] or values  # the first of a kind carries start-up and JIT
        return sum(steady) / len(steady)

    def eta(self, left: Iterable[Case]) -> float | None:
        if sum(len(v) for v in self.seconds.values()) < self.MIN_TIMED:
            return None
        per_job = {job: self._average(v) for job, v in self.seconds.items()}
        everything = self._average([s for v in self.seconds.values() for s in v[1:]]
                                   or [s for v in self.seconds.values() for s in v])
        return sum(per_job.get(job_of(c), everything) for c in left if not c.skip_reason)


class Runner:
    """Runs cases through one WorkerPool, appending to driver.log and rewriting results.json."""

    def __init__(self, cases: list[Case], settings: RunSettings, workdir: str,
                 flashinfer_repo: str | None, header: dict[str, Any],
                 gpu: tuple[str, tuple[int, int]] | None, kept: dict[str, Row] | None = None,
                 progress: TextIO | None = None):
        self.cases, self.settings, self.workdir = cases, settings, workdir
        self.flashinfer_repo, self.header, self.gpu = flashinfer_repo, header, gpu
        self.rows: dict[str, Row] = dict(kept or {})
        self.progress = progress if progress is not None else sys.stderr
        self.case_dir = os.path.join(workdir, CASE_DIR)
        self.pool: WorkerPool | None = None

    # -- files
    def payload(self) -> dict[str, Any]:
        ordered = [self.rows[c.case_id] for c in self.cases if c.case_id in self.rows]
        payload = dict(self.header)
        notes = dict(payload.get("notes") or {})
        if len(ordered) < len(self.cases):
            notes["incomplete"] = f"{len(ordered)} of {len(self.cases)} cases have rows (run in progress or interrupted)"
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
        req: dict[str, Any] = {"job": job, "case_id": case.case_id, "log_path": stem + ".log",
                               "csv_path": stem + ".csv", "settings": asdict(self.settings)}
        argv = None
        if job == "driver":
            argv = driver_argv(case, self.settings)
            req["argv"] = argv
        else:
            req["case"] = case_to_dict(case)
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
        if job == "driver":
            outcome = classify_driver_case(log_text, read_driver_csv(req["csv_path"]), reply,
                                           self.settings, case.backend)
        else:
            outcome = classify_python_case(log_text, reply, self.settings)
        return outcome, argv, req["log_path"]

    def run_one(self, case: Case) -> Row:
        if case.skip_reason:
            return row_from_case(case, Outcome("unsupported", case.skip_reason))
        if case.with_quant:
            return self._run_with_quant(case)
        outcome, argv, log_path = self._execute(case, job_of(case))
        row = row_from_case(case, outcome)
        self._append_log(case, argv, log_path, row)
        return row

    def _run_with_quant(self, case: Case) -> Row:
        base = self.rows.get(case.base_case_id)
        if base is None:
            return row_from_case(case, Outcome("failed", f"base case {case.base_case_id} is not in this run"))
        if base.status == "unsupported":
            return row_from_case(case, Outcome("unsupported", f"base case unsupported: {base.reason}"))
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
            row = row_from_case(case, Outcome("ok", reason, base.median_us + q.median_us, std, timer),
                                quant_us=q.median_us)
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


def _tail_file(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------
# Entry point


def _environment(probe: EnvironmentProbe, flashinfer_repo: str | None) -> dict[str, Any]:
    try:
        return probe(flashinfer_repo)
    except Exception as e:  # noqa: BLE001  (recording the machine must never lose a run)
        return {"warnings": [f"environment.collect failed: {type(e).__name__}: {e}"]}


def _notes() -> dict[str, Any]:
    return {"timing": TIMING_NOTE, "quant_timing": QUANT_TIMING_NOTE}


def summary_table(cases: Iterable[Case]) -> str:
    """Cases per backend: to run vs known unsupported (the --dry_run summary)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for c in cases:
        key = (c.dtype, c.backend + (f" {c.variant}" if c.variant else "") + (" +quant" if c.with_quant else ""))
        counts.setdefault(key, [0, 0])[1 if c.skip_reason else 0] += 1
    lines = [f"{'dtype':<6} {'backend':<28} {'to run':>7} {'unsupported':>12}"]
    for (dtype, backend), (run, skip) in sorted(counts.items()):
        lines.append(f"{dtype:<6} {backend:<28} {run:>7} {skip:>12}")
    total_run = sum(v[0] for v in counts.values())
    total_skip = sum(v[1] for v in counts.values())
    lines.append(f"{'total':<35} {total_run:>7} {total_skip:>12}")
    return "\n".join(lines)


def exit_code(rows: Iterable[Row]) -> int:
    """0 iff no row failed."""
    return 1 if any(r.status == "failed" for r in rows) else 0


def _load_kept(workdir: str, cases: list[Case]) -> tuple[dict[str, Row], int]:
    """Rows of the previous results.json worth keeping: ok/unsupported, still planned, same shape."""
    path = os.path.join(workdir, RESULTS_JSON)
    if not os.path.isfile(path):
        return {}, 0
    try:
        previous = rows_of(load_results(path))
    except (OSError, ValueError, TypeError) as e:
        raise UsageError("--resume", workdir, f"its results.json cannot be read ({e}); choose a new --workdir") from e
    planned = {c.case_id: c for c in cases}
    kept = {}
    for r in previous:
        c = planned.get(r.case_id)
        if c is None or r.status not in ("ok", "unsupported") or c.skip_reason:
            continue
        if _same_case(r, row_from_case(c, Outcome("failed"))):
            kept[r.case_id] = r
    shutil.copyfile(path, os.path.join(workdir, PREV_RESULTS))  # never lose the earlier run
    return kept, len(previous)


def run_plan(plan: Plan | None, cases: list[Case], settings: RunSettings, workdir: str,
             flashinfer_repo: str | None, gpu: tuple[str, tuple[int, int]] | None, *,
             resume: bool = False, command: list[str] | None = None,
             progress: TextIO | None = None, environment: EnvironmentProbe,
             report: ReportWriter | None = None) -> int:
    """Run `cases` into `workdir` (which check_workdir accepted); write every output; exit code."""
    progress = progress if progress is not None else sys.stderr
    os.makedirs(workdir, exist_ok=True)
    kept, n_prev = _load_kept(workdir, cases) if resume else ({}, 0)
    if resume:
        print(f"resume: kept {len(kept)} of {n_prev} earlier rows; "
              f"{len(cases) - len(kept)} cases to run or re-decide", file=progress)
    write_text_atomic(os.path.join(workdir, TESTLIST), testlist_text(cases, settings))
    header = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "tool": {"name": "benchmark-model-kernels", "version": __version__},
        "command": list(command if command is not None else sys.argv),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": _environment(environment, flashinfer_repo),
        "settings": asdict(settings),
        "plan": plan.to_dict() if plan is not None else None,
        "notes": _notes(),
    }
    if resume and kept:
        header["notes"]["resumed"] = f"{len(kept)} rows kept from the previous run (results.prev.json)"
    runner = Runner(cases, settings, workdir, flashinfer_repo, header, gpu, kept, progress)
    runner.save()
    try:
        rows = runner.run()
    except KeyboardInterrupt:
        runner.save()
        done = [runner.rows[c.case_id] for c in cases if c.case_id in runner.rows]
        write_text_atomic(os.path.join(workdir, RESULTS_CSV), csv_text(done))
        print(f"interrupted after {len(done)} of {len(cases)} rows; results.json and the CSV hold "
              "them; continue with the same command plus --resume", file=progress)
        return 130
    runner.save()
    write_text_atomic(os.path.join(workdir, RESULTS_CSV), csv_text(rows))
    if report is not None:
        _write_report(report, workdir, progress)
    failed = [r for r in rows if r.status == "failed"]
    n_ok = sum(r.status == "ok" for r in rows)
    print(f"{len(rows)} rows: {n_ok} ok, {len(rows) - n_ok - len(failed)} unsupported, "
          f"{len(failed)} failed -> {os.path.join(workdir, RESULTS_JSON)}", file=progress)
    if plan is not None and plan.unsupported:
        print(f"note: the plan has {len(plan.unsupported)} module(s) it could not place; they have "
              "no rows (see the plan in results.json)", file=progress)
    return exit_code(rows)


def _write_report(report: ReportWriter, workdir: str, progress: TextIO) -> None:
    try:
        path = report([workdir])
        print(f"report: {path}", file=progress)
    except Exception as e:  # noqa: BLE001  (the report must never lose results)
        print(f"warning: report not written: {type(e).__name__}: {e}", file=progress)


def dry_run(cases: list[Case], settings: RunSettings, workdir: str, out: TextIO | None = None,
            gpu: tuple[str, tuple[int, int]] | None = None) -> int:
    """Write testlist.txt and cases.json, print the summary; runs nothing."""
    out = out if out is not None else sys.stdout
    if gpu:
        print(f"planned for {gpu[0]} (sm_{gpu[1][0]}{gpu[1][1]})", file=out)
    else:
        print("no GPU visible: compute-capability limits not applied (they are decided at run time)",
              file=out)
    os.makedirs(workdir, exist_ok=True)
    write_text_atomic(os.path.join(workdir, TESTLIST), testlist_text(cases, settings))
    listing = []
    for c in cases:
        d = case_to_dict(c)
        d["job"] = job_of(c)
        d["driver_argv"] = driver_argv(c, settings) if d["job"] == "driver" else []
        listing.append(d)
    write_text_atomic(os.path.join(workdir, CASES_JSON),
                       json.dumps({"settings": asdict(settings), "cases": listing}, indent=1) + "\n")
    print(summary_table(cases), file=out)
    print(f"dry run: {len(cases)} cases -> {os.path.join(workdir, TESTLIST)}, "
          f"{os.path.join(workdir, CASES_JSON)}", file=out)
    return 0


def parse_cc(text: str) -> tuple[int, int]:
    """'9.0' -> (9, 0); the --assume_cc value."""
    try:
        major, minor = (int(x) for x in text.split("."))
    except ValueError:
        raise UsageError("--assume_cc", text, "give MAJOR.MINOR, e.g. 9.0 (H200) or 10.0 (B200)")
    return major, minor


def run_from_args(args: argparse.Namespace, plan: Plan, *, environment: EnvironmentProbe,
                  report: ReportWriter | None = None, resume_may_start_fresh: bool = False) -> int:
    """Run (or dry-run) `plan` as the parsed flags say; returns the exit code (prints usage errors
    as one `error:` line and returns 2 itself, so callers need no try/except).
    `resume_may_start_fresh`: this is one run of a sweep resumed with --resume; without a
    results.json it starts fresh instead of being refused."""
    try:
        if (resume_may_start_fresh and args.resume and args.workdir
                and not os.path.isfile(os.path.join(args.workdir, RESULTS_JSON))):
            args = argparse.Namespace(**{**vars(args), "resume": False})  # not started yet: fresh
        gpu = validate_args(args)
        workdir = os.path.abspath(args.workdir)
        settings = settings_from_args(args, workdir)
        ms = list(getattr(args, "ms", None) or DEFAULT_MS)
        cases = plan_cases(plan, ms, args.dtypes, args.backends or None, gpu[1] if gpu else None)
        if not cases:
            raise UsageError("--dtypes", " ".join(args.dtypes), "no cases to run for this plan; "
                             "widen --dtypes/--backends")
        make_workdir(workdir)
        if args.dry_run:
            return dry_run(cases, settings, workdir, gpu=gpu)
        return run_plan(plan, cases, settings, workdir, args.flashinfer_repo, gpu, resume=args.resume,
                        environment=environment, report=report)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE


__all__ = [
    "DEFAULT_MS",
    "EtaEstimator",
    "Runner",
    "add_run_arguments",
    "check_settings",
    "check_workdir",
    "make_workdir",
    "detect_gpu",
    "dry_run",
    "exit_code",
    "job_of",
    "plan_cases",
    "progress_line",
    "row_from_case",
    "run_from_args",
    "run_plan",
    "settings_from_args",
    "summary_table",
    "testlist_text",
    "validate_args",
]
