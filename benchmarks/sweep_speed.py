#!/usr/bin/env python3
"""Wall time of real sweeps on the GPU against their targets (exit 1 when one is missed).

Runs `scripts/benchmark_model.py` into fresh workdirs under --out, in this order:
  cold    Llama-3.1-8B TP=1, M = 1 8 64 512: its own autotune cache, no result cache (and
          whatever JIT caches the machine has: a fresh machine has none; the record says which)
  warm    the same sweep, tuning reused from cold's autotune cache (JIT warm), every case timed
          again into a new result cache (<out>/result_cache; as in any run with the cache on, one
          activation quantization is timed once for all the backends that share it)
  cached  the same sweep again with that result cache: every timed row is copied from it
  models  the 8 bundled models at TP=1, M = 1 8 64 512, in one command, from empty caches (its
          own autotune cache and result cache, shared by the 8 runs); an --out that already
          holds it is continued with --resume and the wall times of the parts add up
and README.md's two GPU-path commands as written there (steps 4 and 5, README_PLUMBING and
README_FULL; only --flashinfer_repo and --workdir are this command's), a README user's order:
  readme_plumbing_cold  step 4, the plumbing run, on a fresh machine: nothing built, no kept plan,
                        capability answer or result cache
  readme_full_cold      step 5, the full run, after it (as a README user comes to it)
  readme_plumbing_warm  step 4 again into a new workdir, the machine warm, with --no_cache: every row
                        timed again (as written, the result cache would copy them all: `cached`)
  readme_full_warm      step 5 likewise (its new workdir reuses the tuning the cold run kept per
                        user, in <out>/user_cache, as the command does)
A readme run (or models) given alone with --runs, whose workdir and record are in --out already, is
continued with --resume and its parts' wall times add up, so that one longer than a device call
can be finished by the next call on the same machine.
Targets (H200): cold <= 150 s, warm <= 30 s, cached <= 10 s, models <= 900 s,
readme_plumbing_cold <= 120 s, readme_plumbing_warm <= 60 s, readme_full_cold <= 480 s,
readme_full_warm <= 120 s. A run is met when
it finishes within its target and every case has a row (exit code 0, or 1 when some rows failed:
the record and the summary line count them, e.g. cutile rows without the tileiras compiler);
`cached` also needs every ok row copied from the cache with the warm run's number. Each run gets at most what is left
of --budget_s (less what the runs after it need), so one command fits a device call's limit; a
run stopped there is recorded as missed, with the rows it wrote.

    source .fi618/setup.sh && python benchmarks/sweep_speed.py \\
        --flashinfer_repo .fi618/flashinfer --out "$OUT/sweep"

writes <out>/sweep_speed_<runs>.json (commands, wall times, exit codes, rows per status, rows
copied, targets) and prints one line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_group import Interrupted, call_within  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S = {"cold": 150.0, "warm": 30.0, "cached": 10.0, "models": 900.0,
            "readme_plumbing_cold": 120.0, "readme_full_cold": 480.0, "readme_plumbing_warm": 60.0,
            "readme_full_warm": 120.0}
#: Seconds kept back, while a run goes, for each run after it (what it needs on the H200 with
#: some margin): the budget cut lands on the run that overran, not on the ones after it.
RESERVE_S = {"cold": 0.0, "warm": 110.0, "cached": 30.0, "models": 0.0, "readme_plumbing_cold": 0.0,
             "readme_full_cold": 0.0, "readme_plumbing_warm": 70.0, "readme_full_warm": 0.0}
#: README.md "The GPU path", step 4 (the plumbing run) and step 5 (the full run), word for word
#: (tests/benchmarks/test_sweep_speed.py holds them to the README).
README_PLUMBING = ("llama-3.1-8b", "--tp", "1", "--flashinfer_repo", "~/flashinfer", "--workdir", "workdirs/plumbing",
                   "--ms", "8", "--kv_lens", "1024", "--dry_run_iters", "1", "--num_iters", "3", "--no_autotune")
README_FULL = ("qwen3-30b-a3b", "--tp", "1", "--ep", "1", "--flashinfer_repo", "~/flashinfer", "--workdir",
               "workdirs/qwen3-30b-a3b-tp1", "--ms", "1", "8", "64", "512")
README_RUNS = {"readme_plumbing_cold": README_PLUMBING, "readme_full_cold": README_FULL,
               "readme_plumbing_warm": README_PLUMBING, "readme_full_warm": README_FULL}
#: Runs a later call continues with --resume when their workdir and record are there.
CONTINUED = ("models", *README_RUNS)
BUNDLED_MODELS = ("deepseek-v3", "gpt-oss-120b", "kimi-k2", "llama-3.1-70b", "llama-3.1-8b",
                  "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-8b")
#: Where FlashInfer and Triton keep what they compiled: whether a run was cold for JIT too.
JIT_CACHES = ("~/.cache/flashinfer", "~/.triton/cache")


def readme_argv(label: str, args: argparse.Namespace) -> list[str]:
    """README's command of run `label` with this command's driver checkout and workdir."""
    argv = list(README_RUNS[label])
    argv[argv.index("--flashinfer_repo") + 1] = args.flashinfer_repo
    argv[argv.index("--workdir") + 1] = os.path.join(os.path.abspath(args.out), label)
    return argv + (["--no_cache"] if label.endswith("_warm") else [])


def run_argv(label: str, args: argparse.Namespace, resume: bool = False) -> list[str]:
    """benchmark_model.py's argv for run `label`."""
    if label in README_RUNS:
        return readme_argv(label, args) + (["--resume"] if resume else [])
    out = os.path.abspath(args.out)
    # The sweep the targets were set for: GEMM and MoE rows (attention rows are another workload).
    common = ["--ms", *map(str, args.ms), "--flashinfer_repo", args.flashinfer_repo, "--no_attention",
              "--autotune_buckets", args.autotune_buckets, "--workdir", os.path.join(out, label)]
    if label == "models":
        flags = ["--autotune_cache", os.path.join(out, "models_autotune_cache.json"),
                 "--cache", os.path.join(out, "models_result_cache")]
        return [*args.models, "--tp", "1", *common, *flags, *(["--resume"] if resume else [])]
    if label == "cold":  # its own file (not the per-user default), which warm then reads
        flags = ["--autotune_cache", os.path.join(out, "cold", "autotune_cache.json"), "--no_cache"]
    else:  # warm fills the result cache that cached then reads
        flags = ["--autotune_cache", os.path.join(out, "cold", "autotune_cache.json"),
                 "--cache", os.path.join(out, "result_cache")]
    return [args.model, "--tp", "1", *common, *flags]


