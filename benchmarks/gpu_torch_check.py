#!/usr/bin/env python3
"""End-to-end check of the torch backend and activation-quant timing on a real GPU.

Times every torch routine on real shapes (Llama-3.1-8B qkv_proj TP=1; Qwen3-30B-A3B experts TP=1
and EP=8) at several M with FlashInfer's timer, prints median us, timer and roofline columns,
the activation-quantization timings, then runs the GPU-only pytest tests. Each item that fails
prints its exception and the script carries on; the exit code is 1 when anything failed.

    source .devbundle/setup.sh && python3 benchmarks/gpu_torch_check.py
    python3 benchmarks/gpu_torch_check.py --ms 8 --skip_pytest      # quick look at M=8 only

Reference numbers measured on the H200 (torch 2.11, CUPTI, cold L2), sanity checks not targets:
F.linear M=8 6144x4096 19.3 us; _scaled_mm FP8 M=8 11.4 us; Qwen3-30B-A3B experts _grouped_mm
BF16 150 us at M=8 and 271 us at M=512; _scaled_grouped_mm FP8 92 us at M=8.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from benchmark_model_kernels.cases import backends as bk  # noqa: E402
from benchmark_model_kernels.core.case_schema import Case, GemmShape, MoeShape  # noqa: E402
from benchmark_model_kernels.core.results_schema import Row, RunSettings  # noqa: E402
from benchmark_model_kernels.kernels import quant_timing, torch_ops  # noqa: E402
from benchmark_model_kernels.kernels.timing import UnsupportedCase  # noqa: E402
from benchmark_model_kernels.run import roofline  # noqa: E402

#: (label, N, K): Llama-3.1-8B qkv_proj at TP=1: (32 + 2*8) heads * 128 = 6144 x 4096.
GEMMS = (("llama-3.1-8b.qkv_proj.tp1", 6144, 4096),)
#: (label, hidden, intermediate, local experts, global experts, top_k): Qwen3-30B-A3B experts.
MOES = (
    ("qwen3-30b-a3b.experts.tp1", 2048, 768, 128, 128, 8),
    ("qwen3-30b-a3b.experts.ep8", 2048, 768, 16, 128, 8),
)
#: (label, routine, dtype, variant)
GEMM_ROUTINES = (
    ("torch.linear", "bf16", ""),
    ("torch._scaled_mm", "fp8", "per_tensor"),
    ("torch._scaled_mm", "fp8", "per_token"),
)
MOE_ROUTINES = (("torch._grouped_mm", "bf16"), ("torch._scaled_grouped_mm", "fp8"))
#: Quant-only cases: (routine, dtype, backend, variant).
QUANT_GEMM = (
    ("bmm_fp8", "fp8", "cudnn", ""),
    ("torch._scaled_mm", "fp8", "torch", "per_token"),
    ("mm_fp4", "nvfp4", "cutlass", ""),
)
QUANT_MOE = (("trtllm_fp8_per_tensor_scale_moe", "fp8", "trtllm", ""),
             ("torch._scaled_grouped_mm", "fp8", "torch", ""),
             ("cutlass_fused_moe", "nvfp4", "cutlass", "quantized_input"))


def activation_quant(kind, dtype, routine, backend, variant, m):
    """The activation format the case builder records for this backend-table row at M rows."""
    spec = bk.find_spec(kind, dtype, routine, backend, variant)
    return bk.activation_quant(spec, m) if spec is not None else ""


def gemm_case(label, m, n, k, routine, dtype, backend="torch", variant="", with_quant=False):
    shape = GemmShape(m, n, k)
    cid = f"gemm.{label}.m{m}.{dtype}.{backend}" + (f".{variant}" if variant else "")
    return Case(case_id=cid + (".q" if with_quant else ""), kind="gemm", name=label, modules=(),
                layers=1, m=m, dtype=dtype, backend=backend, routine=routine, logical=shape,
                physical=shape, variant=variant, with_quant=with_quant,
                activation_quant=activation_quant("gemm", dtype, routine, backend, variant, m))


def moe_case(label, m, h, i, e, eg, top_k, routine, dtype, backend="torch", variant="",
             with_quant=False):
    shape = MoeShape(m, h, i, e, eg, top_k)
    cid = f"moe.{label}.m{m}.{dtype}.{backend}" + (f".{variant}" if variant else "")
    return Case(case_id=cid + (".q" if with_quant else ""), kind="moe", name=label, modules=(),
                layers=1, m=m, dtype=dtype, backend=backend, routine=routine, logical=shape,
                physical=shape, variant=variant, with_quant=with_quant, activation="Swiglu",
                activation_quant=activation_quant("moe", dtype, routine, backend, variant, m))


def row_for(case: Case, median_us: float | None) -> Row:
    p = case.logical
    common = dict(case_id=case.case_id, kind=case.kind, name=case.name, modules="", layers=1,
                  m=case.m, dtype=case.dtype, backend=case.backend, routine=case.routine,
                  variant=case.variant, with_quant=case.with_quant, median_us=median_us,
                  status="ok" if median_us else "failed")
    if isinstance(p, GemmShape):
        return Row(n=p.n, k=p.k, phys_n=p.n, phys_k=p.k, **common)
    return Row(hidden=p.hidden, intermediate=p.intermediate, experts=p.experts,
               global_experts=p.global_experts, top_k=p.top_k, activation=case.activation,
               gated=case.gated, **common)


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--ms", default="1,8,64,512",
                        help="token counts M to time, comma-separated, e.g. --ms 8,512")
    parser.add_argument("--dry_run_iters", type=int, default=5, help="warm-up iterations, e.g. 5")
    parser.add_argument("--num_iters", type=int, default=30, help="measured iterations, e.g. 30")
    parser.add_argument("--no_cuda_graph", action="store_true",
                        help="time without CUDA graphs (default: CUDA graph replay, as the driver)")
    parser.add_argument("--skip_pytest", action="store_true",
                        help="do not run the GPU-only tests at the end")
    parser.add_argument("--json", default="",
                        help="also write every row to this file, e.g. --json /tmp/torch_check.json")
    args = parser.parse_args(argv)
    ms = [int(v) for v in args.ms.split(",") if v.strip()]
    settings = RunSettings(dry_run_iters=args.dry_run_iters, num_iters=args.num_iters,
                           cuda_graph=not args.no_cuda_graph)

    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    cc = tuple(torch.cuda.get_device_capability())
    peak = roofline.find_peak(gpu, cc)
    print(f"GPU: {gpu} (sm_{cc[0]}{cc[1]}), torch {torch.__version__}, "
          f"peaks: {peak.name if peak else 'not in table'}")
    print(f"settings: {settings}")
    failures, rows = [], []

    def run(case: Case, fn, quant=False):
        try:
            m = fn(case, settings)
        except UnsupportedCase as err:
            print(f"  {case.case_id:70s} unsupported: {err}")
            rows.append({"case_id": case.case_id, "status": "unsupported", "reason": str(err)})
            return
        except Exception as err:  # noqa: BLE001 - report and continue with the next item
            failures.append(case.case_id)
            print(f"  {case.case_id:70s} FAILED: {type(err).__name__}: {err}")
            traceback.print_exc(limit=4)
            rows.append({"case_id": case.case_id, "status": "failed", "reason": repr(err)})
            torch.cuda.empty_cache()
            return
        row = row_for(case, m.median_us)
        if not quant:
            row = roofline.annotate(row, gpu, cc)
        rates = "" if quant else (
            f" {fmt(row.tflops)} TFLOP/s {fmt(row.tb_per_sec, '.2f')} TB/s"
            f" ({fmt(row.pct_peak_tflops)}% / {fmt(row.pct_peak_bandwidth)}% of peak)"
        )
        print(f"  {case.case_id:70s} {m.median_us:9.2f} us ±{m.std_us:6.2f}  {m.timer:10s}"
              + rates + (f"  note: {m.note}" if m.note else ""))
        rows.append({**dataclasses.asdict(row), "std_us": m.std_us, "timer": m.timer,
                     "note": m.note})
        torch.cuda.empty_cache()

    print("\n== torch GEMM rows")
    for label, n, k in GEMMS:
        for routine, dtype, variant in GEMM_ROUTINES:
            for m in ms:
                run(gemm_case(label, m, n, k, routine, dtype, variant=variant), torch_ops.run_case)
    print("\n== torch MoE rows")
    for label, h, i, e, eg, top_k in MOES:
        for routine, dtype in MOE_ROUTINES:
            for m in ms:
                run(moe_case(label, m, h, i, e, eg, top_k, routine, dtype), torch_ops.run_case)
    print("\n== activation quantization (with_quant part)")
    for label, n, k in GEMMS:
        for routine, dtype, backend, variant in QUANT_GEMM:
            for m in ms:
                case = gemm_case(label, m, n, k, routine, dtype, backend, variant, with_quant=True)
                run(case, quant_timing.measure_quant, quant=True)
    for label, h, i, e, eg, top_k in MOES[:1]:
        for routine, dtype, backend, variant in QUANT_MOE:
            for m in ms:
                case = moe_case(label, m, h, i, e, eg, top_k, routine, dtype, backend, variant,
                                with_quant=True)
                run(case, quant_timing.measure_quant, quant=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "capability": cc, "rows": rows}, f, indent=1)
        print(f"\nwrote {args.json}")

    if not args.skip_pytest:
        print("\n== GPU-only tests")
        cmd = [sys.executable, "-m", "pytest", "tests/run/test_torch_backend.py",
               "tests/test_quant_timing.py", "tests/test_roofline.py", "-q", "-rs"]
        rc = subprocess.run(cmd, cwd=ROOT).returncode
        if rc:
            failures.append(f"pytest exit {rc}")

    print(f"\n{'FAILED: ' + ', '.join(failures) if failures else 'all items ran (see unsupported lines)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
