"""A run ended from outside, end to end: benchmark_via_builtin.py with the stand-in driver in a
process of its own, two quick cases and then one that hangs with a child process (as a JIT build
or a driver subprocess would), ended by a signal. Whatever ends it, the worker, its group guard
and the case's child are gone within seconds; a catchable signal also keeps the rows, prints the
resume line and exits 128 + the signal. Real processes, synthetic numbers.

No check here depends on how fast the machine is (CI is a loaded 2-core machine): each waits for
the event it needs (a line in a log, a process gone) with a bound minutes away, which only a
failure ever reaches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from benchmark_model_kernels.run import lifetime
from helpers_processes import HANG_WITH_CHILD, children_of, kill_quietly, requires_proc, wait_for_line, wait_gone
from helpers_runner import FAKE_REPO

pytestmark = requires_proc

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(os.path.dirname(TESTS), "scripts")
QUICK_CASES = ("gemm.a.m8.bf16.cudnn", "gemm.b.m8.bf16.cudnn")
HUNG_CASE = "gemm.hang.m8.bf16.cudnn"

#: How long a check waits for what it needs before it fails (never reached when the code works).
PATIENCE_S = 120.0

#: The CLI as a user runs it, on this CPU machine: the GPU and the environment probe stood in for.
#: argv[1]: the worker's deadline margin (pool.WORKER_DEADLINE_MARGIN_S); the rest: the CLI's.
CLI = textwrap.dedent(f"""
    import sys
    sys.path[:0] = [{SCRIPTS!r}]
    from benchmark_model_kernels import cli_builtin
    from benchmark_model_kernels.run import flags, pool
    flags.detect_gpu = lambda: ("NVIDIA H200", (9, 0))
    cli_builtin.environment.collect = lambda repo: {{"fake": True}}
    pool.WORKER_DEADLINE_MARGIN_S = float(sys.argv[1])
    sys.exit(cli_builtin.main(sys.argv[2:]))
""")


def _default_stop_signals() -> None:
    """In the CLI's process: the stop signals as a terminal delivers them (a test runner started
    in the background, or under nohup, passes SIGINT or SIGHUP ignored, and the run would keep
    them ignored as a user's nohup asks)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


class HungRun:
    """The CLI running in a process of its own, stopped in the hanging case: the run's `proc`, its
    `workdir`, and the pids of the `worker`, its group guard and the case's child (`group`)."""

    def __init__(self, tmp_path, case_timeout: float = 60.0, deadline_margin: float = 5.0):
        self.workdir = str(tmp_path / "w")
        argv = ["--nks", f"4096,64,a 2048,64,b {HANG_WITH_CHILD},64,hang", "--ms", "8", "--dtypes", "bf16",
                "--backends", "cudnn", "--flashinfer_repo", FAKE_REPO, "--workdir", self.workdir,
                "--num_iters", "3", "--case_timeout", str(case_timeout)]
        self.proc = subprocess.Popen([sys.executable, "-c", CLI, str(deadline_margin), *argv],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=_default_stop_signals)
        self.group: list[int] = []
        try:
            self._find_the_group()
        except BaseException:
            self.end()
            raise

    def _find_the_group(self) -> None:
        cases = os.path.join(self.workdir, "cases")
        self.worker = int(wait_for_line(os.path.join(cases, "worker.log"), r"worker pid (\d+) started",
                                        PATIENCE_S)[1])
        self.child = int(wait_for_line(os.path.join(cases, f"{HUNG_CASE}.log"), r"child pid (\d+)", PATIENCE_S)[1])
        guards = [p for p in children_of(self.worker) if p != self.child]
        assert len(guards) == 1, guards
        self.group = [self.worker, guards[0], self.child]

    def results(self) -> dict:
        with open(os.path.join(self.workdir, "results.json")) as f:
            return json.load(f)

    def end(self) -> tuple[int, str]:
        """Its exit code and stderr (SIGKILLed first if still running after PATIENCE_S)."""
        try:
            _, err = self.proc.communicate(timeout=PATIENCE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_stop_signal_keeps_the_rows_prints_the_resume_line_and_exits_128_plus_it(tmp_path, signum):
    run = HungRun(tmp_path)
    try:
        run.proc.send_signal(signum)
        rc, err = run.end()
        assert rc == 128 + signum, err  # 143, 129, 130
        assert [r["case_id"] for r in run.results()["rows"]] == list(QUICK_CASES)
        name = signal.Signals(signum).name
        assert (f"interrupted by {name} after 2 of 3 rows; results.json and the CSV hold them; "
                "continue with the same command plus --resume") in err
        assert os.path.isfile(os.path.join(run.workdir, "combined_results.csv"))
        assert wait_gone(run.group, PATIENCE_S) == []
    finally:
        kill_quietly(run.group)


def test_sigkill_of_the_run_takes_the_worker_and_its_children_with_it(tmp_path):
    run = HungRun(tmp_path)
    try:
        run.proc.kill()
        assert run.end()[0] == -signal.SIGKILL
        assert wait_gone(run.group, PATIENCE_S) == []
        assert len(run.results()["rows"]) == 2  # written after every case, before the kill
    finally:
        kill_quietly(run.group)


def test_a_hung_case_is_ended_by_the_workers_own_deadline_while_the_run_is_frozen(tmp_path):
    """A stopped (SIGSTOP, Ctrl-Z) run can neither time its case out nor die: only the worker's
    own deadline ends the hung case and its child. The run's case timeout (600 s) is far beyond
    the worker's deadline (10 s: a margin of -590 s), so the run is frozen long before it could act
    whenever the signal lands, and the worker's deadline is the only thing that ends the group.
    The run is SIGKILLed afterwards."""
    run = HungRun(tmp_path, case_timeout=600.0, deadline_margin=-590.0)
    try:
        run.proc.send_signal(signal.SIGSTOP)
        assert wait_gone(run.group, PATIENCE_S) == []
        log = open(os.path.join(run.workdir, "cases", f"{HUNG_CASE}.log")).read()
        assert "Timeout (0:00:10)!" in log  # faulthandler's stacks: the worker's deadline fired
        run.proc.kill()
        assert run.end()[0] == -signal.SIGKILL
    finally:
        kill_quietly([*run.group, run.proc.pid])


def test_parent_death_signal_kills_a_process_whose_parent_is_sigkilled():
    """Mechanism 1 alone: a grandchild that asked for it dies with its SIGKILLed parent."""
    grandchild = (f"import sys, time; sys.path.insert(0, {os.path.dirname(lifetime.__file__)!r}); "
                  "import lifetime; print(lifetime.set_parent_death_signal(), flush=True); time.sleep(60)")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; "
         f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); print(p.pid, flush=True); "
         "time.sleep(60)"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        assert parent.stdout.readline().strip() == "True"  # armed (the grandchild shares the pipe)
        parent.kill()
        parent.wait()
        assert wait_gone([pid], PATIENCE_S) == []
    finally:
        kill_quietly([pid])
        parent.stdout.close()
