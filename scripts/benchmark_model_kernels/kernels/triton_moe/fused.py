"""The fused-MoE call of one rank: `make_fused_moe(p, inputs, config) -> (fn, args)`.

fn(*args) runs the passes of `wrapping.passes(p)`, vLLM's `fused_experts_impl`: align -> grouped
GEMM 1 -> activation over every M x top_k slot -> its FP8 quantization (a dynamic per-tensor
scale computed first where `p.dynamic_scale`) -> under EP a zero fill of the whole output cache
-> grouped GEMM 2 (routing weight multiplied in) -> the sum over every top_k slot, and returns the
[M, H] BF16 output. `args` holds every GPU tensor (inputs from `problem.build_inputs`,
preallocated workspaces, the output): the closure keeps only ints, the config and kernel handles,
so nothing is allocated or synchronized inside fn and it can be captured in a CUDA graph. Also:
`quant_input_fn` / `input_quant_fn` (the FP8 schemes' input quantization, timed apart: the with_quant
twin's) and `align_only_fn` (the align step alone, for tests).

Torch is imported lazily (`problem._torch()`), and so is `kernels` (which imports Triton).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .problem import (
    FP8_GROUP,
    FP8_MAX,
    FP8_SCHEMES,
    SCALE_EPS,
    SWIGLUOAI_ALPHA,
    SWIGLUOAI_LIMIT,
    MoeProblem,
    _cdiv,
    _fp8,
    _next_pow2,
    _torch,
)
from .tuning import default_config, validate_config
from .wrapping import naive_block_assignment, passes, scale_groups

#: Pairs up to which one program aligns them all, and up to which one program computes the
#: offsets for a multi-program scatter; beyond, the histograms are multi-program too. Measured on
#: an H200 (Qwen3-30B-A3B experts, BF16): at 4096 pairs the split path beats the one program by
#: 1.3% of the whole call; the three are within 0.5% at 64-512 and at 8192 pairs.
ALIGN_SINGLE_MAX = 1024
ALIGN_SPLIT_MAX = 16384
#: Pairs a program reads per step, pairs per program of the scatter, warps of the one program
#: (16 beat 8 by 0.2-0.3% of the call at 512-4096 pairs, and were as fast at 64).
_ALIGN_SCAN = 1024
_ALIGN_CHUNK = 512
_ALIGN_WARPS = 16
#: Columns per program and warps of the BF16 / per-tensor activation and of the top_k sum (other
#: values from 128 to 2048 columns and 1 to 8 warps moved the H200 call by under 0.5%).
_ACT_BLOCK_MAX = 1024
_ACT_WARPS = 4
_SUM_BLOCK_MAX = 1024
_SUM_WARPS = 4
#: Rows per program and widest column step of the dynamic per-tensor scale's amax reduction.
_SCALE_ROWS = 8
_SCALE_BLOCK_MAX = 1024


def _interpreting() -> bool:
    """Triton's CPU interpreter: its tl.dot mis-reads BF16 operands (Triton 3.9), so the GEMM
    upcasts them to fp32 there (exact: BF16 products are exact in fp32)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _act_launch(quant: int, n_out: int, group: int = FP8_GROUP) -> tuple[int, int, int, int]:
    """(BLOCK, NCHUNK, column programs, num_warps) of the activation kernel for one row
    (QUANT 3: `group`-wide scale groups)."""
    if quant == 2:
        block = min(_next_pow2(n_out), 8192)
        nchunk = _cdiv(n_out, block)
        return block, nchunk, 1, 4 if block <= 2048 else 8
    if quant == 3:
        groups = _cdiv(n_out, group)
        gpp = min(8, _next_pow2(groups))
        return gpp * group, 1, _cdiv(groups, gpp), 4
    block = min(_ACT_BLOCK_MAX, max(16, _next_pow2(n_out)))
    return block, 1, _cdiv(n_out, block), _ACT_WARPS


