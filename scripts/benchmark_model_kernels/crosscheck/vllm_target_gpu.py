"""vLLM's platform made to answer as a target GPU, so vLLM's own kernel selection can be asked on a CPU.

vLLM decides its kernels while a model is constructed, from what `current_platform` says about the
GPU (vllm/platforms/interface.py: Platform.get_device_capability, is_device_capability_family, ...)
and from a few compiled capability queries of its CUTLASS ops. `install_target_gpu` makes the
process's platform a CUDA platform of the target's compute capability before any of vLLM's model
code is imported, so every selection rule, including those vLLM evaluates at import (e.g.
vllm/model_executor/layers/quantization/utils/w8a8_utils.py: CUTLASS_BLOCK_FP8_SUPPORTED,
online/fp8.py: Fp8PerTensorOnlineLinearMethod.activation_quant_key), sees that GPU. Nothing runs a
kernel: the patches only let construction proceed. Each is listed in `TARGET_GPU_PATCHES`.

It changes the process for good, so it runs in a process of its own (`vllm_dispatch` starts one per
target GPU); never call it in the process that plans or times.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

#: The target GPUs the dispatch questions are asked for, as vLLM's compute capability.
TARGET_GPUS: dict[str, tuple[int, int]] = {"sm90": (9, 0), "sm100": (10, 0), "sm120": (12, 0)}

#: What `install_target_gpu` changes, in words (the fidelity table prints it).
TARGET_GPU_PATCHES = (
    "current_platform is vLLM's NonNvmlCudaPlatform with the target's compute capability and a node "
    "of 64 GPUs (vllm/platforms/cuda.py; nothing asks the driver)",
    "the compiled CUTLASS capability queries answer as their source does for the CUDA version torch "
    "was built with (csrc/quantization/w8a8/cutlass/scaled_mm_entry.cu: cutlass_scaled_mm_supports_fp8, "
    "cutlass_scaled_mm_supports_block_fp8, cutlass_group_gemm_supported; "
    "csrc/quantization/fp4/nvfp4_scaled_mm_entry.cu: cutlass_scaled_mm_supports_fp4)",
    "vllm.vllm_flash_attn (FlashAttention's compiled extension, which a CPU cannot load) is an empty "
    "module; no GEMM or MoE selection calls it",
    "vLLM's compiled ops (torch.ops._C.*, _moe_C.*: the CUDA extension, which a CPU cannot load) are "
    "placeholders that refuse to run: layer constructors bind them (e.g. SiluAndMul), and a selection "
    "that calls one is refused with its name",
    "the CUDA runtime calls of constructors (torch.cuda.Stream, Event, current_stream, "
    "get_device_capability, get_device_properties) answer for the target GPU without a device "
    "(its SM count from crosscheck/vllm_platform.py SM_COUNT; another GPU's properties are refused)",
    "attention layers take the CPU platform's attention backends (and MLA prefill backend): they hold "
    "no GEMM weight, and vLLM's GPU attention backends query the device in their constructors",
    "FlashInfer counts as usable (VLLM_HAS_FLASHINFER_CUBIN=1: a GPU install has its cubins or a "
    "JIT toolchain; vllm/utils/flashinfer.py: has_flashinfer)",
)


def _cuda_version() -> int:
    """CUDA_VERSION of the build (12080 for 12.8), from the CUDA torch was built with."""
    import torch

    text = torch.version.cuda or "0.0"
    major, minor = (int(x) for x in text.split(".")[:2])
    return major * 1000 + minor * 10


def _cutlass_answers(cuda: int) -> dict[str, Any]:
    """The compiled capability queries of vllm._custom_ops, as their C++ source answers them."""

    def supports_fp8(cap: int) -> bool:
        return (cap >= 90 and cuda >= 12000) or (cap == 89 and cuda >= 12040)

    def supports_block_fp8(cap: int) -> bool:
        return (cap >= 100 and cuda >= 12080) or (90 <= cap < 100 and cuda >= 12000)

    def group_gemm(cap: int) -> bool:
        # vllm/_custom_ops.py: cutlass_group_gemm_supported returns False outside [90, 110) first.
        if cap < 90 or cap >= 110:
            return False
        return cuda >= (12080 if cap >= 100 else 12030)

    def supports_fp4(cap: int) -> bool:
        return 100 <= cap < 130 and cuda >= 12080

    return {"cutlass_scaled_mm_supports_fp8": supports_fp8,
            "cutlass_scaled_mm_supports_block_fp8": supports_block_fp8,
            "cutlass_group_gemm_supported": group_gemm,
            "cutlass_scaled_mm_supports_fp4": supports_fp4}


class _AbsentCompiledOp:
    """A compiled vLLM op bound by a constructor; calling it (or one of its overloads) refuses."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, overload: str) -> _AbsentCompiledOp:
        if overload.startswith("__"):
            raise AttributeError(overload)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.name} is vLLM's compiled op, which is not loaded on this CPU")


