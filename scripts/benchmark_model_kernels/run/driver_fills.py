"""The K/V cache of a FlashInfer attention case drawn on the GPU instead of the CPU.

FlashInfer's driver fills the paged K/V cache of its decode and paged-prefill routines on the CPU and
then copies it (benchmarks/routines/attention.py at release-v0.6.18, testBatchDecodeWithPagedKVCacheWrapper
and testBatchPrefillWithPagedKVCacheWrapper: `kv_cache = torch.randn(size=kv_cache_shape,
dtype=kv_init_dtype).to(device)`). On the H200 machine a Llama-3.1-8B decode case at M=8 over
32768 tokens (537 M elements) spent about 18 s in that fill and a Qwen3-30B-A3B one at M=64 about
60 s, for a kernel of microseconds. Its other routines already draw on the device
(the ragged prefill's k and v, the MLA caches: `device=device`).

The worker runs the driver in-process, so `gpu_fills` can, for the one driver call of an attention
case, give the routine module a `torch` whose `randn` and `rand` draw a call that names no device, no
output tensor and no generator, with at least `min_numel` elements, on the GPU: the same
distribution (a standard normal, or uniform, rounded to the same dtype) from torch's CUDA generator,
which the driver's get_device seeds as it seeds the CPU's (flashinfer.testing.utils.set_seed:
torch.manual_seed). The driver's `device` is torch.device("cuda"), the current device, where the
draw lands, so its `.to(device)` is a no-op. Every other name of that `torch`, and every smaller
call, is torch's own, so a cell below `min_numel` is the driver's byte for byte (a cross-check of
the driver as released); a routed draw leaves the CPU generator where it was, so the page tables
the driver permutes after it (`torch.randperm`) are another sample of the same distribution. Each
routed draw is printed (the worker's stdout is the case log), returned and noted on the row
(`fill_note`); --attention_cpu_fill runs the driver's own fill at every size.

Only the routine module's name is replaced (as driver_capture.py replaces `bench_gpu_time`), so
FlashInfer's own code and any other thread keep torch's functions; the replacement is undone when
the block ends, however it ends. The worker runs one driver call at a time; a lock keeps two
threads of one process from interleaving their replacements.
"""

from __future__ import annotations

import contextlib
import importlib
import operator
import threading
from dataclasses import asdict, dataclass
from typing import Any, Iterator

#: The driver module whose routines fill the K/V cache on the CPU.
ATTENTION_MODULE = "routines.attention"
#: Elements from which a device-less draw goes to the GPU: 4 M (8 MiB of BF16, tens of milliseconds
#: on one CPU core). Below it the driver's own fill is kept: Llama-3.1-8B decode at M=1 over 1024 tokens
#: (2 M elements) and every M=1, 1024-token cell of a model with fewer KV heads.
GPU_FILL_MIN_NUMEL = 1 << 22
_lock = threading.RLock()


@dataclass(frozen=True)
class DeviceFill:
    """One draw made on the device instead of the CPU."""

    function: str
    """"randn" or "rand"."""
    shape: tuple[int, ...]
    dtype: str
    """e.g. "torch.bfloat16"."""
    device: str
    """Where it was drawn, e.g. "cuda:0"."""

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "shape": list(self.shape)}


def draw_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...] | None:
    """The shape a `torch.randn(*args, **kwargs)` call draws (sizes as separate ints, one
    sequence, or `size=`), or None when it is not a plain shape of ints."""
    if "size" in kwargs:
        if args:
            return None
        size = kwargs["size"]
    elif len(args) == 1 and isinstance(args[0], (tuple, list)):  # torch.Size is a tuple
        size = args[0]
    else:
        size = args
    if isinstance(size, int):
        size = (size,)
    try:
        return tuple(operator.index(d) for d in size)
    except TypeError:
        return None


