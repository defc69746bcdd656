#!/usr/bin/env python3
"""One sweep spread over several GPUs (--gpus) against the same sweep on one: wall times and rows.

Runs `scripts/benchmark_model.py MODELS --tp 1 --ms ... --no_cache --gpus LIST` once per --gpus
list (default "0,1" then "0"), each into <out>/gpus_<list>/, every case timed (no result cache)
with the same --autotune_cache, and compares the runs' rows model by model: the same case ids,
the same statuses, and each ok row's median within 5% of the other run's or inside its p10-p90
range. Target: the first list's wall time <= 0.6 x the last's. With --warmup an untimed one-GPU
pass first (M=1, one iteration, no autotuning) builds the JIT kernels, so that neither timed run
pays for them. Writes <out>/gpus_speed.json and exits 1 when the rows differ or the target is
missed.

    source .fi618/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH && \\
    python benchmarks/gpus_speed.py --flashinfer_repo .fi618/flashinfer --out "$OUT/gpus" \\
        --autotune_cache /tmp/tuned.json --warmup
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEDIAN_TOLERANCE = 0.05
TARGET_RATIO = 0.6


def _rows(workdir: str) -> dict[str, dict[str, dict[str, Any]]]:
    """sub-workdir name -> case id -> row (a one-model run is its own sub-workdir "")."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    subs = [""] if os.path.isfile(os.path.join(workdir, "results.json")) else sorted(
        d for d in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, d, "results.json")))
    for sub in subs:
        with open(os.path.join(workdir, sub, "results.json")) as f:
            out[sub] = {r["case_id"]: r for r in json.load(f)["rows"]}
    return out


def same_number(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two ok rows agree: medians within MEDIAN_TOLERANCE, or either inside the other's p10-p90."""
    ma, mb = a.get("median_us"), b.get("median_us")
    if ma is None or mb is None:
        return ma == mb
    if abs(ma - mb) <= MEDIAN_TOLERANCE * max(abs(mb), 1e-12):
        return True

    def inside(x: float, row: dict[str, Any]) -> bool:
        lo, hi = row.get("p10_us"), row.get("p90_us")
        return lo is not None and hi is not None and lo <= x <= hi

    return inside(ma, b) or inside(mb, a)


def compare(first: str, second: str) -> dict[str, Any]:
    """What differs between two runs' rows (empty lists: the same cases, statuses and numbers)."""
    a, b = _rows(first), _rows(second)
    out: dict[str, Any] = {"models": sorted(a), "missing_runs": sorted(set(a) ^ set(b)),
                           "case_sets_differ": [], "status_differs": [], "number_differs": [], "ok_rows": 0}
    for sub in sorted(set(a) & set(b)):
        if set(a[sub]) != set(b[sub]):
            out["case_sets_differ"].append(sub)
        for cid in sorted(set(a[sub]) & set(b[sub])):
            ra, rb = a[sub][cid], b[sub][cid]
            if ra["status"] != rb["status"]:
                out["status_differs"].append(f"{sub}:{cid} {ra['status']} vs {rb['status']}")
            elif ra["status"] == "ok":
                out["ok_rows"] += 1
                if not same_number(ra, rb):
                    out["number_differs"].append(f"{sub}:{cid} {ra['median_us']} vs {rb['median_us']} us")
    out["same"] = not any(out[k] for k in ("missing_runs", "case_sets_differ", "status_differs", "number_differs"))
    return out


def run_once(gpus: str, args: argparse.Namespace, warmup: bool = False) -> dict[str, Any]:
    workdir = os.path.join(os.path.abspath(args.out), "warmup" if warmup else "gpus_" + gpus.replace(",", "_"))
    ms = ["1", "--num_iters", "1", "--dry_run_iters", "0", "--no_autotune"] if warmup else list(map(str, args.ms))
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), *args.models, "--tp", "1",
           "--ms", *ms, "--flashinfer_repo", args.flashinfer_repo, "--workdir", workdir,
           "--no_cache", "--gpus", gpus]
    if args.autotune_cache and not warmup:
        cmd += ["--autotune_cache", args.autotune_cache]
    print(f"[--gpus {gpus}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    return {"gpus": gpus, "command": cmd, "workdir": workdir, "exit_code": rc,
            "wall_s": round(time.monotonic() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--flashinfer_repo", required=True,
                   help="FlashInfer checkout, e.g. --flashinfer_repo .devbundle/flashinfer")
    p.add_argument("--models", nargs="+", default=["llama-3.1-8b", "qwen3-30b-a3b"],
                   help="MODELs, e.g. --models llama-3.1-8b (default llama-3.1-8b qwen3-30b-a3b)")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8, 64, 512], help="e.g. --ms 1 8 64 512")
    p.add_argument("--gpus_lists", nargs="+", default=["0,1", "0"],
                   help="--gpus of each run, the one-GPU run last, e.g. --gpus_lists 0,1,2,3 0")
    p.add_argument("--autotune_cache", default=None,
                   help="FlashInfer autotuner cache every run reads, e.g. --autotune_cache tuned.json "
                   "(the runs add to it; give a warm one so both are timed alike)")
    p.add_argument("--warmup", action="store_true",
                   help="Build the JIT kernels first in an untimed one-GPU pass (M=1, one iteration)")
    p.add_argument("--out", default="gpus_speed_out", help="Folder for the workdirs and the record")
    args = p.parse_args(argv)
    if len(args.gpus_lists) < 2:
        print("error: --gpus_lists: give at least two, e.g. --gpus_lists 0,1 0", file=sys.stderr)
        return 2
    for gpus in args.gpus_lists:
        if os.path.exists(os.path.join(os.path.abspath(args.out), "gpus_" + gpus.replace(",", "_"))):
            print(f"error: --out={args.out}: already holds the --gpus {gpus} run; choose a new --out",
                  file=sys.stderr)
            return 2
    os.makedirs(args.out, exist_ok=True)
    warmup = run_once(args.gpus_lists[-1], args, warmup=True) if args.warmup else None
    runs = [run_once(gpus, args) for gpus in args.gpus_lists]
    single = runs[-1]
    for r in runs[:-1]:
        r["ratio_to_one_gpu"] = round(r["wall_s"] / single["wall_s"], 3) if single["wall_s"] else None
        r["comparison"] = compare(r["workdir"], single["workdir"])
        r["met"] = (r["ratio_to_one_gpu"] is not None and r["ratio_to_one_gpu"] <= TARGET_RATIO
                    and r["comparison"]["same"] and r["exit_code"] in (0, 1))
    record = {"models": args.models, "ms": args.ms, "warmup": warmup, "target_ratio": TARGET_RATIO,
              "median_tolerance": MEDIAN_TOLERANCE, "runs": runs}
    path = os.path.join(args.out, "gpus_speed.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    for r in runs[:-1]:
        c = r["comparison"]
        print(f"--gpus {r['gpus']}: {r['wall_s']:.0f} s vs --gpus {single['gpus']}: {single['wall_s']:.0f} s "
              f"(ratio {r['ratio_to_one_gpu']}, target <= {TARGET_RATIO}); rows "
              + ("the same" if c["same"] else "DIFFER")
              + f" ({c['ok_rows']} ok rows compared; {len(c['status_differs'])} status, "
              f"{len(c['number_differs'])} number differences); {'met' if r['met'] else 'MISSED'}")
    print(f"record: {path}")
    return 0 if all(r["met"] for r in runs[:-1]) else 1


if __name__ == "__main__":
    sys.exit(main())
