"""Architectures outside the shared configs whose plans were checked against vLLM 0.33.0's own
classes (examples/vllm_fidelity/unseen.md); the shapes here are computed by hand from the configs."""

from __future__ import annotations

import pytest
from plan_helpers import gemms, plan_raw

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.vllm_rules import moe as vllm_moe

DBRX = {"model_type": "dbrx", "architectures": ["DbrxForCausalLM"], "d_model": 6144, "n_heads": 48, "n_layers": 2,
        "max_seq_len": 32768, "vocab_size": 100352,
        "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
        "ffn_config": {"moe_num_experts": 16, "moe_top_k": 4, "ffn_hidden_size": 10752, "ffn_act_fn": {"name": "silu"}}}


def test_dbrx_stacked_experts_and_router_tp2(tmp_path):
    p = plan_raw(tmp_path, DBRX, 2)
    assert p.complete, p.unsupported
    g = gemms(p)
    assert g["qkv_proj"] == (4096, 6144, 2, "column", False)  # Wqkv: (48/2 + 2*8/2)*128
    assert g["o_proj"] == (6144, 3072, 2, "row", False)  # out_proj K = 48*128/2
    assert g["router"] == (16, 6144, 2, "replicated", False)  # router.layer: GateLinear H -> E
    (m,) = p.moe
    # experts.mlp w1/v1/w2 [16*10752, 6144]: 16 experts, I_r = 10752/2, top-k from ffn_config
    assert (m.hidden, m.intermediate, m.experts, m.global_experts, m.top_k, m.activation, m.gated) == \
        (6144, 5376, 16, 16, 4, "Swiglu", True)
    assert (m.routing.method, m.routing.scoring_func, m.routing.renormalize) == ("renormalize", "softmax", True)


def test_dbrx_expert_parallel_is_refused_as_vllm_refuses_it(tmp_path):
    # vLLM reads the expert count from the top level only (CONFIG_FIELD_ALIASES["num_experts"]);
    # DBRX keeps moe_num_experts in ffn_config, so vLLM's config check refuses EP.
    with pytest.raises(UsageError, match="ffn_config"):
        plan_raw(tmp_path, DBRX, 2, 8)
    assert not vllm_moe.vllm_sees_experts(type("Cfg", (), {"ffn_config": {"moe_num_experts": 16}})())
    assert vllm_moe.vllm_sees_experts(type("Cfg", (), {"moe_num_experts": 16})())
    assert vllm_moe.vllm_sees_experts(type("Cfg", (), {"block_configs": [{"block_type": "moe",
                                                                          "n_routed_experts": 8}]})())


def test_ernie_selects_on_softmax_plus_correction_bias(tmp_path):
    raw = {"model_type": "ernie4_5_moe", "architectures": ["Ernie4_5_MoeForCausalLM"], "hidden_size": 2560,
           "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288,
           "moe_intermediate_size": 1536, "moe_num_experts": 64, "moe_k": 6, "moe_num_shared_experts": 2,
           "moe_layer_start_index": 1, "moe_layer_interval": 1, "num_hidden_layers": 3, "vocab_size": 103424}
    p = plan_raw(tmp_path, raw, 2, 4)
    (m,) = p.moe
    # vllm/model_executor/models/ernie45_moe.py passes no scoring_func: FusedMoE's softmax, with the bias
    assert (m.routing.method, m.routing.scoring_func, m.routing.use_routing_bias, m.routing.renormalize) == \
        ("softmax_bias", "softmax", True, True)
    assert (m.intermediate, m.experts, m.global_experts, m.layers) == (1536, 16, 64, 2)  # EP 4: 64/4, full I
    assert any("softmax scores plus a correction bias" in n for n in p.model.notes)


def test_routing_fixed_in_vllm_code_wins_over_the_config():
    class Cfg:
        model_type = "glm4_moe"
        scoring_func = "softmax"  # Glm4MoE passes scoring_func="sigmoid" whatever the config says
        n_group = 1
        topk_group = 1
        norm_topk_prob = True
        use_routing_bias = True

    r, _ = vllm_moe.routing(Cfg(), None, None)
    assert (r.method, r.scoring_func) == ("deepseek_v3", "sigmoid")
    Cfg.model_type, Cfg.norm_topk_prob, Cfg.use_routing_bias = "olmoe", True, False
    r, _ = vllm_moe.routing(Cfg(), None, None)
    assert (r.method, r.renormalize) == ("topk", False)  # OlmoeMoE: renormalize=False


def test_qwen2_moe_without_shared_expert_keeps_only_its_gate(tmp_path):
    raw = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 3584,
           "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
           "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 0, "num_experts": 64,
           "num_experts_per_tok": 8, "num_hidden_layers": 2, "norm_topk_prob": False, "vocab_size": 151936}
    p = plan_raw(tmp_path, raw, 2, 4)
    assert p.complete, p.unsupported
    g = gemms(p)
    # vLLM builds no shared expert for size 0 but always its gate H -> 1 (Qwen2MoeSparseMoeBlock)
    assert not any(name.startswith("shared_expert.") for name in g)
    assert g["shared_expert_gate"] == (1, 3584, 2, "replicated", False)
    assert g["qkv_proj"] == (2304, 3584, 2, "column", True)  # (28/2 + 2*(4/2))*128, d = 3584/28
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.global_experts) == (2560, 16, 64)  # EP 4: full I, 64/4 experts
    with pytest.raises(UsageError, match="shared_expert_intermediate_size"):
        plan_raw(tmp_path, {**raw, "shared_expert_intermediate_size": -1}, 2)


def test_lfm2_short_conv_layers_tp2(tmp_path):
    idx = [2, 5, 8, 10, 12, 14]
    raw = {"model_type": "lfm2", "architectures": ["Lfm2ForCausalLM"], "hidden_size": 2048, "block_dim": 2048,
           "conv_dim": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 12288, "block_ff_dim": 12288, "block_multiple_of": 256,
           "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True, "conv_L_cache": 3,
           "conv_bias": False, "full_attn_idxs": idx, "vocab_size": 65536, "tie_word_embeddings": True,
           "layer_types": ["full_attention" if i in idx else "conv" for i in range(16)]}
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported
    g = gemms(p)
    # vLLM ShortConv: in_proj MergedColumnParallel [H, H, H] -> 3*2048/2; out_proj RowParallel K = 2048/2
    assert g["short_conv.in_proj"] == (3072, 2048, 10, "column", False)
    assert g["short_conv.out_proj"] == (2048, 1024, 10, "row", False)
    assert g["qkv_proj"] == (1536, 2048, 6, "column", False)  # (32/2 + 2*(8/2))*64, d = 2048/32