def make_fused_moe(p: MoeProblem, inputs: dict, config: dict) -> tuple[Callable, tuple]:
    """(fn, args): fn(*args) runs the whole call (`wrapping.passes(p)`) and returns the [M, H]
    BF16 output.

    All GPU tensors (inputs, workspaces, output) travel in `args`; the closure holds only ints,
    the config and kernel handles. Nothing is allocated or synchronized inside fn.
    """
    from .kernels import ACT_CODE, ACT_IDENTITY, QUANT_CODE
    from .kernels import KERNELS as K
    from .scale_kernels import tensor_scale_kernel

    torch = _torch()
    cfg = validate_config(config, p.scheme, p.block_size)
    dev = inputs["w1"].device
    M, H, I, E, top_k, N1 = (p.num_tokens, p.hidden, p.intermediate, p.local_experts, p.top_k,  # noqa: E741
                             p.n1)
    numel = p.pairs
    bm = cfg["BLOCK_SIZE_M"]
    quant = QUANT_CODE[p.scheme]
    fp8 = quant != 0
    steps = {x.name for x in passes(p)}
    dynamic = "a2_scale" in steps
    if quant == 1 and not dynamic and inputs.get("a2_scale") is None:
        raise ValueError("fp8_per_tensor with a static scale needs inputs['a2_scale']")

    # Align workspaces. The padded length bound: every non-empty local expert adds < BM slots.
    # Under the naive assignment the GEMMs see one block per pair (numel * BM padded rows).
    naive = naive_block_assignment(p)
    sorted_len = numel * bm if naive else numel + min(E, numel) * (bm - 1)
    num_blocks = _cdiv(sorted_len, bm)
    e_pad = max(16, _next_pow2(E))
    i32 = dict(dtype=torch.int32, device=dev)
    sorted_ids = torch.empty(sorted_len, **i32)
    expert_ids = torch.empty(num_blocks, **i32)
    ntpp = torch.empty(1, **i32)
    cursor = torch.empty(e_pad, **i32)  # every align path keeps one row of per-expert cursors
    counts = torch.zeros(e_pad, **i32)
    # GEMM 1 writes the local pairs' rows only; the activation reads every row, so the others
    # hold zeros (vLLM's cache holds whatever the memory had: the same work).
    cache1 = torch.zeros(numel, N1, dtype=torch.bfloat16, device=dev)
    act_out = torch.empty(numel, I, dtype=torch.bfloat16, device=dev)
    cache2 = torch.empty(numel, I, dtype=_fp8(), device=dev) if fp8 else None
    if quant in (2, 3):
        cache2_scale = torch.empty(numel, scale_groups(p), dtype=torch.float32, device=dev)
    elif dynamic:
        cache2_scale = torch.empty(1, dtype=torch.float32, device=dev)
    else:
        cache2_scale = None
    cache3 = torch.empty(numel, H, dtype=torch.bfloat16, device=dev)
    out = torch.empty(M, H, dtype=torch.bfloat16, device=dev)

    align = None if naive else _align_launcher(numel, E, bm, sorted_len, num_blocks, e_pad)

    gemm_meta = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=cfg["BLOCK_SIZE_N"],
                     BLOCK_SIZE_K=cfg["BLOCK_SIZE_K"], GROUP_SIZE_M=cfg["GROUP_SIZE_M"],
                     num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                     QUANT=quant, HAS_BIAS=p.has_bias, GROUP_N=p.block_size, GROUP_K=p.block_size,
                     UPCAST=_interpreting() and quant == 0, NAIVE=naive)
    bk = cfg["BLOCK_SIZE_K"]
    grid1 = (num_blocks * _cdiv(N1, cfg["BLOCK_SIZE_N"]),)
    grid2 = (num_blocks * _cdiv(H, cfg["BLOCK_SIZE_N"]),)
    act_block, _, act_cols, act_warps = _act_launch(0, I)
    q_block, q_nchunk, q_cols, q_warps = _act_launch(quant, I, p.block_size)
    scale_block = min(_SCALE_BLOCK_MAX, max(16, _next_pow2(I)))
    scale_grid = (_cdiv(numel, _SCALE_ROWS),)
    sum_block = min(_SUM_BLOCK_MAX, max(16, _next_pow2(H)))
    sum_grid = (M, _cdiv(H, sum_block))
    act_code = ACT_CODE[p.activation]
    zero_fill = "zero_fill" in steps
    common = dict(GROUP=p.block_size, FP8_MAX=FP8_MAX, EPS=SCALE_EPS, ALPHA=SWIGLUOAI_ALPHA,
                  LIMIT=SWIGLUOAI_LIMIT)

    def w_strides(w_scale):
        # (stride_bse, stride_bsn, stride_bsk) of the weight scales.
        if w_scale is None:
            return 0, 0, 0
        if w_scale.dim() == 1:
            return w_scale.stride(0), 0, 0
        return w_scale.stride(0), w_scale.stride(1), w_scale.stride(2)

    def a_strides(a_scale):
        if a_scale is None or a_scale.dim() != 2:
            return 0, 0
        return a_scale.stride(0), a_scale.stride(1)

    def fn(x, a1_scale, w1, w1_scale, w2, w2_scale, b1, b2, topk_ids, topk_weights, a2_scale,
           sorted_ids, expert_ids, ntpp, cursor, counts, cache1, act_out, cache2, cache2_scale,
           cache3, out):
        if align is None:
            # vLLM fills num_tokens_post_padded on every call of the naive path.
            ntpp.fill_(sorted_len)
            expert_ids = topk_ids
        else:
            align(topk_ids, sorted_ids, expert_ids, ntpp, cursor, counts)
        # GEMM 1: x [M, H] (row = pair // top_k) -> cache1 [pairs, N1]
        K["gemm"][grid1](
            x, w1, cache1, a1_scale, w1_scale, b1, topk_weights, sorted_ids, expert_ids, ntpp,
            N1, H, sorted_len, numel, top_k, 0,
            x.stride(0), x.stride(1), w1.stride(0), w1.stride(1), w1.stride(2),
            cache1.stride(0), cache1.stride(1), *a_strides(a1_scale), *w_strides(w1_scale),
            b1.stride(0) if b1 is not None else 0,
            EVEN_K=H % bk == 0, **gemm_meta)
        # activation over every slot -> act_out [pairs, I] BF16
        K["act_quant"][(numel, act_cols)](
            cache1, act_out, act_out, act_out, topk_ids, I, cache1.stride(0), act_out.stride(0),
            0, E, ACT=act_code, QUANT=0, SKIP=False, BLOCK=act_block, NCHUNK=1,
            num_warps=act_warps, **common)
        a2s = None
        if fp8:
            # its FP8 quantization over every slot -> cache2 [pairs, I] (+ scales)
            a2s = a2_scale if quant == 1 and not dynamic else cache2_scale
            if dynamic:
                cache2_scale.fill_(SCALE_EPS / FP8_MAX)
                tensor_scale_kernel[scale_grid](
                    act_out, cache2_scale, numel, I, act_out.stride(0), FP8_MAX=FP8_MAX,
                    ROWS=_SCALE_ROWS, BLOCK=scale_block)
            K["act_quant"][(numel, q_cols)](
                act_out, cache2, a2s, a2s, topk_ids, I, act_out.stride(0), cache2.stride(0),
                a2s.stride(0) if quant != 1 else 0, E, ACT=ACT_IDENTITY, QUANT=quant,
                SKIP=False, BLOCK=q_block, NCHUNK=q_nchunk, num_warps=q_warps, **common)
        a2 = cache2 if fp8 else act_out
        if zero_fill:
            cache3.zero_()
        # GEMM 2: a2 [pairs, I] -> cache3 [pairs, H], times the routing weight
        K["gemm"][grid2](
            a2, w2, cache3, a2s, w2_scale, b2, topk_weights, sorted_ids, expert_ids, ntpp,
            H, I, sorted_len, numel, 1, 1,
            a2.stride(0), a2.stride(1), w2.stride(0), w2.stride(1), w2.stride(2),
            cache3.stride(0), cache3.stride(1), *a_strides(a2s), *w_strides(w2_scale),
            b2.stride(0) if b2 is not None else 0,
            EVEN_K=I % bk == 0, **gemm_meta)
        # the sum over every top_k slot (global expert ids are all below global_experts)
        K["moe_sum"][sum_grid](cache3, topk_ids, out, H, p.global_experts, TOP_K=top_k,
                               BLOCK=sum_block, num_warps=_SUM_WARPS)
        return out

    args = (inputs["x"], inputs.get("a1_scale"), inputs["w1"], inputs.get("w1_scale"),
            inputs["w2"], inputs.get("w2_scale"), inputs.get("b1"), inputs.get("b2"),
            inputs["topk_ids"], inputs["topk_weights"], inputs.get("a2_scale"),
            sorted_ids, expert_ids, ntpp, cursor, counts, cache1, act_out, cache2, cache2_scale,
            cache3, out)
    return fn, args


