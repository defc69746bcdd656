"""Parent side of running cases: driver argv, a restartable worker process, and honest outcomes.

One `WorkerPool` keeps ONE worker process (worker.py) alive across cases so torch, FlashInfer and
their JIT modules load once. A case that crashes, hangs past its timeout, or poisons the CUDA
context costs only itself: the pool kills the worker's process group and starts a fresh one.

`classify_driver_case` turns what the driver left behind (its printed output, its CSV, the worker's
answer) into ok / unsupported / failed with a reason quoting the driver's own words
(research/flashinfer_driver.md sections 1.5, 1.6 and 2):
  - a CSV row                                          -> ok (times in ms -> us)
  - "[ERROR] No backends passed validation/to test"   -> unsupported when every reason printed
    before it ("[INFO] <b> backend does not support this configuration: <Exc>: <msg>",
    "[WARNING] <b> for routine <r> is not supported on compute capability X. Skipping.") is a
    support statement; failed when a reason is a fault (CUDA error, out of memory)
  - an exception ("[ERROR] Error: <msg>"), argparse exit, crash, timeout -> failed, quoted
  - CUPTI fallback ("... Falling back to CUDA events ...") -> failed unless allow_cuda_events
"""

from __future__ import annotations

import csv
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..cases.schema import Case, GemmShape, MoeShape
from ..plan.schema import Routing
from .results import RunSettings
from .timing import cupti_fallback_in, cupti_fallback_reason

DRIVER_SCRIPT = "flashinfer_benchmark.py"
SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_NO_BACKENDS = re.compile(r"\[ERROR\] No backends (?:passed validation|to test)\. Exiting\.")
_DOES_NOT_SUPPORT = re.compile(r"\[INFO\] (\S+) backend does not support (this configuration: .*|autotune)")
_NOT_ON_CC = re.compile(r"\[WARNING\] \S+ for routine \S+ is not supported on compute capability .*")
_LOGGER_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # "2026-11-30 20:22:02,227 - INFO - ..."
_ERROR_LINE = re.compile(r"\[ERROR\] Error: (.*)")
_ARGPARSE_ERROR = re.compile(r"^\S*: error: .*$", re.MULTILINE)
#: A probe failure with these words is a fault of the run, not a statement of (non-)support.
_FAULT = re.compile(
    r"CUDA error|out of memory|illegal memory|device-side assert|launch failure|Segmentation",
    re.IGNORECASE,
)
TAIL_CHARS = 1500
#: Printed by the worker before it re-runs a case without --autotune; only what follows counts.
RETRY_MARKER = "[bmk-worker] retrying without --autotune (the driver cannot autotune this backend)"


# ------------------------------------------------------------------------------------------------
# Case <-> JSON (the worker rebuilds torch/quant cases from this)


def case_to_dict(case: Case) -> dict[str, Any]:
    return asdict(case)


def case_from_dict(d: dict[str, Any]) -> Case:
    d = dict(d)
    shape = GemmShape if d["kind"] == "gemm" else MoeShape
    d["logical"] = shape(**d["logical"])
    d["physical"] = shape(**d["physical"])
    if d.get("routing") is not None:
        d["routing"] = Routing(**d["routing"])
    for key in ("modules", "driver_args"):
        d[key] = tuple(d.get(key) or ())
    return Case(**d)


# ------------------------------------------------------------------------------------------------
# argv


def benchmarks_dir(flashinfer_repo: str) -> str:
    return os.path.join(os.path.abspath(flashinfer_repo), "benchmarks")


def has_driver(flashinfer_repo: str) -> bool:
    return os.path.isfile(os.path.join(benchmarks_dir(flashinfer_repo), DRIVER_SCRIPT))


