"""vLLM's layer rules: which layers keep BF16 whatever the checkpoint's recipe.

Each rule cites the vLLM source it follows.
"""

from __future__ import annotations

#: GEMMs vLLM keeps in BF16 under the FP8 and NVFP4 recipes, so only their BF16 cases are built and
#: quantized roll-ups use their BF16 time: the MoE router (`GateLinear` is created without a
#: quant_config), Qwen's shared-expert gate (unquantized `ReplicatedLinear`), and lm_head (`Fp8Config`
#: never quantizes `ParallelLMHead`; ModelOpt checkpoints exclude it). vllm_rules.md sections 3, 6.3.
KEPT_IN_BF16 = ("router", "shared_expert_gate", "lm_head")


def kept_in_bf16(name: str) -> bool:
    """True for plan entries that vLLM runs in BF16 whatever the checkpoint's recipe."""
    return name.split("[", 1)[0] in KEPT_IN_BF16
