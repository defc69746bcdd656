"""The collectives vLLM 0.33 issues per decode step, with message sizes, for TP, DP+EP and
sequence-parallel MoE on Qwen3-30B-A3B, DeepSeek-V3 and Llama-3.1-70B at 8 GPUs (M=8, BF16)."""

from __future__ import annotations

import functools

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.deploy.collectives import MoeDispatch, collectives, expected_ranks_reached
from benchmark_model_kernels.plan.planner import plan_model
from benchmark_model_kernels.vllm_rules.layout import Layout


@functools.lru_cache(maxsize=None)
def _plan(model: str, tp: int, ep: int):
    return plan_model(model, tp, ep)


def table(model: str, tp: int, ep: int, tokens: int = 8, **kw) -> dict[str, tuple[str, int, str, int, int]]:
    """name -> (op, group, group kind, bytes per rank, per step)."""
    out = collectives(_plan(model, tp, ep), Layout.from_flags(tp, ep), tokens, **kw)
    return {c.name: (c.op, c.group, c.group_kind, c.bytes_per_rank, c.per_step) for c in out}


def test_qwen3_moe_tp8_all_reduces_after_attention_and_moe():
    h = 2048 * 2 * 8  # M x H x BF16
    assert table("qwen3-30b-a3b", 8, 1) == {
        "embedding all-reduce": ("all_reduce", 8, "TP", h, 1),
        "attention all-reduce (o_proj)": ("all_reduce", 8, "TP", h, 48),
        "MoE all-reduce": ("all_reduce", 8, "TP", h, 48),
        "lm_head logits all-gather": ("all_gather", 8, "TP", 8 * 8 * 18992 * 2, 1),  # 151936 / 8 per rank
    }


def test_qwen3_moe_dp8_ep_dispatches_and_combines_over_dp_with_no_tp_collective():
    # all-gather of 8 ranks x 8 tokens: hidden (2048 x 2 B) + top-8 ids and weights (8 x 8 B)
    assert table("qwen3-30b-a3b", 1, 8) == {
        "MoE dispatch (all-gather)": ("all_gather", 8, "DP", 8 * 8 * (4096 + 64), 48),
        "MoE combine (reduce-scatter)": ("reduce_scatter", 8, "DP", 8 * 8 * 4096, 48),
        "DP token-count sync": ("all_reduce", 8, "DP", 4 * 4 * 8, 1),
    }


def test_qwen3_moe_tp2_dp4_ep_is_sequence_parallel_over_the_ep_group():
    t = table("qwen3-30b-a3b", 2, 8)
    chunk = 4  # ceil(M / TP) tokens of each TP rank go through the MoE
    assert t["attention all-reduce (o_proj)"] == ("all_reduce", 2, "TP", 8 * 4096, 48)
    assert t["MoE dispatch (all-gather)"] == ("all_gather", 8, "EP", 8 * chunk * (4096 + 64), 48)
    assert t["MoE combine (reduce-scatter)"] == ("reduce_scatter", 8, "EP", 8 * chunk * 4096, 48)
    assert t["sequence-parallel MoE all-gather"] == ("all_gather", 2, "TP", 2 * chunk * 4096, 48)
    assert t["DP token-count sync"] == ("all_reduce", 4, "DP", 4 * 4 * 4, 1)
    assert "MoE all-reduce" not in t  # SP skips the MoE's own all-reduce
    assert t["lm_head logits all-gather"] == ("all_gather", 2, "TP", 2 * 8 * 75968 * 2, 1)


def test_sequence_parallel_pads_an_odd_token_count_to_a_multiple_of_tp():
    t = table("qwen3-30b-a3b", 2, 8, tokens=7)
    assert t["MoE dispatch (all-gather)"][3] == 8 * 4 * (4096 + 64)
    assert t["sequence-parallel MoE all-gather"][3] == 2 * 4 * 4096
    assert t["attention all-reduce (o_proj)"][3] == 7 * 4096


def test_deepseek_v3_tp8_reduces_dense_and_moe_layers_and_folds_shared_experts():
    h = 7168 * 2 * 8
    assert table("deepseek-v3", 8, 1) == {
        "embedding all-reduce": ("all_reduce", 8, "TP", h, 1),
        "attention all-reduce (o_proj)": ("all_reduce", 8, "TP", h, 61),
        "MLP all-reduce (down_proj)": ("all_reduce", 8, "TP", h, 3),  # the 3 dense layers
        "MoE all-reduce": ("all_reduce", 8, "TP", h, 58),  # shared experts summed into it
        "lm_head logits all-gather": ("all_gather", 8, "TP", 8 * 8 * 16160 * 2, 1),
    }


def test_deepseek_v3_dp8_ep_dispatch():
    assert table("deepseek-v3", 1, 8) == {
        "MoE dispatch (all-gather)": ("all_gather", 8, "DP", 8 * 8 * (14336 + 64), 58),
        "MoE combine (reduce-scatter)": ("reduce_scatter", 8, "DP", 8 * 8 * 14336, 58),
        "DP token-count sync": ("all_reduce", 8, "DP", 128, 1),
    }


