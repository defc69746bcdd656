"""The backend table, capability skips and known shape limits; docs rendered from the tables."""

from __future__ import annotations

import doctest
import os

import pytest

from benchmark_model_kernels import backends as bk
from benchmark_model_kernels import docs_tables
from benchmark_model_kernels.cases import Case, GemmShape, MoeShape
from benchmark_model_kernels.plan import Routing

SM90, SM100 = (9, 0), (10, 0)


def spec(routine: str, backend: str, variant: str = "") -> bk.BackendSpec:
    found = [s for s in bk.BACKENDS if (s.routine, s.backend, s.variant) == (routine, backend, variant)]
    assert found
    return found[0]


def gemm_case(routine: str, backend: str, n: int, k: int, m: int = 8, dtype: str = "bf16",
              variant: str = "") -> Case:
    shape = GemmShape(m, n, k)
    return Case(case_id="t", kind="gemm", name="t", modules=(), layers=1, m=m, dtype=dtype,
                backend=backend, routine=routine, logical=shape, physical=shape, variant=variant)


def moe_case(routine: str, backend: str, activation: str = "Swiglu", gated: bool = True,
             routing: Routing | None = None, top_k: int = 8, dtype: str = "nvfp4") -> Case:
    shape = MoeShape(16, 2048, 768, 128, 128, top_k)
    return Case(case_id="t", kind="moe", name="t", modules=(), layers=1, m=16, dtype=dtype,
                backend=backend, routine=routine, logical=shape, physical=shape,
                activation=activation, gated=gated, routing=routing or Routing("renormalize"))


def test_table_rows_are_unique_and_well_formed():
    keys = [(s.kind, s.dtype, s.routine, s.backend, s.variant) for s in bk.BACKENDS]
    assert len(keys) == len(set(keys))
    for s in bk.BACKENDS:
        assert s.kind in ("gemm", "moe") and s.dtype in ("bf16", "fp8", "nvfp4")
        assert s.source, s
        assert bool(s.ccs) != (s.min_cc is not None), s  # exactly one way to say where it runs
        assert s.quant == "" or s.quant in bk.QUANT_FORMATS
        # Backend labels must be valid case-id parts.
        assert all(c.isalnum() or c in "._-" for c in s.backend + s.variant)


def test_runner_issue_routines_are_all_present():
    have = {(s.routine, s.backend, s.variant) for s in bk.BACKENDS}
    want = {("bmm_fp8", b, "") for b in ("cudnn", "cublas", "cutlass")}
    want |= {("mm_fp8", "trtllm_low_latency", "")}
    want |= {("mm_fp4", b, "") for b in ("cudnn", "cutlass", "cute-dsl", "trtllm")}
    want |= {("cutlass_fused_moe", "cutlass", ""), ("cutlass_fused_moe", "cutlass", "quantized_input"),
             ("trtllm_fp8_per_tensor_scale_moe", "trtllm", ""),
             ("trtllm_fp4_block_scale_moe", "trtllm", ""),
             ("cute_dsl_fp4_block_scale_moe", "cute-dsl", ""),
             ("torch.linear", "torch", ""), ("torch._scaled_mm", "torch", "per_tensor"),
             ("torch._scaled_mm", "torch", "per_token"), ("torch._grouped_mm", "torch", ""),
             ("torch._scaled_grouped_mm", "torch", "")}
    assert want <= have
    assert not any(s.backend == "torch" and s.dtype == "nvfp4" for s in bk.BACKENDS)
    assert {s.dtype for s in bk.BACKENDS if s.routine == "cutlass_fused_moe"} == {
        "bf16", "fp8", "nvfp4"}


@pytest.mark.parametrize("routine,backend,variant", [
    ("mm_bf16", "cudnn", ""), ("mm_bf16", "cublaslt", ""), ("mm_bf16", "tinygemm", ""),
    ("mm_bf16", "cutile", ""), ("bmm_fp8", "cudnn", ""), ("bmm_fp8", "cublas", ""),
    ("torch.linear", "torch", ""), ("torch._scaled_mm", "torch", "per_tensor"),
    ("torch._grouped_mm", "torch", ""), ("torch._scaled_grouped_mm", "torch", "")])
