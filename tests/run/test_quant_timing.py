"""Activation-quantization timing: which kernel/layout each with_quant case gets, and the Triton
kernels against a torch reference (GPU)."""

from __future__ import annotations

import importlib.util

import pytest

from benchmark_model_kernels.core.case_schema import Case
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.kernels import quant_timing as qt
from benchmark_model_kernels.kernels.timing import UnsupportedCase
from builders import gemm_case, moe_case
from support import requires_gpu


@pytest.mark.parametrize(
    "case, expected",
    [
        (gemm_case(6144, k=4096, routine="bmm_fp8", backend="cudnn", dtype="fp8",
                   with_quant=True), qt.QuantSpec("fp8_per_tensor", 8, 4096)),
        (gemm_case(6144, k=4096, routine="mm_fp8", backend="trtllm_low_latency", dtype="fp8",
                   with_quant=True), qt.QuantSpec("fp8_per_tensor", 8, 4096)),
        (gemm_case(6144, k=4096, routine="torch._scaled_mm", backend="torch", dtype="fp8", variant="per_tensor",
                   with_quant=True),
         qt.QuantSpec("fp8_per_tensor", 8, 4096)),
        (gemm_case(6144, k=4096, routine="torch._scaled_mm", backend="torch", dtype="fp8", variant="per_token",
                   with_quant=True),
         qt.QuantSpec("fp8_per_token", 8, 4096)),
        (moe_case(m=64, routine="trtllm_fp8_per_tensor_scale_moe", backend="trtllm", dtype="fp8", with_quant=True),
         qt.QuantSpec("fp8_per_tensor", 64, 2048)),
        (moe_case(m=64, routine="torch._scaled_grouped_mm", backend="torch", dtype="fp8", with_quant=True),
         qt.QuantSpec("fp8_per_token", 64, 2048)),
        # NVFP4: physical (padded) K / hidden is what gets quantized, in the recorded scale layout
        (gemm_case(6144, k=4000, physical_k=4032, routine="mm_fp4", backend="cutlass", dtype="nvfp4", with_quant=True,
                   activation_quant="nvfp4_128x4"),
         qt.QuantSpec("nvfp4", 8, 4032, "128x4")),
        (gemm_case(6144, k=4096, routine="mm_fp4", backend="trtllm", dtype="nvfp4", with_quant=True,
                   activation_quant="nvfp4_8x4"), qt.QuantSpec("nvfp4", 8, 4096, "8x4")),
        (gemm_case(6144, m=64, k=4096, routine="mm_fp4", backend="trtllm", dtype="nvfp4", with_quant=True,
                   activation_quant="nvfp4_128x4"),
         qt.QuantSpec("nvfp4", 64, 4096, "128x4")),
        (moe_case(routine="cutlass_fused_moe", backend="cutlass", dtype="nvfp4", variant="quantized_input",
                  with_quant=True, activation_quant="nvfp4_128x4"),
         qt.QuantSpec("nvfp4", 8, 2048, "128x4")),
        (moe_case(hidden=2880, physical_hidden=3072, routine="trtllm_fp4_block_scale_moe", backend="trtllm",
                  dtype="nvfp4", with_quant=True, activation_quant="nvfp4_linear"),
         qt.QuantSpec("nvfp4", 8, 3072, "linear")),
        (moe_case(routine="cute_dsl_fp4_block_scale_moe", backend="cute-dsl", dtype="nvfp4", with_quant=True,
                  activation_quant="nvfp4_linear"),
         qt.QuantSpec("nvfp4", 8, 2048, "linear")),
        # The Triton MoE as vLLM's online fp8_per_tensor runs it: one scale computed per call.
        (moe_case(m=64, routine="triton.fused_moe", backend="triton", dtype="fp8", variant="per_tensor",
                  with_quant=True, activation_quant="fp8_per_tensor_dynamic"),
         qt.QuantSpec("fp8_per_tensor_dynamic", 64, 2048)),
        # Block-128 at Qwen3-30B-A3B TP=4 (I=192): vLLM's refined 64x64 blocks, 1x64 input groups;
        # a shard 128 divides keeps 1x128 groups, tuned variant or not.
        (moe_case(192, routine="triton.fused_moe", backend="triton", dtype="fp8", variant="block128",
                  with_quant=True, activation_quant="fp8_per_group_128"),
         qt.QuantSpec("fp8_per_group_64", 8, 2048)),
        (moe_case(768, routine="triton.fused_moe", backend="triton", dtype="fp8", variant="block128-tuned",
                  with_quant=True, activation_quant="fp8_per_group_128"),
         qt.QuantSpec("fp8_per_group_128", 8, 2048)),
        (moe_case(768, routine="triton.fused_moe", backend="triton", dtype="fp8", variant="per_token-tuned",
                  with_quant=True, activation_quant="fp8_per_token_dynamic"),
         qt.QuantSpec("fp8_per_token", 8, 2048)),
    ],
    ids=lambda v: v.case_id if isinstance(v, Case) else v.method,
)
def test_quant_spec(case, expected):
    assert qt.quant_spec(case) == expected


def test_built_nvfp4_twins_quantize_in_the_layout_their_driver_argv_names():
    """One decision: the builder's activation format gives both the driver's --use_128x4_sf_layout
    and the layout the with_quant twin times."""
    from benchmark_model_kernels.cases.build import build_cases, plan_from_shapes

    twins = [c for c in build_cases(plan_from_shapes([(4096, 4096, "q")]), [8, 32, 33, 512], ["nvfp4"])
             if c.with_quant]
    assert {c.backend for c in twins} >= {"trtllm", "cudnn", "cutlass"}
    for c in twins:
        expected = "128x4" if "--use_128x4_sf_layout" in c.driver_args else "8x4"
        assert qt.quant_spec(c).sf_layout == expected, c.case_id


