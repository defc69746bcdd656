"""cells.py: the module-kind table, the best cell and its status, the +quant basis and crossover
texts, checked on rows built by hand."""

from __future__ import annotations

import pytest
from helpers_report import row

from benchmark_model_kernels.report.cells import (
    ATTN,
    LM_HEAD,
    MLP,
    MOE,
    OTHER,
    ROUTER,
    Cell,
    best_cell,
    crossover,
    module_kind,
    rows_on_quant_basis,
)

# --------------------------------------------------------------------------- module kinds


@pytest.mark.parametrize("name,kind,expected", [
    ("qkv_proj", "gemm", ATTN), ("o_proj", "gemm", ATTN), ("mla.q_b_proj", "gemm", ATTN),
    ("gdn.in_proj_qkvz", "gemm", ATTN), ("mamba.in_proj", "gemm", ATTN), ("indexer.wq_b", "gemm", ATTN),
    ("gate_up_proj", "gemm", MLP), ("gate_up_proj[dense]", "gemm", MLP), ("up_proj", "gemm", MLP),
    ("down_proj[dense]", "gemm", MLP), ("shared_expert.gate_up_proj", "gemm", MLP),
    ("shared_expert.down_proj", "gemm", MLP),
    ("router", "gemm", ROUTER), ("shared_expert_gate", "gemm", ROUTER),
    ("lm_head", "gemm", LM_HEAD), ("experts", "moe", MOE), ("something_new", "gemm", OTHER),
    ("mlatent_proj", "gemm", OTHER),  # "mla." is a prefix family, not a substring match
])
def test_module_kind_table(name, kind, expected):
    assert module_kind(name, kind) == expected


def test_every_planner_role_has_a_roll_up_kind():
    from benchmark_model_kernels.plan.merge import ROLE_ORDER

    for role in ROLE_ORDER:
        name = role + "x" if role.endswith(".") else role
        assert module_kind(name) != OTHER, role


# --------------------------------------------------------------------------- cells


def test_best_cell_status_precedence_and_bad_ok_rows():
    failed = row(status="failed", reason="boom")
    unsup = row(status="unsupported", reason="sm90", backend="cutlass")
    assert best_cell([failed, unsup]).status == "failed"  # anything unexpected outranks "unsupported"
    assert best_cell([unsup]).status == "unsupported"
    assert best_cell([]).status == "not measured"
    # an "ok" row without a usable time is not a number
    c = best_cell([row(status="ok", median_us=None), row(status="ok", median_us=float("nan"))])
    assert c.us is None and c.status == "failed" and "ok row without a time" in c.reason


def test_rows_on_quant_basis_keeps_a_failed_quant_twin():
    k = row(status="ok", median_us=4.0)
    q = row(status="failed", with_quant=True, reason="quant crashed")
    other = row(backend="torch", routine="torch._scaled_mm", variant="per_tensor", status="ok", median_us=9.0)
    picked = rows_on_quant_basis([k, q, other])
    assert q in picked and k not in picked and other in picked
    assert best_cell(picked).us == 9.0


# --------------------------------------------------------------------------- crossovers


def _c(us):
    return Cell(row(status="ok", median_us=us), "ok") if us is not None else Cell(None, "failed", "x")


def test_crossover_text_cases():
    ms = [1, 8, 64, 512]
    base = [_c(10), _c(10), _c(10), _c(10)]
    assert crossover(base, [_c(11)] * 4, ms).text() == "never in this sweep (M=1..512)"
    x = crossover(base, [_c(11), _c(9), _c(12), _c(8)], ms)
    assert x.first_win == 8 and x.text() == "M=8 (loses again at M=64)"
    # a hole below the crossover is named: the crossover might be earlier
    x = crossover(base, [_c(None), _c(11), _c(9), _c(8)], ms)
    assert x.text() == "M=64; no data at M=1"
    assert crossover(base, [_c(10)] * 4, ms).first_win is None  # a tie is not a win
