"""The class vLLM builds on the target GPU, built on a CPU: vLLM's platform-split model families.

In vLLM 0.33 some model families are packages with one implementation per platform,
`vllm/models/<family>/{nvidia,amd,cpu,...}`, and the package's `__init__` picks one from
`vllm.platforms.current_platform` when it is imported (vllm/models/deepseek_v32/__init__.py: the
nvidia class on CUDA, "XPU and CPU keep the generic implementation"). A GPU deployment runs the
CUDA class, so that is the one built here: the package is imported once more while
`current_platform` is `CudaView`, vLLM's CPU platform answering as CUDA with the target GPU's
compute capability and name (everything else stays the CPU platform's, so every buffer and weight
stays on the CPU or meta), and the model is constructed under the same view with the CUDA runtime
calls a constructor makes (streams, events, device capability and properties) answered for that
GPU without a device (`cuda_construction`). Nothing here runs a kernel, and every patch is undone
when the build ends; the modules imported for the CUDA class keep the view they bound (they serve
only that class).

A family that is one module (vllm/model_executor/models/<name>.py) builds the same class on every
platform; it is built as before, on vLLM's CPU platform.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

#: Where vLLM 0.33 keeps the platform-split families: a package per family.
SPLIT_PACKAGE_PREFIX = "vllm.models."

#: Streaming multiprocessors by compute capability, for constructors that size a kernel's grid from
#: `get_device_properties(...).multi_processor_count`: H100 / H200 (sm_90) 132, B200 (sm_100) 148.
#: Another capability's count is not known here, and a constructor asking for it is refused.
SM_COUNT = {(9, 0): 132, (10, 0): 148}


@dataclass(frozen=True)
class TargetGpu:
    """The GPU a plan is for: the one detected, or the `--assume_cc` stand-in."""

    name: str
    """e.g. "NVIDIA H200", or "assumed sm_90"."""
    cc: tuple[int, int]
    """Compute capability (major, minor)."""

    @property
    def label(self) -> str:
        """e.g. "sm_90 (NVIDIA H200)"."""
        sm = f"sm_{self.cc[0]}{self.cc[1]}"
        return sm if self.name == f"assumed {sm}" else f"{sm} ({self.name})"


def target_gpu(assume_cc: tuple[int, int] | None) -> TargetGpu | None:
    """The GPU `--assume_cc` names, else the GPU NVML sees (no torch import), else None."""
    if assume_cc is not None:
        return TargetGpu(f"assumed sm_{assume_cc[0]}{assume_cc[1]}", assume_cc)
    from ..env.gpu import nvml_gpu

    found = nvml_gpu(0)
    return TargetGpu(found[0], found[1]) if found is not None else None


@dataclass(frozen=True)
class BuiltClass:
    """The class a build constructs, and for which platform."""

    model_class: Any
    platform: str
    """e.g. "CUDA class for sm_90 (NVIDIA H200)", or "vLLM's CPU platform"."""
    split: bool
    """The family is platform-split and this is its CUDA class."""

    @property
    def name(self) -> str:
        """The class's module and name, e.g. "vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM"."""
        return f"{self.model_class.__module__}.{self.model_class.__qualname__}"


#: The GPU the CUDA view answers for: set for the length of one build.
_target: list[TargetGpu | None] = [None]


@functools.cache
def cuda_view() -> Any:
    """The one `CudaView` instance (modules bind it at import, so it must stay the same object)."""
    from vllm.platforms.cpu import CpuPlatform
    from vllm.platforms.interface import DeviceCapability, PlatformEnum

    class CudaView(CpuPlatform):
        """vLLM's CPU platform answering as CUDA on the target GPU (vllm/platforms/interface.py:
        Platform.is_cuda and is_cuda_alike read `_enum`; has_device_capability,
        is_device_capability and is_device_capability_family read get_device_capability)."""

        _enum = PlatformEnum.CUDA

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            gpu = _target[0]
            return DeviceCapability(*gpu.cc) if gpu is not None else None

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            gpu = _target[0]
            return gpu.name if gpu is not None else "CUDA GPU (not named: pass --assume_cc)"

    return CudaView()


