"""benchmarks/attention_fill_check.py's verdicts on rows made by hand: which cells agree, and
whether each row's note says where its K/V cache was drawn (the GPU runs are its own)."""

from __future__ import annotations

import importlib.util
import os

from support import ROOT

_spec = importlib.util.spec_from_file_location("attention_fill_check_under_test",
                                               os.path.join(ROOT, "benchmarks", "attention_fill_check.py"))
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

NOTE = "K/V filled on the GPU (the driver's torch.randn, 537 M elements, ...)"


def row(m=8, kv=32768, median=40.0, p10=39.0, p90=41.0, reason="", status="ok", backend="fa2_tc"):
    return {"case_id": f"attention.attn.decode.m{m}.kv{kv}.bf16.{backend}", "status": status, "reason": reason,
            "median_us": median if status == "ok" else None, "p10_us": p10, "p90_us": p90, "batch_size": m,
            "kv_len": kv, "num_kv_heads": 8, "head_dim_qk": 128, "page_size": 16, "kv_lora_rank": 0}


def test_the_kv_cache_size_is_the_drivers():
    assert check.kv_elements(row()) == 8 * 2048 * 2 * 8 * 16 * 128 == 536_870_912
    assert check.kv_elements(row(m=1, kv=1024)) == 2_097_152  # below the threshold: the driver's own fill
    assert check.kv_elements({**row(), "kv_lora_rank": 512}) == 0  # MLA draws on the device itself


def test_medians_within_the_tolerance_or_each_others_spread_agree():
    near = check.cell_verdict(row(median=40.5, reason=NOTE), row(median=40.0), 0.03)
    assert near["agree"] and near["noted_right"] and near["rel_diff"] == 0.0125
    wide = check.cell_verdict(row(median=44.0, p10=38.0, p90=46.0, reason=NOTE),
                              row(median=40.0, p10=38.0, p90=46.0), 0.03)
    assert wide["agree"] and "inside each other's p10-p90" in wide["why"]
    far = check.cell_verdict(row(median=44.0, reason=NOTE), row(median=40.0), 0.03)
    assert not far["agree"] and far["why"].startswith("+10.00%")


def test_each_row_must_say_where_its_kv_was_drawn():
    assert not check.cell_verdict(row(), row(), 0.03)["noted_right"]  # a large cell without the note
    assert not check.cell_verdict(row(reason=NOTE), row(reason=NOTE), 0.03)["noted_right"]  # CPU run noted
    small = check.cell_verdict(row(m=1, kv=1024), row(m=1, kv=1024), 0.03)
    assert small["noted_right"] and not small["gpu_filled"]
    assert not check.cell_verdict(row(m=1, kv=1024, reason=NOTE), row(m=1, kv=1024), 0.03)["noted_right"]


def test_a_cell_one_run_lacks_or_did_not_time_does_not_agree():
    cells = check.compare([row(reason=NOTE), row(m=1, kv=1024)], [row(), row(kv=1024, backend="cudnn")], 0.03)
    assert [c["agree"] for c in cells] == [True, False, False]
    assert cells[1]["why"] == "not in the CPU-fill run" and cells[2]["why"] == "not in the GPU-fill run"
    failed = check.cell_verdict(row(status="failed"), row(), 0.03)
    assert not failed["agree"] and failed["why"] == "not timed in both runs"
