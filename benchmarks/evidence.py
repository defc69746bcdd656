#!/usr/bin/env python3
"""Runs one evidence recipe on the GPU machine: named shell steps under one time budget, every
step's output kept, one summary.

A recipe is a TOML file in benchmarks/evidence/ (`--list` names them): a list of steps, each a
bash command with its own time limit, run in order from the project root under a total budget.

    python3 benchmarks/evidence.py RECIPE FOLDER [--budget_s S] [--workdir DIR] [--tar FILE]

FOLDER (new, or one without a summary.json) receives
  <step>.stdout.txt, <step>.stderr.txt  each step's output
  the files the recipe collects         the `collect` globs, matched under the workdir
  gpu_after.txt                         `nvidia-smi --query-compute-apps=pid,name,used_memory
                                        --format=csv` after the steps (where nvidia-smi is)
  summary.json                          per step: command, rc, wall_s, timed_out, limit_s, skipped
and --tar FILE packs FOLDER into one .tar.gz (a device call returns at most 8 files: put FOLDER
outside the returned folder and FILE inside it). The summary is written after every step, and the
collection, gpu_after.txt and the tar are made however the steps ended (a SIGTERM or Ctrl-C stops
the running step and goes straight to them).

A step gets min(its limit_s, what is left of the budget less its reserve_s) seconds; with less
than min_step_s it is skipped ("budget spent"). At its limit the step's process group gets its
signal (TERM unless the step says INT) and, grace_s later, SIGKILL; it is recorded as timed out.
Each step runs `bash -c` with `set -uo pipefail`, the recipe's prelude, then its command, with
  OUT            FOLDER (absolute)
  WORK           the workdir (absolute): the recipe's `workdir`, --workdir, or FOLDER
  BUDGET_LEFT_S  whole seconds of the budget left when the step starts
  STEP_LIMIT_S   the step's own limit in whole seconds
in its environment. A step with `when` runs only when that command exits 0; a `required` step
that fails skips the steps after it.

Recipe keys: description, budget_s, steps (each: name, run, limit_s, and optionally reserve_s,
signal, grace_s, when, required, ok_rc); optionally workdir ("{tmp}" is the temporary folder,
$TMPDIR or /tmp; relative paths are under the project root), fresh_workdir (empty it first),
prelude, collect, min_step_s.

Exit status: 0 every step ran and ended with an rc in its ok_rc (default [0]); 1 some step did
not (failed, timed out or skipped for the budget); 2 bad input (one `error:` line).
Needs Python 3.11 (tomllib).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = os.path.join(ROOT, "benchmarks", "evidence")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from process_group import kill_group, stop_group  # noqa: E402

from benchmark_model_kernels.core.errors import OneLineArgumentParser, UsageError, cli_main  # noqa: E402

SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "KILL": signal.SIGKILL}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SUMMARY = "summary.json"
GPU_AFTER = "gpu_after.txt"
GPU_QUERY = ["nvidia-smi", "--query-compute-apps=pid,name,used_memory", "--format=csv"]


@dataclass(frozen=True)
class Step:
    name: str
    run: str
    limit_s: float
    reserve_s: float = 0.0
    """Seconds of the budget kept for the steps after this one."""
    signal: str = "TERM"
    grace_s: float = 15.0
    when: str = ""
    required: bool = False
    ok_rc: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    budget_s: float
    steps: tuple[Step, ...]
    workdir: str = ""
    """Empty: the output folder."""
    fresh_workdir: bool = False
    prelude: str = ""
    collect: tuple[str, ...] = ()
    min_step_s: float = 5.0


_NUMBER = (int, float)
_STEP_KEYS = {"name": str, "run": str, "limit_s": _NUMBER, "reserve_s": _NUMBER, "signal": str,
              "grace_s": _NUMBER, "when": str, "required": bool, "ok_rc": list}
_RECIPE_KEYS = {"description": str, "budget_s": _NUMBER, "steps": list, "workdir": str, "fresh_workdir": bool,
                "prelude": str, "collect": list, "min_step_s": _NUMBER}
_TYPE_NAMES = {str: "a string", _NUMBER: "a number of seconds", bool: "true or false", list: "a list"}
_REQUIRED = ({"description", "budget_s", "steps"}, {"name", "run", "limit_s"})


def _checked(table: dict[str, Any], keys: dict[str, Any], required: set[str], where: str) -> dict[str, Any]:
    for key, value in table.items():
        if key not in keys:
            raise UsageError(f"{where}.{key}", value, f"unknown key; the keys are {', '.join(sorted(keys))}")
        if not isinstance(value, keys[key]) or (isinstance(value, bool) and keys[key] is not bool):
            raise UsageError(f"{where}.{key}", value, f"must be {_TYPE_NAMES[keys[key]]}")
    missing = sorted(required - set(table))
    if missing:
        raise UsageError(where, "{...}", f"lacks {', '.join(missing)}")
    return table


def parse_recipe(name: str, table: dict[str, Any], where: str) -> Recipe:
    """A recipe from its parsed TOML table; every key is checked (UsageError names the bad one)."""
    _checked(table, _RECIPE_KEYS, _REQUIRED[0], where)
    steps = []
    for i, raw in enumerate(table["steps"]):
        at = f"{where}: steps[{i}]"
        if not isinstance(raw, dict):
            raise UsageError(at, raw, "must be a table ([[steps]])")
        _checked(raw, _STEP_KEYS, _REQUIRED[1], at)
        if not NAME.match(raw["name"]) or any(s.name == raw["name"] for s in steps):
            raise UsageError(f"{at}.name", raw["name"], "must be unique and of letters, digits, _ . -")
        if raw.get("signal", "TERM") not in SIGNALS:
            raise UsageError(f"{at}.signal", raw["signal"], f"use one of {', '.join(SIGNALS)}")
        min_step_s = table.get("min_step_s", Recipe.min_step_s)
        if raw["limit_s"] < min_step_s:
            raise UsageError(f"{at}.limit_s", raw["limit_s"], f"is below min_step_s={min_step_s}: it would never run")
        ok_rc = tuple(raw.get("ok_rc", [0]))
        if not ok_rc or not all(isinstance(rc, int) for rc in ok_rc):
            raise UsageError(f"{at}.ok_rc", raw.get("ok_rc"), "must be a list of exit codes, e.g. [0, 1]")
        steps.append(Step(**{**raw, "ok_rc": ok_rc}))
    if not steps:
        raise UsageError(f"{where}.steps", "[]", "give at least one [[steps]] table")
    if table["budget_s"] <= 0:
        raise UsageError(f"{where}.budget_s", table["budget_s"], "must be positive")
    collect = table.get("collect", [])
    if not all(isinstance(pattern, str) for pattern in collect):
        raise UsageError(f"{where}.collect", collect, "must be a list of glob patterns")
    return Recipe(**{**table, "name": name, "steps": tuple(steps), "collect": tuple(collect)})


def recipe_names() -> list[str]:
    return sorted(f[:-5] for f in os.listdir(RECIPES) if f.endswith(".toml"))


def load_recipe(name_or_path: str) -> Recipe:
    """The recipe of benchmarks/evidence/<name>.toml, or of a .toml file given by its path."""
    import tomllib  # Python 3.11+

    path = name_or_path if name_or_path.endswith(".toml") else os.path.join(RECIPES, f"{name_or_path}.toml")
    if not os.path.isfile(path):
        raise UsageError("RECIPE", name_or_path, f"no such recipe; use one of {', '.join(recipe_names())} "
                                                 "or the path of a .toml file")
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise UsageError("RECIPE", path, f"is not valid TOML: {e}") from None
    return parse_recipe(os.path.basename(path)[:-5], table, os.path.relpath(path, ROOT))


@dataclass
class StepRecord:
    step: str
    command: str
    rc: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    limit_s: float | None = None
    skipped: str = ""
    """Why the step did not run ("" when it ran)."""
    interrupted: str = ""
    """The signal that stopped the runner while this step ran ("" when none did)."""
    as_expected: bool = False


@dataclass
class RunRecord:
    recipe: str
    budget_s: float
    workdir: str
    steps: list[StepRecord] = field(default_factory=list)
    collected: list[str] = field(default_factory=list)
    gpu_after: str | None = None
    wall_s: float = 0.0
    interrupted: str = ""


class Interrupted(Exception):
    """The runner itself got SIGTERM or SIGINT."""


def _raise_interrupted(signum: int, _frame: object) -> None:
    # Once: the runner then stops the running step and collects, undisturbed by a second signal.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


@dataclass(frozen=True)
class Ended:
    rc: int
    """As a shell reports it: 128 + the signal's number for a process a signal ended."""
    timed_out: bool = False
    interrupted: str = ""


