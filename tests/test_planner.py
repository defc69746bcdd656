"""Exact per-rank shapes and per-step counts, hand-computed from vllm_rules.md, for real configs."""

from __future__ import annotations

import functools
import os

import pytest
from conftest import SHARED_CONFIGS, shared_config_dir

from benchmark_model_kernels import config_source, meta_model, planner
from benchmark_model_kernels.errors import UsageError
from benchmark_model_kernels.plan import ModelInfo, Plan


@functools.lru_cache(maxsize=None)
def _build(path: str):
    src = config_source.resolve(path)
    return src, meta_model.build_meta_model(src.raw, location=src.directory)


def plan_of(name: str, tp: int = 1, ep: int = 1) -> Plan:
    path = name if name in config_source.list_bundled() else shared_config_dir(name)
    src, build = _build(path)
    info = ModelInfo(name=name, source=src.source, model_type=src.raw["model_type"],
                     architecture=build.architecture, notes=build.notes)
    return planner.plan_from_build(build, info, tp, ep)


def gemms(plan: Plan) -> dict[str, tuple[int, int, int, str, bool]]:
    return {g.name: (g.n, g.k, g.layers, g.parallel, g.bias) for g in plan.gemms}


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


def test_mla_with_q_lora_deepseek_v3_tp8_and_ep8():
    p = plan_of("deepseek-v3", 8)
    assert gemms(p) == {
        "mla.fused_qkv_a_proj": (2112, 7168, 61, "replicated", False),  # 1536 + 512 + 64, all 61 layers
        "mla.q_b_proj": (3072, 1536, 61, "column", False),  # 128/8 heads * (128+64)
        "mla.kv_b_proj": (4096, 512, 61, "column", False),  # 16 * (128 + 128)
        "o_proj": (7168, 2048, 61, "row", False),  # K = 16*128
        "gate_up_proj": (4608, 7168, 3, "column", False),  # 2*18432/8, first_k_dense_replace=3
        "down_proj": (7168, 2304, 3, "row", False),  # 18432/8
        "router": (256, 7168, 58, "replicated", False),  # E=256, 61-3 MoE layers
        "shared_expert.gate_up_proj": (512, 7168, 58, "column", False),  # 2*2048*1/8
        "shared_expert.down_proj": (7168, 256, 58, "row", False),  # 2048/8
        "lm_head": (16160, 7168, 1, "vocab", False),  # 129280/8
    }
    (m,) = p.moe
    # TP-MoE: all 256 experts, I = 2048/8
    assert (m.hidden, m.intermediate, m.experts, m.global_experts, m.top_k, m.layers) == (7168, 256, 256, 256, 8, 58)
    assert m.activation == "Swiglu" and m.gated and not m.bias
    r = m.routing
    assert (r.method, r.n_group, r.topk_group, r.routed_scaling_factor, r.use_routing_bias, r.scoring_func,
            r.renormalize) == ("deepseek_v3", 8, 4, 2.5, True, "sigmoid", True)
    p8 = plan_of("deepseek-v3", 8, 8)
    (m8,) = p8.moe
    assert (m8.intermediate, m8.experts, m8.global_experts) == (2048, 32, 256)  # 256/8 experts, full I
    # shared experts stay TP-sharded under EP
    assert gemms(p8)["shared_expert.gate_up_proj"] == (512, 7168, 58, "column", False)


def test_wide_ep_keeps_global_experts():
    p = plan_of("qwen3-30b-a3b", 8, 48)
    (m,) = p.moe
    # 128 // 48 = 2, remainder 32 -> rank 0 holds 3; full I = 768; routing still over 128, top-8 > 3
    assert (m.experts, m.global_experts, m.intermediate, m.top_k) == (3, 128, 768, 8)
    assert p.ep == 48 and p.complete


def test_mla_without_q_lora_deepseek_v2_lite_tp2():
    p = plan_of("deepseek-v2-lite", 2)
    g = gemms(p)
    assert g["mla.kv_a_proj_with_mqa"] == (576, 2048, 27, "replicated", False)  # 512 + 64, replicated
    assert g["mla.q_proj"] == (1536, 2048, 27, "column", False)  # 16/2 heads * 192
    assert g["mla.kv_b_proj"] == (2048, 512, 27, "column", False)  # 8 * (128 + 128)
    assert g["o_proj"] == (2048, 1024, 27, "row", False)  # K = 8*128
    assert g["gate_up_proj"] == (10944, 2048, 1, "column", False)  # 2*10944/2, 1 dense layer
    assert g["shared_expert.gate_up_proj"] == (2816, 2048, 26, "column", False)  # 2*(1408*2)/2
    assert "mla.fused_qkv_a_proj" not in g
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k, m.layers) == (704, 64, 6, 26)  # 1408/2
    assert (m.routing.method, m.routing.renormalize) == ("topk", False)  # softmax, norm_topk_prob False


def test_gpt_oss_120b_tp8():
    p = plan_of("gpt-oss-120b", 8)
    assert gemms(p) == {
        "qkv_proj": (640, 2880, 36, "column", True),  # (64/8 + 2*1)*64, with bias
        "o_proj": (2880, 512, 36, "row", True),  # 64*64/8, bias on rank 0
        "router": (128, 2880, 36, "replicated", True),  # router has a bias
        "lm_head": (25136, 2880, 1, "vocab", False),  # 201088/8
    }
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k, m.activation, m.bias) == (360, 128, 4, "SwigluBias", True)
    assert m.routing.method == "renormalize"


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


