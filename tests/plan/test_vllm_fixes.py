"""Rules the plan follows because vLLM's own model classes do (found by `--cross_check vllm`), each
pinned with shapes computed by hand from the config."""

from __future__ import annotations

import json

import pytest
from plan_helpers import gemms, plan_of, plan_raw

from benchmark_model_kernels.vllm_rules import sharding
from benchmark_model_kernels.vllm_rules.architectures import vllm_refusal
from support import shared_config_dir


def _m_divisors(plan) -> dict[str, int]:
    return {g.name: g.m_divisor for g in plan.gemms}


def test_router_on_the_sequence_parallel_chunk_without_shared_experts():
    # qwen3_moe.py: Qwen3MoeSparseMoeBlock chunks the tokens before its GateLinear under
    # sequence-parallel MoE (TP=2, DP=8/2=4): router 128 x 2048 on ceil(M/2) rows.
    p = plan_of("qwen3-30b-a3b", 2, 8)
    assert gemms(p)["router"] == (128, 2048, 48, "replicated", False)
    assert _m_divisors(p)["router"] == 2
    assert p.moe[0].tokens_per_m == 4 and p.moe[0].experts == 16  # 128/8 experts, 8/2 DP ranks' tokens
    # gpt_oss.py: MLPBlock does the same (router 32 x 2880 with bias, ceil(M/4) rows at TP=4).
    assert _m_divisors(plan_of("gpt-oss-20b", 4, 8))["router"] == 4
    # TP=EP (DP=1) is no sequence-parallel MoE: all M rows.
    assert _m_divisors(plan_of("qwen3-30b-a3b", 8, 8))["router"] == 1


