"""vLLM's tuned fused-MoE config files: their names, their layout, the lookup and the fallback.

vLLM's Triton fused MoE takes its tiles from a JSON file per (local experts E, per-rank
intermediate N, GPU, dtype, block shape), first from the folder `VLLM_TUNED_CONFIG_FOLDER` names,
then from the files shipped in vllm/model_executor/layers/fused_moe/configs/; without one it uses
`get_default_config` and logs "Using default MoE config. Performance might be sub-optimal!". The
rules here are vLLM 0.33.0's, each restated from its source:

* the file name: vllm/model_executor/layers/fused_moe/fused_moe.py: get_config_file_name, with
  the GPU spelled as vllm/utils/platform_utils.py: get_device_name_as_file_name (NVML's name,
  blanks and slashes as "_"; any H200 of the family as NVIDIA_H200);
* N is w2's last dimension, the intermediate size after the activation (I per rank), and E is
  w2's first (the experts of the rank): try_get_optimal_moe_config's `E, _, N = w2_shape`;
* dtype: vllm/model_executor/layers/fused_moe/config.py: _get_config_dtype_str ("fp8_w8a8" for
  every FP8 W8A8 scheme, per-tensor, per-token and block alike; nothing for BF16); block_shape:
  the checkpoint's weight_block_size ([128, 128]) for block-quantized FP8 only;
* the file: {"triton_version": ..., "<M>": {six tile keys}, ...} as vLLM's tuner writes it
  (benchmarks/kernels/benchmark_moe.py@71acd37: save_configs, sort_config); the loader
  (get_moe_configs) drops "triton_version" and reads every other key as an int M;
* the lookup: the config of the key nearest the call's token count M, the first of two equally
  near (try_get_optimal_moe_config: `min(configs.keys(), key=lambda x: abs(x - M))`); M is the
  rank's MoE token count, M x EP/TP under expert parallelism (`Layout.tokens_per_m`);
* the fallback: get_default_config's CUDA branch (not ROCm, not VLLM_BATCH_INVARIANT), less its
  SPLIT_K, which vLLM sets to 1 for every call anyway (fused_moe.py: invoke_fused_moe_triton_kernel);
* the tuner: its token counts (benchmark_moe.py main: `batch_sizes`) and its CUDA search space
  (get_configs_compute_bound), block-FP8 keeping the tiles that are multiples of the block.
"""

from __future__ import annotations

import functools
import json
import re
from itertools import product
from typing import Any, Mapping, Sequence

#: A config's keys in the order vLLM's tuner writes them (benchmark_moe.py: sort_config).
TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
#: The token counts vLLM's tuner writes (benchmark_moe.py main, `batch_sizes`).
TUNER_BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
#: vLLM's CUDA tuner space, one range per key (benchmark_moe.py: get_configs_compute_bound).
TUNER_RANGES: dict[str, tuple[int, ...]] = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}
#: The block shape of block-quantized FP8 checkpoints ([block_n, block_k], weight_block_size).
FP8_BLOCK_SHAPE = (128, 128)
#: (config dtype, block shape) per scheme of the Triton fused MoE (kernels/triton_moe/problem.py
#: SCHEMES); per-tensor and per-token FP8 share one file.
SCHEME_FILE_KEYS: dict[str, tuple[str | None, tuple[int, int] | None]] = {
    "bf16": (None, None),
    "fp8_per_tensor": ("fp8_w8a8", None),
    "fp8_per_token": ("fp8_w8a8", None),
    "fp8_block128": ("fp8_w8a8", FP8_BLOCK_SHAPE),
}
#: The key vLLM's tuner writes first and its loader drops.
TRITON_VERSION_KEY = "triton_version"


def device_name_as_file_name(device_name: str) -> str:
    """The GPU as vLLM's config file names spell it (get_device_name_as_file_name, then
    get_config_file_name's H200 rule).

    >>> device_name_as_file_name("NVIDIA H100 80GB HBM3"), device_name_as_file_name("NVIDIA H200 NVL")
    ('NVIDIA_H100_80GB_HBM3', 'NVIDIA_H200')
    """
    name = re.sub(r"[\s/]+", "_", device_name)
    return "NVIDIA_H200" if "H200" in name.split("_") else name


def scheme_file_keys(scheme: str) -> tuple[str | None, tuple[int, int] | None]:
    """(dtype, block shape) of the file a scheme's MoE layer looks up; ValueError for another."""
    try:
        return SCHEME_FILE_KEYS[scheme]
    except KeyError:
        raise ValueError(f"scheme={scheme!r}: expected one of {', '.join(SCHEME_FILE_KEYS)}") from None


def config_file_name(experts: int, intermediate: int, device_name: str, dtype: str | None,
                     block_shape: Sequence[int] | None = None) -> str:
    """vLLM's file name for E local experts and per-rank intermediate N on `device_name` (the name
    NVML gives, e.g. "NVIDIA H200").

    >>> config_file_name(16, 768, "NVIDIA H200", "fp8_w8a8", [128, 128])
    'E=16,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json'
    """
    device = device_name_as_file_name(device_name)
    dtype_part = f",dtype={dtype}" if dtype else ""
    block = list(block_shape) if block_shape else None
    block_part = f",block_shape={block}".replace(" ", "") if block and all(block) else ""
    return f"E={experts},N={intermediate},device_name={device}{dtype_part}{block_part}.json"


def nearest_key(keys: Sequence[int], num_tokens: int) -> int:
    """The key vLLM reads at `num_tokens`: the nearest, the first listed of two equally near."""
    if not keys:
        raise ValueError("nearest_key: no keys")
    return min(keys, key=lambda k: abs(k - num_tokens))


