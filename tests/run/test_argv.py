"""driver_argv: the case's own driver args plus the run settings, verbosity and the case tag."""

from __future__ import annotations

from benchmark_model_kernels.run.argv import driver_argv
from benchmark_model_kernels.run.results import RunSettings
from helpers_runner import gemm_case


def test_driver_argv_appends_timing_flags_verbose_and_case_tag():
    c = gemm_case(4096)
    s = RunSettings(num_iters=7, dry_run_iters=2, autotune=True, autotune_cache="/w/at.json")
    argv = driver_argv(c, s)
    assert argv[: len(c.driver_args)] == list(c.driver_args)
    tail = argv[len(c.driver_args):]
    assert tail == ["--num_iters", "7", "--dry_run_iters", "2", "--autotune", "--autotune_cache",
                    "/w/at.json", "-v", "--case_tag", c.case_id]


def test_driver_argv_no_autotune_means_no_cache_and_no_graph_flag():
    s = RunSettings(autotune=False, cuda_graph=False, autotune_cache="/w/at.json")
    argv = driver_argv(gemm_case(4096), s)
    assert "--autotune" not in argv and "--autotune_cache" not in argv
    assert "--no_cuda_graph" in argv
