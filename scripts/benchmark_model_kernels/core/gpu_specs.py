"""GPU names -> compute capability and memory, so `--assume_cc h200` / `--gpu h200` say both.

Compute capabilities from NVIDIA's CUDA GPU list (https://developer.nvidia.com/cuda-gpus); memory
from each product's NVIDIA spec page (the `source` of each row), in GiB: HBM stacks come in binary
sizes, so the "141 GB" of the H200 page is ~141 GiB. Where a machine's NVML reading is on record
(`nvidia-smi` memory.total, what vLLM's utilization applies to) it is the row's memory instead.
A name is matched without case, blanks, dashes or underscores ("RTX PRO 6000" = "rtx-pro-6000").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UsageError


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as the preview and the case filter need it."""

    name: str
    """How NVIDIA names it, e.g. "H200"."""
    compute_capability: tuple[int, int]
    memory_gib: float
    source: str
    """Where the memory figure is from."""

    @property
    def cc_text(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"


_MIB = 1 / 1024  # GiB per MiB
GPU_SPECS: dict[str, GpuSpec] = {s.name.lower(): s for s in (
    GpuSpec("A100-40GB", (8, 0), 40.0, "https://www.nvidia.com/en-us/data-center/a100/ (A100 40GB)"),
    GpuSpec("A100-80GB", (8, 0), 80.0, "https://www.nvidia.com/en-us/data-center/a100/ (A100 80GB)"),
    GpuSpec("L40S", (8, 9), 48.0, "https://www.nvidia.com/en-us/data-center/l40s/ (48GB GDDR6)"),
    GpuSpec("H100", (9, 0), 81559 * _MIB, "nvidia-smi memory.total 81559 MiB of an H100 80GB HBM3 "
            "(https://www.nvidia.com/en-us/data-center/h100/: 80GB, SXM)"),
    GpuSpec("H100-NVL", (9, 0), 94.0, "https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL: 94GB)"),
    GpuSpec("H20", (9, 0), 96.0, "NVIDIA publishes no spec page for the H20; 96GB HBM3 as announced in "
            "November 2023 (a 141GB variant exists: pass --gpu_mem_gb 141 for it)"),
    GpuSpec("H200", (9, 0), 143771 * _MIB, "nvidia-smi memory.total 143771 MiB "
            "(tests/fixtures/driver/nvidia-smi.txt; https://www.nvidia.com/en-us/data-center/h200/: 141GB)"),
    GpuSpec("B200", (10, 0), 183359 * _MIB, "nvidia-smi memory.total 183359 MiB of a B200 "
            "(https://www.nvidia.com/en-us/data-center/hgx/: HGX B200 1.4TB over 8 GPUs)"),
    GpuSpec("B300", (10, 3), 288.0, "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B300: 2.3TB over "
            "8 GPUs, 288GB HBM3e each)"),
    GpuSpec("GB200", (10, 0), 186.0, "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (13.4TB HBM3e "
            "over 72 GPUs)"),
    GpuSpec("GB300", (10, 3), 288.0, "https://www.nvidia.com/en-us/data-center/gb300-nvl72/ (20.7TB HBM3e "
            "over 72 GPUs)"),
    GpuSpec("RTX-PRO-6000", (12, 0), 96.0, "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-"
            "server-edition/ (96GB GDDR7)"),
)}
#: Names that cover parts of different memory: the user picks one.
AMBIGUOUS = {"a100": ("A100-40GB", "A100-80GB")}


def _key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text.strip().lower()).removeprefix("nvidia")


_BY_KEY = {_key(name): spec for name, spec in GPU_SPECS.items()}


def known_names() -> str:
    """The names `gpu_spec` takes, for an error line."""
    return ", ".join(s.name for s in GPU_SPECS.values())


def looks_like_cc(text: str) -> bool:
    """'9.0', '10.3': a compute capability, not a GPU name."""
    return re.fullmatch(r"\s*\d+\.\d+\s*", text or "") is not None


def gpu_spec(text: str, flag: str = "--gpu") -> GpuSpec:
    """The GPU `text` names (e.g. "h200", "NVIDIA H200", "rtx pro 6000"), or a one-line UsageError
    naming the known ones."""
    key = _key(text or "")
    if key in AMBIGUOUS:
        raise UsageError(flag, text, f"names GPUs of different memory; give one of {', '.join(AMBIGUOUS[key])}")
    spec = _BY_KEY.get(key) or _BY_KEY.get(key.removesuffix("sxm"))
    if spec is None:
        raise UsageError(flag, text, f"unknown GPU; known: {known_names()} (or give MAJOR.MINOR to "
                         "--assume_cc and the memory to --gpu_mem_gb)")
    return spec


__all__ = ["AMBIGUOUS", "GPU_SPECS", "GpuSpec", "gpu_spec", "known_names", "looks_like_cc"]
