"""The cross-check of one plan: vLLM's model for the same config and layout, compared with it."""

from __future__ import annotations

from typing import Any

from ..core.plan_schema import Plan
from .compare import CrossCheckResult, compare, plan_side
from .vllm_build import VllmRefused, build_vllm_model


def cross_check(plan: Plan, raw: dict[str, Any], *, trust_remote_code: bool = False,
                code_dir: str | None = None) -> CrossCheckResult:
    """Build vLLM's model for config.json `raw` at the plan's TP/EP and compare the plan with it:
    `differences` one line each (empty on agreement), or `refused` when vLLM will not build it."""
    from . import vllm_layers
    from .vllm_build import require_vllm

    version = require_vllm()
    try:
        with build_vllm_model(raw, plan.tp, plan.ep, trust_remote_code=trust_remote_code,
                              code_dir=code_dir) as built:
            vllm = vllm_layers.vllm_side(built.model, plan.tp)
            against = f"vllm {built.version} ({built.architecture})"
    except VllmRefused as e:
        return CrossCheckResult(f"vllm {version}", refused=str(e))
    return CrossCheckResult(against, tuple(compare(plan_side(plan), vllm)))


__all__ = ["cross_check"]
