"""The progress line and the ETA estimate."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.run.outcome import Outcome, row_from_case
from benchmark_model_kernels.run.progress import EtaEstimator, progress_line
from helpers_runner import gemm_case


def test_eta_ignores_start_up_and_skipped_cases_and_prices_each_job_kind():
    est = EtaEstimator()
    driver = [gemm_case(64 * i) for i in range(1, 6)]
    torch_case = gemm_case(64, backend="torch", name="t")
    quant = gemm_case(64, name="q", with_quant=True)
    skipped = gemm_case(64, name="s", skip="needs SM100+")
    est.record(driver[0], 30.0)  # worker start-up + JIT build
    est.record(skipped, 0.0)
    est.record(driver[1], 2.0)
    assert est.eta(driver[2:]) is None  # two timed cases: too early to say
    est.record(torch_case, 1.0)
    # driver: 2 s each (the 30 s start-up left out); torch's only case so far is its best guess;
    # quant has no case yet: the steady average of everything (2 s); skipped cases cost nothing.
    assert est.eta([driver[2], driver[3], torch_case, quant, skipped]) == pytest.approx(2 + 2 + 1 + 2)
    est.record(quant, 0.5)
    est.record(quant, 0.1)
    assert est.eta([quant, quant]) == pytest.approx(0.2)


def test_progress_line_says_the_eta_is_an_estimate():
    row = row_from_case(gemm_case(64), Outcome("ok", "", 12.34, 0.1, "cupti"))
    assert progress_line(3, 120, gemm_case(64), row, 75, 61).endswith(
        "... ok 12.3 us  (elapsed 1:15, ETA ~1:01)")
    assert progress_line(1, 120, gemm_case(64), row, 9, None).endswith("ETA after warm-up)")