def _jit_caches() -> dict[str, bool]:
    def filled(path: str) -> bool:
        path = os.path.expanduser(path)
        return os.path.isdir(path) and any(os.scandir(path))

    return {p: filled(p) for p in JIT_CACHES}


def _payloads(workdirs: list[str]) -> dict[str, dict[str, Any] | None]:
    """Each workdir's results.json (None where it is missing or unreadable), read once."""
    found: dict[str, dict[str, Any] | None] = {}
    for w in workdirs:
        try:
            with open(os.path.join(w, "results.json")) as f:
                found[w] = json.load(f)
        except (OSError, ValueError):
            found[w] = None
    return found


def _rows(payloads: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    return [r for p in payloads.values() if p for r in p.get("rows", [])]


def _timings(payloads: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """Each run's own account of its wall time (results.json["timings"], run/phases.py)."""
    return {os.path.basename(w): (p or {}).get("timings") for w, p in payloads.items()}


def _workdirs(label: str, args: argparse.Namespace) -> list[str]:
    top = os.path.join(os.path.abspath(args.out), label)
    if label != "models":
        return [top]
    return [os.path.join(top, name) for name in sorted(os.listdir(top))
            if os.path.isdir(os.path.join(top, name))] if os.path.isdir(top) else []


def _complete(label: str, args: argparse.Namespace, payloads: dict[str, dict[str, Any] | None]) -> bool:
    """Every run of `label` wrote results.json with a row for each of its cases."""
    if not payloads or (label == "models" and len(payloads) != len(args.models)):
        return False
    for payload in payloads.values():
        if payload is None or (payload.get("notes") or {}).get("incomplete") or not payload.get("rows"):
            return False
    return True


def run_once(label: str, args: argparse.Namespace, limit: float, earlier: dict[str, Any] | None) -> dict:
    resume = label in CONTINUED and earlier is not None
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), *run_argv(label, args, resume)]
    print(f"[{label}] (limit {limit:.0f} s) {' '.join(cmd)}", file=sys.stderr, flush=True)
    jit_before = _jit_caches()
    t0 = time.monotonic()
    # The tool's own per-user cache (FlashInfer's kept capability answers) lives under --out, so
    # cold starts without one and warm and cached reuse the one cold kept.
    env = {**os.environ, "XDG_CACHE_HOME": os.path.join(os.path.abspath(args.out), "user_cache")}
    if label in args.profile:
        # Sampled stacks of the run and its workers (py-spy, non-blocking: the run is not paused
        # to be sampled), as collapsed stacks a flame-graph tool or `sort | uniq` reads.
        cmd = [args.py_spy, "record", "--subprocesses", "--nonblocking", "--rate", "50", "--format", "raw",
               "-o", os.path.join(os.path.abspath(args.out), f"profile_{label}.txt"), "--", *cmd]
    # In a process group of its own, stopped with it at the limit: the tool's workers too.
    rc, stopped = call_within(cmd, limit, env=env)
    wall = time.monotonic() - t0
    workdirs = _workdirs(label, args)
    payloads = _payloads(workdirs)
    rows = _rows(payloads)
    parts = [*(earlier or {}).get("parts", []), {"wall_s": round(wall, 1), "exit_code": rc,
                                                 "stopped_at_limit": stopped}]
    total = sum(p["wall_s"] for p in parts)
    counts = Counter(r["status"] for r in rows)
    complete = not stopped and _complete(label, args, payloads)
    record = {"label": label, "command": cmd, "exit_code": rc, "wall_s": round(total, 1),
              "parts": parts, "limit_s": round(limit), "target_s": TARGET_S[label],
              "rows": dict(counts), "rows_copied_from_cache": sum(bool(r.get("origin")) for r in rows),
              "complete": complete, "jit_caches_before": jit_before,
              "timings": _timings(payloads), "profiled": label in args.profile}
    record["met"] = complete and rc in (0, 1) and total <= TARGET_S[label]
    return record


