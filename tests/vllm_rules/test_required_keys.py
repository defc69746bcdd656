"""The table of config keys each family's plan depends on: every family is a transformers model
type, every key one its config class knows, every size or count one the value check bounds."""

from __future__ import annotations

import dataclasses

import pytest

from benchmark_model_kernels.plan import config_checks
from benchmark_model_kernels.vllm_rules import required_keys

#: Listed keys that are not sizes or counts (so not in config_checks.BOUNDS): flags, a scale, a
#: layout string or list.
NOT_SIZES = {"norm_topk_prob", "routed_scaling_factor", "hybrid_override_pattern", "layers_block_type", "layer_types"}


def _config_class(model_type: str):
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]


def _known(klass) -> set[str]:
    amap = getattr(klass, "attribute_map", {}) or {}
    return {f.name for f in dataclasses.fields(klass)} | set(amap)


@pytest.mark.parametrize("model_type", sorted(required_keys.PLAN_KEYS))
def test_every_listed_key_is_known_to_the_config_class(model_type):
    klass = _config_class(model_type)
    family = required_keys.PLAN_KEYS[model_type]
    for key in family.always + family.moe:
        names = required_keys.alternatives(key)
        assert any(n in _known(klass) for n in names), f"{model_type}: {key} is not a {klass.__name__} field"


def test_every_listed_size_is_bounded():
    keys = {n for family in [*required_keys.PLAN_KEYS.values(), required_keys.GENERIC]
            for key in family.always + family.moe for n in required_keys.alternatives(key)}
    assert keys - NOT_SIZES - set(config_checks.BOUNDS) == set()


def test_mla_families_do_not_require_gqa_keys():
    for mt in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa"):
        keys = required_keys.plan_keys(required_keys.PLAN_KEYS[mt], has_experts=True)
        assert "num_key_value_heads" not in keys and "head_dim" not in keys and "kv_lora_rank" in keys


def test_moe_keys_only_with_experts_and_unlisted_families_get_the_generic_row():
    family = required_keys.family_keys("nemotron_h")
    assert "n_routed_experts" not in required_keys.plan_keys(family, has_experts=False)
    assert "n_routed_experts" in required_keys.plan_keys(family, has_experts=True)
    generic = required_keys.family_keys("a_family_nobody_listed")
    assert generic is required_keys.GENERIC and generic.class_defaults_only
