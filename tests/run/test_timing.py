"""Percentile math of the timer's samples: the spread every timed row records."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmark_model_kernels.kernels.timing import PERCENTILES, measurement_from_times, percentiles, sum_percentiles


@pytest.mark.parametrize("samples", [[5.0], [3.0, 1.0], list(range(1, 31)), [7.1, 7.3, 7.2, 9.8, 7.2, 7.25, 30.0]])
def test_percentiles_are_numpys_linear_interpolation(samples):
    got = percentiles(samples)
    assert list(got) == [name for name, _ in PERCENTILES]
    for name, pct in PERCENTILES:
        assert got[name] == pytest.approx(float(np.percentile(samples, pct)), rel=1e-12)


def test_p50_is_the_median_and_the_percentiles_are_ordered():
    samples = [12.0, 11.0, 13.5, 12.2, 40.0, 11.9]
    p = percentiles(samples)
    assert p["p50_us"] == pytest.approx(float(np.median(samples)))
    assert p["p10_us"] <= p["p50_us"] <= p["p90_us"] <= p["p99_us"] <= 40.0


def test_one_outlier_moves_p99_but_not_p50():
    quiet = [10.0] * 99 + [10.0]
    noisy = [10.0] * 99 + [100.0]
    assert percentiles(noisy)["p50_us"] == percentiles(quiet)["p50_us"] == 10.0
    assert percentiles(noisy)["p99_us"] > 10.0


def test_no_samples_no_percentiles():
    assert percentiles([]) == {} and sum_percentiles([], [1.0]) == {}


def test_sum_percentiles_are_those_of_every_pairwise_sum():
    a, b = [10.0, 11.0, 12.0, 30.0], [1.0, 2.0]
    sums = [x + y for x, y in itertools.product(a, b)]
    got = sum_percentiles(a, b)
    for name, pct in PERCENTILES:
        assert got[name] == pytest.approx(float(np.percentile(sums, pct)))


def test_sum_percentiles_of_large_sample_sets_stay_close():
    rng = np.random.default_rng(0)
    a, b = list(rng.normal(100, 5, 2000)), list(rng.normal(10, 1, 2000))
    got = sum_percentiles(a, b)
    assert got["p50_us"] == pytest.approx(110.0, abs=1.0)
    assert got["p90_us"] - got["p10_us"] == pytest.approx(2 * 1.2816 * (26 ** 0.5), rel=0.1)


def test_measurement_keeps_every_sample_in_microseconds():
    m = measurement_from_times([0.010, 0.012, 0.011], "", cuda_graph=True)
    assert m.samples_us == pytest.approx((10.0, 12.0, 11.0)) and m.median_us == pytest.approx(11.0)
    assert m.timer == "cupti" and m.launches_per_call is None
