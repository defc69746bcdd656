"""build_cases / plan_from_shapes: ids, order, counts, twins, filters, EP and routing flags, and
every generated argv parsed by FlashInfer v0.6.17's real driver argparse."""

from __future__ import annotations

import argparse
import glob
import importlib.abc
import importlib.machinery
import os
import sys
import types
import zipfile
from dataclasses import replace

import pytest

from benchmark_model_kernels.cases.build import build_cases, plan_from_shapes
from benchmark_model_kernels.core.case_schema import DTYPES, Case
from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.plan_schema import GemmEntry, ModelInfo, MoeEntry, Plan, Routing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLE = os.path.join(ROOT, ".devbundle")
DRIVER_DIR = os.path.join(BUNDLE, "flashinfer", "benchmarks")

SM90, SM100 = (9, 0), (10, 0)
DEEPSEEK = Routing("deepseek_v3", n_group=8, topk_group=4, routed_scaling_factor=2.5,
                   use_routing_bias=True, scoring_func="sigmoid")
TIMING_FLAGS = {"--num_iters", "-n", "--dry_run_iters", "-d", "--no_cuda_graph", "--autotune",
                "--autotune_cache", "--output_path", "-v", "--verbose", "--refcheck"}


def moe_entry(**kw) -> MoeEntry:
    base = dict(name="experts", modules=("model.layers.*.mlp.experts",), hidden=2048,
                intermediate=96, experts=128, global_experts=128, top_k=8, activation="Swiglu",
                routing=Routing("renormalize"), layers=48)
    base.update(kw)
    return MoeEntry(**base)


def small_plan(**moe_kw) -> Plan:
    """Qwen3-30B-A3B at TP8: one dense GEMM and the routed experts (I_r=96)."""
    gemm = GemmEntry(name="qkv_proj", modules=("model.layers.*.self_attn.qkv_proj",), n=768,
                     k=2048, layers=48, parallel="column")
    info = ModelInfo(name="qwen3-30b-a3b", source="bundled", model_type="qwen3_moe",
                     architecture="Qwen3MoeForCausalLM")
    return Plan(model=info, tp=8, ep=1, gemms=(gemm,), moe=(moe_entry(**moe_kw),))


def by_id(cases: list[Case]) -> dict[str, Case]:
    return {c.case_id: c for c in cases}


def flag(case: Case, name: str) -> str | None:
    args = list(case.driver_args)
    return args[args.index(name) + 1] if name in args else None


# ---------------------------------------------------------------------------------------------
# Counts, ids, order

def test_case_count_and_ids_for_small_plan():
    cases = build_cases(small_plan(), [1, 64], search_moe_tiles=True)
    # Per M: GEMM bf16 7 + fp8 (8 kernels with the triton and FlashInfer block128 ones, each
    # with a twin) 16 + nvfp4 (4 + 4 twins) 8 = 31; MoE bf16 4 (triton with vLLM's tiles and
    # tuned, torch, cutlass) + fp8 (10 kernels: triton per_tensor/per_token/block128 with vLLM's
    # tiles and tuned, torch, cutlass, trtllm per-tensor and block128, each with a twin) 20 +
    # nvfp4 (4 kernels, 3 twins) 7 = 31.
    assert len(cases) == 2 * (31 + 31)
    # Without --search_moe_tiles the tuned twins (bf16 1, fp8 3 each with a +quant twin) are left out
    # and nothing else is.
    default = [c.case_id for c in build_cases(small_plan(), [1, 64])]
    left_out = [c.case_id for c in cases if c.case_id not in default]
    assert len(default) == len(cases) - 2 * 7 and len(left_out) == 2 * 7
    assert all(c.variant.endswith("tuned") for c in cases if c.case_id in left_out)
    assert default == [c.case_id for c in cases if c.case_id not in left_out]
    ids = [c.case_id for c in cases]
    assert len(set(ids)) == len(ids)
    assert ids[:8] == [
        "gemm.qkv_proj.m1.bf16.torch", "gemm.qkv_proj.m1.bf16.cudnn", "gemm.qkv_proj.m1.bf16.cublaslt",
        "gemm.qkv_proj.m1.bf16.cutlass", "gemm.qkv_proj.m1.bf16.tgv",
        "gemm.qkv_proj.m1.bf16.tinygemm", "gemm.qkv_proj.m1.bf16.cutile",
        "gemm.qkv_proj.m1.fp8.torch.per_tensor"]
    assert "moe.experts.m64.nvfp4.cutlass.quantized_input.q" in ids
    assert "moe.experts.m1.fp8.trtllm.q" in ids
    for c in cases:
        assert all(ch.isalnum() or ch in "._-" for ch in c.case_id), c.case_id


def test_order_plan_then_m_then_dtype_then_backend():
    cases = build_cases(small_plan(), [64, 1], dtypes=("fp8", "bf16"))
    kinds = [c.kind for c in cases]
    assert kinds == sorted(kinds, key=lambda k: k != "gemm")  # all GEMMs first
    gemm = [c for c in cases if c.kind == "gemm"]
    assert [c.m for c in gemm] == sorted([c.m for c in gemm], key=lambda m: m != 64)  # given order
    first_m = [c for c in gemm if c.m == 64]
    assert [c.dtype for c in first_m] == sorted([c.dtype for c in first_m],
                                                key=lambda d: d != "fp8")


