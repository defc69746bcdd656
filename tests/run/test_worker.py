"""What the worker receives: a torch or quant Case travels to it as JSON (Case.to_dict) and is
rebuilt there (Case.from_dict) unchanged; Case.job picks the worker path."""

from __future__ import annotations

import json

from benchmark_model_kernels.cases.schema import Case
from helpers_runner import gemm_case, moe_case


def test_case_json_round_trip_gemm_and_moe():
    for c in (gemm_case(4096, skip="x"), moe_case()):
        assert Case.from_dict(c.to_dict()) == c
        assert Case.from_dict(json.loads(json.dumps(c.to_dict()))) == c  # through the pipe's JSON


def test_case_job_picks_the_worker_path():
    assert gemm_case(64).job == "driver"
    assert gemm_case(64, backend="torch").job == "torch"
    assert gemm_case(64, dtype="fp8", with_quant=True).job == "quant"