def _align_plan(numel: int) -> tuple[str, int, int]:
    """(path, chunk, programs) of the align step for `numel` pairs: "single" (one program does
    all), "split" (one program the offsets, `programs` the scatter) or "multi" (memset, then
    histograms, offsets and scatter)."""
    if numel <= ALIGN_SINGLE_MAX:
        return "single", numel, 1
    if numel <= ALIGN_SPLIT_MAX:
        return "split", _ALIGN_CHUNK, _cdiv(numel, _ALIGN_CHUNK)
    return "multi", _ALIGN_CHUNK, _cdiv(numel, _ALIGN_CHUNK)


def _align_launcher(numel: int, local_experts: int, block_m: int, sorted_len: int,
                    num_blocks: int, e_pad: int) -> Callable:
    """The align step's launches for static sizes (see `_align_plan`)."""
    from .kernels import KERNELS as K

    path, chunk, n_chunks = _align_plan(numel)
    fill_per_prog = _cdiv(sorted_len, n_chunks)
    E = local_experts
    padb = min(block_m, 32)
    scan = min(_ALIGN_SCAN, max(16, _next_pow2(numel)))

    def align(topk_ids, sorted_ids, expert_ids, ntpp, cursor, counts):
        if path in ("single", "split"):
            K["align_single"][(1,)](
                topk_ids, sorted_ids, expert_ids, ntpp, cursor, numel, E, num_blocks,
                BLOCK_M=block_m, E_PAD=e_pad, SCAN=scan, PADB=padb, BCHUNK=64,
                SCATTER=path == "single", num_warps=_ALIGN_WARPS)
            if path == "split":
                K["align_scatter"][(n_chunks,)](
                    topk_ids, cursor, sorted_ids, numel, E, CHUNK=chunk, num_warps=4)
        else:
            counts.zero_()
            K["align_count"][(n_chunks,)](
                topk_ids, counts, sorted_ids, numel, E, sorted_len, fill_per_prog,
                E_PAD=e_pad, CHUNK=chunk, FILL=1024, num_warps=4)
            K["align_offsets"][(1,)](
                counts, cursor, expert_ids, ntpp, E, num_blocks, BLOCK_M=block_m, E_PAD=e_pad,
                BCHUNK=64, num_warps=4)
            K["align_scatter"][(n_chunks,)](
                topk_ids, cursor, sorted_ids, numel, E, CHUNK=chunk, num_warps=4)
        return sorted_ids, expert_ids, ntpp

    return align


