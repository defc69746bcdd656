"""The workdir: its file names, the checks before anything is written, its lock, and the files of a
dry run.

In: the --workdir path, the planned Cases and the RunSettings. Out: the workdir itself (checked,
created, locked for one run at a time), testlist.txt, cases.json and the case summary of
--dry_run, and on --resume the rows of the earlier results.json still worth keeping (and a backup
of that results.json).

A workdir is new, empty, or a workdir of this tool: one that holds the tool's own marker file
(workdir_owner.py, written when the tool creates the folder; a workdir of an earlier version is
adopted when its own results.json or cases.json is the tool's). A folder holding other files is
refused, so that none of them is replaced, and so is one where a name the run writes is a symbolic
or hard link.

Workdir contents:
  .benchmark-model-kernels  the marker: this folder is the tool's (format line; never delete it alone)
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
  autotune_cache.json   FlashInfer's autotuner cache where the GPU is not known here (else per user:
                        run/tuning_cache.py; --autotune_cache moves it)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shlex
import stat
import sys
import tempfile
from dataclasses import asdict, replace
from typing import Any, Iterable, Iterator, Sequence, TextIO

from ..core.case_schema import Case
from ..core.errors import UsageError
from ..core.files import copy_file_atomic, is_disk_full, write_text_atomic
from ..core.results_schema import (
    RESULTS_JSON,
    Row,
    RunSettings,
    load_results,
    row_from_dict,
    row_problem,
    settings_differences,
    validate_results,
)
from .argv import driver_argv
from .outcome import Outcome, row_from_case
from .workdir_owner import WORKDIR_MARKER, check_no_links, claim_folder, foreign_folder, is_tool_workdir

TESTLIST = "testlist.txt"
CASES_JSON = "cases.json"
DRIVER_LOG = "driver.log"
CASE_DIR = "cases"
PREV_RESULTS = "results.prev.json"
DEFAULT_AUTOTUNE_CACHE = "autotune_cache.json"
LOCK_FILE = "run.lock"
#: A sweep's Slurm job logs (--launcher slurm), before any of its runs has written a file.
SLURM_LOGS = "slurm_logs"


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
        check_no_links(path, "--workdir")
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
        raise foreign_folder("--workdir", workdir, names)


def make_workdir(path: str) -> None:
    """Create the workdir (and prove it writable) before anything is written into it, and mark it
    as this tool's (claim_folder: a folder of other files is refused, nothing written)."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
        claim_folder(path, "--workdir")
    except OSError as e:
        if is_disk_full(e):  # nothing of the run is written yet: the same command can run again
            raise UsageError("--workdir", path, f"disk full writing {e.filename or path} ({e.strerror}); free "
                             "space and run the same command again") from None
        raise UsageError("--workdir", path, f"cannot be created or written ({e.strerror}); choose a "
                         "writable --workdir") from None


def take_workdir_lock(workdir: str, command: Sequence[str] | None = None) -> int:
    """Lock `workdir` for this process: an exclusive, non-blocking flock on its run.lock, which
    then names this PID and `command` (default sys.argv). Returns the lock file's descriptor: the
    lock lasts until it is closed or the process ends, however it ends. Raises UsageError naming
    the holder when another run has it."""
    path = os.path.join(workdir, LOCK_FILE)
    try:
        # Never through a link: the lock truncates its file, which must be the workdir's own.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UsageError("--workdir", workdir, f"its {LOCK_FILE} is a symbolic link, which a run never "
                             f"follows; remove the link (rm {path}) or choose a new --workdir") from None
        raise UsageError("--workdir", workdir, f"its {LOCK_FILE} cannot be opened ({e.strerror}); "
                         "choose a writable --workdir") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        what = "a hard link to another file" if stat.S_ISREG(st.st_mode) else "not a regular file"
        raise UsageError("--workdir", workdir, f"its {LOCK_FILE} is {what}, which the lock would "
                         f"overwrite; remove it (rm {path}) or choose a new --workdir")
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
            payload = load_results(os.path.join(workdir, RESULTS_JSON))
        except (OSError, ValueError, RecursionError):
            return
        if not isinstance(payload, dict) or not isinstance(payload.get("settings", {}), (dict, type(None))):
            what = "its top level" if not isinstance(payload, dict) else "its \"settings\""
            raise UsageError("--resume", workdir, f"its results.json is not one of this tool's ({what} is not "
                             "a JSON object); choose a new --workdir")
        recorded = payload.get("settings")
    if not recorded:
        return
    differences = settings_differences(recorded, settings)
    if differences:
        raise UsageError("--resume", workdir, f"its rows were timed with {', '.join(differences)}; resume "
                         "with the flags of its results.json \"command\" or choose a new --workdir")


