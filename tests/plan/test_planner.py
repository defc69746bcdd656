"""The planner's walk end to end: which modules are planned (decoder layers only, no towers), vLLM's
MoE-layer rule applied over transformers' choice, EP/TP refusals, and every shared config giving a
complete plan. Expected numbers are hand-computed from vLLM's rules (references/sharding.md); the
arithmetic is in the comments."""

from __future__ import annotations

import os

import pytest
from plan_helpers import build, gemms, plan_of, plan_raw

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.plan_schema import ModelInfo, Plan
from benchmark_model_kernels.plan import config_source, planner
from benchmark_model_kernels.vllm_rules.layout import Layout
from support import SHARED_CONFIGS, shared_config_dir


def test_dense_gqa_llama31_70b_tp8():
    p = plan_of("llama-3.1-70b", 8)
    assert p.complete
    assert gemms(p) == {
        "qkv_proj": (1280, 8192, 80, "column", False),  # (64/8 + 2*8/8)*128
        "o_proj": (8192, 1024, 80, "row", False),  # K = 64*128/8
        "gate_up_proj": (7168, 8192, 80, "column", False),  # 2*28672/8
        "down_proj": (8192, 3584, 80, "row", False),  # 28672/8
        "lm_head": (16032, 8192, 1, "vocab", False),  # 128256/8, once per step
    }
    assert p.moe == ()

def test_wide_ep_keeps_global_experts():
    p = plan_of("qwen3-30b-a3b", 8, 48)
    (m,) = p.moe
    # 128 // 48 = 2, remainder 32 -> rank 0 holds 3; full I = 768; routing still over 128, top-8 > 3
    assert (m.experts, m.global_experts, m.intermediate, m.top_k) == (3, 128, 768, 8)
    assert p.ep == 48 and p.complete

def test_wide_ep_remainder_on_first_ranks_and_ep_above_experts():
    p = plan_of("deepseek-v3", 16, 96)
    (m,) = p.moe
    # 256 = 2*96 + 64: the first 64 ranks hold 3 experts, rank 0 among them; full I = 2048
    assert (m.experts, m.global_experts, m.intermediate, m.top_k) == (3, 256, 2048, 8)
    # DP = 96/16 = 6 > 1: sequence-parallel MoE, shared experts replicated at full width 2*2048
    assert gemms(p)["shared_expert.gate_up_proj"] == (4096, 7168, 58, "replicated", False)
    # EP above the 128 experts, as vLLM builds it (expert_map_manager.py: determine_expert_map):
    # ranks 0-127 hold one expert each, rank 0 planned; full I = 2880; 256/8 = 32 DP ranks' tokens
    (m,) = plan_of("gpt-oss-120b", 8, 256).moe
    assert (m.experts, m.global_experts, m.intermediate, m.tokens_per_m) == (1, 128, 2880, 32)

def test_llama4_maverick_interleaved_tp8():
    p = plan_of("llama-4-maverick-17b-128e", 8)
    assert gemms(p) == {
        "qkv_proj": (896, 5120, 48, "column", False),  # (40/8 + 2*8/8)*128
        "o_proj": (5120, 640, 48, "row", False),  # 40*128/8
        "gate_up_proj": (4096, 5120, 24, "column", False),  # dense layers: 2*16384/8, step 2 -> 24
        "down_proj": (5120, 2048, 24, "row", False),
        "router": (128, 5120, 24, "replicated", False),
        "shared_expert.gate_up_proj": (2048, 5120, 24, "column", False),  # 2*8192/8
        "shared_expert.down_proj": (5120, 1024, 24, "row", False),
        "lm_head": (25256, 5120, 1, "vocab", False),  # 202048/8
    }
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k, m.layers) == (1024, 128, 1, 24)  # 8192/8
    r = m.routing
    assert (r.method, r.apply_router_weight_on_input, r.renormalize) == ("llama4", True, False)

def test_vlm_wrapper_gemma3_27b_language_model_only():
    p = plan_of("gemma-3-27b-it", 8)
    g = gemms(p)
    assert g["qkv_proj"] == (1024, 5376, 62, "column", False)  # (32/8 + 2*16/8)*128
    assert g["o_proj"] == (5376, 512, 62, "row", False)  # Hq*d = 4096 != H: 4096/8
    assert g["gate_up_proj"] == (5376, 5376, 62, "column", False)  # 2*21504/8 = 43008/8
    assert g["lm_head"] == (32776, 5376, 1, "vocab", False)  # 262208/8
    assert not any("vision" in m or "projector" in m for e in p.gemms for m in e.modules)
    assert any("language model only" in n for n in p.model.notes)

def test_vlm_whose_text_model_has_no_causal_class_builds_language_model_only(tmp_path):
    # Qwen2.5-VL: its text model (qwen2_5_vl_text) has no AutoModelForCausalLM class; the wrapper is
    # built on meta and only its language model is planned.
    raw = {"model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
           "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
           "num_hidden_layers": 2, "vocab_size": 152064,
           "vision_config": {"depth": 2, "hidden_size": 1280, "out_hidden_size": 3584, "intermediate_size": 3420,
                             "num_heads": 16}}
    p = plan_raw(tmp_path, raw, 4)
    assert p.complete
    assert gemms(p)["qkv_proj"] == (1152, 3584, 2, "column", True)  # 28/4*128 + 2*1*128
    assert not any("visual" in m for e in p.gemms for m in e.modules)

def test_kimi_k2_alias():
    p = plan_of("kimi-k2", 8)
    assert any("alias" in n for n in p.model.notes)
    (m,) = p.moe
    assert (m.global_experts, m.routing.n_group, m.routing.routed_scaling_factor) == (384, 1, 2.827)
    assert gemms(p)["gate_up_proj"][2] == 1  # first_k_dense_replace = 1

