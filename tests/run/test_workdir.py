"""The workdir: the overwrite guard, the --dry_run files (testlist.txt, cases.json) and the case
summary."""

from __future__ import annotations

import io
import json
import os

import pytest

from benchmark_model_kernels.errors import UsageError
from benchmark_model_kernels.run import workdir as wd
from helpers_runner import gemm_case, run_cases, settings


def test_overwrite_guard(tmp_path):
    run_cases(tmp_path, [gemm_case(4096)])
    with pytest.raises(UsageError, match="already holds results.json; pass --resume"):
        wd.check_workdir(str(tmp_path / "w"), resume=False)
    assert wd.check_workdir(str(tmp_path / "w"), resume=True) == str(tmp_path / "w")
    with pytest.raises(UsageError, match="--workdir"):
        wd.check_workdir(None, resume=False)


def test_summary_table():
    table = wd.summary_table([gemm_case(1), gemm_case(2, skip="no"), gemm_case(3, backend="torch")])
    assert "bf16   cudnn" in table and "total" in table.splitlines()[-1]


def test_dry_run_writes_testlist_and_cases_json_only(tmp_path):
    workdir = str(tmp_path / "d")
    out = io.StringIO()
    cases = [gemm_case(4096), gemm_case(512, skip="needs SM100"), gemm_case(4096, backend="torch")]
    assert wd.dry_run(cases, settings(tmp_path), workdir, out) == 0
    assert sorted(os.listdir(workdir)) == ["cases.json", "testlist.txt"]
    listing = json.load(open(os.path.join(workdir, "cases.json")))["cases"]
    assert [c["job"] for c in listing] == ["driver", "driver", "torch"]
    assert listing[1]["skip_reason"] == "needs SM100" and listing[2]["driver_argv"] == []
    assert "dry run: 3 cases" in out.getvalue()
