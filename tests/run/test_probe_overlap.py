"""The capability probe started before planning (runner.start_kept_capabilities): its answer is
the one the run reads, and its child never outlives the run, however the run ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from benchmark_model_kernels.cases import capabilities
from helpers_processes import requires_proc, wait_for_line, wait_gone
from support import ROOT

#: A parent that starts the probe the way a run does, with a child that never answers (a stand-in
#: for FlashInfer's import), prints the child's pid and then ends as the test says.
_PARENT = textwrap.dedent("""
    import os, signal, sys, time
    from benchmark_model_kernels.cases import capabilities
    from benchmark_model_kernels.run import runner
    real = capabilities.start_probe
    runner.start_probe = lambda repo, **kw: real(repo, python=sys.argv[1], **kw)
    probe = runner.start_kept_capabilities(None)
    print("child", probe._proc.pid, flush=True)
    how = sys.argv[2]
    if how == "exit":      # stop_signals_exit during planning: os._exit, no cleanup runs
        os._exit(130)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
""")


def _sleeper(tmp_path) -> str:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\nexec sleep 60\n")
    path.chmod(0o755)
    return str(path)


@requires_proc
@pytest.mark.parametrize("how", ["exit", "kill"])
def test_the_probe_child_dies_with_a_run_that_ends_without_cleanup(tmp_path, how):
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "scripts"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    log = tmp_path / "parent.log"
    with open(log, "w") as out:
        parent = subprocess.Popen([sys.executable, "-c", _PARENT, _sleeper(tmp_path), how], stdout=out, env=env)
        child = int(wait_for_line(str(log), r"child (\d+)", 60).group(1))
        parent.wait(timeout=60)
    assert parent.returncode == (130 if how == "exit" else -signal.SIGKILL)
    assert wait_gone([child], 10) == []


def test_a_started_probe_answers_as_load_capabilities_does_and_close_kills_it(tmp_path):
    """No FlashInfer here: the started probe's answer is the hand table with the child's reason,
    the same as the blocking call's; close() kills a child no one waits for."""
    started = capabilities.start_probe(None)
    assert started.result().origin == capabilities.load_capabilities(None).origin
    assert capabilities.HAND_ORIGIN in started.result().origin
    slow = capabilities.start_probe(None, python=_sleeper(tmp_path))
    proc = slow._proc
    assert proc is not None and proc.poll() is None
    slow.close()
    assert proc.poll() is not None
    gone = capabilities.start_probe(None, python=str(tmp_path / "no-such-python"))
    assert "did not run: FileNotFoundError" in gone.result().origin
