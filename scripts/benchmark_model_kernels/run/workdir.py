"""The workdir: its file names, the checks before anything is written, its lock, and the files of a
dry run.

In: the --workdir path, the planned Cases and the RunSettings. Out: the workdir itself (checked,
created, locked for one run at a time), testlist.txt, cases.json and the case summary of
--dry_run, and on --resume the rows of the earlier results.json still worth keeping (and a backup
of that results.json).

A workdir is new, empty, or a workdir of this tool (TOOL_MARKERS): a folder holding other files is
refused, so that none of them is replaced.

Workdir contents:
  testlist.txt          every driver case's argv, runnable with the real driver's --testlist
  cases.json            (--dry_run) the planned cases with their skip reasons
  driver.log            everything printed per case, delimited by the case id
  results.json          the source of truth, rewritten atomically after EVERY case
  results.prev.json     (--resume) the results.json the resumed run started from; an older one
                        is kept as results.prev.<N>.json (1 the oldest, the highest N the newest)
  run.lock              held (flock) by the run using the workdir: its PID and command line
  slurm_logs/           (--launcher slurm, a sweep's folder) each job's submitit logs
  combined_results.csv  derived from results.json at the end
  cases/<case_id>.csv   each driver case's raw CSV;  cases/worker.log  worker start-up output
  autotune_cache.json   FlashInfer's autotuner cache (default location; --autotune_cache moves it)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shlex
import sys
import tempfile
from dataclasses import asdict, replace
from typing import Any, Iterable, Iterator, Sequence, TextIO

from ..core.case_schema import Case
from ..core.errors import UsageError
from ..core.files import copy_file_atomic, write_text_atomic
from ..core.results_schema import (
    RESULTS_JSON,
    Row,
    RunSettings,
    load_results,
    rows_of,
    settings_differences,
    validate_results,
)
from .argv import driver_argv
from .outcome import Outcome, row_from_case

TESTLIST = "testlist.txt"
CASES_JSON = "cases.json"
DRIVER_LOG = "driver.log"
CASE_DIR = "cases"
PREV_RESULTS = "results.prev.json"
DEFAULT_AUTOTUNE_CACHE = "autotune_cache.json"
LOCK_FILE = "run.lock"
#: A sweep's Slurm job logs (--launcher slurm), before any of its runs has written a file.
SLURM_LOGS = "slurm_logs"
#: Files that make a folder a workdir of this tool (a run, a dry run, a run's lock, a sweep's
#: Slurm logs).
TOOL_MARKERS = (RESULTS_JSON, CASES_JSON, LOCK_FILE, SLURM_LOGS)


def _existing_ancestor(path: str) -> str:
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_workdir(workdir: str | None, resume: bool) -> str:
    """The absolute workdir: new, empty, or a workdir of this tool (one holding results.json only
    with --resume). Raises UsageError otherwise, so that no file of another kind is replaced."""
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
    if os.path.isdir(path):
        _check_holds_only_tool_files(path, workdir)
    return path


def _check_holds_only_tool_files(path: str, workdir: str) -> None:
    """An existing workdir is empty or a workdir of this tool, whose files a run may replace."""
    try:
        names = sorted(os.listdir(path))
        foreign = bool(names) and not is_tool_workdir(path)
    except OSError as e:
        raise UsageError("--workdir", workdir, f"cannot be read ({e.strerror}); choose a readable "
                         "--workdir") from None
    if foreign:
        raise UsageError("--workdir", workdir, f"holds other files ({', '.join(names[:3])}) and no "
                         "results.json, so it is not a workdir of this tool; choose a new or empty "
                         "--workdir")


def is_tool_workdir(path: str) -> bool:
    """A run's or dry run's workdir (a marker file), or a sweep's: a folder of such workdirs."""
    def marked(folder: str) -> bool:
        return any(os.path.exists(os.path.join(folder, m)) for m in TOOL_MARKERS)

    if marked(path):
        return True
    return any(marked(os.path.join(path, name)) for name in os.listdir(path)
               if os.path.isdir(os.path.join(path, name)))


