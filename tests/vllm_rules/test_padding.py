"""vLLM physical padding per backend: the worked examples of references/padding.md."""

from __future__ import annotations

import doctest

import pytest

from benchmark_model_kernels.core.case_schema import GemmShape, MoeShape
from benchmark_model_kernels.vllm_rules import padding
from benchmark_model_kernels.vllm_rules.padding import physical_gemm, physical_moe, round_up

NVFP4_MOE = (("trtllm_fp4_block_scale_moe", "trtllm"), ("cute_dsl_fp4_block_scale_moe", "cute-dsl"))
FP8_MOE = (("cutlass_fused_moe", "cutlass"), ("trtllm_fp8_per_tensor_scale_moe", "trtllm"))


def moe(hidden: int, inter: int, experts: int = 128, top_k: int = 8, m: int = 16) -> MoeShape:
    return MoeShape(num_tokens=m, hidden=hidden, intermediate=inter, experts=experts,
                    global_experts=experts, top_k=top_k)


def test_round_up():
    assert [round_up(v, 64) for v in (1, 64, 65, 96, 128)] == [64, 64, 128, 128, 128]


# Qwen3-30B-A3B: H=2048, moe I=768, E=128, k=8. TP8 -> I_r=96.
@pytest.mark.parametrize("routine,backend", FP8_MOE)
def test_qwen3_tp8_fp8_moe_pads_nothing(routine, backend):
    shape = moe(2048, 96)
    assert physical_moe(shape, routine, backend, "fp8", gated=True) == (shape, "")


@pytest.mark.parametrize("routine,backend", NVFP4_MOE)
def test_qwen3_tp8_nvfp4_trtllm_and_cutedsl_pad_intermediate_to_128(routine, backend):
    phys, reason = physical_moe(moe(2048, 96), routine, backend, "nvfp4", gated=True)
    assert reason == ""
    assert (phys.hidden, phys.intermediate) == (2048, 128)


def test_qwen3_tp8_nvfp4_cutlass_gated_is_a_vllm_limit_not_padded():
    shape = moe(2048, 96)
    phys, reason = physical_moe(shape, "cutlass_fused_moe", "cutlass", "nvfp4", gated=True)
    assert phys == shape  # never padded around
    assert "gemm1_rows=192" in reason and "128" in reason and "NotImplementedError" in reason
    assert "prepare_nvfp4_moe_layer_for_fi_or_cutlass" in reason


@pytest.mark.parametrize("routine,backend,dtype", [
    ("cutlass_fused_moe", "cutlass", "nvfp4"), ("trtllm_fp4_block_scale_moe", "trtllm", "nvfp4"),
    ("cute_dsl_fp4_block_scale_moe", "cute-dsl", "nvfp4"), ("cutlass_fused_moe", "cutlass", "fp8"),
    ("trtllm_fp8_per_tensor_scale_moe", "trtllm", "fp8"), ("cutlass_fused_moe", "cutlass", "bf16")])
def test_qwen3_tp4_and_deepseek_v3_tp8_fine_everywhere(routine, backend, dtype):
    for shape in (moe(2048, 192), moe(7168, 256, experts=256)):
        assert physical_moe(shape, routine, backend, dtype, gated=True) == (shape, "")


def test_gpt_oss_120b_tp8_nvfp4_trtllm_pads_hidden_and_intermediate():
    phys, reason = physical_moe(moe(2880, 360, top_k=4), "trtllm_fp4_block_scale_moe", "trtllm",
                                "nvfp4", gated=True)
    assert reason == ""
    assert (phys.hidden, phys.intermediate) == (3072, 384)
    assert (phys.experts, phys.global_experts, phys.top_k, phys.num_tokens) == (128, 128, 4, 16)


def test_gpt_oss_120b_tp8_nvfp4_cutlass_raises():
    _, reason = physical_moe(moe(2880, 360, top_k=4), "cutlass_fused_moe", "cutlass", "nvfp4",
                             gated=True)
    assert "gemm1_rows=720" in reason


def test_non_gated_fp8_moe_pads_intermediate_to_128_gated_to_16():
    for routine, backend in FP8_MOE:
        ng, _ = physical_moe(moe(2048, 100), routine, backend, "fp8", gated=False)
        g, _ = physical_moe(moe(2048, 100), routine, backend, "fp8", gated=True)
        assert (ng.intermediate, g.intermediate) == (128, 112)
        assert ng.hidden == g.hidden == 2048  # FP8 never pads hidden


def test_non_gated_nvfp4_cutlass_pads_to_128_instead_of_raising():
    phys, reason = physical_moe(moe(2048, 96), "cutlass_fused_moe", "cutlass", "nvfp4", gated=False)
    assert (reason, phys.intermediate) == ("", 128)


def test_bf16_moe_and_torch_rows_never_padded():
    shape = moe(2880, 360)
    assert physical_moe(shape, "cutlass_fused_moe", "cutlass", "bf16", True) == (shape, "")
    assert physical_moe(shape, "torch._scaled_grouped_mm", "torch", "fp8", True) == (shape, "")


@pytest.mark.parametrize("backend", ["cudnn", "cutlass", "cute-dsl"])
def test_nvfp4_linear_pads_n_and_k_to_32(backend):
    assert physical_gemm(GemmShape(8, 1000, 2000), "mm_fp4", backend, "nvfp4") == (
        GemmShape(8, 1024, 2016), "")


def test_nvfp4_linear_trtllm_not_padded():
    shape = GemmShape(8, 1000, 2000)
    assert physical_gemm(shape, "mm_fp4", "trtllm", "nvfp4") == (shape, "")


@pytest.mark.parametrize("backend", ["cudnn", "cutlass", "cute-dsl", "trtllm"])
def test_nvfp4_linear_k_not_multiple_of_16_raises_in_vllm(backend):
    shape = GemmShape(8, 1024, 1000)
    phys, reason = physical_gemm(shape, "mm_fp4", backend, "nvfp4")
    assert phys == shape
    assert "k=1000" in reason and "multiple of 16" in reason and "KNvfp4Static" in reason


@pytest.mark.parametrize("routine,backend,dtype", [
    ("mm_bf16", "cudnn", "bf16"), ("bmm_fp8", "cublas", "fp8"), ("torch._scaled_mm", "torch", "fp8"),
    ("torch.linear", "torch", "bf16")])
def test_bf16_and_fp8_linear_not_padded(routine, backend, dtype):
    shape = GemmShape(3, 1000, 1000)
    assert physical_gemm(shape, routine, backend, dtype) == (shape, "")


def test_every_rule_names_a_vllm_source_and_known_dim():
    for rule in padding.PAD_RULES:
        assert rule.source and rule.multiple > 1
        assert rule.dim in padding.GEMM_DIMS + padding.MOE_DIMS
    for lim in padding.VLLM_LIMITS:
        assert lim.source and lim.error and lim.dim in padding.GEMM_DIMS + padding.MOE_DIMS


def test_at_most_one_rule_per_dimension():
    from benchmark_model_kernels.cases.backends import BACKENDS

    for spec in BACKENDS:
        for gated in (True, False):
            dims = [r.dim for r in padding.pad_rules_for(spec.routine, spec.backend, spec.dtype,
                                                         gated)]
            assert len(dims) == len(set(dims)), spec


def test_doctests():
    assert doctest.testmod(padding).failed == 0
