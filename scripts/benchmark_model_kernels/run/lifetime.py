"""How long a worker process may live: never past the pool that started it, nor far past its case.

The pool (pool.py) starts the worker in a session of its own, so that a Ctrl-C at the terminal
reaches only the pool, which saves the rows and then ends the worker. Outside the pool's process
group the worker would outlive a pool that is killed; four mechanisms make that impossible:

  1. parent-death signal (Linux): the worker asks the kernel for SIGKILL when the pool dies
     (prctl PR_SET_PDEATHSIG), then compares getppid() with the pool's pid: a pool that died
     before the prctl call would never send it.
  2. lifeline: the pool holds the only write end of a pipe whose read end a watchdog thread of the
     worker blocks on; EOF (the pool is gone, whatever ended it) kills the worker's process group
     at once. Portable, and a second line behind 1.
  3. case deadline: faulthandler's watchdog, a C thread that needs no GIL and so fires even inside
     a hung native call, writes every thread's stack into the case log and _exit(1)s the worker
     when a case outlives the pool's own timeout plus a margin.
  4. group guard: a small process in the worker's group that SIGKILLs the whole group as soon as
     the worker is gone, so that what the worker started (a JIT compiler, a driver subprocess)
     dies with it even when 1 or 3 ended the worker without a chance to clean up.

Run as a script (`python -I -S lifetime.py --guard_group PID`) this file is the guard of 4; it
imports only the standard library so that it starts in milliseconds without the package.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time

#: prctl(2) option: the signal the calling process receives when its parent thread exits.
PR_SET_PDEATHSIG = 1
#: How often the guard checks that the worker is still its parent (a reparented guard is alone).
GUARD_POLL_S = 0.1

_guard: subprocess.Popen[bytes] | None = None
"""The running group guard (kept referenced so it is never reaped by garbage collection)."""


def set_parent_death_signal(signum: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `signum` to this process when its parent dies; False where there
    is no prctl (not Linux) or the call failed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def kill_own_group() -> None:
    """SIGKILL this process and, when it leads its process group (the pool's start_new_session),
    everything in that group; never another group, e.g. that of a shell running it by hand."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def bind_to_parent(parent_pid: int, lifeline_fd: int) -> None:
    """Mechanisms 1 and 2 for the worker whose pool is `parent_pid` (0: none to check) and whose
    lifeline is `lifeline_fd` (negative: none)."""
    set_parent_death_signal()
    if parent_pid and os.getppid() != parent_pid:  # the pool died before the prctl took effect
        kill_own_group()
    if lifeline_fd >= 0:
        os.set_inheritable(lifeline_fd, False)  # the worker's own children need no copy of it
        watch_lifeline(lifeline_fd)


def watch_lifeline(fd: int) -> threading.Thread:
    """A daemon thread that blocks on `fd` and kills this process's group at its EOF."""
    def watch() -> None:
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass
        os.write(2, b"[bmk-worker] the pool is gone (its lifeline closed): ending the worker group\n")
        kill_own_group()

    thread = threading.Thread(target=watch, name="lifeline-watchdog", daemon=True)
    thread.start()
    return thread


def start_group_guard() -> subprocess.Popen[bytes] | None:
    """Mechanism 4: start the guard of this process's group; None when this process does not lead
    its group (then the group is not the worker's to kill)."""
    global _guard
    if os.getpgrp() != os.getpid():
        return None
    # -I -S: no site packages and no PYTHON* variables; the guard needs only the standard library.
    _guard = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__), "--guard_group", str(os.getpid())],
        stdin=subprocess.DEVNULL)
    return _guard


def guard_group(leader_pid: int) -> None:
    """The guard's whole life: wait while the worker `leader_pid` is its parent, then SIGKILL the
    worker's group, itself included. Polling getppid() sees the worker's end however it came,
    even while a forked child of the worker still holds the worker's pipes open."""
    if os.getpgrp() != leader_pid:
        return
    while os.getppid() == leader_pid:
        time.sleep(GUARD_POLL_S)
    os.killpg(leader_pid, signal.SIGKILL)


def arm_case_deadline(seconds: float | None) -> None:
    """Mechanism 3 for the case about to run (None or 0: no deadline). The stacks go to fd 2,
    which run_request has pointed at the case's log."""
    if seconds:
        faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)


def disarm_case_deadline() -> None:
    faulthandler.cancel_dump_traceback_later()


__all__ = [
    "arm_case_deadline",
    "bind_to_parent",
    "disarm_case_deadline",
    "guard_group",
    "kill_own_group",
    "set_parent_death_signal",
    "start_group_guard",
    "watch_lifeline",
]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--guard_group":
        guard_group(int(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} --guard_group WORKER_PID")
