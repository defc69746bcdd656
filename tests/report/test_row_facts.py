"""row_facts.py: rows written before `scheme`, `vllm_default` and `num_tokens` existed get them by
today's rules; a recorded value always wins; the checkpoint's FP8 scheme and its defaults."""

from __future__ import annotations

import pytest
from helpers_report import fixture, gemm_row, moe_row, results_of

from benchmark_model_kernels.core.plan_schema import Plan
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.plan_entries import plan_of
from benchmark_model_kernels.report.row_facts import checkpoint_scheme, rows_with_facts


def _facts(rows: list[dict], **kw) -> list[tuple[str, str, int | None]]:
    results = results_of(rows, **kw)
    return [(r.scheme, r.vllm_default, r.num_tokens) for r in rows_with_facts(results, plan_of(results))]


def test_old_rows_get_scheme_and_vllm_default_from_the_backend_table_and_dispatch_rules():
    rows = [
        gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 10.0),       # F.linear: vLLM's own
        gemm_row("qkv_proj", 1, "bf16", "cudnn", "mm_bf16", 8.0),             # a comparison
        gemm_row("qkv_proj", 1, "fp8", "cudnn", "bmm_fp8", 5.0),              # per-tensor scales
        gemm_row("qkv_proj", 1, "fp8", "torch", "torch._scaled_mm", 6.0, "per_token"),
        gemm_row("qkv_proj", 1, "fp8", "triton", "triton.block_fp8_mm", 7.0, "block128"),
        moe_row(1, "bf16", "triton", "triton.fused_moe", 30.0),               # vLLM's design (SM90)
        moe_row(1, "bf16", "torch", "torch._grouped_mm", 90.0),               # the torch composite
        moe_row(1, "fp8", "torch", "torch._scaled_grouped_mm", 80.0),         # per-token scales
        moe_row(1, "fp8", "triton", "triton.fused_moe", 25.0, "block128"),
    ]
    assert _facts(rows) == [
        ("", "same", None), ("", "", None), ("per_tensor", "", None), ("per_token", "", None),
        ("block128", "", None), ("", "design", 1), ("", "", 1), ("per_token", "", 1),
        ("block128", "design", 1),
    ]


def test_derivation_follows_the_recorded_gpu_and_expert_parallelism():
    rows = [gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 10.0),
            moe_row(8, "fp8", "triton", "triton.fused_moe", 25.0, "block128")]
    # No compute capability recorded: no dispatch table applies, nothing is called vLLM's.
    assert [f[1] for f in _facts(rows, cc=None)] == ["", ""]
    # Under EP vLLM's SM90 block-FP8 MoE is FlashInfer CUTLASS, which no row times; an old MoE row
    # ran num_tokens = M (it predates the EP/TP token factor).
    assert _facts(rows, tp=1, ep=4)[1] == ("block128", "", 8)


def test_recorded_values_are_never_overwritten():
    rows = [gemm_row("qkv_proj", 1, "bf16", "torch", "torch.linear", 10.0, scheme="", vllm_default=""),
            gemm_row("qkv_proj", 1, "fp8", "cudnn", "bmm_fp8", 5.0, scheme="per_token", vllm_default="same"),
            moe_row(1, "bf16", "triton", "triton.fused_moe", 30.0, num_tokens=8)]
    assert _facts(rows) == [("", "", None), ("per_token", "same", None), ("", "design", 8)]


def test_the_hand_made_fixture_reads_as_per_tensor_fp8():
    a = Analysis(fixture("tiny_mixed"), "tiny")
    assert {r.scheme for r in a.rows if r.dtype == "fp8"} == {"per_tensor"}  # bmm_fp8 cudnn/cublas
    assert a.recipes == ["bf16", "fp8.per_tensor", "nvfp4"]


@pytest.mark.parametrize("model,scheme,source", [
    ({}, "per_tensor", "not recorded by this run"),  # a plan written before the field
    ({"fp8_scheme": "block128", "fp8_scheme_source": "quant_method=fp8, weight_block_size=[128, 128]"},
     "block128", "quant_method=fp8, weight_block_size=[128, 128]"),
    ({"fp8_scheme": "", "fp8_scheme_source": "quant_method=awq: the checkpoint is not FP8"},
     "per_tensor", "quant_method=awq: the checkpoint is not FP8; the FP8 lines assume vLLM's online"),
])
def test_checkpoint_scheme_of_the_plan(model, scheme, source):
    info = dict(name="m", source="s", model_type="t", architecture="A", **model)
    plan = Plan.from_dict(results_of([], model=info)["plan"])
    got = checkpoint_scheme(plan)
    assert got.scheme == scheme and got.source.startswith(source) and got.recipe == f"fp8.{scheme}"
