"""The cross-check of one plan: vLLM's model for the same config and layout, compared with it."""

from __future__ import annotations

from typing import Any

from ..core.plan_schema import Plan
from .compare import CrossCheckResult, compare, plan_side
from .vllm_build import VllmBuild, VllmBuildProblem, VllmRefused, build_vllm_model
from .vllm_platform import TargetGpu


def cross_check(plan: Plan, raw: dict[str, Any], *, trust_remote_code: bool = False,
                code_dir: str | None = None, gpu: TargetGpu | None = None) -> CrossCheckResult:
    """Build vLLM's model for config.json `raw` at the plan's TP/EP (the class vLLM builds on CUDA
    for `gpu`) and compare the plan with it: `differences` one line each (empty on agreement),
    `refused` when vLLM will not build it, or `not_checked` when its class cannot be built on this
    machine (no verdict on the plan)."""
    from . import vllm_layers
    from .vllm_build import require_vllm

    version = require_vllm()
    try:
        with build_vllm_model(raw, plan.tp, plan.ep, trust_remote_code=trust_remote_code,
                              code_dir=code_dir, gpu=gpu) as built:
            vllm = vllm_layers.vllm_side(built.model, plan.tp)
            against = against_text(built)
    except VllmRefused as e:
        return CrossCheckResult(f"vllm {version}", refused=str(e))
    except VllmBuildProblem as e:  # this machine's problem: no verdict on the plan
        return CrossCheckResult(f"vllm {version}", not_checked=str(e))
    return CrossCheckResult(against, tuple(compare(plan_side(plan), vllm)))


def against_text(built: VllmBuild) -> str:
    """What a plan was checked against: "vllm 0.33.0 vllm.models.deepseek_v32.nvidia.model.
    DeepseekV32ForCausalLM (CUDA class for sm_90 (NVIDIA H200))"."""
    return f"vllm {built.version} {built.model_class} ({built.platform})"


__all__ = ["cross_check", "against_text"]
