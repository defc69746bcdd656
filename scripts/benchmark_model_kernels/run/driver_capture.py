"""The per-iteration times of a FlashInfer driver case, which the driver keeps only in memory.

FlashInfer's benchmark driver (v0.6.17) times each backend with `bench_gpu_time` and writes only
`np.median` and `np.std` of the returned per-iteration list to its CSV
(benchmarks/routines/gemm.py and moe.py: `backend_times[backend] = bench_gpu_time(...)`, then
`median_time = np.median(backend_times[backend])`); it has no flag that prints the list. The
worker runs the driver in-process, so `capture_bench_calls` wraps the `bench_gpu_time` name the
routine modules imported and records what each call returned, unchanged, and passes it on: the
driver computes its median from the very same list. Without CUDA graphs it also counts the
launches of the timed function (kernels/launches.py), after the timing.

In the parent, `driver_spread` turns the recorded calls into the row's samples, or the exact
reason there are none (no call recorded, several calls, a median that is not the CSV's).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterator

#: The driver modules whose routines this tool runs (GEMM, MoE and attention) and that import
#: `bench_gpu_time` by name from flashinfer.testing.utils (attention.py at release-v0.6.18 too).
ROUTINE_MODULES = ("routines.gemm", "routines.moe", "routines.attention")


@contextlib.contextmanager
def capture_bench_calls(count_eager_launches: bool = True) -> Iterator[list[dict[str, Any]]]:
    """Within the block, every `bench_gpu_time` call of the routine modules appends
    {"samples_ms": [...], "cuda_graph": bool, "launches_per_call": float|None, "launch_note": str}
    to the yielded list. The modules' own function is restored on exit."""
    calls: list[dict[str, Any]] = []
    patched: list[tuple[Any, Any]] = []
    for name in ROUTINE_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a family that cannot import cannot run: nothing to record)
            continue
        original = getattr(module, "bench_gpu_time", None)
        if original is None:
            continue
        module.bench_gpu_time = _recording(original, calls, count_eager_launches)
        patched.append((module, original))
    try:
        yield calls
    finally:
        for module, original in patched:
            module.bench_gpu_time = original


def _recording(original: Any, calls: list[dict[str, Any]], count_eager_launches: bool) -> Any:
    def bench_gpu_time(*args: Any, **kwargs: Any) -> Any:
        times = original(*args, **kwargs)
        graph = bool(kwargs.get("use_cuda_graph", False))
        call: dict[str, Any] = {"samples_ms": [float(t) for t in times], "cuda_graph": graph,
                                "launches_per_call": None, "launch_note": ""}
        if count_eager_launches and not graph:
            from ..kernels.launches import count_launches

            fn = kwargs.get("fn", args[0] if args else None)
            count = count_launches(fn, tuple(kwargs.get("input_args") or ()), kwargs.get("input_kwargs"))
            call["launches_per_call"], call["launch_note"] = count.per_call, count.note
        calls.append(call)
        return times

    return bench_gpu_time


@dataclass(frozen=True)
class DriverSpread:
    samples_us: tuple[float, ...] = ()
    launches_per_call: float | None = None
    note: str = ""
    """Why there are no samples or no launch count ("" when both are there or not asked for)."""


def driver_spread(calls: list[dict[str, Any]] | None, median_us: float) -> DriverSpread:
    """The samples of a driver row whose CSV median is `median_us`, from the worker's recorded
    `calls`; none, with the reason, unless exactly one call's median is the CSV's."""
    if calls is None:
        return DriverSpread(note="no per-iteration times: the worker recorded no bench_gpu_time "
                            "calls (the driver's CSV carries only median and std)")
    if not calls:
        return DriverSpread(note="no per-iteration times: the driver made no bench_gpu_time call "
                            f"through {' or '.join(ROUTINE_MODULES)} that the worker could record")
    if len(calls) != 1:
        return DriverSpread(note=f"no per-iteration times: the driver timed {len(calls)} "
                            "bench_gpu_time calls for this case, so its samples are ambiguous")
    call = calls[0]
    samples = tuple(float(t) * 1e3 for t in call.get("samples_ms") or ())
    if not samples:
        return DriverSpread(note="no per-iteration times: bench_gpu_time returned none")
    median = statistics.median(samples)
    if not math.isclose(median, median_us, rel_tol=1e-6, abs_tol=1e-6):
        return DriverSpread(note=f"no per-iteration times: the recorded call's median {median:.4f} us "
                            f"is not the CSV's {median_us:.4f} us")
    return DriverSpread(samples, call.get("launches_per_call"), call.get("launch_note") or "")


__all__ = ["ROUTINE_MODULES", "DriverSpread", "capture_bench_calls", "driver_spread"]
