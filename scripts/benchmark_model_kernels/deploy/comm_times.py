"""The time of one collective, every value naming where it comes from.

`CommModel` looks a collective up, in this order, in
  1. times measured on this machine (`deploy/measure.py`: NCCL through torch.distributed workers,
     at the exact sizes), source "measured here";
  2. the user's nccl-tests output files (`deploy/nccl_tests.py`), source "nccl-tests file <name>";
  3. the bundled table of the system (deploy/data/comm_<system>.json, from published nccl-tests
     figures, some derived with nccl-tests' bus-bandwidth formulas; each table names its source),
     source "typical, not measured here: <table source>".
Within one op and group size it interpolates log-log between the two sizes around the message,
and says when the message lies outside the sizes it has (extrapolated). No value is ever made up:
a group size no source has gives `us=None` with the reason.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..core.errors import UsageError
from .collectives import OPS, Collective
from .nccl_tests import NcclTestsResult

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
#: The bundled tables (deploy/data/comm_<system>.json).
SYSTEMS = ("h100_nvlink", "h200_nvlink", "b200_nvlink")
MEASURED = "measured here"
TYPICAL = "typical, not measured here"

_CUSTOM_ALL_REDUCE = ("vLLM runs small all-reduces through its own custom all-reduce, FlashInfer's or NCCL "
                      "symmetric memory before plain NCCL (vllm/distributed/device_communicators/"
                      "cuda_communicator.py: CudaCommunicator.all_reduce); an NCCL time is an upper bound there")


@dataclass(frozen=True)
class CommTime:
    """One collective's time and where it comes from."""

    us: float | None
    """Microseconds for one occurrence; None when no source has the op at this group size."""
    source: str
    """"measured here", "nccl-tests file <name>" or "typical, not measured here: <table source>"."""
    note: str = ""
    """How it was read: interpolated, extrapolated beyond the sizes there, or why there is none."""


@dataclass(frozen=True)
class Series:
    """One op at one group size from one source: (bytes, us) by size."""

    op: str
    ranks: int
    points: tuple[tuple[int, float], ...]
    source: str
    note: str = ""


def system_for_gpu(gpu: str) -> str:
    """The bundled table for a GPU name ("H200", "NVIDIA H200", "h100"): its NVLink system."""
    text = gpu.upper().replace("NVIDIA", "").strip()
    for system in SYSTEMS:
        if text.startswith(system.split("_")[0].upper()):
            return system
    raise UsageError("--gpus", gpu, f"has no bundled communication table (tables: {', '.join(SYSTEMS)}); "
                     "pass nccl-tests output with --nccl_tests, or run on 2 or more GPUs to measure")


