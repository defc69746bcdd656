"""vLLM's layer rules: which layers keep BF16 under a quantized recipe.

In: a plan entry's name (its role, maybe with a `[...]` suffix) and the recipe it would run in (FP8
scheme, per-tensor activation scales, the model class). Out: whether vLLM runs it in BF16 there.
Each rule cites the vLLM source it follows.
"""

from __future__ import annotations

#: GEMMs vLLM keeps in BF16 under the FP8 and NVFP4 recipes, so only their BF16 cases are built and
#: quantized roll-ups use their BF16 time (the router with the exception of QUANTIZED_ROUTERS):
#:   router             GateLinear, built without a quant_config by most MoE model classes
#:                      (vllm/model_executor/layers/fused_moe/router/gate_linear.py: GateLinear;
#:                      vllm/model_executor/models/deepseek_v2.py: DeepseekV2MoE)
#:   shared_expert_gate an unquantized ReplicatedLinear
#:                      (vllm/model_executor/models/qwen2_moe.py: Qwen2MoeSparseMoeBlock)
#:   lm_head            Fp8Config never quantizes ParallelLMHead
#:                      (vllm/model_executor/layers/quantization/fp8.py: Fp8Config.get_quant_method);
#:                      ModelOpt would, but its checkpoints exclude lm_head
#:                      (vllm/model_executor/layers/quantization/modelopt.py:
#:                      ModelOptQuantConfigBase.get_quant_method)
KEPT_IN_BF16 = ("router", "shared_expert_gate", "lm_head")

#: Model classes that build the router with the model's quantization config, so vLLM's online
#: `--quantization fp8_per_tensor` (no ignore list) gives the router an FP8 method like the dense
#: layers' (online/fp8.py: Fp8PerTensorOnlineLinearMethod, activations per token): GateLinear(...,
#: quant_config=quant_config) in vllm/model_executor/models/qwen3_moe.py (Qwen3MoeSparseMoeBlock,
#: which qwen3_vl_moe.py, qwen3_omni_moe_thinker.py and interns1_pro.py reuse), lfm2_moe.py and
#: k2_horizon.py; every other model file passes none (tests/vllm_rules/test_layers_vllm.py scans
#: vLLM's model files for these). The rule covers the per-tensor recipe with dynamic activation
#: scales, which is what vLLM's online FP8 of a BF16 checkpoint is; the per-token and block-128
#: recipes stand for checkpoints, whose own ignore list decides, and keep the router BF16 here.
QUANTIZED_ROUTERS = ("Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration",
                     "Qwen3OmniMoeForConditionalGeneration", "InternS1ProForConditionalGeneration",
                     "Lfm2MoeForCausalLM", "K2HorizonForCausalLM")


def router_in_fp8(dtype: str, scheme: str, activation_scales: str, architecture: str) -> bool:
    """Whether vLLM runs the MoE router in FP8 for this recipe and model class (QUANTIZED_ROUTERS).

    >>> router_in_fp8("fp8", "per_tensor", "dynamic", "Qwen3MoeForCausalLM")
    True
    >>> router_in_fp8("fp8", "per_tensor", "dynamic", "DeepseekV3ForCausalLM")
    False
    """
    return (dtype == "fp8" and scheme == "per_tensor" and activation_scales == "dynamic"
            and architecture in QUANTIZED_ROUTERS)


def kept_in_bf16(name: str, dtype: str = "", scheme: str = "", activation_scales: str = "",
                 architecture: str = "") -> bool:
    """True for plan entries that vLLM runs in BF16 under a quantized recipe (KEPT_IN_BF16). Without
    the recipe ("" arguments) the router counts as kept, as it is for every model class outside
    QUANTIZED_ROUTERS."""
    role = name.split("[", 1)[0]
    if role == "router" and router_in_fp8(dtype, scheme, activation_scales, architecture):
        return False
    return role in KEPT_IN_BF16
