"""What the worker receives: a torch or quant Case travels to it as JSON (Case.to_dict) and is
rebuilt there (Case.from_dict) unchanged; Case.job picks the worker path. And how long it lives:
each mechanism of lifetime.py seen alone, with the stand-in driver and real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from benchmark_model_kernels.core.case_schema import Case
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run.argv import driver_argv
from benchmark_model_kernels.run.pool import WorkerPool
from helpers_processes import HANG_WITH_CHILD, children_of, requires_proc, wait_for_line, wait_gone
from helpers_runner import FAKE_REPO, gemm_case, moe_case, run_request


def test_case_json_round_trip_gemm_and_moe():
    for c in (gemm_case(4096, skip="x"), moe_case()):
        assert Case.from_dict(c.to_dict()) == c
        assert Case.from_dict(json.loads(json.dumps(c.to_dict()))) == c  # through the pipe's JSON


def test_case_job_picks_the_worker_path():
    assert gemm_case(64).job == "driver"
    assert gemm_case(64, backend="torch").job == "torch"
    assert gemm_case(64, dtype="fp8", with_quant=True).job == "quant"


# ------------------------------------------------------------- how long a worker lives (lifetime.py)
# The test process plays the pool: it starts a real worker with WorkerPool.start and then speaks
# the protocol itself, so that each mechanism can be seen acting alone.
def _started_pool(tmp_path) -> WorkerPool:
    pool = WorkerPool(FAKE_REPO, str(tmp_path / "worker.log"))
    pool.start()
    return pool


def _send_hang_with_child(pool: WorkerPool, tmp_path, **extra) -> tuple[int, str]:
    """Start the stand-in's hanging case that has a child; (the child's pid, the case log)."""
    case = gemm_case(HANG_WITH_CHILD)
    log = str(tmp_path / f"{case.case_id}.log")
    req = {"job": "driver", "case_id": case.case_id, "argv": driver_argv(case, RunSettings()),
           "log_path": log, "csv_path": str(tmp_path / f"{case.case_id}.csv"), "settings": {}, **extra}
    assert pool.proc is not None and pool.proc.stdin is not None
    pool.proc.stdin.write((json.dumps(req) + "\n").encode())
    pool.proc.stdin.flush()
    return int(wait_for_line(log, r"\[FAKE\] child pid (\d+)", 10).group(1)), log


def _group(pool: WorkerPool, child: int) -> list[int]:
    """The worker, its group guard and the case's child (asserting there is one guard)."""
    assert pool.proc is not None
    guards = [p for p in children_of(pool.proc.pid) if p != child]
    assert len(guards) == 1, guards
    return [pool.proc.pid, guards[0], child]


@requires_proc
def test_worker_ends_itself_and_its_children_at_a_cases_deadline(tmp_path):
    pool = _started_pool(tmp_path)
    try:
        child, log = _send_hang_with_child(pool, tmp_path, deadline_s=1.0)
        group = _group(pool, child)
        assert pool.proc is not None
        assert pool.proc.wait(timeout=6) == 1  # faulthandler's _exit(1), no pool timeout involved
        assert wait_gone(group, 3) == []
        text = open(log).read()
        assert "Timeout (0:00:01)!" in text and "flashinfer_benchmark.py" in text  # where it hung
    finally:
        pool.stop(kill=True)


@requires_proc
def test_worker_ends_with_its_group_when_its_lifeline_closes(tmp_path):
    """The portable mechanism: the pool's end of the lifeline closing (the pool is gone) ends the
    worker mid-case, with everything it started, while its parent is still alive."""
    pool = _started_pool(tmp_path)
    try:
        child, _ = _send_hang_with_child(pool, tmp_path)
        group = _group(pool, child)
        os.close(pool._lifeline)
        pool._lifeline = -1
        assert wait_gone(group, 3) == []
        assert pool.proc is not None and pool.proc.wait(timeout=1) == -signal.SIGKILL
    finally:
        pool.stop(kill=True)


@requires_proc
def test_guard_kills_the_group_of_a_worker_killed_without_warning(tmp_path):
    """SIGKILL, as the parent-death signal sends it, gives the worker no chance to clean up: its
    group guard ends what it started."""
    pool = _started_pool(tmp_path)
    try:
        child, _ = _send_hang_with_child(pool, tmp_path)
        group = _group(pool, child)
        assert pool.proc is not None
        os.kill(pool.proc.pid, signal.SIGKILL)
        assert wait_gone(group, 3) == []
    finally:
        pool.stop(kill=True)


@requires_proc
def test_worker_whose_parent_is_already_gone_ends_at_once(tmp_path):
    """A pool that died before the worker's prctl call: getppid() is not the pool's pid."""
    env = WorkerPool(FAKE_REPO, str(tmp_path / "w.log"))._env()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "benchmark_model_kernels.run.worker", "--answer_fd", "1",
                           "--parent_pid", "1"], env=env, stdin=subprocess.PIPE, timeout=10,
                          start_new_session=True)
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - started < 5


@requires_proc
def test_pool_stop_leaves_nothing_of_the_worker_group(tmp_path):
    pool = _started_pool(tmp_path)
    child, _ = _send_hang_with_child(pool, tmp_path)
    group = _group(pool, child)
    assert pool.stop(kill=True) is None  # it had to be killed
    assert wait_gone(group, 2) == []


