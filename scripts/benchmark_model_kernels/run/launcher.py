"""--launcher slurm: one Slurm job per (model, TP, EP) run of a sweep, through submitit.

In: the sweep's runs (a label, the run's workdir, and the picklable call that plans and runs it on
the node) and the --slurm_* flags. Out: the jobs submitted, a progress line while they run, the
failed ones named with their log, and the workdirs that hold a results.json for the comparison
report. submitit (an optional dependency: pip install 'benchmark-model-kernels[slurm]') is
imported only when this launcher is asked for.

Job logs go to <workdir>/slurm_logs/<job id>_*; a stop signal while waiting cancels the jobs not
finished, and --resume continues them as it does a run on this machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from ..core.errors import UsageError, one_line
from ..core.results_schema import RESULTS_JSON
from .interrupts import interrupt_exit_code, stop_signals_raise
from .pool import SCRIPTS_DIR
from .workdir import SLURM_LOGS

LAUNCHERS = ("here", "slurm")
#: The submitit cluster --launcher slurm uses ("local" runs the same jobs as processes on this
#: machine: how the tests drive it).
CLUSTER = "slurm"
POLL_S = 10.0
DEFAULT_SLURM_TIME_MIN = 120


def add_launcher_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("launching on a cluster (Slurm, through submitit)")
    g.add_argument(
        "--launcher", choices=LAUNCHERS, default="here",
        help="Where the runs execute: here (default, one after another on this machine) or slurm "
        "(one job per MODEL/--tp/--ep run, e.g. --launcher slurm --slurm_partition gpu; needs "
        "pip install submitit).")
    g.add_argument(
        "--slurm_partition", metavar="NAME", default=None,
        help="Slurm partition of the jobs, e.g. --slurm_partition h200 (default: the cluster's).")
    g.add_argument(
        "--slurm_gpus_per_node", metavar="N", type=int, default=1,
        help="GPUs per job, e.g. --slurm_gpus_per_node 4: the job spreads its cases over them as "
        "--gpus 0,1,2,3 does (default 1).")
    g.add_argument(
        "--slurm_time", metavar="MINUTES", type=int, default=DEFAULT_SLURM_TIME_MIN,
        help=f"Time limit of each job in minutes, e.g. --slurm_time 60 (default {DEFAULT_SLURM_TIME_MIN}).")


def check_launcher_args(args: argparse.Namespace) -> None:
    """Slurm flags only with --launcher slurm, and no flag it cannot honour; raises UsageError."""
    slurm = args.launcher == "slurm"
    if not slurm:
        for flag, default in (("slurm_partition", None), ("slurm_gpus_per_node", 1),
                              ("slurm_time", DEFAULT_SLURM_TIME_MIN)):
            if getattr(args, flag) != default:
                raise UsageError(f"--{flag}", getattr(args, flag), "applies to --launcher slurm only; "
                                 "add --launcher slurm or drop it")
        return
    for flag in ("print_only", "dry_run"):
        if getattr(args, flag, False):
            raise UsageError("--launcher", "slurm", f"submits runs; --{flag} works on this machine, "
                             "so drop --launcher slurm for it")
    if getattr(args, "gpus", None) is not None:
        raise UsageError("--gpus", args.gpus, "picks GPUs on this machine; a Slurm job gets "
                         "--slurm_gpus_per_node of them instead")
    if not args.workdir:
        raise UsageError("--workdir", None, "--launcher slurm needs a --workdir on a file system the "
                         "nodes share, e.g. --workdir /shared/runs/cmp")
    if args.slurm_gpus_per_node < 1:
        raise UsageError("--slurm_gpus_per_node", args.slurm_gpus_per_node, "must be at least 1")
    if args.slurm_time < 1:
        raise UsageError("--slurm_time", args.slurm_time, "must be at least 1 minute, e.g. --slurm_time 60")


def job_args(args: argparse.Namespace) -> argparse.Namespace:
    """The flags one job runs with on its node: here, on its --slurm_gpus_per_node GPUs."""
    out = argparse.Namespace(**vars(args))
    out.launcher = "here"
    n = args.slurm_gpus_per_node
    out.gpus = ",".join(map(str, range(n))) if n > 1 else None
    return out


def check_slurm_here() -> None:
    """Refuse (UsageError) --launcher slurm where it cannot submit, before anything is written:
    no submitit, or no Slurm (submitit's own test: srun on the PATH, submitit/slurm/slurm.py
    SlurmExecutor.affinity)."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise UsageError("--launcher", "slurm", "needs submitit: pip install submitit (or "
                         "pip install 'benchmark-model-kernels[slurm]')") from None
    if CLUSTER == "slurm" and shutil.which("srun") is None:
        raise UsageError("--launcher", "slurm", "finds no Slurm here (no srun on the PATH); run it on a "
                         "Slurm login node, or drop --launcher slurm to run here")


