"""Roofline columns against the hand-computed worked examples of references/roofline.md."""

from __future__ import annotations

import dataclasses

import pytest

from benchmark_model_kernels.core.results_schema import Row, row_from_dict
from benchmark_model_kernels.run import roofline


def gemm_row(m, n, k, dtype, median_us, **kw):
    return Row(case_id=f"gemm.x.m{m}.{dtype}.torch", kind="gemm", name="qkv_proj", modules="",
               layers=32, m=m, dtype=dtype, backend="torch", routine="torch.linear", variant="",
               with_quant=False, n=n, k=k, phys_n=n, phys_k=k, median_us=median_us,
               status="ok" if median_us else "failed", **kw)


def moe_row(m, h, i, e, eg, top_k, dtype, median_us, activation="Swiglu", gated=True):
    return Row(case_id=f"moe.experts.m{m}.{dtype}.torch", kind="moe", name="experts", modules="",
               layers=48, m=m, dtype=dtype, backend="torch", routine="torch._grouped_mm",
               variant="", with_quant=False, hidden=h, intermediate=i, experts=e,
               global_experts=eg, top_k=top_k, phys_hidden=h, phys_intermediate=i,
               activation=activation, gated=gated, median_us=median_us, status="ok")


# Example 1 (references/roofline.md): Llama-3.1-8B qkv_proj TP=1, M=8, BF16, 19.3 us on H200.
def test_example1_gemm_bf16_llama_qkv():
    flops, nbytes = roofline.gemm_flops_bytes(8, 6144, 4096, "bf16")
    assert flops == 402_653_184  # 2*8*6144*4096
    assert nbytes == 50_495_488  # 6144*4096*2 + 8*4096*2 + 8*6144*2
    row = roofline.annotate(gemm_row(8, 6144, 4096, "bf16", 19.3), "NVIDIA H200", (9, 0))
    assert row.flops == 402_653_184 and row.bytes == 50_495_488
    assert row.tflops == pytest.approx(20.86, rel=1e-3)
    assert row.tb_per_sec == pytest.approx(2.616, rel=1e-3)
    assert row.pct_peak_tflops == pytest.approx(2.108, rel=1e-3)  # of 989.5
    assert row.pct_peak_bandwidth == pytest.approx(54.51, rel=1e-3)  # of 4.8 TB/s


# Example 2: the same shape in FP8 (1-byte weights and activations, BF16 output), 11.4 us.
def test_example2_gemm_fp8():
    flops, nbytes = roofline.gemm_flops_bytes(8, 6144, 4096, "fp8")
    assert (flops, nbytes) == (402_653_184, 25_296_896)  # 6144*4096 + 8*4096 + 8*6144*2
    row = roofline.annotate(gemm_row(8, 6144, 4096, "fp8", 11.4), "NVIDIA H200")
    assert row.tflops == pytest.approx(35.32, rel=1e-3)
    assert row.tb_per_sec == pytest.approx(2.219, rel=1e-3)
    assert row.pct_peak_tflops == pytest.approx(1.785, rel=1e-3)  # of 1979
    assert row.pct_peak_bandwidth == pytest.approx(46.23, rel=1e-3)


# Example 3: Qwen3-30B-A3B experts TP=1 (E=128, H=2048, I=768, top_k=8), M=8, BF16, 150 us.
def test_example3_moe_bf16_qwen3_30b():
    touched = roofline.expected_experts_touched(8, 128, 128, 8)
    assert touched == pytest.approx(50.516, rel=1e-4)  # 128 * (1 - (127/128)**64)
    flops, nbytes = roofline.moe_flops_bytes(8, 2048, 768, 128, 128, 8, True, "bf16")
    assert flops == 603_979_776  # 64 pairs * (2*2048*1536 + 2*768*2048)
    # 50.516 experts * 9,437,184 bytes + 8*2048*2 in + 8*2048*2 out
    assert nbytes == pytest.approx(476_797_655, rel=1e-6)
    row = roofline.annotate(moe_row(8, 2048, 768, 128, 128, 8, "bf16", 150.0), "NVIDIA H200")
    assert row.tflops == pytest.approx(4.027, rel=1e-3)
    assert row.tb_per_sec == pytest.approx(3.179, rel=1e-3)
    assert row.pct_peak_bandwidth == pytest.approx(66.22, rel=1e-3)


# Example 4: DeepSeek-V3 experts EP=8 (32 of 256 local, H=7168, I=2048, top_k=8), M=1, FP8.
def test_example4_moe_fp8_wide_ep():
    assert roofline.expected_local_pairs(1, 32, 256, 8) == 1.0
    flops, nbytes = roofline.moe_flops_bytes(1, 7168, 2048, 32, 256, 8, True, "fp8")
    assert flops == 88_080_384  # 1 pair * (2*7168*4096 + 2*2048*7168)
    # 0.98643 experts * 44,040,192 bytes + 7168 (fp8 in) + 14336 (bf16 out)
    assert nbytes == pytest.approx(43_464_265, rel=1e-6)


