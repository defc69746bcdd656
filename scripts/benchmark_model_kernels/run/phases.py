"""Where a run's wall time goes: seconds per phase, kept in results.json["timings"] and printed as
one line at the end of the run.

A sweep's GPU time is a few seconds; the rest is start-up, planning, asking FlashInfer what it
supports, recording the machine, worker start-up, JIT and autotuning inside the first cases, and the
report. These numbers say which of those a change should go after, on the machine that ran.

Phases, in the order a run passes them:
- "start-up": process start to the first phase (interpreter, imports), read from /proc on Linux.
- "plan": config to plan on meta tensors.
- "capabilities": FlashInfer's backend support (a child process, or its cached answer).
- "environment": the GPU, driver, CUDA, library versions and timer record.
- "jit warm-up": one case per kernel family run side by side before the timed pass, on a machine
  whose JIT caches have not built them (jit_warmup.py); inside "cases", which does not count it.
  `jit_warm_up_cases`: each warm-up case's seconds (its family's build beside the others'; a
  worker's first case includes that worker's start).
- "cases": the timing loop, also split by how each row was obtained (`cases_by_job`: "driver",
  "torch", "triton", "quant" time on the GPU worker, "cache" for rows copied from the result
  cache, "decided" for rows known unsupported before launch), and the worker's rows again by job,
  kind, backend, recipe and variant (`cases_by_backend`, e.g. "driver gemm cudnn fp8": rows,
  seconds, and the first row's seconds, where a family's first-use costs land).
- "write": the final results.json and CSV.
- "report": report.md and its figures.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator

PHASES = ("start-up", "plan", "capabilities", "environment", "jit warm-up", "cases", "write", "report")


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat field 22 against /proc/uptime),
    None where that is not readable."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the whole line
        return max(0.0, uptime - started)
    except (OSError, ValueError, IndexError):
        return None


class PhaseClock:
    """Seconds spent per phase of one run; `phase(name)` adds the time of its block to `name`."""

    def __init__(self, startup_s: float | None = None):
        self.seconds: dict[str, float] = {}
        self.by_job: dict[str, float] = {}
        self.count_by_job: dict[str, int] = {}
        self.by_backend: dict[str, dict[str, float]] = {}
        self.warm_up_cases: dict[str, float] = {}
        self._created = time.monotonic()
        self._open: list[str] = []
        if startup_s is not None:
            self.seconds["start-up"] = startup_s

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Adds the block's seconds to `name`; a phase inside another is not counted twice (its
        seconds come off the outer one)."""
        started = time.monotonic()
        outer = self._open[-1] if self._open else None
        self._open.append(name)
        try:
            yield
        finally:
            self._open.pop()
            spent = time.monotonic() - started
            self.add(name, spent)
            if outer is not None:
                self.add(outer, -spent)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def add_inner(self, name: str, seconds: float) -> None:
        """`seconds` spent in phase `name` inside the phase now open, which does not count them."""
        self.add(name, seconds)
        if self._open:
            self.add(self._open[-1], -seconds)

    def add_job(self, job: str, seconds: float, group: str = "") -> None:
        """One row's time inside "cases", by how it was obtained, and, for a row the worker timed,
        by `group` ("driver gemm cudnn fp8": job, kind, backend, recipe, variant)."""
        self.by_job[job] = self.by_job.get(job, 0.0) + seconds
        self.count_by_job[job] = self.count_by_job.get(job, 0) + 1
        if group:
            g = self.by_backend.setdefault(group, {"rows": 0, "s": 0.0, "first_s": seconds})
            g["rows"] += 1
            g["s"] += seconds

    def wall_s(self) -> float:
        return self.seconds.get("start-up", 0.0) + (time.monotonic() - self._created)

    def as_dict(self) -> dict[str, Any]:
        """results.json["timings"]: wall seconds, seconds per phase (PHASES order, then any
        other), rows and seconds per job inside "cases", what no phase accounts for, and each JIT
        warm-up case's seconds where a warm-up ran."""
        order = [p for p in PHASES if p in self.seconds] + sorted(set(self.seconds) - set(PHASES))
        wall = self.wall_s()
        phases = {p: round(self.seconds[p], 3) for p in order}
        warm = {k: round(s, 3) for k, s in self.warm_up_cases.items()}
        return {
            "wall_s": round(wall, 3),
            "phases_s": phases,
            "other_s": round(max(0.0, wall - sum(self.seconds.values())), 3),
            "cases_by_job": {j: {"rows": self.count_by_job[j], "s": round(self.by_job[j], 3)}
                             for j in sorted(self.by_job)},
            "cases_by_backend": {k: {"rows": int(g["rows"]), "s": round(g["s"], 3),
                                     "first_s": round(g["first_s"], 3)}
                                 for k, g in sorted(self.by_backend.items())},
            **({"jit_warm_up_cases": warm} if warm else {}),
        }

    def line(self) -> str:
        """e.g. "wall 31.2 s: start-up 2.1, plan 1.4, capabilities 6.0, ... (cases: driver 120
        rows 9.1 s, cache 240 rows 0.4 s)"."""
        d = self.as_dict()
        parts = [f"{p} {s:.1f}" for p, s in d["phases_s"].items()]
        if d["other_s"] >= 0.05:
            parts.append(f"other {d['other_s']:.1f}")
        jobs = ", ".join(f"{j} {v['rows']} rows {v['s']:.1f} s" for j, v in d["cases_by_job"].items())
        return f"wall {d['wall_s']:.1f} s: " + ", ".join(parts) + (f" (cases: {jobs})" if jobs else "")


#: The clock of the run this process is making, and whether a run has begun (only the first run
#: of a process counts the interpreter's start-up; a sweep makes one clock per model and layout).
_CURRENT: list[PhaseClock] = [PhaseClock()]
_BEGUN: list[bool] = [False]


def next_clock() -> PhaseClock:
    """A new clock for the run about to begin, made the current one."""
    _CURRENT[0] = PhaseClock(None if _BEGUN[0] else process_age_s())
    _BEGUN[0] = True
    return _CURRENT[0]


def clock() -> PhaseClock:
    """The clock of the current run."""
    return _CURRENT[0]


__all__ = ["PHASES", "PhaseClock", "clock", "next_clock", "process_age_s"]
