"""--launcher slurm through submitit's local executor: one job per run of a sweep (processes on
this machine, the stand-in driver timing), the progress lines, the failed job named with its log,
and the comparison report once all are back."""

from __future__ import annotations

import json
import os

import pytest

from benchmark_model_kernels import cli_model
from benchmark_model_kernels.run import launcher
from helpers_runner import FAKE_REPO, run_job_on_a_stand_in_gpu
from support import ROOT, write_tiny_llama

pytest.importorskip("submitit")


@pytest.fixture
def local_cluster(monkeypatch):
    monkeypatch.setattr(launcher, "CLUSTER", "local")
    monkeypatch.setattr(launcher, "POLL_S", 0.5)
    monkeypatch.setattr(cli_model, "run_job", run_job_on_a_stand_in_gpu)
    # The job processes import this checkout's package and the tests' helper module.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.path.join(ROOT, "scripts"), os.path.join(ROOT, "tests")]))


def test_a_sweep_runs_one_job_per_run_and_writes_the_comparison_report(tmp_path, capsys, local_cluster):
    model = write_tiny_llama(tmp_path / "tiny")
    wd = tmp_path / "sweep"
    # TP=3 does not divide the 4 heads: that job fails on its node and is named with its log.
    rc = cli_model.main([str(model), "--tp", "1", "2", "3", "--ms", "8", "--dtypes", "bf16",
                         "--backends", "cudnn", "--flashinfer_repo", FAKE_REPO, "--workdir", str(wd),
                         "--launcher", "slurm", "--slurm_time", "10", "--no_cache"])
    out, err = capsys.readouterr()
    assert rc == 2, err
    submitted = [line for line in err.splitlines() if line.startswith("[slurm] job ") and "->" in line]
    assert len(submitted) == 3 and all(os.path.join(str(wd), "slurm_logs") in line for line in submitted)
    failed = [line for line in err.splitlines() if "failed:" in line and "tiny_tp3_ep1" in line]
    assert len(failed) == 1 and "exited with code 2" in failed[0] and "log: " in failed[0]
    log = failed[0].split("log: ")[1]
    assert "error: " in open(log).read()  # the run's own one-line error, in the job's log
    assert "[slurm] 3/3 jobs done (1 failed)" in err
    for tp in (1, 2):
        rows = json.load(open(wd / f"tiny_tp{tp}_ep1" / "results.json"))["rows"]
        assert rows and all(r["status"] == "ok" for r in rows)
    assert not (wd / "tiny_tp3_ep1" / "results.json").exists()
    assert (wd / "report.md").is_file() and "comparison report" in out


@pytest.mark.parametrize("argv, flag", [
    (["--slurm_partition", "h200"], "--slurm_partition"),
    (["--launcher", "slurm", "--print_only"], "--launcher"),
    (["--launcher", "slurm", "--gpus", "0,1"], "--gpus"),
    (["--launcher", "slurm", "--slurm_time", "0"], "--slurm_time"),
])
def test_slurm_flags_it_cannot_honour_are_one_line(argv, flag, tmp_path, capsys):
    rc = cli_model.main(["llama-3.1-8b", "--workdir", str(tmp_path / "w"), *argv])
    _, err = capsys.readouterr()
    assert rc == 2 and err.startswith(f"error: {flag}") and err.count("\n") == 1, err
    assert not (tmp_path / "w").exists()


def test_a_job_runs_on_its_gpus_here():
    args = cli_model.build_parser().parse_args(["m", "--launcher", "slurm", "--slurm_gpus_per_node", "4"])
    on_node = launcher.job_args(args)
    assert on_node.launcher == "here" and on_node.gpus == "0,1,2,3"
    assert launcher.job_args(cli_model.build_parser().parse_args(["m", "--launcher", "slurm"])).gpus is None


def test_a_refused_submission_is_one_line_and_cancels_the_jobs_before_it(tmp_path):
    from benchmark_model_kernels.core.errors import UsageError

    class Job:
        def __init__(self):
            self.cancelled = False

        def cancel(self, check=True):
            self.cancelled = True

    class Executor:
        def __init__(self):
            self.jobs = []

        def submit(self, fn, *args):
            if self.jobs:
                raise RuntimeError("sbatch: error: invalid partition specified: h999\nmore")
            self.jobs.append(Job())
            return self.jobs[-1]

    ex = Executor()
    runs = [launcher.SweepRun(f"run{i}", str(tmp_path / f"w{i}"), print, ()) for i in range(3)]
    with pytest.raises(UsageError, match=r"invalid partition specified: h999\); 1 job"):
        launcher.run_jobs(ex, runs)
    assert ex.jobs[0].cancelled