def test_fields_copied_from_plan():
    plan = small_plan()
    c = by_id(build_cases(plan, [16]))["moe.experts.m16.fp8.cutlass"]
    e = plan.moe[0]
    assert (c.kind, c.name, c.modules, c.layers, c.m, c.dtype, c.routine) == (
        "moe", "experts", e.modules, 48, 16, "fp8", "cutlass_fused_moe")
    assert (c.activation, c.gated, c.routing) == ("Swiglu", True, e.routing)
    assert (c.logical.hidden, c.logical.intermediate, c.logical.experts, c.logical.top_k) == (
        2048, 96, 128, 8)
    g = by_id(build_cases(plan, [16]))["gemm.qkv_proj.m16.bf16.cudnn"]
    assert (g.logical.m, g.logical.n, g.logical.k, g.layers) == (16, 768, 2048, 48)


# ---------------------------------------------------------------------------------------------
# with_quant twins

def test_with_quant_twins_follow_their_base_case():
    cases = build_cases(small_plan(), [8])
    for i, c in enumerate(cases):
        if c.with_quant:
            base = cases[i - 1]
            assert c.case_id == base.case_id + ".q" and c.base_case_id == base.case_id
            assert replace(c, case_id=base.case_id, with_quant=False) == base


def test_twins_exactly_where_kernels_take_quantized_activations():
    cases = build_cases(small_plan(), [8], search_moe_tiles=True)
    twins = {(c.routine, c.dtype, c.variant) for c in cases if c.with_quant}
    assert twins == {
        ("torch._scaled_mm", "fp8", "per_tensor"), ("torch._scaled_mm", "fp8", "per_token"),
        ("bmm_fp8", "fp8", ""), ("mm_fp8", "fp8", ""), ("mm_fp4", "nvfp4", ""),
        ("torch._scaled_grouped_mm", "fp8", ""), ("cutlass_fused_moe", "fp8", ""),
        ("cutlass_fused_moe", "nvfp4", "quantized_input"),
        ("trtllm_fp8_per_tensor_scale_moe", "fp8", ""), ("trtllm_fp4_block_scale_moe", "nvfp4", ""),
        ("cute_dsl_fp4_block_scale_moe", "nvfp4", ""),
        ("triton.block_fp8_mm", "fp8", "block128"), ("triton.fused_moe", "fp8", "per_tensor"),
        ("triton.fused_moe", "fp8", "per_token"), ("triton.fused_moe", "fp8", "block128"),
        ("triton.fused_moe", "fp8", "per_tensor-tuned"), ("triton.fused_moe", "fp8", "per_token-tuned"),
        ("triton.fused_moe", "fp8", "block128-tuned"),
        ("gemm_fp8_nt_groupwise", "fp8", "block128"), ("trtllm_fp8_block_scale_moe", "fp8", "block128")}
    assert not any(c.with_quant for c in cases if c.dtype == "bf16")
    ids = by_id(cases)
    assert "moe.experts.m8.fp8.cutlass.q" in ids  # fp8 cutlass quantizes x outside the timed call
    assert "moe.experts.m8.nvfp4.cutlass.q" not in ids  # BF16 input, quantized inside the kernel
    assert "moe.experts.m8.fp8.torch.q" in ids  # the input's per-token quantization, timed apart


# ---------------------------------------------------------------------------------------------
# Filters and errors

def test_backend_filter():
    cases = build_cases(small_plan(), [8], backends=["cudnn", "torch"])
    assert {c.backend for c in cases} == {"cudnn", "torch"}
    assert {c.routine for c in cases if c.backend == "torch"} == {
        "torch.linear", "torch._scaled_mm", "torch._grouped_mm", "torch._scaled_grouped_mm"}


def test_unknown_backend_is_a_usage_error():
    with pytest.raises(UsageError) as err:
        build_cases(small_plan(), [8], backends=["cudnn", "cudnnn"])
    assert err.value.field == "--backends" and err.value.value == "cudnnn"
    assert "cudnn" in err.value.fix and "trtllm_low_latency" in err.value.fix


@pytest.mark.parametrize("kw,field", [({"dtypes": ["fp16"]}, "--dtypes"), ({"ms": [0]}, "--ms")])
def test_bad_dtype_or_m_is_a_usage_error(kw, field):
    args = {"plan": small_plan(), "ms": [8]}
    args.update(kw)
    with pytest.raises(UsageError) as err:
        build_cases(**args)
    assert err.value.field == field


# ---------------------------------------------------------------------------------------------
# Skips: capability, vLLM limits, shape limits

