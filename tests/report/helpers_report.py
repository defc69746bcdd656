"""Shared by the report tests: the HAND-MADE results.json fixtures (tests/fixtures/results/, see the
README there), a workdir holding one of them, and a Row with defaults."""

from __future__ import annotations

import json
import os
import shutil

from benchmark_model_kernels.report.analysis import Analysis, Entry
from benchmark_model_kernels.run.results import Row

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "results")
ROOT = os.path.dirname(os.path.dirname(HERE))
#: A real H200 run committed as an example workdir.
H200_QWEN = os.path.join(ROOT, "examples", "h200", "qwen3-30b-a3b_tp1", "results.json")


def fixture(name: str) -> dict:
    with open(os.path.join(FIXTURES, f"{name}.json")) as f:
        return json.load(f)


def workdir(tmp_path, name: str, sub: str | None = None) -> str:
    path = tmp_path / (sub or name)
    path.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, f"{name}.json"), path / "results.json")
    return str(path)


def entry(a: Analysis, name: str) -> Entry:
    return next(e for e in a.entries if e.name == name)


def row(**kw) -> Row:
    base = dict(case_id="c", kind="gemm", name="qkv_proj", modules="m", layers=1, m=1, dtype="fp8",
                backend="cudnn", routine="bmm_fp8", variant="", with_quant=False)
    base.update(kw)
    return Row(**base)
