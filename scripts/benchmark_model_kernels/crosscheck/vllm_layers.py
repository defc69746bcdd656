"""Read the per-rank GEMMs and fused-MoE layers out of a model vLLM built on meta.

Every attention layer (Attention, MLAAttention) gives its per-rank heads, head sizes and window.
Every linear layer (vllm/model_executor/layers/linear.py: LinearBase: QKV, merged column, column,
row, replicated, GateLinear) gives its weight's per-rank [N, K] (unquantized weights are stored
[output_size_per_partition, input_size_per_partition]), its kind and bias; the LM head
(vllm/model_executor/layers/vocab_parallel_embedding.py: ParallelLMHead, or the tied embedding it
points to) its [V_padded/TP, H]. Every routed-expert block (vllm/model_executor/layers/fused_moe/
routed_experts.py: RoutedExperts) gives H, the per-rank intermediate size, local and global experts,
top-k, activation and routing from its own attributes, gated-ness from w13's rows. A module inside a
block built with `is_sequence_parallel=True`, or in the MLP of a decoder layer built with
`use_sequence_parallel=True`, runs on this rank's ceil(M/TP) chunk of the tokens
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


def linear_kind(mod: Any) -> str:
    """The plan's linear kind of a vLLM linear layer."""
    from vllm.model_executor.layers.linear import ColumnParallelLinear, ReplicatedLinear, RowParallelLinear

    if isinstance(mod, ReplicatedLinear) or getattr(mod, "disable_tp", False):
        return "replicated"
    if isinstance(mod, RowParallelLinear):
        return "row"
    if isinstance(mod, ColumnParallelLinear):
        return "column"
    return f"other:{type(mod).__name__}"


def routed_scale(ex: Any, runner: Any) -> float:
    """The routed scaling factor a RoutedExperts block's outputs get: on the top-k weights (the
    block's own `routed_scaling_factor`) or, with `apply_routed_scale_to_output`, on the summed
    output (its MoERunner's, the block's parent); the other is 1.0
    (vllm/model_executor/layers/fused_moe/layer.py: FusedMoE, runner/moe_runner.py: MoERunner)."""
    return float(getattr(ex, "routed_scaling_factor", 1.0) or 1.0) * float(
        getattr(runner, "routed_scaling_factor", 1.0) or 1.0)


def _routing(ex: Any, runner: Any) -> Any:
    """The compared routing of a RoutedExperts block (`compare.routing_key`)."""
    scale = routed_scale(ex, runner)
    fn = ex.custom_routing_function
    if fn is not None:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        return routing_key(f"custom:{name}", None, None, None, None, ex.e_score_correction_bias is not None,
                           bool(ex.apply_router_weight_on_input), scale)
    # Grouped top-k over one group selects what plain top-k selects
    # (vllm/model_executor/layers/fused_moe/router/grouped_topk_router.py: grouped_topk).
    grouped = bool(ex.use_grouped_topk) and (ex.num_expert_group or 1) > 1
    return routing_key("grouped" if grouped else "topk", ex.num_expert_group if grouped else None,
                       ex.topk_group if grouped else None, str(ex.scoring_func), bool(ex.renormalize),
                       ex.e_score_correction_bias is not None, bool(ex.apply_router_weight_on_input), scale)


def lm_head(model: Any) -> tuple[str, Any] | None:
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


def attention_shape(mod: Any) -> AttentionShape | None:
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


def runs_on_chunk(mod: Any) -> bool:
    """Whether (part of) `mod` runs on this rank's ceil(M/TP) chunk of the tokens: a block built
    with `is_sequence_parallel=True` (its children), or a decoder layer built with
    `use_sequence_parallel=True` run sequence-parallel as a whole: attention on the all-gathered
    tokens, its MLP on the chunk (vllm/models/deepseek_v32/nvidia/model.py:
    DeepseekV32DecoderLayer.forward, sp_reduce_scatter before the MLP)."""
    import torch

    return getattr(mod, "is_sequence_parallel", False) is True or (
        getattr(mod, "use_sequence_parallel", False) is True and isinstance(getattr(mod, "mlp", None), torch.nn.Module))


def chunk_prefix(path: str, mod: Any) -> str:
    """The path prefix of the modules a `runs_on_chunk` module `mod` at `path` runs on the chunk."""
    inside = "mlp." if getattr(mod, "is_sequence_parallel", False) is not True else ""
    return f"{path}.{inside}" if path else inside


