"""vLLM's modules read as plan entries: a linear layer's role, a routed-expert block's routing, a
mixer's reason.

In: one module of a model vLLM built on meta, its path inside its decoder layer and the modules
around it. Out: the plan's names and values for it: the role a rules plan gives the same GEMM
(`qkv_proj`, `mla.q_b_proj`, `router`, `shared_expert.down_proj`, ...; a linear no role names keeps
its own path, e.g. `self_attn.wo_a`), a `Routing` whose method is one the plan knows, and why no row
times a token mixer that is not softmax attention. Nothing here imports vLLM at module level.
"""

from __future__ import annotations

from typing import Any

from ..core.plan_schema import Routing
from ..vllm_rules import attention as vllm_attention
from .compare import CUSTOM_ROUTING

#: Leaf names of a fused QKV projection in an attention block.
QKV_LEAVES = ("qkv_proj", "query_key_value", "c_attn", "Wqkv", "qkv", "W_pack")
#: Leaf names of an attention block's output projection.
ATTENTION_OUT_LEAVES = ("o_proj", "dense", "out_proj", "c_proj", "wo", "o")
#: MLA's linear layers (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MLAAttention).
MLA_LEAVES = {"fused_qkv_a_proj": "mla.fused_qkv_a_proj", "kv_a_proj_with_mqa": "mla.kv_a_proj_with_mqa",
              "q_b_proj": "mla.q_b_proj", "q_proj": "mla.q_proj", "kv_b_proj": "mla.kv_b_proj"}
#: A dense MLP's first (up, or merged gate|up) and second (down) projections.
MLP_FIRST = {"gate_up_proj": "gate_up_proj", "up_proj": "up_proj", "c_fc": "up_proj", "fc1": "up_proj",
             "dense_h_to_4h": "up_proj", "fc_in": "up_proj", "w1": "up_proj", "input_linear": "gate_up_proj"}
MLP_SECOND = {"down_proj": "down_proj", "c_proj": "down_proj", "fc2": "down_proj", "dense_4h_to_h": "down_proj",
              "fc_out": "down_proj", "w2": "down_proj", "output_linear": "down_proj"}
#: Names of shared-expert sub-modules beside routed experts.
SHARED_EXPERT = ("shared_expert", "shared_experts", "shared_mlp")
#: Linear leaves whose role is their own name (Gemma 4's per-layer inputs) or a `moe.` one (NemotronH's
#: latent projections).
OWN_NAME = ("per_layer_input_gate", "per_layer_projection", "per_layer_model_projection")
LATENT = ("fc1_latent_proj", "fc2_latent_proj")
#: Cross-attention's leaves (Mllama: q_proj alone, K and V fused) -> their plan roles' last part.
CROSS_ATTENTION = {"q_proj": "q_proj", "kv_proj": "kv_proj", "qkv_proj": "kv_proj", "o_proj": "o_proj"}
#: A mixer class name fragment -> the plan's prefix for its linear layers.
MIXER_PREFIX = (("GatedDeltaNet", "gdn."), ("ShortConv", "short_conv."), ("Mamba", "mamba."))


def _holds(module: Any, classes: tuple[type, ...]) -> bool:
    return any(isinstance(m, classes) for m in module.modules())


def linear_role(rel: str, parent: Any, mod: Any, attention_classes: tuple[type, ...]) -> str:
    """The plan role of the linear layer `mod` at path `rel` inside its decoder layer, whose parent
    module is `parent`: as the rules name the same GEMM, else `rel` itself (layer indices starred)."""
    from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
    from vllm.model_executor.layers.fused_moe.router.gate_linear import GateLinear

    parts = rel.split(".")
    leaf, above = parts[-1], parts[:-1]
    if isinstance(mod, GateLinear) or (leaf in ("gate", "router") and parent is not None
                                       and _holds(parent, (RoutedExperts,))):
        return "router"
    if leaf in ("shared_expert_gate", "shared_experts_gate"):
        return "shared_expert_gate"
    if leaf in LATENT:
        return f"moe.{leaf}"
    if leaf in OWN_NAME:
        return leaf
    if any(p in SHARED_EXPERT for p in above):
        return "shared_expert." + MLP_FIRST.get(leaf, MLP_SECOND.get(leaf, leaf))
    if "indexer" in above:
        return f"indexer.{leaf}"
    if above and above[-1] == "cross_attn":
        return "cross_attn." + CROSS_ATTENTION.get(leaf, leaf)
    kind = type(parent).__name__ if parent is not None else ""
    prefix = next((p for fragment, p in MIXER_PREFIX if fragment in kind), None)
    if prefix:
        return prefix + leaf
    if parent is not None and _holds(parent, attention_classes):
        if leaf in MLA_LEAVES and any(x in parent._modules for x in ("kv_b_proj", "kv_a_proj_with_mqa",
                                                                        "fused_qkv_a_proj")):
            return MLA_LEAVES[leaf]
        if leaf in QKV_LEAVES:
            return "qkv_proj"
        if leaf in ATTENTION_OUT_LEAVES:
            return "o_proj"
        if leaf == "q_proj":
            return "q_proj"
    if leaf in MLP_FIRST:
        return MLP_FIRST[leaf]
    if leaf in MLP_SECOND:
        return MLP_SECOND[leaf]
    return ".".join("*" if p.isdigit() else p for p in parts)


