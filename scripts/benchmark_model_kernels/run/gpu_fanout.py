"""Cases spread over several GPUs: one thread per GPU slot, each with its own worker.

In: the cases to run, in order, and the run loop (`CaseLoop`: how one case becomes a row on a
slot, how a row is recorded, how workers are stopped). Out: every case recorded, as a run on one GPU
records them; a with_quant case waits for its base case's row. A stop signal (reaching the main
thread) kills every worker; the rows finished so far are what the run keeps.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from ..core.case_schema import Case
from ..core.results_schema import Row

#: Seconds a stopped multi-GPU run waits for each worker thread to reap its killed worker.
STOP_WAIT_S = 10.0


class CaseLoop(Protocol):
    """What the fan-out drives: `slots` GPU slots, rows recorded under `lock`."""

    @property
    def slots(self) -> int: ...

    @property
    def lock(self) -> threading.RLock: ...

    def row_of(self, case: Case, slot: int) -> Row:
        """`case`'s row, run on GPU slot `slot`."""

    def record(self, case: Case, row: Row, started: float) -> None:
        """Keep `row` (called holding `lock`)."""

    def stop_worker(self, slot: int) -> None:
        """Stop slot `slot`'s worker, if it has one."""

    def kill_workers(self) -> None:
        """Kill every worker now."""


def run_on_every_gpu(loop: CaseLoop, todo: list[Case]) -> None:
    """One thread per GPU slot takes the next case in `todo` order; a with_quant case waits
    until its base case has a row. Rows are recorded by case id, so results.json lists them in
    case order, as a run on one GPU does. A stop signal reaches this (main) thread: it kills every
    worker, and the rows finished so far are what the run keeps."""
    queue = list(todo)
    pending = {c.case_id for c in todo}
    ready = threading.Condition(loop.lock)
    stopping = threading.Event()
    errors: list[BaseException] = []
    # Each thread sets its own event when done (its worker reaped): Thread.join interrupted by
    # the stop signal can report a running thread as ended (Python 3.11), so it is not used.
    finished = [threading.Event() for _ in range(loop.slots)]

    def next_case() -> Case | None:
        with ready:
            if stopping.is_set() or not queue:
                return None
            case = queue.pop(0)
            if case.with_quant:
                ready.wait_for(lambda: stopping.is_set() or case.base_case_id not in pending)
            return None if stopping.is_set() else case

    def work(slot: int) -> None:
        try:
            while (case := next_case()) is not None:
                started = time.monotonic()
                row = loop.row_of(case, slot)
                if stopping.is_set():
                    return  # its worker was killed under it: not a measurement
                with ready:
                    loop.record(case, row, started)
                    pending.discard(case.case_id)
                    ready.notify_all()
        except BaseException as e:  # noqa: BLE001  (re-raised by the main thread)
            errors.append(e)
            stopping.set()
            with ready:
                ready.notify_all()
        finally:
            # This thread started the worker, whose parent-death signal fires when the thread
            # ends: stop it first.
            loop.stop_worker(slot)
            finished[slot].set()

    threads = [threading.Thread(target=work, args=(slot,), name=f"gpu-slot-{slot}", daemon=True)
               for slot in range(loop.slots)]
    for t in threads:
        t.start()
    try:
        for done in finished:
            while not done.wait(0.2):
                pass
    except BaseException:
        stopping.set()
        with ready:
            ready.notify_all()
        loop.kill_workers()
        for done in finished:
            done.wait(STOP_WAIT_S)
        raise
    if errors:
        raise errors[0]


__all__ = ["STOP_WAIT_S", "CaseLoop", "run_on_every_gpu"]
