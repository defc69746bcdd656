"""The nccl-tests parser on output in nccl-tests' own format (tests/fixtures/nccl_tests/README.md)."""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.deploy.nccl_tests import parse_nccl_tests, read_nccl_tests
from support import FIXTURES

HERE = os.path.join(FIXTURES, "nccl_tests")


def test_all_reduce_perf_gives_op_ranks_devices_and_out_of_place_times():
    r = read_nccl_tests(os.path.join(HERE, "all_reduce_perf_8xH200.txt"))
    assert (r.op, r.nranks, r.dtype, r.name) == ("all_reduce", 8, "float", "all_reduce_perf_8xH200.txt")
    assert r.devices == ("NVIDIA H200",) * 8
    assert len(r.points) == 8
    assert r.points[0] == (65536, 30.83)  # the out-of-place time, not the in-place 31.14
    assert r.points[-1] == (8388608, 80.69)
    assert [s for s, _ in r.points] == sorted(s for s, _ in r.points)


def test_output_without_version_lines_is_named_by_its_file():
    r = read_nccl_tests(os.path.join(HERE, "all_gather_perf_4xH200.txt"))
    assert (r.op, r.nranks) == ("all_gather", 4)
    assert r.points[0][0] == 65536


def test_old_columns_without_root_read_the_time_where_the_header_puts_it():
    r = read_nccl_tests(os.path.join(HERE, "alltoall_perf_2xH100_old_format.txt"))
    assert (r.op, r.nranks) == ("all_to_all", 2)
    assert r.points[0] == (65536, 10.92)
    assert r.devices[0] == "NVIDIA H100 80GB HBM3"


def _text(name: str) -> str:
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return f.read()


def test_the_op_can_be_named_when_neither_output_nor_file_name_says():
    text = _text("all_gather_perf_4xH200.txt")
    with pytest.raises(UsageError, match="--nccl_tests=run1.txt: does not say which test it is"):
        parse_nccl_tests(text, "run1.txt")
    assert parse_nccl_tests(text, "run1.txt", op="all_gather").op == "all_gather"
    with pytest.raises(UsageError, match="op must be one of"):
        parse_nccl_tests(text, "run1.txt", op="broadcast")


def test_output_of_another_binary_is_refused():
    text = _text("all_reduce_perf_8xH200.txt").replace("all_reduce_perf", "broadcast_perf")
    with pytest.raises(UsageError, match="is the output of broadcast_perf"):
        parse_nccl_tests(text, "b.txt")


def test_rows_without_the_rank_lines_or_the_header_are_refused():
    text = _text("all_reduce_perf_8xH200.txt")
    no_ranks = "\n".join(line for line in text.splitlines() if "Rank" not in line)
    with pytest.raises(UsageError, match="has no '#  Rank N Group ... device' lines"):
        parse_nccl_tests(no_ranks, "all_reduce.txt")
    rows_only = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    with pytest.raises(UsageError, match="has no nccl-tests column header"):
        parse_nccl_tests(rows_only, "all_reduce.txt")


def test_a_missing_file_names_the_flag():
    with pytest.raises(UsageError, match="--nccl_tests=/nonexistent/all_reduce.txt: cannot be read"):
        read_nccl_tests("/nonexistent/all_reduce.txt")