def _run_shell(script: str, limit_s: float, step: Step, env: dict[str, str], logs: tuple[str, str]) -> Ended:
    """How `bash -c script` ended, run in a process group of its own and stopped at limit_s (or
    when the runner itself is signalled)."""
    with open(logs[0], "w") as out, open(logs[1], "w") as err:
        proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)
        timed_out, interrupted = False, ""
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        except Interrupted as e:
            interrupted = str(e)
        if timed_out or interrupted:
            stop_group(proc, SIGNALS[step.signal], step.grace_s)
        # Whatever the step left running in its group (a background job) ends with it.
        kill_group(proc.pid, signal.SIGKILL)
    rc = proc.returncode
    return Ended(rc=128 - rc if rc < 0 else rc, timed_out=timed_out, interrupted=interrupted)


@dataclass(frozen=True)
class Context:
    recipe: Recipe
    out: str
    work: str
    deadline: float


def _script(ctx: Context, body: str) -> str:
    return "set -uo pipefail\n" + ctx.recipe.prelude + "\n" + body + "\n"


def _env(ctx: Context, left: float, limit: float) -> dict[str, str]:
    return {**os.environ, "OUT": ctx.out, "WORK": ctx.work, "BUDGET_LEFT_S": str(int(left)),
            "STEP_LIMIT_S": str(int(limit)), "PYTHONUNBUFFERED": "1"}