def test_capability_skips_on_sm90_vs_sm100():
    h200 = by_id(build_cases(small_plan(), [8], compute_capability=SM90))
    b200 = by_id(build_cases(small_plan(), [8], compute_capability=SM100))
    dry = by_id(build_cases(small_plan(), [8]))
    for cid in ("gemm.qkv_proj.m8.nvfp4.cutlass", "gemm.qkv_proj.m8.fp8.trtllm_low_latency",
                "moe.experts.m8.bf16.cutlass", "moe.experts.m8.fp8.trtllm"):
        assert "this GPU is sm_90" in h200[cid].skip_reason
        assert b200[cid].skip_reason == "" and dry[cid].skip_reason == ""
    assert "this GPU is sm_90" in h200["gemm.qkv_proj.m8.nvfp4.cutlass.q"].skip_reason
    for cid in ("gemm.qkv_proj.m8.bf16.cudnn", "gemm.qkv_proj.m8.fp8.cublas",
                "gemm.qkv_proj.m8.fp8.torch.per_token.q", "moe.experts.m8.fp8.torch"):
        assert h200[cid].skip_reason == ""
    # On the H200 every MoE driver case is unsupported: no time spent, no SM90 CUTLASS JIT.
    assert all(c.skip_reason for c in h200.values()
               if c.kind == "moe" and c.backend not in ("torch", "triton"))
    # ... while vLLM's Triton fused-MoE design runs there
    assert h200["moe.experts.m8.bf16.triton"].skip_reason == ""
    assert h200["moe.experts.m8.fp8.triton.per_token"].skip_reason == ""


def test_qwen3_tp8_worked_example_in_cases():
    cases = by_id(build_cases(small_plan(), [16], compute_capability=SM100))
    assert cases["moe.experts.m16.fp8.trtllm"].physical.intermediate == 96
    assert cases["moe.experts.m16.nvfp4.trtllm"].physical.intermediate == 128
    assert flag(cases["moe.experts.m16.nvfp4.trtllm"], "--intermediate_size") == "128"
    assert cases["moe.experts.m16.nvfp4.trtllm"].logical.intermediate == 96
    for cid in ("moe.experts.m16.nvfp4.cutlass", "moe.experts.m16.nvfp4.cutlass.quantized_input"):
        assert "NotImplementedError" in cases[cid].skip_reason


def test_gpt_oss_physical_shapes_reach_the_driver():
    plan = small_plan(hidden=2880, intermediate=360, top_k=4)
    c = by_id(build_cases(plan, [4], dtypes=["nvfp4"]))["moe.experts.m4.nvfp4.trtllm"]
    assert (flag(c, "--hidden_size"), flag(c, "--intermediate_size")) == ("3072", "384")
    assert (c.logical.hidden, c.physical.hidden) == (2880, 3072)


def test_mm_fp4_scale_layout_flags():
    cases = by_id(build_cases(small_plan(), [32, 33], dtypes=["nvfp4"]))
    assert "--use_128x4_sf_layout" not in cases["gemm.qkv_proj.m32.nvfp4.trtllm"].driver_args
    assert "--use_128x4_sf_layout" in cases["gemm.qkv_proj.m33.nvfp4.trtllm"].driver_args
    for b in ("cudnn", "cutlass", "cute-dsl"):
        assert "--use_128x4_sf_layout" in cases[f"gemm.qkv_proj.m32.nvfp4.{b}"].driver_args
    assert all("--use_nvfp4" in c.driver_args for c in cases.values() if c.kind == "gemm")


def test_each_case_records_the_activation_format_its_kernel_takes():
    """The builder decides the format once: the driver's scale-layout flag and the with_quant twin
    follow it (trtllm mm_fp4: 8x4 up to 32 rows, as vLLM feeds it)."""
    cases = by_id(build_cases(small_plan(), [32, 33], dtypes=["bf16", "fp8", "nvfp4"]))
    assert cases["gemm.qkv_proj.m32.nvfp4.trtllm"].activation_quant == "nvfp4_8x4"
    assert cases["gemm.qkv_proj.m32.nvfp4.trtllm.q"].activation_quant == "nvfp4_8x4"
    assert cases["gemm.qkv_proj.m33.nvfp4.trtllm.q"].activation_quant == "nvfp4_128x4"
    assert cases["gemm.qkv_proj.m32.nvfp4.cudnn.q"].activation_quant == "nvfp4_128x4"
    assert cases["gemm.qkv_proj.m32.fp8.torch.per_token.q"].activation_quant == "fp8_per_token_dynamic"
    assert cases["moe.experts.m32.nvfp4.trtllm.q"].activation_quant == "nvfp4_linear"
    assert cases["moe.experts.m32.nvfp4.cutlass"].activation_quant == ""  # quantizes inside
    assert cases["gemm.qkv_proj.m32.bf16.cudnn"].activation_quant == ""
    for c in cases.values():
        if c.routine == "mm_fp4":
            assert ("--use_128x4_sf_layout" in c.driver_args) == (c.activation_quant == "nvfp4_128x4")
        assert Case.from_dict(c.to_dict()) == c
    old = {k: v for k, v in cases["gemm.qkv_proj.m32.bf16.cudnn"].to_dict().items() if k != "activation_quant"}
    assert Case.from_dict(old).activation_quant == ""  # a cases.json without the field still loads


