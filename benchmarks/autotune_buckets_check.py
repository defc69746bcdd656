#!/usr/bin/env python3
"""Whether `--autotune_buckets timed` times what the default `all` times, and how much tuning it saves.

Runs `scripts/benchmark_model.py MODEL --tp 1 --no_attention` with FlashInfer's GEMM backends
(--backends cudnn cublaslt cublas) twice on the GPU, each with a fresh workdir, autotune cache and
result cache: first `--autotune_buckets all` (FlashInfer's own buckets 1, 2, 4, ... up to each
row's M), then `--autotune_buckets timed` (only M). Then it compares:
  tactics  for every (op, runner, shape) the timed run tuned, the tactic the default run chose
           for that same key in its autotune cache (run/argv.py: the timed call reads bucket M's
           entry under both);
  rows     the same cases with the same statuses, and each ok row's median within 5% of the
           other's or inside the other's p10-p90;
  wall     each run's wall time and its `cases` phase (results.json timings).
Tactics are reported, not judged: re-profiling the same key picks another of near-equal tactics
now and then (two default runs on the H200 disagreed on 13 of 230 cuBLASLt keys:
examples/h200/sweep_speed/README.md). The JIT caches are warm for the second run (the first
built the kernels); --prewarm first builds them in an untimed pass, to compare like with like.
Exit 0 when the rows agree, 1 when they do not, 2 on bad flags.

    source .fi618/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH
    python3 benchmarks/autotune_buckets_check.py --flashinfer_repo .fi618/flashinfer --out "$OUT/buckets"
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
#: FlashInfer's GEMM backends on sm_90 whose rows the autotuner tunes (mm_bf16, bmm_fp8).
BACKENDS = ("cudnn", "cublaslt", "cublas")
#: A row agrees when its medians differ by at most this, or one lies in the other's p10-p90.
MEDIAN_TOLERANCE = 0.05
META_KEYS = ("_metadata", "_generation", "_records")


def sweep_cmd(args: argparse.Namespace, workdir: str, *flags: str) -> list[str]:
    """benchmark_model.py over the model's FlashInfer GEMM rows, into `workdir`, plus `flags`."""
    return [sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), args.model, "--tp", "1",
            "--ms", *map(str, args.ms), "--dtypes", "bf16", "fp8", "--backends", *BACKENDS, "--no_attention",
            "--flashinfer_repo", args.flashinfer_repo, "--workdir", workdir, *flags]


def run(label: str, args: argparse.Namespace, buckets: str) -> dict[str, Any]:
    out = os.path.abspath(args.out)
    workdir = os.path.join(out, label)
    cmd = sweep_cmd(args, workdir, "--autotune_buckets", buckets,
                    "--autotune_cache", os.path.join(out, f"{label}_autotune_cache.json"),
                    "--cache", os.path.join(out, f"{label}_result_cache"))
    print(f"[{label}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    rc = subprocess.call(cmd, timeout=args.limit_s)
    wall = time.monotonic() - t0
    with open(os.path.join(workdir, "results.json")) as f:
        results = json.load(f)
    return {"label": label, "buckets": buckets, "exit_code": rc, "wall_s": round(wall, 1),
            "timings": results.get("timings"), "rows": results["rows"],
            "cache": os.path.join(out, f"{label}_autotune_cache.json")}


def tactic_differences(all_cache: str, timed_cache: str) -> tuple[int, list[str]]:
    """(keys compared, those whose runner or tactic differ): every key the timed run saved."""
    with open(all_cache) as f:
        default = json.load(f)
    with open(timed_cache) as f:
        timed = json.load(f)
    keys = [k for k in timed if k not in META_KEYS]
    diff = [f"{k}: all {default.get(k)} vs timed {timed[k]}" for k in keys if default.get(k) != timed[k]]
    return len(keys), diff


def row_differences(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    by_id = {r["case_id"]: r for r in b}
    out = []
    if {r["case_id"] for r in a} != set(by_id):
        out.append("the two runs have different cases")
    for r in a:
        o = by_id.get(r["case_id"])
        if o is None:
            continue
        if r["status"] != o["status"]:
            out.append(f"{r['case_id']}: status {r['status']} vs {o['status']}")
        elif r["status"] == "ok":
            m1, m2 = r["median_us"], o["median_us"]
            close = abs(m1 - m2) <= MEDIAN_TOLERANCE * max(m1, m2)
            inside = any(x.get("p10_us") is not None and x["p10_us"] <= y <= x["p90_us"]
                         for x, y in ((r, m2), (o, m1)))
            if not (close or inside):
                out.append(f"{r['case_id']}: median {m1:.2f} vs {m2:.2f} us")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flashinfer_repo", required=True, help="FlashInfer checkout, e.g. .fi618/flashinfer")
    p.add_argument("--model", default="llama-3.1-8b", help="MODEL, e.g. --model qwen3-8b (default llama-3.1-8b)")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8, 64, 512], help="e.g. --ms 1 8 64 512")
    p.add_argument("--out", required=True, help="a new folder for workdirs, caches and the record, e.g. /tmp/b")
    p.add_argument("--prewarm", action="store_true",
                   help="first a pass with --no_autotune that builds the JIT kernels, so both timed "
                   "passes start JIT-warm")
    p.add_argument("--limit_s", type=float, default=280.0, help="seconds each pass may take, e.g. --limit_s 280")
    args = p.parse_args(argv)
    if os.path.exists(args.out):
        print(f"error: --out={args.out}: exists; give a new folder", file=sys.stderr)
        return 2
    os.makedirs(args.out)
    if args.prewarm:
        subprocess.call(sweep_cmd(args, os.path.join(os.path.abspath(args.out), "prewarm"), "--no_autotune",
                                  "--no_check", "--no_cache"), timeout=args.limit_s)
    default = run("all", args, "all")
    timed = run("timed", args, "timed")
    compared, tactics = tactic_differences(default["cache"], timed["cache"])
    rows = row_differences(default["rows"], timed["rows"])
    record = {"model": args.model, "ms": args.ms, "prewarm": args.prewarm,
              "runs": [{k: v for k, v in r.items() if k != "rows"} for r in (default, timed)],
              "tactics_compared": compared, "tactic_differences": tactics, "row_differences": rows}
    with open(os.path.join(args.out, "autotune_buckets_check.json"), "w") as f:
        json.dump(record, f, indent=1)
    for r in (default, timed):
        cases = ((r["timings"] or {}).get("phases_s") or {}).get("cases")
        print(f"{r['label']}: {r['wall_s']:.0f} s wall, cases {cases} s, exit {r['exit_code']}")
    print(f"tactics: {compared} keys compared, {len(tactics)} differ; rows: {len(rows)} differ")
    for line in (tactics + rows)[:40]:
        print("  " + line)
    return 0 if not rows else 1


if __name__ == "__main__":
    sys.exit(main())
