#!/usr/bin/env python3
"""What `--autotune_tactics N` (a cap on the cuDNN tactics FlashInfer's autotuner profiles per
shape) costs in accuracy against the full search, and what it saves.

Runs `scripts/benchmark_model.py MODEL --tp 1 --no_attention --backends cudnn` on the GPU once
with `--autotune_tactics all` and once per cap in --caps, each with a fresh workdir, autotune
cache and result cache, and compares every capped run with the full one:
  rows     the same cases with the same statuses, and each ok row's median within 5% of the
           full search's or inside the other's p10-p90 (autotune_buckets_check.py's rule);
  slower   the capped rows whose median is more than 5% above the full search's: what the cap
           costs (a capped row can also come out faster: the full search profiles with a warm
           L2 and picks among near-equal tactics, examples/h200/sweep_speed/README.md);
  tactics  for every autotune cache key both runs saved, whether they chose the same tactic;
  wall     each run's wall time and `cases` phase (results.json timings).
--prewarm first builds the JIT kernels in an untimed pass, so every run starts JIT-warm.
--compare DIR compares an earlier --out again (on a CPU) without running anything. Exit 0 when
every capped run's rows agree with the full search, 1 when one does not, 2 on bad flags.

    source .devslim/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH
    python3 benchmarks/autotune_tactics_check.py --flashinfer_repo "$FLASHINFER_REPO" --prewarm --out "$OUT/tactics"
    python3 benchmarks/autotune_tactics_check.py --compare tactics_from_gpu --out /tmp/again
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from autotune_buckets_check import (  # noqa: E402
    MEDIAN_TOLERANCE,
    call_within,
    read_cache,
    read_rows,
    row_differences,
    tactic_differences,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL = "all"
RECORD = "autotune_tactics_check.json"


def sweep_cmd(args: argparse.Namespace, workdir: str, *flags: str) -> list[str]:
    """benchmark_model.py over the model's cuDNN GEMM rows (BF16 and FP8), into `workdir`."""
    return [sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), args.model, "--tp", "1",
            "--ms", *map(str, args.ms), "--dtypes", "bf16", "fp8", "--backends", "cudnn", "--no_attention",
            "--flashinfer_repo", args.flashinfer_repo, "--workdir", workdir, *flags]


def label_of(cap: str) -> str:
    return "all" if cap == FULL else f"cap{cap}"


