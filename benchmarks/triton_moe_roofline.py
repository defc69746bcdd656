#!/usr/bin/env python3
"""Roofline check of the project's Triton fused MoE (scripts/benchmark_model_kernels/run/triton_moe/).

Qwen3-30B-A3B at TP=1, BF16: hidden 2048, per-rank intermediate 768, 128 experts, top_k 8,
silu_and_mul, uniform routing. For M in 1 8 64 512 it searches the tile config, times the whole
call (align + 2 grouped GEMMs + activation + top_k sum) and prints it against the HBM floor:
bytes of the expected touched experts' weights (E_local * (1 - (1 - 1/E_global)^(M*top_k))
experts x (2I*H + H*I) x 2 bytes) + input + output, at 4.8 TB/s. Target: time / floor <= 1.35 at
M >= 8 (exit status 1 if missed). The FP8 schemes' times (smaller search) are printed too, with
their own floors (1-byte weights) and the separately timed input quantization (+quant).

Timer (the target's): flashinfer.testing.bench_gpu_time (CUPTI, cold L2, CUDA graph) when
FlashInfer imports, else triton.testing.do_bench_cudagraph (one CUDA graph of back-to-back calls,
mean; the L2 is not flushed, but the 1.2 GB of expert weights cannot stay in a 50 MB L2). The
search uses the same timer with fewer repetitions. Also printed: "cold", CUDA events around a
CUDA-graph replay of one call after a 256 MiB memset (flushes L2 but leaves it dirty, so the call
also pays ~50 MB of write-backs), median; and with --breakdown, per-kernel times from
torch.profiler (eager launches, warm) for BF16.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from benchmark_model_kernels.run import triton_tuning as tt  # noqa: E402
from benchmark_model_kernels.run.triton_moe import fused, tuning  # noqa: E402
from benchmark_model_kernels.run.triton_moe import problem as pb  # noqa: E402

HBM_BYTES_PER_S = 4.8e12
TARGET_RATIO = 1.35
TARGET_MIN_M = 8


def cold_graph_timer(iters: int, warmup: int = 3, flush_mib: int = 256):
    """timer(fn, args) -> median µs of a CUDA-graph replay of fn(*args) with a cold L2."""
    import torch

    flush = torch.empty(flush_mib << 20, dtype=torch.uint8, device="cuda")

    def timer(fn, args):
        fn(*args)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(*args)
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(warmup + iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(warmup + iters)]
        for s, e in zip(starts, ends, strict=True):
            flush.zero_()
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts[warmup:], ends[warmup:], strict=True)]
        del graph
        return statistics.median(times)

    return timer


def flashinfer_timer(iters: int):
    """timer via flashinfer.testing.bench_gpu_time, or None when FlashInfer is absent."""
    try:
        from flashinfer.testing import bench_gpu_time
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None

    def timer(fn, args):
        times_ms = bench_gpu_time(fn, dry_run_iters=5, repeat_iters=iters, enable_cupti=True,
                                  use_cuda_graph=True, input_args=tuple(args),
                                  cold_l2_cache=True)
        return statistics.median(times_ms) * 1e3

    return timer


def graph_timer(rep_ms: int):
    """timer(fn, args) -> µs via triton.testing.do_bench_cudagraph (mean)."""
    import triton.testing

    def timer(fn, args):
        return triton.testing.do_bench_cudagraph(lambda: fn(*args), rep=rep_ms) * 1e3

    return timer


def kernel_breakdown(fn, args, iters: int = 20) -> list[tuple[str, float]]:
    """(kernel name, mean µs per call) from torch.profiler over `iters` eager calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(*args)
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for evt in prof.key_averages():
        dev_us = getattr(evt, "device_time_total", None)
        if dev_us is None:
            dev_us = getattr(evt, "cuda_time_total", 0.0)
        if dev_us and evt.key:
            totals[evt.key] = totals.get(evt.key, 0.0) + dev_us / iters
    return sorted(totals.items(), key=lambda kv: -kv[1])