# ---------------------------------------------------------------------------------------------
# driver_args

def test_driver_args_shape():
    for c in build_cases(small_plan(routing=DEEPSEEK), [8]):
        if c.backend in ("torch", "triton"):
            assert c.driver_args == ()
            continue
        args = list(c.driver_args)
        assert args[:2] == ["--routine", c.routine]
        assert flag(c, "--case_tag") == c.base_case_id  # a twin reuses its base measurement
        assert not TIMING_FLAGS & set(args)
        if c.kind == "gemm":
            assert flag(c, "--backends") == c.backend
            assert args.count("--backends") == 1
            assert (flag(c, "--m"), flag(c, "--n"), flag(c, "--k")) == (
                str(c.m), str(c.physical.n), str(c.physical.k))
        else:
            assert "--backends" not in args
            assert flag(c, "--routing_method") is not None
            assert flag(c, "--num_experts") == str(c.logical.global_experts)


def test_deepseek_routing_flags():
    c = by_id(build_cases(small_plan(routing=DEEPSEEK), [8]))["moe.experts.m8.fp8.trtllm"]
    assert flag(c, "--routing_method") == "deepseek_v3"
    assert (flag(c, "--n_group"), flag(c, "--topk_group")) == ("8", "4")
    assert flag(c, "--routed_scaling_factor") == "2.5"
    assert "--use_routing_bias" in c.driver_args


def test_renormalize_never_gets_groups_and_scale_defaults_to_one():
    c = by_id(build_cases(small_plan(), [8]))["moe.experts.m8.nvfp4.trtllm"]
    assert flag(c, "--routing_method") == "renormalize"
    assert "--n_group" not in c.driver_args and "--use_routing_bias" not in c.driver_args
    assert flag(c, "--routed_scaling_factor") == "1.0"


def test_llama4_routing_flags():
    routing = Routing("llama4", scoring_func="sigmoid", renormalize=False,
                      apply_router_weight_on_input=True)
    c = by_id(build_cases(small_plan(routing=routing, top_k=1), [8]))["moe.experts.m8.fp8.trtllm"]
    assert flag(c, "--routing_method") == "llama4"
    assert "--use_routing_scales_on_input" in c.driver_args and c.skip_reason == ""


def test_routing_without_driver_name():
    cases = by_id(build_cases(small_plan(routing=Routing("sigmoid_renorm")), [8],
                              compute_capability=SM100))
    assert "'sigmoid_renorm'" in cases["moe.experts.m8.fp8.trtllm"].skip_reason
    cut = cases["moe.experts.m8.fp8.cutlass"]  # cutlass ignores routing: runs
    assert cut.skip_reason == "" and flag(cut, "--routing_method") == "renormalize"


def test_cutlass_variants():
    cases = by_id(build_cases(small_plan(intermediate=192), [8]))
    assert flag(cases["moe.experts.m8.bf16.cutlass"], "--cutlass_variant") == "base"
    assert flag(cases["moe.experts.m8.fp8.cutlass"], "--cutlass_variant") == "fp8"
    plain = cases["moe.experts.m8.nvfp4.cutlass"]
    quant = cases["moe.experts.m8.nvfp4.cutlass.quantized_input"]
    assert flag(plain, "--cutlass_variant") == flag(quant, "--cutlass_variant") == "nvfp4"
    assert "--quantized_input" in quant.driver_args and "--quantized_input" not in plain.driver_args


def test_non_gated_activation():
    cases = by_id(build_cases(small_plan(activation="Relu2", gated=False, intermediate=100), [8],
                              compute_capability=SM100))
    assert flag(cases["moe.experts.m8.fp8.cutlass"], "--activation-type") == "Relu2"
    assert cases["moe.experts.m8.fp8.cutlass"].physical.intermediate == 128
    trt = cases["moe.experts.m8.fp8.trtllm"]  # Nemotron-style Relu2 runs on trtllm
    assert trt.skip_reason == "" and flag(trt, "--activation-type") == "Relu2"
    assert (trt.physical.intermediate, flag(trt, "--intermediate_size")) == (128, "128")
    fp4 = cases["moe.experts.m8.nvfp4.trtllm"]
    assert fp4.skip_reason == "" and fp4.physical.intermediate == 128
    assert "Swiglu only" in cases["moe.experts.m8.nvfp4.cute-dsl"].skip_reason


def test_kimi_k2_ungrouped_deepseek_routing_is_a_known_driver_limit():
    # Kimi-K2: E=384, k=8, DeepSeek routing with n_group=topk_group=1. The trtllm routines would
    # die in the driver's fused_topk_deepseek before timing: decided before launch instead.
    routing = Routing("deepseek_v3", n_group=1, topk_group=1, routed_scaling_factor=2.827,
                      use_routing_bias=True, scoring_func="sigmoid")
    plan = small_plan(hidden=7168, intermediate=256, experts=384, global_experts=384,
                      routing=routing)
    cases = by_id(build_cases(plan, [8], compute_capability=SM100))
    for cid in ("moe.experts.m8.fp8.trtllm", "moe.experts.m8.fp8.trtllm.q",
                "moe.experts.m8.nvfp4.trtllm"):
        assert "fused_topk_deepseek" in cases[cid].skip_reason
    for cid in ("moe.experts.m8.fp8.cutlass", "moe.experts.m8.nvfp4.cute-dsl",
                "moe.experts.m8.nvfp4.cutlass.quantized_input"):
        assert cases[cid].skip_reason == ""


