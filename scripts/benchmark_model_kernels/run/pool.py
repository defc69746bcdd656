"""The parent side of the worker pool: one restartable worker process that runs the cases.

In: one request dict per case (see worker.py's protocol) and a timeout. Out: a `WorkerReply` per
case, the worker's JSON answer or, when it died or timed out, why there is none.

One `WorkerPool` keeps ONE worker process (worker.py) alive across cases so torch, FlashInfer and
their JIT modules load once. A case that crashes, hangs past its timeout, or poisons the CUDA
context costs only itself: the pool kills the worker's process group and starts a fresh one.

The worker runs in a session of its own (a Ctrl-C reaches the pool only, which saves the rows and
then ends the worker) and still never outlives the pool: lifetime.py lists the mechanisms, of which
the pool's parts are the --parent_pid, the lifeline pipe and each case's deadline_s. Every stop
SIGKILLs the worker's whole process group before reaping the worker, so nothing it started is left.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any, Mapping

from .outcome import WorkerReply

DRIVER_SCRIPT = "flashinfer_benchmark.py"
#: scripts/, the folder holding the package: put on the worker's PYTHONPATH so its `python -m
#: benchmark_model_kernels.run.worker` finds the package without an install.
SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Seconds a worker gives a case beyond the pool's timeout before ending itself: the pool, when it
#: is alive and running, always acts first; the worker's deadline covers a pool that cannot.
WORKER_DEADLINE_MARGIN_S = 5.0
#: Seconds a worker whose stdin was closed gets to exit by itself before its group is killed.
STOP_GRACE_S = 10.0


def benchmarks_dir(flashinfer_repo: str) -> str:
    return os.path.join(os.path.abspath(flashinfer_repo), "benchmarks")


def has_driver(flashinfer_repo: str) -> bool:
    return os.path.isfile(os.path.join(benchmarks_dir(flashinfer_repo), DRIVER_SCRIPT))


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "worker did not exit"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"worker exited with signal {-returncode} ({name})"
    return f"worker exited with code {returncode}"


def has_exited(pid: int) -> bool:
    """Whether child `pid` has exited, WITHOUT reaping it: an unreaped child keeps its pid, and so
    its process group id, from being reused, which makes a later killpg of that group safe."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
    except ChildProcessError:  # reaped already
        return True


