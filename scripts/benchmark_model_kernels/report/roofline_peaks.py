"""The ceilings of the roofline figure: the peaks the run itself used, else roofline.PEAKS.

In: an `Analysis`. Out: dense TFLOP/s per dtype, HBM TB/s and a note naming where they come from
(`roofline_peaks`). No file I/O; nothing here measures.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from ..core.results_schema import Row
from ..run import roofline
from .analysis import Analysis
from .cells import recipe_dtype
from .row_facts import compute_capability


def _peaks_from_rows(rows: Sequence[Row]) -> tuple[dict[str, float], float | None]:
    """The peaks the run itself used: pct_peak_tflops = 100 * tflops / peak  =>  peak = 100 * tflops / pct."""
    tflops: dict[str, list[float]] = {}
    bw: list[float] = []
    for r in rows:
        if r.tflops and r.pct_peak_tflops:
            tflops.setdefault(r.dtype, []).append(100.0 * r.tflops / r.pct_peak_tflops)
        if r.tb_per_sec and r.pct_peak_bandwidth:
            bw.append(100.0 * r.tb_per_sec / r.pct_peak_bandwidth)
    return ({d: statistics.median(v) for d, v in tflops.items()}, statistics.median(bw) if bw else None)


def _peaks_from_table(a: Analysis) -> tuple[dict[str, float], float | None, str]:
    """The datasheet peaks of roofline.PEAKS for the run's GPU."""
    env = a.results.get("environment") or {}
    gpu = env.get("gpu") if isinstance(env.get("gpu"), dict) else {}
    peak = roofline.find_peak(a.gpu, compute_capability(gpu)) if a.gpu != "unknown" else None
    if peak is None:
        return {}, None, f"GPU {a.gpu!r} has no entry in roofline.PEAKS"
    dtypes = dict.fromkeys(recipe_dtype(d) for d in a.recipes)
    tflops = {d: t for d in dtypes if (t := roofline.peak_tflops(peak, d))}
    return tflops, peak.hbm_tb_per_sec, f"{peak.name} datasheet peaks"


def roofline_peaks(a: Analysis) -> tuple[dict[str, float], float | None, str]:
    """(dense TFLOP/s per dtype, HBM TB/s, note): every FP8 scheme shares the FP8 peak. Prefers
    the peaks the run recorded in its rows."""
    tflops, bw = _peaks_from_rows(a.rows)
    note = "ceilings: the peaks the run used for its %-of-peak columns"
    if not tflops or bw is None:
        t2, bw2, source = _peaks_from_table(a)
        if not t2 and bw2 is None:
            return tflops, bw, (note if tflops or bw else f"no ceilings drawn: {source}")
        tflops = {**t2, **tflops}
        bw = bw if bw is not None else bw2
        note = f"ceilings: {source}"
    return tflops, bw, note


__all__ = ["roofline_peaks"]