def test_qwen3_next_hybrid_tp8():
    p = plan_of("qwen3-next-80b-a3b", 8)
    assert gemms(p) == {
        "qkv_proj": (1536, 2048, 12, "column", False),  # gated: 2*16/8*256 + 2*1*256; 48/4 full-attn layers
        "gdn.in_proj_qkvz": (1536, 2048, 36, "column", False),  # (2*16*128 + 2*32*128)/8, 36 GDN layers
        "gdn.in_proj_ba": (8, 2048, 36, "column", False),  # 2*32/8
        "gdn.out_proj": (2048, 512, 36, "row", False),  # 32*128/8
        "o_proj": (2048, 512, 12, "row", False),  # 16*256/8
        "router": (512, 2048, 48, "replicated", False),
        "shared_expert.gate_up_proj": (128, 2048, 48, "column", False),  # 2*512/8
        "shared_expert.down_proj": (2048, 64, 48, "row", False),
        "shared_expert_gate": (1, 2048, 48, "replicated", False),
        "lm_head": (18992, 2048, 1, "vocab", False),  # 151936/8
    }
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k) == (64, 512, 10)  # 512/8


def test_nemotron_h_hybrid_tp8():
    p = plan_of("nemotron-h-56b", 8)
    g = gemms(p)
    # 118 layers: 54 Mamba2 (M), 54 MLP (-), 10 attention (*)
    assert g["mamba.in_proj"] == (4640, 8192, 54, "column", False)  # (2*16384 + 2*8*256 + 256)/8
    assert g["mamba.out_proj"] == (8192, 2048, 54, "row", False)  # 16384/8
    assert g["up_proj"] == (4096, 8192, 54, "column", False)  # relu2, non-gated: 32768/8
    assert g["down_proj"] == (8192, 4096, 54, "row", False)
    assert g["qkv_proj"] == (1280, 8192, 10, "column", False)  # (64/8 + 2*8/8)*128
    n = plan_of("nemotron-3-nano-30b-a3b", 8)
    (m,) = n.moe
    assert (m.activation, m.gated, m.intermediate, m.layers) == ("Relu2", False, 232, 23)  # 1856/8
    assert gemms(n)["mamba.in_proj"] == (1288, 2688, 23, "column", False)  # (8192 + 2*8*128 + 64)/8


def test_vlm_wrapper_gemma3_27b_language_model_only():
    p = plan_of("gemma-3-27b-it", 8)
    g = gemms(p)
    assert g["qkv_proj"] == (1024, 5376, 62, "column", False)  # (32/8 + 2*16/8)*128
    assert g["o_proj"] == (5376, 512, 62, "row", False)  # Hq*d = 4096 != H: 4096/8
    assert g["gate_up_proj"] == (5376, 5376, 62, "column", False)  # 2*21504/8 = 43008/8
    assert g["lm_head"] == (32776, 5376, 1, "vocab", False)  # 262208/8
    assert not any("vision" in m or "projector" in m for e in p.gemms for m in e.modules)
    assert any("language model only" in n for n in p.model.notes)


def test_gemma4_sliding_and_global_layers_get_distinct_names():
    p = plan_of("gemma-4-26b-a4b", 8)
    g = gemms(p)
    assert g["qkv_proj[sliding_attention]"] == (1024, 2816, 25, "column", False)  # (16/8 + 2*8/8)*256
    assert g["qkv_proj[full_attention]"] == (1536, 2816, 5, "column", False)  # K=V: 2*512 + 1*512
    assert g["gate_up_proj"][2] == 30 and p.moe[0].layers == 30  # dense MLP beside MoE in every layer


def test_fused_on_disk_layouts_equal_split_ones():
    # Phi-3 stores qkv_proj / gate_up_proj fused: per-rank shapes equal the split rule
    p = plan_of("phi-3-mini-4k-instruct", 4)
    g = gemms(p)
    assert g["qkv_proj"] == (2304, 3072, 32, "column", False)  # (32/4 + 2*32/4)*96
    assert g["gate_up_proj"] == (4096, 3072, 32, "column", False)  # 2*8192/4
    assert g["down_proj"] == (3072, 2048, 32, "row", False)


def test_non_gated_starcoder2():
    g = gemms(plan_of("starcoder2-7b", 4))
    assert g["up_proj"] == (4608, 4608, 32, "column", True)  # c_fc 18432/4, bias
    assert g["down_proj"] == (4608, 4608, 32, "row", True)
    assert g["qkv_proj"] == (1408, 4608, 32, "column", True)  # (36/4 + 2*4/4)*128


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
    with pytest.raises(UsageError, match="routed experts=8"):
        plan_of("mixtral-8x7b", 8, 16)


def _all_configs():
    if not os.path.isdir(SHARED_CONFIGS):
        return []
    return sorted(n for n in os.listdir(SHARED_CONFIGS) if os.path.isfile(os.path.join(SHARED_CONFIGS, n, "config.json")))


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
    src, build = _build(path)
    info = ModelInfo(name=name, source="local", model_type=src.raw["model_type"], architecture=build.architecture)
    published = planner.plan_from_build(build, info, 8, 1)
    assert bundled.gemms == published.gemms
    assert bundled.moe == published.moe


def test_required_bundled_models_present():
    assert {"llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "qwen3-8b", "deepseek-v3", "gpt-oss-120b",
            "mixtral-8x7b"} <= set(config_source.list_bundled())


def test_plan_json_round_trip():
    p = plan_of("deepseek-v3", 8, 8)
    assert Plan.from_json(p.to_json()) == p
