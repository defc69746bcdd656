#!/usr/bin/env python3
"""Whether `--autotune_buckets timed` (the default) times what `all` times, and how much tuning it saves.

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
  control  both, split by M: at M=1 FlashInfer's buckets up to M are (1,), so `all` and `timed`
           profile the same single bucket and any difference there is re-tuning variance, the
           yardstick for the rows at M > 1.
Tactics are reported, not judged: re-profiling the same key picks another of near-equal tactics
now and then (two `all` runs on the H200 disagreed on 13 of 230 cuBLASLt keys:
examples/h200/sweep_speed/README.md). The JIT caches are warm for the second run (the first
built the kernels); --prewarm first builds them in an untimed pass, to compare like with like.
--compare DIR compares an earlier --out again (e.g. an archive from the GPU, on a CPU) without
running anything. Exit 0 when the rows agree, 1 when they do not, 2 on bad flags.

    source .fi618/setup.sh && export PYTHONPATH=$PWD/scripts:$PYTHONPATH
    python3 benchmarks/autotune_buckets_check.py --flashinfer_repo .fi618/flashinfer --out "$OUT/buckets"
    python3 benchmarks/autotune_buckets_check.py --compare buckets_from_gpu --out /tmp/again
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_group import call_within  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: FlashInfer's GEMM backends on sm_90 whose rows the autotuner tunes (mm_bf16, bmm_fp8).
BACKENDS = ("cudnn", "cublaslt", "cublas")
#: A row agrees when its medians differ by at most this, or one lies in the other's p10-p90.
MEDIAN_TOLERANCE = 0.05
META_KEYS = ("_metadata", "_generation", "_records")
def read_cache(path: str) -> dict[str, Any]:
    """An autotune cache's contents; {} when the pass saved none (stopped before its first save)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def read_rows(workdir: str) -> tuple[list[dict[str, Any]], Any]:
    """(rows, timings) of `workdir`/results.json; ([], None) when the pass wrote none."""
    try:
        with open(os.path.join(workdir, "results.json")) as f:
            results = json.load(f)
    except (OSError, ValueError):
        return [], None
    return results.get("rows", []), results.get("timings")


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
    rc, stopped = call_within(cmd, args.limit_s)
    wall = time.monotonic() - t0
    rows, timings = read_rows(workdir)
    return {"label": label, "buckets": buckets, "exit_code": rc, "stopped_at_limit": stopped,
            "wall_s": round(wall, 1), "timings": timings, "rows": rows,
            "cache": os.path.join(out, f"{label}_autotune_cache.json")}


def tactic_differences(default: dict[str, Any], timed: dict[str, Any]) -> tuple[int, list[str]]:
    """(keys compared, those whose runner or tactic differ): every key the timed run saved, in
    the two autotune caches' contents."""
    keys = [k for k in timed if k not in META_KEYS]
    diff = [f"{k}: all {default.get(k)} vs timed {timed[k]}" for k in keys if default.get(k) != timed[k]]
    return len(keys), diff


#: The start of an autotune cache key: (op, runner, ((first input's shape), ...
_KEY_SHAPE = re.compile(r"^\('[^']*', '[^']*', \(\(([0-9, ]+)\)")


def profiled_m(key: str) -> int | None:
    """The token count a GEMM autotune cache key was profiled at: the rows of its first input
    (mm_bf16's [M, K]; bmm_fp8's batched [1, M, K]); None for a key of another form."""
    m = _KEY_SHAPE.match(key)
    if not m:
        return None
    dims = [int(d) for d in m.group(1).split(",") if d.strip()]
    return dims[1] if len(dims) == 3 else dims[0] if dims else None


def row_m(case_id: str) -> int | None:
    """M of a GEMM row's case id (gemm.<name>.m<M>.<dtype>...)."""
    m = re.search(r"\.m(\d+)\.", case_id)
    return int(m.group(1)) if m else None


def control(default: dict[str, Any], timed: dict[str, Any], a: list[dict[str, Any]], b: list[dict[str, Any]]
            ) -> dict[str, dict[str, int]]:
    """Tactic and row differences at M=1, where both settings profile the same one bucket, and
    at M > 1: {"m1": {...}, "m_over_1": {...}} with keys/rows compared and differing (the two
    autotune caches' contents, the two runs' rows)."""
    out = {g: {"tactics_compared": 0, "tactics_differ": 0, "rows_compared": 0, "rows_differ": 0}
           for g in ("m1", "m_over_1")}
    for k, v in timed.items():
        m = None if k in META_KEYS else profiled_m(k)
        if m is None:
            continue
        g = out["m1" if m == 1 else "m_over_1"]
        g["tactics_compared"] += 1
        g["tactics_differ"] += default.get(k) != v
    by_id = {r["case_id"]: r for r in b}
    for r in a:
        o, m = by_id.get(r["case_id"]), row_m(r["case_id"])
        if o is None or m is None or r["status"] != "ok":
            continue
        g = out["m1" if m == 1 else "m_over_1"]
        g["rows_compared"] += 1
        g["rows_differ"] += bool(row_differences([r], [o]))
    return out


