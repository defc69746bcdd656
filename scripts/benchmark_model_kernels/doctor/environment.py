"""What this machine is, for results.json["environment"]: GPU, driver, CUDA, torch, FlashInfer wheel
vs checkout, CUPTI, nvcc (`collect()`); the doctor (`doctor.py`) judges the same probes.

The probes live in `versions.py` (packages, FlashInfer) and `gpu.py` (CUDA, NVML, torch, timer);
every one is guarded, so recording the environment can never lose a run.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from ..core.results_schema import RunSettings
from ..core.version import __version__ as TOOL_VERSION
from ..env.gpu import cuda_stack, gpu_info, nvcc_info, sm_count_from_driver
from ..env.versions import (
    commits_match,
    cupti_fix_command,
    dist_version,
    flashinfer_checkout,
    flashinfer_companions,
    flashinfer_wheel,
    major_minor,
    version_key,
    versions_match,
)
from ..kernels.timing import bench
from ..run.pool import no_download_state

#: Environment variables that change what FlashInfer builds, downloads or times (recorded as-is).
RELEVANT_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "FLASHINFER_NO_DOWNLOAD",
    "FLASHINFER_CUDA_ARCH_LIST",
    "FLASHINFER_WORKSPACE_BASE",
    "FLASHINFER_DISABLE_JIT",
    "MAX_JOBS",
    "CUDA_HOME",
)


# --------------------------------------------------------------------------- the record


def versions(flashinfer_repo: str | None = None, gpu: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """Versions of everything a number depends on (None where not installed / unknown)."""
    stack = cuda_stack()
    wheel = flashinfer_wheel()
    checkout = flashinfer_checkout(flashinfer_repo)
    return {
        "python": platform.python_version(),
        "torch": dist_version("torch"),
        "cuda_runtime": stack["cuda_runtime"],
        "driver": (gpu or {}).get("driver"),
        "driver_cuda": (gpu or {}).get("driver_cuda"),
        "flashinfer_wheel": wheel["version"],
        "flashinfer_wheel_commit": wheel["commit"],
        "flashinfer_checkout": checkout["version"],
        "flashinfer_checkout_commit": checkout["commit"],
        "flashinfer_checkout_tags": checkout["tags"],
        **flashinfer_companions(),
        "cupti_python": stack["cupti_python"],
        "nvidia_cuda_cupti": stack["nvidia_cuda_cupti"],
        "transformers": dist_version("transformers"),
        "tool": TOOL_VERSION,
    }


def version_warnings(v: dict[str, Any], flashinfer_repo: str | None) -> list[str]:
    """Human warnings about the recorded versions (wheel vs checkout first)."""
    out = []
    if flashinfer_repo:
        match = versions_match(v.get("flashinfer_wheel"), v.get("flashinfer_checkout"))
        if match is False:
            out.append(f"FlashInfer wheel {v['flashinfer_wheel']} != checkout "
                       f"{v['flashinfer_checkout']} ({flashinfer_repo}): the driver may call APIs "
                       f"the wheel does not have")
        elif match is None and v.get("flashinfer_wheel"):
            out.append(f"FlashInfer checkout version unknown ({flashinfer_repo} has no version.txt);"
                       f" assumed to match the wheel {v['flashinfer_wheel']}")
        cm = commits_match(v.get("flashinfer_wheel_commit"), v.get("flashinfer_checkout_commit"))
        if cm is False:
            out.append(f"FlashInfer wheel commit {v['flashinfer_wheel_commit'][:12]} != checkout "
                       f"commit {v['flashinfer_checkout_commit'][:12]}")
    cupti = v.get("cupti_python")
    if cupti and v.get("cuda_runtime") and major_minor(cupti) and version_key(
            major_minor(cupti)) > version_key(major_minor(v["cuda_runtime"]) or "0.0"):
        out.append(f"cupti-python {cupti} is newer than the CUDA runtime {v['cuda_runtime']}; "
                   f"fix: {cupti_fix_command(v['cuda_runtime'], v.get('driver_cuda'))}")
    return out


def _no_download_record() -> dict[str, Any]:
    """What FLASHINFER_NO_DOWNLOAD the run's worker gets, and whether that is this tool's default."""
    value, defaulted = no_download_state(os.environ)
    return {"value": value, "defaulted": defaulted}


def collect(flashinfer_repo: str | None = None, gpu_index: int = 0, probe: bool = False
            ) -> dict[str, Any]:
    """The environment record for results.json["environment"]; never raises.

    {"gpu": {...}, "versions": {...}, "nvcc": {...}, "env": {VAR: value}, "timer_probe": {...}
    (only with probe=True), "warnings": [str, ...]}
    """
    try:
        gpu = gpu_info(gpu_index)  # NVML first: before this process creates a CUDA context
    except Exception as e:  # pragma: no cover - gpu_info guards itself
        gpu = {"error": f"{type(e).__name__}: {e}"}
    try:
        gpu["sm_count"] = sm_count_from_driver(gpu_index) if not gpu.get("error") else None
        v = versions(flashinfer_repo, gpu)
        record: dict[str, Any] = {
            "gpu": gpu,
            "versions": v,
            "nvcc": nvcc_info(),
            "env": {k: os.environ[k] for k in RELEVANT_ENV if k in os.environ},
            "no_download": _no_download_record(),
            "platform": {"python_executable": sys.executable, "machine": platform.machine()},
            "warnings": version_warnings(v, flashinfer_repo),
        }
        if probe:
            record["timer_probe"] = probe_timer(gpu_index)
            if record["timer_probe"].get("timer") not in (None, "cupti"):
                record["warnings"].append(
                    f"CUPTI unavailable, FlashInfer times with CUDA events: "
                    f"{record['timer_probe']['warning']}; fix: "
                    f"{cupti_fix_command(v.get('cuda_runtime'), v.get('driver_cuda'))}")
        return record
    except Exception as e:  # pragma: no cover - defensive: recording must never lose a run
        return {"gpu": gpu, "versions": {}, "warnings": [f"environment probe failed: {e}"]}


__all__ = ["RELEVANT_ENV", "collect", "version_warnings", "versions"]


# --------------------------------------------------------------------------- timer probe


def probe_timer(index: int = 0) -> dict[str, Any]:
    """Time a tiny BF16 matmul through `timing.bench` (FlashInfer's `bench_gpu_time` with CUPTI on,
    exactly as every row is timed) and report which timer really ran.

    FlashInfer warns and silently falls back to CUDA events / CUDA graphs when `cupti` cannot be
    imported; `timing.bench` records that warning. Returns {"timer": "cupti" | "cuda_graph" |
    "cuda_events" | None, "median_us", "warning", "error"}.
    """
    out: dict[str, Any] = {"timer": None, "median_us": None, "warning": None, "error": None}
    try:
        import torch

    except Exception as e:
        out["error"] = f"cannot import torch: {type(e).__name__}: {e}"
        return out
    try:
        if not torch.cuda.is_available():
            out["error"] = "torch.cuda.is_available() is False"
            return out
        dev = torch.device("cuda", index)
        a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
        b = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
        settings = RunSettings(dry_run_iters=3, num_iters=10)  # runs' defaults otherwise
        m = bench(torch.matmul, settings, input_args=(a, b))
        out["timer"] = m.timer
        out["median_us"] = round(m.median_us, 3)
        out["warning"] = m.note or None
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out
