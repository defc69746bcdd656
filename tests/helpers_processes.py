"""Real processes in the worker-lifetime tests: whether a pid is still alive, whose children
are whose, waiting for a process to go or for a line in a log (Linux /proc; the tests that use
these skip elsewhere)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

#: The stand-in driver's magic N (tests/fixtures/fake_flashinfer) that starts a child process,
#: as a JIT build or a driver subprocess would, prints "[FAKE] child pid <pid>" and hangs.
HANG_WITH_CHILD = 6671

requires_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (state, ppid, pgrp, ...); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def is_gone(pid: int) -> bool:
    """No such process, or only its zombie (it holds no memory, no GPU, no files)."""
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None and fields[1] == str(pid) and fields[0] not in ("Z", "X"):
                found.append(int(name))
    return found


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after waiting up to `timeout` seconds for all of them to go."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if not is_gone(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def wait_for_line(path: str, pattern: str, timeout: float) -> re.Match:
    """The first match of `pattern` in the file at `path`, waiting up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, errors="replace") as f:
                found = re.search(pattern, f.read())
        except FileNotFoundError:
            found = None
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {pattern!r} in {path} after {timeout} s")
        time.sleep(0.02)


def kill_quietly(pids: list[int]) -> None:
    """SIGKILL what a failed test left behind (never needed when the code under test works)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
