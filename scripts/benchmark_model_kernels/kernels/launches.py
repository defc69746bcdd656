"""GPU launches per call of an eagerly timed op, from CUPTI activity records.

At small M a decode step's kernels are a few microseconds each, so what a call launches decides
its eager latency as much as the kernels do: a composite of eight launches pays eight launch
latencies that a CUDA graph replays away. `count_launches(fn, args)` runs the op a few times
(after the timing, outside the timed region) with CUPTI's CONCURRENT_KERNEL, MEMSET and MEMCPY
activity kinds enabled, the same kinds and the same cupti-python calls FlashInfer's
`bench_gpu_time_with_cupti` (flashinfer/testing/utils.py, v0.6.17) times with, and divides the
records by the calls. cupti-python is imported here only, when an eager row is counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: Calls counted per op: the per-call count is their mean (an op whose launches depend on data
#: shows a fraction).
COUNT_CALLS = 3


@dataclass(frozen=True)
class LaunchCount:
    per_call: float | None
    """Kernels + memsets + memcpys one call launches; None when they could not be counted."""
    note: str = ""
    """Why there is no count (cupti-python missing, a CUPTI error)."""


def per_call(records: int, calls: int) -> float:
    """Activity records per call, rounded to 0.01 (a data-dependent op shows a fraction)."""
    if calls < 1:
        raise ValueError(f"calls={calls}: count at least one call")
    return round(records / calls, 2)


def count_launches(fn: Callable[..., Any], input_args: tuple = (), input_kwargs: dict | None = None,
                   calls: int = COUNT_CALLS) -> LaunchCount:
    """Launch records per call of `fn(*input_args, **input_kwargs)` on the current CUDA device."""
    try:
        from cupti import cupti
    except ImportError as e:
        return LaunchCount(None, f"launches not counted: cupti-python is not importable ({e})")
    import torch

    kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET, cupti.ActivityKind.MEMCPY)
    records: list[int] = []

    def buffer_requested():
        return 8 * 1024 * 1024, 0

    def buffer_completed(activities: list) -> None:
        records.extend(1 for a in activities if a.kind in kinds)

    kwargs = dict(input_kwargs or {})
    torch.cuda.synchronize()
    try:
        for kind in kinds:
            cupti.activity_enable(kind)
        cupti.activity_register_callbacks(buffer_requested, buffer_completed)
        for _ in range(calls):
            fn(*input_args, **kwargs)
        torch.cuda.synchronize()
        cupti.activity_flush_all(0)
    except Exception as e:  # noqa: BLE001  (a count must never lose the row's time)
        return LaunchCount(None, f"launches not counted: CUPTI error {type(e).__name__}: {e}")
    finally:
        for kind in kinds:
            try:
                cupti.activity_disable(kind)
            except Exception:  # noqa: BLE001, S110  (already disabled or never enabled)
                pass
        try:
            cupti.finalize()  # as bench_gpu_time does: the next timing starts a clean session
        except Exception:  # noqa: BLE001, S110
            pass
    return LaunchCount(per_call(len(records), calls))


__all__ = ["COUNT_CALLS", "LaunchCount", "count_launches", "per_call"]