def test_runs_on_h200(routine, backend, variant):
    assert bk.capability_reason(spec(routine, backend, variant), SM90) == ""


@pytest.mark.parametrize("routine,backend,variant", [
    ("mm_bf16", "cutlass", ""), ("mm_bf16", "tgv", ""), ("bmm_fp8", "cutlass", ""),
    ("mm_fp8", "trtllm_low_latency", ""), ("mm_fp4", "cudnn", ""), ("mm_fp4", "cutlass", ""),
    ("mm_fp4", "cute-dsl", ""), ("mm_fp4", "trtllm", ""), ("cutlass_fused_moe", "cutlass", ""),
    ("cutlass_fused_moe", "cutlass", "quantized_input"),
    ("trtllm_fp8_per_tensor_scale_moe", "trtllm", ""), ("trtllm_fp4_block_scale_moe", "trtllm", ""),
    ("cute_dsl_fp4_block_scale_moe", "cute-dsl", "")])
def test_unsupported_on_h200_but_runs_on_b200(routine, backend, variant):
    s = spec(routine, backend, variant)
    reason = bk.capability_reason(s, SM90)
    assert reason.startswith(f"{routine} {backend}") and "this GPU is sm_90" in reason
    assert s.source in reason
    assert bk.capability_reason(s, SM100) == ""


def test_h200_facts_in_reasons():
    moe_reason = bk.capability_reason(spec("cutlass_fused_moe", "cutlass"), SM90)
    assert "driver's table" in moe_reason and "SM90 build" in moe_reason
    assert "Blackwell" in bk.capability_reason(spec("mm_fp8", "trtllm_low_latency"), SM90)
    assert bk.capability_reason(spec("mm_fp4", "cutlass"), SM90) == (
        "mm_fp4 cutlass needs sm_100/103/107/110/120/121; this GPU is sm_90 "
        "(flashinfer/gemm/gemm_base.py:5726)")


def test_torch_capabilities():
    assert bk.capability_reason(spec("torch._scaled_mm", "torch", "per_token"), (8, 0))
    assert not bk.capability_reason(spec("torch._scaled_mm", "torch", "per_token"), (8, 9))
    grouped_fp8 = spec("torch._scaled_grouped_mm", "torch")
    assert bk.capability_reason(grouped_fp8, (12, 0))  # SM 9.0 and 10.x only
    assert not bk.capability_reason(grouped_fp8, (10, 0))
    assert not bk.capability_reason(spec("torch._grouped_mm", "torch"), (8, 0))


def test_unknown_capability_skips_nothing():
    assert all(bk.capability_reason(s, None) == "" for s in bk.BACKENDS)


@pytest.mark.parametrize("case,expect", [
    (gemm_case("mm_bf16", "tinygemm", n=1000, k=4096), "n % 16"),
    (gemm_case("mm_bf16", "tinygemm", n=1024, k=1000), "k % 64"),
    (gemm_case("mm_fp8", "trtllm_low_latency", 4096, 1000, dtype="fp8"), "k % 128"),
    (gemm_case("mm_fp8", "trtllm_low_latency", 4016, 4096, dtype="fp8"), "n % 32"),
    (gemm_case("mm_fp4", "trtllm", 4000, 4096, dtype="nvfp4"), "n % 128"),
    (gemm_case("bmm_fp8", "cublas", 1000, 4104, dtype="fp8"), "16-byte"),
    (gemm_case("torch._scaled_mm", "torch", 4096, 1000, dtype="fp8", variant="per_token"),
     "16-byte"),
])
def test_gemm_shape_limits(case, expect):
    assert expect in bk.shape_limit(case)


