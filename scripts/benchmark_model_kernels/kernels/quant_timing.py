"""Activation-quantization time for `*_with_quant` rows: one fused kernel, no vLLM, FlashInfer timer.

A with_quant row = the kernel-only row + the time to quantize that kernel's input activation
[rows, cols] from BF16 into the format and scale layout the backend consumes:

* FP8 per-tensor static (ModelOpt FP8 / vLLM static W8A8; FlashInfer bmm_fp8, mm_fp8, FP8 MoE and
  torch._scaled_mm per_tensor): `clamp(x * (1/scale), -448, 448) -> e4m3`, one Triton kernel.
* FP8 per-token dynamic (torch._scaled_mm per_token and torch._scaled_grouped_mm, vLLM's dynamic
  path): one Triton kernel per row computing the row amax, scale = amax/448, and the cast.
* FP8 per-tensor dynamic (the Triton MoE as vLLM's online fp8_per_tensor runs it): vLLM's
  dynamic_scaled_fp8_quant as the MoE's own input quantizer does it
  (kernels/triton_moe/fused.py: input_quant_fn): the scale reset, an amax reduction over the whole
  tensor, then the cast. A Triton MoE row of a block-128 checkpoint that vLLM refines to a finer
  block quantizes per 1 x that block (fp8_per_group_64, fp8_per_group_32), with the same quantizer.
* NVFP4 (mm_fp4, cutlass_fused_moe quantized_input, trtllm/cute-dsl FP4 MoE):
  `flashinfer.fp4_quantize` with the backend's scale-factor layout (128x4 swizzled; 8x4 for
  mm_fp4 trtllm without --use_128x4_sf_layout; linear for the trtllm-gen and CuTe-DSL MoE, as
  vLLM feeds them). FlashInfer's FP4 quantize kernels need SM100+.

`quant_spec` (pure, CPU-testable) decides what to time; `measure_quant` times it on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.case_schema import Case, GemmShape, MoeShape
from ..vllm_rules.moe_triton import square_block_for_shard
from . import triton_fp8_gemm
from .timing import Measurement, UnsupportedCase, bench

FP8_MAX = 448.0
#: Scale-factor layouts of NVFP4 activations.
SF_LAYOUTS = ("128x4", "8x4", "linear")
QUANT_METHODS = ("fp8_per_tensor", "fp8_per_tensor_dynamic", "fp8_per_token", "fp8_per_group_128",
                 "fp8_per_group_64", "fp8_per_group_32", "nvfp4")
#: The method of each FP8 activation format a case records (cases/backends.py QUANT_FORMATS).
_FP8_METHODS = {"fp8_per_tensor_static": "fp8_per_tensor",
                "fp8_per_tensor_dynamic": "fp8_per_tensor_dynamic",
                "fp8_per_token_dynamic": "fp8_per_token", "fp8_per_group_128": "fp8_per_group_128"}

QUANT_TIMING_NOTE = (
    "with_quant rows add the time of quantizing the kernel's BF16 input activation [M, K] "
    "(MoE: [M, hidden]) into the format the backend consumes, measured separately on the same "
    "GPU with the same FlashInfer bench_gpu_time settings (CUPTI, cold L2, CUDA graph, same "
    "warm-up and iteration counts) and added to the kernel-only median (quant_us is that part). "
    "Each quantization is ONE fused kernel with no vLLM dependency (but the dynamic per-tensor "
    "one): FP8 per-tensor static "
    "(ModelOpt/static W8A8) is a Triton kernel computing clamp(x * (1/scale), -448, 448) -> e4m3 "
    "with a precomputed scale; FP8 per-tensor dynamic (the Triton MoE of vLLM's online "
    "fp8_per_tensor) is the scale reset, an amax reduction over the whole tensor and the cast, "
    "as vLLM's dynamic_scaled_fp8_quant does it; FP8 per-token dynamic (torch._scaled_mm "
    "per_token) is a Triton "
    "kernel that computes each row's amax, its scale amax/448 and the cast in one launch (also "
    "the MoE input of torch._scaled_grouped_mm rows, whose kernel-only row includes the per-token "
    "quantization between the two GEMMs but not the input's); NVFP4 "
    "is FlashInfer's own fp4_quantize (16-element blocks, FP8 block scales, one global scale) in "
    "the scale layout the backend reads (128x4 swizzled; 8x4 for mm_fp4 trtllm; linear for the "
    "trtllm-gen and CuTe-DSL FP4 MoE), which needs SM100+."
)


@dataclass(frozen=True)
class QuantSpec:
    """What one with_quant row's activation quantization is."""

    method: str
    """"fp8_per_tensor", "fp8_per_token" or "nvfp4"."""
    rows: int
    """Tokens M (physical)."""
    cols: int
    """Activation width: GEMM K or MoE hidden (physical, i.e. after the backend's padding)."""
    sf_layout: str = ""
    """NVFP4 scale-factor layout: "128x4", "8x4" or "linear" ("" for FP8)."""

    def describe(self) -> str:
        layout = f", {self.sf_layout} scale factors" if self.sf_layout else ""
        return f"{self.method} quantization of a [{self.rows}, {self.cols}] BF16 activation{layout}"