def make_workdir(path: str) -> None:
    """Create the workdir (and prove it writable) before anything is written into it."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as e:
        raise UsageError("--workdir", path, f"cannot be created or written ({e.strerror}); choose a "
                         "writable --workdir") from None


def take_workdir_lock(workdir: str, command: Sequence[str] | None = None) -> int:
    """Lock `workdir` for this process: an exclusive, non-blocking flock on its run.lock, which
    then names this PID and `command` (default sys.argv). Returns the lock file's descriptor: the
    lock lasts until it is closed or the process ends, however it ends. Raises UsageError naming
    the holder when another run has it."""
    try:
        fd = os.open(os.path.join(workdir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise UsageError("--workdir", workdir, f"its {LOCK_FILE} cannot be opened ({e.strerror}); "
                         "choose a writable --workdir") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = _lock_holder(fd)
        os.close(fd)
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise UsageError("--workdir", workdir, f"cannot be locked ({e.strerror}); choose a "
                             "--workdir on a local disk") from None
        raise UsageError("--workdir", workdir, f"is in use by another run ({holder}); wait for it "
                         "to finish, or choose another --workdir") from None
    argv = list(command if command is not None else sys.argv)
    try:
        # Written in place, not renamed into place: the lock belongs to this very file.
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}\ncommand {shlex.join(argv)}\n".encode())
    except OSError:
        os.close(fd)  # a full disk: give the lock back before the error is reported
        raise
    return fd


def _lock_holder(fd: int) -> str:
    """'pid 123: <command>' of the run holding the lock, as its run.lock says."""
    text = os.pread(fd, 64 * 1024, 0).decode(errors="replace")
    pid = re.search(r"^pid (\d+)$", text, re.M)
    command = re.search(r"^command (.*)$", text, re.M)
    if not pid:
        return "pid unknown: it is just starting"
    return f"pid {pid.group(1)}: {command.group(1) if command else '(command unknown)'}"


def release_workdir_lock(fd: int) -> None:
    """Unlock: an empty run.lock then says no run holds the workdir."""
    os.ftruncate(fd, 0)
    os.close(fd)


@contextlib.contextmanager
def workdir_lock(workdir: str, command: Sequence[str] | None = None) -> Iterator[None]:
    """Hold the workdir's lock (take_workdir_lock) for the block."""
    fd = take_workdir_lock(workdir, command)
    try:
        yield
    finally:
        release_workdir_lock(fd)


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
        d = c.to_dict()
        d["job"] = c.job
        d["driver_argv"] = driver_argv(c, settings) if d["job"] == "driver" else []
        listing.append(d)
    write_text_atomic(os.path.join(workdir, CASES_JSON),
                       json.dumps({"settings": asdict(settings), "cases": listing}, indent=1) + "\n")
    print(summary_table(cases), file=out)
    print(f"dry run: {len(cases)} cases -> {os.path.join(workdir, TESTLIST)}, "
          f"{os.path.join(workdir, CASES_JSON)}", file=out)
    return 0


