"""vLLM's MoE rules as pure functions: which layers are MoE, the experts' activation, the routing.
The same configs run through the whole planner in tests/plan (test_planner.py, test_roles.py)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from benchmark_model_kernels.core.plan_schema import Routing
from benchmark_model_kernels.vllm_rules import moe


def cfg(**kw) -> SimpleNamespace:
    return SimpleNamespace(**kw)


def with_bias(path: str = "") -> torch.nn.Module:
    """A router-like module holding an e_score_correction_bias, at `path` below it."""
    root = torch.nn.Module()
    mod = root
    for part in [p for p in path.split(".") if p]:
        child = torch.nn.Module()
        mod.add_module(part, child)
        mod = child
    mod.register_buffer("e_score_correction_bias", torch.zeros(8, device="meta"))
    return root


def test_moe_layers_first_k_and_frequency():
    # vLLM DeepseekV2DecoderLayer: MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0
    c = cfg(model_type="deepseek_v2", first_k_dense_replace=1, moe_layer_freq=2)
    assert moe.vllm_moe_layers(c, 6) == {2, 4}
    assert moe.vllm_moe_layers(cfg(model_type="deepseek_v3", first_k_dense_replace=3), 61) == set(range(3, 61))


def test_moe_layers_sparse_step_and_mlp_only_layers():
    # Qwen: MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
    assert moe.vllm_moe_layers(cfg(model_type="qwen2_moe", decoder_sparse_step=2, mlp_only_layers=[]), 4) == {1, 3}
    assert moe.vllm_moe_layers(cfg(model_type="qwen3_5_moe_text", mlp_only_layers=[0, 5]), 8) == {1, 2, 3, 4, 6, 7}


def test_moe_layers_other_model_types_have_no_rule():
    assert moe.vllm_moe_layers(cfg(model_type="mixtral"), 32) is None
    assert moe.vllm_moe_layers(cfg(), 32) is None


def test_activation_names():
    silu = cfg(hidden_act="silu")
    assert moe.activation(silu, None, gated=True, bias=False) == ("Swiglu", "")
    assert moe.activation(silu, None, gated=False, bias=False) == ("Silu", "")
    assert moe.activation(cfg(hidden_act="gelu_pytorch_tanh"), None, gated=True, bias=False) == ("Geglu", "")
    assert moe.activation(cfg(mlp_hidden_act="relu2", hidden_act="silu"), None, gated=False, bias=False) == (
        "Relu2", "")  # mlp_hidden_act is read first (Nemotron-H)
    assert moe.activation(cfg(), None, gated=True, bias=False) == ("Swiglu", "")  # default silu
    assert moe.activation(cfg(hidden_act="relu"), None, gated=True, bias=False) == (None, "")  # no gated ReLU
    assert moe.activation(cfg(hidden_act="tanh"), None, gated=True, bias=False) == (None, "")


def test_gpt_oss_clamped_swiglu_is_swiglubias_with_a_note():
    experts = SimpleNamespace(alpha=1.702, limit=7.0)
    act, note = moe.activation(cfg(hidden_act="silu"), experts, gated=True, bias=True)
    assert act == "SwigluBias" and "GPT-OSS" in note
    assert moe.activation(cfg(hidden_act="silu"), experts, gated=True, bias=False) == ("Swiglu", "")


def test_deepseek_v3_grouped_routing_with_bias():
    c = cfg(model_type="deepseek_v3", n_group=8, topk_group=4, routed_scaling_factor=2.5, scoring_func="sigmoid",
            norm_topk_prob=True)
    r, note = moe.routing(c, with_bias(), None)
    assert (r.method, r.n_group, r.topk_group, r.routed_scaling_factor, r.use_routing_bias, r.scoring_func,
            r.renormalize) == ("deepseek_v3", 8, 4, 2.5, True, "sigmoid", True)
    assert note == ""


def test_grouped_topk_without_bias_keeps_the_groups():
    # DeepSeek-V2 group_limited_greedy: vLLM runs grouped_topk, no FlashInfer method
    c = cfg(model_type="deepseek_v2", n_group=8, topk_group=3, routed_scaling_factor=16.0)
    r, _ = moe.routing(c, torch.nn.Module(), torch.nn.Module())
    assert (r.method, r.n_group, r.topk_group, r.routed_scaling_factor, r.use_routing_bias, r.scoring_func) == (
        "grouped_topk", 8, 3, 16.0, False, "softmax")


def test_llama4_routing():
    r, _ = moe.routing(cfg(model_type="llama4_text"), None, None)
    assert (r.method, r.apply_router_weight_on_input, r.renormalize) == ("llama4", True, False)


def test_bias_anywhere_below_router_or_block_marks_routing_bias():
    # Ernie 4.5 keeps the bias in gate.moe_statics; MiniMax-M2 has it without groups
    # (vLLM's Ernie block selects on softmax + bias: vllm/model_executor/models/ernie45_moe.py)
    r, _ = moe.routing(cfg(model_type="ernie4_5_moe"), None, with_bias("gate.moe_statics"))
    assert r.use_routing_bias and r.method == "softmax_bias" and r.scoring_func == "softmax"
    r, _ = moe.routing(cfg(model_type="minimax_m2"), None, with_bias("gate"))
    assert r.use_routing_bias and r.method == "minimax2" and r.scoring_func == "sigmoid"
    assert moe.routing(cfg(use_routing_bias=True), None, None)[0].use_routing_bias


def test_softmax_and_sigmoid_top_k():
    assert moe.routing(cfg(norm_topk_prob=True), None, None) == (Routing("renormalize"), "")
    assert moe.routing(cfg(), None, None)[0].method == "renormalize"  # norm_topk_prob unset: renormalize
    r, _ = moe.routing(cfg(norm_topk_prob=False), None, None)
    assert (r.method, r.renormalize) == ("topk", False)
    assert moe.routing(cfg(scoring_func="sigmoid"), None, None)[0].method == "sigmoid_renorm"
    assert moe.routing(cfg(scoring_func="sigmoid", norm_topk_prob=False), None, None)[0].method == "sigmoid"


def test_phimoe_sparsemixer_comes_with_a_note():
    r, note = moe.routing(cfg(model_type="phimoe"), None, None)
    assert r == Routing("sparsemixer", scoring_func="softmax", renormalize=False)
    assert "sparsemixer" in note
