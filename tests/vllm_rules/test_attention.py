"""vLLM's attention rules: heads per rank, KV-head replication, MLA's absorbed sizes, and the window
or chunk of each layer as vLLM's model files build them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.vllm_rules import attention


def test_heads_per_rank_and_replication():
    # QKVParallelLinear: Hq/tp query heads; Hkv/tp KV heads, or 1 replicated tp/Hkv times
    assert attention.mha_heads_per_rank(64, 8, 4) == (16, 2)
    assert attention.mha_heads_per_rank(64, 8, 16) == (4, 1)
    assert attention.kv_head_replicas(8, 16) == 2
    assert attention.kv_head_replicas(8, 8) == 1
    assert attention.kv_head_replicas(8, 4) == 1
    assert attention.mha_heads_per_rank(32, 1, 8) == (4, 1)  # multi-query: one head on every rank
    assert attention.kv_head_replicas(1, 8) == 8


def test_heads_that_tp_does_not_divide_are_refused():
    with pytest.raises(UsageError, match="num_attention_heads=40"):
        attention.mha_heads_per_rank(40, 8, 16)
    with pytest.raises(UsageError, match="num_key_value_heads=8"):
        attention.mha_heads_per_rank(48, 8, 12)  # 12 > 8 KV heads but not a multiple of 8


def test_mla_absorbed_decode_sizes():
    # DeepSeek-V3 at TP=8: 128/8 heads, qk = 512 + 64, vo = 512
    assert attention.mla_absorbed(128, 512, 64, 8) == (16, 576, 512)
    with pytest.raises(UsageError, match="num_attention_heads=128"):
        attention.mla_absorbed(128, 512, 64, 3)


def _cfg(**kw: object) -> SimpleNamespace:
    return SimpleNamespace(**kw)


def test_layer_window_follows_layer_types():
    cfg = _cfg(model_type="gemma3_text", sliding_window=1024,
               layer_types=["sliding_attention"] * 5 + ["full_attention"])
    assert [attention.layer_window(cfg, i) for i in range(6)] == [1024] * 5 + [0]


def test_layer_window_model_level_without_layer_types():
    # Mistral-7B-v0.1 / Phi-3: no layer_types, so cache_config.sliding_window holds for every layer
    assert attention.layer_window(_cfg(model_type="mistral", sliding_window=4096), 7) == 4096
    assert attention.layer_window(_cfg(model_type="llama", sliding_window=None), 0) == 0
    assert attention.layer_window(_cfg(model_type="mistral", sliding_window=0), 0) == 0  # 0 disables it


def test_layer_window_all_full_layer_types_has_none():
    # Qwen3: layer_types all full; the config's sliding_window (if any) is not the model-level one
    cfg = _cfg(model_type="qwen3", sliding_window=4096, layer_types=["full_attention"] * 4)
    assert {attention.layer_window(cfg, i) for i in range(4)} == {0}


def test_gpt_oss_even_layers_slide():
    cfg = _cfg(model_type="gpt_oss", sliding_window=128, layer_types=["full_attention"] * 4)
    # gpt_oss.py reads the layer index, not layer_types
    assert [attention.layer_window(cfg, i) for i in range(4)] == [128, 0, 128, 0]


def test_cohere2_window_counts_the_query_token_and_nemotron_h_every_layer():
    cfg = _cfg(model_type="cohere2", sliding_window=4096, layer_types=["sliding_attention", "full_attention"])
    assert [attention.layer_window(cfg, i) for i in range(2)] == [4097, 0]
    assert attention.layer_window(_cfg(model_type="cohere", sliding_window=4096), 0) == 0
    assert attention.layer_window(_cfg(model_type="nemotron_h", sliding_window=None,
                                       layer_types=["mamba", "attention"]), 1) == 0
    assert attention.layer_window(_cfg(model_type="nemotron_h", sliding_window=2048,
                                       layer_types=["mamba", "attention"]), 1) == 2048


def test_llama4_chunked_rope_layers_full_nope_layers():
    cfg = _cfg(model_type="llama4_text", attention_chunk_size=8192, no_rope_layers=[1, 1, 1, 0])
    assert [attention.layer_chunk(cfg, i) for i in range(4)] == [8192, 8192, 8192, 0]
    assert attention.layer_chunk(_cfg(model_type="llama", attention_chunk_size=8192), 0) == 0


def test_mixer_reasons_name_the_driver_routines():
    gdn = attention.gdn_reason(16, 32, 128, 128)
    assert "gated_delta_rule_decode" in gdn and "chunk_gated_delta_rule" in gdn and "release-v0.6.18" in gdn
    assert "not planned as rows yet" in gdn
    mamba = attention.mamba2_reason(128, 64, 8, 128)
    assert "selective_state_update" in mamba and "benchmarks/routines/mamba.py" in mamba