def wait_exited(pid: int, timeout: float) -> bool:
    """has_exited, waiting up to `timeout` seconds for it."""
    deadline = time.monotonic() + timeout
    while not has_exited(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def kill_group(pid: int) -> None:
    """SIGKILL the process group that worker `pid` leads: the worker, its group guard, and whatever
    it started (JIT compilers, a driver subprocess)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def no_download_state(env: Mapping[str, str]) -> tuple[str, bool]:
    """(the FLASHINFER_NO_DOWNLOAD value the worker gets, whether it is this tool's default):
    the user's value when set (even set and empty, which lets FlashInfer download), else "1", so
    an offline machine fails a missing cubin at once instead of stalling on its download.
    FlashInfer refuses downloads for any non-empty value, "0" included
    (flashinfer/jit/cubin_loader.py `get_cubin`: `if os.getenv("FLASHINFER_NO_DOWNLOAD")`)."""
    if "FLASHINFER_NO_DOWNLOAD" in env:
        return env["FLASHINFER_NO_DOWNLOAD"], False
    return "1", True


def no_download_note(env: Mapping[str, str]) -> str:
    """One line for the run's output and results.json notes: what the worker gets, and why."""
    value, defaulted = no_download_state(env)
    if defaulted:
        return ("FLASHINFER_NO_DOWNLOAD unset: set to 1 for the worker (a cubin that is not "
                "installed fails at once; export FLASHINFER_NO_DOWNLOAD= to let FlashInfer download)")
    if value:
        return f"FLASHINFER_NO_DOWNLOAD={value!r} (yours): FlashInfer downloads nothing"
    return "FLASHINFER_NO_DOWNLOAD set and empty (yours): FlashInfer downloads missing cubins"


class WorkerPool:
    """At most one live worker (one GPU); restarted after a crash, a timeout or a CUDA fault.
    `device`: the CUDA_VISIBLE_DEVICES value the worker is pinned to (None: the caller's)."""

    def __init__(self, flashinfer_repo: str | None, worker_log: str, python: str = sys.executable,
                 device: str | None = None, extra_env: Mapping[str, str] | None = None):
        self.bench_dir = benchmarks_dir(flashinfer_repo) if flashinfer_repo else ""
        self.worker_log = worker_log
        self.python = python
        self.device = device
        self.extra_env = dict(extra_env or {})
        """Variables set for the worker on top of this process's (the JIT warm-up's MAX_JOBS)."""
        self.proc: subprocess.Popen | None = None
        self._answers = -1
        self._lifeline = -1
        """Write end of the worker's lifeline: only this process holds it, so its EOF in the
        worker means this process is gone."""
        self._buf = b""
        self.starts = 0
        """How many worker processes were started (tests and the summary read it)."""

    # -- lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Keep the caller's PYTHONPATH (the GPU image's wheel site lives there); add our package.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SCRIPTS_DIR, env.get("PYTHONPATH", "")) if p)
        env["FLASHINFER_NO_DOWNLOAD"] = no_download_state(env)[0]
        env["PYTHONUNBUFFERED"] = "1"
        if self.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.device
        env.update(self.extra_env)
        return env

    def command(self, answer_fd: int, lifeline_fd: int) -> list[str]:
        """The worker's command line, given the fds it inherits."""
        cmd = [self.python, "-u", "-m", "benchmark_model_kernels.run.worker", "--answer_fd", str(answer_fd),
               "--parent_pid", str(os.getpid()), "--lifeline_fd", str(lifeline_fd)]
        return cmd + (["--benchmarks_dir", self.bench_dir] if self.bench_dir else [])

    def start(self) -> None:
        """Start a worker. Call it from the thread that lives as long as the run: Linux sends the
        parent-death signal when the THREAD that started the worker ends."""
        answers_r, answers_w = os.pipe()
        lifeline_r, lifeline_w = os.pipe()
        with open(self.worker_log, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(answers_w, lifeline_r),
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(answers_w, lifeline_r),
                cwd=self.bench_dir or None,
                env=self._env(),
                # Its own session: a Ctrl-C at the terminal reaches only this process, which saves
                # the rows first; and one killpg ends the worker with everything it started.
                start_new_session=True,
            )
            pinned = "" if self.device is None else f" on CUDA_VISIBLE_DEVICES={self.device}"
            log.write(f"[bmk-pool] worker pid {self.proc.pid} started{pinned}\n".encode())
        os.close(answers_w)
        os.close(lifeline_r)
        self._answers, self._lifeline, self._buf = answers_r, lifeline_w, b""
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not has_exited(self.proc.pid)

    def stop(self, kill: bool = False) -> int | None:
        """End the worker: closing its stdin lets it exit by itself within STOP_GRACE_S (no wait
        with `kill`), then its process group is SIGKILLed, it is reaped and its pipes closed.
        Returns its exit status if it exited by itself, None if it had to be killed."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        exited = proc.returncode is not None or wait_exited(proc.pid, 0 if kill else STOP_GRACE_S)
        if proc.returncode is None:
            kill_group(proc.pid)  # before the reaping: the group id is still the worker's
        proc.wait()
        for fd in (self._answers, self._lifeline):
            if fd >= 0:
                os.close(fd)
        self._answers = self._lifeline = -1
        return proc.returncode if exited else None

    close = stop

    def kill(self) -> None:
        """SIGKILL the live worker's group from another thread than the one running its case: that
        thread then reads EOF, reaps the worker and returns (see gpu_fanout.run_on_every_gpu)."""
        proc = self.proc
        if proc is not None and proc.returncode is None and not has_exited(proc.pid):
            kill_group(proc.pid)

    # -- one case
    def run(self, request: dict[str, Any], timeout: float) -> WorkerReply:
        """Send one case and wait for its answer; never raises for a worker failure."""
        if not self.alive():
            self.stop(kill=True)
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        request = {**request, "deadline_s": timeout + WORKER_DEADLINE_MARGIN_S}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._lost()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop(kill=True)
                return WorkerReply(lost=f"timed out after {timeout:g} s (--case_timeout); worker killed")
            ready, _, _ = select.select([self._answers], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._answers, 65536)
            if not chunk:  # EOF: the worker is gone without answering
                return self._lost()
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        answer = json.loads(line)
        if answer.get("poisoned"):
            self.stop()  # it exits by itself after a CUDA fault; reap it
        return WorkerReply(answer=answer)

    def _lost(self) -> WorkerReply:
        return WorkerReply(lost=describe_exit(self.stop()))


__all__ = [
    "DRIVER_SCRIPT",
    "SCRIPTS_DIR",
    "STOP_GRACE_S",
    "WORKER_DEADLINE_MARGIN_S",
    "WorkerPool",
    "benchmarks_dir",
    "describe_exit",
    "has_driver",
    "has_exited",
    "kill_group",
    "wait_exited",
]
