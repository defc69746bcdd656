"""Tile-config search and the JSON config cache shared by the project's Triton kernels.

Both the fused MoE (`kernels/triton_moe/`) and the block-FP8 GEMM (`kernels/triton_fp8_gemm.py`) take a
config of the same six keys (vLLM's tuned-JSON names). In: a kernel's `build(config) -> (fn,
args)`, its candidate configs and a `timer(fn, args) -> time`; out: the fastest config, which the
cache stores as one JSON file per key (`<cache_dir>/<key>.json`, written atomically). A missing,
unreadable, corrupt or invalid file reads as "not cached".

Torch is imported lazily (only to synchronize a GPU): this module imports on a CPU machine
without torch or Triton.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..core.files import write_json_atomic

#: Keys of a kernel config, as in vLLM's tuned JSON files.
CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
#: Shared memory a candidate tile may use for its pipelined A/B buffers (H100/H200: 227 KiB per
#: block; the rest is left to Triton's epilogue and layout conversions).
SMEM_BUDGET_BYTES = 200 * 1024


def check_config(config: dict) -> dict:
    """The config as a plain dict of exactly CONFIG_KEYS, positive ints; ValueError naming what is
    wrong. Kernels add their own rules on top (tile sizes, scale blocks)."""
    if not isinstance(config, dict) or set(config) != set(CONFIG_KEYS):
        got = sorted(config) if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"config keys {got}: expected {sorted(CONFIG_KEYS)}")
    for key in CONFIG_KEYS:
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"config {key}={value!r}: expected a positive int")
    return {key: config[key] for key in CONFIG_KEYS}


# ---------------------------------------------------------------------------- search


def _sync() -> None:
    try:
        import torch  # lazy: this module imports on a CPU machine without torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass


def search_config(build: Callable[[dict], tuple[Callable, tuple]], space: Sequence[dict],
                  timer: Callable[[Callable, tuple], float], *, compile_workers: int = 8,
                  results: list | None = None) -> dict:
    """The fastest config of `space` (a copy): build(config) -> (fn, args); timer(fn, args) -> time.

    Candidates are warmed (compiled and run once) `compile_workers` at a time in threads, since
    Triton's LLVM and ptxas steps release the GIL, then timed one by one. Candidates that fail to
    build, compile or run (e.g. Triton's OutOfResources) are skipped; ties go to the earlier
    config. `results`, when given, gets (config, time) for each candidate timed. ValueError for an
    empty space, RuntimeError when every candidate failed.
    """
    space = list(space)
    if not space:
        raise ValueError("search_config: empty config space")
    best, best_t = None, math.inf
    errors: list[str] = []

    def warm(cfg):
        try:
            fn, args = build(cfg)
            fn(*args)
            return cfg, fn, args, None
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is skipped
            return cfg, None, None, f"{type(exc).__name__}: {exc}"

    # The first candidate alone: it compiles the config-independent kernels and initializes the
    # driver before threads race for them.
    step = max(1, compile_workers)
    batches = [space[:1]] + [space[i:i + step] for i in range(1, len(space), step)]
    for batch in batches:
        if len(batch) == 1 or compile_workers <= 1:
            warmed = [warm(c) for c in batch]
        else:
            with ThreadPoolExecutor(max_workers=compile_workers) as pool:
                warmed = list(pool.map(warm, batch))
        _sync()
        for cfg, fn, args, err in warmed:
            if err is not None:
                errors.append(f"{cfg}: {err}")
                continue
            try:
                t = float(timer(fn, args))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{cfg}: {type(exc).__name__}: {exc}")
                continue
            if results is not None:
                results.append((dict(cfg), t))
            if t < best_t:
                best, best_t = dict(cfg), t
        del warmed
    if best is None:
        raise RuntimeError(f"search_config: no candidate ran (all {len(space)} configs failed); "
                           "first errors: " + "; ".join(errors[:3]))
    return best


# ---------------------------------------------------------------------------- config cache


def cache_path(cache_dir, key: str) -> str:
    """`<cache_dir>/<key>.json`; ValueError unless `key` is a plain file name."""
    if (not isinstance(key, str) or not key or os.sep in key or (os.altsep and os.altsep in key)
            or key.startswith(".") or "\x00" in key):
        raise ValueError(f"cache key {key!r}: not a plain file name")
    return os.path.join(os.fspath(cache_dir), key + ".json")


def load_cached_config(cache_dir, key: str, check: Callable[[dict], dict] = check_config) -> dict | None:
    """The config stored under `key`, or None if absent, unreadable, corrupt, another key's, or
    rejected by `check` (a kernel's validator; default: the six keys as positive ints)."""
    try:
        with open(cache_path(cache_dir, key), encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("key") != key:
            return None
        return check(doc.get("config"))
    except (OSError, ValueError, TypeError):
        return None


def store_config(cache_dir, key: str, config: dict, check: Callable[[dict], dict] = check_config) -> str:
    """Write `config` (validated by `check`) under `key` atomically; returns the path."""
    config = check(config)
    path = cache_path(cache_dir, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json_atomic(path, {"key": key, "config": config, "stored_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return path
