"""A driver case's full argv: the argv cases/build.py made, plus the run settings.

In: a Case (its `driver_args`, starting with "--routine") and the RunSettings. Out: the argv the
worker hands to FlashInfer's driver, the same line testlist.txt and cases.json record; and
`case_settings`, the settings one case is timed with (its mode decides CUDA graphs).
"""

from __future__ import annotations

import dataclasses

from ..cases.attention import ATTENTION_ROUTINES
from ..core.case_schema import Case, GemmShape
from ..core.results_schema import RunSettings
from ..kernels.correctness import DRIVER_REFCHECK

#: Driver routines whose autotuned FlashInfer op tunes on the token count M (the rows of its first
#: input) at buckets that END at the call's own M and maps M to bucket M: get_hybrid_num_tokens_buckets
#: (max_num_tokens = the input's M) with map_to_hybrid_bucket_uncapped (flashinfer/fused_moe/utils.py;
#: flashinfer/gemm/gemm_base.py _BF16_GEMM_SM100_TUNING_CONFIG for mm_bf16's "bf16_gemm",
#: _FP8_GEMM_SM100_TUNING_CONFIG for bmm_fp8's "fp8_gemm", _MM_FP4_TUNING_CONFIG_8x4/_128x4 for
#: mm_fp4; release-v0.6.17 and -v0.6.18). By default one call at M=512 profiles every bucket 1, 2,
#: 4, ..., 256, 512 (10 profiles) and the timed call uses only bucket 512's tactic.
TUNED_AT_M = ("mm_bf16", "bmm_fp8", "mm_fp4")


def tuning_buckets(case: Case, settings: RunSettings) -> tuple[int, ...] | None:
    """FlashInfer autotuner buckets for a driver case under --autotune_buckets timed: (M,) for a
    TUNED_AT_M routine, else None (FlashInfer's own buckets, also the default "all").

    Profiling only the bucket the timed call looks up picks the same tactic the default buckets
    would (each bucket is profiled on its own inputs; the others are never used by this call), for
    a fraction of the tuning time (the cuDNN rows, tuned at every bucket, took 355 of a cold
    DeepSeek-V3 run's 547 s: examples/h200/sweep_speed/README.md, the runs of 0762cd1), and keeps the cache keys
    of a default run: bucket M's key is the same either way. It is FlashInfer's own API for known sizes
    (`flashinfer.autotune(tuning_buckets=...)`, docs/autotuning.rst); the worker applies it around
    the driver call (worker.py). It also leaves out the buckets whose cuBLASLt entries FlashInfer
    0.6.18 cannot find again (CublasltBf16GemmRunner keys on the caller's M,
    flashinfer-ai/flashinfer#3868), which a warm run re-profiled every time."""
    if settings.autotune_buckets != "timed" or not settings.autotune or case.routine not in TUNED_AT_M:
        return None
    # The driver's --m is the physical shape's M (cases/build.py _gemm_driver_args).
    return (case.physical.m,) if isinstance(case.physical, GemmShape) and case.physical.m > 0 else None


#: Driver backends whose FlashInfer runners offer cuDNN execution plans as autotuner tactics
#: (CudnnBf16GemmRunner, CudnnFp8GemmRunner, ... in flashinfer/gemm/gemm_base.py: every plan that
#: heur_mode A and FALLBACK give, each with its knobs, built and profiled one after another).
CUDNN_TACTIC_BACKENDS = ("cudnn",)


def tactic_cap(case: Case, settings: RunSettings) -> int | None:
    """How many cuDNN tactics the autotuner may profile for a driver case (--autotune_tactics),
    or None: no cap (autotuning off, "all", or a backend that offers no cuDNN plans).

    cuDNN's heuristics return its execution plans best-first, and FlashInfer's runners offer them
    in that order (_cudnn_graph_engine_knob_tactics walks the plans by index), so the first N are
    the ones cuDNN itself ranks highest; profiling each costs a timed loop, and on its first use the
    CUDA driver compiling its kernels (which the JIT warm-up does for each shape beforehand,
    jit_warmup.py; examples/h200/sweep_speed/README.md). The worker keeps the
    first N of what the runner offers (worker.py _tactic_cap_scope); the row's note says how many
    of how many were profiled."""
    if not settings.autotune or settings.autotune_tactics <= 0 or case.backend not in CUDNN_TACTIC_BACKENDS:
        return None
    if case.routine in ATTENTION_ROUTINES:
        return None
    return settings.autotune_tactics


def case_settings(case: Case, settings: RunSettings) -> RunSettings:
    """The run's settings for one case: CUDA graphs on for a "graph" case, off for an "eager" one."""
    return dataclasses.replace(settings, cuda_graph=case.mode != "eager")


def driver_argv(case: Case, settings: RunSettings) -> list[str]:
    """The case's full driver argv: its own args + timing flags + `-v` + `--case_tag <case_id>`.

    GEMM and MoE routines get --autotune; `--autotune_cache` is passed only with autotuning so
    --no_autotune really means default tactics. The attention routines get neither: the driver
    autotunes only the MLA "auto" selector (attention.py:3530), which no case runs. `--refcheck` is
    passed where the routine has a reference check (correctness.DRIVER_REFCHECK) and checks are
    on; the attention routines' refcheck compares the backends of one call with each other, and
    each case runs one backend (cases/attention.py NO_REFCHECK), so they get none.
    """
    argv = list(case.driver_args)
    argv += ["--num_iters", str(settings.num_iters), "--dry_run_iters", str(settings.dry_run_iters)]
    if case.mode == "eager":
        argv.append("--no_cuda_graph")
    if settings.check and case.routine in DRIVER_REFCHECK and "--refcheck" not in argv:
        argv.append("--refcheck")
    if settings.autotune and case.routine not in ATTENTION_ROUTINES:
        argv.append("--autotune")
        if settings.autotune_cache:
            argv += ["--autotune_cache", settings.autotune_cache]
    if "-v" not in argv and "--verbose" not in argv:
        argv.append("-v")
    if "--case_tag" not in argv:
        argv += ["--case_tag", case.case_id]
    return argv


__all__ = ["CUDNN_TACTIC_BACKENDS", "TUNED_AT_M", "case_settings", "driver_argv", "tactic_cap", "tuning_buckets"]