def _registry_entry(arch: str) -> tuple[str, str] | None:
    """(module, class name) vLLM's registry loads `arch` from (vllm/model_executor/models/registry.py:
    _LazyRegisteredModel), or None for a class registered another way."""
    from vllm.model_executor.models.registry import ModelRegistry

    entry = ModelRegistry.models.get(arch)
    module, name = getattr(entry, "module_name", None), getattr(entry, "class_name", None)
    return (module, name) if module and name else None


@contextlib.contextmanager
def _platform(view: Any) -> Iterator[None]:
    import vllm.platforms as platforms

    real = platforms.current_platform
    platforms.current_platform = view
    try:
        yield
    finally:
        platforms.current_platform = real


def class_for_target(arch: str, generic: Any, gpu: TargetGpu | None) -> BuiltClass:
    """The class vLLM resolves for `arch` on CUDA: for a platform-split family its package's
    export, imported again under `CudaView`; else `generic`, the class the CPU platform resolved."""
    entry = _registry_entry(arch)
    if entry is None or not entry[0].startswith(SPLIT_PACKAGE_PREFIX):
        return BuiltClass(generic, "vLLM's CPU platform (the family has one class for every platform)", False)
    module, name = entry
    saved = sys.modules.pop(module, None)
    _target[0] = gpu
    try:
        with _platform(cuda_view()):
            cls = getattr(importlib.import_module(module), name)
    finally:
        if saved is not None:
            sys.modules[module] = saved
    where = f"for {gpu.label}" if gpu is not None else "(no GPU detected or named: pass --assume_cc)"
    return BuiltClass(cls, f"CUDA class {where}", True)


class _Stream:
    """A CUDA stream or event a constructor keeps for its forward; none runs here."""

    cuda_stream = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _device_properties(device: Any = None) -> Any:
    """`torch.cuda.get_device_properties` of the target GPU, as far as it is known."""
    gpu = _target[0]
    if gpu is None:
        raise RuntimeError("the model's constructor reads the GPU's properties; name the GPU with --assume_cc")
    if gpu.cc not in SM_COUNT:
        raise RuntimeError(f"the model's constructor reads the GPU's properties, not known here for sm_"
                           f"{gpu.cc[0]}{gpu.cc[1]} (known: " + ", ".join(f"sm_{a}{b}" for a, b in SM_COUNT) + ")")
    return SimpleNamespace(name=gpu.name, major=gpu.cc[0], minor=gpu.cc[1], multi_processor_count=SM_COUNT[gpu.cc])


def _device_capability(device: Any = None) -> tuple[int, int]:
    gpu = _target[0]
    if gpu is None:
        raise RuntimeError("the model's constructor reads the GPU's compute capability; name it with --assume_cc")
    return gpu.cc


@contextlib.contextmanager
def cuda_construction(built: BuiltClass, gpu: TargetGpu | None) -> Iterator[None]:
    """While a CUDA class is constructed: `current_platform` is `CudaView` and the CUDA runtime
    calls of constructors (torch.cuda.Stream, Event, current_stream, get_device_capability,
    get_device_properties) answer for `gpu` without a device. A generic class is built untouched."""
    if not built.split:
        yield
        return
    import torch

    patched = {"Stream": _Stream, "Event": _Stream, "current_stream": lambda *a, **k: _Stream(),
               "get_device_capability": _device_capability, "get_device_properties": _device_properties}
    saved = {name: getattr(torch.cuda, name) for name in patched}
    _target[0] = gpu
    try:
        for name, value in patched.items():
            setattr(torch.cuda, name, value)
        with _platform(cuda_view()):
            yield
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


__all__ = ["SPLIT_PACKAGE_PREFIX", "SM_COUNT", "TargetGpu", "BuiltClass", "target_gpu", "cuda_view",
           "class_for_target", "cuda_construction"]