def test_glm45_router_keeps_all_rows():
    # glm4_moe.py: Glm4MoE never chunks; shared experts stay TP-split (1 x 1536 -> 2*1536/2 per rank).
    p = plan_of("glm-4.5", 2, 8)
    assert _m_divisors(p)["router"] == 1
    assert gemms(p)["shared_expert.gate_up_proj"] == (2 * 1536 // 2, 5120, 89, "column", False)


def test_axk1_shared_experts_replicated_under_sequence_parallel_moe(tmp_path):
    # AXK1.py: AXK1MoE builds its shared experts with disable_tp under sequence-parallel MoE (TP=2,
    # DP=4): gate_up 2*2048 x 7168 and down 7168 x 2048 at full width on ceil(M/2) rows.
    transformers = pytest.importorskip("transformers")
    if "axk1" not in transformers.CONFIG_MAPPING:
        pytest.skip("this transformers has no axk1")
    raw = transformers.CONFIG_MAPPING["axk1"]().to_dict()
    raw["architectures"] = ["AXK1ForCausalLM"]
    p = plan_raw(tmp_path, raw, 2, 8)
    g = gemms(p)
    assert g["shared_expert.gate_up_proj"][:2] == (4096, 7168) and g["shared_expert.down_proj"][:2] == (7168, 2048)
    assert _m_divisors(p)["shared_expert.down_proj"] == 2 and _m_divisors(p)["router"] == 2


def test_gemma4_routes_with_its_own_function():
    (m,) = plan_of("gemma-4-26b-a4b").moe
    assert (m.routing.method, m.routing.scoring_func, m.routing.renormalize) == ("gemma4", "softmax", True)


def _gemma4_small(tmp_path, **extra):
    """Gemma 4 26B's text config made dense with KV-shared layers and per-layer inputs (the layout
    of the small Gemma 4 models)."""
    raw = json.load(open(f"{shared_config_dir('gemma-4-26b-a4b')}/config.json"))
    text = raw["text_config"]
    for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
        text.pop(key)
    text.update(enable_moe_block=False, num_kv_shared_layers=12, hidden_size_per_layer_input=256,
                vocab_size_per_layer_input=262144, use_double_wide_mlp=True, **extra)
    return plan_raw(tmp_path, raw, 2)


def test_kv_shared_layers_hold_q_and_o_only(tmp_path):
    # 30 layers, the last 12 (18-29) KV-shared; full attention every 6th (5, 11, ..., 29).
    # Hq=16, sliding head_dim 256, global head_dim 512, TP=2.
    g = gemms(_gemma4_small(tmp_path))
    assert g["q_proj[sliding_attention]"] == (16 * 256 // 2, 2816, 10, "column", False)  # layers 18-22, 24-28
    assert g["q_proj[full_attention]"] == (16 * 512 // 2, 2816, 2, "column", False)  # layers 23, 29
    # The 18 layers before keep the fused QKV: sliding 8 KV heads of 256, full 2 of 512 with K=V.
    assert g["qkv_proj[sliding_attention]"] == ((16 + 2 * 8) * 256 // 2, 2816, 15, "column", False)
    assert g["qkv_proj[full_attention]"] == ((16 // 2 + 2) * 512, 2816, 3, "column", False)
    assert g["o_proj[sliding_attention]"] == (2816, 16 * 256 // 2, 25, "row", False)
    assert g["o_proj[full_attention]"] == (2816, 16 * 512 // 2, 5, "row", False)
    # use_double_wide_mlp: the KV-shared layers' MLP is 2*2112 wide.
    assert g["gate_up_proj"] == (2 * 2112 // 2, 2816, 18, "column", False)
    assert g["gate_up_proj[2]"] == (2 * 4224 // 2, 2816, 12, "column", False)


def test_per_layer_input_projections(tmp_path):
    # gemma4.py: per_layer_input_gate H -> 256 and per_layer_projection 256 -> H, ReplicatedLinear
    # per layer; per_layer_model_projection H -> 30*256, ColumnParallelLinear once per step.
    p = _gemma4_small(tmp_path)
    g = gemms(p)
    assert g["per_layer_input_gate"] == (256, 2816, 30, "replicated", False)
    assert g["per_layer_projection"] == (2816, 256, 30, "replicated", False)
    assert g["per_layer_model_projection"] == (30 * 256 // 2, 2816, 1, "column", False)
    assert p.complete


def _nemotron_latent(tmp_path, tp: int, ep: int):
    raw = json.load(open(f"{shared_config_dir('nemotron-3-nano-30b-a3b')}/config.json"))
    raw["moe_latent_size"] = 1024
    return plan_raw(tmp_path, raw, tp, ep)


def test_latent_moe(tmp_path):
    # nemotron_h.py: NemotronHMoE with moe_latent_size: experts in the 1024 latent width,
    # fc1_latent_proj 2688 -> 1024 and fc2_latent_proj 1024 -> 2688 replicated, 23 MoE layers.
    p = _nemotron_latent(tmp_path, 1, 1)
    (m,) = p.moe
    assert (m.hidden, m.intermediate, m.experts, m.gated, m.activation) == (1024, 1856, 128, False, "Relu2")
    g = gemms(p)
    assert g["moe.fc1_latent_proj"] == (1024, 2688, 23, "replicated", False)
    assert g["moe.fc2_latent_proj"] == (2688, 1024, 23, "replicated", False)
    assert g["router"] == (128, 2688, 23, "replicated", False)  # the router reads the full width
    # Under sequence-parallel MoE (TP=2, DP=2) the latent projections run on ceil(M/2) rows.
    p = _nemotron_latent(tmp_path, 2, 4)
    assert _m_divisors(p)["moe.fc1_latent_proj"] == 2 and p.moe[0].experts == 32


def test_attention_output_gate_follows_the_config():
    class Cfg:
        def __init__(self, model_type, **kw):
            self.model_type = model_type
            self.__dict__.update(kw)

    assert sharding.attention_output_gate(Cfg("qwen3_next"))  # vLLM's default True
    assert not sharding.attention_output_gate(Cfg("qwen3_next", attn_output_gate=False))
    assert not sharding.attention_output_gate(Cfg("llama"))


def test_preview_says_when_vllm_refuses():
    assert "Transformers backend" in vllm_refusal(["Starcoder2ForCausalLM"])
    assert "last in vLLM 0.10.2" in vllm_refusal(["MllamaForConditionalGeneration"])
    assert vllm_refusal(["LlamaForCausalLM"]) == ""
