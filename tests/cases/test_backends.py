"""The backend table, capability skips and known shape limits; docs rendered from the tables."""

from __future__ import annotations

import doctest
import os

import pytest

from benchmark_model_kernels import docs_tables
from benchmark_model_kernels.cases import backends as bk
from benchmark_model_kernels.cases import kernel_limits as kl
from benchmark_model_kernels.core.case_schema import Case, MoeShape
from benchmark_model_kernels.core.plan_schema import Routing
from builders import gemm_case, moe_case

SM90, SM100 = (9, 0), (10, 0)


def spec(routine: str, backend: str, variant: str = "") -> bk.BackendSpec:
    found = [s for s in bk.BACKENDS if (s.routine, s.backend, s.variant) == (routine, backend, variant)]
    assert found
    return found[0]


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
    ("bmm_fp8", "cudnn", ""), ("bmm_fp8", "cublas", ""),
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
    assert "driver's table" in moe_reason and "SM90 CUTLASS fused MoE" in moe_reason
    assert "flashinfer-jit-cache" in moe_reason and "about an hour" in moe_reason
    assert "Blackwell" in bk.capability_reason(spec("mm_fp8", "trtllm_low_latency"), SM90)
    assert bk.capability_reason(spec("mm_fp4", "cutlass"), SM90) == (
        "mm_fp4 cutlass needs sm_100/103/107/110/120/121; this GPU is sm_90 "
        "(hand table: flashinfer/gemm/gemm_base.py:5726)")


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
    (gemm_case(1000, k=4096, routine="mm_bf16", backend="tinygemm"), "n % 16"),
    (gemm_case(1024, k=1000, routine="mm_bf16", backend="tinygemm"), "k % 64"),
    (gemm_case(4096, k=1000, routine="mm_fp8", backend="trtllm_low_latency", dtype="fp8"), "k % 128"),
    (gemm_case(4016, k=4096, routine="mm_fp8", backend="trtllm_low_latency", dtype="fp8"), "n % 32"),
    (gemm_case(4000, k=4096, routine="mm_fp4", backend="trtllm", dtype="nvfp4"), "n % 128"),
    (gemm_case(1000, k=4104, routine="bmm_fp8", backend="cublas", dtype="fp8"), "16-byte"),
    (gemm_case(4096, k=1000, routine="torch._scaled_mm", backend="torch", dtype="fp8", variant="per_token"),
     "16-byte"),
])
def test_gemm_shape_limits(case, expect):
    assert expect in kl.shape_limit(case)


def test_gemm_shape_limits_pass_aligned_shapes():
    for routine, backend in (("mm_bf16", "tinygemm"), ("mm_fp8", "trtllm_low_latency"),
                             ("mm_fp4", "trtllm"), ("bmm_fp8", "cublas"), ("bmm_fp8", "cudnn")):
        assert kl.shape_limit(gemm_case(4096, k=4096, routine=routine, backend=backend)) == ""
    # cudnn bmm_fp8 has no known alignment limit.
    assert kl.shape_limit(gemm_case(1000, k=1000, routine="bmm_fp8", backend="cudnn", dtype="fp8")) == ""


def test_moe_activation_and_routing_limits():
    assert "Swiglu only" in kl.shape_limit(moe_case(m=16, routine="cute_dsl_fp4_block_scale_moe", backend="cute-dsl",
                                                    dtype="nvfp4", activation="Geglu"))
    # Non-gated Relu2 runs on both trtllm routines (their launchers never check the [E, 2I, H]
    # weights the driver allocates); other non-gated activations have no trtllm kernel.
    for routine, dtype in (("trtllm_fp4_block_scale_moe", "nvfp4"),
                           ("trtllm_fp8_per_tensor_scale_moe", "fp8")):
        relu2 = moe_case(m=16, routine=routine, backend="trtllm", dtype=dtype, activation="Relu2", gated=False)
        assert kl.shape_limit(relu2) == ""
        relu = moe_case(m=16, routine=routine, backend="trtllm", dtype=dtype, activation="Relu", gated=False)
        assert "non-gated activations Relu2, Identity only" in kl.shape_limit(relu)
    bias = moe_case(m=16, routine="trtllm_fp8_per_tensor_scale_moe", backend="trtllm", dtype="nvfp4",
                    activation="SwigluBias")
    assert "SwigluBias" in kl.shape_limit(bias)
    odd = moe_case(m=16, routine="trtllm_fp4_block_scale_moe", backend="trtllm", dtype="nvfp4",
                   routing=Routing("sigmoid_renorm"))
    assert "'sigmoid_renorm'" in kl.shape_limit(odd)
    llama = moe_case(m=16, routine="trtllm_fp8_per_tensor_scale_moe", backend="trtllm", dtype="nvfp4",
                     routing=Routing("llama4"))
    assert "top_k == 1" in kl.shape_limit(llama)
    ok_llama = moe_case(m=16, top_k=1, routine="trtllm_fp8_per_tensor_scale_moe", backend="trtllm", dtype="nvfp4",
                        routing=Routing("llama4"))
    assert kl.shape_limit(ok_llama) == ""
    ds = Routing("deepseek_v3", n_group=8, topk_group=4, routed_scaling_factor=2.5,
                 use_routing_bias=True)
    assert kl.shape_limit(moe_case(m=16, routine="trtllm_fp4_block_scale_moe", backend="trtllm", dtype="nvfp4",
                                   routing=ds)) == ""
    # Routines that ignore routing take any method and any cutlass activation.
    assert kl.shape_limit(moe_case(m=16, routine="cutlass_fused_moe", backend="cutlass", dtype="nvfp4",
                                   activation="Relu2", gated=False, routing=Routing("sigmoid_renorm"))) == ""


