"""The layouts vLLM can serve a model with on G GPUs: planned, or refused with the reason."""

from __future__ import annotations

import json

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.deploy.layouts import (
    GPU_KINDS,
    NOT_PLANNED_MOE_TP,
    LayoutPlan,
    PlanOptions,
    candidate_layouts,
    fit,
    layout_plans,
    parse_gpus,
)
from benchmark_model_kernels.vllm_rules.layout import Layout

H200X8 = parse_gpus("8xH200")

#: A Qwen3-MoE config small enough to plan in milliseconds.
TINY_MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
            "intermediate_size": 128, "moe_intermediate_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_experts": 8,
            "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
            "vocab_size": 128, "tie_word_embeddings": False}


def write_config(folder, raw):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(raw))
    return str(folder)


def by_label(plans: list[LayoutPlan]) -> dict[str, LayoutPlan]:
    return {lp.label: lp for lp in plans}


@pytest.fixture(scope="module")
def qwen3():
    return by_label(layout_plans(PlanOptions("qwen3-30b-a3b"), H200X8, ("bf16", "fp8")))


@pytest.fixture(scope="module")
def deepseek():
    return by_label(layout_plans(PlanOptions("deepseek-v3"), H200X8, ("bf16", "fp8")))


@pytest.fixture(scope="module")
def llama70b():
    return by_label(layout_plans(PlanOptions("llama-3.1-70b"), H200X8, ("bf16", "fp8")))


def test_parse_gpus_reads_count_and_kind():
    cluster = parse_gpus("8xH200")
    assert (cluster.count, cluster.kind.name, cluster.kind.compute_capability) == (8, "H200", (9, 0))
    assert cluster.kind.memory_bytes == 143771 * 2**20 and cluster.kind.comm_system == "h200_nvlink"
    assert parse_gpus("4xb200").kind is GPU_KINDS["B200"]


@pytest.mark.parametrize("text, words", [
    ("8xA100", "unknown GPU kind 'A100'"), ("0xH200", "the count must be 1 to 8"),
    ("16xH200", "the count must be 1 to 8"), ("H200", "give COUNTxKIND")])
def test_parse_gpus_refuses_with_one_line(text, words):
    with pytest.raises(UsageError) as e:
        parse_gpus(text)
    assert str(e.value).startswith(f"--gpus={text}: ") and words in str(e.value) and "\n" not in str(e.value)


def test_candidates_are_every_tp_times_dp_with_ep_off_and_on_for_moe():
    assert [lay.label for lay in candidate_layouts(8, moe=True)] == [
        "TP=1 DP=8", "TP=1 DP=8 EP", "TP=2 DP=4", "TP=2 DP=4 EP", "TP=4 DP=2", "TP=4 DP=2 EP", "TP=8", "TP=8 EP"]
    assert [lay.label for lay in candidate_layouts(6, moe=False)] == ["TP=1 DP=6", "TP=2 DP=3", "TP=3 DP=2", "TP=6"]
    assert [lay.label for lay in candidate_layouts(1, moe=True)] == ["TP=1"]


def test_qwen3_30b_on_8_gpus(qwen3):
    assert list(qwen3) == ["TP=1 DP=8", "TP=1 DP=8 EP", "TP=2 DP=4", "TP=2 DP=4 EP", "TP=4 DP=2", "TP=4 DP=2 EP",
                           "TP=8", "TP=8 EP"]
    for label in ("TP=1 DP=8", "TP=2 DP=4", "TP=4 DP=2"):  # the MoE TP-sharded over DP x TP
        assert qwen3[label].plan is None and qwen3[label].refusal == NOT_PLANNED_MOE_TP
        assert qwen3[label].refusal_kind == "not planned" and "FusedMoEParallelConfig.make" in NOT_PLANNED_MOE_TP
    ep8 = qwen3["TP=1 DP=8 EP"]
    assert ep8.runnable and ep8.plan.ep == 8 and ep8.plan.moe[0].experts == 16
    assert (ep8.m(64), ep8.moe_tokens(64)) == (8, 64)
    tp8 = qwen3["TP=8"]
    assert tp8.runnable and tp8.plan.moe[0].experts == 128 and tp8.plan.moe[0].intermediate == 96
    assert (tp8.m(64), tp8.moe_tokens(64)) == (64, 64)
    assert qwen3["TP=2 DP=4 EP"].m(9) == 3  # ceil(B/DP): the busiest replica sets the step


