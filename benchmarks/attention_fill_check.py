#!/usr/bin/env python3
"""Attention rows with the K/V cache drawn on the GPU against the driver's own CPU fill, on the GPU.

Runs `scripts/benchmark_model.py` twice into fresh workdirs under --out, the same cells both times,
every one timed (--no_cache):
  gpu_fill  the default: the driver's large K/V draws made on the GPU (run/driver_fills.py)
  cpu_fill  --attention_cpu_fill: every draw on the CPU and copied, as FlashInfer's driver does
Default cells: Llama-3.1-8B TP=1 decode at M = 1 8 over 1024 and 32768 tokens, BF16 K/V, on fa2_tc
and trtllm-native (M=8 over 32768 tokens is the large cell, 537 M elements, 18 s of CPU fill on the
H200; M=1 over 1024 tokens stays below the threshold and is the driver's own fill in both runs).

A cell agrees when the two medians are within --tolerance (3 %) of the CPU fill's, or each lies
within the other's p10-p90 spread. Also checked: the GPU-fill rows above the threshold say "K/V
filled on the GPU" in their reason, and no CPU-fill row does. Writes <out>/attention_fill_check.json
(per cell: both medians, spreads, the difference, the verdict; each run's wall time and where it
went) and prints one line per cell; exit 0 when every cell agrees and is noted right, 1 otherwise.

    source .devbundle/setup.sh && python benchmarks/attention_fill_check.py \\
        --flashinfer_repo .devbundle/flashinfer --out /tmp/fill_check
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
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from benchmark_model_kernels.run.driver_fills import GPU_FILL_MIN_NUMEL  # noqa: E402

NOTE = "K/V filled on the GPU"
RUNS = {"gpu_fill": [], "cpu_fill": ["--attention_cpu_fill"]}


def run_argv(label: str, args: argparse.Namespace) -> list[str]:
    return [args.model, "--tp", "1", "--ms", *map(str, args.ms), "--kv_lens", *map(str, args.kv_lens),
            "--kv_dtypes", *args.kv_dtypes, "--backends", *args.backends, "--no_cache",
            "--flashinfer_repo", args.flashinfer_repo, "--workdir", os.path.join(os.path.abspath(args.out), label),
            *RUNS[label]]


def kv_elements(row: dict[str, Any]) -> int:
    """Elements of the paged K/V cache the driver draws for an MHA/GQA row (its decode and paged
    prefill routines: pages x 2 x KV heads x page size x head dim); 0 for a row whose routine
    draws on the device itself (MLA, ragged prefill)."""
    page = row.get("page_size") or 0
    if not page or row.get("kv_lora_rank"):
        return 0
    pages = -(-int(row["kv_len"]) // page) * int(row["batch_size"])
    return pages * 2 * int(row["num_kv_heads"]) * page * int(row["head_dim_qk"])


def cell_verdict(gpu: dict[str, Any], cpu: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """One cell's two rows compared: medians, spreads, relative difference, whether they agree and
    whether each row's note says how its K/V cache was drawn (on the GPU in the default run from
    GPU_FILL_MIN_NUMEL elements up, never in the --attention_cpu_fill run)."""
    out: dict[str, Any] = {"case_id": gpu["case_id"], "status": [gpu["status"], cpu["status"]],
                           "kv_elements": kv_elements(gpu)}
    gpu_noted, cpu_noted = NOTE in (gpu.get("reason") or ""), NOTE in (cpu.get("reason") or "")
    expected = out["kv_elements"] >= GPU_FILL_MIN_NUMEL and gpu["status"] == "ok"
    out["gpu_filled"] = gpu_noted
    out["noted_right"] = gpu_noted == expected and not cpu_noted
    if gpu["status"] != "ok" or cpu["status"] != "ok":
        out.update(agree=gpu["status"] == cpu["status"], why="not timed in both runs")
        return out
    g, c = gpu["median_us"], cpu["median_us"]
    diff = (g - c) / c
    within = _inside(g, cpu) and _inside(c, gpu)
    out.update(median_us=[g, c], p10_p90_us=[[gpu.get("p10_us"), gpu.get("p90_us")],
                                              [cpu.get("p10_us"), cpu.get("p90_us")]],
               rel_diff=round(diff, 4), agree=abs(diff) <= tolerance or within,
               why=f"{diff:+.2%}" + (" (inside each other's p10-p90)" if within else ""))
    return out


def _inside(value: float, row: dict[str, Any]) -> bool:
    low, high = row.get("p10_us"), row.get("p90_us")
    return low is not None and high is not None and low <= value <= high


def compare(gpu_rows: list[dict[str, Any]], cpu_rows: list[dict[str, Any]], tolerance: float
            ) -> list[dict[str, Any]]:
    """Every cell of both runs, compared (a cell one run lacks does not agree)."""
    cpu_by_id = {r["case_id"]: r for r in cpu_rows}
    cells = []
    for gpu in gpu_rows:
        cpu = cpu_by_id.get(gpu["case_id"])
        if cpu is None:
            cells.append({"case_id": gpu["case_id"], "agree": False, "noted_right": True,
                          "why": "not in the CPU-fill run"})
        else:
            cells.append(cell_verdict(gpu, cpu, tolerance))
    missing = sorted(set(cpu_by_id) - {r["case_id"] for r in gpu_rows})
    cells += [{"case_id": cid, "agree": False, "noted_right": True, "why": "not in the GPU-fill run"}
              for cid in missing]
    return cells


def _run(label: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), *run_argv(label, args)]
    print(f"[{label}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    rc = subprocess.run(cmd).returncode
    wall = round(time.monotonic() - t0, 1)
    try:
        with open(os.path.join(os.path.abspath(args.out), label, "results.json")) as f:
            payload = json.load(f)
    except (OSError, ValueError):
        payload = {}
    rows = [r for r in payload.get("rows", []) if r.get("kind") == "attention"]
    return {"label": label, "command": cmd, "exit_code": rc, "wall_s": wall, "rows": rows,
            "timings": payload.get("timings")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flashinfer_repo", required=True,
                   help="FlashInfer checkout, e.g. --flashinfer_repo .devbundle/flashinfer")
    p.add_argument("--out", required=True, help="Folder for both workdirs and the record, e.g. --out /tmp/fill")
    p.add_argument("--model", default="llama-3.1-8b", help="MODEL, e.g. --model qwen3-30b-a3b (default llama-3.1-8b)")
    p.add_argument("--ms", type=int, nargs="+", default=[1, 8], help="e.g. --ms 1 8 (default)")
    p.add_argument("--kv_lens", type=int, nargs="+", default=[1024, 32768], help="e.g. --kv_lens 1024 32768 (default)")
    p.add_argument("--kv_dtypes", nargs="+", default=["bf16"], help="e.g. --kv_dtypes bf16 fp8 (default bf16)")
    p.add_argument("--backends", nargs="+", default=["fa2_tc", "trtllm-native"],
                   help="Attention backends, e.g. --backends fa2 cudnn (default fa2_tc trtllm-native)")
    p.add_argument("--tolerance", type=float, default=0.03,
                   help="Relative median difference a cell may show, e.g. --tolerance 0.05 (default 0.03)")
    args = p.parse_args(argv)
    out = os.path.abspath(args.out)
    for label in RUNS:
        if os.path.exists(os.path.join(out, label)):
            print(f"error: --out={args.out}: already holds {label}/; choose a new --out", file=sys.stderr)
            return 2
    os.makedirs(out, exist_ok=True)
    runs = {label: _run(label, args) for label in RUNS}
    cells = compare(runs["gpu_fill"]["rows"], runs["cpu_fill"]["rows"], args.tolerance)
    good = bool(cells) and all(c["agree"] and c["noted_right"] for c in cells) and \
        any(c.get("gpu_filled") for c in cells)
    record = {"model": args.model, "ms": args.ms, "kv_lens": args.kv_lens, "kv_dtypes": args.kv_dtypes,
              "backends": args.backends, "tolerance": args.tolerance, "agree": good, "cells": cells,
              "runs": [{k: v for k, v in r.items() if k != "rows"} for r in runs.values()]}
    path = os.path.join(out, "attention_fill_check.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    for c in cells:
        medians = c.get("median_us")
        shown = f"gpu fill {medians[0]:.2f} us, cpu fill {medians[1]:.2f} us, " if medians else ""
        print(f"{c['case_id']}: {shown}{c['why']}; {'agree' if c['agree'] else 'DIFFER'}"
              + ("; filled on the GPU" if c.get("gpu_filled") else "; the driver's own fill in both")
              + ("" if c["noted_right"] else "; its note does not say how its K/V cache was drawn"))
    for r in runs.values():
        print(f"{r['label']}: {r['wall_s']:.0f} s, exit {r['exit_code']}")
    print(f"record: {path}")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
