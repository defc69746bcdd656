"""Small timing primitives shared by every GPU path (FlashInfer driver cases, torch rows, quant timing).

All timing goes through `flashinfer.testing.bench_gpu_time` (CUPTI, cold L2, CUDA graphs), so rows
from different backends are comparable. FlashInfer silently falls back to CUDA events when CUPTI
cannot be imported; `cupti_fallback_in` detects that from the warning text so such rows are never
passed off as CUPTI numbers.
"""

from __future__ import annotations

import re
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
