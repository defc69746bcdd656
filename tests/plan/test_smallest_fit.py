"""The preview's smallest layout that fits one GPU: fewest GPUs first, then the smallest TP; for
an MoE model with EP over the same GPUs."""

from __future__ import annotations

from benchmark_model_kernels import cli_model
from benchmark_model_kernels.plan import memory, planner, smallest_fit
from benchmark_model_kernels.vllm_rules.layout import Layout


def _plan_at(model):
    asked = []

    def plan_at(layout):
        asked.append(layout)
        return planner.plan_layout(model, layout)
    return plan_at, asked


def test_candidates_fewest_gpus_then_smallest_tp():
    assert smallest_fit.candidates(moe=False) == [Layout.from_flags(g, 1) for g in (1, 2, 4, 8)]
    moe = smallest_fit.candidates(moe=True)
    assert moe[:3] == [Layout.from_flags(1, 1), Layout.from_flags(1, 2), Layout.from_flags(2, 2)]
    assert moe[-1] == Layout.from_flags(8, 8) and len(moe) == len(set(moe)) == 7


def test_a_dense_model_that_needs_two_gpus_in_bf16():
    """Llama-3.1-70B: ~131 GiB of BF16 weights do not fit one 80 GiB GPU, TP=2 does; FP8 fits one."""
    plan = planner.plan_model("llama-3.1-70b")
    plan_at, asked = _plan_at("llama-3.1-70b")
    fits = {f.recipe: f for f in smallest_fit.smallest_fits(plan, plan_at, 80.0)}
    assert fits["bf16"].flags == "--tp 2" and fits["fp8"].flags == "--tp 1"
    assert asked == [Layout.from_flags(2, 1)]  # TP=1 is the preview's own plan; planning stops at TP=2
    two = planner.plan_model("llama-3.1-70b", tp=2)
    est = memory.estimate(two, "bf16", "bf16", 80 * 2**30)
    assert est.kv_fits_any and not memory.estimate(plan, "bf16", "bf16", 80 * 2**30).kv_fits_any


def test_an_moe_model_gets_expert_parallel_and_the_line_says_when_nothing_fits():
    plan = planner.plan_model("deepseek-v3")
    plan_at, _ = _plan_at("deepseek-v3")
    fits = {f.recipe: f for f in smallest_fit.smallest_fits(plan, plan_at, 140.4)}
    assert fits["bf16"].layout is None and fits["fp8"].flags == "--tp 1 --ep 8"
    line = smallest_fit.fit_line(list(fits.values()), "--assume_cc h200")
    assert line.startswith("# smallest layout that fits (one 140.4 GiB GPU; --assume_cc h200): ")
    assert "bf16 does not fit on 8 GPUs (one node)" in line and "fp8 --tp 1 --ep 8 (8 GPUs)" in line


def test_preview_suggests_the_layout_only_when_the_gpu_memory_is_known(capsys, monkeypatch):
    from benchmark_model_kernels.env import gpu

    monkeypatch.setattr(gpu, "driver_present", lambda: False)
    cli_model.main(["llama-3.1-8b", "--print_only", "--planner", "rules"])
    assert "smallest layout" not in capsys.readouterr().out  # the default 80/141/192 GiB: no GPU known
    cli_model.main(["llama-3.1-8b", "--print_only", "--planner", "rules", "--gpu_mem_gb", "24"])
    out = capsys.readouterr().out
    assert "# smallest layout that fits (one 24 GiB GPU; --gpu_mem_gb): bf16 --tp 1 (1 GPU)" in out
