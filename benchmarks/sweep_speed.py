#!/usr/bin/env python3
"""Wall time of a real sweep on the GPU: Llama-3.1-8B, TP=1, M = 1 8 64 512, autotune on.

Runs `scripts/benchmark_model.py` twice into fresh workdirs:
  cold  its own autotune cache (and whatever JIT cache the machine has)
  warm  --autotune_cache pointing at the cold run's cache (tuning is reused, JIT is warm)
and writes <out>/sweep_speed_<runs>.json with the wall times, exit codes and row counts per status.
Targets: cold under 6 min, warm under 2 min; exit 1 when a target is missed.

    source .devbundle/setup.sh && python benchmarks/sweep_speed.py \\
        --flashinfer_repo .devbundle/flashinfer --out "$OUT/sweep"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S = {"cold": 360.0, "warm": 120.0}


def run_once(label: str, args: argparse.Namespace, extra: list[str]) -> dict:
    workdir = os.path.join(args.out, label)
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), args.model,
           "--tp", "1", "--ms", *map(str, args.ms), "--flashinfer_repo", args.flashinfer_repo,
           "--workdir", workdir, *extra]
    print(f"[{label}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    wall = time.monotonic() - t0
    counts: Counter = Counter()
    try:
        with open(os.path.join(workdir, "results.json")) as f:
            counts.update(r["status"] for r in json.load(f)["rows"])
    except (OSError, ValueError, KeyError):
        pass
    return {"label": label, "command": cmd, "exit_code": rc, "wall_s": round(wall, 1),
            "target_s": TARGET_S[label], "met": wall < TARGET_S[label], "rows": dict(counts)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--flashinfer_repo", required=True,
                   help="FlashInfer checkout, e.g. --flashinfer_repo .devbundle/flashinfer")
    p.add_argument("--model", default="llama-3.1-8b",
                   help="MODEL for benchmark_model.py, e.g. --model ../shared/configs/llama-3.1-8b")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8, 64, 512], help="e.g. --ms 1 8 64 512")
    p.add_argument("--out", default="sweep_speed_out",
                   help="Folder for the two workdirs and sweep_speed.json, e.g. --out /tmp/sweep")
    p.add_argument("--runs", nargs="+", choices=("cold", "warm"), default=["cold", "warm"],
                   help="Which runs, e.g. --runs warm (reuses <out>/cold/autotune_cache.json from an "
                   "earlier --runs cold: lets each fit a 10-minute command limit)")
    args = p.parse_args(argv)
    for label in args.runs:
        if os.path.exists(os.path.join(args.out, label)):
            print(f"error: --out={args.out}: already holds {label}/; choose a new --out", file=sys.stderr)
            return 2
    cache = os.path.join(args.out, "cold", "autotune_cache.json")
    if "cold" not in args.runs and not os.path.isfile(cache):
        print(f"error: --runs=warm: needs {cache} from a cold run first", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    runs = []
    for label in args.runs:
        runs.append(run_once(label, args, ["--autotune_cache", cache] if label == "warm" else []))
    record = {"model": args.model, "ms": args.ms, "runs": runs}
    path = os.path.join(args.out, f"sweep_speed_{'_'.join(args.runs)}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    for r in runs:
        verdict = "met" if r["met"] else "MISSED"
        print(f"{r['label']}: {r['wall_s']:.0f} s (target < {r['target_s']:.0f} s, {verdict}); "
              f"exit {r['exit_code']}; rows {r['rows']}")
    print(f"record: {path}")
    return 0 if all(r["met"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
