"""Shared builders for the runner/driver plumbing tests (Cases made by hand, the stand-in driver)."""

from __future__ import annotations

import os

from benchmark_model_kernels.cases.schema import Case, GemmShape, MoeShape
from benchmark_model_kernels.plan.schema import Routing

#: Stand-in FlashInfer checkout: benchmarks/flashinfer_benchmark.py misbehaves on magic N values
#: (see its docstring). Its numbers are synthetic; tests only check plumbing with them.
FAKE_REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "fake_flashinfer")

SEGFAULT, HANG, NO_CONFIG, CUPTI_FALLBACK, CUDA_ERROR, VALUE_ERROR, NOT_ON_CC, NO_AUTOTUNE, OOM, SILENT = (
    6661, 6662, 6663, 6664, 6665, 6666, 6667, 6668, 6669, 6670)


def gemm_case(n: int, *, m: int = 8, k: int = 64, backend: str = "cudnn", dtype: str = "bf16",
              name: str | None = None, skip: str = "", with_quant: bool = False,
              routine: str = "mm_bf16", extra: tuple[str, ...] = ()) -> Case:
    name = name or f"g{n}"
    cid = f"gemm.{name}.m{m}.{dtype}.{backend}" + (".q" if with_quant else "")
    args = ("--routine", routine, "--m", str(m), "--n", str(n), "--k", str(k), "--backends", backend) + extra
    return Case(case_id=cid, kind="gemm", name=name, modules=(f"model.layers.*.{name}",), layers=32,
                m=m, dtype=dtype, backend=backend, routine=routine, logical=GemmShape(m, n, k),
                physical=GemmShape(m, n, k), with_quant=with_quant,
                driver_args=() if backend == "torch" else args, skip_reason=skip)


def moe_case(intermediate: int = 768, *, m: int = 8) -> Case:
    shape = MoeShape(num_tokens=m, hidden=2048, intermediate=intermediate, experts=128,
                     global_experts=128, top_k=8)
    args = ("--routine", "cutlass_fused_moe", "--num_tokens", str(m), "--hidden_size", "2048",
            "--intermediate_size", str(intermediate), "--num_experts", "128", "--top_k", "8",
            "--routing_method", "renormalize", "--cutlass_variant", "base")
    return Case(case_id=f"moe.experts.m{m}.bf16.cutlass", kind="moe", name="experts",
                modules=("model.layers.*.mlp.experts",), layers=48, m=m, dtype="bf16",
                backend="cutlass", routine="cutlass_fused_moe", logical=shape, physical=shape,
                activation="Swiglu", routing=Routing(method="renormalize"), driver_args=args)
