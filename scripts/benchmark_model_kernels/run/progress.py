"""Progress of a run: one line per finished case, with the elapsed time and an ETA.

In: each finished Case, its Row and the wall time it took. Out: the progress line the runner prints
to stderr, and `EtaEstimator`'s estimate of the time the remaining cases need.
"""

from __future__ import annotations

from typing import Iterable

from ..core.case_schema import AttentionShape, Case
from ..core.results_schema import Row


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def progress_line(i: int, total: int, case: Case, row: Row, elapsed: float, eta: float | None) -> str:
    width = len(str(total))
    tokens = getattr(case.logical, "num_tokens", case.m)
    m_text = f"m={case.m}" + (f" (num_tokens={tokens})" if tokens != case.m else "")
    if isinstance(case.logical, AttentionShape):  # the KV length decides the time as much as M
        m_text = f"{case.logical.phase} {m_text} kv={case.logical.kv_len}"
    what = (f"[{i:>{width}}/{total}] {case.kind} {case.name} {m_text} {case.dtype} {case.backend}"
            + (f" {case.variant}" if case.variant else "") + (" +quant" if case.with_quant else "")
            + (" eager" if case.mode == "eager" else ""))
    if row.status == "ok":
        result = f"ok {row.median_us:.1f} us"
        if row.launches_per_call is not None:
            result += f", {row.launches_per_call:g} launches"
    else:
        result = f"{row.status}: {row.reason[:100]}"
    eta_s = f"~{_clock(eta)}" if eta is not None else "after warm-up"
    return f"{what} ... {result}  (elapsed {_clock(elapsed)}, ETA {eta_s})"


class EtaEstimator:
    """Time left for the cases still to run, from the wall time of the ones run so far.

    Why not elapsed / done * left: the first case of each job kind pays the worker start-up, the
    torch/FlashInfer imports and JIT builds (6 s for a 10 us GEMM on the H200), cases skipped as
    unsupported take no time, and a quant-timing case costs far less than a driver case. So: one
    average per job kind ("driver", "torch", "quant"; see `Case.job`) that leaves out the first case
    of that kind, skipped cases count zero, and no estimate before MIN_TIMED cases have run. On an
    H200 log of a Qwen3-30B-A3B TP=1 sweep this cut the over-estimate after the third case from
    about 3x to about 1.6x; it stays an estimate (later JIT builds and
    autotuning are not foreseeable), hence "ETA ~"."""

    MIN_TIMED = 3

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    def record(self, case: Case, seconds: float) -> None:
        if not case.skip_reason:
            self.seconds.setdefault(case.job, []).append(seconds)

    def _average(self, values: list[float]) -> float:
        steady = values[1:] or values  # the first of a kind carries start-up and JIT
        return sum(steady) / len(steady)

    def eta(self, left: Iterable[Case]) -> float | None:
        if sum(len(v) for v in self.seconds.values()) < self.MIN_TIMED:
            return None
        per_job = {job: self._average(v) for job, v in self.seconds.items()}
        everything = self._average([s for v in self.seconds.values() for s in v[1:]]
                                   or [s for v in self.seconds.values() for s in v])
        return sum(per_job.get(c.job, everything) for c in left if not c.skip_reason)


__all__ = ["EtaEstimator", "progress_line"]
