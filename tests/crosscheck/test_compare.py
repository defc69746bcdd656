"""The comparison of a plan with vLLM's layers, on hand-made records (no vLLM needed)."""

from __future__ import annotations

from benchmark_model_kernels.core.plan_schema import AttentionEntry, GemmEntry, ModelInfo, MoeEntry, Plan, Routing
from benchmark_model_kernels.crosscheck.compare import (
    BIAS_ONLY,
    AttentionShape,
    CrossCheckResult,
    LinearShape,
    Side,
    compare,
    layer_ranges,
    moe_shape,
    plan_side,
    routing_key,
)


def _plan() -> Plan:
    info = ModelInfo(name="m", source="local", model_type="t", architecture="A")
    gemms = (GemmEntry("qkv_proj", ("model.layers.*.self_attn.q_proj",), 6144, 4096, 32, "column"),
             GemmEntry("router", ("model.layers.*.mlp.gate",), 8, 4096, 32, "replicated", m_divisor=2),
             GemmEntry("lm_head", ("lm_head",), 64128, 4096, 1, "vocab"))
    moe = (MoeEntry("experts", ("model.layers.*.mlp.experts",), 4096, 14336, 2, 8, 2, "Swiglu",
                    Routing("renormalize"), 32, tokens_per_m=4),)
    return Plan(info, 2, 8, gemms, moe)


def _vllm(qkv_n: int = 6144, router_rows: int = 2, act: str = "Swiglu") -> Side:
    side = Side()
    side.add(LinearShape(qkv_n, 4096, "column", False), 32, "qkv_proj", "model.layers.{0-31}.self_attn.qkv_proj")
    side.add(LinearShape(8, 4096, "replicated", False, router_rows), 32, "gate", "model.layers.{0-31}.mlp.gate")
    side.add(LinearShape(64128, 4096, "vocab", False), 1, "lm_head", "lm_head")
    side.add(moe_shape(4096, 14336, 2, 8, 2, act, True, False, 4,
                      routing_key("topk", None, None, "softmax", True, False, False)),
             32, "experts", "model.layers.{0-31}.mlp.experts")
    return side


def test_equal_shapes_and_counts_agree():
    assert compare(plan_side(_plan()), _vllm()) == []


def test_a_different_size_is_one_line_naming_both_sides():
    (line,) = compare(plan_side(_plan()), _vllm(qkv_n=10240))
    assert line.startswith("different: model.layers.{0-31}.self_attn.qkv_proj: vLLM runs 10240 x 4096 column x32")
    assert "the plan 6144 x 4096 column x32 [plan qkv_proj" in line


def test_rows_and_the_router_name_pair_up():
    # vLLM's router is `gate`; a router on all M rows where vLLM runs ceil(M/2) is one difference
    (line,) = compare(plan_side(_plan()), _vllm(router_rows=1))
    assert line.startswith("different: model.layers.{0-31}.mlp.gate: vLLM runs 8 x 4096 replicated x32")
    assert "the plan 8 x 4096 replicated on M/2 x32" in line


def test_missing_and_extra():
    vllm = _vllm()
    vllm.add(LinearShape(256, 4096, "replicated", False), 32, "per_layer_input_gate",
             "model.layers.{0-31}.per_layer_input_gate")
    plan = plan_side(_plan())
    plan.add(LinearShape(4096, 256, "row", False), 3, "oddity", "plan oddity (model.layers.*.oddity)")
    lines = compare(plan, vllm)
    assert lines == [
        "missing: model.layers.{0-31}.per_layer_input_gate: vLLM runs 256 x 4096 replicated x32, the plan has no "
        "such entry",
        "extra: plan oddity (model.layers.*.oddity): the plan lists 4096 x 256 row x3, vLLM runs no such layer",
    ]


def test_a_count_difference_is_reported():
    plan = plan_side(_plan())
    vllm = _vllm()
    vllm.add(LinearShape(6144, 4096, "column", False), 2, "qkv_proj", "mtp.layers.{0-1}.qkv_proj")
    (line,) = compare(plan, vllm)
    assert line.startswith("missing: model.layers.{0-31}.self_attn.qkv_proj; mtp.layers.{0-1}.qkv_proj: vLLM runs "
                           "6144 x 4096 column x2")


def test_moe_activation_and_custom_routing():
    (line,) = compare(plan_side(_plan()), _vllm(act="Geglu"))
    assert line.startswith("different: model.layers.{0-31}.mlp.experts") and "act=Geglu" in line
    # a model's own routing function: its scoring and renormalization are not compared
    assert routing_key("custom:f", None, None, "sigmoid", False, False, True) == \
        routing_key("custom:f", None, None, "softmax", True, False, True)


