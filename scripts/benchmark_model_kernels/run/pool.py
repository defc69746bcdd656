"""The parent side of the worker pool: one restartable worker process that runs the cases.

In: one request dict per case (see worker.py's protocol) and a timeout. Out: a `WorkerReply` per
case, the worker's JSON answer or, when it died or timed out, why there is none.

One `WorkerPool` keeps ONE worker process (worker.py) alive across cases so torch, FlashInfer and
their JIT modules load once. A case that crashes, hangs past its timeout, or poisons the CUDA
context costs only itself: the pool kills the worker's process group and starts a fresh one.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

from .outcome import WorkerReply

DRIVER_SCRIPT = "flashinfer_benchmark.py"
#: scripts/, the folder holding the package: put on the worker's PYTHONPATH so its `python -m
#: benchmark_model_kernels.run.worker` finds the package without an install.
SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


class WorkerPool:
    """At most one live worker (one GPU); restarted after a crash, a timeout or a CUDA fault."""

    def __init__(self, flashinfer_repo: str | None, worker_log: str, python: str = sys.executable):
        self.bench_dir = benchmarks_dir(flashinfer_repo) if flashinfer_repo else ""
        self.worker_log = worker_log
        self.python = python
        self.proc: subprocess.Popen | None = None
        self._answers = -1
        self._buf = b""
        self.starts = 0
        """How many worker processes were started (tests and the summary read it)."""

    # -- lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Keep the caller's PYTHONPATH (the GPU image's wheel site lives there); add our package.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SCRIPTS_DIR, env.get("PYTHONPATH", "")) if p)
        env["FLASHINFER_NO_DOWNLOAD"] = "1"  # never stall on an artifact download
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        cmd = [self.python, "-u", "-m", "benchmark_model_kernels.run.worker", "--answer_fd", str(write_fd)]
        if self.bench_dir:
            cmd += ["--benchmarks_dir", self.bench_dir]
        with open(self.worker_log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                cwd=self.bench_dir or None,
                env=self._env(),
                start_new_session=True,  # its own process group: a timeout kills JIT children too
            )
        os.close(write_fd)
        self._answers, self._buf = read_fd, b""
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, kill: bool = False) -> None:
        """End the worker (closing stdin lets it exit; `kill` or a stuck one gets SIGKILL)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        if not kill:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill = True
        if kill and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.wait()
        os.close(self._answers)
        self._answers = -1

    close = stop

    # -- one case
    def run(self, request: dict[str, Any], timeout: float) -> WorkerReply:
        """Send one case and wait for its answer; never raises for a worker failure."""
        if not self.alive():
            self.stop(kill=True)
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
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
        proc = self.proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
        self.stop(kill=True)
        return WorkerReply(lost=describe_exit(rc))


__all__ = [
    "DRIVER_SCRIPT",
    "SCRIPTS_DIR",
    "WorkerPool",
    "benchmarks_dir",
    "describe_exit",
    "has_driver",
]
