"""Small timing primitives shared by every GPU path (FlashInfer driver cases, torch rows, quant timing).

All timing goes through `flashinfer.testing.bench_gpu_time` (CUPTI, cold L2, CUDA graphs), so rows
from different backends are comparable. FlashInfer silently falls back to CUDA events when CUPTI
cannot be imported; `cupti_fallback_in` detects that from the warning text so such rows are never
passed off as CUPTI numbers.
"""

from __future__ import annotations

import re
import statistics
import warnings
from dataclasses import dataclass

#: FlashInfer's warning when it cannot use CUPTI (flashinfer/testing/utils.py, v0.6.17):
#: "CUPTI is not installed. Try 'pip install -U cupti-python'. Falling back to CUDA events ..." or
#: "<exception text> Falling back to CUDA events for benchmarking."
_CUPTI_FALLBACK = re.compile(r"Falling back to CUDA events", re.IGNORECASE)


@dataclass(frozen=True)
class Measurement:
    """One timed result in microseconds."""

    median_us: float
    std_us: float
    timer: str
    """"cupti", "cuda_events" or "cuda_graph": what actually produced the numbers."""
    note: str = ""
    """Caveat for the row's reason: the CUPTI-fallback warning, or what the timed op skipped."""


class UnsupportedCase(Exception):
    """Raised by a backend when the op cannot run here for a known reason (status "unsupported")."""


def cupti_fallback_in(text: str) -> bool:
    """True when FlashInfer's output says it fell back from CUPTI to CUDA events."""
    return bool(_CUPTI_FALLBACK.search(text or ""))


def cupti_fallback_reason(text: str) -> str:
    """The warning line that announced the CUPTI fallback (for the row's reason)."""
    for line in (text or "").splitlines():
        if _CUPTI_FALLBACK.search(line):
            return line.strip()
    return ""


def measurement_from_times(times_ms, warning_text: str, cuda_graph: bool) -> Measurement:
    """Per-iteration milliseconds from `bench_gpu_time` + its warnings -> a Measurement.

    The timer is "cupti" unless FlashInfer announced the CUDA-event fallback; then it is
    "cuda_graph" (fallback with --cuda_graph, rotating buffers) or "cuda_events".
    """
    times_us = [float(t) * 1e3 for t in times_ms]
    if not times_us:
        raise ValueError("bench_gpu_time returned no iterations")
    fell_back = cupti_fallback_in(warning_text)
    timer = ("cuda_graph" if cuda_graph else "cuda_events") if fell_back else "cupti"
    return Measurement(
        median_us=statistics.median(times_us),
        std_us=statistics.pstdev(times_us),
        timer=timer,
        note=cupti_fallback_reason(warning_text) if fell_back else "",
    )


def bench(fn, settings, *, input_args=(), input_kwargs=None) -> Measurement:
    """Time `fn(*input_args, **input_kwargs)` exactly like FlashInfer's driver does.

    Wraps `flashinfer.testing.bench_gpu_time` with CUPTI on, CUDA graphs per
    `settings.cuda_graph`, `settings.dry_run_iters` warm-up and `settings.num_iters` measured
    iterations, and a cold L2 (flushed before every iteration; rotating copies of the tensors
    in `input_args` if FlashInfer falls back to CUDA-graph timing). Pass every GPU tensor the
    op reads through `input_args` (not a closure) so that fallback can rotate them.
    """
    # Lazy: FlashInfer (and torch under it) loads only where something is timed, on the GPU
    # worker; the parent process and the CPU tests import this module without them.
    from flashinfer.testing import bench_gpu_time

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        times_ms = bench_gpu_time(
            fn,
            dry_run_iters=settings.dry_run_iters,
            repeat_iters=settings.num_iters,
            enable_cupti=True,
            use_cuda_graph=settings.cuda_graph,
            input_args=tuple(input_args),
            input_kwargs=dict(input_kwargs or {}),
            cold_l2_cache=settings.cold_l2,
        )
    text = "\n".join(str(w.message) for w in caught)
    return measurement_from_times(times_ms, text, settings.cuda_graph)