def _deepseek_like(scale: float | None) -> tuple[Plan, Side]:
    """A plan of grouped sigmoid routing scaled by `scale`, and vLLM's side scaled by 2.5."""
    info = ModelInfo(name="m", source="local", model_type="t", architecture="A")
    routing = Routing("deepseek_v3", n_group=8, topk_group=4, routed_scaling_factor=scale, use_routing_bias=True,
                      scoring_func="sigmoid")
    plan = Plan(info, 1, 8, moe=(MoeEntry("experts", ("model.layers.*.mlp.experts",), 7168, 2048, 32, 256, 8,
                                          "Swiglu", routing, 58, tokens_per_m=8),))
    vllm = Side()
    vllm.add(moe_shape(7168, 2048, 32, 256, 8, "Swiglu", True, False, 8,
                       routing_key("grouped", 8, 4, "sigmoid", True, True, False, 2.5)),
             58, "experts", "model.layers.{3-60}.mlp.experts")
    return plan, vllm


def test_the_routed_scaling_factor_is_compared():
    plan, vllm = _deepseek_like(2.5)
    assert compare(plan_side(plan), vllm) == []
    for wrong in (1.0, 99.0, None):  # None: no factor, the same as 1.0
        (line,) = compare(plan_side(_deepseek_like(wrong)[0]), vllm)
        assert line.startswith("different: model.layers.{3-60}.mlp.experts: vLLM runs ") and "scale=2.5" in line
        assert ("scale=99" in line) is (wrong == 99.0) and line.count("scale=") == 1 + (wrong == 99.0)


def test_a_custom_routing_function_is_compared_by_name():
    assert routing_key("custom:Llama4MoE.custom_routing_function", None, None, None, None, False, True) != \
        routing_key("custom:Gemma4Router.routing_function", None, None, None, None, False, True)


def test_a_bias_alone_is_no_shape_mismatch():
    vllm = _vllm()
    side = Side()
    for shape, count in vllm.gemms.items():
        bias = shape.n == 6144  # vLLM's qkv_proj with a bias, the plan's without
        side.add(LinearShape(shape.n, shape.k, shape.parallel, bias, shape.m_divisor), count,
                 vllm.places[shape][0].role, vllm.places[shape][0].where)
    for shape, count in vllm.moes.items():
        side.add(shape, count, "experts", vllm.places[shape][0].where)
    (line,) = compare(plan_side(_plan()), side)
    assert line.startswith(BIAS_ONLY + "model.layers.{0-31}.self_attn.qkv_proj: vLLM's layer has a bias, the "
                           "plan's entry none (same 6144 x 4096 GEMM x32)")
    assert CrossCheckResult("vllm", (line,)).status == "match"
    assert CrossCheckResult("vllm", (line, "different: x")).status == "mismatch"


def test_a_build_problem_is_no_verdict():
    assert CrossCheckResult("vllm", not_checked="ImportError: no CUDA").status == "not checked"
    assert CrossCheckResult("vllm", refused="TP=3 does not divide 32 heads").status == "vllm refuses"


def test_layer_ranges():
    paths = [f"model.layers.{i}.mlp.experts" for i in (1, 2, 3, 7)] + ["lm_head"]
    assert layer_ranges(paths) == "model.layers.{1-3,7}.mlp.experts, lm_head"


def test_attention_layers_compared_by_heads_sizes_and_window():
    """A plan's attention entries against vLLM's Attention layers: a window vLLM does not hold is one
    "different" line; equal entries agree."""
    attn = AttentionEntry("attn.sliding", ("model.layers.*.self_attn",), "mha", 32, 16, 4, 128, 128, 32, 8,
                          sliding_window=4096)
    plan = Plan(ModelInfo(name="m", source="local", model_type="t", architecture="A"), 2, 1, attention=(attn,))
    side = Side()
    side.add(AttentionShape("mha", 16, 4, 128, 128, 4096), 32, "attn", "model.layers.{0-31}.self_attn")
    assert compare(plan_side(plan), side) == []
    full = Side()
    full.add(AttentionShape("mha", 16, 4, 128, 128), 32, "attn", "model.layers.{0-31}.self_attn")
    (line,) = compare(plan_side(plan), full)
    assert line == ("different: model.layers.{0-31}.self_attn: vLLM runs mha heads=16 kv_heads=4 head_size=128/128 "
                    "x32, the plan mha heads=16 kv_heads=4 head_size=128/128 window=4096 x32 "
                    "[plan attn.sliding (model.layers.*.self_attn)]")