def load_kept(workdir: str, cases: list[Case], settings: RunSettings, warn: TextIO | None = None
              ) -> tuple[dict[str, Row], int]:
    """Rows of the previous results.json worth keeping: ok/unsupported, still planned, same shape,
    and valid rows (results_schema.row_problem, the check a result-cache entry gets): a row that is
    not is timed again, said once on `warn` (default stderr). A previous run timed under other
    timing `settings` is refused (UsageError): its kept rows and the new ones would be two
    measurements in one table."""
    path = os.path.join(workdir, RESULTS_JSON)
    if not os.path.isfile(path):
        return {}, 0
    try:
        payload = load_results(path)
        validate_results(payload, check_rows=False)
    except (OSError, ValueError, TypeError, RecursionError) as e:
        raise UsageError("--resume", workdir, f"its results.json cannot be read ({e}); choose a new --workdir") from e
    check_resume_settings(workdir, settings, payload.get("settings") or {})
    previous, bad = _valid_rows(payload["rows"])
    if bad:
        print(f"warning: resume: {len(bad)} row(s) of {path} are not valid rows and are timed again "
              f"(first: {bad[0]})", file=warn if warn is not None else sys.stderr)
    planned = {c.case_id: c for c in cases}
    kept = {}
    for r in previous:
        c = planned.get(r.case_id)
        if c is None or r.status not in ("ok", "unsupported") or c.skip_reason:
            continue
        if _same_case(r, row_from_case(c, Outcome("failed"))):
            kept[r.case_id] = r if r.mode else replace(r, mode=c.mode)  # rows from before modes
    back_up_results(workdir)
    return kept, len(payload["rows"])


def _valid_rows(raw_rows: list[Any]) -> tuple[list[Row], list[str]]:
    """The rows that pass row validation, and why each other one does not."""
    rows, bad = [], []
    for i, raw in enumerate(raw_rows):
        problem = row_problem(raw, f"rows[{i}]")
        if problem:
            bad.append(problem)
        else:
            rows.append(row_from_dict(raw))
    return rows, bad


def check_resume_plan(workdir: str, plan: dict[str, Any] | None) -> None:
    """Refuse (UsageError) a --resume of `workdir` whose results.json was planned for another
    model or layout than `plan` (a Plan's to_dict()): its kept rows would carry that model's layer
    counts. Compared: TP, EP, the model's type, architecture, layers, hidden and vocabulary sizes,
    and the layer count of every plan entry both hold (what a results.json predates is not
    compared). Nothing to compare without a results.json or a recorded plan."""
    try:
        recorded = load_results(os.path.join(workdir, RESULTS_JSON)).get("plan")
    except (OSError, ValueError, AttributeError, RecursionError):
        return  # left to load_kept to report
    if not isinstance(recorded, dict) or plan is None:
        return
    differences = plan_differences(recorded, plan)
    if differences:
        raise UsageError("--resume", workdir, f"its results.json is of {_plan_label(recorded)} and this run "
                         f"plans {_plan_label(plan)} ({', '.join(differences[:3])}); its rows would carry the "
                         "other's layer counts; resume with the MODEL and --tp/--ep of its results.json "
                         "\"command\", or choose a new --workdir")


def plan_differences(recorded: dict[str, Any], plan: dict[str, Any]) -> list[str]:
    """`field was X (now Y)` for each model or layout fact where two plan dicts differ; a fact
    either one does not record (an older plan) is not compared."""
    out = []
    for key in ("tp", "ep"):
        was, now = recorded.get(key), plan.get(key)
        if was is not None and now is not None and was != now:
            out.append(f"{key} was {was} (now {now})")
    old_model, new_model = recorded.get("model") or {}, plan.get("model") or {}
    for key in ("model_type", "architecture", "num_hidden_layers", "hidden_size", "vocab_size"):
        was, now = old_model.get(key), new_model.get(key)
        if was and now and was != now:
            out.append(f"{key} was {was} (now {now})")
    for part in ("gemms", "moe", "attention"):
        old_layers = _layers_by_name(recorded.get(part))
        for name, layers in _layers_by_name(plan.get(part)).items():
            if name in old_layers and old_layers[name] != layers:
                out.append(f"{name} layers was {old_layers[name]} (now {layers})")
    return out


def _layers_by_name(entries: Any) -> dict[str, Any]:
    return {e["name"]: e.get("layers") for e in entries or () if isinstance(e, dict) and "name" in e}


def _plan_label(plan: dict[str, Any]) -> str:
    model = plan.get("model") or {}
    return f"{model.get('name') or '(unnamed)'} TP={plan.get('tp')} EP={plan.get('ep')}"


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
    "WORKDIR_MARKER",
    "back_up_results",
    "check_resume_plan",
    "check_resume_settings",
    "check_workdir",
    "dry_run",
    "is_tool_workdir",
    "load_kept",
    "make_workdir",
    "plan_differences",
    "release_workdir_lock",
    "summary_table",
    "take_workdir_lock",
    "testlist_text",
    "workdir_lock",
]
