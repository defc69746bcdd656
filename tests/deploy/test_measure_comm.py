"""The measured path: the same worker code as on GPUs, driven with the gloo backend on two CPU
processes rendezvousing on 127.0.0.1. Structure only: never a timing value."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.deploy.collectives import Collective
from benchmark_model_kernels.deploy.comm_times import MEASURED, CommModel
from benchmark_model_kernels.deploy.measure import measure_collectives, sizes_needed

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def test_two_gloo_processes_time_every_op_at_two_sizes():
    sizes = [4096, 65536]
    times = measure_collectives({op: sizes for op in OPS}, 2, backend="gloo", warmup=1, iters=3)
    assert sorted(times) == sorted(OPS)
    for points in times.values():
        assert [s for s, _ in points] == sizes  # multiples of 2 ranks x 4 B already
        assert all(us > 0 for _, us in points)
    model = CommModel(times, measured_ranks=2)
    t = model.time(Collective("c", "all_gather", 2, 4096, 1, "vllm/x.py: f"), "h200_nvlink")
    assert t.source == MEASURED and t.us == times["all_gather"][0][1]


def test_sizes_needed_groups_the_collectives_by_group_size_and_op():
    cs = [Collective("a", "all_reduce", 8, 100, 48, "s"), Collective("b", "all_reduce", 8, 100, 1, "s"),
          Collective("c", "all_gather", 8, 300, 1, "s"), Collective("d", "all_reduce", 2, 50, 1, "s")]
    assert sizes_needed(cs) == {2: {"all_reduce": [50]}, 8: {"all_reduce": [100], "all_gather": [300]}}


def test_nccl_without_the_gpus_is_refused():
    with pytest.raises(UsageError, match="--measure_comm=64: needs 64 GPUs"):
        measure_collectives({"all_reduce": [1024]}, 64)
