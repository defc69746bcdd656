"""vLLM's tiles for its Triton block-FP8 dense GEMM, the last fallback of its block-FP8 linear chain.

vLLM 0.33.0, vllm/model_executor/layers/quantization/utils/fp8_utils.py: `w8a8_triton_block_scaled_mm`
runs `_w8a8_triton_block_scaled_mm` with M = A.numel() // A.shape[-1] (the call's tokens) and
(N, K) = B.shape. Its tiles come from `get_w8a8_block_fp8_configs(N, K, block_n, block_k)`: the
file `configs/N={N},K={K},device_name={device},dtype=fp8_w8a8,block_shape=[{block_n},{block_k}].json`
with the device spelled by vllm/utils/platform_utils.py `get_device_name_as_file_name` (blanks and
slashes as "_", without the fused MoE's H200 rule), the entry of the M key nearest M taken (the first
of two equally near: `min(configs.keys(), key=lambda x: abs(x - M))`); without the file, its default
config {BLOCK_SIZE_M 64, BLOCK_SIZE_N block_n, BLOCK_SIZE_K block_k, GROUP_SIZE_M 32, num_warps 4,
num_stages 2}. Assumed: CUDA (not ROCm's gfx1250 upcast), `VLLM_BATCH_INVARIANT` off (it forces the
default). vLLM's NVIDIA tables of 128x128 blocks are carried in `block_fp8_gemm_configs.json`
(written from an installed vLLM by benchmarks/vllm_tile_tables.py); a table it does not carry is
one vLLM does not ship.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from . import moe_config_files as files

#: The six keys of a tile config, in the order a row of the carried tables stores them.
CONFIG_KEYS = files.TILE_KEYS
#: [block_n, block_k] of the checkpoints this tool's block-FP8 rows take (weight_block_size).
BLOCK_SHAPE = files.FP8_BLOCK_SHAPE
_TABLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "block_fp8_gemm_configs.json")


def tables_vllm_version() -> str:
    """The vLLM release the carried tables were copied from."""
    return str(files.carried_tables(_TABLES)["vllm_version"])


def config_file_name(n: int, k: int, device_name: str, block_shape: tuple[int, int] = BLOCK_SHAPE) -> str:
    """get_w8a8_block_fp8_configs's file name for an N x K weight on a GPU named `device_name` (the
    name NVML gives).

    >>> config_file_name(1536, 7168, "NVIDIA H200")
    'N=1536,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json'
    """
    device = re.sub(r"[\s/]+", "_", device_name)
    block_n, block_k = block_shape
    return f"N={n},K={k},device_name={device},dtype=fp8_w8a8,block_shape=[{block_n},{block_k}].json"


def default_config(block_shape: tuple[int, int] = BLOCK_SHAPE) -> dict[str, int]:
    """w8a8_triton_block_scaled_mm's default config, taken when vLLM ships no table for the shape."""
    block_n, block_k = block_shape
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k, "GROUP_SIZE_M": 32,
            "num_warps": 4, "num_stages": 2}


def shipped_table(file_name: str) -> tuple[tuple[int, dict[str, int]], ...] | None:
    """vLLM's shipped table of that name as (M key, config) in the file's order; None when vLLM
    ships none."""
    return files.carried_table(_TABLES, file_name)


@dataclass(frozen=True)
class BlockFp8Tiles:
    """The config vLLM's Triton block-FP8 GEMM runs a call with, and where it came from."""

    config: dict[str, int]
    file_name: str
    """The file vLLM looks for."""
    m_key: int | None
    """The M key of the shipped table whose entry was taken; None: no table, the default config."""

    def describe(self) -> str:
        version = tables_vllm_version()
        if self.m_key is None:
            return f"vLLM {version} w8a8_triton_block_scaled_mm default config (vLLM ships no {self.file_name})"
        return f"vLLM {version} shipped {self.file_name}, M key {self.m_key}"


def vllm_tiles(m: int, n: int, k: int, device_name: str) -> BlockFp8Tiles:
    """The tiles w8a8_triton_block_scaled_mm runs an M x N x K call with on a GPU named
    `device_name` (128x128 blocks): the shipped table's nearest-M entry, else the default."""
    name = config_file_name(n, k, device_name)
    table = shipped_table(name)
    if table is None:
        return BlockFp8Tiles(default_config(), name, None)
    configs = dict(table)
    m_key = files.nearest_key(list(configs), m)
    return BlockFp8Tiles(dict(configs[m_key]), name, m_key)


__all__ = ["BLOCK_SHAPE", "BlockFp8Tiles", "CONFIG_KEYS", "config_file_name", "default_config",
           "shipped_table", "tables_vllm_version", "vllm_tiles"]