def align_only_fn(p: MoeProblem, inputs: dict, block_m: int) -> tuple[Callable, tuple]:
    """(fn, args) of the align step alone; fn returns (sorted_ids, expert_ids, ntpp). For tests."""
    cfg = dict(default_config(p.scheme, p.num_tokens, block=p.block_size), BLOCK_SIZE_M=block_m)
    _, args = make_fused_moe(p, inputs, cfg)
    sorted_ids, expert_ids, ntpp, cursor, counts = args[11:16]
    align = _align_launcher(p.pairs, p.local_experts, block_m, sorted_ids.numel(),
                            expert_ids.numel(), max(16, _next_pow2(p.local_experts)))
    return align, (inputs["topk_ids"], sorted_ids, expert_ids, ntpp, cursor, counts)


def quant_input_fn(p: MoeProblem, inputs: dict) -> tuple[Callable, tuple]:
    """(fn, args) of the FP8 schemes' input quantization of x_bf16 [M, H] for problem `p`
    (`input_quant_fn` with p's scheme, block and scale). fn returns (x_fp8, scales)."""
    if p.scheme not in FP8_SCHEMES:
        raise ValueError(f"scheme={p.scheme!r}: only the FP8 schemes quantize their input")
    static = inputs["a1_scale"] if p.scheme == "fp8_per_tensor" and not p.dynamic_scale else None
    return input_quant_fn(inputs["x_bf16"], p.scheme, block_size=p.block_size, static_scale=static)


