"""vLLM's default kernel per (GPU family, kind, recipe, scheme): the table answers each cell once."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.vllm_rules.dispatch import VLLM_DEFAULTS, gpu_family, is_vllm_default, vllm_default


def test_every_cell_has_one_answer():
    keys = [(r.family, r.kind, r.recipe, r.scheme, r.ep_only) for r in VLLM_DEFAULTS]
    assert len(keys) == len(set(keys))
    for r in VLLM_DEFAULTS:
        # a row either names the backend that times it, or says why none does
        assert bool(r.match) == bool(r.backend) and bool(r.match) != bool(r.missing), r


@pytest.mark.parametrize("cc, family", [((9, 0), "sm90"), ((10, 0), "sm100"), ((10, 3), "sm100"),
                                        ((8, 0), ""), (None, "")])
def test_gpu_family(cc, family):
    assert gpu_family(cc) == family


def test_hopper_defaults_follow_vllm_selection():
    # BF16 dense: F.linear, which the torch.linear row times exactly
    bf16 = vllm_default("sm90", "gemm", "bf16")
    assert is_vllm_default(bf16, "torch", "torch.linear")
    assert not is_vllm_default(bf16, "cudnn", "mm_bf16")
    # BF16 MoE on Hopper: Triton fused_moe; the triton row is vLLM's design, the torch composite is not
    moe = vllm_default("sm90", "moe", "bf16")
    assert moe.match == "design" and is_vllm_default(moe, "triton", "triton.fused_moe")
    assert not is_vllm_default(moe, "torch", "torch._grouped_mm")
    # FP8 dense on Hopper is vLLM's own CUTLASS kernel: no row here is it
    assert not vllm_default("sm90", "gemm", "fp8", "per_token").match
    # block-128 FP8 MoE: Triton under TP, FlashInfer CUTLASS under EP (oracle/fp8.py)
    assert vllm_default("sm90", "moe", "fp8", "block128", expert_parallel=False).backend == "triton"
    ep = vllm_default("sm90", "moe", "fp8", "block128", expert_parallel=True)
    assert not ep.match and "CUTLASS" in ep.kernel


def test_blackwell_moe_is_flashinfer_trtllm():
    row = vllm_default("sm100", "moe", "fp8", "per_tensor")
    assert is_vllm_default(row, "trtllm", "trtllm_fp8_per_tensor_scale_moe")
    assert vllm_default("sm120", "moe", "bf16") is None
