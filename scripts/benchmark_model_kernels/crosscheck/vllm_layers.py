"""Read the per-rank GEMMs and fused-MoE layers out of a model vLLM built on meta.

Every attention layer (Attention, MLAAttention) gives its per-rank heads, head sizes and window.
Every linear layer (vllm/model_executor/layers/linear.py: LinearBase: QKV, merged column, column,
row, replicated, GateLinear) gives its weight's per-rank [N, K] (unquantized weights are stored
[output_size_per_partition, input_size_per_partition]), its kind and bias; the LM head
(vllm/model_executor/layers/vocab_parallel_embedding.py: ParallelLMHead, or the tied embedding it
points to) its [V_padded/TP, H]. Every routed-expert block (vllm/model_executor/layers/fused_moe/
routed_experts.py: RoutedExperts) gives H, the per-rank intermediate size, local and global experts,
top-k, activation and routing from its own attributes, gated-ness from w13's rows. A module inside a
block built with `is_sequence_parallel=True` runs on this rank's ceil(M/TP) chunk of the tokens
(vllm/model_executor/models/utils.py: sequence_parallel_chunk). Vision and audio towers are skipped,
as in the plan.
"""

from __future__ import annotations

from typing import Any

from ..plan.planner import TOWER_MARKERS
from .compare import (
    AttentionShape,
    LinearShape,
    Side,
    flashinfer_activation,
    layer_ranges,
    moe_shape,
    role_of,
    routing_key,
)


def _kind(mod: Any) -> str:
    """The plan's linear kind of a vLLM linear layer."""
    from vllm.model_executor.layers.linear import ColumnParallelLinear, ReplicatedLinear, RowParallelLinear

    if isinstance(mod, ReplicatedLinear) or getattr(mod, "disable_tp", False):
        return "replicated"
    if isinstance(mod, RowParallelLinear):
        return "row"
    if isinstance(mod, ColumnParallelLinear):
        return "column"
    return f"other:{type(mod).__name__}"


def _routing(ex: Any) -> Any:
    """The compared routing of a RoutedExperts block (`compare.routing_key`)."""
    if ex.custom_routing_function is not None:
        return routing_key("custom", None, None, None, None, ex.e_score_correction_bias is not None,
                           bool(ex.apply_router_weight_on_input))
    # Grouped top-k over one group selects what plain top-k selects
    # (vllm/model_executor/layers/fused_moe/router/grouped_topk_router.py: grouped_topk).
    grouped = bool(ex.use_grouped_topk) and (ex.num_expert_group or 1) > 1
    return routing_key("grouped" if grouped else "topk", ex.num_expert_group if grouped else None,
                       ex.topk_group if grouped else None, str(ex.scoring_func), bool(ex.renormalize),
                       ex.e_score_correction_bias is not None, bool(ex.apply_router_weight_on_input))


def _lm_head(model: Any) -> tuple[str, Any] | None:
    """(path, module) of the LM head: the first `lm_head` attribute (the embedding itself when the
    embeddings are tied), else the token embedding, which some models multiply the hidden states
    with directly (vllm/model_executor/models/commandr.py: CohereForCausalLM.compute_logits)."""
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    embedding = None
    for path, mod in model.named_modules(remove_duplicate=False):
        if any(t in path for t in TOWER_MARKERS) or not isinstance(mod, VocabParallelEmbedding):
            continue
        if path.rsplit(".", 1)[-1] == "lm_head":
            return path, mod
        embedding = embedding or (path, mod)
    return embedding


