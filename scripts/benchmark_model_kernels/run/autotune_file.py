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

The file is written by FlashInfer's save (a temp file renamed over the path) into whatever the
path holds, and one without a stamp is replaced whole (load_configs: "indeterminate" metadata).
So an --autotune_cache is taken only where it is FlashInfer's own (a JSON object with its
`_metadata` stamp, `foreign_reason`) or does not exist yet; a config.json, a results.json, a
folder, a link or anything else is refused before the run.
"""

from __future__ import annotations

import json
import os
import stat
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


#: Largest file read to decide whether it is an autotune cache (a real one is under a few MB).
MAX_CACHE_BYTES = 256 * 2**20


def foreign_reason(path: str) -> str | None:
    """Why the file at `path` is not an autotune cache FlashInfer saved (so a run writing there would
    replace someone else's file), or None: nothing is there yet, or it is FlashInfer's stamped JSON.
    Never reads through a link, nor from a FIFO or device."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return _folder_reason(path)
    except OSError as e:
        return f"cannot be looked at ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return (f"is a symbolic link (to {os.readlink(path)}), which a run never writes through; give "
                "the file itself")
    if stat.S_ISDIR(st.st_mode):
        return "is a directory; give a file path"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size == 0:
        return "is an empty file, not an autotune cache FlashInfer saved"
    if st.st_size > MAX_CACHE_BYTES:
        return f"is a file of {st.st_size} bytes, too large to be an autotune cache FlashInfer saved"
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    except (ValueError, RecursionError):
        return "is not JSON, so not an autotune cache FlashInfer saved"
    if not isinstance(data, dict):
        return "is JSON but not an object, so not an autotune cache FlashInfer saved"
    meta = data.get(METADATA_KEY)
    if not isinstance(meta, dict) or "flashinfer_version" not in meta:
        return (f"is a JSON file without FlashInfer's {METADATA_KEY} stamp, so not an autotune cache "
                "FlashInfer saved")
    return None


def _folder_reason(path: str) -> str | None:
    """Why a file cannot be created at `path` (a part of its folder is a file), or None."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up
    return None if os.path.isdir(parent) else f"cannot be created: {parent} is not a folder"


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


__all__ = ["MAX_CACHE_BYTES", "METADATA_KEY", "foreign_reason", "hard_mismatches", "read_stamp", "stale_reason"]
