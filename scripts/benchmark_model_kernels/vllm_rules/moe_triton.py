"""vLLM's Triton fused-MoE choices a timed row follows: its tile config and its FP8 block shape.

Tiles (vLLM 0.33.0, vllm/model_executor/layers/fused_moe/fused_moe.py): `fused_experts_impl` asks
`try_get_optimal_moe_config(w1.size(), w2.size(), top_k, config_dtype, M, block_shape)` with
E = w2.size(0) (this rank's local experts), N = w2.size(2) (the per-rank intermediate size) and
M = hidden_states.size(0), the tokens of the call (under EP the M x EP/TP tokens the layer
receives). When vLLM ships `configs/<get_config_file_name(E, N, dtype, block_shape)>` the entry of
the M key nearest M is taken, else `get_default_config`; the file name, the nearest-key rule and
the default config are `moe_config_files.py`'s. No `VLLM_TUNED_CONFIG_FOLDER`, no override config,
`VLLM_BATCH_INVARIANT` off, CUDA (not ROCm). The shipped tables for NVIDIA GPUs are carried in
`moe_triton_configs.json` (written from an installed vLLM by benchmarks/vllm_tile_tables.py), so
the GPU machine picks vLLM's tiles without vLLM, from its own device name; a table this file does
not carry is one vLLM does not ship.

FP8 block shape (vllm/model_executor/layers/fused_moe/oracle/fp8.py: refine_fp8_moe_block_shape,
resolve_fp8_moe_weight_block_shape with the default moe_backend "auto"): a checkpoint's
[block_n, block_k] scales whose TP shard of the intermediate size they do not divide are refined
to the square block gcd(block_n, block_k, intermediate, hidden) when that is >= 32, which only
vLLM's Triton MoE consumes; with no such block vLLM refuses the shard
(quantization/utils/fp8_utils.py: validate_fp8_block_shape_moe).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from . import moe_config_files as files

#: The six keys of a tile config, in the order a row of the carried tables stores them.
CONFIG_KEYS = files.TILE_KEYS
#: `_get_config_dtype_str` (fused_moe/config.py) for the FP8 W8A8 schemes; BF16 gives None.
FP8_W8A8 = "fp8_w8a8"
_TABLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "moe_triton_configs.json")


def tables_vllm_version() -> str:
    """The vLLM release the carried tables were copied from."""
    return str(files.carried_tables(_TABLES)["vllm_version"])


@dataclass(frozen=True)
class TritonMoeCall:
    """What `try_get_optimal_moe_config` reads of one rank's `fused_experts_impl` call."""

    num_tokens: int
    """M: hidden_states.size(0), the tokens this rank's layer receives."""
    hidden: int
    """K of GEMM 1: w1.size(2)."""
    intermediate: int
    """N of the file name: w2.size(2), the per-rank (padded) intermediate size."""
    local_experts: int
    """E of the file name: w2.size(0)."""
    top_k: int
    dtype: str | None
    """`FP8_W8A8` for the FP8 schemes, None for BF16."""
    block_shape: tuple[int, int] | None = None
    """[block_n, block_k] of block-quantized FP8 weights (after vLLM's refinement), else None."""


@dataclass(frozen=True)
class TileChoice:
    """The config vLLM's Triton MoE runs a call with, and where it came from."""

    config: dict[str, int]
    """The six tile keys (and any other launch key of a shipped entry) vLLM runs the call with;
    a default config's SPLIT_K is left out (vLLM sets it to 1 for every call)."""
    file_name: str
    """The file vLLM looks for (`get_config_file_name`)."""
    m_key: int | None
    """The M key of the shipped table whose entry was taken; None: no table, the default config."""

    def describe(self) -> str:
        version = tables_vllm_version()
        if self.m_key is None:
            return f"vLLM {version} get_default_config (vLLM ships no {self.file_name})"
        return f"vLLM {version} shipped {self.file_name}, M key {self.m_key}"


def config_file_name(call: TritonMoeCall, device_name: str) -> str:
    """fused_moe.py: get_config_file_name for this call on a GPU named `device_name`."""
    return files.config_file_name(call.local_experts, call.intermediate, device_name, call.dtype,
                                  call.block_shape)


def shipped_table(file_name: str) -> tuple[tuple[int, dict[str, int]], ...] | None:
    """vLLM's shipped table of that name as (M key, config) in the file's order; None when vLLM
    ships none (the carried tables hold every NVIDIA table a BF16 or FP8 W8A8 row can ask for)."""
    return files.carried_table(_TABLES, file_name)


def default_config(call: TritonMoeCall) -> dict[str, int]:
    """fused_moe.py: get_default_config for this call (CUDA, its SPLIT_K left out)."""
    return files.default_config(call.num_tokens, call.local_experts, call.intermediate, call.hidden,
                                call.top_k, call.dtype, call.block_shape)


def vllm_tiles(call: TritonMoeCall, device_name: str) -> TileChoice:
    """try_get_optimal_moe_config for this call on a GPU named `device_name`: the shipped table's
    nearest-M entry, else the default config."""
    name = config_file_name(call, device_name)
    table = shipped_table(name)
    if table is None:
        return TileChoice(default_config(call), name, None)
    configs = dict(table)
    m_key = files.nearest_key(list(configs), call.num_tokens)
    return TileChoice(dict(configs[m_key]), name, m_key)


def refined_block_shape(block_shape: tuple[int, int], intermediate: int, hidden: int,
                        moe_tp_size: int) -> tuple[int, int] | None:
    """oracle/fp8.py: refine_fp8_moe_block_shape: the finer square block vLLM refines a
    checkpoint's block scales to when they cannot be sharded exactly (None: no refinement needed,
    or none of at least 32 exists). `intermediate` is the per-rank shard, `moe_tp_size` the MoE's
    TP size (1 under EP)."""
    block_n, block_k = block_shape
    if intermediate % block_n == 0 and (moe_tp_size == 1 or intermediate % block_k == 0):
        return None
    refine = math.gcd(block_n, block_k, intermediate, hidden)
    return None if refine < 32 else (refine, refine)


def square_block_for_shard(block: int, intermediate: int, hidden: int) -> int | None:
    """The square FP8 block vLLM runs a checkpoint of `block` x `block` scales at for a rank whose
    intermediate shard is `intermediate`: `block` when it divides the shard, vLLM's refined block
    when it does not, None when vLLM refuses the shard. With square blocks the MoE's TP size drops
    out of `refined_block_shape`, so the shard alone decides."""
    if intermediate % block == 0:
        return block
    refined = refined_block_shape((block, block), intermediate, hidden, 2)
    return refined[0] if refined else None


__all__ = ["CONFIG_KEYS", "FP8_W8A8", "TileChoice", "TritonMoeCall", "config_file_name",
           "default_config", "refined_block_shape", "shipped_table", "square_block_for_shard",
           "tables_vllm_version", "vllm_tiles"]
