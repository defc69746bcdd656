"""GPU tests of the Triton MoE row as vLLM 0.33 runs it (kernels/triton_moe/, kernels/triton_ops.py):

* vLLM's tiles (tuning.vllm_config, from its shipped table or its default config) for the shapes
  the reports time compile in this kernel and give the reference's answer: Qwen3-30B-A3B at TP=1,
  TP=4 and TP=1 EP=8, M = 1 8 64 512, every recipe;
* the wrapping under EP: the output cache starts full of NaN, so a missing zero fill or a sum
  that skipped the other ranks' slots would show;
* the online per-tensor scheme: the intermediate's one scale is amax / 448 of the whole
  activation, computed inside the call, and the call replays in a CUDA graph;
* the refined 64x64 blocks of a block-128 checkpoint at TP=4, and the input quantizers the
  with_quant twins time.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from benchmark_model_kernels.core.results_schema import RunSettings  # noqa: E402
from benchmark_model_kernels.kernels import quant_timing as qt  # noqa: E402
from benchmark_model_kernels.kernels.triton_moe import fused, tuning, wrapping  # noqa: E402
from benchmark_model_kernels.kernels.triton_moe import problem as pb  # noqa: E402
from builders import moe_case  # noqa: E402

#: Relative L2 bounds against reference_moe, as tests/run/test_triton_moe_gpu.py (the FP8 ones
#: cover the intermediate's e4m3 rounding, which the reference does not model).
TOL = {"bf16": 1e-2, "fp8_per_tensor": 6e-2, "fp8_per_token": 6e-2, "fp8_block128": 6e-2}
#: Qwen3-30B-A3B's experts per rank: (per-rank I, local experts, MoE tokens per M) at TP=1, TP=4
#: and TP=1 EP=8.
LAYOUTS = {"tp1": (768, 128, 1), "tp4": (192, 128, 1), "tp1ep8": (768, 16, 8)}
SCHEMES = ("bf16", "fp8_per_tensor", "fp8_per_token", "fp8_block128")


def qwen3(layout: str, m: int, scheme: str, **kw) -> pb.MoeProblem:
    inter, local, per_m = LAYOUTS[layout]
    block = 64 if scheme == "fp8_block128" and inter % 128 else 128
    return pb.MoeProblem(m * per_m, 2048, inter, local, 128, 8, "silu_and_mul", True, scheme,
                         block_size=block, dynamic_scale=scheme == "fp8_per_tensor", **kw)


def _rel(out, ref) -> float:
    return ((out.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def run_checked(p: pb.MoeProblem, config: dict):
    """(args, out) of one call with the output cache NaN-filled first, checked against the reference."""
    inp = pb.build_inputs(p, "cuda", seed=p.num_tokens)
    fn, args = fused.make_fused_moe(p, inp, config)
    args[20].fill_(float("nan"))  # cache3: GEMM 2's output, read by the sum over every slot
    out = fn(*args).clone()
    torch.cuda.synchronize()
    assert torch.isfinite(out).all(), f"{p}: NaN leaked from the output cache"
    err = _rel(out, pb.reference_moe(p, inp))
    assert err <= TOL[p.scheme], f"{p}: rel L2 {err:.4g} > {TOL[p.scheme]}"
    return args, out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m", (1, 8, 64, 512))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_vllms_tiles_run_and_match_the_reference(layout, m, scheme):
    p = qwen3(layout, m, scheme)
    config, note = tuning.vllm_config(p, torch.cuda.get_device_name())
    assert note.startswith("vLLM ")
    run_checked(p, config)


def test_ep_zero_fill_and_full_slot_sum_passes():
    p = qwen3("tp1ep8", 64, "fp8_per_token")
    assert {"zero_fill", "moe_sum"} <= {x.name for x in wrapping.passes(p)}
    args, out = run_checked(p, tuning.default_config(p.scheme, p.num_tokens, top_k=8, local_experts=16))
    ids = args[8]
    remote = (ids >= p.local_experts).all(dim=1)
    assert torch.all(out[remote] == 0)
    # Every slot of another rank's expert holds a zero after the call.
    rows = (ids.flatten() >= p.local_experts)
    assert torch.all(args[20][rows] == 0)


@pytest.mark.parametrize("layout", ("tp1", "tp1ep8"))
def test_dynamic_per_tensor_scale_is_the_activations_amax_and_replays_in_a_graph(layout):
    p = qwen3(layout, 64, "fp8_per_tensor")
    inp = pb.build_inputs(p, "cuda", seed=3)
    assert inp["a2_scale"] is None  # nothing precomputed: the call computes it
    fn, args = fused.make_fused_moe(p, inp, tuning.vllm_config(p, torch.cuda.get_device_name())[0])
    eager = fn(*args).clone()
    torch.cuda.synchronize()
    act_out, scale = args[17], args[19]
    want = act_out.float().abs().max() / pb.FP8_MAX
    assert torch.allclose(scale, want.reshape(1), rtol=1e-6, atol=0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*args)
    args[-1].zero_()
    scale.fill_(123.0)  # the graph resets the scale before its reduction
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert torch.equal(args[-1], eager)


@pytest.mark.parametrize("scheme, kw", [("fp8_per_tensor", {}), ("fp8_block128", dict(block_size=64)),
                                        ("fp8_block128", {})])
def test_input_quantizers_match_torch(scheme, kw):
    x = torch.randn(300, 2048, device="cuda", dtype=torch.bfloat16)
    block = kw.get("block_size", 128)
    fn, args = fused.input_quant_fn(x, scheme, **kw)
    xq, xs = fn(*args)
    torch.cuda.synchronize()
    want_q, want_s = pb._quant_act_torch(x, scheme, block=block)
    assert xs.shape == want_s.shape and torch.allclose(xs, want_s, rtol=1e-6, atol=0)
    mismatch = (xq.view(torch.uint8) != want_q.view(torch.uint8)).float().mean().item()
    assert mismatch < 1e-3, mismatch


def test_with_quant_twins_of_the_new_formats_are_timed():
    pytest.importorskip("flashinfer")
    settings = RunSettings(dry_run_iters=2, num_iters=5)
    for case in (moe_case(m=64, routine="triton.fused_moe", backend="triton", dtype="fp8", variant="per_tensor",
                          with_quant=True, activation_quant="fp8_per_tensor_dynamic"),
                 moe_case(192, m=64, routine="triton.fused_moe", backend="triton", dtype="fp8",
                          variant="block128", with_quant=True, activation_quant="fp8_per_group_128")):
        assert qt.quant_spec(case).method in ("fp8_per_tensor_dynamic", "fp8_per_group_64")
        m = qt.measure_quant(case, settings)
        assert 0 < m.median_us < 1000
