"""The fused MoE's tile configs: vLLM's own choice, the search space, validation, cache keys.

In: a scheme and the shape's token count (with top_k and local experts, the expected pairs per
expert); out: config dicts of `triton_tuning.CONFIG_KEYS`. `vllm_config` is the config vLLM's
Triton MoE runs the problem with on a named GPU (its shipped table or its default,
vllm_rules/moe_triton.py), as its kernel launch uses it. The search itself and the JSON cache
are `kernels/triton_tuning.py`'s (`search_config`, `load_cached_config`, `store_config`); this
module's `config_key` names a shape's cache entry.
"""

from __future__ import annotations

from ...vllm_rules import moe_triton
from ..triton_tuning import CONFIG_KEYS, SMEM_BUDGET_BYTES
from .problem import FP8_GROUP, FP8_SCHEMES, SCHEMES, MoeProblem, _next_pow2

__all__ = ["CONFIG_KEYS", "config_key", "config_space", "default_config", "token_bucket",
           "validate_config", "vllm_config"]

def _smem_bytes(cfg: dict, elem_bytes: int) -> int:
    bm, bn, bk = cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"]
    return cfg["num_stages"] * (bm * bk + bk * bn) * elem_bytes


def validate_config(config: dict, scheme: str, block: int = FP8_GROUP) -> dict:
    """A copy of `config` with exactly CONFIG_KEYS as ints; ValueError naming the bad key.
    fp8_block128 with `block` x `block` scale blocks: BLOCK_SIZE_K must divide `block` (one scale
    per K step); any BLOCK_SIZE_N works (the kernel reads a scale per output column)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}: expected one of {', '.join(SCHEMES)}")
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks {', '.join(missing)}")
    out = {}
    for k in CONFIG_KEYS:
        v = config[k]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"config {k}={v!r}: expected a positive int")
        out[k] = v
    for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps"):
        if out[k] & (out[k] - 1):
            raise ValueError(f"config {k}={out[k]}: expected a power of two")
    for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
        if out[k] < 16:
            raise ValueError(f"config {k}={out[k]}: tl.dot needs >= 16")
    if scheme == "fp8_block128" and block % out["BLOCK_SIZE_K"]:
        raise ValueError(f"config BLOCK_SIZE_K={out['BLOCK_SIZE_K']}: fp8_block128 applies one "
                         f"scale per {block}-wide K group, so it must divide {block}")
    return out


def _tokens_per_expert(num_tokens: int, top_k: int | None, local_experts: int | None) -> float:
    if top_k and local_experts:
        return num_tokens * top_k / local_experts
    return float(num_tokens)


def _block_m_candidates(tpe: float) -> tuple[int, ...]:
    """BLOCK_SIZE_M worth trying for ~`tpe` pairs per expert (decode: 16 only)."""
    if tpe <= 12:
        return (16,)
    if tpe <= 24:
        return (16, 32)
    if tpe <= 96:
        return (16, 32, 64)
    if tpe <= 384:
        return (32, 64, 128)
    return (64, 128, 256)


#: (BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages) tried with BLOCK_SIZE_M <= 32, most
#: promising first (vLLM's tuned H100/H200 tables for small batches sit in this set).
_DECODE_TILES = (
    (64, 128, 4, 3), (64, 64, 4, 5), (128, 128, 4, 2), (256, 128, 8, 2), (64, 128, 4, 4),
    (128, 128, 4, 3), (64, 256, 4, 2), (128, 64, 4, 4), (32, 128, 4, 4), (256, 64, 4, 3),
    (128, 256, 4, 2), (64, 64, 4, 4), (128, 128, 8, 3), (64, 256, 4, 3), (256, 128, 4, 2),
    (128, 64, 4, 5), (32, 128, 4, 3), (64, 128, 4, 2), (256, 64, 8, 4), (128, 256, 8, 2),
    (128, 128, 4, 4), (256, 128, 8, 3),
)
#: The same for BLOCK_SIZE_M >= 64 (compute starts to matter: bigger N tiles, 8 warps).
_PREFILL_TILES = (
    (128, 64, 4, 3), (256, 64, 8, 4), (128, 128, 4, 3), (256, 128, 8, 3), (128, 64, 8, 4),
    (64, 128, 4, 3), (256, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 4), (128, 128, 4, 2),
    (256, 128, 8, 2), (128, 64, 4, 4), (256, 64, 4, 3), (64, 64, 4, 3),
)
#: fp8_block128: BLOCK_SIZE_K is the 128 of the scale blocks, BLOCK_SIZE_N divides 128.
_BLOCK128_TILES = (
    (128, 128, 4, 3), (64, 128, 4, 3), (128, 128, 4, 2), (64, 128, 4, 4), (128, 128, 8, 3),
    (32, 128, 4, 4), (64, 128, 4, 5), (128, 128, 4, 4), (32, 128, 4, 3), (64, 128, 4, 2),
    (128, 128, 8, 2), (32, 128, 4, 5), (128, 128, 8, 4), (64, 128, 8, 3), (32, 128, 4, 2),
    (128, 128, 4, 5),
)
#: Most configs one search tries (keeps one shape's search well under ~20 s on an H200).
MAX_SEARCH_CONFIGS = 48


def config_space(scheme: str, num_tokens: int, *, top_k: int | None = None,
                 local_experts: int | None = None, block: int = FP8_GROUP) -> list[dict]:
    """Pruned vLLM tuner space (benchmarks/kernels/benchmark_moe.py) for one shape, <= 49 configs.

    vLLM sweeps BLOCK_SIZE_M 16..256 x N 32..256 x K 64..256 x GROUP_SIZE_M 1..64 x 4/8 warps x
    2..5 stages. This keeps the BLOCK_SIZE_M values that fit the expected pairs per expert
    (num_tokens*top_k/local_experts when both are given, else num_tokens; decode gets BM 16
    only), and per BLOCK_SIZE_M the first (N, K, warps, stages) of a ranked list, within the
    shared-memory budget; GROUP_SIZE_M is 1, plus 16 when there are many M blocks per expert.
    With top_k and local_experts given, `default_config` of the shape is always included.
    fp8_block128 keeps BLOCK_SIZE_K = min(128, block) and BLOCK_SIZE_N in {32, 64, 128}.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}: expected one of {', '.join(SCHEMES)}")
    if num_tokens < 1:
        raise ValueError(f"num_tokens={num_tokens}: expected >= 1")
    tpe = _tokens_per_expert(num_tokens, top_k, local_experts)
    elem = 2 if scheme == "bf16" else 1
    block_ms = _block_m_candidates(tpe)
    groups = (1, 16) if tpe > 96 else (1,)
    per_bm = MAX_SEARCH_CONFIGS // len(block_ms)
    out: list[dict] = []
    for bm in block_ms:
        if scheme == "fp8_block128":
            tiles = _BLOCK128_TILES
        else:
            tiles = _DECODE_TILES if bm <= 32 else _PREFILL_TILES
        taken = 0
        for bn, bk, warps, stages in tiles:
            if scheme == "fp8_block128":
                bk = min(bk, block)
            for group in groups:
                cfg = dict(zip(CONFIG_KEYS, (bm, bn, bk, group, warps, stages), strict=True))
                if taken >= per_bm or _smem_bytes(cfg, elem) > SMEM_BUDGET_BYTES or cfg in out:
                    continue
                out.append(cfg)
                taken += 1
    if top_k and local_experts:
        dflt = default_config(scheme, num_tokens, top_k=top_k, local_experts=local_experts,
                              block=block)
        if dflt not in out:
            out.insert(0, dflt)
    return out


