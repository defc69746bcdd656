"""The fused MoE's @triton.jit kernels: align (one program, or count/offsets/scatter), the grouped
GEMM, activation + FP8 quantization, and the top_k sum. `KERNELS` holds them by name.

Triton comes through `kernels/triton_import.py`: this module imports on a CPU machine without
Triton, and `fused.py` imports it where it launches the kernels, so importing `fused` imports no
Triton. The kernel codes ACT_CODE / QUANT_CODE are the constexprs the launches in `fused.py` pass.
"""

from __future__ import annotations

from ..triton_import import tl, triton
from .problem import ACTIVATIONS

#: Kernel codes (constexpr ACT); 7 is the identity used by the input quantization.
ACT_CODE = {name: i for i, name in enumerate(ACTIVATIONS)}
ACT_IDENTITY = 7
#: Kernel codes (constexpr QUANT) of the activation formats.
QUANT_CODE = {"bf16": 0, "fp8_per_tensor": 1, "fp8_per_token": 2, "fp8_block128": 3}


# ---------------------------------------------------------------------------- Triton kernels


@triton.jit
def _act_tile(x_row, cols, mask, n_out, ACT: tl.constexpr, ALPHA: tl.constexpr,
              LIMIT: tl.constexpr):
    # Gated (ACT 0-2): gate = first half, up = second; swigluoai (3): interleaved pairs.
    if ACT == 3:
        g = tl.load(x_row + 2 * cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_row + 2 * cols + 1, mask=mask, other=0.0).to(tl.float32)
    elif ACT <= 2:
        g = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_row + n_out + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        g = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    if ACT == 0:
        y = g * tl.sigmoid(g) * u
    elif ACT == 1:
        y = 0.5 * g * (1.0 + tl.math.erf(g * 0.7071067811865476)) * u
    elif ACT == 2:
        # 0.5 * (1 + tanh(z)) == sigmoid(2z)
        z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        y = g * tl.sigmoid(2.0 * z) * u
    elif ACT == 3:
        g = tl.minimum(g, LIMIT)
        u = tl.minimum(tl.maximum(u, -LIMIT), LIMIT)
        y = (u + 1.0) * g * tl.sigmoid(ALPHA * g)
    elif ACT == 4:
        y = g * tl.sigmoid(g)
    elif ACT == 5:
        y = 0.5 * g * (1.0 + tl.math.erf(g * 0.7071067811865476))
    elif ACT == 6:
        r = tl.maximum(g, 0.0)
        y = r * r
    else:
        y = g
    return y


@triton.jit
def _block_experts(ends, total, expert_ids_ptr, num_blocks, BLOCK_M: tl.constexpr,
                   BCHUNK: tl.constexpr):
    # Block b (rows b*BLOCK_M...) belongs to the expert whose padded range holds its first
    # row; blocks past the padded total get -1 (their GEMM programs exit).
    for b0 in range(0, num_blocks, BCHUNK):
        b = b0 + tl.arange(0, BCHUNK)
        bstart = b * BLOCK_M
        eid = tl.sum((ends[None, :] <= bstart[:, None]).to(tl.int32), axis=1)
        eid = tl.where(bstart < total, eid, -1)
        tl.store(expert_ids_ptr + b, eid, mask=b < num_blocks)