def driver_argv(case: Case, settings: RunSettings) -> list[str]:
    """The case's full driver argv: its own args + timing flags + `-v` + `--case_tag <case_id>`.

    GEMM and MoE routines (the only ones planned) define --autotune; `--autotune_cache` is passed
    only with autotuning so --no_autotune really means default tactics.
    """
    argv = list(case.driver_args)
    argv += ["--num_iters", str(settings.num_iters), "--dry_run_iters", str(settings.dry_run_iters)]
    if not settings.cuda_graph:
        argv.append("--no_cuda_graph")
    if settings.autotune:
        argv.append("--autotune")
        if settings.autotune_cache:
            argv += ["--autotune_cache", settings.autotune_cache]
    if "-v" not in argv and "--verbose" not in argv:
        argv.append("-v")
    if "--case_tag" not in argv:
        argv += ["--case_tag", case.case_id]
    return argv


# ------------------------------------------------------------------------------------------------
# Output parsing


def read_driver_csv(path: str) -> list[dict[str, str]]:
    """Rows of a driver CSV as dicts; a duplicated column name keeps its FIRST occurrence."""
    try:
        with open(path, newline="") as f:
            table = [r for r in csv.reader(f) if r]
    except OSError:
        return []
    if not table:
        return []
    header, rows = table[0], table[1:]
    first: dict[str, int] = {}
    for i, name in enumerate(header):
        first.setdefault(name, i)
    return [{name: r[i] if i < len(r) else "" for name, i in first.items()} for r in rows]


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    """The last non-empty lines of `text`, at most `limit` characters, joined with " | "."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    out: list[str] = []
    size = 0
    for ln in reversed(lines):
        if size + len(ln) > limit and out:
            break
        out.append(ln[-limit:])
        size += len(ln) + 3
    return " | ".join(reversed(out))


@dataclass(frozen=True)
class Outcome:
    """What one case produced, before it becomes a results Row."""

    status: str
    """"ok", "unsupported" or "failed"."""
    reason: str = ""
    """Why there is no number, quoting the driver; or a caveat on an ok number."""
    median_us: float | None = None
    std_us: float | None = None
    timer: str = ""
    """"cupti", "cuda_graph" or "cuda_events"; "" when nothing was timed."""


@dataclass(frozen=True)
class WorkerReply:
    """The worker's JSON answer for a case, or why there is none."""

    answer: dict[str, Any] = field(default_factory=dict)
    lost: str = ""
    """Non-empty when the worker died or timed out before answering (the case's failure reason)."""


def fallback_timer(cuda_graph: bool) -> str:
    """What FlashInfer times with when CUPTI is missing (flashinfer_driver.md section 6.3)."""
    return "cuda_graph" if cuda_graph else "cuda_events"


def apply_timer_policy(outcome: Outcome, timer: str, evidence: str, settings: RunSettings) -> Outcome:
    """Label an ok outcome's timer; a non-CUPTI number fails unless --allow_cuda_events.

    `timer` is what actually timed it; `evidence` the output line that says why it is not CUPTI.
    """
    if outcome.status != "ok" or timer == "cupti":
        return Outcome(outcome.status, outcome.reason, outcome.median_us, outcome.std_us, timer)
    if settings.allow_cuda_events:
        note = f"timed with {timer}, not CUPTI (--allow_cuda_events)"
        reason = f"{outcome.reason}; {note}" if outcome.reason else note
        return Outcome("ok", reason, outcome.median_us, outcome.std_us, timer)
    return Outcome(
        "failed",
        f"timed with {timer}, not CUPTI (measured {outcome.median_us:.2f} us, not comparable): "
        f"{evidence}; install cupti-python 13.0.x matching the CUDA driver, or pass "
        "--allow_cuda_events to accept such numbers",
        None,
        None,
        timer,
    )


def timer_from_output(text: str, settings: RunSettings) -> tuple[str, str]:
    """(timer, evidence) for a driver case from its output and warnings."""
    if cupti_fallback_in(text):
        return fallback_timer(settings.cuda_graph), cupti_fallback_reason(text)
    return "cupti", ""