#: Scale-factor layout of each NVFP4 activation format (cases/backends.py QUANT_FORMATS).
_NVFP4_LAYOUTS = {"nvfp4_128x4": "128x4", "nvfp4_8x4": "8x4", "nvfp4_linear": "linear"}


def _nvfp4_layout(case: Case) -> str:
    """The scale layout of the NVFP4 format the case builder recorded (`Case.activation_quant`)."""
    layout = _NVFP4_LAYOUTS.get(case.activation_quant)
    if layout is None:
        raise ValueError(f"{case.case_id}: activation_quant={case.activation_quant!r} is not an NVFP4 "
                         f"format; expected one of {', '.join(_NVFP4_LAYOUTS)} (cases/build.py records it)")
    return layout


def quant_spec(case: Case) -> QuantSpec:
    """The activation quantization a with_quant Case adds; UnsupportedCase when it has none."""
    if isinstance(case.physical, GemmShape):
        rows, cols = case.physical.m, case.physical.k
    else:
        rows, cols = case.physical.num_tokens, case.physical.hidden
    if case.dtype == "bf16":
        raise UnsupportedCase("BF16 rows have no activation quantization to add")
    if case.dtype == "fp8":
        method = _FP8_METHODS.get(case.activation_quant, "")
        if not method:  # a case made without its activation format: its variant's
            per_token = case.variant == "per_token" or case.routine == "torch._scaled_grouped_mm"
            method = "fp8_per_token" if per_token else "fp8_per_tensor"
            if case.variant == "block128":
                method = "fp8_per_group_128"
        if method == "fp8_per_group_128" and case.routine == "triton.fused_moe":
            method = _triton_moe_group(case)
        return QuantSpec(method, rows, cols)
    if case.dtype == "nvfp4":
        if case.routine == "cutlass_fused_moe" and case.variant != "quantized_input":
            raise UnsupportedCase(
                "cutlass_fused_moe NVFP4 without quantized_input quantizes inside the kernel; "
                "its kernel-only row already includes it"
            )
        if cols % 16:
            raise UnsupportedCase(f"NVFP4 quantization needs K % 16 == 0 (16-value blocks); K={cols}")
        return QuantSpec("nvfp4", rows, cols, _nvfp4_layout(case))
    raise ValueError(f"dtype={case.dtype!r}: expected bf16, fp8 or nvfp4")


def _triton_moe_group(case: Case) -> str:
    """The group quantization of a block-128 Triton MoE row: per 1 x 128, or per 1 x the block
    vLLM refines the checkpoint's scales to for the shard (vllm_rules/moe_triton.py)."""
    p = case.physical
    assert isinstance(p, MoeShape)
    block = square_block_for_shard(128, p.intermediate, p.hidden) or 128
    return f"fp8_per_group_{block}"


# ---------------------------------------------------------------------------- Triton kernels


def fp8_quant_per_tensor(x, inv_scale, out=None):
    """e4m3 of clamp(x * inv_scale) in one Triton kernel; x contiguous, inv_scale fp32 [1]."""
    import torch

    from .fp8_quant_kernels import fp8_static_quant_kernel as static_kernel
    from .triton_import import triton

    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device) if out is None else out
    n = x.numel()
    block = 1024
    static_kernel[(triton.cdiv(n, block),)](x, out, inv_scale, n, FP8_MAX=FP8_MAX, BLOCK=block)
    return out


