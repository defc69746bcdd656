"""What a run records and opens before its first case: the machine, the results.json header and
notes, the result cache.

In: the RunRequest, the plan, what FlashInfer says about its backends, the environment probe the
CLI passes. Out: the header dict results.json is written under (ResultsFile) and the ResultCache of
this machine, or None.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import Any, Callable, TextIO

from ..cases.capabilities import Capabilities
from ..core.plan_schema import Plan
from ..core.results_schema import RESULTS_SCHEMA_VERSION, new_run_id
from ..core.version import __version__
from ..kernels.quant_timing import QUANT_TIMING_NOTE
from .cache import ResultCache, machine_fingerprint, missing_machine_fields
from .flags import Gpu, RunRequest
from .pool import no_download_note

#: What the run records as results.json["environment"], given the --flashinfer_repo (the CLIs pass
#: `env.environment.collect`; the run stage itself does not probe the machine).
EnvironmentProbe = Callable[[str | None], dict[str, Any]]

TIMING_NOTE = (
    "Driver rows: FlashInfer's benchmarks/flashinfer_benchmark.py run in-process by a worker "
    "(bench_gpu_time: CUPTI kernel spans, cold L2 flushed before every iteration, CUDA graph "
    "unless --no_cuda_graph), median and std over --num_iters after --dry_run_iters warm-ups. "
    "torch rows: the same bench_gpu_time. Each row's `timer` says what timed it. Every timed row "
    "keeps its per-iteration times (samples_us) and their p10/p50/p90/p99; driver rows get them "
    "from the bench_gpu_time call the driver makes (run/driver_capture.py). Eager rows (--modes "
    "eager) time without CUDA graphs and count the launches of one call with CUPTI."
)


def recorded_environment(probe: EnvironmentProbe, flashinfer_repo: str | None) -> dict[str, Any]:
    """The probe's record of the machine, or the warning of why there is none."""
    try:
        return probe(flashinfer_repo)
    except Exception as e:  # noqa: BLE001  (recording the machine must never lose a run)
        return {"warnings": [f"environment.collect failed: {type(e).__name__}: {e}"]}


def _notes(caps: Capabilities) -> dict[str, Any]:
    return {"timing": TIMING_NOTE, "quant_timing": QUANT_TIMING_NOTE,
            "downloads": no_download_note(os.environ),
            "capabilities": f"backend support per GPU from {caps.origin}"}


def results_header(request: RunRequest, plan: Plan | None, caps: Capabilities, machine: dict[str, Any],
                   timestamp: str, command: list[str] | None) -> dict[str, Any]:
    """results.json without its rows, for a run started at `timestamp` (a fresh run id) by
    `command` (None: this process's argv), on the `machine` the environment probe recorded."""
    return {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "run_id": new_run_id(timestamp),
        "tool": {"name": "benchmark-model-kernels", "version": __version__},
        "command": list(command if command is not None else sys.argv),
        "timestamp": timestamp,
        "environment": machine,
        "settings": asdict(request.settings),
        "plan": plan.to_dict() if plan is not None else None,
        "notes": _notes(caps),
    }


def open_cache(cache_dir: str | None, gpu: Gpu | None, environment: dict[str, Any], run_id: str,
               timestamp: str, workdir: str, progress: TextIO) -> ResultCache | None:
    """The result cache of this run, or None (--no_cache, or the machine is not known well enough
    for a number to be reused: then it says so on `progress`)."""
    if not cache_dir:
        return None
    machine = machine_fingerprint(gpu, environment)
    missing = missing_machine_fields(machine)
    if missing:
        print(f"note: result cache not used: this machine's {', '.join(missing)} unknown, so no "
              "number can be matched to it; every case is timed", file=progress)
        return None
    return ResultCache(os.path.abspath(cache_dir), machine, run_id, timestamp, workdir, notices=progress)


def cache_note(cache: ResultCache) -> str:
    """notes["result_cache"]: what a row with an `origin` is."""
    return (f"{cache.folder}: a row whose `origin` is set was not timed by this run but copied "
            "from the run it names, measured on this GPU model with these driver, CUDA, torch, "
            "FlashInfer and triton versions and these timing settings (--no_cache times every case)")


def gpus_note(devices: tuple[str, ...]) -> str:
    """notes["gpus"] of a run spread over several GPUs."""
    return (f"cases spread over {len(devices)} GPUs of one model "
            f"(CUDA_VISIBLE_DEVICES {', '.join(map(str, devices))}), one worker each")


__all__ = [
    "EnvironmentProbe",
    "TIMING_NOTE",
    "cache_note",
    "gpus_note",
    "open_cache",
    "recorded_environment",
    "results_header",
]