def support_statements(log_text: str) -> list[str]:
    """The driver's per-backend rejections, in order, each with its continuation lines.

    A probe exception's message can span lines (cutile: "ValueError: No valid config ...",
    "Config: ...", "FileNotFoundError: 'tileiras' compiler not found ..."); the lines up to the
    next "[TAG]" line or logger line belong to it (at most 4, joined with " ").
    """
    lines = log_text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if _NOT_ON_CC.match(line.strip()):
            out.append(line.strip())
        elif _DOES_NOT_SUPPORT.match(line.strip()):
            parts = [line.strip()]
            for nxt in lines[i + 1 : i + 5]:
                if not nxt.strip() or nxt.startswith("[") or _LOGGER_LINE.match(nxt):
                    break
                parts.append(nxt.strip())
            out.append(" ".join(parts))
    return list(dict.fromkeys(out))


def _lost_reason(reply: WorkerReply, log_text: str) -> str:
    last = tail(log_text)
    return f"{reply.lost}; last output: {last}" if last else reply.lost


def pick_row(csv_rows: list[dict[str, str]], backend: str) -> dict[str, str]:
    """The CSV row of `backend` (the driver suffixes "_autotune"); the first row otherwise."""
    for row in csv_rows:
        if row.get("backend", "").removesuffix("_autotune") == backend:
            return row
    return csv_rows[0]


def classify_driver_case(
    log_text: str, csv_rows: list[dict[str, str]], reply: WorkerReply, settings: RunSettings,
    backend: str = "",
) -> Outcome:
    """ok / unsupported / failed for one driver case (see the module docstring)."""
    ans = reply.answer
    text = log_text + "\n" + "\n".join(ans.get("warnings") or [])
    if reply.lost:
        return Outcome("failed", _lost_reason(reply, log_text))
    if RETRY_MARKER in log_text:  # the untuned re-run decides; the first attempt only dropped it
        log_text = log_text.rsplit(RETRY_MARKER, 1)[1]
    caveat = ""
    if ans.get("autotune_dropped"):
        caveat = "not autotuned: the driver cannot autotune this backend"
    if csv_rows:
        row = pick_row(csv_rows, backend)
        try:
            median_us = float(row["median_time"]) * 1e3
            std_us = float(row.get("std_time") or "nan") * 1e3
        except (KeyError, ValueError):
            return Outcome("failed", f"driver CSV row has no numeric median_time: {row.get('median_time')!r}")
        if ans.get("poisoned"):
            caveat = "; ".join(x for x in (caveat, f"CUDA error after timing: {ans['poisoned']}") if x)
        out = Outcome("ok", caveat, median_us, std_us)
        return apply_timer_policy(out, *timer_from_output(text, settings), settings)
    if ans.get("systemexit"):
        m = _ARGPARSE_ERROR.findall(log_text)
        msg = m[-1].strip() if m else tail(log_text, 400)
        return Outcome("failed", f"driver rejected its arguments: {msg}")
    if ans.get("exception"):
        errs = _ERROR_LINE.findall(log_text)
        if not errs:
            return Outcome("failed", ans["exception"])
        return Outcome("failed", f"[ERROR] Error: {errs[-1].strip()} ({ans['exception'].split(':', 1)[0]})")
    if _NO_BACKENDS.search(log_text):
        statements = support_statements(log_text)
        verdict = _NO_BACKENDS.search(log_text).group(0)
        if not statements:
            return Outcome("failed", f"driver skipped the case without a reason: {verdict}")
        reason = "; ".join(statements)
        status = "failed" if any(_FAULT.search(s) for s in statements) else "unsupported"
        return Outcome(status, reason)
    if ans.get("poisoned"):
        return Outcome("failed", f"CUDA error: {ans['poisoned']}")
    last = tail(log_text)
    return Outcome("failed", "driver wrote no result row and no error" + (f"; last output: {last}" if last else ""))