def summary_table(cases: Iterable[Case]) -> str:
    """Cases per backend: to run vs known unsupported (the --dry_run summary)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for c in cases:
        kind = "attention " if c.kind == "attention" else ""  # its dtype is the KV cache's
        key = (c.dtype, kind + c.backend + (f" {c.variant}" if c.variant else "") + (" +quant" if c.with_quant else ""))
        counts.setdefault(key, [0, 0])[1 if c.skip_reason else 0] += 1
    lines = [f"{'dtype':<6} {'backend':<28} {'to run':>7} {'unsupported':>12}"]
    for (dtype, backend), (run, skip) in sorted(counts.items()):
        lines.append(f"{dtype:<6} {backend:<28} {run:>7} {skip:>12}")
    total_run = sum(v[0] for v in counts.values())
    total_skip = sum(v[1] for v in counts.values())
    lines.append(f"{'total':<35} {total_run:>7} {total_skip:>12}")
    return "\n".join(lines)


def check_resume_settings(workdir: str, settings: RunSettings, recorded: dict[str, Any] | None = None) -> None:
    """Refuse (UsageError) a --resume of `workdir` whose results.json was timed under other timing
    settings than `settings`. `recorded`: that file's settings when the caller has read it; else
    the file is read here, and one that cannot be read is left to load_kept to report. A file
    that records no settings at all has nothing to compare."""
    if recorded is None:
        try:
            recorded = load_results(os.path.join(workdir, RESULTS_JSON)).get("settings")
        except (OSError, ValueError):
            return
    if not recorded:
        return
    differences = settings_differences(recorded, settings)
    if differences:
        raise UsageError("--resume", workdir, f"its rows were timed with {', '.join(differences)}; resume "
                         "with the flags of its results.json \"command\" or choose a new --workdir")


def load_kept(workdir: str, cases: list[Case], settings: RunSettings) -> tuple[dict[str, Row], int]:
    """Rows of the previous results.json worth keeping: ok/unsupported, still planned, same shape.
    A previous run timed under other timing `settings` is refused (UsageError): its kept rows and
    the new ones would be two measurements in one table."""
    path = os.path.join(workdir, RESULTS_JSON)
    if not os.path.isfile(path):
        return {}, 0
    try:
        payload = load_results(path)
        validate_results(payload)
        previous = rows_of(payload)
    except (OSError, ValueError, TypeError) as e:
        raise UsageError("--resume", workdir, f"its results.json cannot be read ({e}); choose a new --workdir") from e
    check_resume_settings(workdir, settings, payload.get("settings") or {})
    planned = {c.case_id: c for c in cases}
    kept = {}
    for r in previous:
        c = planned.get(r.case_id)
        if c is None or r.status not in ("ok", "unsupported") or c.skip_reason:
            continue
        if _same_case(r, row_from_case(c, Outcome("failed"))):
            kept[r.case_id] = r if r.mode else replace(r, mode=c.mode)  # rows from before modes
    back_up_results(workdir)
    return kept, len(previous)


def back_up_results(workdir: str) -> str:
    """Copy results.json to results.prev.json, first renaming an existing results.prev.json to
    results.prev.<N>.json (N one above the highest there), so no earlier run is ever lost.
    Returns the backup's path."""
    backup = os.path.join(workdir, PREV_RESULTS)
    if os.path.exists(backup):
        os.rename(backup, os.path.join(workdir, f"results.prev.{_next_backup_number(workdir)}.json"))
    copy_file_atomic(os.path.join(workdir, RESULTS_JSON), backup)
    return backup


def _next_backup_number(workdir: str) -> int:
    numbers = [int(m.group(1)) for name in os.listdir(workdir)
               if (m := re.fullmatch(r"results\.prev\.(\d+)\.json", name))]
    return max(numbers, default=0) + 1


def _same_case(row: Row, fresh: Row) -> bool:
    """A kept row still describes the case planned now (same shape, routine, recipe)."""
    keys = ("kind", "name", "m", "dtype", "backend", "routine", "variant", "with_quant", "n", "k",
            "phys_n", "phys_k", "hidden", "intermediate", "experts", "global_experts", "top_k",
            "phys_hidden", "phys_intermediate", "activation", "routing_method", "num_tokens",
            "phase", "batch_size", "q_len", "kv_len", "context_len", "num_q_heads", "num_kv_heads",
            "head_dim_qk", "head_dim_vo", "kv_lora_rank", "qk_rope_head_dim", "page_size",
            "sliding_window", "attention_chunk_size")
    # Rows written before num_tokens ran num_tokens = M: only those still agree.
    if row.num_tokens is None:
        row = replace(row, num_tokens=row.m)
    return all(getattr(row, k) == getattr(fresh, k) for k in keys)


__all__ = [
    "CASES_JSON",
    "CASE_DIR",
    "DEFAULT_AUTOTUNE_CACHE",
    "DRIVER_LOG",
    "LOCK_FILE",
    "PREV_RESULTS",
    "SLURM_LOGS",
    "TESTLIST",
    "TOOL_MARKERS",
    "back_up_results",
    "check_workdir",
    "dry_run",
    "is_tool_workdir",
    "load_kept",
    "make_workdir",
    "release_workdir_lock",
    "summary_table",
    "take_workdir_lock",
    "testlist_text",
    "workdir_lock",
]
