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


def test_tactics_are_compared_on_every_key_the_timed_run_saved():
    k1, k2 = "('bf16_gemm', 'CudnnBf16GemmRunner', ((512, 4096),))", "('bf16_gemm', 'X', ((8, 4096),))"
    default = {"_metadata": {"gpu": "NVIDIA H200"}, k1: ["CudnnBf16GemmRunner", [3, []]], k2: ["X", 1],
               "('bf16_gemm', 'X', ((256, 4096),))": ["X", 0]}
    timed = {"_metadata": {"gpu": "NVIDIA H200"}, k1: ["CudnnBf16GemmRunner", [3, []]], k2: ["X", 2]}
    compared, diff = check.tactic_differences(default, timed)
    assert compared == 2 and diff == [f"{k2}: all ['X', 1] vs timed ['X', 2]"]


def test_keys_and_rows_are_split_at_m1_where_both_settings_profile_one_bucket():
    k_bf16_1 = "('bf16_gemm', 'CudnnBf16GemmRunner', ((1, 14336), (14336, 4096), (0,)), (torch.bfloat16,))"
    k_fp8_8 = "('fp8_gemm', 'CublasFp8GemmRunner', ((1, 8, 4096), (1, 4096, 28672), ()), (torch.float8_e4m3fn,))"
    k_bf16_512 = "('bf16_gemm', 'X', ((512, 4096), (4096, 6144)), ())"
    assert (check.profiled_m(k_bf16_1), check.profiled_m(k_fp8_8), check.profiled_m(k_bf16_512)) == (1, 8, 512)
    assert check.profiled_m("('moe', 'Y', 3)") is None and check.row_m("gemm.qkv.m64.bf16.cudnn") == 64
    default = {"_metadata": {}, k_bf16_1: ["C", [0, []]], k_fp8_8: ["B", 0], k_bf16_512: ["X", 1]}
    timed = {"_metadata": {}, k_bf16_1: ["C", [7, []]], k_fp8_8: ["B", 0], k_bf16_512: ["X", 1]}
    a = [_row("gemm.d.m1.fp8.cudnn", median=23.7, p10=23.6, p90=23.8), _row("gemm.d.m8.fp8.cudnn"),
         _row("gemm.d.m512.bf16.x", "unsupported")]
    b = [_row("gemm.d.m1.fp8.cudnn", median=27.4, p10=27.3, p90=27.5), _row("gemm.d.m8.fp8.cudnn"),
         _row("gemm.d.m512.bf16.x", "unsupported")]
    got = check.control(default, timed, a, b)
    assert got == {"m1": {"tactics_compared": 1, "tactics_differ": 1, "rows_compared": 1, "rows_differ": 1},
                   "m_over_1": {"tactics_compared": 2, "tactics_differ": 0, "rows_compared": 1, "rows_differ": 0}}


def test_compare_reads_an_earlier_out_and_refuses_one_without_runs(tmp_path, capsys):
    earlier = tmp_path / "earlier"
    for label, median in (("all", 10.0), ("timed", 10.2)):
        (earlier / label).mkdir(parents=True)
        rows = [_row("gemm.q.m8.bf16.cudnn", median=median)]
        (earlier / label / "results.json").write_text(json.dumps({"rows": rows}))
        (earlier / f"{label}_autotune_cache.json").write_text(json.dumps({"_metadata": {}}))
    assert check.main(["--compare", str(earlier), "--out", str(tmp_path / "again")]) == 0
    record = json.loads((tmp_path / "again" / "autotune_buckets_check.json").read_text())
    assert record["row_differences"] == [] and record["control"]["m_over_1"]["rows_compared"] == 1
    assert check.main(["--compare", str(tmp_path / "none"), "--out", str(tmp_path / "again2")]) == 2
    assert "--compare=" in capsys.readouterr().err and not (tmp_path / "again2").exists()
    assert check.main(["--out", str(tmp_path / "again3")]) == 2


def test_a_pass_that_wrote_nothing_reads_as_no_rows(tmp_path):
    assert check.read_rows(str(tmp_path)) == ([], None)
    assert check.read_cache(str(tmp_path / "missing.json")) == {}