def classify_python_case(log_text: str, reply: WorkerReply, settings: RunSettings) -> Outcome:
    """ok / unsupported / failed for a torch-baseline or quant-timing case."""
    ans = reply.answer
    if reply.lost:
        return Outcome("failed", _lost_reason(reply, log_text))
    if ans.get("unsupported"):
        return Outcome("unsupported", ans["unsupported"])
    if ans.get("exception"):
        return Outcome("failed", ans["exception"])
    m = ans.get("measurement")
    if not m:
        return Outcome("failed", "no measurement returned" + (f"; last output: {tail(log_text)}" if log_text else ""))
    caveat = f"CUDA error after timing: {ans['poisoned']}" if ans.get("poisoned") else ""
    out = Outcome("ok", caveat, m["median_us"], m["std_us"])
    text = log_text + "\n" + "\n".join(ans.get("warnings") or [])
    timer = m.get("timer") or "cupti"
    if timer == "cupti" and cupti_fallback_in(text):
        timer = fallback_timer(settings.cuda_graph)  # the warning wins over a claimed "cupti"
    evidence = m.get("note") or cupti_fallback_reason(text) or f"the backend reported timer {timer!r}"
    return apply_timer_policy(out, timer, evidence, settings)


# ------------------------------------------------------------------------------------------------
# The worker process


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"worker exited with signal {-returncode} ({name})"
    return f"worker exited with code {returncode}"


class WorkerPool:
    """At most one live worker (one GPU); restarted after a crash, a timeout or a CUDA fault."""

    def __init__(self, flashinfer_repo: str | None, worker_log: str, python: str = sys.executable):
        self.bench_dir = benchmarks_dir(flashinfer_repo) if flashinfer_repo else ""
        self.worker_log = worker_log
        self.python = python
        self.proc: subprocess.Popen | None = None
        self._answers = -1
        self._buf = b""
        self.starts = 0
        """How many worker processes were started (tests and the summary read it)."""

    # -- lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Keep the caller's PYTHONPATH (the GPU image's wheel site lives there); add our package.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SCRIPTS_DIR, env.get("PYTHONPATH", "")) if p)
        env["FLASHINFER_NO_DOWNLOAD"] = "1"  # never stall on an artifact download
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        cmd = [self.python, "-u", "-m", "benchmark_model_kernels.run.worker", "--answer_fd", str(write_fd)]
        if self.bench_dir:
            cmd += ["--benchmarks_dir", self.bench_dir]
        with open(self.worker_log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                cwd=self.bench_dir or None,
                env=self._env(),
                start_new_session=True,  # its own process group: a timeout kills JIT children too
            )
        os.close(write_fd)
        self._answers, self._buf = read_fd, b""
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, kill: bool = False) -> None:
        """End the worker (closing stdin lets it exit; `kill` or a stuck one gets SIGKILL)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        if not kill:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill = True
        if kill and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.wait()
        os.close(self._answers)
        self._answers = -1

    close = stop

    # -- one case
    def run(self, request: dict[str, Any], timeout: float) -> WorkerReply:
        """Send one case and wait for its answer; never raises for a worker failure."""
        if not self.alive():
            self.stop(kill=True)
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._lost()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop(kill=True)
                return WorkerReply(lost=f"timed out after {timeout:g} s (--case_timeout); worker killed")
            ready, _, _ = select.select([self._answers], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._answers, 65536)
            if not chunk:  # EOF: the worker is gone without answering
                return self._lost()
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        answer = json.loads(line)
        if answer.get("poisoned"):
            self.stop()  # it exits by itself after a CUDA fault; reap it
        return WorkerReply(answer=answer)

    def _lost(self) -> WorkerReply:
        proc = self.proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
        self.stop(kill=True)
        return WorkerReply(lost=describe_exit(rc))


__all__ = [
    "DRIVER_SCRIPT",
    "RETRY_MARKER",
    "Outcome",
    "WorkerReply",
    "WorkerPool",
    "apply_timer_policy",
    "timer_from_output",
    "benchmarks_dir",
    "case_from_dict",
    "case_to_dict",
    "classify_driver_case",
    "classify_python_case",
    "describe_exit",
    "driver_argv",
    "has_driver",
    "pick_row",
    "read_driver_csv",
    "support_statements",
    "tail",
]
