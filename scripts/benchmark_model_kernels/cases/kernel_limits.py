"""Known kernel and driver limits on a case: shape multiples, activations and routing.

`shape_limit(case)` returns the reason a known kernel or driver limit rules a case out ("" when
none), so no time is spent launching it: divisibility limits of the physical (padded) shape
(`SHAPE_LIMITS`, rendered into references/backends.md by docs_tables.py), the activations the
Triton and trtllm-gen MoE kernels implement, and the routing methods and group sizes the v0.6.17
driver and the trtllm-gen routing kernels accept. Each reason names the source that decided it.
vLLM's own limits are vllm_rules/padding.py's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.case_schema import Case
from ..vllm_rules.dispatch import refined_fp8_block
from .backends import TORCH

_GB = "flashinfer/gemm/gemm_base.py"  # at v0.6.17

#: The driver's `--routing_method` choices at v0.6.17 (benchmarks/routines/moe.py:178-191).
DRIVER_ROUTING_METHODS = ("renormalize", "deepseek_v3", "llama4", "renormalize_naive", "topk")

#: MoE routines that route inside the timed kernel from router logits (the others get
#: precomputed top-k ids, softmax top-k on random logits, and ignore --routing_method).
ROUTING_IN_KERNEL = ("trtllm_fp8_per_tensor_scale_moe", "trtllm_fp8_block_scale_moe",
                     "trtllm_fp4_block_scale_moe")

#: Gated activations the trtllm-gen MoE kernels implement
#: (csrc/trtllm_fused_moe_runner.cu:355-370 activationTypeToGatedActType at v0.6.17).
TRTLLM_MOE_ACTIVATIONS = ("Swiglu", "Geglu", "Situ")
#: Non-gated (element-wise) activations they implement (same file, :371-380,
#: activationTypeToEltwiseActType).
TRTLLM_MOE_ELTWISE_ACTIVATIONS = ("Relu2", "Identity")


@dataclass(frozen=True)
class ShapeLimit:
    """A kernel or driver needs one physical dimension to be a multiple of something."""

    routine: str
    """Routine the limit applies to."""
    backend: str
    """Backend label it applies to."""
    dim: str
    """"n", "k" (GEMM) or "hidden", "intermediate" (MoE), on the physical (padded) shape."""
    multiple: int
    """Required multiple."""
    why: str
    """What enforces it."""
    source: str
    """file:line at FlashInfer v0.6.17 (driver paths are under benchmarks/routines/), or torch."""
    dtype: str = ""
    """Recipe it applies to ("bf16", "fp8", "nvfp4"); "" = every recipe of the routine."""


_CUTLASS_MOE_TMA = ("TMA needs 128-bit aligned rows: 8 BF16 / 16 FP8 or FP4-packed elements",
                    "csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu:336-345")

SHAPE_LIMITS: tuple[ShapeLimit, ...] = (
    ShapeLimit("mm_bf16", "tinygemm", "n", 16, "TinyGEMM output features",
               f"{_GB}:441"),
    ShapeLimit("mm_bf16", "tinygemm", "k", 64, "TinyGEMM reduction tile",
               "flashinfer/gemm/routergemm.py:426-431"),
    # cuBLASLt FP8 needs 16-byte aligned leading dimensions: torch checks it, FlashInfer does not
    # (the call would fail inside cuBLASLt).
    ShapeLimit("bmm_fp8", "cublas", "k", 16, "cuBLASLt FP8 16-byte alignment", f"{_GB}:6704"),
    ShapeLimit("bmm_fp8", "cublas", "n", 16, "cuBLASLt FP8 16-byte alignment", f"{_GB}:6704"),
    ShapeLimit("torch._scaled_mm", TORCH, "k", 16, "torch _scaled_mm checks 16-byte alignment",
               "torch aten/src/ATen/native/cuda/Blas.cpp"),
    ShapeLimit("torch._scaled_mm", TORCH, "n", 16, "torch _scaled_mm checks 16-byte alignment",
               "torch aten/src/ATen/native/cuda/Blas.cpp"),
    ShapeLimit("mm_fp8", "trtllm_low_latency", "k", 128, "driver check",
               "benchmarks/routines/gemm.py:903-904"),
    ShapeLimit("mm_fp8", "trtllm_low_latency", "n", 32, "driver check",
               "benchmarks/routines/gemm.py:905-906"),
    ShapeLimit("mm_fp4", "trtllm", "n", 128, "weight shuffle with epilogue_tile_m=128",
               "benchmarks/routines/gemm.py:1359-1375"),
    ShapeLimit("mm_fp4", "cute-dsl", "n", 8, "CuTe-DSL FP4 GEMM", f"{_GB}:5776-5779"),
    # cutlass_fused_moe checks hidden and per-rank intermediate against the TMA alignment of the
    # narrower of activation and weight dtypes (FP4 weights count as packed bytes).
    ShapeLimit("cutlass_fused_moe", "cutlass", "hidden", 8, *_CUTLASS_MOE_TMA, dtype="bf16"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "intermediate", 8, *_CUTLASS_MOE_TMA, dtype="bf16"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "hidden", 16, *_CUTLASS_MOE_TMA, dtype="fp8"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "intermediate", 16, *_CUTLASS_MOE_TMA, dtype="fp8"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "hidden", 16, *_CUTLASS_MOE_TMA, dtype="nvfp4"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "intermediate", 16, *_CUTLASS_MOE_TMA,
               dtype="nvfp4"),
    ShapeLimit("torch._grouped_mm", TORCH, "hidden", 8, "16-byte aligned BF16 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
    ShapeLimit("torch._grouped_mm", TORCH, "intermediate", 8, "16-byte aligned BF16 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
    ShapeLimit("torch._scaled_grouped_mm", TORCH, "hidden", 16, "16-byte aligned FP8 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
    ShapeLimit("torch._scaled_grouped_mm", TORCH, "intermediate", 16, "16-byte aligned FP8 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
)


def shape_limit(case: "Case") -> str:
    """Reason a known kernel / driver limit rules `case` out on any GPU ("" when none).

    Divisibility limits come from SHAPE_LIMITS (on the physical, padded shape); activation and
    routing limits of the MoE routines are below. vLLM's own limits are padding.py's business."""
    r, b, p = case.routine, case.backend, case.physical
    for lim in SHAPE_LIMITS:
        if (lim.routine == r and lim.backend == b and lim.dtype in ("", case.dtype)
                and hasattr(p, lim.dim)):
            value = getattr(p, lim.dim)
            if value % lim.multiple:
                return (f"{r} {b} needs {lim.dim} % {lim.multiple} == 0; {lim.dim}={value} "
                        f"({lim.why}; {lim.source})")
    if case.kind == "gemm" and case.variant == "block128" and p.k % 128:
        return (f"block-128 FP8 needs K % 128 == 0 (1x128 activation groups); K={p.k} "
                "(vllm/model_executor/layers/quantization/utils/fp8_utils.py: per_token_group_quant_fp8)")
    if case.kind != "moe":
        return ""
    act = case.activation
    if case.variant == "block128":
        refined = refined_fp8_block(p.intermediate, p.hidden)
        for dim, value in (("hidden", p.hidden), ("intermediate", p.intermediate)):
            if value % 128 and dim == "intermediate" and refined:
                if r == "triton.fused_moe":
                    continue  # vLLM runs this shard on its Triton MoE with refined blocks
                return (f"block-128 FP8 MoE: intermediate={value} is not a multiple of 128, so vLLM refines "
                        f"the blocks to {refined}x{refined}, which only its Triton MoE takes "
                        "(vllm/model_executor/layers/fused_moe/oracle/fp8.py: refine_fp8_moe_block_shape)")
            if value % 128:
                return (f"block-128 FP8 MoE needs {dim} % 128 == 0 (128x128 weight blocks); "
                        f"{dim}={value}: vLLM refuses such a checkpoint shard "
                        "(vllm/model_executor/layers/quantization/fp8.py: Fp8MoEMethod.create_weights)")
    if r == "triton.fused_moe":
        return triton_moe_limit(case)
    if r == "cute_dsl_fp4_block_scale_moe" and act != "Swiglu":
        return (f"cute_dsl_fp4_block_scale_moe supports Swiglu only; activation is {act} "
                f"(benchmarks/routines/moe.py:1446-1452)")
    if r in ROUTING_IN_KERNEL:
        return trtllm_moe_limit(case)
    return ""


#: FlashInfer ActivationType names (the Case's) the Triton fused-MoE kernel implements, and the
#: kernel's own name for each (kernels/triton_moe/problem.py ACTIVATIONS).
TRITON_MOE_ACTIVATIONS = {
    "Swiglu": "silu_and_mul",
    "Geglu": "gelu_and_mul",
    "GegluTanh": "gelu_tanh_and_mul",
    "SwigluBias": "swigluoai",
    "Relu2": "relu2",
    "Silu": "silu",
    "Gelu": "gelu",
}


def triton_moe_limit(case: "Case") -> str:
    """Why the Triton fused MoE cannot run `case` ("" if it can)."""
    if case.activation not in TRITON_MOE_ACTIVATIONS:
        return (f"triton.fused_moe has no {case.activation} activation "
                f"(it has {', '.join(TRITON_MOE_ACTIVATIONS)})")
    return ""


#: The v0.6.17 driver's `fused_topk_deepseek` call (outside the timed region, for its bandwidth
#: figure) validates DeepSeek grouping before the kernel ever runs.
_DSV3_CHECK = "flashinfer/fused_moe/fused_routing_dsv3.py"
_RUNNER = "csrc/trtllm_fused_moe_runner.cu"
_DS_KERNEL = "csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_deepseek.cu"


def _deepseek_limit(r: str, e: int, top_k: int, n_group: int, topk_group: int) -> str:
    """Why deepseek_v3 routing with these groups cannot run through the driver ("" if it can)."""
    tail = f"(E={e}, top_k={top_k}, n_group={n_group}, topk_group={topk_group})"
    if topk_group > n_group or topk_group * n_group < top_k:
        return (f"{r}: the v0.6.17 driver's fused_topk_deepseek needs topk_group <= n_group and "
                f"topk_group * n_group >= top_k {tail} ({_DSV3_CHECK}:65-69)"
                + ("; ungrouped DeepSeek routing (n_group=1, e.g. Kimi-K2, GLM-4.5) passes only "
                   "with top_k=1, although the kernel itself supports it" if n_group == 1 else ""))
    if top_k > 8:
        return (f"{r}: deepseek_v3 routing through the v0.6.17 driver needs top_k <= 8 {tail} "
                f"({_DSV3_CHECK}:76,95)")
    if n_group > 1:
        if n_group > 8:
            return f"{r}: deepseek_v3 routing needs n_group <= 8 {tail} ({_DS_KERNEL}:524)"
        if e % n_group:
            return (f"{r}: deepseek_v3 routing needs E % n_group == 0 {tail} "
                    f"({_DS_KERNEL}:527)")
        if e // n_group > 32:
            return (f"{r}: deepseek_v3 routing needs E / n_group <= 32 {tail} "
                    f"({_DSV3_CHECK}:80)")
        if e // n_group * topk_group > 128:
            return (f"{r}: deepseek_v3 routing needs E / n_group * topk_group <= 128 {tail} "
                    f"({_DSV3_CHECK}:85)")
        if topk_group > 4:
            return f"{r}: deepseek_v3 routing needs topk_group <= 4 {tail} ({_RUNNER}:156)"
        if e % 4:
            return f"{r}: deepseek_v3 routing needs E % 4 == 0 {tail} ({_DS_KERNEL}:542)"
    elif e > 384:
        return (f"{r}: deepseek_v3 routing without groups needs E <= 384 through the v0.6.17 "
                f"driver {tail} ({_DSV3_CHECK}:91)")
    return ""


def trtllm_moe_limit(case: "Case") -> str:
    """Why a trtllm-gen MoE routine (routing inside the kernel) cannot run `case` ("" if it can).

    Activation: the kernels implement gated Swiglu/Geglu/Situ and element-wise Relu2/Identity.
    Non-gated cases run although the v0.6.17 driver allocates [E, 2I, H] GEMM1 weights: the FP8
    per-tensor and FP4 launchers never check the weight shape (only the BF16 and FP8 block-scale
    launchers call check_weights_shape, csrc/trtllm_fused_moe_kernel_launcher.cu:837,1463), and
    the kernel reads a contiguous [E_local, I, H] view from the start of the buffer: the same
    bytes per expert as vLLM's non-gated layer (random weights either way).
    Routing: the method must have a driver name, and the routing kernel's (and, for deepseek_v3,
    the driver's own fused_topk_deepseek) limits must hold."""
    r, act = case.routine, case.activation
    if case.gated and act not in TRTLLM_MOE_ACTIVATIONS:
        return (f"{r} implements gated activations {', '.join(TRTLLM_MOE_ACTIVATIONS)} only; "
                f"activation is {act} ({_RUNNER}:355-370)")
    if not case.gated and act not in TRTLLM_MOE_ELTWISE_ACTIVATIONS:
        return (f"{r} implements non-gated activations "
                f"{', '.join(TRTLLM_MOE_ELTWISE_ACTIVATIONS)} only; activation is {act} "
                f"({_RUNNER}:371-380)")
    routing = case.routing
    method = routing.method if routing else "renormalize"
    top_k, e = case.logical.top_k, case.logical.global_experts
    if method not in DRIVER_ROUTING_METHODS:
        return (f"{r} routes inside the kernel; routing '{method}' has no --routing_method "
                f"in the v0.6.17 driver (choices: {', '.join(DRIVER_ROUTING_METHODS)})")
    if method == "llama4":
        if top_k != 1:
            return f"{r}: llama4 routing needs top_k == 1; top_k={top_k} ({_RUNNER}:217)"
        if e > 128:
            return (f"{r}: llama4 routing needs E <= 128; E={e} "
                    f"(csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_llama4.cu:514)")
    elif method == "deepseek_v3":
        # The same defaults cases._routing_args passes to the driver.
        n_group = (routing.n_group if routing else None) or 1
        topk_group = (routing.topk_group if routing else None) or 1
        return _deepseek_limit(r, e, top_k, n_group, topk_group)
    elif top_k > 32 or e > 2048:
        return (f"{r}: {method} routing needs top_k <= 32 and E <= 2048; top_k={top_k}, E={e} "
                f"(csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_custom.cu:1504-1509)")
    return ""


__all__ = [
    "DRIVER_ROUTING_METHODS",
    "ROUTING_IN_KERNEL",
    "TRTLLM_MOE_ACTIVATIONS",
    "TRTLLM_MOE_ELTWISE_ACTIVATIONS",
    "TRITON_MOE_ACTIVATIONS",
    "ShapeLimit",
    "SHAPE_LIMITS",
    "shape_limit",
    "triton_moe_limit",
    "trtllm_moe_limit",
]