@lru_cache(maxsize=None)
def load_system(system: str) -> tuple[Series, ...]:
    """The bundled table of `system` as series, each naming its source and how it was obtained."""
    if system not in SYSTEMS:
        raise UsageError("--system", system, f"has no bundled communication table; use one of {', '.join(SYSTEMS)}")
    with open(os.path.join(DATA_DIR, f"comm_{system}.json"), encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for t in data["tables"]:
        src = data["sources"][data["published"]["source"]]
        source = f"{TYPICAL}: {data['description']}; {src['url']} ({src['date']})"
        note = "" if t["how"] == "published" else f"derived: {t['derivation']}"
        out.append(Series(t["op"], t["ranks"], tuple((int(s), float(us)) for s, us in t["points"]), source, note))
    return tuple(out)


def _clean(op: str, points: Iterable[Sequence[float]], where: str) -> tuple[tuple[int, float], ...]:
    if op not in OPS:
        raise UsageError(where, op, f"op must be one of {', '.join(OPS)}")
    pts = sorted((int(s), float(us)) for s, us in points)
    if not pts or any(s <= 0 or not (us > 0 and math.isfinite(us)) for s, us in pts):
        raise UsageError(where, op, "needs (bytes > 0, microseconds > 0) points")
    return tuple(pts)


class CommModel:
    """Collective times from measurements here, then nccl-tests files, then a bundled table."""

    def __init__(self, measured: Mapping[str, Sequence[tuple[int, float]]] | None = None, *,
                 measured_ranks: int = 0, nccl_tests: Sequence[NcclTestsResult] = (),
                 extra_measured: Mapping[int, Mapping[str, Sequence[tuple[int, float]]]] | None = None):
        """`measured`: op -> sorted [(bytes, us)] from `measure.measure_collectives` at
        `measured_ranks` ranks; `extra_measured`: more of them keyed by group size;
        `nccl_tests`: parsed nccl-tests files."""
        self.measured: list[Series] = []
        by_ranks: dict[int, Mapping[str, Sequence[tuple[int, float]]]] = dict(extra_measured or {})
        if measured:
            if measured_ranks < 2:
                raise UsageError("measured_ranks", measured_ranks, "must be the group size (2 or more) the "
                                 "measurements were made at")
            by_ranks[measured_ranks] = measured
        for ranks, table in sorted(by_ranks.items()):
            for op, pts in table.items():
                self.measured.append(Series(op, ranks, _clean(op, pts, "measured"), MEASURED))
        self.files = [Series(r.op, r.nranks, _clean(r.op, r.points, r.name), f"nccl-tests file {r.name}")
                      for r in nccl_tests]

    def time(self, c: Collective, system: str) -> CommTime:
        """The time of one occurrence of `c` on `system` (a bundled table's name)."""
        if c.group <= 1:
            return CommTime(0.0, "no communication", "a group of one rank")
        tiers = (self.measured, self.files, list(load_system(system)))
        for tier in tiers:
            series = next((s for s in tier if s.op == c.op and s.ranks == c.group), None)
            if series is not None:
                return _read(series, c)
        have = sorted({s.ranks for tier in tiers for s in tier if s.op == c.op})
        return CommTime(None, "none", f"no {c.op} at {c.group} ranks in any source (have {have or 'none'}); "
                        "pass nccl-tests output for that group size with --nccl_tests")


def _read(series: Series, c: Collective) -> CommTime:
    us, how = interpolate(series.points, c.bytes_per_rank)
    notes = [how] + ([series.note] if series.note else [])
    if c.op == "all_reduce" and c.group_kind == "TP":
        notes.append(_CUSTOM_ALL_REDUCE)
    return CommTime(us, series.source, "; ".join(n for n in notes if n))


def interpolate(points: Sequence[tuple[int, float]], nbytes: int) -> tuple[float, str]:
    """The time at `nbytes` between sorted (bytes, us) points, log-log, and how it was read."""
    if len(points) == 1:
        s, us = points[0]
        return us, "" if s == nbytes else f"extrapolated: the only size there is {s} B"
    lo_s, lo_us = points[0]
    hi_s, hi_us = points[-1]
    if nbytes <= lo_s:
        note = "" if nbytes == lo_s else f"extrapolated below the smallest size there ({lo_s} B): its time"
        return lo_us, note
    if nbytes > hi_s:
        (s0, t0), (s1, t1) = points[-2], points[-1]
        note = f"extrapolated above the largest size there ({hi_s} B), log-log from its last two sizes"
    else:
        i = next(i for i, (s, _) in enumerate(points) if s >= nbytes)
        (s0, t0), (s1, t1) = points[i - 1], points[i]
        if s1 == nbytes:
            return t1, ""
        note = f"interpolated between {s0} B and {s1} B"
    slope = math.log(t1 / t0) / math.log(s1 / s0)
    return t0 * math.exp(slope * math.log(nbytes / s0)), note


__all__ = ["MEASURED", "SYSTEMS", "TYPICAL", "CommModel", "CommTime", "Series", "interpolate", "load_system",
           "system_for_gpu"]