#: Correctness bound of the tuned config's output (same as tests/run/test_triton_moe_gpu.py).
TOL = {"bf16": 1e-2, "fp8_per_tensor": 6e-2, "fp8_per_token": 6e-2, "fp8_block128": 6e-2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default="1,8,64,512")
    ap.add_argument("--iters", type=int, default=50, help="timed iterations per final number")
    ap.add_argument("--search-iters", type=int, default=10)
    ap.add_argument("--fp8-configs", type=int, default=8,
                    help="configs searched per FP8 scheme and M (plus the default)")
    ap.add_argument("--schemes", default="bf16,fp8_per_tensor,fp8_per_token,fp8_block128")
    ap.add_argument("--cache-dir", default="", help="tuned-config JSON cache (off if empty)")
    ap.add_argument("--compile-workers", type=int, default=8)
    ap.add_argument("--breakdown", action="store_true", help="per-kernel times (BF16)")
    args = ap.parse_args()

    import torch
    import triton

    ms = [int(m) for m in args.ms.split(",")]
    schemes = args.schemes.split(",")
    gpu = torch.cuda.get_device_name()
    fi_timer = flashinfer_timer(args.iters)
    timer = fi_timer or graph_timer(20)
    timer_name = "flashinfer bench_gpu_time (CUPTI, cold L2, graph)" if fi_timer else \
        "triton.testing.do_bench_cudagraph (rep 20 ms, mean)"
    search_timer = flashinfer_timer(args.search_iters) or graph_timer(5)
    cold_timer = cold_graph_timer(args.iters)
    print(f"GPU {gpu}, torch {torch.__version__}, triton {triton.__version__}; timer: {timer_name}")
    print("Qwen3-30B-A3B TP=1: hidden 2048, intermediate 768, 128 experts, top_k 8, silu_and_mul")

    rows = []
    failed = []
    for scheme in schemes:
        for m in ms:
            p = pb.MoeProblem(m, 2048, 768, 128, 128, 8, "silu_and_mul", True, scheme)
            inputs = pb.build_inputs(p, "cuda", seed=0)
            default = tuning.default_config(scheme, m, top_k=p.top_k, local_experts=p.local_experts)
            space = tuning.config_space(scheme, m, top_k=p.top_k, local_experts=p.local_experts)
            if scheme != "bf16":
                step = max(1, len(space) // max(1, args.fp8_configs))
                space = space[::step][:args.fp8_configs]
            if default not in space:
                space = [default] + space
            key = tuning.config_key(p, gpu, triton.__version__)
            cfg = tt.load_cached_config(args.cache_dir, key) if args.cache_dir else None
            t0 = time.time()
            searched = 0
            if cfg is None:
                results = []
                cfg = tt.search_config(lambda c, p=p, inputs=inputs: fused.make_fused_moe(p, inputs, c),
                                       space, search_timer, compile_workers=args.compile_workers,
                                       results=results)
                searched = len(results)
                if args.cache_dir:
                    tt.store_config(args.cache_dir, key, cfg)
            search_s = time.time() - t0
            fn, fargs = fused.make_fused_moe(p, inputs, cfg)
            # correctness spot check of the tuned config
            out = fn(*fargs)
            ref = pb.reference_moe(p, inputs)
            err = ((out.float() - ref).norm() / ref.norm()).item()
            us = timer(fn, fargs)
            cold = cold_timer(fn, fargs)
            dfn, dargs = fused.make_fused_moe(p, inputs, default)
            default_us = timer(dfn, dargs)
            quant_us = None
            if scheme != "bf16":
                qfn, qargs = fused.quant_input_fn(p, inputs)
                quant_us = timer(qfn, qargs)
            floor = pb.hbm_floor_bytes(p) / HBM_BYTES_PER_S * 1e6
            ratio = us / floor
            target = scheme == "bf16" and m >= TARGET_MIN_M
            ok = (not target) or ratio <= TARGET_RATIO
            if not ok:
                failed.append((scheme, m, f"ratio {ratio:.3f}"))
            if not err <= TOL[scheme]:
                failed.append((scheme, m, f"rel err {err:.3g} > {TOL[scheme]}"))
            if args.breakdown and scheme == "bf16":
                for name, kus in kernel_breakdown(fn, fargs)[:8]:
                    print(f"    {kus:8.1f} us  {name[:110]}")
            rows.append((scheme, m, us, cold, default_us, quant_us, floor, ratio, target, ok, err,
                         cfg, searched, search_s))
            print(f"  {scheme} M={m}: {us:.1f} us (searched {searched} in {search_s:.1f} s), "
                  f"floor {floor:.1f} us, ratio {ratio:.3f}, rel err {err:.2e}, {cfg}", flush=True)
            del inputs, fn, fargs, dfn, dargs, out, ref
            torch.cuda.empty_cache()

    print()
    print(f"{'scheme':15} {'M':>5} {'time us':>9} {'cold us':>9} {'dflt us':>9} {'+quant':>8} "
          f"{'floor us':>9} {'ratio':>6}  target  rel_err  config(BM,BN,BK,G,w,s)")
    for (scheme, m, us, cold, dus, qus, floor, ratio, target, ok, err, cfg, _, _) in rows:
        tgt = ("<=%.2f %s" % (TARGET_RATIO, "ok" if ok else "MISS")) if target else "-"
        q = f"{qus:8.1f}" if qus is not None else f"{'-':>8}"
        c = ",".join(str(cfg[k]) for k in tuning.CONFIG_KEYS)
        print(f"{scheme:15} {m:5d} {us:9.1f} {cold:9.1f} {dus:9.1f} {q} {floor:9.1f} "
              f"{ratio:6.3f}  {tgt:8} {err:.1e}  {c}")
    print(f"time = {timer_name}; cold = CUDA events around one graph replay after a 256 MiB "
          "memset; dflt = default_config; floor = expected touched experts' weights + input + "
          "output at 4.8 TB/s (FP8: 1-byte weights and input); +quant = the FP8 input "
          "quantization, timed alone")
    if failed:
        print("MISSED: " + ", ".join(f"{s} M={m} {why}" for s, m, why in failed))
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
