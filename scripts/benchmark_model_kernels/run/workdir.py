"""The workdir: its file names, the checks before anything is written, and the files of a dry run.

In: the --workdir path, the planned Cases and the RunSettings. Out: the workdir itself (checked,
created), testlist.txt, cases.json and the case summary of --dry_run, and on --resume the rows of
the earlier results.json still worth keeping.

Workdir contents:
  testlist.txt          every driver case's argv, runnable with the real driver's --testlist
  cases.json            (--dry_run) the planned cases with their skip reasons
  driver.log            everything printed per case, delimited by the case id
  results.json          the source of truth, rewritten atomically after EVERY case
  results.prev.json     (--resume) the results.json the resumed run started from
  combined_results.csv  derived from results.json at the end
  cases/<case_id>.csv   each driver case's raw CSV;  cases/worker.log  worker start-up output
  autotune_cache.json   FlashInfer's autotuner cache (default location; --autotune_cache moves it)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import asdict, replace
from typing import Iterable, TextIO

from ..cases.schema import Case
from ..errors import UsageError
from ..files import write_text_atomic
from .argv import driver_argv
from .outcome import Outcome, row_from_case
from .results import RESULTS_JSON, Row, RunSettings, load_results, rows_of

TESTLIST = "testlist.txt"
CASES_JSON = "cases.json"
DRIVER_LOG = "driver.log"
CASE_DIR = "cases"
PREV_RESULTS = "results.prev.json"
DEFAULT_AUTOTUNE_CACHE = "autotune_cache.json"


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
        key = (c.dtype, c.backend + (f" {c.variant}" if c.variant else "") + (" +quant" if c.with_quant else ""))
        counts.setdefault(key, [0, 0])[1 if c.skip_reason else 0] += 1
    lines = [f"{'dtype':<6} {'backend':<28} {'to run':>7} {'unsupported':>12}"]
    for (dtype, backend), (run, skip) in sorted(counts.items()):
        lines.append(f"{dtype:<6} {backend:<28} {run:>7} {skip:>12}")
    total_run = sum(v[0] for v in counts.values())
    total_skip = sum(v[1] for v in counts.values())
    lines.append(f"{'total':<35} {total_run:>7} {total_skip:>12}")
    return "\n".join(lines)


def load_kept(workdir: str, cases: list[Case]) -> tuple[dict[str, Row], int]:
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


def _same_case(row: Row, fresh: Row) -> bool:
    """A kept row still describes the case planned now (same shape, routine, recipe)."""
    keys = ("kind", "name", "m", "dtype", "backend", "routine", "variant", "with_quant", "n", "k",
            "phys_n", "phys_k", "hidden", "intermediate", "experts", "global_experts", "top_k",
            "phys_hidden", "phys_intermediate", "activation", "routing_method", "num_tokens")
    # Rows written before num_tokens ran the MoE layer at num_tokens = M: only those still agree.
    if row.kind == "moe" and row.num_tokens is None:
        row = replace(row, num_tokens=row.m)
    return all(getattr(row, k) == getattr(fresh, k) for k in keys)


__all__ = [
    "CASES_JSON",
    "CASE_DIR",
    "DEFAULT_AUTOTUNE_CACHE",
    "DRIVER_LOG",
    "PREV_RESULTS",
    "TESTLIST",
    "check_workdir",
    "dry_run",
    "load_kept",
    "make_workdir",
    "summary_table",
    "testlist_text",
]