def _placeholder_compiled_ops() -> None:
    """torch.ops.<vLLM namespace>.<op> answers a placeholder where the op is not registered."""
    import torch._ops

    namespace = torch._ops._OpNamespace
    real = namespace.__getattr__

    def lookup(self: Any, op_name: str) -> Any:
        try:
            return real(self, op_name)
        except AttributeError:
            if not self.name.startswith("_") or op_name.startswith("__"):
                raise
            return _AbsentCompiledOp(f"torch.ops.{self.name}.{op_name}")

    namespace.__getattr__ = lookup  # type: ignore[method-assign]


class _NoStream:
    """A CUDA stream or event a constructor keeps for its forward; none runs here."""

    cuda_stream = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _deviceless_cuda_runtime(capability: tuple[int, int]) -> None:
    """torch.cuda's calls a constructor makes, answered for a GPU of `capability` that is not there."""
    from types import SimpleNamespace

    import torch

    from .vllm_platform import SM_COUNT

    def properties(device: Any = None) -> Any:
        if capability not in SM_COUNT:
            raise RuntimeError(f"a constructor reads the GPU's properties, not known here for sm_"
                               f"{capability[0]}{capability[1]}")
        return SimpleNamespace(name=f"target GPU sm_{capability[0]}{capability[1]}", major=capability[0],
                               minor=capability[1], multi_processor_count=SM_COUNT[capability])

    torch.cuda.Stream = _NoStream  # type: ignore[misc, assignment]
    torch.cuda.Event = _NoStream  # type: ignore[misc, assignment]
    torch.cuda.current_stream = lambda *args, **kwargs: _NoStream()  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda *args, **kwargs: capability  # type: ignore[assignment]
    torch.cuda.get_device_properties = properties  # type: ignore[assignment]


def _empty_module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def install_target_gpu(capability: tuple[int, int]) -> None:
    """Make this process's vLLM answer as a CUDA GPU of `capability` (see the module docstring).
    Call it before anything imports vllm.model_executor."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_HAS_FLASHINFER_CUBIN", "1")
    import vllm.platforms as platforms
    from vllm.platforms.interface import DeviceCapability

    cpu_platform = platforms.current_platform
    # vllm/platforms/cuda.py imports the compiled ops for registration only; the CPU cannot load
    # them (no libcuda). The platform class itself needs none of them.
    real = sys.modules.get("vllm._C_stable_libtorch")
    sys.modules["vllm._C_stable_libtorch"] = _empty_module("vllm._C_stable_libtorch")
    try:
        import vllm.platforms.cuda as cuda
    finally:
        if real is None:
            del sys.modules["vllm._C_stable_libtorch"]
        else:
            sys.modules["vllm._C_stable_libtorch"] = real
    from vllm.platforms.cpu import CpuPlatform

    class AbsentCudaGpu(cuda.NonNvmlCudaPlatform):  # type: ignore[misc]
        """vLLM's CUDA platform for a GPU that is not there."""

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(*capability)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return f"target GPU sm_{capability[0]}{capability[1]}"

        @classmethod
        def device_count(cls) -> int:
            return 64

        @classmethod
        def get_attn_backend_cls(cls, selected_backend: Any, attn_selector_config: Any, *args: Any,
                                 **kwargs: Any) -> Any:
            if getattr(attn_selector_config, "use_sparse", False):
                attn_selector_config = attn_selector_config._replace(use_sparse=False)
            return CpuPlatform.get_attn_backend_cls(selected_backend, attn_selector_config, *args, **kwargs)

        @classmethod
        def get_mla_prefill_backend_cls(cls, mla_selector_config: Any) -> Any:
            return CpuPlatform.get_mla_prefill_backend_cls(mla_selector_config)

    # Every module holds the same platform object (vllm/platforms/__init__.py: __getattr__), so
    # its class is what changes.
    cpu_platform.__class__ = AbsentCudaGpu
    from vllm import _custom_ops

    _placeholder_compiled_ops()
    _deviceless_cuda_runtime(capability)
    for name, answer in _cutlass_answers(_cuda_version()).items():
        setattr(_custom_ops, name, answer)
    sys.modules.setdefault("vllm.vllm_flash_attn", _empty_module(
        "vllm.vllm_flash_attn", FA2_AVAILABLE=False, FA3_AVAILABLE=False,
        compile_flash_attn_varlen_func_from_specs=None, flash_attn_varlen_func=None,
        get_scheduler_metadata=None, fa_version_unsupported_reason=None, is_fa_version_supported=None))


__all__ = ["TARGET_GPUS", "TARGET_GPU_PATCHES", "install_target_gpu"]
