"""Collective times: measured here, then nccl-tests files, then the bundled tables; log-log
interpolation within one group size; every value names its source."""

from __future__ import annotations

import json
import math
import os

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.deploy import comm_times
from benchmark_model_kernels.deploy.collectives import Collective
from benchmark_model_kernels.deploy.comm_times import SYSTEMS, CommModel, interpolate, system_for_gpu
from benchmark_model_kernels.deploy.nccl_tests import read_nccl_tests
from support import FIXTURES


def coll(op: str, group: int, nbytes: int, kind: str = "EP") -> Collective:
    return Collective("c", op, group, nbytes, 1, "vllm/x.py: f", kind)


def _table(system: str) -> dict:
    with open(os.path.join(comm_times.DATA_DIR, f"comm_{system}.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("system", SYSTEMS)
def test_bundled_table_covers_every_op_at_2_4_8_ranks_and_cites_its_sources(system):
    data = _table(system)
    assert data["label"] == "typical, not measured here"
    for src in data["sources"].values():
        assert src["url"].startswith("https://") and src["date"] and src["what"]
    assert {(t["op"], t["ranks"]) for t in data["tables"]} == {
        (op, n) for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") for n in (2, 4, 8)}
    assert sum(t["how"] == "published" for t in data["tables"]) == 1
    for t in data["tables"]:
        assert t["derivation"]


@pytest.mark.parametrize("system", SYSTEMS)
def test_bundled_times_follow_the_nccl_tests_busbw_formulas_from_the_published_busbw(system):
    """Each table's time = size x factor(op, n) / busbw, the busbw the cited source published at that
    size (capped where the table says): the derivation its entry states, recomputed here."""
    data = _table(system)
    busbw = dict((s, b) for s, b in data["published"]["busbw_gbps"])
    for t in data["tables"]:
        n = t["ranks"]
        factor = 2 * (n - 1) / n if t["op"] == "all_reduce" else (n - 1) / n
        cap = t["busbw_cap_gbps"] or math.inf
        for size, us in t["points"]:
            assert us == pytest.approx(size * factor / (min(busbw[size], cap) * 1e3), abs=0.006)


def test_published_h200_all_reduce_reads_as_its_table_says():
    # Azure ND H200 v5: 1 MiB all-reduce at 52.96 GB/s busbw on 8 ranks -> 34.65 us
    t = CommModel().time(coll("all_reduce", 8, 1 << 20, "TP"), "h200_nvlink")
    assert t.us == pytest.approx(1048576 * 1.75 / 52.96e3, abs=0.01)
    assert t.source.startswith("typical, not measured here: 8x H200")
    assert "Azure/AI-benchmarking-guide" in t.source
    assert "custom all-reduce" in t.note  # a TP all-reduce: vLLM's own kernel is faster there


def test_derived_entries_say_so():
    t = CommModel().time(coll("all_gather", 4, 1 << 20), "h100_nvlink")
    assert t.us is not None and t.us > 0
    assert "derived:" in t.note


def test_interpolation_is_log_log_and_says_when_it_extrapolates():
    pts = [(1000, 10.0), (100000, 1000.0)]
    us, note = interpolate(pts, 10000)
    assert us == pytest.approx(100.0) and note.startswith("interpolated between 1000 B and 100000 B")
    us, note = interpolate(pts, 1000000)
    assert us == pytest.approx(10000.0) and note.startswith("extrapolated above the largest size")
    us, note = interpolate(pts, 10)
    assert us == 10.0 and note.startswith("extrapolated below the smallest size")
    assert interpolate(pts, 1000) == (10.0, "")


def test_measured_beats_nccl_tests_files_beats_the_table():
    ar_file = read_nccl_tests(os.path.join(FIXTURES, "nccl_tests", "all_reduce_perf_8xH200.txt"))
    ag_file = read_nccl_tests(os.path.join(FIXTURES, "nccl_tests", "all_gather_perf_4xH200.txt"))
    model = CommModel({"all_reduce": [(65536, 7.0), (131072, 8.0)]}, measured_ranks=8, nccl_tests=[ar_file, ag_file])
    measured = model.time(coll("all_reduce", 8, 65536), "h200_nvlink")
    assert (measured.us, measured.source) == (7.0, "measured here")
    from_file = model.time(coll("all_gather", 4, 65536), "h200_nvlink")
    assert from_file.source == "nccl-tests file all_gather_perf_4xH200.txt"
    assert from_file.us == ag_file.points[0][1]
    table = model.time(coll("all_reduce", 4, 65536), "h200_nvlink")  # measured and file are at 8 ranks
    assert table.source.startswith("typical, not measured here")


def test_a_group_size_no_source_has_gives_no_value_with_the_reason():
    t = CommModel().time(coll("all_reduce", 3, 65536), "h200_nvlink")
    assert t.us is None and t.source == "none"
    assert "no all_reduce at 3 ranks" in t.note and "--nccl_tests" in t.note


def test_measured_times_need_their_group_size():
    with pytest.raises(UsageError, match="measured_ranks=0"):
        CommModel({"all_reduce": [(1024, 5.0)]})
    with pytest.raises(UsageError, match="op must be one of"):
        CommModel({"broadcast": [(1024, 5.0)]}, measured_ranks=2)


def test_gpu_names_map_to_their_tables_and_unknown_systems_are_refused():
    assert system_for_gpu("NVIDIA H200") == "h200_nvlink"
    assert system_for_gpu("H100") == "h100_nvlink"
    assert system_for_gpu("B200") == "b200_nvlink"
    with pytest.raises(UsageError, match="--gpus=A100: has no bundled communication table"):
        system_for_gpu("A100")
    with pytest.raises(UsageError, match="--system=a100_nvlink"):
        CommModel().time(coll("all_reduce", 8, 1024), "a100_nvlink")
