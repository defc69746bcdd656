"""vLLM's layer rules: which layers keep BF16 whatever the checkpoint's recipe.

In: a plan entry's name (its role, maybe with a `[...]` suffix). Out: whether vLLM runs it in BF16
under every recipe. Each rule cites the vLLM source it follows.
"""

from __future__ import annotations

#: GEMMs vLLM keeps in BF16 under the FP8 and NVFP4 recipes, so only their BF16 cases are built and
#: quantized roll-ups use their BF16 time:
#:   router             created without a quant_config
#:                      (vllm/model_executor/layers/fused_moe/router/gate_linear.py: GateLinear)
#:   shared_expert_gate an unquantized ReplicatedLinear
#:                      (vllm/model_executor/models/qwen2_moe.py: Qwen2MoeSparseMoeBlock)
#:   lm_head            Fp8Config never quantizes ParallelLMHead
#:                      (vllm/model_executor/layers/quantization/fp8.py: Fp8Config.get_quant_method);
#:                      ModelOpt would, but its checkpoints exclude lm_head
#:                      (vllm/model_executor/layers/quantization/modelopt.py:
#:                      ModelOptQuantConfigBase.get_quant_method)
KEPT_IN_BF16 = ("router", "shared_expert_gate", "lm_head")


def kept_in_bf16(name: str) -> bool:
    """True for plan entries that vLLM runs in BF16 whatever the checkpoint's recipe."""
    return name.split("[", 1)[0] in KEPT_IN_BF16