def comparison(all_cache: str, timed_cache: str, a: list[dict[str, Any]], b: list[dict[str, Any]]
               ) -> dict[str, Any]:
    """The record's comparison of the `all` and `timed` runs: their autotune cache files (each
    read once) and their rows."""
    default, timed = read_cache(all_cache), read_cache(timed_cache)
    compared, tactics = tactic_differences(default, timed)
    return {"tactics_compared": compared, "tactic_differences": tactics, "row_differences": row_differences(a, b),
            "control": control(default, timed, a, b)}


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
    p.add_argument("--flashinfer_repo", help="FlashInfer checkout, e.g. .fi618/flashinfer (needed unless --compare)")
    p.add_argument("--model", default="llama-3.1-8b", help="MODEL, e.g. --model qwen3-8b (default llama-3.1-8b)")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8, 64, 512], help="e.g. --ms 1 8 64 512")
    p.add_argument("--out", required=True, help="a new folder for workdirs, caches and the record, e.g. /tmp/b")
    p.add_argument("--compare", metavar="DIR",
                   help="compare the runs an earlier --out holds (all/ and timed/ results.json, both "
                   "autotune caches) without running anything, e.g. --compare /tmp/b_from_gpu")
    p.add_argument("--prewarm", action="store_true",
                   help="first a pass with --no_autotune that builds the JIT kernels, so both timed "
                   "passes start JIT-warm")
    p.add_argument("--limit_s", type=float, default=280.0, help="seconds each pass may take, e.g. --limit_s 280")
    args = p.parse_args(argv)
    if os.path.exists(args.out):
        print(f"error: --out={args.out}: exists; give a new folder", file=sys.stderr)
        return 2
    if args.compare:
        return compare_again(args.compare, args.out)
    if not args.flashinfer_repo:
        print("error: --flashinfer_repo: needed to run the two sweeps, e.g. --flashinfer_repo "
              ".fi618/flashinfer (or --compare DIR to compare earlier runs)", file=sys.stderr)
        return 2
    os.makedirs(args.out)
    if args.prewarm:
        call_within(sweep_cmd(args, os.path.join(os.path.abspath(args.out), "prewarm"), "--no_autotune",
                              "--no_check", "--no_cache"), args.limit_s)
    default = run("all", args, "all")
    timed = run("timed", args, "timed")
    record = {"model": args.model, "ms": args.ms, "prewarm": args.prewarm,
              "runs": [{k: v for k, v in r.items() if k != "rows"} for r in (default, timed)],
              **comparison(default["cache"], timed["cache"], default["rows"], timed["rows"])}
    for r in (default, timed):
        cases = ((r["timings"] or {}).get("phases_s") or {}).get("cases")
        stopped = f", stopped at --limit_s={args.limit_s:g}" if r["stopped_at_limit"] else ""
        print(f"{r['label']}: {r['wall_s']:.0f} s wall, cases {cases} s, exit {r['exit_code']}{stopped}")
    rc = write_record(args.out, record)
    return 1 if any(r["stopped_at_limit"] for r in (default, timed)) else rc


def write_record(out: str, record: dict[str, Any]) -> int:
    """`record` into `out`/autotune_buckets_check.json and its summary on stdout; the exit code."""
    with open(os.path.join(out, "autotune_buckets_check.json"), "w") as f:
        json.dump(record, f, indent=1)
    print_summary(record)
    return 0 if not record["row_differences"] else 1


def print_summary(record: dict[str, Any]) -> None:
    tactics, rows = record["tactic_differences"], record["row_differences"]
    print(f"tactics: {record['tactics_compared']} keys compared, {len(tactics)} differ; rows: {len(rows)} differ")
    for group, c in record["control"].items():
        print(f"  {group}: tactics {c['tactics_differ']} of {c['tactics_compared']} differ, "
              f"rows {c['rows_differ']} of {c['rows_compared']} differ")
    for line in (tactics + rows)[:40]:
        print("  " + line)


def compare_again(earlier: str, out: str) -> int:
    """The comparison of an earlier --out's two runs, into `out`/autotune_buckets_check.json."""
    caches = [os.path.join(earlier, f"{label}_autotune_cache.json") for label in ("all", "timed")]
    try:
        rows = []
        for label in ("all", "timed"):
            with open(os.path.join(earlier, label, "results.json")) as f:
                rows.append(json.load(f)["rows"])
        record = {"compared_from": earlier, **comparison(*caches, *rows)}
    except (OSError, ValueError, KeyError) as e:
        print(f"error: --compare={earlier}: cannot read its runs ({e}); give an --out of an earlier check",
              file=sys.stderr)
        return 2
    os.makedirs(out)
    return write_record(out, record)

if __name__ == "__main__":
    sys.exit(main())
