"""Plans of DeepSeek-V3.2 and GLM-5.1 as vLLM's CUDA class runs them at EP > TP > 1: the first
dense layers' MLP replicated at full width on ceil(M/TP) rows (vllm/models/deepseek_v32/nvidia/
model.py: DeepseekV32DecoderLayer, `DeepseekV2MLP(is_sequence_parallel=...)`)."""

from __future__ import annotations

import json

from plan_helpers import gemms, plan_of

from support import shared_config_dir


def _rows(plan) -> dict[str, int]:
    return {g.name: g.m_divisor for g in plan.gemms}


def test_deepseek_v32_dense_mlp_at_tp8_ep32():
    # intermediate_size 18432, hidden 7168, first_k_dense_replace 3: gate_up 2*18432 x 7168 and
    # down 7168 x 18432 on every rank, on ceil(M/8) rows (TP-sharded they would be 4608 and 2304).
    plan = plan_of("deepseek-v3.2", 8, 32)
    g, rows = gemms(plan), _rows(plan)
    assert g["gate_up_proj"] == (36864, 7168, 3, "replicated", False)
    assert g["down_proj"] == (7168, 18432, 3, "replicated", False)
    assert rows["gate_up_proj"] == rows["down_proj"] == 8
    # Attention runs on the all-gathered tokens: TP-sharded on all M rows.
    assert g["o_proj"] == (7168, 128 // 8 * 128, 61, "row", False) and rows["o_proj"] == 1
    assert any("sequence-parallel decoder layers" in n for n in plan.model.notes)


def test_glm51_dense_mlp_at_tp4_ep8():
    raw = json.load(open(f"{shared_config_dir('glm-5.1')}/config.json"))
    inter, hidden, dense = raw["intermediate_size"], raw["hidden_size"], raw["first_k_dense_replace"]
    plan = plan_of("glm-5.1", 4, 8)
    g, rows = gemms(plan), _rows(plan)
    assert g["gate_up_proj"] == (2 * inter, hidden, dense, "replicated", False)
    assert g["down_proj"] == (hidden, inter, dense, "replicated", False)
    assert rows["gate_up_proj"] == rows["down_proj"] == 4


def test_no_sequence_parallel_layout_keeps_the_dense_mlp_tp_sharded():
    g = gemms(plan_of("deepseek-v3.2", 8, 8))  # TP = EP: DP 1
    assert g["gate_up_proj"] == (36864 // 8, 7168, 3, "column", False)
    assert g["down_proj"] == (7168, 18432 // 8, 3, "row", False)


def test_deepseek_v3_generic_class_keeps_the_dense_mlp_tp_sharded():
    g = gemms(plan_of("deepseek-v3", 8, 32))
    assert g["gate_up_proj"] == (36864 // 8, 7168, 3, "column", False)
