"""The driver's per-iteration times: recorded from its bench_gpu_time calls, or why not."""

from __future__ import annotations

import sys
import types

import pytest

from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run.driver_capture import ROUTINE_MODULES, capture_bench_calls, driver_spread
from benchmark_model_kernels.run.outcome import WorkerReply, classify_driver_case, row_from_case
from helpers_runner import gemm_case


@pytest.fixture
def fake_routines(monkeypatch):
    """routines.gemm as the driver has it: `bench_gpu_time` imported by name."""
    package = types.ModuleType("routines")
    package.__path__ = []
    gemm = types.ModuleType("routines.gemm")

    def bench_gpu_time(fn, dry_run_iters=None, repeat_iters=None, use_cuda_graph=False, input_args=()):
        return [0.010, 0.011, 0.012]

    gemm.bench_gpu_time = bench_gpu_time

    def routine():  # what testMmBf16 does: time, then take np.median of the list
        times = gemm.bench_gpu_time(fn=lambda: None, repeat_iters=3, use_cuda_graph=True)
        return sorted(times)[1]

    gemm.routine = routine
    monkeypatch.setitem(sys.modules, "routines", package)
    monkeypatch.setitem(sys.modules, "routines.gemm", gemm)
    monkeypatch.delitem(sys.modules, "routines.moe", raising=False)
    return gemm


def test_the_recorded_samples_are_the_ones_the_driver_takes_its_median_of(fake_routines):
    original = fake_routines.bench_gpu_time
    with capture_bench_calls() as calls:
        assert fake_routines.routine() == 0.011  # the driver's own result is unchanged
    assert fake_routines.bench_gpu_time is original
    assert calls == [{"samples_ms": [0.010, 0.011, 0.012], "cuda_graph": True, "launches_per_call": None,
                      "launch_note": ""}]
    spread = driver_spread(calls, 11.0)
    assert spread.samples_us == pytest.approx((10.0, 11.0, 12.0)) and spread.note == ""


@pytest.mark.parametrize("calls, median, words", [
    (None, 11.0, "recorded no bench_gpu_time calls"),
    ([], 11.0, "made no bench_gpu_time call through"),
    ([{"samples_ms": [0.01]}, {"samples_ms": [0.02]}], 10.0, "timed 2 bench_gpu_time calls"),
    ([{"samples_ms": [0.01, 0.03]}], 11.0, "is not the CSV's 11.0000 us"),
])
def test_no_samples_says_exactly_why(calls, median, words):
    spread = driver_spread(calls, median)
    assert spread.samples_us == () and words in spread.note


def test_a_driver_row_gets_percentiles_from_the_recorded_call():
    csv_row = {"routine": "mm_bf16", "median_time": "0.011", "std_time": "0.001", "backend": "cudnn"}
    reply = WorkerReply({"bench_calls": [{"samples_ms": [0.010, 0.011, 0.012, 0.011, 0.013]}]})
    out = classify_driver_case("", [csv_row], reply, RunSettings(), "cudnn", "mm_bf16")
    row = row_from_case(gemm_case(4096), out)
    assert row.status == "ok" and row.n_samples == 5 and row.p50_us == pytest.approx(11.0)
    assert row.p10_us == pytest.approx(10.4) and row.p99_us == pytest.approx(12.96)
    assert row.check == "passed" and "--refcheck" in row.check_note
    assert row.mode == "graph" and row.samples_us == pytest.approx([10.0, 11.0, 12.0, 11.0, 13.0])


def test_a_driver_row_without_samples_says_why_in_spread_note():
    csv_row = {"routine": "mm_bf16", "median_time": "0.011", "std_time": "0.001", "backend": "cudnn"}
    out = classify_driver_case("", [csv_row], WorkerReply({}), RunSettings(), "cudnn", "mm_bf16")
    row = row_from_case(gemm_case(4096), out)
    assert row.p50_us is None and row.n_samples is None and "recorded no bench_gpu_time" in row.spread_note


def test_the_routine_modules_are_the_gemm_moe_and_attention_families():
    assert ROUTINE_MODULES == ("routines.gemm", "routines.moe", "routines.attention")

