"""GPU tests of kernels/triton_fp8_gemm.py: the block-scaled FP8 GEMM vs its fp32 reference on real
shapes, the 1x128 group quantizer vs torch, and CUDA-graph capture. Skipped without CUDA.

Self-contained (puts scripts/ on sys.path itself), so it also runs with --noconftest.
"""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from benchmark_model_kernels.kernels import triton_fp8_gemm as T  # noqa: E402


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")]

#: Relative L2 error bound of the bf16 output vs the fp32 product of the dequantized inputs.
#: bf16 output rounding alone gives ~1.7e-3 (measured on CPU); Hopper's FP8 MMA accumulates each
#: 128-deep tile with reduced precision before the fp32 scale-and-add, ~1e-4 more; summation
#: order ~1e-6. 5e-3 keeps a 2x margin while a wrong scale (block magnitudes spread 2**+-3 in
#: build_inputs), a skipped K tile or a misplaced column gives errors >= 1e-1.
REL_L2_TOL = 5e-3

MS = (1, 8, 64, 512)
#: (N, K): Llama-3.1-8B qkv / o_proj, DeepSeek-V3 o_proj-like (7168 x 2048), and DeepSeek-V3's
#: fused_qkv_a_proj N = 1536 + 576 = 2112, whose last weight block is partial (vLLM allows it).
NKS = ((6144, 4096), (4096, 4096), (7168, 2048), (2112, 7168))


def _rel_l2(y, ref) -> float:
    return ((y.float() - ref).norm() / ref.norm()).item()


@pytest.fixture(scope="module")
def inputs_for():
    cache = {}

    def get(m, n, k):
        key = (m, n, k)
        if key not in cache:
            cache.clear()  # keep one shape's tensors at a time
            p = T.BlockFp8Problem(m, n, k)
            inp = T.build_inputs(p, "cuda", seed=0)
            cache[key] = (p, inp, T.reference(p, inp))
        return cache[key]

    return get


@pytest.mark.parametrize("n, k", NKS)
@pytest.mark.parametrize("m", MS)
def test_gemm_default_config_vs_reference(inputs_for, m, n, k):
    p, inp, ref = inputs_for(m, n, k)
    fn, args = T.make_block_fp8_gemm(p, inp, T.default_config(m, n, k))
    y = fn(*args)
    assert y.dtype.is_floating_point and tuple(y.shape) == (m, n)
    err = _rel_l2(y, ref)
    assert err <= REL_L2_TOL, f"rel L2 {err:.3e} > {REL_L2_TOL}"


@pytest.mark.parametrize("m", MS)
def test_gemm_across_config_space(inputs_for, m):
    """First, middle and last configs of the space (narrow/wide tiles, 4/8 warps, stages)."""
    n, k = 2112, 7168
    p, inp, ref = inputs_for(m, n, k)
    space = T.config_space(m)
    for config in (space[0], space[len(space) // 2], space[-1]):
        inp["out"].fill_(float("nan"))
        fn, args = T.make_block_fp8_gemm(p, inp, config)
        err = _rel_l2(fn(*args), ref)
        assert err <= REL_L2_TOL, f"{config}: rel L2 {err:.3e}"


def test_gemm_and_quant_capture_in_cuda_graph():
    import torch

    p = T.BlockFp8Problem(8, 4096, 4096)
    inp = T.build_inputs(p, "cuda", seed=3)
    gemm, gargs = T.make_block_fp8_gemm(p, inp, T.default_config(8, 4096, 4096))
    quant, qargs = T.quant_input_fn(p, inp)
    eager_y = gemm(*gargs).clone()
    eager_q, eager_s = (t.clone() for t in quant(*qargs))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # fails on any host synchronisation
        gemm(*gargs)
        quant(*qargs)
    gargs[-1].zero_()
    qargs[1].zero_()
    qargs[2].zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(gargs[-1], eager_y)
    assert torch.equal(qargs[1].view(torch.uint8), eager_q.view(torch.uint8))
    assert torch.equal(qargs[2], eager_s)


@pytest.mark.parametrize("m, k", [(1, 4096), (8, 7168), (64, 2048), (512, 14336)])
def test_group_quant_vs_torch(m, k):
    import torch

    p = T.BlockFp8Problem(m, 128, k)
    inp = T.build_inputs(p, "cuda", seed=5)
    x = inp["x"]
    x[0, :128] = 0  # eps floor
    x[-1, 128:256] *= 3000  # a large group
    # A group with scale exactly 1 (amax 448): round-to-nearest-even ties (-168 -> -160,
    # 17 -> 16, 19 -> 20, 440 -> 448), binade carries (126 -> 128), subnormals (3 * 2**-10).
    special = [448.0, -168.0, 124.5, 126.0, -7.75, 0.001, 2.0**-10, -3 * 2.0**-10, 440.0, 432.0, 17.0, 19.0]
    x[0, 128:256] = 0
    x[0, 128:128 + len(special)] = torch.tensor(special, dtype=torch.bfloat16)
    ref_q, ref_s = T.quantize_groups_torch(x)
    fn, args = T.quant_input_fn(p, inp)
    q, s = fn(*args)
    torch.cuda.synchronize()
    # Scales: the same fp32 max and IEEE division as torch, so exact (1e-6 relative asked).
    torch.testing.assert_close(s, ref_s, rtol=1e-6, atol=0)
    # Values: within one e4m3 ulp (as asked), and almost always bit-exact. e4m3 codes of one
    # sign are ordered, so a one-ulp difference is a code difference of 1. The kernel divides
    # IEEE-correctly and rounds onto the e4m3 grid itself (nearest, ties to even), as the torch
    # reference does; on the H200 an older reference that scaled by torch's rounded reciprocal
    # of 448 left 0.1-0.15% of codes one ulp off, so more than 1e-4 means a rounding slip.
    qc = q.view(torch.uint8).int()
    rc = ref_q.view(torch.uint8).int()
    same_sign = (qc >> 7) == (rc >> 7)
    ulps = torch.where(same_sign, (qc - rc).abs(), (qc & 0x7F) + (rc & 0x7F))
    assert int(ulps.max()) <= 1, f"{int((ulps > 1).sum())} codes differ by more than one ulp"
    off = int((ulps > 0).sum())
    assert off <= max(2, 1e-4 * ulps.numel()), f"{off} of {ulps.numel()} codes one ulp off"