#: A custom routing function's qualified name -> the plan's routing method (`compare.CUSTOM_ROUTING`).
CUSTOM_METHOD = {fn: method for method, fn in CUSTOM_ROUTING.items()}
#: The plan's custom routing methods -> (scoring, renormalize) as their functions score.
CUSTOM_SCORING = {"llama4": ("sigmoid", False), "gemma4": ("softmax", True), "sparsemixer": ("softmax", False)}


def routing(ex: Any, scale: float) -> tuple[Routing, str]:
    """(the plan's Routing, a note or "") of a RoutedExperts block, as
    vllm/model_executor/layers/fused_moe/router/router_factory.py: create_fused_moe_router selects
    experts from its attributes, `scale` its routed scaling factor (`vllm_layers.routed_scale`)."""
    bias, on_input = ex.e_score_correction_bias is not None, bool(ex.apply_router_weight_on_input)
    factor = None if scale == 1.0 else scale
    fn = ex.custom_routing_function
    if fn is not None:
        name = getattr(fn, "__qualname__", type(fn).__name__)
        method = CUSTOM_METHOD.get(name)
        if method is None:
            return (Routing("renormalize", routed_scaling_factor=factor, use_routing_bias=bias,
                            apply_router_weight_on_input=on_input),
                    f"vLLM routes with the model's own {name} (no FlashInfer routing method; renormalize is the "
                    "nearest)")
        scoring, renorm = CUSTOM_SCORING[method]
        return Routing(method, routed_scaling_factor=factor, use_routing_bias=bias, scoring_func=scoring,
                       renormalize=renorm, apply_router_weight_on_input=on_input), ""
    scoring, renorm, note = str(ex.scoring_func), bool(ex.renormalize), ""
    if scoring not in ("softmax", "sigmoid"):
        note = f"vLLM scores the experts with {scoring} (no FlashInfer routing method; planned as sigmoid, the nearest)"
        scoring = "sigmoid"
    groups, topk_group = ex.num_expert_group, ex.topk_group
    if ex.use_grouped_topk and bias:
        method = "deepseek_v3"
    elif ex.use_grouped_topk and (groups or 1) > 1:
        method = "grouped_topk"
    else:
        groups = topk_group = None
        method = ("softmax_bias" if scoring == "softmax" else "minimax2") if bias else \
            ("sigmoid_renorm" if renorm else "sigmoid") if scoring == "sigmoid" else \
            ("renormalize" if renorm else "topk")
    return Routing(method, n_group=groups, topk_group=topk_group, routed_scaling_factor=factor,
                   use_routing_bias=bias, scoring_func=scoring, renormalize=renorm,
                   apply_router_weight_on_input=on_input), note


#: vLLM mixer classes -> the plan's mixer name (as the rules name the same mixer).
MIXER_NAMES = {"MambaMixer2": "mamba", "MambaMixer": "mamba", "ShortConv": "short_conv",
               "CrossAttention": "cross_attn", "DeepseekV32IndexerCache": "indexer"}


def mixer_name(mod: Any) -> str:
    """The plan's name of a token mixer vLLM builds (GatedDeltaNet is `gdn`; an unknown one its class)."""
    kind = type(mod).__name__
    if "GatedDeltaNet" in kind:
        return "gdn"
    return MIXER_NAMES.get(kind, f"vllm:{kind}")


def mixer_reason(mod: Any, cfg: Any) -> str:
    """Why no row times the token mixer `mod` (a vLLM AttentionLayerBase that is not softmax
    attention): the rules' reason for the indexer (from `cfg`, the text config), what vLLM builds
    for any other."""
    kind = type(mod).__name__
    if kind == "DeepseekV32IndexerCache":
        heads, dim, topk = (getattr(cfg, k, 0) for k in ("index_n_heads", "index_head_dim", "index_topk"))
        return vllm_attention.indexer_reason(int(heads or 0), int(dim or 0), int(topk or 0))
    return (f"{kind} ({type(mod).__module__}): a token mixer of vLLM's class that no timed row covers (the plan "
            f"maps only softmax and latent attention onto {vllm_attention.DRIVER}); its linear layers are planned")


__all__ = ["QKV_LEAVES", "ATTENTION_OUT_LEAVES", "MLA_LEAVES", "MLP_FIRST", "MLP_SECOND", "SHARED_EXPERT", "OWN_NAME",
           "LATENT", "CROSS_ATTENTION", "MIXER_PREFIX", "CUSTOM_METHOD", "CUSTOM_SCORING", "MIXER_NAMES", "linear_role",
           "routing", "mixer_name", "mixer_reason"]
