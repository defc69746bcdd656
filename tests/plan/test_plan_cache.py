"""Plans kept between runs (plan/plan_cache.py): the same config, layout and code reads the kept
plan without building the model; anything a plan depends on changing is another key."""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.plan import meta_model, plan_cache, planner
from support import write_tiny_llama


@pytest.fixture
def builds(monkeypatch):
    """Counts meta-model builds (the real build runs)."""
    count = [0]
    real = meta_model.build_meta_model

    def counting(*a, **k):
        count[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(meta_model, "build_meta_model", counting)
    return count


def test_a_kept_plan_is_read_back_without_building_the_model(tmp_path, builds):
    model, kept = str(write_tiny_llama(tmp_path / "m")), str(tmp_path / "plans")
    first = planner.plan_model(model, 2, 1, plan_dir=kept)
    assert builds[0] == 1 and len(os.listdir(kept)) == 1
    again = planner.plan_model(model, 2, 1, plan_dir=kept)
    assert again == first and builds[0] == 1
    assert planner.plan_model(model, 2, 1) == first and builds[0] == 2  # no folder: planned again


def test_a_config_layout_or_flag_change_is_planned_anew(tmp_path, builds):
    model, kept = write_tiny_llama(tmp_path / "m"), str(tmp_path / "plans")
    base = planner.plan_model(str(model), 1, 1, plan_dir=kept)
    assert planner.plan_model(str(model), 2, 1, plan_dir=kept).tp == 2  # another TP
    write_tiny_llama(model, intermediate_size=256)  # the same path, another config
    changed = planner.plan_model(str(model), 1, 1, plan_dir=kept)
    assert changed != base and builds[0] == 3
    assert {g.name: g.n for g in changed.gemms}["gate_up_proj"] == 512
    planner.plan_model(str(model), 1, 1, plan_dir=kept, allow_defaults=True)
    assert builds[0] == 4 and len(os.listdir(kept)) == 4


def test_another_planner_code_is_another_key(tmp_path, monkeypatch, builds):
    model, kept = str(write_tiny_llama(tmp_path / "m")), str(tmp_path / "plans")
    planner.plan_model(model, 1, 1, plan_dir=kept)
    monkeypatch.setattr(plan_cache, "code_digest", lambda: "another planner")
    planner.plan_model(model, 1, 1, plan_dir=kept)
    assert builds[0] == 2


def test_remote_code_and_refused_configs_are_never_kept(tmp_path, builds):
    kept = str(tmp_path / "plans")
    model = str(write_tiny_llama(tmp_path / "m"))
    planner.plan_model(model, 1, 1, plan_dir=kept, trust_remote_code=True)
    assert not os.path.exists(kept)
    bad = str(write_tiny_llama(tmp_path / "bad", num_attention_heads=3))  # 3 heads over TP=2
    for _ in range(2):
        with pytest.raises(UsageError):
            planner.plan_model(bad, 2, 1, plan_dir=kept)
    assert not os.path.exists(kept) or not os.listdir(kept)


def test_an_unreadable_kept_plan_is_planned_again(tmp_path, builds):
    model, kept = str(write_tiny_llama(tmp_path / "m")), str(tmp_path / "plans")
    plan = planner.plan_model(model, 1, 1, plan_dir=kept)
    (entry,) = os.listdir(kept)
    with open(os.path.join(kept, entry), "w") as f:
        f.write('{"not": "a plan"}')
    assert planner.plan_model(model, 1, 1, plan_dir=kept) == plan and builds[0] == 2


def test_values_transformers_refuses_are_one_line_naming_them(tmp_path):
    bad = str(write_tiny_llama(tmp_path / "bad", num_attention_heads=3))
    with pytest.raises(UsageError) as e:
        planner.plan_model(bad, 1, 1)
    assert str(e.value).startswith("config.json=model_type llama: transformers' LlamaConfig refuses")
    assert "not a multiple of the number of attention heads (3)" in str(e.value)
    assert "\n" not in str(e.value)