def is_conv_taps(path: str, mod: Any) -> bool:
    """A linear layer that holds convolution taps, not a GEMM weight: Mamba2 / GatedDeltaNet's
    depthwise conv, a ColumnParallelLinear of [conv_dim, 1, width]
    (vllm/model_executor/layers/mamba/mamba_mixer2.py: MambaMixer2.__init__,
    conv1d.weight.unsqueeze(1)), and LFM2's short conv (vllm/model_executor/layers/mamba/
    short_conv.py: ShortConv, conv.weight.unsqueeze(1)). The plan skips them too."""
    return role_of(path) == "conv1d" or mod.weight.ndim != 2


def moe_activation(ex: Any) -> str:
    """The plan's activation name of a RoutedExperts block ("vllm:<name>" where FlashInfer has none)."""
    return flashinfer_activation(str(ex.activation.value))


def total_heads(parent: Any, q_default: int, kv_default: int) -> tuple[int, int]:
    """(query heads, K/V heads) of a whole attention layer, before TP: its QKVParallelLinear's
    `total_num_heads` / `total_num_kv_heads` (vllm/model_executor/layers/linear.py:
    QKVParallelLinear.__init__), or the attention module's own, else the defaults."""
    for mod in [parent, *(parent.children() if parent is not None else ())]:
        q, kv = getattr(mod, "total_num_heads", None), getattr(mod, "total_num_kv_heads", None)
        if isinstance(q, int) and isinstance(kv, int) and q > 0 and kv > 0:
            return q, kv
    return q_default, kv_default


def vllm_side(model: Any, tp: int) -> Side:
    """The compared records of vLLM's model for one rank at tensor-parallel size `tp`."""
    from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
    from vllm.model_executor.layers.linear import LinearBase

    found: dict[tuple, list[str]] = {}

    def add(shape: Any, role: str, path: str) -> None:
        found.setdefault((shape, role), []).append(path)

    head = lm_head(model)
    chunked: list[str] = []
    for path, mod in model.named_modules():
        if any(t in path for t in TOWER_MARKERS):
            continue
        if runs_on_chunk(mod):
            chunked.append(chunk_prefix(path, mod))
        if head is not None and mod is head[1]:
            continue
        attention = attention_shape(mod)
        if attention is not None:
            add(attention, "attn", path.removesuffix(".attn").removesuffix(".mla_attn"))
            continue
        if isinstance(mod, LinearBase) and is_conv_taps(path, mod):
            continue
        if isinstance(mod, LinearBase):
            n, k = (int(x) for x in mod.weight.shape)
            m_div = tp if any(path.startswith(c) for c in chunked) else 1
            add(LinearShape(n, k, linear_kind(mod), getattr(mod, "bias", None) is not None, m_div), role_of(path),
                path)
        elif isinstance(mod, RoutedExperts):
            w13 = mod.w13_weight
            i_r = int(mod.intermediate_size_per_partition)
            par = mod.moe_config.moe_parallel_config
            add(moe_shape(int(mod.hidden_size), i_r, int(mod.local_num_experts), int(mod.global_num_experts),
                          int(mod.top_k), moe_activation(mod), int(w13.shape[1]) == 2 * i_r,
                          bool(mod.moe_config.has_bias), int(par.dp_size) if par.use_ep else 1,
                          _routing(mod, _parent(model, path))),
                "experts", path.removesuffix(".routed_experts"))
    if head is not None:
        w = head[1].weight
        add(LinearShape(int(w.shape[0]), int(w.shape[1]), "vocab", getattr(head[1], "bias", None) is not None),
            "lm_head", head[0])
    side = Side()
    for (shape, role), paths in found.items():
        side.add(shape, len(paths), role, f"{layer_ranges(paths)} ({type_name(model, paths[0])})")
    return side


def _parent(model: Any, path: str) -> Any:
    """The module holding `path` (None at the top)."""
    parent = path.rpartition(".")[0]
    try:
        return model.get_submodule(parent) if parent else None
    except AttributeError:
        return None


def type_name(model: Any, path: str) -> str:
    try:
        return type(model.get_submodule(path)).__name__
    except AttributeError:
        return "?"


__all__ = ["vllm_side", "routed_scale", "linear_kind", "lm_head", "attention_shape", "runs_on_chunk", "chunk_prefix",
           "is_conv_taps", "moe_activation", "total_heads"]