def default_config(scheme: str, num_tokens: int, *, top_k: int | None = None,
                   local_experts: int | None = None, block: int = FP8_GROUP) -> dict:
    """vLLM-like fallback when nothing is tuned: small tiles for decode, big ones for prefill.

    Picked from the shape of vLLM's tuned H200 table for E=128, N=768 (Qwen3-30B-A3B): BM 16 /
    BN 64 / BK 128 while pairs per expert are few, BM 64 / BN 128 / BK 64 in the middle,
    BM 128 / BN 256 / BK 64 / 8 warps beyond. fp8_block128 keeps BK and BN at the block
    (vLLM's block-quant default).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}: expected one of {', '.join(SCHEMES)}")
    tpe = _tokens_per_expert(num_tokens, top_k, local_experts)
    if scheme == "fp8_block128":
        bm = 16 if tpe <= 16 else 32 if tpe <= 48 else 64
        vals = (bm, block, block, 1 if tpe <= 48 else 32, 4, 3)
    elif tpe <= 16:
        vals = (16, 64, 128, 1, 4, 3)
    elif tpe <= 96:
        vals = (64, 128, 64, 1, 4, 3)
    else:
        vals = (128, 256, 64, 16, 8, 4)
    return dict(zip(CONFIG_KEYS, vals, strict=True))


# ---------------------------------------------------------------------------- cache key


def token_bucket(num_tokens: int) -> int:
    """Power-of-two bucket (next >= num_tokens) that a tuned config is reused for."""
    return _next_pow2(max(1, num_tokens))


def config_key(p: MoeProblem, gpu_name: str, triton_version: str) -> str:
    """Stable cache key of one tuned shape (a refined FP8 block and a dynamic per-tensor scale
    are part of the shape)."""
    gpu = "_".join(gpu_name.split())
    block = f"|block={p.block_size}" if p.block_size != FP8_GROUP else ""
    scale = "|scale=dynamic" if p.dynamic_scale else ""
    return (f"gpu={gpu}|scheme={p.scheme}{block}{scale}|E_local={p.local_experts}"
            f"|E_global={p.global_experts}|H={p.hidden}|I={p.intermediate}|top_k={p.top_k}"
            f"|tokens={token_bucket(p.num_tokens)}|act={p.activation}|bias={int(p.has_bias)}"
            f"|triton={triton_version}")


# ---------------------------------------------------------------------------- vLLM's tiles

#: The smallest BLOCK_SIZE_M this kernel's tl.dot takes. vLLM's kernel swaps A and B for FP8
#: tiles under 64 rows on Hopper (fused_moe.py: enable_swap_ab), which lets some of its shipped
#: block-FP8 tables use 8.
MIN_BLOCK_M = 16


def vllm_call(p: MoeProblem) -> moe_triton.TritonMoeCall:
    """What vLLM's try_get_optimal_moe_config reads of this problem's call."""
    fp8 = p.scheme in FP8_SCHEMES
    block = (p.block_size, p.block_size) if p.scheme == "fp8_block128" else None
    return moe_triton.TritonMoeCall(p.num_tokens, p.hidden, p.intermediate, p.local_experts,
                                    p.top_k, moe_triton.FP8_W8A8 if fp8 else None, block)


def vllm_config(p: MoeProblem, device_name: str) -> tuple[dict, str]:
    """(config, note): the tiles vLLM's Triton MoE runs `p` with on a GPU named `device_name`, as
    its launch applies them (fused_moe.py: invoke_fused_moe_triton_kernel: BLOCK_SIZE_K at most
    the block of block-quantized weights), and where they come from. A BLOCK_SIZE_M under
    MIN_BLOCK_M runs at MIN_BLOCK_M, and a launch key this kernel does not take is left out;
    the note says so."""
    choice = moe_triton.vllm_tiles(vllm_call(p), device_name)
    config = {k: choice.config[k] for k in CONFIG_KEYS}
    notes = [choice.describe()]
    if p.scheme == "fp8_block128":
        config["BLOCK_SIZE_K"] = min(config["BLOCK_SIZE_K"], p.block_size)
    if config["BLOCK_SIZE_M"] < MIN_BLOCK_M:
        notes.append(f"its BLOCK_SIZE_M {config['BLOCK_SIZE_M']} (vLLM swaps A and B for it on "
                     f"Hopper) runs here as {MIN_BLOCK_M}")
        config["BLOCK_SIZE_M"] = MIN_BLOCK_M
    other = {k: v for k, v in choice.config.items() if k not in CONFIG_KEYS and v != 1}
    if other:
        notes.append("not applied: " + ", ".join(f"{k}={v}" for k, v in sorted(other.items())))
    return validate_config(config, p.scheme, p.block_size), "; ".join(notes)
