"""Merging per-layer plans: identical entries counted once per layer instance, one role with
several sizes given unique names, display order, ranges of layer indices."""

from __future__ import annotations

from plan_helpers import gemms, plan_of

from benchmark_model_kernels.core.plan_schema import Unsupported
from benchmark_model_kernels.plan.items import Item, LayerPlan
from benchmark_model_kernels.plan.merge import ROLE_ORDER, merge, ranges


def test_gemma4_sliding_and_global_layers_get_distinct_names():
    p = plan_of("gemma-4-26b-a4b", 8)
    g = gemms(p)
    assert g["qkv_proj[sliding_attention]"] == (1024, 2816, 25, "column", False)  # (16/8 + 2*8/8)*256
    assert g["qkv_proj[full_attention]"] == (2048, 2816, 5, "column", False)  # K=V: 2*512 + 2*1*512
    assert g["gate_up_proj"][2] == 30 and p.moe[0].layers == 30  # dense MLP beside MoE in every layer


def _layer(*items: Item, unsupported: tuple[Unsupported, ...] = ()) -> LayerPlan:
    return LayerPlan(list(items), [], list(unsupported))


def test_identical_entries_merge_and_count_layer_instances():
    qkv = Item("qkv_proj", ["model.layers.*.self_attn.q_proj"], 768, 2048, "column", False)
    down = Item("down_proj", ["model.layers.*.mlp.down_proj"], 2048, 512, "row", False)
    odd = Unsupported("model.layers.*.mixer.x_proj", 8, 16, "no role")
    per_layer = [(0, _layer(down, qkv, unsupported=(odd,))), (1, _layer(qkv, down, unsupported=(odd,)))]
    top = _layer(Item("lm_head", ["lm_head"], 1000, 2048, "vocab", False))
    g, m, u = merge(per_layer, top, None)
    # layer order (qkv before down, lm_head last), one entry per role, counted per layer
    assert [(e.name, e.layers, e.modules) for e in g] == [
        ("qkv_proj", 2, ("model.layers.*.self_attn.q_proj",)),
        ("down_proj", 2, ("model.layers.*.mlp.down_proj",)),
        ("lm_head", 1, ("lm_head",)),
    ]
    assert m == () and u == (odd,)  # the same unsupported module is reported once


def test_one_role_with_several_sizes_gets_unique_names():
    a = Item("qkv_proj", ["q"], 1024, 2816, "column", False)
    b = Item("qkv_proj", ["q"], 1536, 2816, "column", False)
    typed, _, _ = merge([(0, _layer(a)), (1, _layer(b)), (2, _layer(a))], _layer(),
                        ["sliding_attention", "full_attention", "sliding_attention"])
    assert [(e.name, e.n, e.layers) for e in typed] == [("qkv_proj[sliding_attention]", 1024, 2),
                                                        ("qkv_proj[full_attention]", 1536, 1)]
    numbered, _, _ = merge([(0, _layer(a)), (1, _layer(b))], _layer(), None)
    assert [e.name for e in numbered] == ["qkv_proj", "qkv_proj[2]"]


def test_role_order_ends_with_lm_head_and_ranges():
    assert ROLE_ORDER[-1] == "lm_head"
    assert ranges([1, 2, 3, 7]) == "1-3, 7"
    assert ranges([0]) == "0" and ranges([]) == ""
    assert ranges([2, 4, 5]) == "2, 4-5"
