"""GPU detection through NVML (env/gpu.py nvml_gpu, run/flags.py detect_gpu): which device it
reads under CUDA_VISIBLE_DEVICES, and torch answering where NVML cannot. A stand-in pynvml module
replays NVML's answers (plumbing only; the H200 runs read the real one)."""

from __future__ import annotations

import sys
import types

from benchmark_model_kernels.env.gpu import nvml_gpu
from benchmark_model_kernels.run import flags


def stand_in_pynvml(names: dict[object, str], fail_init: bool = False) -> types.ModuleType:
    nv = types.ModuleType("pynvml")

    def init():
        if fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def by_key(key):
        if key not in names:
            raise RuntimeError("Invalid Argument")
        return key

    nv.nvmlInit, nv.nvmlShutdown = init, lambda: None
    nv.nvmlDeviceGetHandleByIndex = nv.nvmlDeviceGetHandleByUUID = by_key
    nv.nvmlDeviceGetName = lambda h: names[h].encode()
    nv.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0) if "H200" in names[h] else (10, 0)
    return nv


def test_device_0_is_the_first_visible_one(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml({0: "NVIDIA H200", 1: "NVIDIA B200"}))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml_gpu(0) == ("NVIDIA H200", (9, 0))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert nvml_gpu(0) == ("NVIDIA B200", (10, 0))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hides every GPU from CUDA
    assert nvml_gpu(0) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # no such GPU
    assert nvml_gpu(0) is None


def test_without_nvml_torch_answers(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml({}, fail_init=True))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml_gpu(0) is None
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True, get_device_name=lambda i: "NVIDIA H100",
                                       get_device_capability=lambda i: (9, 0))
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert flags.detect_gpu() == ("NVIDIA H100", (9, 0))


def test_nvml_answers_before_torch_is_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml({0: "NVIDIA H200"}))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)  # importing torch would raise
    assert flags.detect_gpu() == ("NVIDIA H200", (9, 0))


def test_torch_cuda_release_is_read_without_importing_torch(tmp_path, monkeypatch):
    from benchmark_model_kernels.env.gpu import torch_cuda_version

    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('importing this torch is what the reader avoids')\n")
    (pkg / "version.py").write_text("from typing import Optional\n__version__ = '2.11.0+cu130'\n"
                                    "cuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert torch_cuda_version() == "13.0"
    (pkg / "version.py").write_text("cuda: Optional[str] = None\n")  # a CPU build
    assert torch_cuda_version() is None
