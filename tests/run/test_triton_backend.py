"""The triton backend's mapping from a Case to the Triton kernels' problem (CPU: no kernel runs)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmark_model_kernels.cases.kernel_limits import TRITON_MOE_ACTIVATIONS
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.kernels import triton_ops
from benchmark_model_kernels.kernels.triton_moe.problem import ACTIVATIONS, GATED_ACTIVATIONS
from helpers_runner import moe_case


def triton_case(dtype: str = "bf16", variant: str = "", activation: str = "Swiglu", gated: bool = True,
                intermediate: int = 768, activation_quant: str = ""):
    base = moe_case(intermediate, m=8)
    return replace(base, case_id=f"moe.experts.m8.{dtype}.triton" + (f".{variant}" if variant else ""),
                   dtype=dtype, backend="triton", routine="triton.fused_moe", variant=variant,
                   activation=activation, gated=gated, driver_args=(), activation_quant=activation_quant)


def test_every_case_activation_maps_to_a_kernel_activation_of_the_same_gating():
    for case_name, kernel_name in TRITON_MOE_ACTIVATIONS.items():
        assert kernel_name in ACTIVATIONS, case_name
    gated = {k for k, v in TRITON_MOE_ACTIVATIONS.items() if v in GATED_ACTIVATIONS}
    assert gated == {"Swiglu", "Geglu", "GegluTanh", "SwigluBias"}


@pytest.mark.parametrize("dtype, variant, scheme", [("bf16", "", "bf16"), ("fp8", "per_tensor", "fp8_per_tensor"),
                                                    ("fp8", "per_token", "fp8_per_token"),
                                                    ("fp8", "block128", "fp8_block128")])
def test_case_to_problem(dtype, variant, scheme):
    p = triton_ops.moe_problem(triton_case(dtype, variant))
    assert (p.num_tokens, p.hidden, p.intermediate, p.local_experts, p.global_experts, p.top_k) == (
        8, 2048, 768, 128, 128, 8)
    assert (p.activation, p.gated, p.scheme, p.has_bias) == ("silu_and_mul", True, scheme, False)


@pytest.mark.parametrize("variant, scheme", [("tuned", "bf16"), ("per_token-tuned", "fp8_per_token"),
                                             ("block128-tuned", "fp8_block128")])
def test_a_tuned_row_is_the_same_problem(variant, scheme):
    dtype = "bf16" if scheme == "bf16" else "fp8"
    assert triton_ops.moe_problem(triton_case(dtype, variant)) == triton_ops.moe_problem(
        triton_case(dtype, variant.split("-")[0] if dtype == "fp8" else ""))
    assert triton_ops.moe_problem(triton_case(dtype, variant)).scheme == scheme


def test_online_per_tensor_computes_its_scale_per_call():
    dynamic = triton_ops.moe_problem(triton_case("fp8", "per_tensor", activation_quant="fp8_per_tensor_dynamic"))
    static = triton_ops.moe_problem(triton_case("fp8", "per_tensor", activation_quant="fp8_per_tensor_static"))
    assert dynamic.dynamic_scale and not static.dynamic_scale


def test_block128_runs_the_block_vllm_refines_the_shard_to():
    # Qwen3-30B-A3B at TP=4: I = 192 per rank, 128x128 scales refined to 64x64.
    assert triton_ops.moe_problem(triton_case("fp8", "block128", intermediate=192)).block_size == 64
    assert triton_ops.moe_problem(triton_case("fp8", "block128")).block_size == 128
    with pytest.raises(triton_ops.UnsupportedCase, match="vLLM refuses intermediate=48"):
        triton_ops.moe_problem(triton_case("fp8", "block128", intermediate=48))


def test_gpt_oss_activation_carries_its_biases_and_relu2_is_not_gated():
    assert triton_ops.moe_problem(triton_case(activation="SwigluBias")).has_bias
    p = triton_ops.moe_problem(triton_case(activation="Relu2", gated=False))
    assert (p.activation, p.gated) == ("relu2", False)


def test_tiles_are_cached_beside_the_autotuner_cache(tmp_path):
    settings = RunSettings(autotune_cache=str(tmp_path / "autotune_cache.json"))
    assert triton_ops.cache_dir(settings) == str(tmp_path / "autotune_cache.json.triton")


def test_a_known_unsupported_case_never_reaches_the_kernels():
    case = replace(triton_case(), skip_reason="triton.fused_moe has no Identity activation")
    with pytest.raises(triton_ops.UnsupportedCase, match="Identity"):
        triton_ops.run_case(case, RunSettings())