def run_step(ctx: Context, step: Step, blocked: str) -> StepRecord:
    record = StepRecord(step=step.name, command=step.run)
    left = ctx.deadline - time.monotonic()
    limit = min(step.limit_s, left - step.reserve_s)
    logs = (os.path.join(ctx.out, f"{step.name}.stdout.txt"), os.path.join(ctx.out, f"{step.name}.stderr.txt"))
    if blocked:
        record.skipped = blocked
    elif limit < ctx.recipe.min_step_s:
        record.skipped = "budget spent"
    elif step.when:
        ended = _run_shell(_script(ctx, step.when), min(limit, 60.0), step, _env(ctx, left, limit), logs)
        if ended.interrupted:
            record.skipped, record.interrupted = f"runner got {ended.interrupted}", ended.interrupted
        elif ended.rc != 0 or ended.timed_out:
            record.skipped = f"when: exit {ended.rc}" + (" (timed out)" if ended.timed_out else "")
            record.as_expected = True
    if record.skipped:
        return record
    left = ctx.deadline - time.monotonic()
    limit = min(step.limit_s, left - step.reserve_s)
    record.limit_s = round(limit, 1)
    t0 = time.monotonic()
    ended = _run_shell(_script(ctx, step.run), limit, step, _env(ctx, left, limit), logs)
    record.wall_s = round(time.monotonic() - t0, 1)
    record.rc, record.timed_out, record.interrupted = ended.rc, ended.timed_out, ended.interrupted
    record.as_expected = record.rc in step.ok_rc and not (record.timed_out or record.interrupted)
    return record


def _tail(path: str, n: int = 3) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def _say(record: StepRecord, out: str) -> None:
    if record.skipped:
        print(f"{record.step}: skipped, {record.skipped}", flush=True)
        return
    flag = " TIMED OUT" if record.timed_out else (f", stopped: runner got {record.interrupted}"
                                                    if record.interrupted else "")
    print(f"{record.step}: rc={record.rc}{flag} wall={record.wall_s:.0f}s (limit {record.limit_s:.0f}s)")
    for name in (f"{record.step}.stdout.txt", f"{record.step}.stderr.txt"):
        for line in _tail(os.path.join(out, name)):
            print(f"    {line}")
    sys.stdout.flush()


def collect(recipe: Recipe, work: str, out: str) -> list[str]:
    """Copies the files the recipe's globs match under `work` into `out` at the same relative path
    (nothing to copy when the workdir is the output folder or inside it)."""
    if os.path.commonpath([work, out]) == out:
        return []
    copied = []
    for pattern in recipe.collect:
        for path in sorted(glob.glob(os.path.join(work, pattern), recursive=True)):
            if not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, work)
            os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
            shutil.copy2(path, os.path.join(out, rel))
            copied.append(rel)
    return sorted(set(copied))


def gpu_after(out: str) -> str | None:
    if shutil.which(GPU_QUERY[0]) is None:
        return None
    try:
        proc = subprocess.run(GPU_QUERY, capture_output=True, text=True, timeout=60)
        text = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        text = "nvidia-smi: no answer within 60 s\n"
    with open(os.path.join(out, GPU_AFTER), "w") as f:
        f.write(text)
    return GPU_AFTER


def write_summary(record: RunRecord, out: str) -> None:
    tmp = os.path.join(out, SUMMARY + ".part")
    with open(tmp, "w") as f:
        json.dump(asdict(record), f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(out, SUMMARY))


