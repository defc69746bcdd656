"""A command in a process group of its own, stopped at a time limit together with all it started.

The benchmark scripts run the tool (and evidence steps) as child processes under a time budget. A
child that reaches its limit gets a stop signal (SIGTERM by default: the tool saves the rows it
has and exits), then, after a grace, SIGKILL; both go to the child's whole process group, so the
tool's workers, the driver and a step's background jobs end with it. The same happens when the
caller itself is interrupted while it waits (Ctrl-C, or a SIGTERM, which is raised as
`Interrupted` meanwhile). Being a group of its own, the child would not see what stops the
caller's group (an evidence step's SIGKILL); so the kernel SIGKILLs it when the caller dies
(the parent-death signal, run/lifetime.py), as a child in the caller's group would have been.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from benchmark_model_kernels.run.lifetime import set_parent_death_signal  # noqa: E402

#: Seconds a stopped child has to save its work and exit before its group is killed.
STOP_GRACE_S = 30.0


class Interrupted(Exception):
    """The caller got SIGTERM while it waited for its child."""


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


def _stop_with_caller() -> None:
    # In the child, before exec: SIGKILL when the caller (its parent thread) dies, however.
    set_parent_death_signal(signal.SIGKILL)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to process group `pgid`; nothing when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace_s: float = STOP_GRACE_S) -> int:
    """Stop `proc`'s group (`proc` leads it: started with start_new_session=True): `sig`, up to
    `grace_s` for `proc` to exit, then SIGKILL to the whole group (whatever is still in it, even
    after `proc` exited). Returns `proc`'s exit code."""
    try:
        kill_group(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    finally:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Interrupted inside the block (in the main thread; the handler before is put
    back after)."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _raise_interrupted) if main else None
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)


def wait_within(proc: subprocess.Popen, limit_s: float, *, sig: int = signal.SIGTERM,
                grace_s: float = STOP_GRACE_S) -> tuple[int, bool]:
    """(exit code, stopped) of `proc`, a group leader, waited for up to `limit_s` (at least 1 s),
    then stopped with stop_group. An exception while waiting (KeyboardInterrupt, a signal handler's)
    stops the group the same way before it propagates; a SIGTERM to the caller is raised as
    Interrupted while it waits."""
    with _sigterm_raises():
        try:
            return proc.wait(timeout=max(limit_s, 1.0)), False
        except subprocess.TimeoutExpired:
            return stop_group(proc, sig, grace_s), True
        except BaseException:
            stop_group(proc, sig, grace_s)
            raise


def call_within(cmd: list[str], limit_s: float, *, sig: int = signal.SIGTERM, grace_s: float = STOP_GRACE_S,
                **popen: Any) -> tuple[int, bool]:
    """(exit code, stopped): `cmd` started in a new process group (Popen keyword arguments
    `popen`) that the kernel kills should the caller die, as wait_within waits for it. SIGTERM
    raises Interrupted from before the start, so one that comes while the child starts is not
    lost."""
    with _sigterm_raises():
        proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_stop_with_caller, **popen)
        return wait_within(proc, limit_s, sig=sig, grace_s=grace_s)


__all__ = ["STOP_GRACE_S", "Interrupted", "call_within", "kill_group", "stop_group", "wait_within"]