def test_unknown_activation_is_skipped_without_argv():
    cases = build_cases(small_plan(activation="swigluoai"), [8], dtypes=["bf16"])
    cut = by_id(cases)["moe.experts.m8.bf16.cutlass"]
    assert "swigluoai" in cut.skip_reason and cut.driver_args == ()
    assert by_id(cases)["moe.experts.m8.bf16.torch"].skip_reason  # torch can't run it either


# ---------------------------------------------------------------------------------------------
# Expert parallelism

def test_wide_ep_flags():
    plan = replace(small_plan(hidden=7168, intermediate=2048, experts=32, global_experts=256,
                              routing=DEEPSEEK, ep_rank=3), tp=1, ep=8)
    cases = by_id(build_cases(plan, [8], compute_capability=SM100))
    trt = cases["moe.experts.m8.nvfp4.trtllm"]
    assert (flag(trt, "--num_experts"), flag(trt, "--local_num_experts"),
            flag(trt, "--local_expert_offset")) == ("256", "32", "96")
    cute = cases["moe.experts.m8.nvfp4.cute-dsl"]
    assert (flag(cute, "--local_num_experts"), flag(cute, "--local_expert_offset")) == ("32", "96")
    cut = cases["moe.experts.m8.fp8.cutlass"]
    assert (flag(cut, "--ep_size"), flag(cut, "--ep_rank"), flag(cut, "--num_experts")) == (
        "8", "3", "256")
    assert "--local_num_experts" not in cut.driver_args
    assert all(c.skip_reason == "" for c in cases.values())


def test_no_ep_flags_without_ep():
    for c in build_cases(small_plan(), [8]):
        assert not {"--ep_size", "--local_num_experts", "--local_expert_offset"} & set(c.driver_args)


def test_uneven_ep():
    # E=10 over EP4: ranks hold 3, 3, 2, 2 experts (remainder on the first ranks).
    plan = replace(small_plan(experts=3, global_experts=10, top_k=2, ep_rank=1), tp=1, ep=4)
    cases = by_id(build_cases(plan, [8]))
    trt = cases["moe.experts.m8.fp8.trtllm"]
    assert (flag(trt, "--local_num_experts"), flag(trt, "--local_expert_offset")) == ("3", "3")
    cut = cases["moe.experts.m8.fp8.cutlass"]
    assert flag(cut, "--ep_size") == "3"  # 10 // 3 == 3 local experts
    rank3 = replace(small_plan(experts=2, global_experts=10, top_k=2, ep_rank=3), tp=1, ep=4)
    trt3 = by_id(build_cases(rank3, [8]))["moe.experts.m8.fp8.trtllm"]
    assert flag(trt3, "--local_expert_offset") == "8"


@pytest.mark.parametrize("tp, ep, experts, per_m", [(1, 1, 128, 1), (4, 4, 32, 1), (1, 8, 16, 8),
                                                     (2, 8, 16, 4), (1, 64, 2, 64)])
def test_moe_runs_m_times_ep_over_tp_tokens(tp, ep, experts, per_m):
    """M is the attention's tokens on this rank; the MoE layer runs the pairs of EP/TP data-parallel
    ranks' tokens: every backend (driver argv, torch, triton) gets num_tokens = M * EP/TP."""
    plan = replace(small_plan(experts=experts, global_experts=128, tokens_per_m=per_m), tp=tp, ep=ep)
    for case in build_cases(plan, [1, 8, 64]):
        if case.kind != "moe":
            assert getattr(case.logical, "num_tokens", None) is None
            continue
        assert case.logical.num_tokens == case.physical.num_tokens == case.m * per_m
        assert f".m{case.m}." in case.case_id  # ids keep the sweep's M
        if case.driver_args:
            assert flag(case, "--num_tokens") == str(case.m * per_m)


def test_fp8_rows_carry_their_scheme():
    cases = build_cases(small_plan(), [8], compute_capability=SM90)
    for c in cases:
        if c.dtype != "fp8":
            assert c.scheme == ""
            continue
        want = {"torch._scaled_mm": c.variant, "torch._scaled_grouped_mm": "per_token"}.get(
            c.routine)
        if c.variant == "block128" or (c.backend == "triton" and c.kind == "moe"):
            want = c.variant.split("-")[0]  # a tuned Triton MoE row: "<scheme>-tuned"
        assert c.scheme == (want or "per_tensor"), c.case_id


def _with_scales(plan: Plan, scales: str) -> Plan:
    return replace(plan, model=replace(plan.model, fp8_activation_scales=scales))


