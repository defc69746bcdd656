"""The doctor's checks of the machine: the GPU (present, idle), torch's CUDA, the CUPTI timer,
nvcc and the tools optional backends need (tileiras for cutile), and the FLASHINFER_* environment.

Each check is a small pure function of probe results (from `environment.py` and `env/`) returning a
`Check`; `ok` is True (pass), False (fail: numbers would be wrong or the run would break) or None
(warning: worth knowing, not blocking). The FlashInfer install itself is judged by
`flashinfer_checks`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from ..cases.backends import BACKENDS, capability_reason
from ..env import gpu as gpu_probes
from ..env import versions
from ..run.pool import no_download_state

#: The backend whose compiler the tileiras check looks for.
CUTILE = next(s for s in BACKENDS if s.backend == "cutile")

TROUBLESHOOTING = "references/troubleshooting.md"


@dataclass(frozen=True)
class Check:
    """One verdict of the doctor."""

    name: str
    """Stable identifier, e.g. "gpu", "cupti" (also the key in --json output)."""
    ok: bool | None
    """True: pass; False: fail (blocks trustworthy numbers); None: warning only."""
    detail: str
    """What was found, in one line."""
    fix: str = ""
    """What to do about it (a command where there is one); empty when ok."""


def check_gpu(gpu: dict[str, Any]) -> Check:
    if gpu.get("driver_present") and "pynvml" in (gpu.get("error") or ""):
        return Check("gpu", False,
                     f"an NVIDIA driver is present but NVML cannot be used: {gpu['error']}",
                     "pip install -e '.[gpu]' (or pip install nvidia-ml-py)")
    if gpu.get("error") or not gpu.get("name"):
        return Check("gpu", False,
                     f"no NVIDIA GPU/driver found (NVML: {gpu.get('error') or 'no device'})",
                     "run on a machine with an NVIDIA GPU and driver; if this one has them, install "
                     "NVML bindings with: pip install -e '.[gpu]'. Without a GPU you can still "
                     "preview shapes: python scripts/benchmark_model.py MODEL --tp N --print_only")
    clocks = gpu.get("clocks_mhz") or {}
    parts = [gpu["name"]]
    if gpu.get("compute_capability"):
        parts.append(f"sm_{gpu['compute_capability'].replace('.', '')}")
    if gpu.get("sm_count"):
        parts.append(f"{gpu['sm_count']} SMs")
    if gpu.get("memory_gb"):
        parts.append(f"{gpu['memory_gb']} GB")
    if clocks.get("sm_max"):
        parts.append(f"SM clock {clocks.get('sm_current')}/{clocks['sm_max']} MHz")
    if gpu.get("power_limit_w"):
        parts.append(f"power limit {gpu['power_limit_w']} W")
    if gpu.get("driver"):
        parts.append(f"driver {gpu['driver']} (CUDA {gpu.get('driver_cuda')})")
    return Check("gpu", True, ", ".join(parts))


def check_idle(gpu: dict[str, Any], own_pid: int | None = None) -> Check:
    """Another process on the GPU shares SMs, HBM bandwidth and clocks with the kernel being timed."""
    own_pid = os.getpid() if own_pid is None else own_pid
    procs = gpu.get("processes")
    util = gpu.get("utilization_pct")
    index = gpu.get("index", 0)
    fix = ("wait for them to finish, or pick an idle GPU: --gpu INDEX here and "
           "CUDA_VISIBLE_DEVICES=INDEX for the run")
    others = [p for p in (procs or []) if p.get("pid") != own_pid]
    if others:
        listed = ", ".join(
            f"pid {p['pid']}" + (f" {p['name']}" if p.get("name") else "")
            + (f" ({p['used_memory_mb']} MiB)" if p.get("used_memory_mb") is not None else "")
            for p in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        return Check("gpu_idle", False,
                     f"GPU {index} is busy: {len(others)} other process(es): {listed}{more}", fix)
    if util is not None and util > gpu_probes.IDLE_UTILIZATION_PCT:
        return Check("gpu_idle", False,
                     f"GPU {index} is {util}% utilized although no process is listed (another "
                     f"container or VM?)", fix)
    if util is None and procs is None:
        return Check("gpu_idle", None,
                     f"could not read utilization or processes of GPU {index} through NVML",
                     "check with nvidia-smi that nothing else runs on it")
    used = gpu.get("memory_used_gb")
    if used is not None and used > 2 and not others:
        return Check("gpu_idle", None,
                     f"GPU {index}: {util}% utilized, no process listed, but {used} GB memory in "
                     f"use (a process NVML cannot see from here?)",
                     "check with nvidia-smi on the host that nothing else runs on it")
    return Check("gpu_idle", True,
                 f"GPU {index} idle: {util}% utilization, no other process")


def check_torch_cuda(tc: dict[str, Any], gpu: dict[str, Any]) -> Check:
    if tc.get("torch") is None:
        return Check("torch_cuda", False, f"torch is not importable ({tc.get('error')})",
                     "install a CUDA build of torch that matches the driver (see README.md)")
    if not tc.get("cuda_build"):
        return Check("torch_cuda", False, f"torch {tc['torch']} is a CPU-only build",
                     "install a CUDA build of torch, e.g. pip install torch --index-url "
                     "https://download.pytorch.org/whl/cu130 (cu12x for a CUDA 12 driver)")
    runtime, driver_cuda = tc["cuda_build"], gpu.get("driver_cuda")
    if (versions.major_minor(driver_cuda) and versions.major_minor(runtime)
            and versions.version_key(versions.major_minor(runtime))[0]
            > versions.version_key(versions.major_minor(driver_cuda))[0]):
        return Check("torch_cuda", False,
                     f"torch {tc['torch']} needs CUDA {runtime} but the driver supports CUDA "
                     f"{driver_cuda}",
                     "upgrade the NVIDIA driver, or install a torch built for the driver's CUDA")
    if not tc.get("available") or tc.get("error"):
        return Check("torch_cuda", False,
                     f"torch {tc['torch']} (CUDA {runtime}) cannot use the GPU: "
                     f"{tc.get('error') or 'torch.cuda.is_available() is False'}",
                     "check CUDA_VISIBLE_DEVICES and that the driver works (nvidia-smi)")
    return Check("torch_cuda", True,
                 f"torch {tc['torch']}, CUDA runtime {runtime}, {tc.get('device_count')} GPU(s) "
                 f"visible")


_FALLBACK_TEXT = {"cuda_events": "CUDA events",
                  "cuda_graph": "CUDA events around CUDA-graph replays"}


def check_cupti(probe: dict[str, Any] | None, stack: dict[str, Any],
                gpu: dict[str, Any]) -> Check:
    """A CUDA-events time includes launch overhead and is not comparable with a CUPTI time, so a
    silent fallback is a failure (the runner's --allow_cuda_events exists for an explicit choice).
    A failure states the rule (versions.CUPTI_RULE) and what this stack has against it."""
    fix = versions.cupti_fix_command(stack.get("cuda_runtime"), gpu.get("driver_cuda"))
    installed = stack.get("cupti_python")
    have = f"cupti-python {installed}" if installed else "cupti-python not installed"
    wheel = stack.get("nvidia_cuda_cupti")
    have_all = f"{have}, nvidia-cuda-cupti {wheel or 'not installed'}"
    if probe is None:
        return Check("cupti", False, f"not probed (needs a GPU, torch CUDA and flashinfer); {have_all}",
                     "fix the checks above, then run the doctor again")
    if probe.get("error"):
        return Check("cupti", False, f"timer probe failed: {probe['error']} ({have_all})",
                     f"{fix}; see {TROUBLESHOOTING}")
    if probe.get("timer") != "cupti":
        why = versions.cupti_mismatch(installed, stack.get("cuda_runtime"), wheel) or (
            "" if installed else "cupti-python is not installed")
        return Check("cupti", False,
                     f"FlashInfer fell back from CUPTI to "
                     f"{_FALLBACK_TEXT.get(probe.get('timer'), probe.get('timer'))} ({have_all}, CUDA runtime "
                     f"{stack.get('cuda_runtime')}, driver CUDA {gpu.get('driver_cuda')})"
                     + (f": {why}" if why else "") + f". {versions.CUPTI_RULE}. "
                     f"FlashInfer said: {probe.get('warning')}", fix)
    return Check("cupti", True,
                 f"CUPTI timed a 256x256x256 BF16 matmul: {probe.get('median_us')} us ({have_all})")


def check_nvcc(nvcc: dict[str, Any], cuda_runtime: str | None) -> Check:
    """FlashInfer JIT-compiles most kernels on first use (nvcc through ninja), even cuBLAS paths."""
    if not nvcc.get("nvcc"):
        return Check("nvcc", False, "nvcc not found (FLASHINFER_NVCC, CUDA_HOME, PATH)",
                     "install the CUDA toolkit matching torch's CUDA and set CUDA_HOME (cuDNN "
                     "backends work without it; cuBLAS/CUTLASS ones do not)")
    if not nvcc.get("ninja"):
        return Check("nvcc", False, f"nvcc {nvcc.get('nvcc_version')} found but no ninja binary",
                     "pip install ninja")
    nv, rt = versions.major_minor(nvcc.get("nvcc_version")), versions.major_minor(cuda_runtime)
    if nv and rt and versions.version_key(nv)[0] != versions.version_key(rt)[0]:
        return Check("nvcc", False,
                     f"nvcc {nv} ({nvcc['nvcc']}) but torch uses CUDA {rt}: JIT modules would "
                     f"not load", f"point CUDA_HOME at a CUDA {rt.split('.')[0]}.x toolkit")
    return Check("nvcc", True, f"nvcc {nvcc.get('nvcc_version')} at {nvcc['nvcc']}, ninja at "
                               f"{nvcc['ninja']}")


TILEIRAS_FIX = ("pip install cuda-tile[tileiras] (or a CUDA Toolkit 13.1+ with tileiras on PATH or in "
                "$CUDA_HOME/bin)")


def _cutile_cannot_run(compute_capability: str | None) -> str:
    """Why no cutile row can run on this GPU, whatever is installed: the backend table's own
    capability and toolchain rule ("" when it can, or the GPU is unknown)."""
    cc = gpu_probes.parse_compute_capability(compute_capability)
    return capability_reason(CUTILE, cc) if cc is not None else ""


def check_tileiras(probe: dict[str, Any], backends: Sequence[str] = (),
                   compute_capability: str | None = None) -> Check:
    """FlashInfer's cutile backend (mm_bf16) JIT-compiles with the tileiras compiler through the
    cuda-tile package; without either, every cutile row fails as a set-up problem. Only cutile
    needs them, so a gap is a warning unless --backends asks for cutile. On a GPU tileiras cannot
    target (sm_90), the rows are unsupported whatever is installed: nothing to install."""
    limit = _cutile_cannot_run(compute_capability)
    if limit:
        return Check("tileiras", True, f"not needed on this GPU: cutile rows are unsupported here "
                                       f"({limit})")
    path, module = probe.get("tileiras"), probe.get("cuda_tile_importable")
    if path and module:
        return Check("tileiras", True, f"tileiras at {path} (from {probe.get('found_in')}), "
                                       f"cuda-tile {probe.get('cuda_tile')}: cutile can compile")
    missing = []
    if not path:
        missing.append("tileiras compiler not found (nvidia-cuda-tileiras wheel, PATH, "
                       "$CUDA_HOME/bin, /usr/local/cuda*/bin)")
    if not module:
        missing.append("cuda-tile package not importable (module cuda.tile)")
    blocking = "cutile" in backends
    backend = "the requested cutile backend" if blocking else "the cutile backend"
    them = "them" if len(missing) > 1 else "it"
    return Check("tileiras", False if blocking else None,
                 f"{' and '.join(missing)}: {backend} (mm_bf16) needs {them}, so its rows fail as "
                 f"set-up", TILEIRAS_FIX)


def check_no_download(env: dict[str, str]) -> Check:
    value, defaulted = no_download_state(env)
    if defaulted:
        return Check("no_download", True,
                     "FLASHINFER_NO_DOWNLOAD unset: the run sets it to 1 for its worker, so a "
                     "kernel whose cubin is not installed fails at once instead of downloading "
                     "(export FLASHINFER_NO_DOWNLOAD= , set and empty, lets FlashInfer download)")
    if value:
        return Check("no_download", True,
                     f"FLASHINFER_NO_DOWNLOAD={value!r} (yours, kept): missing cubins fail at once "
                     "(FlashInfer reads any non-empty value, 0 included, as no-download)")
    return Check("no_download", None,
                 "FLASHINFER_NO_DOWNLOAD set and empty (yours, kept): kernels whose cubin is not "
                 "installed download it on first use; without network each such case stalls "
                 "(about 45 s for mm_fp8) before it fails",
                 "unset FLASHINFER_NO_DOWNLOAD on a machine without network (the run then "
                 "defaults it to 1)")


def _arch_entries(value: str) -> list[str]:
    return [a for a in value.replace(",", " ").split() if a]


def check_arch_list(env: dict[str, str], gpu: dict[str, Any]) -> Check:
    value = env.get("FLASHINFER_CUDA_ARCH_LIST", "")
    cc = gpu.get("compute_capability")
    if not value:
        return Check("cuda_arch_list", True,
                     "FLASHINFER_CUDA_ARCH_LIST unset: JIT targets the visible GPUs")
    archs = {a.rstrip("afAF") for a in _arch_entries(value)}
    if cc and cc not in archs:
        return Check("cuda_arch_list", False,
                     f"FLASHINFER_CUDA_ARCH_LIST={value!r} does not include this GPU's {cc}",
                     f"export FLASHINFER_CUDA_ARCH_LIST={cc}{'a' if cc.startswith('9.') else ''} "
                     f"(space-separated major.minor)")
    return Check("cuda_arch_list", True, f"FLASHINFER_CUDA_ARCH_LIST={value!r}")


__all__ = ["CUTILE", "TROUBLESHOOTING", "TILEIRAS_FIX", "Check", "check_gpu", "check_idle", "check_torch_cuda",
           "check_cupti", "check_nvcc", "check_tileiras", "check_no_download", "check_arch_list"]
