"""vLLM's attention rules: the per-rank heads, head sizes and window of each attention layer, and
why a token mixer that is not softmax attention gets no row.

In: a layer's logical head counts and sizes (from the meta model, checked against its q/k/v
widths by `plan/attention_roles.py`), the config, the layer index and the TP size. Out: the
numbers of a `plan.schema.AttentionEntry`, or the reason of a `MixerNotTimed`. Each rule cites the
vLLM 0.33.0 source it follows; references/sharding.md ("Attention") has worked examples.
"""

from __future__ import annotations

from typing import Any

from .config import config_value
from .sharding import kv_heads_per_rank, require_divides


def mha_heads_per_rank(total_q_heads: int, total_kv_heads: int, tp: int) -> tuple[int, int]:
    """(query heads, KV heads) one rank's attention runs (vllm/model_executor/layers/linear.py:
    QKVParallelLinear.__init__: num_heads = divide(total_num_heads, tp); num_kv_heads =
    divide(total_num_kv_heads, tp) when tp < total_num_kv_heads, else 1 with
    num_kv_head_replicas = divide(tp, total_num_kv_heads)). The model files pass the same counts to
    `Attention` (vllm/model_executor/models/llama.py: LlamaAttention.__init__).

    >>> mha_heads_per_rank(64, 8, 16), mha_heads_per_rank(32, 8, 2)
    ((4, 1), (16, 4))
    """
    return require_divides(total_q_heads, tp, "num_attention_heads"), kv_heads_per_rank(total_kv_heads, tp)


def kv_head_replicas(total_kv_heads: int, tp: int) -> int:
    """How many ranks hold a copy of each KV head: tp / total_kv_heads when TP exceeds the KV
    heads, else 1 (QKVParallelLinear.num_kv_head_replicas)."""
    return tp // total_kv_heads if tp > total_kv_heads else 1


def mla_absorbed(num_heads: int, kv_lora_rank: int, qk_rope_head_dim: int, tp: int) -> tuple[int, int, int]:
    """(query heads, query/key head dim, value/output head dim) of MLA as vLLM's decode runs it: the
    absorbed form, where W_UK folds into the query and W_UV into the output, so every head attends
    over the one shared latent of kv_lora_rank plus the RoPE key (vllm/model_executor/layers/mla.py:
    MultiHeadLatentAttentionWrapper builds MLAAttention with num_heads = num_attention_heads / tp,
    head_size = kv_lora_rank + qk_rope_head_dim; vllm/model_executor/layers/attention/
    mla_attention.py: MLAAttention, the KV cache holds one head of kv_lora_rank +
    qk_rope_head_dim per token, and the decode path (forward_mqa) takes queries of that width and
    returns kv_lora_rank per head before W_UV). TP must divide the heads
    (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MLAAttention.__init__).

    >>> mla_absorbed(128, 512, 64, 8)
    (16, 576, 512)
    """
    q_r = require_divides(num_heads, tp, "num_attention_heads")
    return q_r, kv_lora_rank + qk_rope_head_dim, kv_lora_rank


def _sliding_window(cfg: Any) -> int:
    """The config's sliding_window, 0 where it is absent, null or 0 (vllm/config/model.py:
    ModelConfig.__post_init__ turns a sliding_window of 0 into None: disabled)."""
    return int(config_value(cfg, "sliding_window", default=0) or 0)


def layer_window(cfg: Any, index: int) -> int:
    """Tokens the attention of decoder layer `index` looks back over (0: full attention), as the
    `Attention` vLLM builds for it holds it in `sliding_window`.

    `Attention.__init__` takes the model file's `per_layer_sliding_window`, else the model-level
    `cache_config.sliding_window` (vllm/model_executor/layers/attention/attention.py:
    Attention.__init__). The model-level one is the config's sliding_window only when the config
    has no layer_types or every layer type is "sliding_attention" (vllm/engine/arg_utils.py:
    EngineArgs.create_engine_config), so a model file without a per-layer rule (Mistral, Phi-3,
    Qwen2 through their Llama/Qwen2 classes) runs every layer with the config's window. Per-layer
    rules of the model files:
      - GPT-OSS: even layers sliding, odd layers full (vllm/model_executor/models/gpt_oss.py:
        OAIAttention.__init__, `layer_idx % 2 == 0`).
      - Nemotron-H: every attention layer gets config.sliding_window
        (vllm/model_executor/models/nemotron_h.py: NemotronHAttention.__init__).
      - Cohere2: layer_types[i] == "sliding_attention" -> sliding_window + 1, the window plus the
        query token (vllm/model_executor/models/commandr.py: CohereAttention.__init__); Cohere v1
        none.
      - Llama, Gemma 3, Gemma 4 and the models built on their classes: layer_types[i] ==
        "sliding_attention" -> sliding_window, else full (vllm/model_executor/models/llama.py:
        LlamaAttention.__init__; gemma3.py: Gemma3Attention.__init__; gemma4.py:
        Gemma4Attention.__init__).
    """
    model_type = str(getattr(cfg, "model_type", ""))
    if model_type == "gpt_oss":
        return _sliding_window(cfg) if index % 2 == 0 else 0
    if model_type == "nemotron_h":
        return _sliding_window(cfg)
    if model_type == "cohere":
        return 0
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types:
        if index >= len(layer_types) or layer_types[index] != "sliding_attention":
            return 0
        return _sliding_window(cfg) + (1 if model_type == "cohere2" else 0)
    return _sliding_window(cfg)