def test_deepseek_v3_on_8_gpus_fits_only_in_fp8(deepseek):
    for label in ("TP=1 DP=8", "TP=2 DP=4", "TP=4 DP=2"):
        assert deepseek[label].refusal_kind == "not planned"
    for label in ("TP=1 DP=8 EP", "TP=2 DP=4 EP", "TP=4 DP=2 EP", "TP=8", "TP=8 EP"):
        lp = deepseek[label]
        assert lp.runnable, lp.refusal
        assert not lp.fits_recipe("bf16") and lp.fits_recipe("fp8")
        ok, why = fit(lp, "bf16", 8, 4096)
        assert not ok and "exceed the" in why and "GiB vLLM uses of one GPU" in why
    assert deepseek["TP=8 EP"].plan.moe[0].experts == 32  # 256 routed experts over EP=8


def test_llama_70b_is_dense_tp_times_dp(llama70b):
    assert list(llama70b) == ["TP=1 DP=8", "TP=2 DP=4", "TP=4 DP=2", "TP=8"]
    assert all(lp.plan is not None and not lp.plan.moe for lp in llama70b.values())
    one = llama70b["TP=1 DP=8"]  # every replica holds all 70B parameters
    assert one.runnable and not one.fits_recipe("bf16") and one.fits_recipe("fp8")
    assert llama70b["TP=8"].plan.attention[0].num_q_heads == 8
    ok, why = fit(llama70b["TP=2 DP=4"], "bf16", 1024, 32768)
    assert not ok and why.startswith("K/V of 256 sequences x 32768 tokens needs")


def test_memory_refuses_a_layout_no_recipe_fits(llama70b):
    only_bf16 = by_label(layout_plans(PlanOptions("llama-3.1-70b"), H200X8, ("bf16",)))
    lp = only_bf16["TP=1 DP=8"]
    assert lp.refusal_kind == "memory" and not lp.runnable
    assert lp.refusal.startswith("does not fit one rank in any recipe (bf16: weights 131.4 GiB")


def test_heads_tp_does_not_divide_is_the_planners_refusal(tmp_path):
    model = write_config(tmp_path / "six", {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                            "hidden_size": 96, "intermediate_size": 128, "num_hidden_layers": 2,
                                            "num_attention_heads": 6, "num_key_value_heads": 6, "vocab_size": 128})
    plans = by_label(layout_plans(PlanOptions(model), parse_gpus("4xH100"), ("bf16",)))
    assert list(plans) == ["TP=1 DP=4", "TP=2 DP=2", "TP=4"]
    assert plans["TP=2 DP=2"].runnable and plans["TP=1 DP=4"].runnable
    refused = plans["TP=4"]
    assert refused.refusal_kind == "planner" and refused.plan is None
    assert refused.refusal.startswith("the planner refuses it: --tp=4: ") and "6" in refused.refusal


def test_more_ep_ranks_than_experts_is_refused(tmp_path):
    model = write_config(tmp_path / "moe4", {**TINY_MOE, "num_experts": 4})
    plans = by_label(layout_plans(PlanOptions(model), parse_gpus("8xH200"), ("bf16",)))
    lp = plans["TP=1 DP=8 EP"]
    assert lp.refusal_kind == "experts" and not lp.runnable
    assert lp.refusal.startswith("EP=8 exceeds the 4 routed experts") and "determine_expert_map" in lp.refusal
    assert plans["TP=8"].refusal_kind == "planner"  # moe_intermediate_size 32 does not split 8 ways and 4 heads
    assert by_label(layout_plans(PlanOptions(model), parse_gpus("4xH200"), ("bf16",)))["TP=1 DP=4 EP"].runnable


def test_layout_names_are_workdir_names():
    assert LayoutPlan(Layout(2, 4, True), None).name == "tp2_dp4_ep"
    assert LayoutPlan(Layout(8, 1), None).name == "tp8"
    assert LayoutPlan(Layout(1, 8), None).name == "tp1_dp8"
