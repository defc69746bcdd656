"""Probes of the GPU stack: CUDA versions, nvcc, the GPU through NVML, torch's view of it, and which
timer FlashInfer really uses.

Every probe is guarded: it returns None / an "error" string instead of raising. GPU facts come
from NVML *before* this process touches CUDA, so the idle check does not see the probe itself as a
competing process. Heavy modules (pynvml, torch, flashinfer) are imported inside the probes only,
so the doctor and the environment record cost nothing on a CPU machine.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Callable

from .versions import dist_version

#: A GPU busier than this (percent, max of a few samples) is not idle.
IDLE_UTILIZATION_PCT = 5


def cuda_stack() -> dict[str, str | None]:
    """CUDA versions the tool depends on: torch's runtime, the CUPTI wheels, nvcc."""
    out: dict[str, str | None] = {
        "cuda_runtime": None,
        "cuda_runtime_wheel": dist_version("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13",
                                            "nvidia-cuda-runtime-cu12"),
        "nvidia_cuda_cupti": dist_version("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13",
                                           "nvidia-cuda-cupti-cu12"),
        "cupti_python": dist_version("cupti-python"),
    }
    out["cuda_runtime"] = torch_cuda_version()
    return out


def torch_cuda_version() -> str | None:
    """The CUDA release torch was built with (`torch.version.cuda`), read from torch/version.py
    without importing torch (seconds, in a run whose process otherwise needs no torch); torch's
    own answer where that file cannot be read."""
    if "torch" not in sys.modules:
        try:
            spec = importlib.util.find_spec("torch")
            origin = spec.origin if spec is not None else None
        except (ImportError, ValueError):
            origin = None
        if origin:
            try:
                with open(os.path.join(os.path.dirname(origin), "version.py")) as f:
                    text = f.read()
                m = re.search(r"^cuda(?::\s*[^=]+)?\s*=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
                if m:
                    return m.group(1) or m.group(2) or None
            except OSError:
                pass
    try:
        import torch

        return torch.version.cuda
    except Exception:  # noqa: BLE001  (no torch: no CUDA runtime to name)
        return None


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


def _module_importable(name: str) -> bool:
    """Whether `import name` would find it (a missing parent package counts as no)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _tileiras_wheel_bin() -> str | None:
    """nvidia/cu13/bin of the nvidia-cuda-tileiras wheel (what `cuda-tile[tileiras]` installs)."""
    try:
        spec = importlib.util.find_spec("nvidia.cu13")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(locations[0], "bin") if locations else None


def default_toolkit_bins() -> list[str]:
    """bin/ of /usr/local/cuda, then of /usr/local/cuda-X.Y, newest first."""
    return [os.path.join(d, "bin") for d in
            ["/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]]


def tileiras_info() -> dict[str, Any]:
    """The tileiras compiler FlashInfer's cutile backend compiles with, looked up in cuda-tile's
    own order (cuda/tile/_compile.py `_find_compiler_bin`, cuda-tile 1.7.0): the
    nvidia-cuda-tileiras wheel, PATH, $CUDA_HOME/bin, the default CUDA toolkit folders; plus the
    cuda-tile package that drives it (module cuda.tile)."""
    places: list[tuple[str, str]] = []
    wheel_bin = _tileiras_wheel_bin()
    if wheel_bin:
        places.append(("the nvidia-cuda-tileiras wheel", wheel_bin))
    places.append(("PATH", os.environ.get("PATH", "")))
    if os.environ.get("CUDA_HOME"):
        places.append(("$CUDA_HOME/bin", os.path.join(os.environ["CUDA_HOME"], "bin")))
    places += [(folder, folder) for folder in default_toolkit_bins()]
    found = next(((where, path) for where, folder in places
                  if (path := shutil.which("tileiras", path=folder))), (None, None))
    return {"tileiras": found[1], "found_in": found[0],
            "cuda_tile": dist_version("cuda-tile"), "cuda_tile_importable": _module_importable("cuda.tile")}


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


def nvml_handle(pynvml: Any, cuda_index: int) -> Any:
    """NVML's handle of CUDA device `cuda_index` (after nvmlInit), CUDA_VISIBLE_DEVICES honoured."""
    which = _nvml_index(cuda_index)
    return (pynvml.nvmlDeviceGetHandleByIndex(which) if isinstance(which, int)
            else pynvml.nvmlDeviceGetHandleByUUID(which))


def _nvml_read(index: int, read: Callable[[Any, Any], Any]) -> Any:
    """`read(pynvml, handle)` for CUDA device `index`, or None where NVML cannot say (no pynvml,
    no driver, no such device, CUDA_VISIBLE_DEVICES hiding every GPU). No torch import and no
    CUDA context: a tenth of a second where torch.cuda takes seconds."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None and not os.environ["CUDA_VISIBLE_DEVICES"].strip():
        return None  # an empty CUDA_VISIBLE_DEVICES hides every GPU from CUDA
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  (not installed, a broken install, no driver)
        return None
    try:
        return read(pynvml, nvml_handle(pynvml, index))
    except Exception:  # noqa: BLE001
        return None
    finally:
        _guard(pynvml.nvmlShutdown)


def nvml_gpu(index: int = 0) -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of CUDA device `index` through NVML, or None (`_nvml_read`)."""
    def read(pynvml: Any, handle: Any) -> tuple[str, tuple[int, int]]:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return _s(pynvml.nvmlDeviceGetName(handle)), (int(major), int(minor))

    return _nvml_read(index, read)


def nvml_memory_bytes(index: int = 0) -> int | None:
    """Total memory of CUDA device `index` in bytes through NVML, or None (`_nvml_read`)."""
    return _nvml_read(index, lambda pynvml, handle: int(pynvml.nvmlDeviceGetMemoryInfo(handle).total))


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
        handle = nvml_handle(pynvml, index)
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
        listed = _guard(lambda fn=fn: fn(handle)) if fn else None
        if listed is None:
            continue
        seen = True
        for p in listed:
            used = getattr(p, "usedGpuMemory", None)
            procs[p.pid] = {
                "pid": int(p.pid),
                "used_memory_mb": round(used / 2**20) if isinstance(used, int) else None,
                "name": _guard(lambda p=p: _s(pynvml.nvmlSystemGetProcessName(p.pid))),
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


def parse_compute_capability(cc: Any) -> tuple[int, int] | None:
    """A recorded compute capability as (major, minor), from "9.0", [9, 0] or 90 (None if none)."""
    try:
        if isinstance(cc, (list, tuple)) and len(cc) == 2:
            return int(cc[0]), int(cc[1])
        if isinstance(cc, str) and "." in cc:
            major, minor = cc.split(".", 1)
            return int(major), int(minor)
        if isinstance(cc, (int, str)) and not isinstance(cc, bool):
            return int(cc) // 10, int(cc) % 10
    except ValueError:
        pass
    return None
