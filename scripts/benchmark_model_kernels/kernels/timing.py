"""Small timing primitives shared by every GPU path (FlashInfer driver cases, torch rows, quant timing).

All timing goes through `flashinfer.testing.bench_gpu_time` (CUPTI, cold L2, CUDA graphs), so rows
from different backends are comparable. FlashInfer silently falls back to CUDA events when CUPTI
cannot be imported; `cupti_fallback_in` detects that from the warning text so such rows are never
passed off as CUPTI numbers. A Measurement keeps every per-iteration time: the median is the
headline, `percentiles` the spread (p10/p50/p90/p99, linear interpolation between closest ranks,
numpy's default), and `sum_percentiles` the spread of two separately timed parts added together.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Sequence

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
    samples_us: tuple[float, ...] = ()
    """Every timed iteration, in order (what the median and the percentiles come from)."""
    launches_per_call: float | None = None
    """Eager timing: kernels (plus memsets/memcpys) one call launches (kernels/launches.py)."""
    check: dict = field(default_factory=dict)
    """The correctness check's fields (kernels/correctness.py `CheckResult.fields`); {} = none."""


#: The percentiles every timed row records, as (Row field, percent).
PERCENTILES = (("p10_us", 10), ("p50_us", 50), ("p90_us", 90), ("p99_us", 99))


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """{"p10_us", "p50_us", "p90_us", "p99_us"} of `samples` (linear interpolation between the
    closest ranks, numpy.percentile's default); {} for no samples."""
    data = sorted(float(x) for x in samples)
    if not data:
        return {}
    if len(data) == 1:
        return {name: data[0] for name, _ in PERCENTILES}
    cuts = statistics.quantiles(data, n=100, method="inclusive")  # cuts[i] = percentile i + 1
    return {name: cuts[pct - 1] for name, pct in PERCENTILES}


#: Above this many pairs `sum_percentiles` takes every pair of a seeded subsample instead.
_MAX_PAIRS = 250_000


def sum_percentiles(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Percentiles of X + Y for X drawn from samples `a` and Y from `b` independently: the
    empirical distribution of every pairwise sum (a with_quant row = kernel + quantization, two
    separate timings; the sum of two p90s would overstate the spread)."""
    if not a or not b:
        return {}
    sums: Iterable[float] = (x + y for x, y in itertools.product(a, b))
    if len(a) * len(b) > _MAX_PAIRS:
        step_a, step_b = max(1, len(a) // 500), max(1, len(b) // 500)
        sums = (x + y for x, y in itertools.product(a[::step_a], b[::step_b]))
    return percentiles(list(sums))
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
        samples_us=tuple(times_us),
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
    measured = measurement_from_times(times_ms, text, settings.cuda_graph)
    if settings.cuda_graph:
        return measured
    from .launches import count_launches

    count = count_launches(fn, input_args, input_kwargs)
    note = "; ".join(x for x in (measured.note, count.note) if x)
    return dataclasses.replace(measured, launches_per_call=count.per_call, note=note)
