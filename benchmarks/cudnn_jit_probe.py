#!/usr/bin/env python3
"""Where a cold cuDNN GEMM row's time goes on the GPU: each step a fresh Python process.

FlashInfer's autotuned cuDNN GEMMs (mm_bf16, bmm_fp8 with backend "cudnn") cost seconds a row on a
fresh machine and a fraction of that once the machine has run them (examples/h200/sweep_speed/).
This asks why, one process per step, in this order (the order is the experiment):

  A cold / A again          one shape autotuned in a fresh process, then in another one
  A, CUDA_CACHE_DISABLE=1   the same with the CUDA driver's JIT cache off
  other N / other M         a new N (same K), a new M (same N and K)
  heuristic, then tuned     a new shape run untuned (one plan), then autotuned
  4 side by side / again    four new shapes autotuned in four processes at once, then the four
                            one after another in one process
  fp8 cold / again          bmm_fp8 likewise
  torch first use           F.linear and FlashInfer's CUPTI timer, first calls in a process

Each step prints one JSON line: the step, its wall time, import and CUDA-context seconds, per
shape the first call's seconds (autotuning included) and a second call's, and the size of the
CUDA JIT cache folder after it (CUDA_CACHE_PATH, a fresh temporary folder unless given).

    source .fi618/setup.sh && python3 benchmarks/cudnn_jit_probe.py --out "$OUT/cudnn_jit"

writes <out>/probe.jsonl and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

A = ["bf16", 8, 6144, 4096]
WIDE = [["bf16", 512, 6144, 4096], ["bf16", 512, 4096, 4096], ["bf16", 512, 28672, 4096],
        ["bf16", 512, 4096, 14336]]


def steps() -> list[dict[str, Any]]:
    """The experiment: {label, spec (what the child runs), env (extra), side_by_side (a group run
    at once)}."""
    one = lambda label, spec, env=None: {"label": label, "spec": spec, "env": env or {}}  # noqa: E731
    return [
        one("bf16 A autotuned, cold", {"tune": True, "shapes": [A]}),
        one("bf16 A autotuned, again in a new process", {"tune": True, "shapes": [A]}),
        one("bf16 A autotuned, CUDA_CACHE_DISABLE=1", {"tune": True, "shapes": [A]}, {"CUDA_CACHE_DISABLE": "1"}),
        one("bf16 other N (4096), autotuned", {"tune": True, "shapes": [["bf16", 8, 4096, 4096]]}),
        one("bf16 other M (64), autotuned", {"tune": True, "shapes": [["bf16", 64, 6144, 4096]]}),
        one("bf16 N=28672 untuned (heuristic plan)", {"tune": False, "shapes": [["bf16", 8, 28672, 4096]]}),
        one("bf16 N=28672 autotuned after it", {"tune": True, "shapes": [["bf16", 8, 28672, 4096]]}),
        {"label": "bf16 4 new shapes autotuned side by side", "side_by_side": [
            {"label": f"side by side {s}", "spec": {"tune": True, "shapes": [s]}, "env": {}} for s in WIDE]},
        one("the 4 again, one after another in one process", {"tune": True, "shapes": WIDE}),
        one("fp8 A autotuned, cold", {"tune": True, "shapes": [["fp8", 8, 6144, 4096]]}),
        one("fp8 A autotuned, again", {"tune": True, "shapes": [["fp8", 8, 6144, 4096]]}),
        one("torch first use: F.linear, then the CUPTI timer", {"torch": ["linear", "bench", "bench_graph"]}),
    ]


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One step, in this (fresh) process."""
    started = time.monotonic()
    import inspect

    import flashinfer
    import torch
    from flashinfer.autotuner import autotune

    out: dict[str, Any] = {"import_s": round(time.monotonic() - started, 2)}
    t = time.monotonic()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out["context_s"] = round(time.monotonic() - t, 2)
    try:
        import cudnn

        out["cudnn_backend"] = cudnn.backend_version()
    except Exception as e:  # noqa: BLE001  (recorded, not fatal)
        out["cudnn_backend"] = repr(e)
    takes_buckets = "tuning_buckets" in inspect.signature(autotune).parameters
    for step in spec.get("torch", []):
        import torch.nn.functional as F
        from flashinfer.testing import bench_gpu_time

        x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(6144, 4096, device="cuda", dtype=torch.bfloat16)
        t = time.monotonic()
        if step == "linear":
            F.linear(x, w)
            torch.cuda.synchronize()
        else:
            bench_gpu_time(F.linear, dry_run_iters=5, repeat_iters=30, enable_cupti=True,
                           use_cuda_graph=step == "bench_graph", input_args=(x, w), cold_l2_cache=True)
        out.setdefault("torch_s", []).append([step, round(time.monotonic() - t, 3)])
    for dtype, m, n, k in spec.get("shapes", []):
        if dtype == "bf16":
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
            call = lambda a=a, b=b: flashinfer.mm_bf16(a=a, b=b, out_dtype=torch.bfloat16, backend="cudnn")  # noqa: E731
        else:
            a = torch.randn(1, m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(1, n, k, device="cuda").to(torch.float8_e4m3fn).transpose(-2, -1)
            one = torch.tensor(1.0, device="cuda")
            call = lambda a=a, b=b, one=one: flashinfer.gemm.bmm_fp8(a, b, one, one, torch.bfloat16,  # noqa: E731
                                                                   backend="cudnn")
        t = time.monotonic()
        if spec.get("tune"):
            with autotune(True, tuning_buckets=(m,)) if takes_buckets else autotune(True):
                call()
        else:
            call()
        torch.cuda.synchronize()
        first = time.monotonic() - t
        t = time.monotonic()
        call()
        torch.cuda.synchronize()
        out.setdefault("shapes", []).append({"shape": [dtype, m, n, k], "first_s": round(first, 3),
                                             "second_s": round(time.monotonic() - t, 4)})
    return out


def _folder_mb(path: str) -> float | None:
    total = 0
    if not os.path.isdir(path):
        return None
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return round(total / 2**20, 1)


def _start(step: dict[str, Any]) -> tuple[dict[str, Any], subprocess.Popen, float]:
    env = dict(os.environ, **step["env"])
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", json.dumps(step["spec"])],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return step, proc, time.monotonic()


def _finish(started: tuple[dict[str, Any], subprocess.Popen, float]) -> dict[str, Any]:
    step, proc, t = started
    text, _ = proc.communicate()
    answers = [line[len("RESULT "):] for line in text.splitlines() if line.startswith("RESULT ")]
    return {"label": step["label"], "wall_s": round(time.monotonic() - t, 2), "exit_code": proc.returncode,
            "result": json.loads(answers[-1]) if answers else {"output_tail": text[-2000:]},
            "cuda_cache_mb": _folder_mb(os.environ["CUDA_CACHE_PATH"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="example: python3 benchmarks/cudnn_jit_probe.py --out /tmp/probe")
    p.add_argument("--out", help="folder for probe.jsonl (made if missing), e.g. $OUT/cudnn_jit")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    if not args.out:
        p.error("--out is required, e.g. --out /tmp/probe")
    os.makedirs(args.out, exist_ok=True)
    if "CUDA_CACHE_PATH" not in os.environ:
        os.environ["CUDA_CACHE_PATH"] = tempfile.mkdtemp(prefix="cuda_cache_")
    cache = os.environ["CUDA_CACHE_PATH"]
    lines = [{"cuda_cache_path": cache, "cuda_cache_mb_before": _folder_mb(cache), "python": sys.version.split()[0]}]
    print(json.dumps(lines[0]), flush=True)
    failed = 0
    for step in steps():
        if "side_by_side" in step:
            t = time.monotonic()
            done = [_finish(s) for s in [_start(s) for s in step["side_by_side"]]]
            done.append({"label": step["label"], "wall_s": round(time.monotonic() - t, 2)})
        else:
            done = [_finish(_start(step))]
        for line in done:
            failed += line.get("exit_code", 0) != 0
            print(json.dumps(line), flush=True)
        lines += done
    with open(os.path.join(args.out, "probe.jsonl"), "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
