"""Where a run keeps what it tuned when --autotune_cache is not given: one file per environment.

FlashInfer's autotuner cache (and beside it, `<file>.triton/`, the tiles the Triton `tuned` rows
searched: kernels/triton_ops.py `cache_dir`) is kept per user, as the result cache is, so that a
second run in a new workdir reuses the first one's tuning instead of tuning every GEMM and MoE
row again: `$XDG_CACHE_HOME/benchmark-model-kernels/autotune/<GPU>/flashinfer-<v>_torch-<v>_
tactics-<N>_buckets-<B>.json` (or under ~/.cache). The name holds what decides a tuning:

* the GPU and the FlashInfer version: FlashInfer stamps its file with both and ignores (and never
  saves to) a file another one wrote (run/autotune_file.py), so two environments never share one;
* the torch version, which fixes the CUDA, cuBLAS and cuDNN versions FlashInfer also stamps;
* --autotune_tactics and --autotune_buckets: a tactic found under one would be taken as is under
  the other (the cached tactic wins over a new search).

FlashInfer merges a save with the file on disk (autotuner.py `save_configs`), so runs that share
the file (a sweep's runs, two GPUs of one machine) keep each other's entries. A run whose GPU is
not known here (--dry_run, a --launcher run on other machines) keeps its cache in its workdir,
as --autotune_cache's default used to be. Every file a run would tune into is checked first
(`settle_autotune_cache`): FlashInfer's own, or nothing yet, and not one it would ignore.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from ..core.errors import UsageError
from ..core.files import user_cache_dir
from ..core.results_schema import RunSettings
from ..env.versions import dist_version
from .autotune_file import foreign_reason, stale_reason
from .workdir import DEFAULT_AUTOTUNE_CACHE
from .workdir_owner import OWN_NAMES

#: The folder of user_cache_dir the files live in.
FOLDER = "autotune"


def _part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") or "unknown"


def default_autotune_cache(gpu_name: str, flashinfer_version: str | None, settings: RunSettings) -> str:
    """The per-user autotune cache for runs on a GPU named `gpu_name` (NVML's name) with this
    FlashInfer version, the installed torch and the settings' tactic cap and buckets."""
    tactics = "all" if settings.autotune_tactics == 0 else str(settings.autotune_tactics)
    name = (f"flashinfer-{_part(flashinfer_version or 'unknown')}_torch-{_part(dist_version('torch') or 'unknown')}"
            f"_tactics-{tactics}_buckets-{_part(settings.autotune_buckets)}.json")
    return os.path.join(user_cache_dir(FOLDER), _part(gpu_name), name)


def check_autotune_cache_is_flashinfers(path: str, workdirs: list[str]) -> None:
    """Refuse (UsageError) an --autotune_cache that is not FlashInfer's own file (FlashInfer
    replaces whatever is at the path when it saves: autotune_file.foreign_reason), or that takes
    the name of a file a run writes in one of its `workdirs`. A path where nothing is yet is
    taken: FlashInfer creates it."""
    reason = foreign_reason(path)
    if reason is None and os.path.basename(path) in OWN_NAMES and os.path.basename(path) != DEFAULT_AUTOTUNE_CACHE:
        folder = os.path.dirname(os.path.abspath(path))
        if any(os.path.abspath(w) == folder for w in workdirs):
            reason = "is the name of a file the run writes in its --workdir"
    if reason is None:
        return
    raise UsageError("--autotune_cache", path, f"{reason}; FlashInfer rewrites the file at this path, so "
                     "give a new path (e.g. --autotune_cache ~/autotune/h200.json) or an autotune cache an "
                     "earlier run saved, or leave the flag out (the run keeps its tuning per user)")


def check_autotune_cache(path: str, *, given: bool, gpu: tuple[str, tuple[int, int]] | None,
                         flashinfer_version: str | None) -> None:
    """Refuse an autotune cache FlashInfer would ignore and never save to (autotune_file.py): one
    tuned by another FlashInfer version (`flashinfer_version`: the installed one) or on another
    GPU. `given`: the path came from --autotune_cache (else it is the workdir's own, met again on
    --resume)."""
    version = flashinfer_version
    reason = stale_reason(path, version, gpu[0] if gpu else None)
    if reason is None:
        return
    fresh = f"{os.path.splitext(path)[0]}-{version or 'new'}.json"
    fix = (f"give a new path for this environment, e.g. --autotune_cache {fresh}, or delete the "
           "file to tune afresh") if given else (
           "delete it (it is only the tuner's cache; the rows are in results.json) or pass "
           "--autotune_cache with a new path")
    raise UsageError("--autotune_cache", path, f"{reason}; {fix}")


def settle_autotune_cache(settings: RunSettings, *, given: str | None, resume: bool, workdirs: list[str],
                          gpu: tuple[str, tuple[int, int]] | None, flashinfer_version: str | None) -> RunSettings:
    """The settings with the autotune cache a run that autotunes uses, each file checked
    (UsageError): `given` (--autotune_cache); else, on a known `gpu`, the per-user file of
    default_autotune_cache, unless a resumed workdir kept its own; else each of `workdirs`'s own."""
    own = [os.path.join(os.path.abspath(w), DEFAULT_AUTOTUNE_CACHE) for w in dict.fromkeys(workdirs)]
    keeps_own = resume and any(os.path.isfile(c) for c in own)
    if not given and gpu is not None and not keeps_own:
        settings = replace(settings, autotune_cache=default_autotune_cache(gpu[0], flashinfer_version, settings))
        caches = [settings.autotune_cache]
        reason = foreign_reason(settings.autotune_cache)
        if reason:
            raise UsageError("--autotune_cache", settings.autotune_cache,
                             f"(the per-user default) {reason}; FlashInfer rewrites the file at this "
                             "path, so move it away, or give --autotune_cache another path")
    else:
        # The given file, or each run's own (a sweep's runs each keep one in their workdir).
        caches = [given] if given else own
    for cache in caches:
        check_autotune_cache(cache, given=bool(given), gpu=gpu, flashinfer_version=flashinfer_version)
    return settings


__all__ = ["FOLDER", "check_autotune_cache", "check_autotune_cache_is_flashinfers", "default_autotune_cache",
           "settle_autotune_cache"]
