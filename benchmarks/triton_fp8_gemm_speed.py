#!/usr/bin/env python3
"""Speed of the project's Triton block-scaled FP8 GEMM (kernels/triton_fp8_gemm.py) on one GPU.

Llama-3.1-8B TP=1 projections (qkv 6144x4096, o 4096x4096, gate_up 28672x4096, down 4096x14336)
at M = 1, 8, 64, 512: searches the config space per shape (fast L2-flushed CUDA-event timer,
optionally cached with --cache_dir), then times the best config with FlashInfer's
`bench_gpu_time` (CUPTI, cold L2, CUDA graph) when flashinfer is importable, else with
`triton.testing.do_bench_cudagraph` (warm L2: say so in the table). Prints the time, the HBM
floor (e4m3 weight N*K + fp32 block scales N/128*K/128*4 + Xq/xs read + bf16 Y written, at
4.8 TB/s) and the ratio; beside it torch._scaled_mm with per-token/per-channel FP8 scales and
F.linear in bf16 for the same shape, as sanity references. Also times the 1x128 group quantizer
(the "+quant" twin) and counts its e4m3 codes that differ from the torch reference. "cold us" is
the L2-flushed CUDA-event timer of the search (30 launches, median), a cold-L2 cross-check when
FlashInfer is absent.

    python3 benchmarks/triton_fp8_gemm_speed.py [--ms 1,8,64,512] [--shapes qkv,o] [--cache_dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from benchmark_model_kernels.kernels import triton_fp8_gemm as T  # noqa: E402
from benchmark_model_kernels.kernels import triton_tuning as tt  # noqa: E402

HBM_BYTES_PER_S = 4.8e12
SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}


class Timer:
    """Final timing: FlashInfer's bench_gpu_time if importable, else do_bench_cudagraph."""

    def __init__(self):
        try:
            from flashinfer.testing import bench_gpu_time

            self._bench = bench_gpu_time
            self.name = "flashinfer.bench_gpu_time (CUPTI, cold L2, CUDA graph)"
        except Exception as exc:  # noqa: BLE001
            self._bench = None
            self.name = f"triton do_bench_cudagraph (warm L2; flashinfer unavailable: {type(exc).__name__})"

    def __call__(self, fn, args) -> float:
        """Median microseconds of fn(*args)."""
        if self._bench is not None:
            times_ms = self._bench(
                fn, dry_run_iters=10, repeat_iters=50, enable_cupti=True, use_cuda_graph=True,
                input_args=tuple(args), input_kwargs={}, cold_l2_cache=True,
            )
            return statistics.median(times_ms) * 1e3
        import triton.testing

        return triton.testing.do_bench_cudagraph(lambda: fn(*args), rep=50, return_mode="median") * 1e3


def make_search_timer(reps: int = 8):
    """Fast ranking timer for the config search: CUDA events around each launch after flushing
    L2 with a 256 MiB memset (the flush also hides the host launch latency)."""
    import torch

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def timer(fn, args) -> float:
        fn(*args)  # compile + warm-up
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for start, end in zip(starts, ends, strict=True):
            flush.zero_()
            start.record()
            fn(*args)
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))

    return timer


def torch_refs(m, n, k, x, timer):
    """(scaled_mm per-token us or None, F.linear bf16 us) for the same shape."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(1)
    w = (torch.randn(n, k, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
    lin = timer(lambda a, b: F.linear(a, b), (x, w))
    try:
        xs = x.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-10) / T.FP8_MAX
        ws = w.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-10) / T.FP8_MAX
        xq = (x.float() / xs).clamp(-T.FP8_MAX, T.FP8_MAX).to(torch.float8_e4m3fn)
        wq = (w.float() / ws).clamp(-T.FP8_MAX, T.FP8_MAX).to(torch.float8_e4m3fn)
        ws_t = ws.t().contiguous()
        del w

        def scaled(a, b, sa, sb):
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

        scaled(xq, wq, xs, ws_t)
        smm = timer(scaled, (xq, wq, xs, ws_t))
    except Exception as exc:  # noqa: BLE001
        print(f"  torch._scaled_mm M={m} N={n} K={k}: {type(exc).__name__}: {str(exc)[:120]}")
        smm = None
    return smm, lin


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ms", default="1,8,64,512", help="comma-separated M values, e.g. 1,8")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated of {','.join(SHAPES)}")
    ap.add_argument("--cache_dir", default=None, help="JSON config cache directory (read and written)")
    args = ap.parse_args(argv)

    import torch
    import triton

    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    gpu = torch.cuda.get_device_name()
    timer = Timer()
    search_timer = make_search_timer()
    cold_timer = make_search_timer(reps=30)
    ms = [int(v) for v in args.ms.split(",")]
    print(f"{gpu}, torch {torch.__version__}, triton {triton.__version__}; timer: {timer.name}")
    print(f"HBM floor at {HBM_BYTES_PER_S / 1e12:.1f} TB/s; times are medians in us")
    hdr = (f"{'shape':8} {'M':>4} {'N':>6} {'K':>6} {'triton us':>9} {'floor us':>8} {'ratio':>5} "
           f"{'cold us':>7} {'+quant us':>9} {'scaled_mm':>9} {'F.linear':>8} {'search s':>8}  config")
    print(hdr)
    failed = False
    for label in args.shapes.split(","):
        n, k = SHAPES[label]
        for m in ms:
            p = T.BlockFp8Problem(m, n, k)
            inp = T.build_inputs(p, "cuda", seed=0)
            key = T.config_cache_key(gpu, m, n, k, triton.__version__)
            t0 = time.perf_counter()
            config = tt.load_cached_config(args.cache_dir, key, check=T.check_config) if args.cache_dir else None

            def build(c, p=p, inp=inp):
                return T.make_block_fp8_gemm(p, inp, c)

            if config is None:
                config = tt.search_config(build, T.config_space(m), search_timer)
                if args.cache_dir:
                    tt.store_config(args.cache_dir, key, config, check=T.check_config)
            search_s = time.perf_counter() - t0
            fn, fargs = T.make_block_fp8_gemm(p, inp, config)
            us = timer(fn, fargs)
            cold_us = cold_timer(fn, fargs) * 1e3
            ref = T.reference(p, inp)
            err = ((fn(*fargs).float() - ref).norm() / ref.norm()).item()
            del ref
            qfn, qargs = T.quant_input_fn(p, inp)
            q_us = timer(qfn, qargs)
            q, _ = qfn(*qargs)
            bad_codes = int((q.view(torch.uint8) != inp["xq"].view(torch.uint8)).sum())
            floor_us = (p.weight_bytes() + p.activation_bytes()) / HBM_BYTES_PER_S * 1e6
            smm, lin = torch_refs(m, n, k, inp["x"], timer)
            cfg = (f"BM{config['BLOCK_SIZE_M']} BN{config['BLOCK_SIZE_N']} G{config['GROUP_SIZE_M']} "
                   f"w{config['num_warps']} s{config['num_stages']}")
            smm_s = f"{smm:9.1f}" if smm is not None else f"{'n/a':>9}"
            print(f"{label:8} {m:4d} {n:6d} {k:6d} {us:9.1f} {floor_us:8.1f} {us / floor_us:5.2f} "
                  f"{cold_us:7.1f} {q_us:9.1f} {smm_s} {lin:8.1f} {search_s:8.1f}  {cfg}  relL2={err:.1e}"
                  f" quant_codes_diff={bad_codes}", flush=True)
            failed |= err > 5e-3
            del inp, fn, fargs, qargs, q, build
            torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
