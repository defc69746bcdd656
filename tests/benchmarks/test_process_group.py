"""benchmarks/process_group.py: a child stopped at its limit with its whole group, when its caller is
signalled, and killed when its caller dies. No step waits on the clock: a limit is reached once the
child has written its pid file, and a caller is signalled only once its child is up."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time

from support import ROOT

_spec = importlib.util.spec_from_file_location("process_group", os.path.join(ROOT, "benchmarks", "process_group.py"))
assert _spec and _spec.loader
pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pg)

GRACE_S = 0.2


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone(pid, timeout_s=20.0):
    """Whether `pid` ends within `timeout_s` (a killed orphan lingers as a zombie until reaped)."""
    for _ in range(int(timeout_s / 0.1)):
        if not _running(pid):
            return True
        time.sleep(0.1)
    return False


def _pid_from(path, timeout_s=30.0):
    for _ in range(int(timeout_s / 0.05)):
        if path.exists() and path.read_text().endswith("\n"):
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_a_child_over_its_limit_is_stopped_with_its_whole_group(tmp_path, monkeypatch):
    # The child ignores SIGTERM and leaves a process behind it: the whole group is killed after
    # the grace and the call returns (the signal's exit code, stopped).
    pid_file = tmp_path / "child.pid"

    class LimitOnceChildIsUp(subprocess.Popen):
        def wait(self, timeout=None):
            if timeout is not None and timeout > GRACE_S:
                _pid_from(pid_file)
                raise subprocess.TimeoutExpired(self.args, timeout)
            return super().wait(timeout)

    monkeypatch.setattr(pg.subprocess, "Popen", LimitOnceChildIsUp)
    script = f"trap '' TERM; sleep 600 & echo $! > {pid_file}; wait"
    assert pg.call_within(["bash", "-c", script], 60.0, grace_s=GRACE_S) == (-signal.SIGKILL, True)
    assert _gone(int(pid_file.read_text())), "the child's own child outlived the call"
    monkeypatch.undo()
    assert pg.call_within(["bash", "-c", "exit 3"], 60.0) == (3, False)


def _caller(tmp_path, child_script):
    """A Python process that runs `child_script` through call_within and says how it ended."""
    code = (f"import sys; sys.path.insert(0, {os.path.join(ROOT, 'benchmarks')!r})\n"
            "import process_group as pg\n"
            "try:\n"
            f"    print(pg.call_within(['bash', '-c', {child_script!r}], 600.0, grace_s={GRACE_S}))\n"
            "except pg.Interrupted as e:\n"
            "    print('interrupted', e); sys.exit(7)\n")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_sigterm_to_the_caller_stops_the_childs_group_and_is_raised(tmp_path):
    pid_file = tmp_path / "child.pid"
    caller = _caller(tmp_path, f"trap '' TERM; sleep 600 & echo $! > {pid_file}; wait")
    child = _pid_from(pid_file)
    caller.send_signal(signal.SIGTERM)
    out, _ = caller.communicate(timeout=60)
    assert caller.returncode == 7 and out.startswith("interrupted SIGTERM"), out
    assert _gone(child), "the child's group outlived its interrupted caller"


def test_a_caller_killed_outright_takes_its_child_along(tmp_path):
    pid_file = tmp_path / "child.pid"
    caller = _caller(tmp_path, f"echo $$ > {pid_file}; exec sleep 600")
    child = _pid_from(pid_file)
    caller.kill()
    caller.wait(timeout=60)
    assert _gone(child), "the child outlived its SIGKILLed caller (parent-death signal)"
