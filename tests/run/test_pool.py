"""The worker pool with the stand-in driver (plumbing only): a crash or a hang costs only its case
and a fresh worker, every case sees its own CUPTI warning, the worker's environment, and a stop
leaves no process of the worker's group."""

from __future__ import annotations

import os

from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run.argv import driver_argv
from benchmark_model_kernels.run.outcome import read_driver_csv
from benchmark_model_kernels.run.pool import SCRIPTS_DIR, WorkerPool, no_download_note, no_download_state
from helpers_processes import children_of, requires_proc, wait_gone
from helpers_runner import CUPTI_FALLBACK, FAKE_REPO, HANG, SEGFAULT, gemm_case

S = RunSettings()


def _req(tmp_path, case, settings=S):
    stem = tmp_path / case.case_id
    return {"job": "driver", "case_id": case.case_id, "argv": driver_argv(case, settings),
            "log_path": f"{stem}.log", "csv_path": f"{stem}.csv", "settings": {}}


def test_worker_survives_a_segfault_and_a_hang(tmp_path):
    pool = WorkerPool(FAKE_REPO, str(tmp_path / "worker.log"))
    try:
        ok = gemm_case(4096)
        r = pool.run(_req(tmp_path, ok), timeout=30)
        assert not r.lost and read_driver_csv(str(tmp_path / f"{ok.case_id}.csv"))
        crash = gemm_case(SEGFAULT)
        r = pool.run(_req(tmp_path, crash), timeout=30)
        assert r.lost == "worker exited with signal 11 (SIGSEGV)"
        # faulthandler wrote the Python stack into the case's own log
        assert "Segmentation fault" in (tmp_path / f"{crash.case_id}.log").read_text()
        hang = gemm_case(HANG)
        r = pool.run(_req(tmp_path, hang), timeout=2)
        assert r.lost.startswith("timed out after 2 s")
        r = pool.run(_req(tmp_path, gemm_case(4096, m=16)), timeout=30)
        assert not r.lost
        assert pool.starts == 3  # a fresh worker after each of the two losses
    finally:
        pool.stop(kill=True)


def test_worker_records_the_cupti_warning_in_every_case(tmp_path):
    pool = WorkerPool(FAKE_REPO, str(tmp_path / "worker.log"))
    try:
        for m in (1, 2):  # Python shows a warning once per process by default; we need it twice
            r = pool.run(_req(tmp_path, gemm_case(CUPTI_FALLBACK, m=m)), timeout=30)
            assert any("Falling back to CUDA events" in w for w in r.answer["warnings"])
    finally:
        pool.stop(kill=True)


def test_worker_env_disables_downloads_and_keeps_pythonpath(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/opt/fi-site")
    monkeypatch.delenv("FLASHINFER_NO_DOWNLOAD", raising=False)
    env = WorkerPool(FAKE_REPO, str(tmp_path / "w.log"))._env()
    assert env["FLASHINFER_NO_DOWNLOAD"] == "1"  # unset: the tool's default, and it says so
    assert no_download_note(os.environ).startswith("FLASHINFER_NO_DOWNLOAD unset: set to 1")
    for users in ("", "0", "yes"):  # the user's value is kept, empty (downloads allowed) included
        monkeypatch.setenv("FLASHINFER_NO_DOWNLOAD", users)
        assert WorkerPool(FAKE_REPO, str(tmp_path / "w.log"))._env()["FLASHINFER_NO_DOWNLOAD"] == users
        assert no_download_state(os.environ) == (users, False)
    assert "downloads missing cubins" in no_download_note({"FLASHINFER_NO_DOWNLOAD": ""})
    assert env["PYTHONPATH"].split(os.pathsep) == [SCRIPTS_DIR, "/opt/fi-site"]
    assert os.path.isfile(os.path.join(SCRIPTS_DIR, "benchmark_model_kernels", "run", "worker.py"))


@requires_proc
def test_stop_lets_an_idle_worker_exit_by_itself_and_leaves_nothing_of_its_group(tmp_path):
    pool = WorkerPool(FAKE_REPO, str(tmp_path / "worker.log"))
    assert not pool.run(_req(tmp_path, gemm_case(4096)), timeout=30).lost
    assert pool.proc is not None
    worker, guards = pool.proc.pid, children_of(pool.proc.pid)
    assert len(guards) == 1  # lifetime.py's group guard
    assert f"worker pid {worker} started" in (tmp_path / "worker.log").read_text()
    assert pool.stop() == 0  # stdin closed: it exited by itself
    assert wait_gone([worker, *guards], 2) == []
