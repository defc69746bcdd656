"""Fixtures of the report tests: `tiny`, the Analysis of tiny_mixed.json (hand-made; the expected
numbers in the tests are worked out by hand from it, in the comments next to them)."""

from __future__ import annotations

import pytest
from helpers_report import fixture

from benchmark_model_kernels.report.analysis import Analysis


@pytest.fixture(scope="module")
def tiny() -> Analysis:
    return Analysis(fixture("tiny_mixed"), "tiny")
