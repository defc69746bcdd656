"""Whether FlashInfer will use an --autotune_cache file, read before a run starts.

FlashInfer's autotuner stamps the file it saves with the environment that tuned it (`_metadata`:
FlashInfer version, CUDA, cuBLAS, cuDNN, cuDNN-frontend, GPU name). On load it compares each stamp
with the running process (flashinfer/autotuner/autotuner.py `load_configs` and
`_classify_metadata_mismatches`, release-v0.6.18): a definite value that differs is a "hard"
mismatch, and then it ignores every entry AND never saves to that path again. A run given such a
file re-tunes every FlashInfer GEMM and MoE row and keeps none of it, silently, which is neither
what --autotune_cache promises ("load and extend") nor fast. Of the stamps, the FlashInfer version
and the GPU name are known here without importing torch or FlashInfer (package metadata, NVML);
the others are left to FlashInfer.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: The stamp FlashInfer writes (autotuner.py `_METADATA_KEY`).
METADATA_KEY = "_metadata"
#: Stamp values that are never a hard mismatch: the wildcard "*" and FlashInfer's indeterminate
#: values (autotuner.py:190 `_INDETERMINATE_META_VALUES`, release-v0.6.18).
NOT_DEFINITE = ("*", None, "unknown", "None")


def read_stamp(path: str) -> dict[str, Any] | None:
    """The file's `_metadata`, or None when there is no file, it is not FlashInfer's JSON, or it
    has no stamp (FlashInfer then replaces it on its next save: nothing is lost)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    meta = data.get(METADATA_KEY) if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else None


def hard_mismatches(stamp: dict[str, Any], current: dict[str, str | None]) -> dict[str, tuple[Any, str]]:
    """{key: (saved, current)} for each stamp of `current` that the file records definitely and
    differently; keys whose current value is unknown here are not compared."""
    out: dict[str, tuple[Any, str]] = {}
    for key, now in current.items():
        if now in NOT_DEFINITE:
            continue
        saved = stamp.get(key)
        if saved in NOT_DEFINITE or saved == now:
            continue
        out[key] = (saved, str(now))
    return out


def stale_reason(path: str, flashinfer_version: str | None, gpu_name: str | None) -> str | None:
    """Why FlashInfer would ignore the autotune cache at `path` and never save to it, or None."""
    if not os.path.isfile(path):
        return None
    stamp = read_stamp(path)
    if stamp is None:
        return None
    bad = hard_mismatches(stamp, {"flashinfer_version": flashinfer_version, "gpu": gpu_name})
    if not bad:
        return None
    what = ", ".join(f"{k} {saved!s} (here {now})" for k, (saved, now) in bad.items())
    return (f"was tuned with {what}; FlashInfer ignores such a file and never saves to it, so every "
            f"FlashInfer GEMM and MoE row would tune again and keep nothing")


__all__ = ["METADATA_KEY", "hard_mismatches", "read_stamp", "stale_reason"]
