"""The plan's attention entries and mixers not timed, on real configs (bundled and ../shared/configs):
per-rank heads with KV-head replication, MLA's absorbed form, sliding-window and chunked layer
types with their counts, hybrid models' recurrent mixers; the plan JSON round trip; the preview."""

from __future__ import annotations

import json
import os

import pytest
from plan_helpers import plan_of, plan_raw

from benchmark_model_kernels.core.plan_schema import AttentionEntry, Plan
from benchmark_model_kernels.plan import preview
from support import SHARED_CONFIGS


def by_name(plan: Plan) -> dict[str, AttentionEntry]:
    return {a.name: a for a in plan.attention}


def test_gqa_with_kv_heads_replicated():
    # Llama-3.1-70B: 64 query heads, 8 KV heads, head_dim 128 (hidden 8192 / 64). TP=16 > 8 KV heads:
    # each rank holds 1 KV head, every KV head on 16/8 = 2 ranks.
    (a,) = plan_of("llama-3.1-70b", 16).attention
    assert (a.name, a.kind, a.layers) == ("attn", "mha", 80)
    assert (a.num_q_heads, a.num_kv_heads, a.total_q_heads, a.total_kv_heads) == (4, 1, 64, 8)
    assert (a.head_dim_qk, a.head_dim_vo, a.sliding_window) == (128, 128, 0)
    assert a.kv_elements_per_token == 1 * (128 + 128)
    assert "x2 replicated" in "\n".join(preview.attention_lines(plan_of("llama-3.1-70b", 16)))
    (a4,) = plan_of("llama-3.1-70b", 4).attention
    assert (a4.num_q_heads, a4.num_kv_heads) == (16, 2)  # 64/4, 8/4: no replication


def test_mla_absorbed_form():
    # DeepSeek-V3 TP=8: 128/8 = 16 heads; qk = kv_lora_rank 512 + qk_rope_head_dim 64; vo = 512
    (a,) = plan_of("deepseek-v3", 8).attention
    assert (a.name, a.kind, a.layers) == ("mla", "mla", 61)
    assert (a.num_q_heads, a.num_kv_heads, a.total_q_heads, a.total_kv_heads) == (16, 1, 128, 1)
    assert (a.head_dim_qk, a.head_dim_vo, a.kv_lora_rank, a.qk_rope_head_dim) == (576, 512, 512, 64)
    assert a.kv_elements_per_token == 576  # the latent and the RoPE key, one "head"
    # prefill up-projects K and V per head: nope 128 (+ rope 64) and v 128, from config.json
    assert (a.qk_nope_head_dim, a.v_head_dim) == (128, 128)
    # under EP=8 with TP=1 every rank runs all 128 heads (data-parallel attention)
    (ep,) = plan_of("deepseek-v3", 1, 8).attention
    assert ep.num_q_heads == 128


def test_gemma3_sliding_and_global_layer_types():
    # gemma-3-27b-it: layer_types give 52 sliding layers (window 1024) and 10 full ones; 32 query
    # heads, 16 KV heads, head_dim 128 (a key of its own, not 5376/32)
    p = plan_of("gemma-3-27b-it", 2)
    a = by_name(p)
    assert set(a) == {"attn.sliding", "attn"}
    assert (a["attn.sliding"].layers, a["attn.sliding"].sliding_window) == (52, 1024)
    assert (a["attn"].layers, a["attn"].sliding_window) == (10, 0)
    for e in a.values():
        assert (e.num_q_heads, e.num_kv_heads, e.head_dim_qk, e.head_dim_vo) == (16, 8, 128, 128)
    assert a["attn.sliding"].layers + a["attn"].layers == p.model.num_hidden_layers


def test_gpt_oss_alternating_sliding_window():
    # gpt-oss-120b: 36 layers, even ones sliding over 128 tokens (gpt_oss.py: layer_idx % 2 == 0);
    # 64 heads, 8 KV heads, head_dim 64 at TP=8: 8 query heads and 1 KV head per rank
    a = by_name(plan_of("gpt-oss-120b", 8))
    assert (a["attn.sliding"].layers, a["attn.sliding"].sliding_window) == (18, 128)
    assert (a["attn"].layers, a["attn"].sliding_window) == (18, 0)
    assert (a["attn"].num_q_heads, a["attn"].num_kv_heads, a["attn"].head_dim_qk) == (8, 1, 64)


def test_qwen3_next_gated_delta_net_not_timed():
    # qwen3-next-80b-a3b: full_attention_interval 4 -> 12 gated full-attention layers (16 heads,
    # 2 KV heads, head_dim 256) and 36 GatedDeltaNet layers
    p = plan_of("qwen3-next-80b-a3b", 1)
    (a,) = p.attention
    assert (a.layers, a.num_q_heads, a.num_kv_heads, a.head_dim_qk, a.head_dim_vo) == (12, 16, 2, 256, 256)
    (gdn,) = p.mixers_not_timed
    assert (gdn.name, gdn.layers, gdn.modules) == ("gdn", 36, ("model.layers.*.linear_attn",))
    # per rank at TP=1: 16 key heads x 128, 32 value heads x 128; the driver's routines are named
    assert "16 key heads x 128, 32 value heads x 128" in gdn.reason
    assert "gated_delta_rule_decode" in gdn.reason and "not planned as rows yet" in gdn.reason
    (gdn2,) = plan_of("qwen3-next-80b-a3b", 4).mixers_not_timed
    assert "4 key heads x 128, 8 value heads x 128" in gdn2.reason


