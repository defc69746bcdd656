"""What this machine is: GPU, driver, CUDA, torch, FlashInfer wheel vs checkout, CUPTI, nvcc.

`collect()` fills results.json["environment"]; the doctor (`doctor.py`) judges the same probes.
Every probe is guarded: it returns None / an "error" string instead of raising, so recording the
environment can never lose a run. Heavy modules (pynvml, torch, flashinfer) are imported inside
the probes only.

GPU facts come from NVML *before* this process touches CUDA, so the idle check does not see the
probe itself as a competing process.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from typing import Any

from .. import __version__ as TOOL_VERSION

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

#: A GPU busier than this (percent, max of a few samples) is not idle.
IDLE_UTILIZATION_PCT = 5


# --------------------------------------------------------------------------- small helpers


def _dist_version(*names: str) -> str | None:
    """Installed version of the first distribution found among `names` (no import)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
        except Exception:  # a broken install must not break the probe
            continue
    return None


def major_minor(version: str | None) -> str | None:
    """ "13.0.85" -> "13.0"; "12" -> "12.0"; None/garbage -> None."""
    m = re.match(r"\s*(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return None
    return f"{int(m.group(1))}.{int(m.group(2) or 0)}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:2])


def release_of(version: str | None) -> str | None:
    """The public release of a version: "0.6.17+cu130" -> "0.6.17", "v0.6.17" -> "0.6.17"."""
    if not version:
        return None
    v = version.strip().lstrip("vV").split("+", 1)[0]
    return v or None


def versions_match(wheel: str | None, checkout: str | None) -> bool | None:
    """Whether the FlashInfer wheel and the checkout are the same release (None: unknown)."""
    a, b = release_of(wheel), release_of(checkout)
    if not a or not b:
        return None
    return a == b


def commits_match(wheel: str | None, checkout: str | None) -> bool | None:
    """Whether two git commits are the same (prefixes allowed; None: either unknown)."""
    a, b = (wheel or "").strip().lower(), (checkout or "").strip().lower()
    if not a or not b or a == "unknown" or b == "unknown":
        return None
    n = min(len(a), len(b))
    return n >= 7 and a[:n] == b[:n]


# --------------------------------------------------------------------------- FlashInfer


def flashinfer_wheel() -> dict[str, str | None]:
    """The installed flashinfer-python version and commit, read without importing flashinfer
    (its import initializes CUDA and may log); the commit comes from flashinfer/_build_meta.py."""
    out: dict[str, str | None] = {"version": _dist_version("flashinfer-python", "flashinfer"),
                                  "commit": None, "path": None}
    try:
        import importlib.util

        spec = importlib.util.find_spec("flashinfer")
        if spec is not None and spec.submodule_search_locations:
            pkg = list(spec.submodule_search_locations)[0]
            out["path"] = pkg
            meta = os.path.join(pkg, "_build_meta.py")
            if os.path.isfile(meta):
                text = open(meta).read()
                m = re.search(r"__git_commit__\s*=\s*['\"]([^'\"]+)", text)
                if m and m.group(1) != "unknown":
                    out["commit"] = m.group(1)
                if out["version"] is None:
                    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
                    out["version"] = m.group(1) if m else None
    except Exception:
        pass
    return out


def _git_dir(repo: str) -> str | None:
    dot_git = os.path.join(repo, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    if os.path.isfile(dot_git):  # worktree / submodule: "gitdir: <path>"
        try:
            line = open(dot_git).read().strip()
        except OSError:
            return None
        if line.startswith("gitdir:"):
            path = line[len("gitdir:"):].strip()
            return path if os.path.isabs(path) else os.path.normpath(os.path.join(repo, path))
    return None


def _resolve_ref(git_dir: str, ref: str) -> str | None:
    """Resolve "refs/heads/x" through loose refs, then packed-refs (worktrees: commondir)."""
    dirs = [git_dir]
    common = os.path.join(git_dir, "commondir")
    if os.path.isfile(common):
        c = open(common).read().strip()
        dirs.append(c if os.path.isabs(c) else os.path.normpath(os.path.join(git_dir, c)))
    for d in dirs:
        loose = os.path.join(d, ref)
        if os.path.isfile(loose):
            return open(loose).read().strip() or None
        packed = os.path.join(d, "packed-refs")
        if os.path.isfile(packed):
            for line in open(packed):
                parts = line.strip().split(" ", 1)
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    return None


def git_head_commit(repo: str) -> str | None:
    """HEAD commit of a git checkout, read from the files (no git binary, no network)."""
    try:
        git_dir = _git_dir(repo)
        if git_dir is None:
            return None
        head = open(os.path.join(git_dir, "HEAD")).read().strip()
        if head.startswith("ref:"):
            return _resolve_ref(git_dir, head[4:].strip())
        return head if re.fullmatch(r"[0-9a-f]{40,64}", head) else None
    except Exception:
        return None


def flashinfer_checkout(repo: str | None) -> dict[str, Any]:
    """Facts about a FlashInfer source checkout: its driver script, version.txt and git commit."""
    out: dict[str, Any] = {"path": None, "exists": False, "driver": None, "version": None,
                           "commit": None}
    if not repo:
        return out
    path = os.path.abspath(os.path.expanduser(repo))
    out["path"] = path
    out["exists"] = os.path.isdir(path)
    driver = os.path.join(path, "benchmarks", "flashinfer_benchmark.py")
    out["driver"] = driver if os.path.isfile(driver) else None
    try:
        vt = os.path.join(path, "version.txt")
        if os.path.isfile(vt):
            out["version"] = open(vt).read().strip() or None
    except OSError:
        pass
    out["commit"] = git_head_commit(path)
    return out


# --------------------------------------------------------------------------- CUDA / CUPTI / nvcc


def cupti_fix_command(cuda_runtime: str | None, driver_cuda: str | None = None) -> str:
    """The pip command that installs the cupti-python matching this CUDA stack.

    CUPTI must not be newer than the CUDA the driver supports, and FlashInfer needs
    cupti-python >= 13, so the target is min(runtime, driver) major.minor:
    runtime 13.0, driver 13.0 -> `pip install 'cupti-python==13.0.*'`.
    """
    versions = [v for v in (major_minor(cuda_runtime), major_minor(driver_cuda)) if v]
    if not versions:
        return "pip install 'cupti-python>=13' (match it to your CUDA runtime: torch.version.cuda)"
    target = min(versions, key=_version_key)
    if _version_key(target)[0] < 13:
        return (f"none with pip alone: FlashInfer's CUPTI timer needs cupti-python>=13, i.e. a CUDA 13 "
                f"stack (driver >= 580, a cu13x torch); this stack is CUDA {target}. Upgrade it, or "
                f"run with --allow_cuda_events and say in the report that rows are CUDA-event timed")
    return f"pip install 'cupti-python=={target}.*'"


def cuda_stack() -> dict[str, str | None]:
    """CUDA versions the tool depends on: torch's runtime, the CUPTI wheels, nvcc."""
    out: dict[str, str | None] = {
        "cuda_runtime": None,
        "cuda_runtime_wheel": _dist_version("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13",
                                            "nvidia-cuda-runtime-cu12"),
        "nvidia_cuda_cupti": _dist_version("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13",
                                           "nvidia-cuda-cupti-cu12"),
        "cupti_python": _dist_version("cupti-python"),
    }
    try:
        import torch

        out["cuda_runtime"] = torch.version.cuda
    except Exception:
        pass
    return out


def nvcc_info() -> dict[str, str | None]:
    """Where nvcc is (FlashInfer's lookup order: FLASHINFER_NVCC, CUDA_HOME/CUDA_PATH, PATH) and
    its release, plus the ninja binary FlashInfer's JIT drives nvcc with."""
    out: dict[str, str | None] = {"nvcc": None, "nvcc_version": None, "ninja": None, "error": None}
    candidates = [os.environ.get("FLASHINFER_NVCC")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    candidates += [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    nvcc = next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
    out["nvcc"] = nvcc
    if nvcc:
        try:
            text = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                  timeout=30).stdout
            m = re.search(r"release (\d+\.\d+)", text)
            out["nvcc_version"] = m.group(1) if m else None
        except Exception as e:
            out["error"] = f"{type(e).__name__}: {e}"
    ninja = shutil.which("ninja")
    if ninja is None:
        try:
            import ninja as ninja_mod  # the pip "ninja" package ships the binary

            ninja = os.path.join(ninja_mod.BIN_DIR, "ninja")
        except Exception:
            ninja = None
    out["ninja"] = ninja
    return out


# --------------------------------------------------------------------------- GPU (NVML)


def _nvml_index(cuda_index: int) -> int | str:
    """The NVML index (or UUID) of CUDA device `cuda_index`, honouring CUDA_VISIBLE_DEVICES.
    (Assumes CUDA_DEVICE_ORDER=PCI_BUS_ID-compatible order, true on single-model hosts.)"""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return cuda_index
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if cuda_index >= len(entries):
        raise IndexError(f"CUDA_VISIBLE_DEVICES={visible} has no device {cuda_index}")
    e = entries[cuda_index]
    return int(e) if e.isdigit() else e


def driver_present() -> bool:
    """Whether an NVIDIA driver is visible without NVML (device node or nvidia-smi)."""
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def gpu_info(index: int = 0, samples: int = 3) -> dict[str, Any]:
    """GPU `index` (CUDA numbering) through NVML: name, compute capability, memory, clocks, power,
    utilization (max of `samples` readings 0.1 s apart) and the processes on it.

    On failure returns the same keys with None and "error": "<why>" (no GPU, no driver, no pynvml).
    """
    out: dict[str, Any] = {
        "index": index, "name": None, "compute_capability": None, "sm_count": None,
        "memory_gb": None, "memory_used_gb": None,
        "clocks_mhz": {"sm_max": None, "mem_max": None, "sm_current": None},
        "power_limit_w": None, "utilization_pct": None, "processes": None,
        "driver": None, "driver_cuda": None, "error": None,
    }
    try:
        import pynvml
    except Exception as e:
        out["error"] = f"nvidia-ml-py (pynvml) is not importable ({type(e).__name__}: {e})"
        out["driver_present"] = driver_present()
        return out
    try:
        pynvml.nvmlInit()
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    try:
        out["driver"] = _guard(lambda: _s(pynvml.nvmlSystemGetDriverVersion()))
        cuda_int = _guard(pynvml.nvmlSystemGetCudaDriverVersion)
        if cuda_int:
            out["driver_cuda"] = f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}"
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            out["error"] = "NVML sees 0 GPUs"
            return out
        which = _nvml_index(index)
        handle = (pynvml.nvmlDeviceGetHandleByIndex(which) if isinstance(which, int)
                  else pynvml.nvmlDeviceGetHandleByUUID(which))
        out["name"] = _s(pynvml.nvmlDeviceGetName(handle))
        cc = _guard(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle))
        if cc:
            out["compute_capability"] = f"{cc[0]}.{cc[1]}"
        mem = _guard(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
        if mem is not None:
            out["memory_gb"] = round(mem.total / 1e9, 1)
            out["memory_used_gb"] = round(mem.used / 1e9, 2)
        out["clocks_mhz"] = {
            "sm_max": _guard(lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            "mem_max": _guard(lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle,
                                                                       pynvml.NVML_CLOCK_MEM)),
            "sm_current": _guard(lambda: pynvml.nvmlDeviceGetClockInfo(handle,
                                                                       pynvml.NVML_CLOCK_SM)),
        }
        power = _guard(lambda: pynvml.nvmlDeviceGetPowerManagementLimit(handle))
        out["power_limit_w"] = round(power / 1000) if power else None
        utils = []
        for i in range(max(1, samples)):
            u = _guard(lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            if u is not None:
                utils.append(int(u))
            if i + 1 < samples:
                time.sleep(0.1)
        out["utilization_pct"] = max(utils) if utils else None
        out["processes"] = _gpu_processes(pynvml, handle)
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        _guard(pynvml.nvmlShutdown)
    return out


def _guard(fn):
    try:
        return fn()
    except Exception:
        return None


def _gpu_processes(pynvml, handle) -> list[dict[str, Any]] | None:
    procs: dict[int, dict[str, Any]] = {}
    seen = False
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(pynvml, getter, None)
        listed = _guard(lambda: fn(handle)) if fn else None
        if listed is None:
            continue
        seen = True
        for p in listed:
            used = getattr(p, "usedGpuMemory", None)
            procs[p.pid] = {
                "pid": int(p.pid),
                "used_memory_mb": round(used / 2**20) if isinstance(used, int) else None,
                "name": _guard(lambda: _s(pynvml.nvmlSystemGetProcessName(p.pid))),
            }
    return list(procs.values()) if seen else None


def sm_count_from_driver(index: int = 0) -> int | None:
    """SM count through the CUDA driver API (libcuda via ctypes: cuInit + cuDeviceGetAttribute).
    Unlike torch this creates no CUDA context, so recording the environment in the runner's
    parent process leaves the GPU untouched. Honours CUDA_VISIBLE_DEVICES like any CUDA program."""
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuInit(0) != 0:
            return None
        dev = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return None
        value = ctypes.c_int()
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
        if lib.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                    dev) != 0:
            return None
        return int(value.value)
    except Exception:
        return None


def torch_cuda(index: int = 0) -> dict[str, Any]:
    """What torch sees: its version, CUDA build, whether CUDA works, and the SM count (NVML does
    not report SMs). Initializes CUDA in this process, so call it after gpu_info()."""
    out: dict[str, Any] = {"torch": None, "cuda_build": None, "available": False,
                           "device_count": 0, "sm_count": None, "error": None}
    try:
        import torch

        out["torch"] = torch.__version__
        out["cuda_build"] = torch.version.cuda
        out["available"] = bool(torch.cuda.is_available())
        if out["available"]:
            out["device_count"] = torch.cuda.device_count()
            if index < out["device_count"]:
                out["sm_count"] = int(torch.cuda.get_device_properties(index).multi_processor_count)
            else:
                out["error"] = f"torch sees {out['device_count']} GPU(s); there is no GPU {index}"
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


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

        from ..run.results import RunSettings
        from ..run.timing import bench
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


# --------------------------------------------------------------------------- the record


def versions(flashinfer_repo: str | None = None, gpu: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """Versions of everything a number depends on (None where not installed / unknown)."""
    stack = cuda_stack()
    wheel = flashinfer_wheel()
    checkout = flashinfer_checkout(flashinfer_repo)
    return {
        "python": platform.python_version(),
        "torch": _dist_version("torch"),
        "cuda_runtime": stack["cuda_runtime"],
        "driver": (gpu or {}).get("driver"),
        "driver_cuda": (gpu or {}).get("driver_cuda"),
        "flashinfer_wheel": wheel["version"],
        "flashinfer_wheel_commit": wheel["commit"],
        "flashinfer_checkout": checkout["version"],
        "flashinfer_checkout_commit": checkout["commit"],
        "cupti_python": stack["cupti_python"],
        "nvidia_cuda_cupti": stack["nvidia_cuda_cupti"],
        "transformers": _dist_version("transformers"),
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
    if cupti and v.get("cuda_runtime") and major_minor(cupti) and _version_key(
            major_minor(cupti)) > _version_key(major_minor(v["cuda_runtime"]) or "0.0"):
        out.append(f"cupti-python {cupti} is newer than the CUDA runtime {v['cuda_runtime']}; "
                   f"fix: {cupti_fix_command(v['cuda_runtime'], v.get('driver_cuda'))}")
    return out


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


__all__ = [
    "collect",
    "gpu_info",
    "versions",
    "flashinfer_wheel",
    "flashinfer_checkout",
    "git_head_commit",
    "cuda_stack",
    "nvcc_info",
    "probe_timer",
    "torch_cuda",
    "sm_count_from_driver",
    "cupti_fix_command",
    "versions_match",
    "commits_match",
    "release_of",
    "major_minor",
    "version_warnings",
]
