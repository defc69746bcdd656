"""vLLM's default kernel per (GPU family, kind, recipe, scheme): the table answers each cell once,
as vLLM 0.33.0's own selection code does (examples/vllm_fidelity/dispatch_vllm-0.33.0.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmark_model_kernels.vllm_rules.dispatch import (
    TIMED_LABELS,
    VLLM_DEFAULTS,
    VLLM_VERSION,
    LayerCell,
    gpu_family,
    is_vllm_default,
    refined_fp8_block,
    table_row,
    timed_label,
    vllm_default,
)

TRITON_MOE = ("triton", "triton.fused_moe")


def test_every_cell_has_one_answer():
    keys = [(r.family, r.kind, r.recipe, r.scheme, r.ep_only, r.activation_scales, r.refined) for r in VLLM_DEFAULTS]
    assert len(keys) == len(set(keys))
    for r in VLLM_DEFAULTS:
        # a row either names the backend that times it, or says why none does
        assert bool(r.match) == bool(r.backend) and bool(r.match) != bool(r.missing), r
        assert r.vllm_kernel, r
        # per-tensor rules name their activation scales, the other schemes never do
        assert (r.scheme == "per_tensor") == bool(r.activation_scales), r
        assert r.closest is None or not r.match, r  # only an untimed default names a stand-in


def test_the_table_says_which_vllm_it_matches():
    assert VLLM_VERSION == "0.33.0"


@pytest.mark.parametrize("cc, family", [((9, 0), "sm90"), ((10, 0), "sm100"), ((10, 3), "sm100"),
                                        ((8, 0), ""), (None, "")])
def test_gpu_family(cc, family):
    assert gpu_family(cc) == family


def test_hopper_defaults_follow_vllm_selection():
    # BF16 dense: F.linear, which the torch.linear row times exactly
    bf16 = vllm_default("sm90", "gemm", "bf16")
    assert bf16.vllm_kernel == "default_unquantized_gemm"
    assert is_vllm_default(bf16, "torch", "torch.linear")
    assert not is_vllm_default(bf16, "cudnn", "mm_bf16")
    # BF16 MoE on Hopper: Triton fused_moe; the triton row is vLLM's design, the torch composite is not
    moe = vllm_default("sm90", "moe", "bf16")
    assert moe.match == "design" and is_vllm_default(moe, *TRITON_MOE)
    assert not is_vllm_default(moe, "torch", "torch._grouped_mm")
    # FP8 dense on Hopper is vLLM's own CUTLASS kernel: no row here is it
    assert vllm_default("sm90", "gemm", "fp8", "per_token").vllm_kernel == "CutlassFP8ScaledMMLinearKernel"
    assert not vllm_default("sm90", "gemm", "fp8", "per_token").match
    # block-128 FP8 dense: FlashInfer below M=32, DeepGEMM above, with vLLM's bundled DeepGEMM
    block = vllm_default("sm90", "gemm", "fp8", "block128")
    assert block.vllm_kernel == "FlashInferFp8DeepGEMMDynamicBlockScaledKernel"
    # block-128 FP8 MoE: Triton under TP, FlashInfer CUTLASS under EP (oracle/fp8.py)
    assert vllm_default("sm90", "moe", "fp8", "block128", expert_parallel=False).backend == "triton"
    ep = vllm_default("sm90", "moe", "fp8", "block128", expert_parallel=True)
    assert not ep.match and "CUTLASS" in ep.kernel
    # NVFP4 below SM100: Humming (ahead of Marlin on SM90), weight-only
    assert vllm_default("sm90", "moe", "nvfp4").vllm_kernel == "NvFp4MoeBackend.HUMMING"


def test_fp8_per_token_moe_on_hopper_is_vllms_cutlass_grouped_gemm_and_triton_a_fallback():
    row = vllm_default("sm90", "moe", "fp8", "per_token")
    assert row.vllm_kernel == "Fp8MoeBackend.VLLM_CUTLASS" and "CutlassExpertsFp8" in row.kernel
    assert not row.match and row.closest == TRITON_MOE
    assert timed_label(row, *TRITON_MOE).label == "fallback"
    assert timed_label(row, *TRITON_MOE).vllm_runs == row.kernel


def test_fp8_per_tensor_checkpoint_scales_vs_online_fp8_per_tensor():
    static = vllm_default("sm90", "moe", "fp8", "per_tensor", activation_scales="static")
    dynamic = vllm_default("sm90", "moe", "fp8", "per_tensor", activation_scales="dynamic")
    # FlashInfer's SM90 CUTLASS MoE takes static scales only; vLLM's online fp8_per_tensor runs Triton
    assert static.vllm_kernel == "Fp8MoeBackend.FLASHINFER_CUTLASS"
    assert static.activation_quant == "fp8_per_tensor_static"
    assert dynamic.vllm_kernel == "Fp8MoeBackend.TRITON" and dynamic.activation_quant == "fp8_per_tensor_dynamic"
    # dense layers: CUTLASS either way, the dynamic activations quantized per token
    dense = vllm_default("sm90", "gemm", "fp8", "per_tensor", activation_scales="dynamic")
    assert dense.activation_quant == "fp8_per_token"
    # the online path quantizes Qwen3-MoE's router too (DeepSeek-V3 builds its gate unquantized)
    router = LayerCell("router", "fp8", "per_tensor", activation_scales="dynamic", architecture="Qwen3MoeForCausalLM")
    assert table_row("sm90", router).vllm_kernel == "CutlassFP8ScaledMMLinearKernel"
    assert table_row("sm90", replace(router, architecture="DeepseekV3ForCausalLM")) is None
    # a per-tensor cell whose activation scales are not known has no rule
    assert vllm_default("sm90", "moe", "fp8", "per_tensor") is None


def test_block128_shards_128_does_not_divide_are_refined_and_run_triton():
    assert refined_fp8_block(192, 2048) == 64  # Qwen3-30B-A3B at TP=4
    assert refined_fp8_block(96, 2048) == 32   # at TP=8
    assert refined_fp8_block(768, 2048) == 0   # TP=1: the checkpoint's blocks fit
    assert refined_fp8_block(48, 2048) == 0    # no block >= 32 divides it
    blackwell = vllm_default("sm100", "moe", "fp8", "block128", refined=True)
    assert blackwell.vllm_kernel == "Fp8MoeBackend.TRITON" and blackwell.match == "design"
    assert vllm_default("sm100", "moe", "fp8", "block128").vllm_kernel == "Fp8MoeBackend.FLASHINFER_TRTLLM"


def test_blackwell_moe_is_flashinfer_trtllm():
    row = vllm_default("sm100", "moe", "fp8", "per_tensor", activation_scales="static")
    assert is_vllm_default(row, "trtllm", "trtllm_fp8_per_tensor_scale_moe")
    assert vllm_default("sm120", "moe", "bf16") is None


def test_timed_labels():
    moe = vllm_default("sm90", "moe", "bf16")
    assert timed_label(moe, *TRITON_MOE).label == "vllm_design_vllm_tiles"
    assert timed_label(moe, *TRITON_MOE, tuned_tiles=True).label == "vllm_design_tuned_tiles"
    assert timed_label(moe, "torch", "torch._grouped_mm").label == "comparison"
    dense = vllm_default("sm90", "gemm", "bf16")
    assert timed_label(dense, "torch", "torch.linear").label == "vllm_kernel"
    # a stand-in is the closest timed row of an untimed default that vLLM does not run elsewhere
    online = vllm_default("sm90", "gemm", "fp8", "per_tensor", activation_scales="dynamic")
    standin = timed_label(online, "torch", "torch._scaled_mm")
    assert standin.label == "stand_in" and "cutlass_scaled_mm" in standin.vllm_runs
    assert timed_label(None, "torch", "torch.linear").label == ""
    assert {timed_label(r, r.backend, r.routine).label for r in VLLM_DEFAULTS if r.match} <= set(TIMED_LABELS)