def test_nemotron_h_mamba2_not_timed():
    # nemotron-h-56b: hybrid_override_pattern holds 54 'M' (Mamba2) and 10 '*' (attention) layers
    p = plan_of("nemotron-h-56b", 1)
    (a,) = p.attention
    assert (a.layers, a.num_q_heads, a.num_kv_heads, a.head_dim_qk) == (10, 64, 8, 128)
    (mamba,) = p.mixers_not_timed
    assert (mamba.name, mamba.layers) == ("mamba", 54)
    assert "selective_state_update" in mamba.reason and "benchmarks/routines/mamba.py" in mamba.reason


def test_llama4_chunked_and_nope_layers():
    # Llama-4-Scout: attention_chunk_size 8192 on the RoPE layers; no_rope_layers (derived with
    # interval 4) leaves every 4th of 48 layers NoPE with full attention
    a = by_name(plan_of("llama-4-scout-17b-16e", 1))
    assert (a["attn.chunked"].layers, a["attn.chunked"].attention_chunk_size) == (36, 8192)
    assert (a["attn"].layers, a["attn"].attention_chunk_size, a["attn"].sliding_window) == (12, 0, 0)


def test_mistral_model_level_window():
    (a,) = plan_of("mistral-7b-v0.1", 1).attention
    assert (a.name, a.layers, a.sliding_window) == ("attn.sliding", 32, 4096)


def _shared_names() -> list[str]:
    if not os.path.isdir(SHARED_CONFIGS):
        return []
    names = []
    for n in sorted(os.listdir(SHARED_CONFIGS)):
        path = os.path.join(SHARED_CONFIGS, n, "config.json")
        # a config whose classes are remote code the folder lacks is no plan (nemotron-nas)
        if os.path.isfile(path) and "auto_map" not in json.load(open(path, encoding="utf-8")):
            names.append(n)
    return names


@pytest.mark.parametrize("name", _shared_names() or ["(no shared configs)"])
def test_every_decoder_layer_has_one_token_mixer(name):
    """Every layer of every shared config is an attention entry or a mixer not timed (the DeepSeek
    sparse-attention indexer sits beside MLA); Nemotron-H's MLP/MoE-only layers have none."""
    if name == "(no shared configs)":
        pytest.skip("../shared/configs not present")
    p = plan_of(name, 1)
    assert p.attention or p.mixers_not_timed
    mixers = sum(a.layers for a in p.attention) + sum(x.layers for x in p.mixers_not_timed if x.name != "indexer")
    if p.model.model_type == "nemotron_h":
        assert mixers < p.model.num_hidden_layers
    else:
        assert mixers == p.model.num_hidden_layers
    for a in p.attention:
        assert a.num_q_heads >= a.num_kv_heads >= 1 and a.head_dim_qk > 0 and a.head_dim_vo > 0


def test_plan_json_round_trip_with_attention_entries():
    for p in (plan_of("gemma-3-27b-it", 2), plan_of("qwen3-next-80b-a3b", 2), plan_of("deepseek-v3", 8)):
        back = Plan.from_json(p.to_json())
        assert back == p
        assert back.attention and back.attention[0].kv_elements_per_token == p.attention[0].kv_elements_per_token


def test_plan_json_refuses_a_bad_attention_entry():
    from benchmark_model_kernels.core.plan_schema import PlanError

    d = plan_of("llama-3.1-8b", 1).to_dict()
    d["attention"][0]["num_kv_heads"] = 0
    with pytest.raises(PlanError, match=r"attention\[0\].num_kv_heads=0: must be a positive integer"):
        Plan.from_dict(d)
    d["attention"][0]["num_kv_heads"] = 8
    d["attention"][0]["kind"] = "linear"
    with pytest.raises(PlanError, match=r"attention\[0\].kind=\"linear\": must be one of mha, mla"):
        Plan.from_dict(d)


def test_preview_attention_section():
    text = preview.format_plan(plan_of("qwen3-next-80b-a3b", 1))
    assert "Attention (1):" in text
    assert "not timed[gdn] x36 (model.layers.*.linear_attn): GatedDeltaNet" in text
    text = preview.format_plan(plan_of("deepseek-v3", 8))
    assert "576/512 (latent 512 + rope 64)" in text and "1152 / 576" in text  # 576 x 2 B, x 1 B


def test_missing_sliding_window_is_refused(tmp_path):
    """A sliding layer whose window config.json leaves to the class default is no plan."""
    from benchmark_model_kernels.core.errors import UsageError

    raw = {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "hidden_size": 256,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
           "num_hidden_layers": 2, "vocab_size": 1024}
    with pytest.raises(UsageError, match="sliding_window missing"):
        plan_raw(tmp_path, raw, 1)
    p = plan_raw(tmp_path, {**raw, "sliding_window": 512}, 1)
    assert by_name(p)["attn.sliding"].sliding_window == 512
