"""Shared builders for the run-stage plumbing tests: Cases made by hand (`builders`, re-exported),
the stand-in driver, and `run_cases`, one run_plan into a fresh workdir that records results.json at
every progress line."""

from __future__ import annotations

import io
import os

from benchmark_model_kernels.core.results_schema import RunSettings, load_results, row_records
from benchmark_model_kernels.run import runner
from benchmark_model_kernels.run.flags import RunRequest
from builders import gemm_case as gemm_case
from builders import moe_case as moe_case

#: Stand-in FlashInfer checkout: benchmarks/flashinfer_benchmark.py misbehaves on magic N values
#: (see its docstring). Its numbers are synthetic; tests only check plumbing with them.
FAKE_REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "fake_flashinfer")

SEGFAULT, HANG, NO_CONFIG, CUPTI_FALLBACK, CUDA_ERROR, VALUE_ERROR, NOT_ON_CC, NO_AUTOTUNE, OOM, SILENT = (
    6661, 6662, 6663, 6664, 6665, 6666, 6667, 6668, 6669, 6670)


GPU = ("NVIDIA H200", (9, 0))


def settings(tmp_path, **kw) -> RunSettings:
    """Short runs for the stand-in driver; the autotune cache inside the workdir run_cases uses."""
    kw.setdefault("case_timeout", 30.0)
    kw.setdefault("autotune_cache", str(tmp_path / "w" / "autotune_cache.json"))
    return RunSettings(num_iters=3, dry_run_iters=1, **kw)


def run_request(cases, workdir, run_settings, *, repo=FAKE_REPO, gpu=GPU, resume=False, cache_dir=None,
                devices=None, jit_warmup=False) -> RunRequest:
    """The checked flags of a run of `cases` (made by hand: their Ms, recipes and backends are the
    filters) into `workdir`; `devices`: the --gpus, None for one unpinned worker. No JIT warm-up
    unless asked (test_jit_warmup.py tests it): a run's rows must not depend on whether an
    earlier test warmed a family."""
    return RunRequest(ms=tuple(sorted({c.m for c in cases})), dtypes=tuple(sorted({c.dtype for c in cases})),
                      backends=tuple(sorted({c.backend for c in cases})), workdir=workdir, resume=resume,
                      dry_run=False, gpu=gpu, flashinfer_repo=repo, settings=run_settings, cache_dir=cache_dir,
                      devices=tuple(devices) if devices else None, jit_warmup=jit_warmup)


class ResultsWatcher(io.StringIO):
    """Progress stream that, at every progress line, records how many rows results.json holds."""

    def __init__(self, workdir):
        super().__init__()
        self.workdir, self.seen = workdir, []

    def write(self, s):
        if s.startswith("["):
            self.seen.append(len(load_results(self.workdir)["rows"]))
        return super().write(s)


def run_cases(tmp_path, cases, *, resume=False, **kw):
    """run_plan `cases` into tmp_path/w with the stand-in driver: (exit code, results.json with
    every row's fields, its null ones included (`row_records`), progress stream, workdir)."""
    workdir = str(tmp_path / "w")
    progress = ResultsWatcher(workdir)
    rc = runner.run_plan(run_request(cases, workdir, settings(tmp_path, **kw), resume=resume), cases,
                         command=["test"], progress=progress, environment=lambda repo: {"fake": True})
    results = load_results(workdir)
    return rc, {**results, "rows": row_records(results)}, progress, workdir


def by_id(results):
    return {r["case_id"]: r for r in results["rows"]}


def run_job_on_a_stand_in_gpu(args, model, tp, ep, workdir):
    """cli_model.run_job as a submitit job runs it, on a CPU node that says it has GPU (an H200):
    what the Slurm launcher's tests submit (this module is importable in the job's process)."""
    from benchmark_model_kernels import cli_model
    from benchmark_model_kernels.run import flags

    flags.detect_gpu = lambda: GPU
    return cli_model.run_job(args, model, tp, ep, workdir)