def _resolve_workdir(recipe: Recipe, given: str | None, out: str) -> str:
    workdir = given if given is not None else recipe.workdir.replace("{tmp}", tempfile.gettempdir())
    if not workdir:
        return out
    return os.path.abspath(os.path.join(ROOT, workdir))


def run_recipe(recipe: Recipe, out: str, budget_s: float, workdir: str | None = None) -> RunRecord:
    """Runs every step into `out`; returns (and writes into summary.json) what each did."""
    out = os.path.abspath(out)
    if os.path.exists(os.path.join(out, SUMMARY)):
        raise UsageError("FOLDER", out, f"holds an earlier run's {SUMMARY}; give a new folder")
    work = _resolve_workdir(recipe, workdir, out)
    if recipe.fresh_workdir:
        if work == out or os.path.commonpath([work, out]) == work or os.path.commonpath([work, ROOT]) == work:
            raise UsageError("workdir", work, "a fresh_workdir is emptied first: give one that holds neither "
                                              "the output folder nor the project")
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    t_start = time.monotonic()
    ctx = Context(recipe=recipe, out=out, work=work, deadline=t_start + budget_s)
    record = RunRecord(recipe=recipe.name, budget_s=budget_s, workdir=work)
    handlers = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    blocked = ""
    try:
        for step in recipe.steps:
            step_record = run_step(ctx, step, blocked)
            record.steps.append(step_record)
            _say(step_record, out)
            if step_record.interrupted:
                record.interrupted = step_record.interrupted
                blocked = f"runner got {record.interrupted}"
            elif step.required and not step_record.as_expected and not blocked:
                blocked = f"required step {step.name} did not succeed"
            write_summary(record, out)
    except Interrupted as e:  # between two steps
        record.interrupted = str(e)
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        record.collected = collect(recipe, work, out)
        record.gpu_after = gpu_after(out)
        record.wall_s = round(time.monotonic() - t_start, 1)
        write_summary(record, out)
    return record


def pack(out: str, tar_path: str) -> None:
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(out, arcname=os.path.basename(os.path.abspath(out)))


def _parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", nargs="?", help="a recipe of benchmarks/evidence/ (--list), e.g. attention, "
                                             "or the path of a .toml file")
    p.add_argument("folder", nargs="?", help="the output folder, e.g. /tmp/ev (new, or without a summary.json)")
    p.add_argument("--budget_s", type=float, help="total seconds for the steps (default: the recipe's), e.g. 540")
    p.add_argument("--workdir", help="the folder the steps work in (default: the recipe's, else the output "
                                     "folder), e.g. workdirs/attention")
    p.add_argument("--tar", help="also pack the output folder into this .tar.gz, e.g. $OUT/attention.tar.gz")
    p.add_argument("--list", action="store_true", help="list the recipes and exit")
    return p


def run(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        for name in recipe_names():
            print(f"{name:24s} {load_recipe(name).description.strip().splitlines()[0]}")
        return 0
    if not args.recipe or not args.folder:
        raise UsageError("RECIPE FOLDER", " ".join(filter(None, [args.recipe, args.folder])) or "none",
                         "give a recipe and an output folder, e.g. attention /tmp/ev; --list names the recipes")
    recipe = load_recipe(args.recipe)
    budget_s = args.budget_s if args.budget_s is not None else recipe.budget_s
    if budget_s <= 0:
        raise UsageError("--budget_s", args.budget_s, "must be positive, e.g. 540")
    out = os.path.abspath(args.folder)
    if args.tar:
        tar_path = os.path.abspath(args.tar)
        if os.path.commonpath([tar_path, out]) == out:
            raise UsageError("--tar", args.tar, f"must lie outside the output folder {out}")
    record = run_recipe(recipe, out, budget_s, args.workdir)
    if args.tar:
        pack(out, tar_path)
    missed = [s.step for s in record.steps if not s.as_expected]
    print(f"{recipe.name}: {len(record.steps) - len(missed)} of {len(record.steps)} steps as expected"
          + (f" (not: {', '.join(missed)})" if missed else "") + f"; total wall {record.wall_s:.0f}s; "
          f"summary {os.path.join(out, SUMMARY)}" + (f"; archive {tar_path}" if args.tar else ""))
    if record.interrupted:
        return 128 + SIGNALS[record.interrupted.removeprefix("SIG")].value
    return 1 if missed else 0


def main(argv: list[str] | None = None) -> int:
    return cli_main(lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