@triton.jit(do_not_specialize=["numel", "local_experts", "num_blocks"])
def align_single_kernel(topk_ids_ptr, sorted_ids_ptr, expert_ids_ptr, ntpp_ptr, cursor_ptr,
                        numel, local_experts, num_blocks,
                        BLOCK_M: tl.constexpr, E_PAD: tl.constexpr, SCAN: tl.constexpr,
                        PADB: tl.constexpr, BCHUNK: tl.constexpr, SCATTER: tl.constexpr):
    # One program histograms all pairs once, writes the padded expert offsets (cursor), the
    # block -> expert map, the count and the padding sentinels; with SCATTER it then places
    # every pair itself (atomics on the cursor row), else align_scatter_kernel does.
    e = tl.arange(0, E_PAD)
    hist = tl.zeros([E_PAD], dtype=tl.int32)
    for start in range(0, numel, SCAN):
        offs = start + tl.arange(0, SCAN)
        ids = tl.load(topk_ids_ptr + offs, mask=offs < numel, other=-1)
        local = (offs < numel) & (ids >= 0) & (ids < local_experts)
        h = tl.histogram(tl.where(local, ids, 0), E_PAD)
        hist += h - tl.where(e == 0, tl.sum(tl.where(local, 0, 1), axis=0), 0)
    padded = (hist + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    starts = ends - padded
    total = tl.sum(padded, axis=0)
    tl.store(cursor_ptr + e, starts)
    tl.store(ntpp_ptr, total)
    _block_experts(ends, total, expert_ids_ptr, num_blocks, BLOCK_M, BCHUNK)
    for j0 in range(0, BLOCK_M, PADB):
        j = j0 + tl.arange(0, PADB)
        pos = (starts + hist)[:, None] + j[None, :]
        pad_mask = j[None, :] < (padded - hist)[:, None]
        tl.store(sorted_ids_ptr + pos, tl.zeros([E_PAD, PADB], dtype=tl.int32) + numel,
                 mask=pad_mask)
    if SCATTER:
        tl.debug_barrier()
        for start in range(0, numel, SCAN):
            offs = start + tl.arange(0, SCAN)
            ids = tl.load(topk_ids_ptr + offs, mask=offs < numel, other=-1)
            local = (offs < numel) & (ids >= 0) & (ids < local_experts)
            pos = tl.atomic_add(cursor_ptr + tl.where(local, ids, 0),
                                tl.full([SCAN], 1, tl.int32), mask=local)
            tl.store(sorted_ids_ptr + pos, offs, mask=local)


@triton.jit(do_not_specialize=["numel", "local_experts", "sorted_len", "fill_per_prog"])
def align_count_kernel(topk_ids_ptr, counts_ptr, sorted_ids_ptr, numel, local_experts,
                       sorted_len, fill_per_prog, E_PAD: tl.constexpr, CHUNK: tl.constexpr,
                       FILL: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * CHUNK + tl.arange(0, CHUNK)
    ids = tl.load(topk_ids_ptr + offs, mask=offs < numel, other=-1)
    local = (offs < numel) & (ids >= 0) & (ids < local_experts)
    ids_l = tl.where(local, ids, 0)
    e = tl.arange(0, E_PAD)
    hist = tl.histogram(ids_l, E_PAD)
    hist = hist - tl.where(e == 0, tl.sum(tl.where(local, 0, 1), axis=0), 0)
    tl.atomic_add(counts_ptr + e, hist, mask=hist > 0)
    f0 = pid * fill_per_prog
    f1 = tl.minimum(f0 + fill_per_prog, sorted_len)
    for start in range(f0, f1, FILL):
        o = start + tl.arange(0, FILL)
        tl.store(sorted_ids_ptr + o, tl.zeros([FILL], dtype=tl.int32) + numel, mask=o < f1)


@triton.jit(do_not_specialize=["local_experts", "num_blocks"])
def align_offsets_kernel(counts_ptr, cursor_ptr, expert_ids_ptr, ntpp_ptr, local_experts,
                         num_blocks, BLOCK_M: tl.constexpr, E_PAD: tl.constexpr,
                         BCHUNK: tl.constexpr):
    e = tl.arange(0, E_PAD)
    hist = tl.load(counts_ptr + e, mask=e < local_experts, other=0)
    padded = (hist + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    total = tl.sum(padded, axis=0)
    tl.store(cursor_ptr + e, ends - padded)
    tl.store(ntpp_ptr, total)
    _block_experts(ends, total, expert_ids_ptr, num_blocks, BLOCK_M, BCHUNK)


@triton.jit(do_not_specialize=["numel", "local_experts"])
def align_scatter_kernel(topk_ids_ptr, cursor_ptr, sorted_ids_ptr, numel, local_experts,
                         CHUNK: tl.constexpr):
    offs = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    ids = tl.load(topk_ids_ptr + offs, mask=offs < numel, other=-1)
    local = (offs < numel) & (ids >= 0) & (ids < local_experts)
    ids_l = tl.where(local, ids, 0)
    pos = tl.atomic_add(cursor_ptr + ids_l, tl.full([CHUNK], 1, tl.int32), mask=local)
    tl.store(sorted_ids_ptr + pos, offs, mask=local)


@triton.jit(do_not_specialize=[
    "EM", "num_valid", "top_k", "mul_routed", "stride_asm", "stride_ask", "stride_bse",
    "stride_bsn", "stride_bsk", "stride_bias_e"])
def moe_gemm_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, bias_ptr, topk_w_ptr,
    sorted_ids_ptr, expert_ids_ptr, ntpp_ptr,
    N, K, EM, num_valid, top_k, mul_routed,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bse, stride_bsn, stride_bsk, stride_bias_e,
    QUANT: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
    GROUP_N: tl.constexpr, GROUP_K: tl.constexpr, UPCAST: tl.constexpr, NAIVE: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # Grouped ordering of the (M block, N block) tiles, for L2 reuse of A across N.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    ntpp = tl.load(ntpp_ptr)
    if pid_m * BLOCK_SIZE_M >= ntpp:
        return
    if NAIVE:
        # vLLM's naive block assignment: block pid_m is pair pid_m alone (row 0 of the tile),
        # expert_ids is the flat topk_ids; no align step ran.
        offs_token = tl.where(tl.arange(0, BLOCK_SIZE_M) == 0, pid_m, num_valid)
    else:
        offs_tid = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_token = tl.load(sorted_ids_ptr + offs_tid)
    token_mask = offs_token < num_valid
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert < 0:
        return
    a_row = (offs_token // top_k).to(tl.int64)
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + a_row[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (b_ptr + expert * stride_be + offs_k[:, None] * stride_bk
              + offs_bn[None, :] * stride_bn)
    if QUANT == 2:
        a_s = tl.load(a_scale_ptr + a_row * stride_asm, mask=token_mask, other=0.0)
        b_s = tl.load(b_scale_ptr + expert * stride_bse + offs_bn * stride_bsn)
    if QUANT == 3:
        a_s_ptrs = a_scale_ptr + a_row * stride_asm
        b_s_ptrs = b_scale_ptr + expert * stride_bse + (offs_bn // GROUP_N) * stride_bsn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=token_mask[:, None], other=0.0)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left),
                        other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if QUANT == 3:
            ks = (k * BLOCK_SIZE_K) // GROUP_K
            a_s = tl.load(a_s_ptrs + ks * stride_ask, mask=token_mask, other=0.0)
            b_s = tl.load(b_s_ptrs + ks * stride_bsk)
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        else:
            acc = tl.dot(a, b, acc=acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if QUANT == 1:
        acc = acc * (tl.load(a_scale_ptr) * tl.load(b_scale_ptr + expert * stride_bse))
    elif QUANT == 2:
        acc = acc * a_s[:, None] * b_s[None, :]
    if HAS_BIAS:
        bias = tl.load(bias_ptr + expert * stride_bias_e + offs_bn).to(tl.float32)
        acc = acc + bias[None, :]
    if mul_routed != 0:
        w = tl.load(topk_w_ptr + offs_token, mask=token_mask, other=0.0)
        acc = acc * w[:, None]
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + offs_token[:, None].to(tl.int64) * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=token_mask[:, None] & (offs_cn[None, :] < N))


@triton.jit(do_not_specialize=["local_experts"])
def act_quant_kernel(x_ptr, y_ptr, ys_ptr, static_scale_ptr, ids_ptr, n_out, stride_x,
                     stride_y, stride_ys, local_experts,
                     ACT: tl.constexpr, QUANT: tl.constexpr, SKIP: tl.constexpr,
                     BLOCK: tl.constexpr, NCHUNK: tl.constexpr, GROUP: tl.constexpr,
                     FP8_MAX: tl.constexpr, EPS: tl.constexpr, ALPHA: tl.constexpr,
                     LIMIT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if SKIP:
        if tl.load(ids_ptr + row) >= local_experts:
            return
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    if QUANT == 2:
        # Dynamic per-row scale: the whole row in this program (two passes when it does not
        # fit one tile).
        if NCHUNK == 1:
            cols = tl.arange(0, BLOCK)
            mask = cols < n_out
            y = _act_tile(x_row, cols, mask, n_out, ACT, ALPHA, LIMIT)
            amax = tl.max(tl.where(mask, tl.abs(y), 0.0), axis=0)
            s = tl.maximum(amax, EPS) / FP8_MAX
            tl.store(ys_ptr + row * stride_ys, s)
            q = tl.minimum(tl.maximum(y / s, -FP8_MAX), FP8_MAX)
            tl.store(y_row + cols, q.to(y_ptr.dtype.element_ty), mask=mask)
        else:
            amax_v = tl.zeros([BLOCK], dtype=tl.float32)
            for c in range(NCHUNK):
                cols = c * BLOCK + tl.arange(0, BLOCK)
                mask = cols < n_out
                y = _act_tile(x_row, cols, mask, n_out, ACT, ALPHA, LIMIT)
                amax_v = tl.maximum(amax_v, tl.where(mask, tl.abs(y), 0.0))
            s = tl.maximum(tl.max(amax_v, axis=0), EPS) / FP8_MAX
            tl.store(ys_ptr + row * stride_ys, s)
            for c in range(NCHUNK):
                cols = c * BLOCK + tl.arange(0, BLOCK)
                mask = cols < n_out
                y = _act_tile(x_row, cols, mask, n_out, ACT, ALPHA, LIMIT)
                q = tl.minimum(tl.maximum(y / s, -FP8_MAX), FP8_MAX)
                tl.store(y_row + cols, q.to(y_ptr.dtype.element_ty), mask=mask)
    elif QUANT == 3:
        gi = tl.program_id(1) * (BLOCK // GROUP) + tl.arange(0, BLOCK // GROUP)
        cols = gi[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
        mask = cols < n_out
        y = _act_tile(x_row, cols, mask, n_out, ACT, ALPHA, LIMIT)
        amax = tl.max(tl.where(mask, tl.abs(y), 0.0), axis=1)
        s = tl.maximum(amax, EPS) / FP8_MAX
        tl.store(ys_ptr + row * stride_ys + gi, s, mask=gi * GROUP < n_out)
        q = tl.minimum(tl.maximum(y / s[:, None], -FP8_MAX), FP8_MAX)
        tl.store(y_row + cols, q.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_out
        y = _act_tile(x_row, cols, mask, n_out, ACT, ALPHA, LIMIT)
        if QUANT == 1:
            y = tl.minimum(tl.maximum(y / tl.load(static_scale_ptr), -FP8_MAX), FP8_MAX)
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["local_experts"])
def moe_sum_kernel(c_ptr, ids_ptr, out_ptr, H, local_experts, TOP_K: tl.constexpr,
                   BLOCK: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.static_range(TOP_K):
        expert = tl.load(ids_ptr + m * TOP_K + k)
        keep = mask & ((offs * 0 + expert) < local_experts)
        v = tl.load(c_ptr + (m * TOP_K + k) * H + offs, mask=keep, other=0.0)
        acc += v.to(tl.float32)
    tl.store(out_ptr + m * H + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


#: The kernels by the names `fused.py` launches them under.
KERNELS = {
    "align_single": align_single_kernel,
    "align_count": align_count_kernel,
    "align_offsets": align_offsets_kernel,
    "align_scatter": align_scatter_kernel,
    "gemm": moe_gemm_kernel,
    "act_quant": act_quant_kernel,
    "moe_sum": moe_sum_kernel,
}
