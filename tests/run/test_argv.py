"""driver_argv: the case's own driver args plus the run settings, verbosity and the case tag."""

from __future__ import annotations

import dataclasses

from benchmark_model_kernels.cases.build import with_modes
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run.argv import case_settings, driver_argv
from helpers_runner import gemm_case, moe_case


def test_driver_argv_appends_timing_flags_verbose_and_case_tag():
    c = gemm_case(4096)
    s = RunSettings(num_iters=7, dry_run_iters=2, autotune=True, autotune_cache="/w/at.json")
    argv = driver_argv(c, s)
    assert argv[: len(c.driver_args)] == list(c.driver_args)
    tail = argv[len(c.driver_args):]
    assert tail == ["--num_iters", "7", "--dry_run_iters", "2", "--refcheck", "--autotune",
                    "--autotune_cache", "/w/at.json", "-v", "--case_tag", c.case_id]


def test_driver_argv_no_autotune_means_no_cache():
    s = RunSettings(autotune=False, autotune_cache="/w/at.json")
    argv = driver_argv(gemm_case(4096), s)
    assert "--autotune" not in argv and "--autotune_cache" not in argv
    assert "--no_cuda_graph" not in argv


def test_an_eager_case_runs_without_cuda_graphs_under_its_own_tag():
    graph, eager = with_modes([gemm_case(4096)], ["graph", "eager"])
    assert (graph.mode, eager.mode) == ("graph", "eager")
    assert eager.case_id == graph.case_id + ".eager"
    argv = driver_argv(eager, RunSettings())
    assert "--no_cuda_graph" in argv and "--no_cuda_graph" not in driver_argv(graph, RunSettings())
    assert argv[argv.index("--case_tag") + 1] == eager.case_id
    assert case_settings(eager, RunSettings()).cuda_graph is False
    assert case_settings(graph, RunSettings(cuda_graph=False)).cuda_graph is True


def test_an_eager_with_quant_twin_names_its_eager_kernel_case():
    twin = dataclasses.replace(gemm_case(4096), case_id=gemm_case(4096).case_id + ".q", with_quant=True)
    _, eager = with_modes([twin], ["graph", "eager"])
    assert eager.case_id == gemm_case(4096).case_id + ".eager.q"
    assert eager.base_case_id == gemm_case(4096).case_id + ".eager"


def test_refcheck_only_where_the_driver_has_one_and_checks_are_on():
    assert "--refcheck" not in driver_argv(gemm_case(4096), RunSettings(check=False))
    moe = dataclasses.replace(gemm_case(4096), routine="cutlass_fused_moe")
    assert "--refcheck" not in driver_argv(moe, RunSettings())


def test_timed_buckets_tune_a_gemm_row_at_its_own_m_only():
    """--autotune_buckets timed (the default): FlashInfer's GEMM autotuner profiles only the row's M
    (the bucket its timed call looks up); `all`, and rows it does not apply to, keep FlashInfer's own."""
    from benchmark_model_kernels.run.argv import tuning_buckets

    timed = RunSettings(autotune_buckets="timed")
    assert tuning_buckets(gemm_case(4096, m=512), timed) == (512,)
    assert tuning_buckets(gemm_case(4096, m=8, dtype="fp8", backend="cublas", routine="bmm_fp8"), timed) == (8,)
    assert RunSettings().autotune_buckets == "timed"
    assert tuning_buckets(gemm_case(4096, m=512), RunSettings(autotune_buckets="all")) is None
    assert tuning_buckets(gemm_case(4096, m=512), dataclasses.replace(timed, autotune=False)) is None
    # A MoE routine tunes on its own token buckets (not verified to end at the case's tokens).
    assert tuning_buckets(moe_case(m=64), timed) is None
