"""--gpus: which GPUs a run spreads its cases over, one worker pinned to each.

In: the --gpus text ("0,1,2,3": CUDA device numbers as this process sees them, so through any
CUDA_VISIBLE_DEVICES it was started with). Out: the CUDA_VISIBLE_DEVICES value of each worker,
after NVML confirmed every one is the same GPU model (a number measured on one must stand for all).
"""

from __future__ import annotations

import os
from typing import Callable

from ..core.errors import UsageError

#: Reads the model names of the given CUDA device numbers (NVML; replaceable for tests).
NameReader = Callable[[list[int]], list[str]]


def parse_gpus(text: str) -> list[int]:
    """'0,1,3' -> [0, 1, 3]: distinct device numbers >= 0, each item a number (an empty one, as
    in '0,,1', is refused: it is a typo, never a device); raises UsageError."""
    items = [x.strip() for x in text.split(",")]
    numbers = [int(x) for x in items if x.isdigit()]
    if not items or len(numbers) != len(items):
        raise UsageError("--gpus", text, "give CUDA device numbers separated by commas, e.g. --gpus 0,1,2,3")
    if len(set(numbers)) != len(numbers):
        raise UsageError("--gpus", text, "names a GPU twice; give each device once, e.g. --gpus 0,1")
    return numbers


def visible_device_values(numbers: list[int]) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value that pins a worker to each CUDA device number: the entry of
    this process's CUDA_VISIBLE_DEVICES at that position, or the number itself."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return [str(n) for n in numbers]
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    out = []
    for n in numbers:
        if n >= len(entries):
            raise UsageError("--gpus", ",".join(map(str, numbers)), f"CUDA_VISIBLE_DEVICES={visible} "
                             f"shows {len(entries)} GPU(s), so there is no device {n}; choose from "
                             f"0 to {len(entries) - 1}")
        out.append(entries[n])
    return out


def nvml_names(numbers: list[int]) -> list[str]:
    """Model names of CUDA devices `numbers` through NVML (nvidia-ml-py, imported here only)."""
    from ..env.gpu import nvml_handle

    try:
        import pynvml
    except ImportError:
        raise UsageError("--gpus", ",".join(map(str, numbers)), "needs nvidia-ml-py to check that "
                         "the GPUs are one model: pip install nvidia-ml-py") from None
    pynvml.nvmlInit()
    try:
        names = []
        for n in numbers:
            name = pynvml.nvmlDeviceGetName(nvml_handle(pynvml, n))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names
    finally:
        pynvml.nvmlShutdown()


def check_gpus(text: str, read_names: NameReader | None = None) -> list[str]:
    """The workers' CUDA_VISIBLE_DEVICES values for --gpus `text`, once every GPU named is there
    and all are the same model; raises UsageError naming the odd one out."""
    numbers = parse_gpus(text)
    values = visible_device_values(numbers)
    try:
        names = (read_names or nvml_names)(numbers)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001  (NVML's errors: no driver, no such device)
        raise UsageError("--gpus", text, f"cannot be read through NVML ({type(e).__name__}: {e}); "
                         "give devices this machine has, e.g. --gpus 0,1 (nvidia-smi -L lists them)") from None
    odd = next((i for i, name in enumerate(names) if name != names[0]), None)
    if odd is not None:
        raise UsageError("--gpus", text, f"GPU {numbers[odd]} is a {names[odd]} but GPU {numbers[0]} "
                         f"is a {names[0]}; one run times one GPU model, so give GPUs of one model")
    return values


__all__ = ["NameReader", "check_gpus", "nvml_names", "parse_gpus", "visible_device_values"]