# Example 5: NVFP4 GEMM M=128, N=K=4096: 0.5625 byte per weight/activation value.
def test_example5_gemm_nvfp4_and_no_fp4_peak_on_hopper():
    assert roofline.gemm_flops_bytes(128, 4096, 4096, "nvfp4") == (4_294_967_296, 10_780_672)
    row = roofline.annotate(gemm_row(128, 4096, 4096, "nvfp4", 10.0), "NVIDIA H200")
    assert row.tflops == pytest.approx(429.5, rel=1e-3)
    assert row.pct_peak_tflops is None  # H200 has no FP4 tensor cores
    assert row.pct_peak_bandwidth is not None
    b200 = roofline.annotate(gemm_row(128, 4096, 4096, "nvfp4", 10.0), "NVIDIA B200")
    assert b200.pct_peak_tflops == pytest.approx(100 * 429.5 / 9000, rel=1e-3)


def test_non_gated_moe_uses_i_for_gemm1():
    gated, _ = roofline.moe_flops_bytes(4, 1024, 512, 8, 8, 2, True, "bf16")
    plain, _ = roofline.moe_flops_bytes(4, 1024, 512, 8, 8, 2, False, "bf16")
    assert gated == 8 * (2 * 1024 * 1024 + 2 * 512 * 1024)
    assert plain == 8 * (2 * 1024 * 512 + 2 * 512 * 1024)
    row = roofline.annotate(moe_row(4, 1024, 512, 8, 8, 2, "bf16", 10.0, "Relu2", gated=False), "NVIDIA H200")
    assert row.flops == plain


def test_the_row_gated_field_decides_gemm1_not_the_activation_name():
    """The case's decision travels on the row: a gated row counts 2*I whatever its activation is
    called; a row that does not say has no MoE FLOPs (unknown is never a default)."""
    gated, _ = roofline.moe_flops_bytes(4, 1024, 512, 8, 8, 2, True, "bf16")
    row = roofline.annotate(moe_row(4, 1024, 512, 8, 8, 2, "bf16", 10.0, "Relu2", gated=True), "NVIDIA H200")
    assert row.flops == gated
    assert roofline.row_flops_bytes(moe_row(4, 1024, 512, 8, 8, 2, "bf16", 10.0, gated=None)) is None


@pytest.mark.parametrize("activation, gated", [("Swiglu", True), ("", True), ("SwigluBias", True),
                                               ("Relu2", False), ("Silu", False), ("Identity", False)])
def test_moe_rows_of_results_without_gated_read_as_their_activation_says(activation, gated):
    raw = {k: v for k, v in dataclasses.asdict(moe_row(4, 1024, 512, 8, 8, 2, "bf16", 10.0, activation)).items()
           if k != "gated"}
    assert row_from_dict(raw).gated is gated
    assert row_from_dict({**raw, "gated": not gated}).gated is (not gated)
    assert row_from_dict({**raw, "kind": "gemm"}).gated is None


def test_no_time_keeps_flops_but_no_rates():
    row = roofline.annotate(gemm_row(8, 6144, 4096, "bf16", None), "NVIDIA H200")
    assert row.flops == 402_653_184 and row.bytes == 50_495_488
    assert row.tflops is None and row.tb_per_sec is None and row.pct_peak_tflops is None


def test_unknown_gpu_gives_rates_without_percentages():
    row = roofline.annotate(gemm_row(8, 6144, 4096, "bf16", 19.3), "Tesla T4")
    assert row.tflops == pytest.approx(20.86, rel=1e-3)
    assert row.pct_peak_tflops is None and row.pct_peak_bandwidth is None


def test_annotate_leaves_other_fields_alone():
    row = gemm_row(8, 6144, 4096, "bf16", 19.3, reason="x", timer="cupti")
    out = roofline.annotate(row, "NVIDIA H200")
    changed = {f.name for f in dataclasses.fields(Row) if getattr(row, f.name) != getattr(out, f.name)}
    assert changed == {"flops", "bytes", "tflops", "tb_per_sec", "pct_peak_tflops", "pct_peak_bandwidth"}


@pytest.mark.parametrize(
    "device_name, expected",
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA GB300", "GB300"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell"),
        ("nvidia h200", "H200 SXM"),
    ],
)
def test_gpu_name_matching(device_name, expected):
    assert roofline.find_peak(device_name).name == expected


@pytest.mark.parametrize("name", ["Tesla T4", "", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"])
def test_unknown_or_excluded_names(name):
    assert roofline.find_peak(name) is None


def test_capability_mismatch_rejects_name_match():
    assert roofline.find_peak("NVIDIA H200", (9, 0)) is not None
    assert roofline.find_peak("NVIDIA H200", (10, 0)) is None


def test_every_peak_has_a_source_and_dense_figures():
    for p in roofline.PEAKS:
        assert "datasheet" in p.source or "product brief" in p.source
        assert p.bf16_tflops > 0 and p.hbm_tb_per_sec > 0
        if p.fp8_tflops:
            assert p.fp8_tflops == pytest.approx(2 * p.bf16_tflops, rel=0.02)  # datasheets round
    # H200 SXM figures as on NVIDIA's datasheet (1,979 / 3,958 TF with sparsity, 4.8 TB/s)
    h200 = roofline.find_peak("NVIDIA H200")
    assert (h200.bf16_tflops, h200.fp8_tflops, h200.hbm_tb_per_sec) == (989.5, 1979.0, 4.8)


def test_peaks_table_markdown_lists_every_gpu():
    table = roofline.peaks_table_markdown()
    for p in roofline.PEAKS:
        assert f"| {p.name} |" in table