def tile_config(config: Mapping[str, Any]) -> dict[str, int]:
    """The six tile keys of a config, in the tuner's order; ValueError naming a missing or bad
    one (other keys, e.g. ROCm's waves_per_eu, are left out)."""
    out: dict[str, int] = {}
    for key in TILE_KEYS:
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key}={value!r}: expected a positive int")
        out[key] = value
    return out


def parse_config_file(doc: Any) -> dict[int, dict[str, int]]:
    """M -> tiles of a config file's JSON, as get_moe_configs reads it (the triton_version entry
    dropped, every other key an int); ValueError for a file vLLM could not use."""
    if not isinstance(doc, dict):
        raise ValueError(f"a config file holds a JSON object; this one holds {type(doc).__name__}")
    out: dict[int, dict[str, int]] = {}
    for key, value in doc.items():
        if key == TRITON_VERSION_KEY:
            continue
        try:
            m = int(key)
        except ValueError:
            raise ValueError(f"key {key!r}: expected a token count") from None
        if not isinstance(value, dict):
            raise ValueError(f"key {key!r}: expected a config object")
        out[m] = tile_config(value)
    if not out:
        raise ValueError("no token-count keys")
    return out


def config_file_doc(configs: Mapping[int, Mapping[str, int]], triton_version: str) -> dict[str, Any]:
    """The JSON object of a config file, as vLLM's tuner writes it: triton_version first, then each
    key (ascending) with its six tiles in the tuner's order."""
    doc: dict[str, Any] = {TRITON_VERSION_KEY: triton_version}
    for m in sorted(configs):
        doc[str(m)] = tile_config(configs[m])
    return doc


def config_file_text(doc: Mapping[str, Any]) -> str:
    """The file's text: `json.dump(..., indent=4)` and a newline, as save_configs writes it."""
    return json.dumps(doc, indent=4) + "\n"


def default_config(num_tokens: int, experts: int, intermediate: int, hidden: int, top_k: int,
                   dtype: str | None, block_shape: Sequence[int] | None = None) -> dict[str, int]:
    """get_default_config(M, E, N, K, topk, dtype, block_shape) on CUDA: the tiles vLLM runs when no
    file is found. `intermediate` and `top_k` are its N and topk, which its CUDA branch reads for
    the int4/int8 weight-only schemes only."""
    m = num_tokens
    if dtype == "fp8_w8a8" and block_shape is not None:
        if m <= 8 and block_shape[0] % 64 == 0:
            block_n, stages = 64, (4 if m <= 4 else 3)
        else:
            block_n, stages = block_shape[0], 3
        values = (16 if m <= 64 else 64, block_n, block_shape[1], 1 if m <= 16 else 32, 4, stages)
        return dict(zip(TILE_KEYS, values, strict=True))
    if dtype not in (None, "fp8_w8a8", "float32"):
        raise ValueError(f"dtype={dtype!r}: get_default_config's weight-only branches are not restated")
    block_m = 16 if m <= 32 else 32 if m <= 96 else 64 if m <= 512 else 128
    block_n = 64 if m <= 64 else 128
    block_k = 128 if dtype == "fp8_w8a8" or m <= 64 else 64
    group_m = 16 if m // max(experts, 1) > 128 else 1
    warps = 4 if m <= 128 else 8
    stages = 4 if m <= 32 else 3
    return dict(zip(TILE_KEYS, (block_m, block_n, block_k, group_m, warps, stages), strict=True))


def tuner_space(block_shape: Sequence[int] | None = None) -> list[dict[str, int]]:
    """vLLM's CUDA tuner space in its order (itertools.product over TUNER_RANGES); with a block
    shape (block-quantized FP8), only the configs whose BLOCK_SIZE_K and BLOCK_SIZE_N are
    multiples of block_k and block_n."""
    space = [dict(zip(TILE_KEYS, values, strict=True)) for values in product(*TUNER_RANGES.values())]
    if block_shape is not None:
        block_n, block_k = block_shape[0], block_shape[1]
        space = [c for c in space if c["BLOCK_SIZE_K"] % block_k == 0 and c["BLOCK_SIZE_N"] % block_n == 0]
    return space


@functools.cache
def carried_tables(path: str) -> dict[str, Any]:
    """A file of vLLM's shipped tile tables as benchmarks/vllm_tile_tables.py writes it
    ({"vllm_version", "source", "row", "files": {file name: [[M, six tile values(, {other keys})]]}})."""
    with open(path, encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def carried_table(path: str, file_name: str) -> tuple[tuple[int, dict[str, int]], ...] | None:
    """The shipped table `file_name` of the carried file at `path` as (M key, config) in the
    table's order (any other launch key of an entry in its config); None when vLLM ships none."""
    rows = carried_tables(path)["files"].get(file_name)
    if rows is None:
        return None
    out = []
    for row in rows:
        config = dict(zip(TILE_KEYS, (int(v) for v in row[1:7]), strict=True))
        if len(row) > 7:
            config.update({str(k): int(v) for k, v in row[7].items()})
        out.append((int(row[0]), config))
    return tuple(out)


__all__ = [
    "FP8_BLOCK_SHAPE",
    "SCHEME_FILE_KEYS",
    "TILE_KEYS",
    "TRITON_VERSION_KEY",
    "TUNER_BATCH_SIZES",
    "TUNER_RANGES",
    "carried_table",
    "carried_tables",
    "config_file_doc",
    "config_file_name",
    "config_file_text",
    "default_config",
    "device_name_as_file_name",
    "nearest_key",
    "parse_config_file",
    "scheme_file_keys",
    "tile_config",
    "tuner_space",
]