def run(args: argparse.Namespace, cap: str) -> dict[str, Any]:
    out = os.path.abspath(args.out)
    label = label_of(cap)
    cache = os.path.join(out, f"{label}_autotune_cache.json")
    cmd = sweep_cmd(args, os.path.join(out, label), "--autotune_tactics", cap, "--autotune_cache", cache,
                    "--cache", os.path.join(out, f"{label}_result_cache"))
    print(f"[{label}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    rc, stopped = call_within(cmd, args.limit_s)
    wall = time.monotonic() - t0
    rows, timings = read_rows(os.path.join(out, label))
    return {"label": label, "autotune_tactics": cap, "exit_code": rc, "stopped_at_limit": stopped,
            "wall_s": round(wall, 1), "timings": timings, "rows": rows, "cache": cache}


def slower_rows(full: list[dict[str, Any]], capped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The capped ok rows more than MEDIAN_TOLERANCE slower than the full search's same row."""
    by_id = {r["case_id"]: r for r in full if r["status"] == "ok"}
    out = []
    for r in capped:
        f = by_id.get(r["case_id"])
        if r["status"] == "ok" and f and r["median_us"] > (1 + MEDIAN_TOLERANCE) * f["median_us"]:
            out.append({"case_id": r["case_id"], "full_us": f["median_us"], "capped_us": r["median_us"],
                        "ratio": round(r["median_us"] / f["median_us"], 3)})
    return out


def ratios(full: list[dict[str, Any]], capped: list[dict[str, Any]]) -> dict[str, Any]:
    """capped / full median over the rows ok in both: count, geometric mean, min, max."""
    by_id = {r["case_id"]: r for r in full if r["status"] == "ok"}
    rs = [r["median_us"] / by_id[r["case_id"]]["median_us"] for r in capped
          if r["status"] == "ok" and r["case_id"] in by_id and by_id[r["case_id"]]["median_us"] > 0]
    if not rs:
        return {"rows": 0}
    prod = 1.0
    for x in rs:
        prod *= x
    return {"rows": len(rs), "geomean": round(prod ** (1 / len(rs)), 4), "min": round(min(rs), 3),
            "max": round(max(rs), 3)}


def comparison(full: dict[str, Any], capped: dict[str, Any]) -> dict[str, Any]:
    """One capped run against the full search: rows, slower rows, ratios, tactics."""
    compared, tactics = tactic_differences(read_cache(full["cache"]), read_cache(capped["cache"]))
    return {"label": capped["label"], "row_differences": row_differences(full["rows"], capped["rows"]),
            "slower": slower_rows(full["rows"], capped["rows"]), "ratio": ratios(full["rows"], capped["rows"]),
            "tactics_compared": compared, "tactic_differences": tactics}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flashinfer_repo",
                   help="FlashInfer checkout, e.g. .devslim/flashinfer (needed unless --compare)")
    p.add_argument("--model", default="llama-3.1-8b", help="MODEL, e.g. --model qwen3-8b (default llama-3.1-8b)")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8, 64, 512], help="e.g. --ms 1 8 64 512")
    p.add_argument("--caps", nargs="+", default=["8", "4"],
                   help="caps to compare with the full search, e.g. --caps 8 4")
    p.add_argument("--out", required=True, help="a new folder for workdirs, caches and the record, e.g. /tmp/t")
    p.add_argument("--compare", metavar="DIR",
                   help="compare the runs an earlier --out holds without running anything")
    p.add_argument("--prewarm", action="store_true",
                   help="first an untimed --no_autotune pass that builds the JIT kernels")
    p.add_argument("--limit_s", type=float, default=280.0, help="seconds each pass may take, e.g. --limit_s 280")
    args = p.parse_args(argv)
    if os.path.exists(args.out):
        print(f"error: --out={args.out}: exists; give a new folder", file=sys.stderr)
        return 2
    bad = [c for c in args.caps if not c.isdigit() or int(c) < 1]
    if bad:
        print(f"error: --caps={bad[0]}: must be a whole number of at least 1, e.g. --caps 8 4", file=sys.stderr)
        return 2
    if args.compare:
        return compare_again(args.compare, args.caps, args.out)
    if not args.flashinfer_repo:
        print("error: --flashinfer_repo: needed to run the sweeps, e.g. --flashinfer_repo .devslim/flashinfer "
              "(or --compare DIR to compare earlier runs)", file=sys.stderr)
        return 2
    os.makedirs(args.out)
    if args.prewarm:
        call_within(sweep_cmd(args, os.path.join(os.path.abspath(args.out), "prewarm"), "--no_autotune",
                              "--no_check", "--no_cache"), args.limit_s)
    full = run(args, FULL)
    capped = [run(args, c) for c in args.caps]
    record = {"model": args.model, "ms": args.ms, "prewarm": args.prewarm,
              "runs": [{k: v for k, v in r.items() if k != "rows"} for r in (full, *capped)],
              "comparisons": [comparison(full, c) for c in capped]}
    for r in (full, *capped):
        cases = ((r["timings"] or {}).get("phases_s") or {}).get("cases")
        stopped = f", stopped at --limit_s={args.limit_s:g}" if r["stopped_at_limit"] else ""
        print(f"{r['label']}: {r['wall_s']:.0f} s wall, cases {cases} s, exit {r['exit_code']}{stopped}")
    rc = write_record(args.out, record)
    return 1 if any(r["stopped_at_limit"] for r in (full, *capped)) else rc


def write_record(out: str, record: dict[str, Any]) -> int:
    """`record` into `out`/RECORD and its summary on stdout; the exit code."""
    with open(os.path.join(out, RECORD), "w") as f:
        json.dump(record, f, indent=1)
    for c in record["comparisons"]:
        print(f"{c['label']}: rows {len(c['row_differences'])} differ, {len(c['slower'])} slower by more than "
              f"{MEDIAN_TOLERANCE:.0%}; capped/full {c['ratio']}; tactics {len(c['tactic_differences'])} of "
              f"{c['tactics_compared']} differ")
        for line in c["row_differences"][:20]:
            print("  " + line)
    return 0 if all(not c["row_differences"] for c in record["comparisons"]) else 1


def compare_again(earlier: str, caps: list[str], out: str) -> int:
    """The comparisons of an earlier --out's runs, into `out`/RECORD."""
    try:
        runs = {}
        for cap in (FULL, *caps):
            label = label_of(cap)
            with open(os.path.join(earlier, label, "results.json")) as f:
                runs[cap] = {"label": label, "rows": json.load(f)["rows"],
                             "cache": os.path.join(earlier, f"{label}_autotune_cache.json")}
        record = {"compared_from": earlier, "comparisons": [comparison(runs[FULL], runs[c]) for c in caps]}
    except (OSError, ValueError, KeyError) as e:
        print(f"error: --compare={earlier}: cannot read its runs ({e}); give an --out of an earlier check",
              file=sys.stderr)
        return 2
    os.makedirs(out)
    return write_record(out, record)


if __name__ == "__main__":
    sys.exit(main())