def check_cached(cached: dict, args: argparse.Namespace) -> None:
    """The cached run's ok rows are all copies, each with the warm run's number."""
    out = os.path.abspath(args.out)
    warm = {r["case_id"]: r for r in _rows(_payloads([os.path.join(out, "warm")]))}
    ok = [r for r in _rows(_payloads([os.path.join(out, "cached")])) if r["status"] == "ok"]
    copies = [r for r in ok if r.get("origin")]
    same = all(warm.get(r["case_id"], {}).get("median_us") == r["median_us"] for r in copies)
    cached["all_ok_rows_copied"] = bool(ok) and len(copies) == len(ok)
    cached["numbers_equal_warm"] = bool(copies) and same
    cached["met"] = cached["met"] and cached["all_ok_rows_copied"] and cached["numbers_equal_warm"]


def earlier_record(out: str, label: str) -> dict[str, Any] | None:
    """The record of run `label` an earlier call left in `out` (its sweep_speed_<label>.json, from
    --runs <label> alone) when its workdir is there too: the run to continue; else None."""
    path = os.path.join(out, f"sweep_speed_{label}.json")
    if not (os.path.isdir(os.path.join(out, label)) and os.path.isfile(path)):
        return None
    with open(path) as f:
        return next((r for r in json.load(f)["runs"] if r["label"] == label), None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flashinfer_repo", required=True,
                   help="FlashInfer checkout, e.g. --flashinfer_repo .devbundle/flashinfer")
    p.add_argument("--model", default="llama-3.1-8b",
                   help="MODEL of the cold/warm/cached sweep, e.g. --model qwen3-8b (default llama-3.1-8b)")
    p.add_argument("--models", nargs="+", default=list(BUNDLED_MODELS),
                   help="MODELs of the models run, e.g. --models llama-3.1-8b qwen3-8b (default: the 8 bundled)")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8, 64, 512], help="e.g. --ms 1 8 64 512")
    p.add_argument("--out", default="sweep_speed_out",
                   help="Folder for the workdirs, caches and the record, e.g. --out /tmp/sweep")
    p.add_argument("--runs", nargs="+", choices=tuple(TARGET_S), default=["cold", "warm", "cached"],
                   help="Which runs, in this order, e.g. --runs models (default: cold warm cached; "
                   "warm needs cold's autotune cache and cached needs warm's result cache, from this "
                   "command or an earlier one with the same --out)")
    p.add_argument("--budget_s", type=float, default=570.0,
                   help="Seconds all runs together may take, e.g. --budget_s 570 (a 10-minute device "
                   "call less start-up margin); a run past what is left is stopped and missed")
    p.add_argument("--profile", nargs="+", choices=tuple(TARGET_S), default=[],
                   help="Runs to sample with py-spy into <out>/profile_<run>.txt, e.g. --profile warm "
                   "(the record marks them: a sampled run's wall time is not a clean measurement)")
    p.add_argument("--autotune_buckets", choices=("all", "timed"), default="timed",
                   help="benchmark_model.py's --autotune_buckets for every run, e.g. --autotune_buckets "
                   "all (FlashInfer tunes each GEMM row at every bucket up to its M; default timed, "
                   "the row's own M only, as benchmark_model.py does by default)")
    p.add_argument("--py_spy", default="py-spy", help="The py-spy executable, e.g. --py_spy ~/.local/bin/py-spy")
    args = p.parse_args(argv)
    out = os.path.abspath(args.out)
    earlier = {label: earlier_record(out, label) for label in args.runs if label in CONTINUED}
    for first in ("cold", "readme_plumbing_cold"):
        if first in args.runs and not earlier.get(first) and os.path.exists(os.path.join(out, "user_cache")):
            print(f"error: --out={args.out}: already holds user_cache/ (a cold run starts without it); "
                  "choose a new --out", file=sys.stderr)
            return 2
    for label in args.runs:
        if label != "models" and not earlier.get(label) and os.path.exists(os.path.join(out, label)):
            print(f"error: --out={args.out}: already holds {label}/; choose a new --out", file=sys.stderr)
            return 2
    needs = {"warm": os.path.join(out, "cold", "autotune_cache.json"), "cached": os.path.join(out, "result_cache")}
    for label, path in needs.items():
        before = {"warm": "cold", "cached": "warm"}[label]
        if label in args.runs and before not in args.runs and not os.path.exists(path):
            print(f"error: --runs={label}: needs {path} from a {before} run first", file=sys.stderr)
            return 2
    os.makedirs(out, exist_ok=True)
    record_path = os.path.join(out, f"sweep_speed_{'_'.join(args.runs)}.json")
    t_start = time.monotonic()
    runs = []
    order = [label for label in TARGET_S if label in args.runs]
    for i, label in enumerate(order):
        left = args.budget_s - (time.monotonic() - t_start)
        limit = left - sum(RESERVE_S[later] for later in order[i + 1:])
        try:
            runs.append(run_once(label, args, limit, earlier.get(label)))
        except Interrupted as e:
            print(f"interrupted by {e} during the {label} run, which was stopped with its workers; "
                  "no record written", file=sys.stderr)
            return 128 + signal.SIGTERM
    by_label = {r["label"]: r for r in runs}
    if "cached" in by_label:
        check_cached(by_label["cached"], args)
    record = {"model": args.model, "ms": args.ms, "budget_s": args.budget_s,
              "autotune_buckets": args.autotune_buckets, "runs": runs}
    with open(record_path, "w") as f:
        json.dump(record, f, indent=1)
    for r in runs:
        verdict = "met" if r["met"] else "MISSED"
        extra = "" if r["complete"] else " (incomplete: stopped at its limit or failed)"
        failed = r["rows"].get("failed", 0)
        print(f"{r['label']}: {r['wall_s']:.0f} s (target <= {r['target_s']:.0f} s, {verdict}){extra}; "
              f"exit {r['exit_code']}; rows {r['rows']}" + (f" ({failed} FAILED)" if failed else "")
              + f"; copied from cache {r['rows_copied_from_cache']}")
        for name, t in (r.get("timings") or {}).items():
            if t:
                phases = ", ".join(f"{k} {v:.1f}" for k, v in t["phases_s"].items())
                print(f"  {name}: {phases}; cases by job: "
                      + ", ".join(f"{j} {v['rows']} rows {v['s']:.1f} s" for j, v in t.get("cases_by_job", {}).items()))
                costly = sorted((t.get("cases_by_backend") or {}).items(), key=lambda kv: -kv[1]["s"])[:8]
                if costly:
                    print("    costliest: " + ", ".join(
                        f"{k} {v['rows']} rows {v['s']:.1f} s (first {v['first_s']:.1f})" for k, v in costly))
                warm = sorted((t.get("jit_warm_up_cases") or {}).items(), key=lambda kv: -kv[1])[:8]
                if warm:
                    print("    longest JIT warm-up cases: " + ", ".join(f"{k} {v:.1f} s" for k, v in warm))
    print(f"record: {record_path}")
    return 0 if all(r["met"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
