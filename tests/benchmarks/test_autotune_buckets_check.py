"""benchmarks/autotune_buckets_check.py: how two runs' rows and autotune caches are compared."""

from __future__ import annotations

import importlib.util
import json
import os

from support import ROOT

_spec = importlib.util.spec_from_file_location("autotune_buckets_check",
                                               os.path.join(ROOT, "benchmarks", "autotune_buckets_check.py"))
assert _spec and _spec.loader
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def _row(cid, status="ok", median=10.0, p10=9.5, p90=10.5):
    return {"case_id": cid, "status": status, "median_us": median, "p10_us": p10, "p90_us": p90}


def test_rows_agree_within_five_percent_or_the_others_spread():
    a = [_row("x"), _row("y", median=20.0, p10=19.0, p90=21.0), _row("z", "unsupported")]
    b = [_row("x", median=10.4), _row("y", median=20.9, p10=20.8, p90=21.0), _row("z", "unsupported")]
    assert check.row_differences(a, b) == []
    far = [_row("x", median=12.0, p10=11.9, p90=12.1), b[1], b[2]]
    assert check.row_differences(a, far) == ["x: median 10.00 vs 12.00 us"]
    failed = [b[0], b[1], _row("z", "failed")]
    assert check.row_differences(a, failed) == ["z: status unsupported vs failed"]
    assert "the two runs have different cases" in check.row_differences(a, b[:2])


def test_tactics_are_compared_on_every_key_the_timed_run_saved(tmp_path):
    k1, k2 = "('bf16_gemm', 'CudnnBf16GemmRunner', ((512, 4096),))", "('bf16_gemm', 'X', ((8, 4096),))"
    default = {"_metadata": {"gpu": "NVIDIA H200"}, k1: ["CudnnBf16GemmRunner", [3, []]], k2: ["X", 1],
               "('bf16_gemm', 'X', ((256, 4096),))": ["X", 0]}
    timed = {"_metadata": {"gpu": "NVIDIA H200"}, k1: ["CudnnBf16GemmRunner", [3, []]], k2: ["X", 2]}
    (tmp_path / "all.json").write_text(json.dumps(default))
    (tmp_path / "timed.json").write_text(json.dumps(timed))
    compared, diff = check.tactic_differences(str(tmp_path / "all.json"), str(tmp_path / "timed.json"))
    assert compared == 2 and diff == [f"{k2}: all ['X', 1] vs timed ['X', 2]"]
