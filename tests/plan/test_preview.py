"""The --print_only preview: the MoE header names GEMM1's width as the experts run it (2*I gated,
I non-gated), with no format artefacts."""

from __future__ import annotations

import pytest
from plan_helpers import plan_of

from benchmark_model_kernels.plan.preview import format_plan

MOE_HEADERS = [
    ("qwen3-30b-a3b", "Fused MoE (1):  GEMM1 [E_local, 2*I, H] then GEMM2 [E_local, H, I]  (I = inter/rank)"),
    ("deepseek-v3", "Fused MoE (1):  GEMM1 [E_local, 2*I, H] then GEMM2 [E_local, H, I]  (I = inter/rank)"),
    ("gpt-oss-120b", "Fused MoE (1):  GEMM1 [E_local, 2*I, H] then GEMM2 [E_local, H, I]  (I = inter/rank)"),
    ("llama-4-maverick-17b-128e",
     "Fused MoE (1):  GEMM1 [E_local, 2*I, H] then GEMM2 [E_local, H, I]  (I = inter/rank)"),
    ("nemotron-3-nano-30b-a3b",  # Relu2 experts: no gate, GEMM1 is I wide
     "Fused MoE (1):  GEMM1 [E_local, I, H] then GEMM2 [E_local, H, I]  (I = inter/rank)"),
]


@pytest.mark.parametrize("name,header", MOE_HEADERS, ids=[r[0] for r in MOE_HEADERS])
def test_moe_header_shows_gemm1_width_without_artefacts(name, header):
    text = format_plan(plan_of(name, 8, 8))
    assert header in text.splitlines()
    assert not any(artefact in text for artefact in ("{", "}", "('", "',)", "None"))


def test_cross_check_not_checked_and_bias_lines():
    from dataclasses import replace

    from benchmark_model_kernels.core.plan_schema import CrossCheck, ModelInfo, Plan

    plan = Plan(ModelInfo(name="m", source="local", model_type="t", architecture="A"), 1, 1)
    text = format_plan(replace(plan, cross_check=CrossCheck("vllm 0.33.0", "not checked", refused="ImportError: x")))
    assert "# cross-check against vllm 0.33.0: not checked (no verdict on the plan): ImportError: x" in text
    bias = "bias: m.layers.{0-1}.qkv_proj: vLLM's layer has a bias, the plan's entry none (same 8 x 8 GEMM x2) [p]"
    text = format_plan(replace(plan, cross_check=CrossCheck("vllm 0.33.0 (A)", "match", (bias,))))
    assert "# cross-check against vllm 0.33.0 (A): match (" in text and f"# cross-check {bias}\n" in text
    assert Plan.from_json(replace(plan, cross_check=CrossCheck("v", "not checked", refused="r")).to_json()) \
        .cross_check == CrossCheck("v", "not checked", refused="r")
