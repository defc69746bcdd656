"""The Triton kernels of `triton_fp8_gemm`: the block-scaled FP8 GEMM and the 1x128-group quantizer.

The project's own implementations of the algorithms of vLLM's `_w8a8_triton_block_scaled_mm` and
`per_token_group_quant_fp8` (vllm/model_executor/layers/quantization/utils/fp8_utils.py);
`triton_fp8_gemm` says what they compute and launches them. Imported where they are launched:
importing this module imports Triton where it is installed (`triton_import`).
"""

from __future__ import annotations

from .triton_import import tl, triton

__all__ = ["block_fp8_gemm_kernel", "group_quant_kernel"]


# M (the token count) is not specialised on: it only enters `% M` and the store mask, and
# one binary per config then serves every M (vLLM's batch sizes vary call to call).
@triton.jit(do_not_specialize=["M"])
def block_fp8_gemm_kernel(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K,
    stride_am, stride_bn, stride_cm, stride_as_m, stride_bs_n,
    GROUP_K: tl.constexpr, GROUP_N: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # A [M, K] e4m3 row-major, B [N, K] e4m3 row-major (K contiguous for both: the K-major
    # operand layout Hopper's FP8 MMA wants), As [M, K/GROUP_K], Bs [cdiv(N, GROUP_N), K/GROUP_K].
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // pids_per_group) * GROUP_SIZE_M
    rows_in_group = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % pids_per_group) % rows_in_group
    pid_n = (pid % pids_per_group) // rows_in_group

    # Out-of-range rows/columns wrap onto valid ones: loads stay unmasked, the store masks.
    rows = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :]
    b_tile = b_ptr + ks[:, None] + cols.to(tl.int64)[None, :] * stride_bn
    a_scale = as_ptr + rows.to(tl.int64) * stride_as_m
    b_scale = bs_ptr + (cols // GROUP_N).to(tl.int64) * stride_bs_n

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kt in range(tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_tile)
        b = tl.load(b_tile)
        group = (kt * BLOCK_SIZE_K) // GROUP_K
        sa = tl.load(a_scale + group)
        sb = tl.load(b_scale + group)
        acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
        a_tile += BLOCK_SIZE_K
        b_tile += BLOCK_SIZE_K

    out_rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile = c_ptr + out_rows.to(tl.int64)[:, None] * stride_cm + out_cols[None, :]
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def group_quant_kernel(
    x_ptr, q_ptr, s_ptr, n_groups, stride_x, stride_q, stride_s,
    FP8_MAX: tl.constexpr, EPS: tl.constexpr, GROUP: tl.constexpr, GROUPS: tl.constexpr,
):
    # One program: row `program_id(0)`, groups [program_id(1) * GROUPS, +GROUPS).
    row = tl.program_id(0).to(tl.int64)
    groups = tl.program_id(1) * GROUPS + tl.arange(0, GROUPS)
    offs = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    gmask = groups < n_groups
    mask = gmask[:, None]
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), EPS)
    scale = tl.math.div_rn(amax, tl.full(amax.shape, FP8_MAX, tl.float32))
    y = tl.math.div_rn(x, scale[:, None])
    y = tl.minimum(tl.maximum(y, -FP8_MAX), FP8_MAX)
    # Round onto the e4m3 grid here (nearest, ties to even) so that the cast below is exact:
    # Triton's own fp32 -> e4m3 cast is not always correctly rounded (it can go through fp16,
    # and the interpreter drops carries), torch's and vLLM's CUDA quantizer's is. The grid
    # step is 2**(floor(log2|y|) - 3) (3 mantissa bits), 2**-9 in the subnormal range.
    e = ((y.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
    step_exp = tl.maximum(e - 3, -9)
    step = ((127 + step_exp) << 23).to(tl.float32, bitcast=True)
    inv_step = ((127 - step_exp) << 23).to(tl.float32, bitcast=True)
    t = y * inv_step  # exact (a power of two), |t| <= 16
    t = (t + 12582912.0) - 12582912.0  # round to an integer, ties to even (1.5 * 2**23)
    y = t * step
    tl.store(q_ptr + row * stride_q + offs, y.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row * stride_s + groups, scale, mask=gmask)
