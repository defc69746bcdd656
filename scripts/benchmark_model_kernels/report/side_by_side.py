"""A report's figures drawn side by side in forked processes, the same files as one after another.

In: figure jobs (figures.FigureJob: each draws its own files and returns [(title, file name)]).
Out: each job's list, in order. Why: matplotlib draws a figure on one core, about a second or two
each (layout, ticks, PNG encoding), and a sweep's comparison report draws three per run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Sequence

from ..run.lifetime import set_parent_death_signal
from .figures import FigureJob

#: At most this many processes draw a report's figures side by side (8 models' comparison report:
#: 26 figures, about 40 s one after another on the H200).
MAX_DRAWERS = 8


#: The jobs of the `draw_side_by_side` call in progress: a forked drawer inherits them and gets only
#: an index, so nothing of an Analysis is pickled.
_PENDING: list[FigureJob] = []


def _draw_pending(index: int) -> list[tuple[str, str]]:
    return _PENDING[index]()


def _drawer_start() -> None:
    """A forked drawer's signals: it dies with this process (the parent-death signal) and on SIGTERM,
    whatever handler the parent had (a submitit job's ignores SIGTERM, and Pool.terminate ends its
    workers with SIGTERM alone, after taking back the tasks that would have ended them: inherited,
    that handler left the run's report waiting on the drawers for ever); a Ctrl-C is the parent's
    to act on, which then ends the drawers."""
    set_parent_death_signal()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def draw_side_by_side(jobs: Sequence[FigureJob]) -> list[list[tuple[str, str]]]:
    """Each job's [(title, file name)], in order. Where the platform forks and there are several
    jobs and cores, the jobs run side by side in up to MAX_DRAWERS forked processes (each dies with
    this one, _drawer_start), else one after another here; the files are the same either way (each
    job writes only its own, atomically). A job's exception is raised here. Once every job is drawn
    the drawers are told there is no more work and end by themselves; only on an exception or a
    stop signal here are they terminated."""
    workers = min(len(jobs), MAX_DRAWERS, os.cpu_count() or 1)
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [job() for job in jobs]
    _PENDING[:] = jobs
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_drawer_start)
    try:
        drawn = pool.map(_draw_pending, range(len(jobs)), chunksize=1)
        pool.close()
        return drawn
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        _PENDING.clear()


__all__ = ["MAX_DRAWERS", "draw_side_by_side"]
