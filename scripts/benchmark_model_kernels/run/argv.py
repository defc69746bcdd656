"""A driver case's full argv: the argv cases/build.py made, plus the run settings.

In: a Case (its `driver_args`, starting with "--routine") and the RunSettings. Out: the argv the
worker hands to FlashInfer's driver, the same line testlist.txt and cases.json record; and
`case_settings`, the settings one case is timed with (its mode decides CUDA graphs).
"""

from __future__ import annotations

import dataclasses

from ..cases.attention import ATTENTION_ROUTINES
from ..cases.schema import Case
from .correctness import DRIVER_REFCHECK
from .results import RunSettings


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


__all__ = ["case_settings", "driver_argv"]