def test_deepseek_v3_sequence_parallel_reduce_scatters_attention_and_all_gathers_before_the_next():
    t = table("deepseek-v3", 2, 8)
    chunked = 2 * 4 * 14336  # TP x ceil(M/TP) tokens x H x 2 B
    assert t["attention all-reduce (o_proj)"] == ("all_reduce", 2, "TP", 8 * 14336, 3)  # dense layers only
    assert t["MLP all-reduce (down_proj)"] == ("all_reduce", 2, "TP", 8 * 14336, 3)
    assert t["sequence-parallel attention reduce-scatter"] == ("reduce_scatter", 2, "TP", chunked, 58)
    assert t["sequence-parallel all-gather"] == ("all_gather", 2, "TP", chunked, 57)
    assert t["sequence-parallel final all-gather"] == ("all_gather", 2, "TP", 2 * chunked, 1)
    assert t["MoE dispatch (all-gather)"] == ("all_gather", 8, "EP", 8 * 4 * (14336 + 64), 58)
    assert t["MoE combine (reduce-scatter)"] == ("reduce_scatter", 8, "EP", 8 * 4 * 14336, 58)
    assert "MoE all-reduce" not in t


def test_llama_70b_tp8_and_tp4_and_none_at_tp1():
    h = 8192 * 2 * 8
    assert table("llama-3.1-70b", 8, 1) == {
        "embedding all-reduce": ("all_reduce", 8, "TP", h, 1),
        "attention all-reduce (o_proj)": ("all_reduce", 8, "TP", h, 80),
        "MLP all-reduce (down_proj)": ("all_reduce", 8, "TP", h, 80),
        "lm_head logits all-gather": ("all_gather", 8, "TP", 8 * 8 * 16032 * 2, 1),
    }
    assert table("llama-3.1-70b", 4, 1)["lm_head logits all-gather"] == ("all_gather", 4, "TP", 4 * 8 * 32064 * 2, 1)
    assert table("llama-3.1-70b", 1, 1) == {}


def test_deepep_backends_move_token_rank_and_token_expert_pairs():
    ht = table("deepseek-v3", 1, 8, all2all_backend="deepep_high_throughput")
    # grouped routing: 8 groups over 8 ranks, topk_group=4 -> at most 4 ranks per token
    assert ht["MoE dispatch (deepep_high_throughput)"] == ("all_to_all", 8, "EP", 8 * 4 * 14336, 58)
    ll = table("deepseek-v3", 1, 8, all2all_backend="deepep_low_latency")
    assert ll["MoE dispatch (deepep_low_latency)"] == ("all_to_all", 8, "EP", 8 * 8 * 14336, 58)
    assert ll["MoE combine (deepep_low_latency)"] == ("all_to_all", 8, "EP", 8 * 8 * 14336, 58)


def test_expected_ranks_reached_lies_between_one_and_min_of_top_k_and_ep():
    moe = _plan("qwen3-30b-a3b", 1, 8).moe[0]
    reached = expected_ranks_reached(moe, 8)
    assert 1 < reached < 8
    assert expected_ranks_reached(moe, 1) == pytest.approx(1.0)


def test_removed_backend_falls_back_to_allgather_reducescatter_and_unknown_is_refused():
    assert table("qwen3-30b-a3b", 1, 8, all2all_backend="pplx") == table("qwen3-30b-a3b", 1, 8)
    with pytest.raises(UsageError, match="--all2all_backend=moonep: is a vLLM backend this tool does not model"):
        table("qwen3-30b-a3b", 1, 8, all2all_backend="moonep")
    with pytest.raises(UsageError, match="--all2all_backend=fast"):
        table("qwen3-30b-a3b", 1, 8, all2all_backend="fast")


def test_fp8_block_dispatch_carries_one_byte_per_element_and_its_scales():
    t = table("deepseek-v3", 1, 8, dispatch=MoeDispatch.fp8(7168, "block128"))
    assert t["MoE dispatch (all-gather)"][3] == 8 * 8 * (7168 + 56 * 4 + 64)
    assert t["MoE combine (reduce-scatter)"][3] == 8 * 8 * 14336  # the output comes back in BF16


def test_monolithic_dispatch_gathers_router_logits():
    t = table("qwen3-30b-a3b", 1, 8, dispatch=MoeDispatch(2.0, router_logits=True))
    assert t["MoE dispatch (all-gather)"][3] == 8 * 8 * (4096 + 128 * 2)


def test_every_collective_cites_vllm_source_and_an_op_nccl_tests_has():
    for model, tp, ep in (("qwen3-30b-a3b", 2, 8), ("deepseek-v3", 8, 1), ("llama-3.1-70b", 8, 1)):
        for c in collectives(_plan(model, tp, ep), Layout.from_flags(tp, ep), 8):
            assert c.source.startswith("vllm/") and ".py: " in c.source
            assert c.op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
            assert c.bytes_per_rank > 0 and c.per_step > 0


def test_tokens_must_be_positive():
    with pytest.raises(UsageError, match="tokens=0"):
        table("llama-3.1-70b", 8, 1, tokens=0)


def test_dense_dp_ranks_are_independent_engines_and_moe_dp_ranks_sync_their_token_counts():
    dense = collectives(_plan("llama-3.1-70b", 4, 1), Layout(tp=4, dp=2), 8)
    assert "DP token-count sync" not in {c.name for c in dense}
    assert {c.group_kind for c in dense} == {"TP"}
    moe = {c.name: c for c in collectives(_plan("qwen3-30b-a3b", 1, 8), Layout.from_flags(1, 8), 8)}
    assert moe["DP token-count sync"].group == 8 and moe["DP token-count sync"].per_step == 1