def test_vllm_default_marks_on_hopper():
    cases = by_id(build_cases(_with_scales(small_plan(), "dynamic"), [8], compute_capability=SM90))
    marked = {cid: c.vllm_default for cid, c in cases.items() if c.vllm_default}
    # BF16 linear: F.linear on cuBLAS (torch.linear); BF16 MoE, block FP8 MoE and the dynamic
    # per-tensor MoE of vLLM's online fp8_per_tensor: vLLM's Triton fused MoE (this tool's Triton
    # code of its design).
    assert marked["gemm.qkv_proj.m8.bf16.torch"] == "same"
    assert marked["moe.experts.m8.bf16.triton"] == "design"
    assert marked["moe.experts.m8.fp8.triton.block128"] == "design"
    assert marked["moe.experts.m8.fp8.triton.per_tensor"] == "design"
    assert "moe.experts.m8.bf16.torch" not in marked  # the composite is never vLLM's kernel
    # per-token FP8 MoE: vLLM's own CUTLASS grouped GEMM, which no row times; Triton is its fallback
    per_token = cases["moe.experts.m8.fp8.triton.per_token"]
    assert (per_token.vllm_default, per_token.timed_as) == ("", "fallback")
    assert "CutlassExpertsFp8" in per_token.vllm_runs
    # a static-scale checkpoint: FlashInfer's SM90 CUTLASS MoE is vLLM's kernel
    static = by_id(build_cases(_with_scales(small_plan(), "static"), [8], compute_capability=SM90))
    assert static["moe.experts.m8.fp8.cutlass"].vllm_default == "same"
    assert static["moe.experts.m8.fp8.triton.per_tensor"].timed_as == "fallback"
    assert not any(c.vllm_default or c.timed_as for c in build_cases(small_plan(), [8]))  # GPU unknown


def test_every_row_says_what_it_times_on_hopper():
    from benchmark_model_kernels.cases.backends import tuned_tiles
    from benchmark_model_kernels.vllm_rules.dispatch import TIMED_LABELS

    cases = build_cases(_with_scales(small_plan(), "dynamic"), [8], compute_capability=SM90,
                        search_moe_tiles=True)
    for c in cases:
        if c.kind == "attention":
            continue
        assert c.timed_as in TIMED_LABELS, c.case_id
        assert bool(c.vllm_runs) == (c.timed_as in ("fallback", "stand_in", "comparison")), c.case_id
        if c.vllm_default == "same":
            assert c.timed_as == "vllm_kernel", c.case_id
        if c.vllm_default == "design":
            want = "vllm_design_tuned_tiles" if tuned_tiles(c.variant) else "vllm_design_vllm_tiles"
            assert c.timed_as == want, c.case_id
    ids = by_id(cases)
    # vLLM's CUTLASS cutlass_scaled_mm is not timed: torch._scaled_mm stands in (dynamic per-token
    # activations in vLLM, a static scale here), and is vLLM's own fallback for per-token scales
    assert ids["gemm.qkv_proj.m8.fp8.torch.per_tensor"].timed_as == "stand_in"
    assert ids["gemm.qkv_proj.m8.fp8.torch.per_token"].timed_as == "fallback"
    assert ids["gemm.qkv_proj.m8.fp8.cudnn"].timed_as == "comparison"
    # the twin says what its kernel-only row says
    assert ids["gemm.qkv_proj.m8.fp8.torch.per_token.q"].timed_as == "fallback"


def test_block_fp8_moe_at_a_shard_128_does_not_divide_runs_triton_with_refined_blocks():
    # Qwen3-30B-A3B at TP=4: I_r = 192; vLLM refines the 128x128 blocks to 64x64 and runs Triton
    plan = replace(small_plan(intermediate=192), tp=4)
    cases = by_id(build_cases(plan, [8], compute_capability=SM100))
    triton = cases["moe.experts.m8.fp8.triton.block128"]
    assert triton.skip_reason == "" and triton.vllm_default == "design"
    assert "64x64" in triton.note
    trtllm = cases["moe.experts.m8.fp8.trtllm.block128"]
    assert "refines the blocks to 64x64" in trtllm.skip_reason and trtllm.timed_as == "fallback"
    # TP=1: the checkpoint's blocks fit, and FlashInfer's TRTLLM block-scale MoE is vLLM's kernel
    whole = by_id(build_cases(replace(small_plan(intermediate=768), tp=1), [8], compute_capability=SM100))
    assert whole["moe.experts.m8.fp8.trtllm.block128"].vllm_default == "same"
    assert whole["moe.experts.m8.fp8.triton.block128"].note == ""


def test_block_fp8_moe_under_ep_is_not_triton_on_hopper():
    plan = replace(small_plan(experts=16, global_experts=128, tokens_per_m=8, intermediate=768), tp=1, ep=8)
    cases = by_id(build_cases(plan, [8], compute_capability=SM90))
    assert cases["moe.experts.m8.fp8.triton.block128"].vllm_default == ""
    assert cases["moe.experts.m8.fp8.triton.block128"].timed_as == "fallback"
    assert cases["moe.experts.m8.bf16.triton"].vllm_default == "design"


# ---------------------------------------------------------------------------------------------
# plan_from_shapes

