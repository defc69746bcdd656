"""The FP8 activation-quantization Triton kernels that `quant_timing` times.

`fp8_static_quant_kernel`: clamp(x * inv_scale, -FP8_MAX, FP8_MAX) -> e4m3 with a precomputed scale;
`fp8_per_token_quant_kernel`: one program per row computes the row amax, its scale amax / FP8_MAX and
the cast. Imported where they are launched (`quant_timing.fp8_quant_per_tensor`,
`fp8_quant_per_token`): importing this module imports Triton where it is installed (`triton_import`).
"""

from __future__ import annotations

from .triton_import import tl, triton

__all__ = ["fp8_static_quant_kernel", "fp8_per_token_quant_kernel"]


@triton.jit
def fp8_static_quant_kernel(x_ptr, y_ptr, inv_scale_ptr, n_elements, FP8_MAX: tl.constexpr,
                            BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv_scale = tl.load(inv_scale_ptr)
    y = tl.minimum(tl.maximum(x * inv_scale, -FP8_MAX), FP8_MAX)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def fp8_per_token_quant_kernel(x_ptr, y_ptr, scale_ptr, n_cols, stride_x, stride_y,
                               FP8_MAX: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    amax = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, axis=0), 1e-12) / FP8_MAX
    tl.store(scale_ptr + row, scale)
    inv_scale = 1.0 / scale
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.minimum(tl.maximum(x * inv_scale, -FP8_MAX), FP8_MAX)
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