def test_an_nvfp4_twin_without_a_recorded_format_is_refused():
    with pytest.raises(ValueError, match="activation_quant='' is not an NVFP4 format"):
        qt.quant_spec(gemm_case(6144, k=4096, routine="mm_fp4", backend="cutlass", dtype="nvfp4", with_quant=True))


@pytest.mark.parametrize(
    "case, match",
    [
        (gemm_case(6144, k=4096, routine="mm_bf16", backend="cudnn", dtype="bf16",
                   with_quant=True), "BF16 rows have no activation quantization"),
        (moe_case(routine="cutlass_fused_moe", backend="cutlass", dtype="nvfp4",
                  with_quant=True), "quantizes inside the kernel"),
        (gemm_case(6144, k=4008, routine="mm_fp4", backend="cutlass", dtype="nvfp4", with_quant=True), "K % 16 == 0"),
    ],
)
def test_quant_spec_without_separate_quant_is_unsupported(case, match):
    with pytest.raises(UnsupportedCase, match=match):
        qt.quant_spec(case)


def test_describe_and_note():
    assert qt.QuantSpec("nvfp4", 8, 4096, "8x4").describe() == (
        "nvfp4 quantization of a [8, 4096] BF16 activation, 8x4 scale factors")
    note = qt.QUANT_TIMING_NOTE
    for needle in ("ONE fused kernel", "Triton", "fp4_quantize", "SM100+", "cold L2", "CUPTI"):
        assert needle in note


def test_heavy_modules_are_imported_lazily():
    """Importing these modules (CPU preview, report) must not pull torch, triton or flashinfer."""
    import os
    import subprocess
    import sys

    scripts = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts")
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import benchmark_model_kernels.kernels.quant_timing, benchmark_model_kernels.kernels.torch_ops\n"
        "import benchmark_model_kernels.run.roofline, benchmark_model_kernels.kernels.timing\n"
        "print(sorted(m for m in ('torch', 'triton', 'flashinfer', 'numpy') if m in sys.modules))"
    ) % scripts
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- GPU


def _has_triton():
    return importlib.util.find_spec("triton") is not None


@requires_gpu
@pytest.mark.skipif(not _has_triton(), reason="needs triton")
@pytest.mark.parametrize("rows, cols", [(1, 4096), (7, 2880), (512, 7168), (3, 30000)])
def test_fp8_per_tensor_kernel_matches_torch(rows, cols):
    import torch

    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) * 3
    x[0, 0] = 1e4  # saturates
    inv_scale = torch.tensor([448.0 / 20.0], device="cuda")
    got = qt.fp8_quant_per_tensor(x, inv_scale)
    ref = (x.float() * inv_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    assert got.dtype == torch.float8_e4m3fn and got.shape == x.shape
    assert float(got[0, 0].float()) == 448.0
    _assert_fp8_close(got, ref)


@requires_gpu
@pytest.mark.skipif(not _has_triton(), reason="needs triton")
@pytest.mark.parametrize("rows, cols", [(1, 4096), (7, 2880), (512, 7168), (3, 30000)])
def test_fp8_per_token_kernel_matches_torch(rows, cols):
    import torch

    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    x[-1] *= 100
    got, scale = qt.fp8_quant_per_token(x)
    amax = x.float().abs().amax(-1)
    assert torch.allclose(scale, amax / 448.0, rtol=1e-6)
    ref = (x.float() / (amax / 448.0)[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    _assert_fp8_close(got, ref)
    deq = got.float() * scale[:, None]
    assert float(((deq - x.float()).abs() / amax[:, None]).max()) < 0.07


def _assert_fp8_close(got, ref):
    import torch

    diff = got.view(torch.uint8) != ref.view(torch.uint8)
    # Same rounding is expected; allow a rare one-ulp tie difference, never more.
    assert float(diff.float().mean()) < 1e-3
    g, r = got.float(), ref.float()
    assert bool(((g - r).abs() <= 0.125 * r.abs() + 2.0**-9).all())


@requires_gpu
@pytest.mark.skipif(not _has_triton() or importlib.util.find_spec("flashinfer") is None,
                    reason="needs triton and flashinfer")
def test_measure_quant_on_gpu():
    import torch

    settings = RunSettings(dry_run_iters=2, num_iters=5)
    for case in (gemm_case(6144, k=4096, routine="bmm_fp8", backend="cudnn", dtype="fp8", with_quant=True),
                 gemm_case(6144, m=512, k=4096, routine="torch._scaled_mm", backend="torch", dtype="fp8",
                           variant="per_token", with_quant=True)):
        m = qt.measure_quant(case, settings)
        assert 0 < m.median_us < 1000 and m.timer in ("cupti", "cuda_graph", "cuda_events")
    nvfp4 = gemm_case(6144, k=4096, routine="mm_fp4", backend="cutlass", dtype="nvfp4", with_quant=True)
    major, minor = torch.cuda.get_device_capability()
    if major < 10:
        with pytest.raises(UnsupportedCase, match=f"SM100\\+; this GPU is sm_{major}{minor}"):
            qt.measure_quant(nvfp4, settings)
    else:
        assert qt.measure_quant(nvfp4, settings).median_us > 0
