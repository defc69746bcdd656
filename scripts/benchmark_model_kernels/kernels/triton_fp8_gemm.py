"""Block-scaled FP8 dense GEMM in Triton: the kernel vLLM runs on Hopper for 128x128 checkpoints.

DeepSeek-V3 / Qwen3-FP8 style checkpoints (`weight_block_size: [128, 128]`) store each weight as
e4m3 with one fp32 scale per 128x128 block. When no CUTLASS / DeepGEMM path applies, vLLM's
`W8A8BlockFp8LinearOp` quantizes the bf16 activation per token and per 128-wide group
(`per_token_group_quant_fp8`, row-major fp32 scales) and runs the Triton kernel
`_w8a8_triton_block_scaled_mm` (vllm/model_executor/layers/quantization/utils/fp8_utils.py).
This module is the project's own implementation of that published algorithm:

    Y[M, N] (bf16) = (Xq[M, K] * xs[M, K/128]) @ (Wq[N, K] * ws[ceil(N/128), K/128])^T

* the GEMM walks K in 128-wide tiles (BLOCK_SIZE_K = the group size), so each tile has exactly one
  activation scale per row and one weight scale per column; the fp32 accumulator takes
  `dot(a, b) * a_s[:, None] * b_s[None, :]` per tile; program ids are grouped along M
  (GROUP_SIZE_M) for L2 reuse of weight tiles; out-of-range rows/columns wrap (`% M`, `% N`) so
  loads need no masks and only the store is masked.
* K must be a multiple of 128 (vLLM's activation quantizer asserts it); N need not be (its weight
  scales have ceil(N/128) rows: a merged projection such as DeepSeek's fused_qkv_a_proj,
  N = 1536 + 576 = 2112, ends in a partial block).
* the quantizer: absmax = max(max|x_group|, 1e-10); scale = absmax / 448; q = e4m3(clamp(x /
  scale)), divisions IEEE-rounded (`div_rn`) and the e4m3 rounding (nearest, ties to even) done
  explicitly before the cast, so it matches `quantize_groups_torch` (and torch's cast) bit for bit.

Torch and the kernels (`triton_fp8_gemm_kernels`, which imports Triton) are imported lazily: this
module imports on a CPU machine without either. Every GPU tensor reaches the kernels through the
returned argument tuples (never a closure), and the callables do no allocation and no host
synchronisation, so they can be captured in a CUDA graph.
Tiles are searched and cached with `kernels/triton_tuning.py` (`config_space`, `check_config` and
`config_cache_key` here are this kernel's inputs to it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from . import triton_tuning
from .triton_tuning import CONFIG_KEYS, SMEM_BUDGET_BYTES

__all__ = ["CONFIG_KEYS"]  # with the public names below; CONFIG_KEYS is triton_tuning's

#: Quantization group / weight block edge (vLLM's `weight_block_size: [128, 128]`).
GROUP = 128
#: Largest finite float8_e4m3fn value (torch.finfo(torch.float8_e4m3fn).max).
FP8_MAX = 448.0
#: vLLM's per_token_group_quant_fp8 default `eps` (floor of a group's absmax).
EPS = 1e-10
#: Groups one quantizer program handles (a [GROUPS_PER_PROGRAM, 128] tile).
GROUPS_PER_PROGRAM = 8


# ---------------------------------------------------------------------------- problem


@dataclass(frozen=True)
class BlockFp8Problem:
    """One dense GEMM: M tokens, N output features, K input features (K % 128 == 0)."""

    m: int
    n: int
    k: int

    def __post_init__(self):
        for name in ("m", "n", "k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}={value!r}: expected a positive int")
            if value <= 0:
                raise ValueError(f"{name}={value}: expected a positive int")
        if self.k % GROUP:
            raise ValueError(
                f"k={self.k}: must be a multiple of {GROUP} (vLLM's per_token_group_quant_fp8 "
                f"asserts K % group_size == 0)"
            )

    @property
    def n_blocks(self) -> int:
        """Rows of the weight scale: ceil(N / 128)."""
        return -(-self.n // GROUP)

    @property
    def k_groups(self) -> int:
        """Columns of both scales: K / 128."""
        return self.k // GROUP

    def weight_bytes(self) -> int:
        """HBM bytes of the e4m3 weight and its fp32 block scales."""
        return self.n * self.k + self.n_blocks * self.k_groups * 4

    def activation_bytes(self) -> int:
        """HBM bytes of Xq (e4m3), xs (fp32) read and Y (bf16) written."""
        return self.m * self.k + self.m * self.k_groups * 4 + self.m * self.n * 2


# ---------------------------------------------------------------------------- torch side


def _ieee_div(t, divisor: float):
    """t / divisor correctly rounded on every device. (On CUDA, torch turns a division by a
    Python scalar into a multiplication by its rounded reciprocal, one ulp off for about half the
    scales; vLLM's CUDA quantizer and this module's kernel divide.)"""
    import torch  # lazy: this module imports on a CPU machine without torch

    return t / torch.full_like(t, divisor)


def quantize_groups_torch(x):
    """(e4m3 [M, K], fp32 [M, K/128]): per-token, per-128-group quantization, in torch.

    The reference for the Triton quantizer; also how `build_inputs` makes xq/xs.
    """
    import torch  # lazy: this module imports on a CPU machine without torch

    rows, cols = x.shape
    if cols % GROUP:
        raise ValueError(f"K={cols}: must be a multiple of {GROUP}")
    g = x.float().reshape(rows, cols // GROUP, GROUP)
    scale = _ieee_div(g.abs().amax(dim=-1).clamp(min=EPS), FP8_MAX)
    q = (g / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(rows, cols), scale.contiguous()


def quantize_blocks_torch(w):
    """(e4m3 [N, K], fp32 [ceil(N/128), K/128]): per-128x128-block weight quantization."""
    import torch  # lazy: this module imports on a CPU machine without torch

    n, k = w.shape
    if k % GROUP:
        raise ValueError(f"K={k}: must be a multiple of {GROUP}")
    nb = -(-n // GROUP)
    padded = torch.zeros(nb * GROUP, k, dtype=torch.float32, device=w.device)
    padded[:n] = w.float()
    blocks = padded.reshape(nb, GROUP, k // GROUP, GROUP)
    scale = _ieee_div(blocks.abs().amax(dim=(1, 3)).clamp(min=EPS), FP8_MAX)
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(nb * GROUP, k)[:n].contiguous(), scale.contiguous()


def dequantize(xq, xs, wq, ws):
    """(X fp32 [M, K], W fp32 [N, K]) rebuilt from the quantized values and their scales."""
    x = xq.float() * xs.repeat_interleave(GROUP, dim=1)
    w_scale = ws.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)
    w = wq.float() * w_scale[: wq.shape[0]]
    return x, w


def build_inputs(p: BlockFp8Problem, device, seed: int = 0) -> dict:
    """Seeded inputs: x bf16 [M, K]; xq/xs and wq/ws quantized from seeded random bf16.

    Each activation group and each weight block gets its own magnitude (2**U(-3, 3)) so that the
    scales differ from block to block and a kernel that reads the wrong scale fails the check.
    Also returns `out`, the bf16 [M, N] buffer the GEMM writes.
    """
    import torch  # lazy: this module imports on a CPU machine without torch

    gen = torch.Generator(device=device).manual_seed(seed)

    def spread(rows, cols):
        return torch.exp2(torch.rand(rows, cols, device=device, generator=gen) * 6.0 - 3.0)

    x = torch.randn(p.m, p.k, device=device, generator=gen)
    x = (x * spread(p.m, p.k_groups).repeat_interleave(GROUP, dim=1)).to(torch.bfloat16)
    w = torch.randn(p.n, p.k, device=device, generator=gen) * 0.02
    w_mag = spread(p.n_blocks, p.k_groups).repeat_interleave(GROUP, 0).repeat_interleave(GROUP, 1)
    w = (w * w_mag[: p.n]).to(torch.bfloat16)
    xq, xs = quantize_groups_torch(x)
    wq, ws = quantize_blocks_torch(w)
    del w, w_mag
    out = torch.empty(p.m, p.n, dtype=torch.bfloat16, device=device)
    return {"x": x, "xq": xq, "xs": xs, "wq": wq, "ws": ws, "out": out}


def reference(p: BlockFp8Problem, inputs: dict):
    """fp32 [M, N] product of the dequantized inputs (what the kernel approximates in bf16)."""
    import torch  # lazy: this module imports on a CPU machine without torch

    x, w = dequantize(inputs["xq"], inputs["xs"], inputs["wq"], inputs["ws"])
    if x.is_cuda:  # fp32 reference: no TF32 whatever the process default
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            return x @ w.T
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
    return x @ w.T


# ---------------------------------------------------------------------------- Triton launches


def check_config(config: dict) -> dict:
    """The config as a plain dict of ints, or ValueError naming what is wrong.

    Also the `check` to give `triton_tuning.load_cached_config` / `store_config` for this kernel.
    """
    config = triton_tuning.check_config(config)
    if config["BLOCK_SIZE_K"] != GROUP:
        raise ValueError(f"config BLOCK_SIZE_K={config['BLOCK_SIZE_K']}: must be {GROUP}, the group size")
    for key in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "num_warps"):
        if config[key] & (config[key] - 1):
            raise ValueError(f"config {key}={config[key]}: must be a power of two")
    if config["BLOCK_SIZE_M"] < 16 or config["BLOCK_SIZE_N"] < 16:
        raise ValueError("config BLOCK_SIZE_M and BLOCK_SIZE_N must be >= 16 (tl.dot minimum)")
    return config


def _grid(p: BlockFp8Problem, config: dict) -> tuple[int]:
    return (-(-p.m // config["BLOCK_SIZE_M"]) * -(-p.n // config["BLOCK_SIZE_N"]),)


def _check_tensors(p: BlockFp8Problem, xq, xs, wq, ws, out) -> None:
    import torch  # lazy: this module imports on a CPU machine without torch

    expected = {
        "xq": (xq, (p.m, p.k), torch.float8_e4m3fn),
        "xs": (xs, (p.m, p.k_groups), torch.float32),
        "wq": (wq, (p.n, p.k), torch.float8_e4m3fn),
        "ws": (ws, (p.n_blocks, p.k_groups), torch.float32),
        "out": (out, (p.m, p.n), torch.bfloat16),
    }
    if out.dtype == torch.float32:  # allowed: the fp32 accumulator, unrounded (for tests)
        expected["out"] = (out, (p.m, p.n), torch.float32)
    for name, (t, shape, dtype) in expected.items():
        if tuple(t.shape) != shape or t.dtype != dtype:
            raise ValueError(f"{name}: {tuple(t.shape)} {t.dtype}, expected {shape} {dtype}")
        if t.stride(-1) != 1:
            raise ValueError(f"{name}: last dimension must be contiguous")


def make_block_fp8_gemm(p: BlockFp8Problem, inputs: dict, config: dict) -> tuple[Callable, tuple]:
    """(fn, args): fn(*args) runs the GEMM alone on pre-quantized xq/xs and returns `out`.

    args = (xq, xs, wq, ws, out) from `inputs`; `out` is bf16 (what vLLM writes) or fp32.
    """
    config = check_config(config)
    args = (inputs["xq"], inputs["xs"], inputs["wq"], inputs["ws"], inputs["out"])
    _check_tensors(p, *args)
    from .triton_fp8_gemm_kernels import block_fp8_gemm_kernel as kernel

    grid = _grid(p, config)
    meta = dict(config)
    num_warps, num_stages = meta.pop("num_warps"), meta.pop("num_stages")
    m, n, k = p.m, p.n, p.k

    def block_fp8_gemm(xq, xs, wq, ws, out):
        kernel[grid](
            xq, wq, out, xs, ws, m, n, k,
            xq.stride(0), wq.stride(0), out.stride(0), xs.stride(0), ws.stride(0),
            GROUP_K=GROUP, GROUP_N=GROUP, num_warps=num_warps, num_stages=num_stages, **meta,
        )
        return out

    return block_fp8_gemm, args


def quant_input_fn(p: BlockFp8Problem, inputs: dict) -> tuple[Callable, tuple]:
    """(fn, args): fn(x, xq, xs) quantizes x per 1x128 group into xq/xs (the "+quant" twin)."""
    import torch  # lazy: this module imports on a CPU machine without torch

    x, xq, xs = inputs["x"], torch.empty_like(inputs["xq"]), torch.empty_like(inputs["xs"])
    if tuple(x.shape) != (p.m, p.k) or x.stride(-1) != 1:
        raise ValueError(f"x: {tuple(x.shape)}, expected ({p.m}, {p.k}) with contiguous rows")
    from .triton_fp8_gemm_kernels import group_quant_kernel as kernel

    grid = (p.m, -(-p.k_groups // GROUPS_PER_PROGRAM))
    n_groups = p.k_groups

    def quant_groups(x, xq, xs):
        kernel[grid](
            x, xq, xs, n_groups, x.stride(0), xq.stride(0), xs.stride(0),
            FP8_MAX=FP8_MAX, EPS=EPS, GROUP=GROUP, GROUPS=GROUPS_PER_PROGRAM, num_warps=4,
        )
        return xq, xs

    return quant_groups, (x, xq, xs)


# ---------------------------------------------------------------------------- configs


def smem_bytes(config: dict) -> int:
    """Pipelined shared memory of one program: num_stages copies of the A and B e4m3 tiles."""
    return (config["BLOCK_SIZE_M"] + config["BLOCK_SIZE_N"]) * config["BLOCK_SIZE_K"] * config["num_stages"]


def _cfg(bm, bn, group_m, warps, stages) -> dict:
    return {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": GROUP,
            "GROUP_SIZE_M": group_m, "num_warps": warps, "num_stages": stages}


def config_space(m: int) -> list[dict]:
    """Candidate configs for M tokens (20-40 of them), after vLLM's tuned H100/H200 tables.

    Small M is weight-bandwidth bound: BLOCK_SIZE_M = 16 (the tl.dot minimum), narrow N tiles
    for enough programs to fill 132 SMs, deep pipelines. Larger M gets wider tiles. Every
    config fits SMEM_BUDGET_BYTES; BLOCK_SIZE_M never exceeds max(16, next_pow2(M)).
    """
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
        raise ValueError(f"m={m!r}: expected a positive int")
    if m <= 16:
        space = [_cfg(16, bn, 1, w, s) for bn in (32, 64, 128) for s in (2, 3, 4, 5) for w in (4, 8)]
    elif m <= 64:
        bms = [bm for bm in (16, 32, 64) if bm <= max(16, 1 << (m - 1).bit_length())]
        space = [_cfg(bm, bn, 32, 4, s) for bm in bms for bn in (32, 64, 128) for s in (3, 4, 5)]
        space += [_cfg(bms[-1], 128, 32, 8, s) for s in (3, 4)]
    else:
        # Wide tiles need 8 warps (a 4-warp 128x128 fp32 accumulator spills).
        space = [_cfg(bm, bn, 8, w, s) for bm in (64, 128) for bn in (64, 128, 256)
                 for s in (3, 4, 5) for w in (4, 8)
                 if not (bm * bn >= 128 * 128 and w == 4)]
    return [c for c in space if smem_bytes(c) <= SMEM_BUDGET_BYTES]


def default_config(m: int, n: int, k: int) -> dict:
    """A config from `config_space(m)` picked without timing (used before/without a search)."""
    BlockFp8Problem(m, n, k)
    if m <= 16:
        # Enough N tiles to cover the 132 SMs of an H100/H200 when N allows.
        bn = 64 if -(-n // 64) >= 132 else 32
        return _cfg(16, bn, 1, 4, 4)
    if m <= 64:
        return _cfg(min(64, max(16, 1 << (m - 1).bit_length())), 64, 32, 4, 3)
    return _cfg(64, 128, 8, 4, 3)


# ---------------------------------------------------------------------------- config cache key


def m_bucket(m: int) -> int:
    """Power-of-two bucket of M (1, 2, 4, ... ): the cache shares a config within a bucket."""
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
        raise ValueError(f"m={m!r}: expected a positive int")
    return 1 << (m - 1).bit_length()


def config_cache_key(gpu_name: str, m: int, n: int, k: int, triton_version: str) -> str:
    """File-name-safe key (gpu name, m bucket, n, k, triton version) for the config cache."""
    gpu = re.sub(r"[^A-Za-z0-9.-]+", "_", str(gpu_name)).strip("_") or "gpu"
    ver = re.sub(r"[^A-Za-z0-9.+-]+", "_", str(triton_version)) or "unknown"
    return f"block_fp8_gemm,gpu={gpu},m={m_bucket(m)},n={int(n)},k={int(k)},triton={ver}"