def _attention(mod: Any) -> AttentionShape | None:
    """The compared record of a vLLM attention layer: `MLAAttention` (one latent head of
    kv_lora_rank + qk_rope_head_dim, values kv_lora_rank wide: vllm/model_executor/layers/attention/
    mla_attention.py) or a decoder `Attention` (vllm/model_executor/layers/attention/attention.py;
    ChunkedLocalAttention adds attention_chunk_size). Cross-attention over encoder tokens
    (cross_attention.py: CrossAttention) is a mixer the plan does not time: None."""
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.model_executor.layers.attention.cross_attention import CrossAttention
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    if isinstance(mod, MLAAttention):
        return AttentionShape("mla", int(mod.num_heads), 1, int(mod.head_size), int(mod.kv_lora_rank),
                              int(mod.sliding_window or 0),
                              prefill_dims=(int(mod.qk_nope_head_dim), int(mod.v_head_dim)))
    if isinstance(mod, Attention) and not isinstance(mod, CrossAttention):
        return AttentionShape("mha", int(mod.num_heads), int(mod.num_kv_heads), int(mod.head_size),
                              int(mod.head_size_v), int(mod.sliding_window or 0),
                              int(getattr(mod, "attention_chunk_size", 0) or 0),
                              bool(getattr(mod, "kv_sharing_target_layer_name", None)))
    return None


def vllm_side(model: Any, tp: int) -> Side:
    """The compared records of vLLM's model for one rank at tensor-parallel size `tp`."""
    from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
    from vllm.model_executor.layers.linear import LinearBase

    found: dict[tuple, list[str]] = {}

    def add(shape: Any, role: str, path: str) -> None:
        found.setdefault((shape, role), []).append(path)

    head = _lm_head(model)
    chunked: list[str] = []
    for path, mod in model.named_modules():
        if any(t in path for t in TOWER_MARKERS):
            continue
        if getattr(mod, "is_sequence_parallel", False) is True:
            chunked.append(path + ".")
        if head is not None and mod is head[1]:
            continue
        attention = _attention(mod)
        if attention is not None:
            add(attention, "attn", path.removesuffix(".attn").removesuffix(".mla_attn"))
            continue
        if isinstance(mod, LinearBase) and (role_of(path) == "conv1d" or mod.weight.ndim != 2):
            # Mamba2 / GatedDeltaNet's depthwise conv is a ColumnParallelLinear holding the conv
            # taps [conv_dim, 1, width], not a GEMM (vllm/model_executor/layers/mamba/mamba_mixer2.py:
            # MambaMixer2.__init__, conv1d.weight.unsqueeze(1)); so is LFM2's short conv
            # (vllm/model_executor/layers/mamba/short_conv.py: ShortConv, conv.weight.unsqueeze(1)).
            # The plan skips them too.
            continue
        if isinstance(mod, LinearBase):
            n, k = (int(x) for x in mod.weight.shape)
            m_div = tp if any(path.startswith(c) for c in chunked) else 1
            add(LinearShape(n, k, _kind(mod), getattr(mod, "bias", None) is not None, m_div), role_of(path), path)
        elif isinstance(mod, RoutedExperts):
            w13 = mod.w13_weight
            i_r = int(mod.intermediate_size_per_partition)
            par = mod.moe_config.moe_parallel_config
            add(moe_shape(int(mod.hidden_size), i_r, int(mod.local_num_experts), int(mod.global_num_experts),
                         int(mod.top_k), flashinfer_activation(str(mod.activation.value)), int(w13.shape[1]) == 2 * i_r,
                         bool(mod.moe_config.has_bias), int(par.dp_size) if par.use_ep else 1, _routing(mod)),
                "experts", path.removesuffix(".routed_experts"))
    if head is not None:
        w = head[1].weight
        add(LinearShape(int(w.shape[0]), int(w.shape[1]), "vocab", getattr(head[1], "bias", None) is not None),
            "lm_head", head[0])
    side = Side()
    for (shape, role), paths in found.items():
        side.add(shape, len(paths), role, f"{layer_ranges(paths)} ({type_name(model, paths[0])})")
    return side


def type_name(model: Any, path: str) -> str:
    try:
        return type(model.get_submodule(path)).__name__
    except AttributeError:
        return "?"


__all__ = ["vllm_side"]