def layer_chunk(cfg: Any, index: int) -> int:
    """Llama 4's chunked local attention: the chunk of tokens a query of decoder layer `index`
    attends within (0: none). vLLM builds `ChunkedLocalAttention(attention_chunk_size)` for every
    RoPE layer and plain (full) `Attention` for the NoPE layers, no_rope_layers[i] == 0
    (vllm/model_executor/models/llama4.py: Llama4Attention.__init__, `use_chunked_local_attn =
    not self.nope and config.attention_chunk_size`)."""
    if str(getattr(cfg, "model_type", "")) not in ("llama4", "llama4_text"):
        return 0
    chunk = config_value(cfg, "attention_chunk_size", default=0) or 0
    no_rope = getattr(cfg, "no_rope_layers", None) or []
    nope = index < len(no_rope) and no_rope[index] == 0
    return 0 if nope else int(chunk)


# ------------------------------------------------------------------ mixers no row times
#: FlashInfer's benchmark driver, the version whose routines the reasons name.
DRIVER = "FlashInfer's benchmark driver (release-v0.6.18)"


def _recurrent_reason(mixer: str, vllm_kernels: str, per_rank: str, driver_has: str, unmapped: str) -> str:
    """The reason of a recurrent mixer: what vLLM runs, its per-rank size, what the driver has and
    what is not mapped onto it yet."""
    return f"{mixer} ({vllm_kernels}), per rank {per_rank}: {DRIVER} {driver_has}; not planned as rows yet: {unmapped}"


def gdn_reason(k_heads_r: int, v_heads_r: int, head_k_dim: int, head_v_dim: int) -> str:
    """Why a GatedDeltaNet layer's recurrence has no row."""
    return _recurrent_reason(
        "GatedDeltaNet recurrence", "vLLM: fused_sigmoid_gating_delta_rule_update in decode, chunk_gated_delta_rule "
        "in prefill; vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py: QwenGatedDeltaNetAttention",
        f"{k_heads_r} key heads x {head_k_dim}, {v_heads_r} value heads x {head_v_dim}",
        "has gated_delta_rule_decode, gated_delta_rule_mtp and chunk_gated_delta_rule (benchmarks/routines/gdn.py)",
        "this layer's per-rank heads, head sizes, state dtype and state pool are not mapped onto those routines' "
        "flags, and the routines' one --head_size takes K = V")


def mamba2_reason(heads_r: int, head_dim: int, groups_r: int, state: int) -> str:
    """Why a Mamba2 layer's state-space mixer has no row."""
    return _recurrent_reason(
        "Mamba2 selective state-space mixer", "vllm/model_executor/layers/mamba/mamba_mixer2.py: MambaMixer2: causal "
        "conv1d, then mamba_chunk_scan_combined_varlen in prefill and selective_state_update in decode",
        f"{heads_r} heads x {head_dim}, {groups_r} group(s), state {state}",
        "has selective_state_update (benchmarks/routines/mamba.py), the decode state update only",
        "the per-rank heads, groups and state size are not mapped onto its flags, and the prefill chunked scan and "
        "the conv1d have no routine")


def mamba1_reason(inter_r: int, state: int) -> str:
    """Why a Mamba-1 layer's selective scan has no row."""
    return _recurrent_reason(
        "Mamba-1 selective scan", "vllm/model_executor/layers/mamba/mamba_mixer.py: MambaMixer: causal conv1d, "
        "selective_scan_fn in prefill, selective_state_update in decode", f"{inter_r} channels, state {state}",
        "has selective_state_update (benchmarks/routines/mamba.py) in Mamba2's multi-head layout",
        "Mamba-1's per-channel state is not mapped onto it, and the prefill scan has no routine")


def short_conv_reason(width_r: int) -> str:
    """Why an LFM2 short-convolution layer's mixer has no row."""
    return (f"LFM2 short convolution (vllm/model_executor/layers/mamba/short_conv.py: ShortConv: "
            f"gated causal conv1d over {width_r} channels per rank): {DRIVER} has no convolution "
            "routine; its in_proj and out_proj GEMMs are planned")


def cross_attention_reason() -> str:
    """Why a cross-attention layer has no attention row."""
    return ("cross-attention over the encoder's (vision) tokens (vllm/model_executor/layers/attention/"
            "cross_attention.py: CrossAttention): its KV length is the image tokens, not the sequence's; "
            "not planned as rows yet; its q/kv/o GEMMs are planned")


def indexer_reason(index_heads: int, index_head_dim: int, index_topk: int) -> str:
    """Why the DeepSeek sparse-attention indexer has no row."""
    return (f"DeepSeek sparse-attention indexer (vllm/model_executor/models/deepseek_v2.py: Indexer: "
            f"FP8 MQA logits of {index_heads} heads x {index_head_dim} over the cached keys, then the "
            f"top {index_topk} tokens each query's MLA attends): {DRIVER} has no routine for the logits "
            "(its top_k routines are not mapped to it); not planned as rows yet; its GEMMs are planned")


__all__ = ["mha_heads_per_rank", "kv_head_replicas", "mla_absorbed", "layer_window", "layer_chunk", "DRIVER",
           "gdn_reason", "mamba2_reason", "mamba1_reason", "short_conv_reason", "cross_attention_reason",
           "indexer_reason"]