def test_plan_from_shapes():
    moe = moe_entry(layers=7)
    plan = plan_from_shapes([(4096, 4096, "a"), (14336, 4096, "b")], moe)
    assert [(g.name, g.n, g.k, g.layers) for g in plan.gemms] == [("a", 4096, 4096, 1),
                                                                  ("b", 14336, 4096, 1)]
    assert plan.moe[0].layers == 1 and plan.ep == 1
    assert Plan.from_json(plan.to_json()) == plan
    assert len(build_cases(plan, [1], search_moe_tiles=True)) == 2 * 31 + 31
    assert len(build_cases(plan, [1])) == 2 * 31 + 31 - 7  # the 7 tuned MoE rows left out
    ep_plan = plan_from_shapes([], moe_entry(experts=32, global_experts=256))
    assert ep_plan.ep == 8 and ep_plan.gemms == ()


@pytest.mark.parametrize("nks,moe,field", [
    ([(4096, 0, "a")], None, "--nks"),
    ([(4096, 4096, "a"), (1, 1, "a")], None, "--nks"),
    ([], moe_entry(experts=300, global_experts=256), "--moe_experts"),
    ([], moe_entry(top_k=300, global_experts=256), "--moe_top_k"),
    ([], moe_entry(hidden=0), "--moe_hidden"),
])
def test_plan_from_shapes_errors(nks, moe, field):
    with pytest.raises(UsageError) as err:
        plan_from_shapes(nks, moe)
    assert err.value.field == field


def test_names_are_sanitised_in_ids():
    plan = plan_from_shapes([(64, 64, "my shape/1")])
    assert build_cases(plan, [1], dtypes=["bf16"])[0].case_id == "gemm.my-shape-1.m1.bf16.torch"


# ---------------------------------------------------------------------------------------------
# Every generated argv through the real v0.6.17 driver argparse

class _Anything:
    """Plumbing stand-in for the GPU-only modules the driver imports at module level: the parsers
    under test are the driver's real argparse code; only unrelated imports are stubbed."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __getitem__(self, key):
        return _Anything()

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = roots

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


@pytest.fixture(scope="module")
def driver_parse_args():
    """The driver's `parse_args` plus the exact option strings of the parser it used."""
    wheels = glob.glob(os.path.join(BUNDLE, "whl", "flashinfer_python-0.6.17-*.whl"))
    if not os.path.isfile(os.path.join(DRIVER_DIR, "flashinfer_benchmark.py")) or not wheels:
        pytest.skip("FlashInfer v0.6.17 driver checkout / wheel not in .devbundle")
    pytest.importorskip("torch")
    saved = dict(sys.modules)
    real = {n for n in ("einops", "triton") if importlib.util.find_spec(n) is not None}
    finder = _StubFinder({"flashinfer", "cupti", "cudnn"} | ({"einops", "triton"} - real))
    sys.meta_path.insert(0, finder)
    sys.path.insert(0, DRIVER_DIR)
    try:
        # The real ActivationType / RoutingMethodType enums (argparse converts names with them).
        src = zipfile.ZipFile(wheels[0]).read("flashinfer/tllm_enums.py").decode()
        import flashinfer.api_logging as api_logging

        api_logging.flashinfer_api = lambda f=None, **k: f if f else (lambda g: g)
        enums = types.ModuleType("flashinfer.tllm_enums")
        enums.__package__ = "flashinfer"
        sys.modules["flashinfer.tllm_enums"] = enums
        exec(compile(src, "flashinfer/tllm_enums.py", "exec"), enums.__dict__)
        import flashinfer
        import flashinfer.fused_moe.core as core

        flashinfer.ActivationType = core.ActivationType = enums.ActivationType
        import flashinfer_benchmark

        used = []
        original = argparse.ArgumentParser.parse_args

        def recording(self, *a, **k):
            used.append(self)
            return original(self, *a, **k)

        def parse(argv):
            used.clear()
            argparse.ArgumentParser.parse_args = recording
            try:
                ns = flashinfer_benchmark.parse_args(list(argv))
            finally:
                argparse.ArgumentParser.parse_args = original
            return ns, set(used[-1]._option_string_actions)

        yield parse
    finally:
        sys.meta_path.remove(finder)
        sys.path.remove(DRIVER_DIR)
        # Drop the stubs and the driver's modules only (torch submodules it loaded stay).
        ours = finder.roots | {"flashinfer_benchmark", "routines"}
        for name in set(sys.modules) - set(saved):
            if name.split(".")[0] in ours:
                del sys.modules[name]


def _all_argv_cases() -> list[Case]:
    plans = [
        small_plan(),
        small_plan(routing=DEEPSEEK, hidden=7168, intermediate=2048, experts=32,
                   global_experts=256, ep_rank=2),
        small_plan(routing=Routing("llama4", apply_router_weight_on_input=True), top_k=1),
        small_plan(activation="Relu2", gated=False, routing=Routing("sigmoid_renorm")),
        small_plan(hidden=2880, intermediate=360, top_k=4, activation="Geglu",
                   routing=Routing("topk")),
    ]
    out = []
    for plan in plans:
        out += [c for c in build_cases(replace(plan, ep=8), [1, 33], DTYPES) if c.driver_args]
    return out


