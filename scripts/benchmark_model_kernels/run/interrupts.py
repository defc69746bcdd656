"""Stopping a run from outside: Ctrl-C (SIGINT), `kill` (SIGTERM) and a closed terminal or SSH
session (SIGHUP) all end it the same way: the rows measured so far are written, one line says how
to resume, and the exit code is the shell's 128 + the signal (130, 143, 129).

Python turns SIGINT into KeyboardInterrupt by itself; `stop_signals_raise` makes SIGTERM and
SIGHUP raise `RunInterrupted`, a KeyboardInterrupt, so that one `except KeyboardInterrupt` handles
all three and every `except Exception` lets them through.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType
from typing import Any, Callable, Iterator

#: The signals besides SIGINT that stop a run with its rows kept.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class RunInterrupted(KeyboardInterrupt):
    """A stop signal, raised in the main thread wherever it was when the signal came."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def interrupt_signal(interrupt: KeyboardInterrupt) -> signal.Signals:
    """The signal behind `interrupt`: its own for a RunInterrupted, SIGINT for Python's."""
    return signal.Signals(getattr(interrupt, "signum", signal.SIGINT))


def interrupt_exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal number, as a shell reports a process a signal ended."""
    return 128 + interrupt_signal(interrupt)


def is_interrupt_exit(code: int) -> bool:
    """Whether `code` is the exit code of a run stopped by SIGINT, SIGTERM or SIGHUP."""
    return code in {128 + s for s in (signal.SIGINT, *STOP_SIGNALS)}


def _raise_once(signum: int, frame: FrameType | None) -> None:
    """The handler of the first stop signal: raise. Later ones find SIG_IGN (set here), so that
    the saving of the rows after the first one cannot be interrupted in turn."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    raise RunInterrupted(signum)


@contextlib.contextmanager
def _handled(signums: tuple[int, ...], handler: Callable[[int, FrameType | None], Any]) -> Iterator[None]:
    """Within the block `handler` takes `signums`; the previous handlers come back after it. A
    signal its starter set to SIG_IGN (nohup ignores SIGHUP) stays ignored, and outside the main
    thread nothing changes (Python allows handlers only there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in signums}
    for s, old in previous.items():
        if old != signal.SIG_IGN:
            signal.signal(s, handler)
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)


def stop_signals_raise() -> contextlib.AbstractContextManager[None]:
    """Within the block SIGTERM and SIGHUP raise RunInterrupted (see `_handled`)."""
    return _handled(STOP_SIGNALS, _raise_once)


def stop_signals_exit(message: str) -> contextlib.AbstractContextManager[None]:
    """Within the block SIGINT, SIGTERM and SIGHUP write "interrupted by <SIGNAL> <message>" and
    end the process at once with 128 + the signal: for work that has written nothing, where an
    exception could be lost (Python swallows a KeyboardInterrupt raised inside a `__del__`)."""
    def stop(signum: int, _frame: FrameType | None) -> None:
        os.write(2, f"interrupted by {signal.Signals(signum).name} {message}\n".encode())
        os._exit(128 + signum)

    return _handled((signal.SIGINT, *STOP_SIGNALS), stop)


__all__ = [
    "RunInterrupted",
    "STOP_SIGNALS",
    "interrupt_exit_code",
    "interrupt_signal",
    "is_interrupt_exit",
    "stop_signals_exit",
    "stop_signals_raise",
]