def test_activation_quant_formats():
    trtllm_fp4 = spec("mm_fp4", "trtllm")
    assert bk.activation_quant(trtllm_fp4, 32) == "nvfp4_8x4"
    assert bk.activation_quant(trtllm_fp4, 33) == "nvfp4_128x4"
    assert bk.activation_quant(spec("mm_fp4", "cudnn"), 1) == "nvfp4_128x4"
    assert bk.activation_quant(spec("torch._scaled_mm", "torch", "per_token"), 8) == "fp8_per_token_dynamic"
    assert bk.activation_quant(spec("mm_bf16", "cudnn"), 8) == ""
    assert bk.activation_quant(spec("trtllm_fp4_block_scale_moe", "trtllm"), 16) == "nvfp4_linear"
    assert bk.activation_quant(spec("cutlass_fused_moe", "cutlass"), 16) == ""  # quantizes inside


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


def moe_routing_case(routine: str, routing: Routing, experts: int, top_k: int) -> Case:
    shape = MoeShape(16, 7168, 256, experts, experts, top_k)
    return Case(case_id="t", kind="moe", name="t", modules=(), layers=1, m=16, dtype="nvfp4",
                backend="trtllm", routine=routine, logical=shape, physical=shape,
                activation="Swiglu", routing=routing)


def ds(n_group: int | None, topk_group: int | None) -> Routing:
    return Routing("deepseek_v3", n_group=n_group, topk_group=topk_group,
                   routed_scaling_factor=2.5, use_routing_bias=True, scoring_func="sigmoid")


@pytest.mark.parametrize("routine", sorted(kl.ROUTING_IN_KERNEL))
@pytest.mark.parametrize("routing,experts,top_k,expect", [
    # DeepSeek-V3/R1: E=256, 8 groups, 4 kept, k=8 -> runs.
    (ds(8, 4), 256, 8, ""),
    # Kimi-K2 (E=384) and GLM-4.5 (E=160) route DeepSeek-style without groups: the driver's own
    # fused_topk_deepseek (outside the timed call) rejects topk_group * n_group < top_k.
    (ds(1, 1), 384, 8, "fused_routing_dsv3.py:65-69"),
    (ds(1, 1), 160, 8, "ungrouped DeepSeek routing"),
    (ds(None, None), 160, 8, "n_group=1"),  # no groups in the config: passed as 1/1
    (ds(1, 1), 512, 1, "E <= 384"),
    (ds(8, 4), 256, 10, "top_k <= 8"),
    (ds(8, 4), 512, 8, "E / n_group <= 32"),
    (ds(16, 4), 512, 8, "n_group <= 8"),
    (ds(8, 8), 256, 8, "E / n_group * topk_group <= 128"),
    (ds(8, 5), 128, 8, "topk_group <= 4"),
    (ds(4, 6), 128, 8, "topk_group <= n_group"),
    (Routing("llama4", apply_router_weight_on_input=True), 128, 1, ""),
    (Routing("llama4", apply_router_weight_on_input=True), 256, 1, "E <= 128"),
    (Routing("renormalize"), 512, 10, ""),  # Qwen3-Next
    (Routing("renormalize"), 4096, 8, "E <= 2048"),
    (Routing("renormalize_naive"), 128, 40, "top_k <= 32"),
])
def test_trtllm_routing_limits_known_before_launch(routine, routing, experts, top_k, expect):
    reason = kl.shape_limit(moe_routing_case(routine, routing, experts, top_k))
    if expect:
        assert expect in reason and reason.startswith(routine)
    else:
        assert reason == ""


def test_routing_limits_do_not_touch_routines_that_ignore_routing():
    for routine, backend in (("cutlass_fused_moe", "cutlass"),
                             ("cute_dsl_fp4_block_scale_moe", "cute-dsl")):
        case = moe_routing_case(routine, ds(1, 1), 384, 8)
        assert kl.shape_limit(Case(**{**case.__dict__, "backend": backend})) == ""


@pytest.mark.parametrize("dtype,dim,value,multiple", [
    ("bf16", "hidden", 2052, 8), ("bf16", "intermediate", 100, 8),
    ("fp8", "hidden", 2056, 16), ("fp8", "intermediate", 104, 16),
    ("nvfp4", "hidden", 2056, 16)])