def test_the_cudnn_tactic_cap_travels_to_the_worker_and_cuts_only_cudnn_runners(tmp_path, monkeypatch):
    """--autotune_tactics N: a cuDNN driver case's request carries N; around the driver call the
    worker wraps FlashInfer's autotuner tactic filter (AutoTuner.get()._blocklist, which every
    runner's tactic list passes through before profiling) so a cuDNN runner keeps its first N
    tactics after the blocklist's own cut, other runners keep all, and the filter is put back
    after. A stand-in AutoTuner of FlashInfer's shape records the calls: plumbing, no GPU; the
    gpu test in test_measurements_gpu.py runs FlashInfer's own autotuner."""
    import types

    from benchmark_model_kernels.run import worker
    from benchmark_model_kernels.run.case_execution import CaseExecutor
    from benchmark_model_kernels.run.outcome import tactic_cap_note

    def request_of(case, **settings):
        executor = CaseExecutor(run_request([case], str(tmp_path), RunSettings(**settings), repo=None), {})
        return executor.worker_request(case, "driver")[0]

    assert request_of(gemm_case(64))["tactic_cap"] == RunSettings.autotune_tactics == 8
    assert request_of(gemm_case(64), autotune_tactics=3)["tactic_cap"] == 3
    assert "tactic_cap" not in request_of(gemm_case(64), autotune_tactics=0)  # --autotune_tactics all
    assert "tactic_cap" not in request_of(gemm_case(64), autotune=False)
    assert "tactic_cap" not in request_of(gemm_case(64, backend="cublaslt"))

    class Blocklist:  # FlashInfer's TacticsBlocklist: drops the tactics it knows fail
        def filter(self, custom_op, runner, tactics):
            return [t for t in tactics if t != "bad"]

        def load(self, path):
            return path

    class AutoTuner:
        _instance = None

        def __init__(self):
            self._blocklist = Blocklist()

        @classmethod
        def get(cls):
            cls._instance = cls._instance or cls()
            return cls._instance

    class CudnnBf16GemmRunner:
        pass

    class CublasltBf16GemmRunner:
        pass

    fake = types.ModuleType("flashinfer.autotuner")
    fake.AutoTuner = AutoTuner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
    monkeypatch.setitem(sys.modules, "flashinfer.autotuner", fake)
    tuner = AutoTuner.get()
    original = tuner._blocklist
    offered = ["bad"] + [f"plan{i}" for i in range(12)]
    out: dict = {}
    with worker._tactic_cap_scope(3, out):
        f = tuner._blocklist
        assert f.filter("bf16_gemm", CudnnBf16GemmRunner(), offered) == ["plan0", "plan1", "plan2"]
        assert f.filter("bf16_gemm", CublasltBf16GemmRunner(), offered) == offered[1:]
        assert f.filter("bf16_gemm", CudnnBf16GemmRunner(), ["plan0", "plan1"]) == ["plan0", "plan1"]
        assert f.load("x") == "x"
    assert tuner._blocklist is original
    assert out == {"tactic_cap": [["bf16_gemm", "CudnnBf16GemmRunner", 3, 12]]}
    assert tactic_cap_note(out) == ("autotuned over the first 3 of 12 cuDNN tactics (cuDNN's heuristic "
                                    "order; --autotune_tactics)")
    untouched: dict = {}
    with worker._tactic_cap_scope(None, untouched):
        assert tuner._blocklist is original
    assert untouched == {} and tactic_cap_note(untouched) == ""

    del fake.AutoTuner  # a FlashInfer without the hook: every tactic, and the row says so
    missing: dict = {}
    with worker._tactic_cap_scope(3, missing):
        pass
    assert missing == {"tactic_cap_missing": True}
    assert "every cuDNN tactic profiled" in tactic_cap_note(missing)


def test_timed_buckets_travel_to_the_worker_and_wrap_the_driver_call(tmp_path, monkeypatch):
    """--autotune_buckets timed: the request names the row's M, and the worker runs the driver
    inside FlashInfer's own bucket override, `autotune(False, tuning_buckets=(M,))`, which tunes
    nothing by itself (a stand-in autotuner records the calls: plumbing, no GPU)."""
    import contextlib
    import types

    from benchmark_model_kernels.run import worker
    from benchmark_model_kernels.run.case_execution import CaseExecutor

    def request_of(case, autotune_buckets):
        run_settings = RunSettings(autotune_buckets=autotune_buckets)
        executor = CaseExecutor(run_request([case], str(tmp_path), run_settings, repo=None), {})
        return executor.worker_request(case, "driver")[0]

    req = request_of(gemm_case(64, m=512), "timed")
    assert req["tuning_buckets"] == [512]
    plain = request_of(gemm_case(64), "all")
    assert "tuning_buckets" not in plain

    calls: list = []

    @contextlib.contextmanager
    def autotune(tune_mode=True, cache=None, tuning_buckets=None, round_up=None, skip_ops=None):
        calls.append(("enter", tune_mode, cache, tuning_buckets))
        yield
        calls.append("exit")

    fake = types.ModuleType("flashinfer.autotuner")
    fake.autotune = autotune  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
    monkeypatch.setitem(sys.modules, "flashinfer.autotuner", fake)
    with worker._tuning_scope(req["tuning_buckets"]):
        calls.append("driver")
    assert calls == [("enter", False, None, (512,)), "driver", "exit"]

    def old_autotune(tune_mode=True, cache=None):  # a FlashInfer without bucket overrides
        raise AssertionError("must not be entered")

    fake.autotune = old_autotune  # type: ignore[attr-defined]
    with worker._tuning_scope([512]):
        pass
    with worker._tuning_scope(None):
        pass
