"""Expert loads under uniform, Zipf and file routing, and the most-loaded-rank rule under EP."""

from __future__ import annotations

import json

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.deploy.routing import Routing, busiest_rank, expert_loads, rank_loads
from benchmark_model_kernels.vllm_rules.layout import Layout

EP8 = Layout.from_flags(1, 8)


def test_uniform_gives_the_mean_everywhere_and_no_imbalance():
    loads = expert_loads(128, 8, 64, Routing())
    assert loads == pytest.approx([64 * 8 / 128] * 128)
    assert rank_loads(loads, EP8) == pytest.approx([64.0 * 8 / 8] * 8)
    assert busiest_rank(loads, EP8) == pytest.approx((64.0, 1.0))


def test_zipf_puts_the_most_on_rank_0_and_keeps_the_pairs():
    loads = expert_loads(128, 8, 64, Routing("zipf", 1.2))
    assert sum(loads) == pytest.approx(64 * 8)
    assert loads == sorted(loads, reverse=True)
    per_rank = rank_loads(loads, EP8)
    assert per_rank.index(max(per_rank)) == 0
    top, imbalance = busiest_rank(loads, EP8)
    assert top == max(per_rank) and imbalance > 1


def test_no_expert_gets_more_pairs_than_tokens():
    loads = expert_loads(16, 4, 10, Routing("zipf", 3.0))
    assert max(loads) == pytest.approx(10.0)
    assert sum(loads) == pytest.approx(40.0)


@pytest.mark.parametrize("s", [0.0, 0.5, 1.0, 2.0])
def test_imbalance_is_at_least_one(s):
    for layout in (EP8, Layout.from_flags(2, 8), Layout.from_flags(1, 4)):
        assert busiest_rank(expert_loads(128, 8, 32, Routing("zipf", s)), layout)[1] >= 1.0


def test_without_ep_one_rank_runs_every_pair():
    loads = expert_loads(128, 8, 16, Routing("zipf", 1.0))
    assert rank_loads(loads, Layout.from_flags(8, 1)) == pytest.approx([128.0])
    assert busiest_rank(loads, Layout.from_flags(8, 1))[1] == 1.0


def test_uneven_experts_follow_vllm_linear_placement():
    loads = [1.0] * 10
    assert rank_loads(loads, Layout.from_flags(1, 4)) == [3.0, 3.0, 2.0, 2.0]  # remainder to the first ranks


def test_file_loads_in_json_and_csv(tmp_path):
    (tmp_path / "loads.json").write_text(json.dumps({"loads": [4, 0, 2, 2]}))
    r = Routing.from_flag(f"file:{tmp_path / 'loads.json'}")
    assert expert_loads(4, 1, 8, r) == pytest.approx([4.0, 0.0, 2.0, 2.0])
    (tmp_path / "loads.csv").write_text("expert,load\n1,1\n0,3\n")
    r = Routing.from_flag(f"file:{tmp_path / 'loads.csv'}")
    assert r.loads == (3.0, 1.0)
    assert busiest_rank(expert_loads(2, 1, 4, r), Layout.from_flags(1, 2)) == pytest.approx((3.0, 1.5))


def test_bad_routing_input_names_the_flag(tmp_path):
    with pytest.raises(UsageError, match="--routing=zipf:-1.0: the Zipf exponent must be a number >= 0"):
        Routing.from_flag("zipf:-1")
    with pytest.raises(UsageError, match="--routing=zipf:x"):
        Routing.from_flag("zipf:x")
    with pytest.raises(UsageError, match="--routing=skewed"):
        Routing.from_flag("skewed")
    (tmp_path / "short.json").write_text("[1, 2, 3]")
    r = Routing.from_flag(f"file:{tmp_path / 'short.json'}")
    with pytest.raises(UsageError, match="--routing=file:.*short.json: holds 3 per-expert loads; the model routes "
                                         "over 128 experts"):
        expert_loads(128, 8, 16, r)
    (tmp_path / "neg.json").write_text("[1, -2]")
    with pytest.raises(UsageError, match="--routing=file:.*every per-expert load must be a number >= 0"):
        Routing.from_flag(f"file:{tmp_path / 'neg.json'}")
    with pytest.raises(UsageError, match="--routing=file:/nonexistent.json: cannot be read"):
        Routing.from_flag("file:/nonexistent.json")
