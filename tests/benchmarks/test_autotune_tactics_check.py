"""benchmarks/autotune_tactics_check.py: how capped runs are compared with the full cuDNN search."""

from __future__ import annotations

import importlib.util
import json
import os

from support import ROOT

_spec = importlib.util.spec_from_file_location("autotune_tactics_check",
                                               os.path.join(ROOT, "benchmarks", "autotune_tactics_check.py"))
assert _spec and _spec.loader
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def _row(cid, status="ok", median=10.0, p10=9.5, p90=10.5):
    return {"case_id": cid, "status": status, "median_us": median, "p10_us": p10, "p90_us": p90}


def test_a_capped_row_more_than_five_percent_slower_is_what_the_cap_costs():
    full = [_row("a", median=10.0), _row("b", median=20.0), _row("c", "unsupported")]
    capped = [_row("a", median=10.4), _row("b", median=23.0, p10=22.9, p90=23.1), _row("c", "unsupported")]
    assert check.slower_rows(full, capped) == [{"case_id": "b", "full_us": 20.0, "capped_us": 23.0, "ratio": 1.15}]
    got = check.ratios(full, capped)
    assert got["rows"] == 2 and got["min"] == 1.04 and got["max"] == 1.15
    assert abs(got["geomean"] - (1.04 * 1.15) ** 0.5) < 1e-3
    assert check.ratios(full, [_row("a", "failed")]) == {"rows": 0}


def test_compare_reads_each_cap_of_an_earlier_out_and_exits_1_when_one_disagrees(tmp_path, capsys):
    earlier = tmp_path / "earlier"
    key = "('bf16_gemm', 'CudnnBf16GemmRunner', ((8, 4096),))"
    for label, median, tactic in (("all", 10.0, 7), ("cap8", 10.2, 7), ("cap4", 13.0, 2)):
        (earlier / label).mkdir(parents=True)
        rows = [_row("gemm.q.m8.bf16.cudnn", median=median, p10=median - 0.1, p90=median + 0.1)]
        (earlier / label / "results.json").write_text(json.dumps({"rows": rows}))
        (earlier / f"{label}_autotune_cache.json").write_text(
            json.dumps({"_metadata": {}, key: ["CudnnBf16GemmRunner", [tactic, []]]}))
    assert check.main(["--compare", str(earlier), "--caps", "8", "--out", str(tmp_path / "a")]) == 0
    assert check.main(["--compare", str(earlier), "--caps", "8", "4", "--out", str(tmp_path / "b")]) == 1
    record = json.loads((tmp_path / "b" / check.RECORD).read_text())
    cap8, cap4 = record["comparisons"]
    assert cap8["row_differences"] == [] and cap8["tactic_differences"] == []
    assert cap4["slower"][0]["ratio"] == 1.3 and len(cap4["tactic_differences"]) == 1
    capsys.readouterr()
    assert check.main(["--compare", str(earlier), "--caps", "0", "--out", str(tmp_path / "c")]) == 2
    assert "--caps=0" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert check.main(["--compare", str(tmp_path / "none"), "--out", str(tmp_path / "d")]) == 2