def test_every_argv_parses_with_the_real_driver(driver_parse_args):
    cases = _all_argv_cases()
    assert len(cases) > 100
    for case in cases:
        try:
            ns, options = driver_parse_args(case.driver_args)
        except SystemExit as exc:  # an unknown flag or bad choice kills a whole driver process
            pytest.fail(f"driver rejected {case.case_id}: exit {exc.code}: {case.driver_args}")
        # No abbreviation was silently expanded: every flag is an exact option string.
        flags = {a for a in case.driver_args if a.startswith("--")}
        assert flags <= options, (case.case_id, flags - options)
        assert ns.routine == case.routine and ns.case_tag == case.base_case_id
        if case.kind == "gemm":
            assert (ns.m, ns.n, ns.k, ns.backends) == (
                case.m, case.physical.n, case.physical.k, [case.backend])
        else:
            assert (ns.num_tokens, ns.hidden_size, ns.intermediate_size, ns.top_k) == (
                case.m, case.physical.hidden, case.physical.intermediate, case.logical.top_k)
            assert ns.activation_type.name == case.activation
            assert ns.num_iters == 30  # defaults untouched: timing flags are the runner's


def test_router_gate_and_lm_head_are_built_in_bf16_only():
    # vLLM creates the router and the shared-expert gate without a quant_config and never quantizes
    # lm_head under FP8, so FP8/NVFP4 cases for them would time kernels vLLM never runs.
    plan = plan_from_shapes([(4096, 4096, "o_proj"), (128, 4096, "router"),
                             (1, 4096, "shared_expert_gate"), (128256, 4096, "lm_head")])
    cases = build_cases(plan, [8])
    dtypes = {}
    for c in cases:
        dtypes.setdefault(c.name, set()).add(c.dtype)
    assert dtypes["o_proj"] == {"bf16", "fp8", "nvfp4"}
    assert dtypes["router"] == dtypes["shared_expert_gate"] == dtypes["lm_head"] == {"bf16"}


def test_qwen3_moe_router_gets_fp8_per_tensor_cases_on_vllms_online_fp8_path():
    # vLLM's online fp8_per_tensor quantizes Qwen3-MoE's GateLinear (built with the quant config);
    # the other FP8 schemes stand for checkpoints and keep it BF16, as does NVFP4.
    plan = plan_from_shapes([(4096, 4096, "o_proj"), (128, 4096, "router")])
    qwen = replace(plan, model=replace(plan.model, architecture="Qwen3MoeForCausalLM",
                                       fp8_activation_scales="dynamic"))
    router = [c for c in build_cases(qwen, [8], compute_capability=(9, 0)) if c.name == "router"]
    assert {(c.dtype, c.scheme) for c in router} == {("bf16", ""), ("fp8", "per_tensor")}
    fp8 = [c for c in router if c.dtype == "fp8"]
    assert fp8 and all(c.vllm_default == "" for c in fp8)
    # the same rule as the dense FP8 layers: vLLM's CUTLASS kernel is not timed, torch._scaled_mm
    # stands in for it (vllm_rules/dispatch.py)
    assert {c.timed_as for c in fp8 if c.routine == "torch._scaled_mm"} == {"stand_in"}
    static = replace(qwen, model=replace(qwen.model, fp8_activation_scales="static"))
    assert {c.dtype for c in build_cases(static, [8]) if c.name == "router"} == {"bf16"}
    deepseek = replace(qwen, model=replace(qwen.model, architecture="DeepseekV3ForCausalLM"))
    assert {c.dtype for c in build_cases(deepseek, [8]) if c.name == "router"} == {"bf16"}


def test_gemm_m_divisor_runs_ceil_m_over_divisor():
    # shared experts under sequence-parallel MoE: ceil(M/TP) rows; old plans (no field) run M
    shared = GemmEntry(name="shared_expert.gate_up_proj", modules=("model.layers.*.mlp.shared_experts.gate_proj",),
                       n=4096, k=7168, layers=58, parallel="replicated", m_divisor=2)
    plan = replace(small_plan(), tp=2, ep=8, gemms=(shared,), moe=())
    ms = {c.m: c.logical.m for c in build_cases(plan, [1, 3, 64], dtypes=("bf16",))}
    assert ms == {1: 1, 3: 2, 64: 32}
    for case in build_cases(plan, [64], dtypes=("bf16", "nvfp4")):
        if case.driver_args:  # the kernel runs the rows this rank has, not the attention's M
            assert flag(case, "--m") == "32", case.case_id
    fp4 = by_id(build_cases(plan, [64], dtypes=("nvfp4",)))["gemm.shared_expert.gate_up_proj.m64.nvfp4.trtllm"]
    assert "--use_128x4_sf_layout" not in fp4.driver_args  # 32 rows: vLLM's 8x4 layout (M <= 32)
    d = small_plan().to_dict()
    del d["gemms"][0]["m_divisor"]
    assert Plan.from_dict(d).gemms[0].m_divisor == 1