def test_tp_errors_name_the_field():
    with pytest.raises(UsageError, match="num_attention_heads=28"):
        plan_of("qwen2.5-7b", 8)
    with pytest.raises(UsageError, match="no routed experts"):
        plan_of("llama-3.1-8b", 1, 2)
    with pytest.raises(UsageError, match="multiple of --tp=8"):
        plan_of("qwen3-30b-a3b", 8, 4)
    # EP above the expert count is no error: vLLM builds it, rank 0 holding one of the 8 experts
    assert plan_of("mixtral-8x7b", 8, 16).moe[0].experts == 1

def test_moe_layer_freq_follows_vllm_not_transformers(tmp_path):
    # vLLM DeepseekV2DecoderLayer: MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0.
    # transformers ignores moe_layer_freq, so the planner applies vLLM's rule.
    raw = {"model_type": "deepseek_v2", "architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 2048,
           "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 10944,
           "moe_intermediate_size": 1408, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
           "first_k_dense_replace": 1, "moe_layer_freq": 2, "num_hidden_layers": 6, "kv_lora_rank": 512,
           "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "vocab_size": 102400, "n_group": 8, "topk_group": 3, "topk_method": "group_limited_greedy",
           "routed_scaling_factor": 16.0, "norm_topk_prob": False}
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported
    g = gemms(p)
    # MoE layers: 2, 4 (i >= 1 and even); dense: 0, 1, 3, 5
    assert g["gate_up_proj"] == (10944, 2048, 4, "column", False)  # 2*10944/2
    assert g["down_proj"] == (2048, 5472, 4, "row", False)
    assert g["router"] == (64, 2048, 2, "replicated", False)
    assert g["shared_expert.gate_up_proj"] == (2816, 2048, 2, "column", False)  # 2*(1408*2)/2
    (m,) = p.moe
    assert (m.layers, m.intermediate) == (2, 704)
    # grouped top-k without a correction bias (DeepSeek-V2 group_limited_greedy): groups kept
    r = m.routing
    assert (r.method, r.n_group, r.topk_group, r.routed_scaling_factor, r.use_routing_bias, r.scoring_func) == (
        "grouped_topk", 8, 3, 16.0, False, "softmax")

def test_qwen35_mlp_only_layers_follow_vllm(tmp_path):
    import json

    path = shared_config_dir("qwen3.5-35b-a3b")
    with open(os.path.join(path, "config.json")) as f:
        raw = json.load(f)
    text = raw["text_config"]
    text.update(mlp_only_layers=[0, 5], intermediate_size=5120, num_hidden_layers=8,
                layer_types=text["layer_types"][:8])
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported
    g = gemms(p)
    assert g["gate_up_proj"] == (5120, 2048, 2, "column", False)  # layers 0 and 5 dense: 2*5120/2
    assert g["router"][2] == 6 and p.moe[0].layers == 6

def _all_configs():
    if not os.path.isdir(SHARED_CONFIGS):
        return []
    return sorted(n for n in os.listdir(SHARED_CONFIGS)
                  if os.path.isfile(os.path.join(SHARED_CONFIGS, n, "config.json")))

@pytest.mark.parametrize("name", _all_configs())
def test_every_buildable_config_gives_a_complete_plan(name):
    try:
        p1 = plan_of(name, 1)
    except UsageError as e:
        assert "no native class" in str(e)  # needs remote code (nemotron-nas)
        return
    assert p1.complete, p1.unsupported
    assert sum(g.layers for g in p1.gemms if g.name == "lm_head") == 1
    try:
        p8 = plan_of(name, 8)
    except UsageError as e:
        assert "--tp=8" in str(e)  # heads do not divide by 8 (e.g. 28 or 36 heads)
        return
    assert p8.complete, p8.unsupported
    if p8.moe:
        assert plan_of(name, 8, 8).complete

@pytest.mark.parametrize("name", config_source.list_bundled())
def test_bundled_config_matches_published(name):
    bundled = plan_of(name, 8)
    path = shared_config_dir(name)
    src, meta = build(path)
    info = ModelInfo(name=name, source="local", model_type=src.raw["model_type"], architecture=meta.architecture)
    published = planner.plan_from_build(meta, info, Layout(tp=8))
    assert bundled.gemms == published.gemms
    assert bundled.moe == published.moe

def test_required_bundled_models_present():
    assert {"llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "qwen3-8b", "deepseek-v3", "gpt-oss-120b",
            "mixtral-8x7b"} <= set(config_source.list_bundled())

def test_plan_json_round_trip():
    p = plan_of("deepseek-v3", 8, 8)
    assert Plan.from_json(p.to_json()) == p


def test_planned_ep_layouts_carry_the_token_factor():
    for (tp, ep), per_m in {(1, 1): 1, (4, 1): 1, (4, 4): 1, (1, 8): 8, (2, 8): 4}.items():
        plan = plan_of("qwen3-30b-a3b", tp, ep)
        assert [e.tokens_per_m for e in plan.moe] == [per_m]
        again = Plan.from_json(plan.to_json())
        assert again == plan
        old = plan.to_dict()
        for e in old["moe"]:
            del e["tokens_per_m"]  # a plan JSON written before the field gets the same rule
        assert Plan.from_dict(old) == plan


def test_checkpoint_fp8_scheme_is_recorded():
    assert plan_of("deepseek-v3", 8, 8).model.fp8_scheme == "block128"
    plan = plan_of("qwen3-30b-a3b", 1, 1)
    assert plan.model.fp8_scheme == "per_tensor"
    assert "online" in plan.model.fp8_scheme_source