def test_gemm_shape_limits_pass_aligned_shapes():
    for routine, backend in (("mm_bf16", "tinygemm"), ("mm_fp8", "trtllm_low_latency"),
                             ("mm_fp4", "trtllm"), ("bmm_fp8", "cublas"), ("bmm_fp8", "cudnn")):
        assert bk.shape_limit(gemm_case(routine, backend, 4096, 4096)) == ""
    # cudnn bmm_fp8 has no known alignment limit.
    assert bk.shape_limit(gemm_case("bmm_fp8", "cudnn", 1000, 1000, dtype="fp8")) == ""


def test_moe_activation_and_routing_limits():
    assert "Swiglu only" in bk.shape_limit(moe_case("cute_dsl_fp4_block_scale_moe", "cute-dsl",
                                                    activation="Geglu"))
    relu2 = moe_case("trtllm_fp4_block_scale_moe", "trtllm", activation="Relu2", gated=False)
    assert "non-gated Relu2" in bk.shape_limit(relu2)
    bias = moe_case("trtllm_fp8_per_tensor_scale_moe", "trtllm", activation="SwigluBias")
    assert "SwigluBias" in bk.shape_limit(bias)
    odd = moe_case("trtllm_fp4_block_scale_moe", "trtllm", routing=Routing("sigmoid_renorm"))
    assert "'sigmoid_renorm'" in bk.shape_limit(odd)
    llama = moe_case("trtllm_fp8_per_tensor_scale_moe", "trtllm", routing=Routing("llama4"))
    assert "top_k == 1" in bk.shape_limit(llama)
    ok_llama = moe_case("trtllm_fp8_per_tensor_scale_moe", "trtllm", routing=Routing("llama4"),
                        top_k=1)
    assert bk.shape_limit(ok_llama) == ""
    ds = Routing("deepseek_v3", n_group=8, topk_group=4, routed_scaling_factor=2.5,
                 use_routing_bias=True)
    assert bk.shape_limit(moe_case("trtllm_fp4_block_scale_moe", "trtllm", routing=ds)) == ""
    # Routines that ignore routing take any method and any cutlass activation.
    assert bk.shape_limit(moe_case("cutlass_fused_moe", "cutlass", activation="Relu2",
                                   gated=False, routing=Routing("sigmoid_renorm"))) == ""


def test_activation_quant_formats():
    small = gemm_case("mm_fp4", "trtllm", 4096, 4096, m=32, dtype="nvfp4")
    large = gemm_case("mm_fp4", "trtllm", 4096, 4096, m=33, dtype="nvfp4")
    assert bk.activation_quant(small) == "nvfp4_8x4"
    assert bk.activation_quant(large) == "nvfp4_128x4"
    assert bk.activation_quant(gemm_case("mm_fp4", "cudnn", 4096, 4096, m=1,
                                         dtype="nvfp4")) == "nvfp4_128x4"
    per_token = gemm_case("torch._scaled_mm", "torch", 4096, 4096, dtype="fp8", variant="per_token")
    assert bk.activation_quant(per_token) == "fp8_per_token_dynamic"
    assert bk.activation_quant(gemm_case("mm_bf16", "cudnn", 64, 64)) == ""
    assert bk.activation_quant(moe_case("trtllm_fp4_block_scale_moe", "trtllm")) == "nvfp4_linear"


def test_doctests():
    assert doctest.testmod(bk).failed == 0


def test_committed_references_match_code_tables():
    for fname, blocks in docs_tables.BLOCKS.items():
        path = os.path.join(docs_tables.REFERENCES, fname)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name, render in blocks.items():
            assert docs_tables.generated_block(text, name) == render() + "\n", (fname, name)
    assert docs_tables.stale_files() == []


def test_docs_check_detects_drift(tmp_path):
    for fname, blocks in docs_tables.BLOCKS.items():
        with open(os.path.join(docs_tables.REFERENCES, fname), encoding="utf-8") as f:
            text = f.read()
        name = next(iter(blocks))
        broken = text.replace(f"<!-- END GENERATED: {name} -->",
                              f"| stale row |\n<!-- END GENERATED: {name} -->")
        (tmp_path / fname).write_text(broken, encoding="utf-8")
    assert len(docs_tables.stale_files(str(tmp_path))) == len(docs_tables.BLOCKS)
