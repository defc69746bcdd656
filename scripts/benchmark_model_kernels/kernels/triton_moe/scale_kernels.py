"""The dynamic per-tensor FP8 scale of a [rows, cols] activation: one @triton.jit reduction.

vLLM's online `fp8_per_tensor` MoE quantizes its input and its intermediate with ONE scale per
tensor computed per call (vllm/_custom_ops.py: scaled_fp8_quant with no scale ->
`dynamic_scaled_fp8_quant`: an amax reduction over the whole tensor into one scale, then the
quantization). `tensor_scale_kernel` is the reduction: each program takes `ROWS` rows, reduces
their |x| to one max and folds max / FP8_MAX into the scale with an atomic max, so the scale must
be reset before each launch (`fused.py` fills it with the floor SCALE_EPS / FP8_MAX); the
quantization is `kernels.act_quant_kernel`'s per-tensor path, reading the scale it produced.

Triton comes through `kernels/triton_import.py`; `fused.py` imports this module where it launches
the kernel.
"""

from __future__ import annotations

from ..triton_import import tl, triton

__all__ = ["tensor_scale_kernel"]


@triton.jit(do_not_specialize=["n_rows"])
def tensor_scale_kernel(x_ptr, scale_ptr, n_rows, n_cols, stride_x, FP8_MAX: tl.constexpr,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    amax = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
        amax = tl.maximum(amax, tl.abs(x.to(tl.float32)))
    tl.atomic_max(scale_ptr, tl.max(tl.max(amax, axis=1), axis=0) / FP8_MAX)