def make_executor(args: argparse.Namespace, folder: str) -> Any:
    check_slurm_here()
    import submitit

    try:
        executor = submitit.AutoExecutor(folder=os.path.join(folder, "%j"), cluster=CLUSTER)
    except RuntimeError as e:  # submitit's 'Could not detect "srun", are you indeed on a slurm cluster?'
        raise UsageError("--launcher", "slurm", f"finds no Slurm here ({one_line(str(e))}); run it on a "
                         "Slurm login node, or drop --launcher slurm to run here") from None
    executor.update_parameters(
        name="benchmark-model-kernels", timeout_min=args.slurm_time,
        gpus_per_node=args.slurm_gpus_per_node, nodes=1, tasks_per_node=1,
        slurm_partition=args.slurm_partition,
        # The node imports this package from the same checkout (the workdir is shared, so is it).
        slurm_setup=[f"export PYTHONPATH={SCRIPTS_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"],
    )
    return executor


@dataclass
class SweepRun:
    label: str
    workdir: str
    call: Callable[..., int]
    """Plans and runs this run on the node; returns its exit code."""
    call_args: tuple[Any, ...]


def _log_of(job: Any) -> str:
    return str(job.paths.stderr)


def _progress(jobs: list[Any], failed: int, t0: float) -> str:
    done = sum(j.done() for j in jobs)
    states = [str(j.state).upper() for j in jobs if not j.done()]
    running = sum(s.startswith("RUNNING") for s in states)
    return (f"[slurm] {done}/{len(jobs)} jobs done ({failed} failed), {running} running, "
            f"{len(states) - running} waiting; {time.monotonic() - t0:.0f} s")


def run_jobs(executor: Any, runs: list[SweepRun], progress: TextIO | None = None,
             poll_s: float = POLL_S) -> tuple[int, list[str]]:
    """Submit `runs`, wait for all, name each failed job with its log. Returns (exit code, the
    run workdirs holding a results.json). Exit code: the highest of the runs' (a job that raised
    or was killed counts as 1), or 128 + the signal that stopped the wait."""
    progress = progress if progress is not None else sys.stderr
    jobs: list[Any] = []
    for r in runs:
        try:
            jobs.append(executor.submit(r.call, *r.call_args))
        except Exception as e:  # noqa: BLE001  (sbatch's refusal: a bad partition, time or account)
            for j in jobs:
                j.cancel(check=False)
            first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise UsageError("--launcher", "slurm", f"the job of {r.label} was refused ({first.strip()}); "
                             f"{len(jobs)} job(s) submitted before it were cancelled; check "
                             "--slurm_partition, --slurm_time and --slurm_gpus_per_node") from None
    for r, j in zip(runs, jobs, strict=True):
        print(f"[slurm] job {j.job_id}: {r.label} -> {r.workdir} (log {_log_of(j)})", file=progress, flush=True)
    t0, rc, failed = time.monotonic(), 0, 0
    finished: set[int] = set()
    last = ""
    with stop_signals_raise():
        try:
            while len(finished) < len(jobs):
                for i, (r, j) in enumerate(zip(runs, jobs, strict=True)):
                    if i in finished or not j.done():
                        continue
                    finished.add(i)
                    code, why = _job_result(j)
                    if why:
                        failed += 1
                        print(f"[slurm] job {j.job_id} ({r.label}) failed: {why}; log: {_log_of(j)}",
                              file=progress, flush=True)
                    rc = max(rc, code)
                line = _progress(jobs, failed, t0)
                if line.split(";")[0] != last:
                    print(line, file=progress, flush=True)
                    last = line.split(";")[0]
                if len(finished) < len(jobs):
                    time.sleep(poll_s)
        except KeyboardInterrupt as interrupt:
            left = [j for i, j in enumerate(jobs) if i not in finished]
            for j in left:
                j.cancel(check=False)
            print(f"[slurm] interrupted: cancelled {len(left)} job(s) "
                  f"({' '.join(str(j.job_id) for j in left) or 'none'}); the finished runs are in "
                  "their workdirs; continue with the same command plus --resume", file=progress, flush=True)
            return interrupt_exit_code(interrupt), []
    done = [r.workdir for r in runs if os.path.isfile(os.path.join(r.workdir, RESULTS_JSON))]
    return rc, done


def _job_result(job: Any) -> tuple[int, str]:
    """(exit code, why the job failed or ""): the run's own code (1 = some row failed, which is
    not a failed job), or 1 with the job's error when it raised, was cancelled or killed."""
    try:
        code = int(job.result())
    except Exception as e:  # noqa: BLE001  (submitit's UncompletedJobError, the run's exception)
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        return 1, f"{type(e).__name__}: {first.strip()}"
    if code not in (0, 1):
        return code, f"the run exited with code {code}"
    return code, ""


__all__ = [
    "CLUSTER",
    "LAUNCHERS",
    "SLURM_LOGS",
    "SweepRun",
    "add_launcher_arguments",
    "check_launcher_args",
    "check_slurm_here",
    "job_args",
    "make_executor",
    "run_jobs",
]