def fp8_quant_per_token(x, out=None, scale=None):
    """(e4m3 [rows, cols], fp32 scale [rows]) with scale = row amax / 448, one Triton kernel."""
    import torch

    from .fp8_quant_kernels import fp8_per_token_quant_kernel as token_kernel
    from .triton_import import triton

    rows, cols = x.shape
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device) if out is None else out
    scale = torch.empty(rows, dtype=torch.float32, device=x.device) if scale is None else scale
    block = min(triton.next_power_of_2(cols), 4096)
    token_kernel[(rows,)](
        x, out, scale, cols, x.stride(0), out.stride(0), FP8_MAX=FP8_MAX, BLOCK=block,
        num_warps=8 if block >= 2048 else 4,
    )
    return out, scale


# ---------------------------------------------------------------------------- timing


def measure_quant(case: Case, settings) -> Measurement:
    """Time the activation quantization of a with_quant Case on the current CUDA device."""
    spec = quant_spec(case)
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedCase("activation-quantization timing needs a CUDA GPU; none is visible")
    major, minor = torch.cuda.get_device_capability()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(spec.rows, spec.cols, device="cuda", dtype=torch.bfloat16, generator=g)

    if spec.method == "nvfp4":
        if major < 10:
            raise UnsupportedCase(
                f"NVFP4 activation quantization (flashinfer.fp4_quantize, {spec.sf_layout} scale "
                f"factors) needs SM100+; this GPU is sm_{major}{minor}"
            )
        from flashinfer import fp4_quantize

        global_scale = ((FP8_MAX * 6.0) / x.float().abs().amax()).reshape(1)
        swizzled = spec.sf_layout != "linear"
        eight_by_four = spec.sf_layout == "8x4"

        def quant_nvfp4(x, global_scale):
            return fp4_quantize(
                x, global_scale, sf_vec_size=16, sf_use_ue8m0=False,
                is_sf_swizzled_layout=swizzled, is_sf_8x4_layout=eight_by_four,
            )

        quant_nvfp4(x, global_scale)
        return bench(quant_nvfp4, settings, input_args=(x, global_scale))

    if major < 9 and (major, minor) != (8, 9):
        raise UnsupportedCase(f"FP8 (e4m3) needs SM89+; this GPU is sm_{major}{minor}")
    if spec.method in ("fp8_per_tensor_dynamic", "fp8_per_group_64", "fp8_per_group_32"):
        # The Triton MoE's own input quantizer, as its kernel consumes it.
        from .triton_moe.fused import input_quant_fn

        if spec.method == "fp8_per_tensor_dynamic":
            fn, args = input_quant_fn(x, "fp8_per_tensor")
        else:
            fn, args = input_quant_fn(x, "fp8_block128", block_size=int(spec.method.rsplit("_", 1)[1]))
        fn(*args)
        return bench(fn, settings, input_args=args)
    if spec.method == "fp8_per_group_128":
        # The block-FP8 kernels' own 1x128-group quantizer (kernels/triton_fp8_gemm.py); N=128 keeps
        # the unused weight it builds small.
        problem = triton_fp8_gemm.BlockFp8Problem(spec.rows, 128, spec.cols)
        fn, args = triton_fp8_gemm.quant_input_fn(problem, triton_fp8_gemm.build_inputs(problem, "cuda"))
        fn(*args)
        return bench(fn, settings, input_args=args)
    out = torch.empty(spec.rows, spec.cols, device="cuda", dtype=torch.float8_e4m3fn)
    if spec.method == "fp8_per_tensor":
        # A static (calibrated) scale: computed once here, outside the timed kernel.
        inv_scale = (FP8_MAX / x.float().abs().amax().clamp(min=1e-12)).reshape(1)
        fp8_quant_per_tensor(x, inv_scale, out)
        return bench(fp8_quant_per_tensor, settings, input_args=(x, inv_scale, out))
    scale = torch.empty(spec.rows, device="cuda", dtype=torch.float32)
    fp8_quant_per_token(x, out, scale)
    return bench(fp8_quant_per_token, settings, input_args=(x, out, scale))


__all__ = [
    "QUANT_TIMING_NOTE",
    "QUANT_METHODS",
    "SF_LAYOUTS",
    "QuantSpec",
    "quant_spec",
    "fp8_quant_per_tensor",
    "fp8_quant_per_token",
    "measure_quant",
]
