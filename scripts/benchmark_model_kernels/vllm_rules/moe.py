"""vLLM's fused-MoE layer rules: which decoder layers are MoE, the experts' activation, the routing.

In: a Hugging Face config and, for the activation and the routing, the transformers modules of one
MoE block (built on meta; only their names and attributes are read). Out: plain values the planner
(`plan/`) places in the plan: the set of MoE layer indices, a FlashInfer `ActivationType` name, a
`plan.schema.Routing`; the last two come with the one-line note (or "") the plan shows where vLLM
runs something no FlashInfer method names. Nothing here walks a model.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import UsageError, shown_value
from ..core.plan_schema import Routing
from .config import config_value

#: model_type -> vLLM's rule for which decoder layers are MoE (the rest run a dense MLP):
#:   "first_k_freq": layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0
#:                   (vllm/model_executor/models/deepseek_v2.py: DeepseekV2DecoderLayer; GLM-5 DSA
#:                   and Kimi-K2 reuse it)
#:   "sparse_step":  layer_idx not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0
#:                   (vllm/model_executor/models/qwen2_moe.py: Qwen2MoeDecoderLayer, and the
#:                   Qwen3-MoE, Qwen3-Next, Qwen3.5 and Qwen3-VL MoE decoder layers built the same way)
VLLM_MOE_LAYER_RULE = {
    "deepseek_v2": "first_k_freq", "deepseek_v3": "first_k_freq", "deepseek_v32": "first_k_freq",
    "kimi_k2": "first_k_freq", "glm_moe_dsa": "first_k_freq",
    "qwen2_moe": "sparse_step", "qwen3_moe": "sparse_step", "qwen3_next": "sparse_step",
    "qwen3_5_moe": "sparse_step", "qwen3_5_moe_text": "sparse_step",
    "qwen3_vl_moe": "sparse_step", "qwen3_vl_moe_text": "sparse_step",
}

#: model_type -> the scoring function its vLLM MoE block passes to the experts whatever the config
#: says (or, passing none, FusedMoE's default "softmax": vllm/model_executor/layers/fused_moe/
#: routed_experts.py: RoutedExperts.__init__). Others read `scoring_func` from the config, default
#: sigmoid with a score-correction bias, else softmax.
#:   ernie4_5_moe  softmax, with the correction bias (vllm/model_executor/models/ernie45_moe.py:
#:                 Ernie4_5_MoeMoE, no scoring_func passed)
#:   glm4_moe, lfm2_moe, exaone_moe, laguna, nemotron_h  scoring_func="sigmoid" (glm4_moe.py:
#:                 Glm4MoE, lfm2_moe.py: Lfm2MoeSparseMoeBlock, exaone_moe.py, laguna.py,
#:                 nemotron_h.py: NemotronHMoE)
VLLM_SCORING_FUNC = {
    "ernie4_5_moe": "softmax", "glm4_moe": "sigmoid", "lfm2_moe": "sigmoid", "exaone_moe": "sigmoid",
    "laguna": "sigmoid", "nemotron_h": "sigmoid",
}

#: model_type -> whether its vLLM MoE block renormalizes the top-k weights, fixed in its code
#: whatever the config's norm_topk_prob says: jamba (vllm/model_executor/models/jamba.py: JambaMoE,
#: renormalize=False) and olmoe (olmoe.py: OlmoeMoE, renormalize=False).
VLLM_RENORMALIZE = {"jamba": False, "olmoe": False}

#: Config activation name -> FlashInfer ActivationType name (gated, non-gated). vLLM runs a gated
#: expert MLP as act(gate) * up and a non-gated one as act(up)
#: (vllm/model_executor/layers/fused_moe/activation.py: MoEActivation, "silu" vs "silu_no_mul");
#: FlashInfer names the gated forms Swiglu / Geglu. ReLU has no gated FlashInfer form.
ACTIVATIONS: dict[str, tuple[str | None, str]] = {
    "silu": ("Swiglu", "Silu"), "swish": ("Swiglu", "Silu"),
    "gelu": ("Geglu", "Gelu"), "gelu_pytorch_tanh": ("Geglu", "Gelu"), "gelu_new": ("Geglu", "Gelu"),
    "gelu_tanh": ("Geglu", "Gelu"), "relu": (None, "Relu"), "relu2": (None, "Relu2"),
}

#: Config fields holding the activation name, in the order they are read.
ACTIVATION_KEYS = ("mlp_hidden_act", "hidden_act", "hidden_activation", "activation_function")


#: Config fields vLLM reads the expert count from, on the (text) config's top level
#: (vllm/transformers_utils/config.py: CONFIG_FIELD_ALIASES["num_experts"], read by
#: vllm/transformers_utils/model_arch_config_convertor.py: get_num_experts, else the largest
#: n_routed_experts of a `block_configs` MoE block). With none of them set vLLM takes the model for
#: dense and refuses expert parallelism (vllm/config/model.py: _verify_with_expert_parallelism).
VLLM_NUM_EXPERTS_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")


def vllm_sees_experts(cfg: Any) -> bool:
    """Whether vLLM finds an expert count in this config (and so allows expert parallelism)."""
    for name in VLLM_NUM_EXPERTS_KEYS:
        value = getattr(cfg, name, None)
        if value:
            return True
    for block in getattr(cfg, "block_configs", None) or ():
        get = block.get if isinstance(block, dict) else lambda k, d=None, b=block: getattr(b, k, d)
        if get("block_type", "") == "moe" and get("n_routed_experts", 0):
            return True
    return False


def vllm_moe_layers(cfg: Any, num_layers: int) -> set[int] | None:
    """Indices of the layers vLLM runs as MoE, or None when no rule applies to this model type."""
    rule = VLLM_MOE_LAYER_RULE.get(str(getattr(cfg, "model_type", "")))
    if rule == "first_k_freq":
        first = int(config_value(cfg, "first_k_dense_replace", default=0))
        freq = config_value(cfg, "moe_layer_freq", default=1)
        if isinstance(freq, list):
            # Only the models that read per-layer flags take a list (mimo_v2.py, minimax_m3); here
            # vLLM computes layer_idx % moe_layer_freq and fails with a TypeError.
            raise UsageError("config.json: moe_layer_freq", shown_value(freq, 40),
                             f"vLLM's {cfg.model_type} decoder layer reads it as a layer interval (layer_idx % "
                             "moe_layer_freq: vllm/model_executor/models/deepseek_v2.py: DeepseekV2DecoderLayer), "
                             "not a per-layer list; give the interval (1: every layer from first_k_dense_replace)")
        freq = int(freq) or 1
        return {i for i in range(num_layers) if i >= first and i % freq == 0}
    if rule == "sparse_step":
        only = set(config_value(cfg, "mlp_only_layers", default=[]) or [])
        step = int(config_value(cfg, "decoder_sparse_step", default=1)) or 1
        return {i for i in range(num_layers) if i not in only and (i + 1) % step == 0}
    return None


def activation(cfg: Any, experts: Any, gated: bool, bias: bool) -> tuple[str | None, str]:
    """(FlashInfer ActivationType name or None, note) of the routed experts' activation.

    GPT-OSS experts (gated, with biases, and the `alpha`/`limit` of a clamped SwiGLU) run vLLM's
    swigluoai (vllm/model_executor/layers/activation.py: SwigluOAIAndMul), FlashInfer's SwigluBias.
    Otherwise the config's activation name maps through ACTIVATIONS; None when it has no FlashInfer
    form."""
    if gated and bias and hasattr(experts, "limit") and hasattr(experts, "alpha"):
        return "SwigluBias", "experts use GPT-OSS clamped SwiGLU with biases (SwigluBias: alpha=1.702, limit=7)"
    act = str(config_value(cfg, *ACTIVATION_KEYS, default="silu")).lower()
    pair = ACTIVATIONS.get(act)
    if pair is None:
        return None, ""
    return (pair[0] if gated else pair[1]), ""


def _has_score_correction_bias(cfg: Any, router: Any, block: Any) -> bool:
    """The score-correction bias may sit on the router, the MoE block, or a child of either (Ernie
    4.5 keeps it in `gate.moe_statics`); some configs only flag it (`use_routing_bias`)."""
    for mod in (router, block):
        if mod is None:
            continue
        for name, _ in list(mod.named_parameters()) + list(mod.named_buffers()):
            if name.rsplit(".", 1)[-1] == "e_score_correction_bias":
                return True
    return bool(getattr(cfg, "use_routing_bias", False))


def routing(cfg: Any, router: Any, block: Any) -> tuple[Routing, str]:
    """(routing method and parameters, note) of one MoE block, as vLLM picks them
    (vllm/model_executor/layers/fused_moe/router/router_factory.py: create_fused_moe_router;
    vllm/model_executor/layers/fused_moe/config.py: get_routing_method_type). `router` and `block`
    are the router module and the MoE block (either may be None); the note is "" unless the
    routing needs one."""
    mt = str(getattr(cfg, "model_type", ""))
    scale = config_value(cfg, "routed_scaling_factor")
    scale = float(scale) if scale is not None else None
    bias = _has_score_correction_bias(cfg, router, block)
    renorm = getattr(cfg, "norm_topk_prob", None)
    renorm = VLLM_RENORMALIZE.get(mt, True if renorm is None else bool(renorm))
    scoring = VLLM_SCORING_FUNC.get(mt) or str(config_value(cfg, "scoring_func",
                                                            default="sigmoid" if bias else "softmax"))
    n_group, topk_group = config_value(cfg, "n_group"), config_value(cfg, "topk_group")
    if mt.startswith("llama4"):
        # vllm/model_executor/models/llama4.py: Llama4MoE.custom_routing_function: top-1 on the
        # logits, sigmoid weight applied to the expert's input.
        return Routing("llama4", scoring_func="sigmoid", renormalize=False, apply_router_weight_on_input=True), ""
    if bias and n_group is not None:
        # vllm/model_executor/layers/fused_moe/router/grouped_topk_router.py: grouped_topk with
        # e_score_correction_bias (DeepSeek-V3, Kimi-K2, GLM-4.5).
        return Routing("deepseek_v3", n_group=int(n_group), topk_group=int(topk_group or n_group),
                       routed_scaling_factor=scale, use_routing_bias=True, scoring_func=scoring,
                       renormalize=renorm), ""
    if n_group is not None and int(n_group) > 1:
        # Grouped top-k without a score-correction bias (DeepSeek-V2 "group_limited_greedy"): vLLM
        # still runs grouped_topk (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MoE,
        # use_grouped_topk=True), which no FlashInfer routing method implements; keep the group
        # parameters in the plan.
        return Routing("grouped_topk", n_group=int(n_group), topk_group=int(topk_group or n_group),
                       routed_scaling_factor=scale, scoring_func=scoring, renormalize=renorm), ""
    if bias and scoring == "softmax":
        # Softmax top-k selected on score + correction bias (Ernie 4.5: VLLM_SCORING_FUNC); no
        # FlashInfer routing method selects that way.
        return (Routing("softmax_bias", routed_scaling_factor=scale, use_routing_bias=True, scoring_func="softmax",
                        renormalize=renorm),
                "experts are selected on softmax scores plus a correction bias (no FlashInfer routing method; "
                "renormalize is the nearest)")
    if bias:
        # Sigmoid + bias top-k without groups (vllm/model_executor/models/minimax_m2.py: MiniMaxM2MoE).
        return Routing("minimax2", routed_scaling_factor=scale, use_routing_bias=True, scoring_func=scoring,
                       renormalize=renorm), ""
    if mt.startswith("gemma4"):
        # vllm/model_executor/models/gemma4.py: Gemma4Router.routing_function, passed to the experts
        # as custom_routing_function: softmax over all experts, top-k, renormalized, times a learned
        # per-expert scale.
        return (Routing("gemma4", scoring_func="softmax", renormalize=True),
                "Gemma 4 routes with its own function (softmax top-k renormalized, times a per-expert scale; "
                "no FlashInfer routing method, renormalize is the nearest)")
    if mt == "phimoe":
        # vllm/model_executor/models/phimoe.py: phimoe_routing_function (sparsemixer top-2).
        return (Routing("sparsemixer", scoring_func="softmax", renormalize=False),
                "PhiMoE routes with sparsemixer (no FlashInfer routing method)")
    if scoring == "sigmoid":
        return Routing("sigmoid_renorm" if renorm else "sigmoid", routed_scaling_factor=scale,
                       scoring_func="sigmoid", renormalize=renorm), ""
    return Routing("renormalize" if renorm else "topk", routed_scaling_factor=scale, renormalize=renorm), ""


__all__ = ["VLLM_MOE_LAYER_RULE", "VLLM_SCORING_FUNC", "VLLM_RENORMALIZE", "VLLM_NUM_EXPERTS_KEYS",
           "vllm_sees_experts", "ACTIVATIONS", "ACTIVATION_KEYS", "vllm_moe_layers", "activation", "routing"]