def routed_shape(args: tuple[Any, ...], kwargs: dict[str, Any], min_numel: int,
                 default_device: str = "cpu") -> tuple[int, ...] | None:
    """The shape when a draw is to go to the device: it names no device (or None), no `out`,
    no `generator`, no pinned memory and no other layout, torch's default device is the CPU, and
    it has at least `min_numel` elements; else None (torch draws it as called)."""
    if any(kwargs.get(k) is not None for k in ("device", "out", "generator")) or kwargs.get("pin_memory"):
        return None
    if kwargs.get("layout") is not None and str(kwargs["layout"]) != "torch.strided":
        return None
    if default_device != "cpu":
        return None  # torch.set_default_device already sends device-less draws elsewhere
    shape = draw_shape(args, kwargs)
    if shape is None or any(d < 0 for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return shape if n >= min_numel else None


class _TorchDrawingOn:
    """torch, but for `randn` and `rand` calls that `routed_shape` sends to `device`: the draws the
    routines make with a size and an optional device and dtype (`torch.randint` draws only the
    batch's sequence lengths there, `torch.randperm` one sequence's pages)."""

    def __init__(self, torch: Any, device: Any, min_numel: int, fills: list[DeviceFill]):
        self._torch, self._device, self._min_numel, self._fills = torch, device, min_numel, fills

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def randn(self, *args: Any, **kwargs: Any) -> Any:
        return self._draw("randn", args, kwargs)

    def rand(self, *args: Any, **kwargs: Any) -> Any:
        return self._draw("rand", args, kwargs)

    def _draw(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        draw = getattr(self._torch, name)
        default = self._torch.get_default_device() if hasattr(self._torch, "get_default_device") else "cpu"
        shape = routed_shape(args, kwargs, self._min_numel, str(getattr(default, "type", default)))
        if shape is None:
            return draw(*args, **kwargs)
        out = draw(*args, **{**kwargs, "device": self._device})
        fill = DeviceFill(name, shape, str(out.dtype), str(out.device))
        self._fills.append(fill)
        print(fill_log_line(fill), flush=True)  # the worker's stdout is the case log
        return out


@contextlib.contextmanager
def gpu_fills(min_numel: int = GPU_FILL_MIN_NUMEL, device: Any = None,
              module_name: str = ATTENTION_MODULE) -> Iterator[list[DeviceFill]]:
    """Within the block, the `randn`/`rand` draws of `module_name`'s code that `routed_shape`
    admits are made on `device` (default: the current CUDA device) and appended to the yielded
    list. Nothing is replaced where the module does not import, has no `torch` of its own, or
    (default device) no CUDA device is there: the driver then fills as it always does."""
    fills: list[DeviceFill] = []
    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001  (the driver call meets the same import failure itself)
        yield fills
        return
    import torch

    if device is None:
        if not torch.cuda.is_available():
            yield fills
            return
        device = torch.device("cuda", torch.cuda.current_device())
    with _lock:
        original = getattr(module, "torch", None)
        if original is not torch:  # no torch of its own, or replaced already
            yield fills
            return
        module.torch = _TorchDrawingOn(torch, device, min_numel, fills)  # type: ignore[attr-defined]
        try:
            yield fills
        finally:
            module.torch = original  # type: ignore[attr-defined]


def fill_log_line(fill: DeviceFill) -> str:
    """The case-log line of one routed draw."""
    return (f"[bmk-worker] K/V filled on the GPU: torch.{fill.function}({tuple(fill.shape)}, "
            f"{fill.dtype}) drawn on {fill.device} instead of on the CPU and copied "
            f"({fill.numel / 1e6:.1f} M elements; --attention_cpu_fill draws it as the driver does)")


def fill_note(fills: list[dict[str, Any]]) -> str:
    """The ok row's note for the routed draws the worker reported ("" for none)."""
    if not fills:
        return ""
    draws = [DeviceFill(f["function"], tuple(f["shape"]), f["dtype"], f["device"]) for f in fills]
    names = "/".join(dict.fromkeys(f"torch.{d.function}" for d in draws))
    numel = sum(d.numel for d in draws)
    return (f"K/V filled on the GPU (the driver's {names}, {numel / 1e6:.0f} M elements, drawn by "
            "torch's CUDA generator instead of the CPU's; --attention_cpu_fill: as the driver does)")


__all__ = ["ATTENTION_MODULE", "GPU_FILL_MIN_NUMEL", "DeviceFill", "draw_shape", "fill_log_line",
           "fill_note", "gpu_fills", "routed_shape"]