def input_quant_fn(x, scheme: str, *, block_size: int = FP8_GROUP,
                   static_scale=None) -> tuple[Callable, tuple]:
    """(fn, args) quantizing a BF16 activation x [rows, cols] as `scheme`'s kernel consumes it.

    fp8_per_tensor: with `static_scale` (fp32 [1]), one Triton kernel; without, vLLM's dynamic
    per-tensor quantization: the scale reset, the amax reduction over the whole tensor, then the
    quantization. fp8_per_token: dynamic per row; fp8_block128: dynamic per 1 x `block_size`
    group. fn returns (x_fp8, scales).
    """
    if scheme not in FP8_SCHEMES:
        raise ValueError(f"scheme={scheme!r}: only the FP8 schemes quantize their input")
    from .kernels import ACT_IDENTITY, QUANT_CODE
    from .kernels import KERNELS as K
    from .scale_kernels import tensor_scale_kernel

    torch = _torch()
    dev = x.device
    M, H = x.shape
    quant = QUANT_CODE[scheme]
    dynamic = quant == 1 and static_scale is None
    xq = torch.empty(M, H, dtype=_fp8(), device=dev)
    if dynamic:
        xs = torch.empty(1, dtype=torch.float32, device=dev)
    elif quant == 1:
        xs = static_scale
    elif quant == 2:
        xs = torch.empty(M, 1, dtype=torch.float32, device=dev)
    else:
        xs = torch.empty(M, _cdiv(H, block_size), dtype=torch.float32, device=dev)
    block, nchunk, cols, warps = _act_launch(quant, H, block_size)
    scale_block = min(_SCALE_BLOCK_MAX, max(16, _next_pow2(H)))

    def fn(x, xq, xs):
        if dynamic:
            xs.fill_(SCALE_EPS / FP8_MAX)
            tensor_scale_kernel[(_cdiv(M, _SCALE_ROWS),)](
                x, xs, M, H, x.stride(0), FP8_MAX=FP8_MAX, ROWS=_SCALE_ROWS, BLOCK=scale_block)
        K["act_quant"][(M, cols)](
            x, xq, xs, xs, x, H, x.stride(0), xq.stride(0), xs.stride(0) if quant != 1 else 0, 0,
            ACT=ACT_IDENTITY, QUANT=quant, SKIP=False, BLOCK=block, NCHUNK=nchunk,
            GROUP=block_size, FP8_MAX=FP8_MAX, EPS=SCALE_EPS, ALPHA=SWIGLUOAI_ALPHA,
            LIMIT=SWIGLUOAI_LIMIT, num_warps=warps)
        return xq, xs

    return fn, (x, xq, xs)