def test_cutlass_moe_tma_alignment(dtype, dim, value, multiple):
    dims = {"hidden": 2048, "intermediate": 128, dim: value}
    shape = MoeShape(16, dims["hidden"], dims["intermediate"], 128, 128, 8)
    case = Case(case_id="t", kind="moe", name="t", modules=(), layers=1, m=16, dtype=dtype,
                backend="cutlass", routine="cutlass_fused_moe", logical=shape, physical=shape,
                activation="Swiglu", routing=Routing("renormalize"))
    reason = kl.shape_limit(case)
    assert f"{dim} % {multiple} == 0" in reason and "binding.cu" in reason
    aligned = Case(**{**case.__dict__, "physical": MoeShape(16, 2048, 128, 128, 128, 8)})
    assert kl.shape_limit(aligned) == ""


def test_mm_fp8_runs_on_the_sm100_family_including_b300():
    s = spec("mm_fp8", "trtllm_low_latency")
    for cc in ((10, 0), (10, 3), (10, 7)):
        assert bk.capability_reason(s, cc) == ""
    for cc in ((9, 0), (11, 0), (12, 0)):
        assert "Blackwell-only" in bk.capability_reason(s, cc)


#: Audited by hand against FlashInfer v0.6.17 (cited file:line in BACKENDS' sources): the
#: library's @supported_compute_capability lists for GEMMs, the driver's
#: routine_cc_to_supported_backends for MoE routines (keys absent there, e.g. 11.0, get nothing).
AUDITED_CCS = {
    ("mm_bf16", "cudnn"): {80, 86, 87, 89, 90, 100, 103, 110, 120, 121},
    ("mm_bf16", "cublaslt"): {80, 86, 87, 89, 90, 100, 103, 110, 120, 121},
    ("mm_bf16", "cutlass"): {100, 103, 107},
    ("mm_bf16", "tgv"): {100, 103},
    ("mm_bf16", "tinygemm"): {90, 100, 103, 110, 120, 121},
    ("mm_bf16", "cutile"): {90, 100, 103, 110, 120, 121},
    ("bmm_fp8", "cudnn"): {89, 90, 100, 103, 107, 110, 120, 121},
    ("bmm_fp8", "cublas"): {89, 90, 100, 103, 107, 110, 120, 121},
    ("bmm_fp8", "cutlass"): {100, 103, 107, 110, 120, 121},
    ("mm_fp8", "trtllm_low_latency"): {100, 103, 107},
    ("gemm_fp8_nt_groupwise", "cutlass"): {100, 103, 107},
    ("trtllm_fp8_block_scale_moe", "trtllm"): {100, 103, 107},
    ("mm_fp4", "cudnn"): {100, 103, 107, 110, 120, 121},
    ("mm_fp4", "cutlass"): {100, 103, 107, 110, 120, 121},
    ("mm_fp4", "trtllm"): {100, 103, 107},
    ("mm_fp4", "cute-dsl"): {100, 103},
    ("cutlass_fused_moe", "cutlass"): {100, 103, 107, 120, 121},
    ("trtllm_fp8_per_tensor_scale_moe", "trtllm"): {100, 103, 107},
    ("trtllm_fp4_block_scale_moe", "trtllm"): {100, 103, 107},
    ("cute_dsl_fp4_block_scale_moe", "cute-dsl"): {100, 103},
}


def test_driver_rows_match_the_audited_capability_lists():
    driver_rows = [s for s in bk.BACKENDS if s.driver]
    assert {(s.routine, s.backend) for s in driver_rows} == set(AUDITED_CCS)
    for s in driver_rows:
        assert {a * 10 + b for a, b in s.ccs} == AUDITED_CCS[(s.routine, s.backend)], s


@pytest.mark.parametrize("cc,runs", [
    ((10, 3), {"mm_fp8", "mm_fp4", "cutlass_fused_moe", "trtllm_fp4_block_scale_moe",
               "cute_dsl_fp4_block_scale_moe"}),  # B300: everything Blackwell
    ((11, 0), {"mm_fp4"}),  # Thor: cudnn/cutlass FP4 GEMMs, no MoE routine in the driver table
    ((12, 0), {"mm_fp4", "cutlass_fused_moe"}),  # RTX Blackwell: no trtllm-gen, no cute-dsl
])
def test_other_blackwell_parts(cc, runs):
    ok = {s.routine for s in bk.BACKENDS if s.driver and s.dtype == "nvfp4"
          and not bk.capability_reason(s, cc)}
    ok |= {s.routine for s in bk.BACKENDS if s.routine == "mm_fp8"
           and not bk.capability_reason(s, cc)}
    assert ok == runs


def test_cutile_on_hopper_is_a_toolchain_limit():
    """tileiras has no sm_90 target (measured on the H200): unsupported before launch, with why."""
    cutile = next(s for s in bk.BACKENDS if s.backend == "cutile")
    why = bk.capability_reason(cutile, (9, 0))
    assert "tileiras" in why and "sm_90" in why
    assert bk.capability_reason(cutile, (10, 0)) == ""
    assert bk.capability_reason(cutile, None) == ""
