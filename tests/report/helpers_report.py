"""Shared by the report tests: the HAND-MADE results.json fixtures (tests/fixtures/results/, see the
README there), a workdir holding one of them, and a Row with defaults."""

from __future__ import annotations

import json
import os
import shutil

from benchmark_model_kernels.core.results_schema import Row
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.plan_entries import Entry

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "results")
ROOT = os.path.dirname(os.path.dirname(HERE))
#: A real H200 run in the row format before percentiles and correctness checks (Qwen3-30B-A3B TP=1,
#: FlashInfer 0.6.17, 2026-11-30), kept as a fixture: old runs must still load and re-render.
H200_QWEN = os.path.join(ROOT, "tests", "fixtures", "results", "h200_qwen3-30b-a3b_tp1_2026-11-30.json")


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


def gemm_row(name: str, m: int, dtype: str, backend: str, routine: str, us: float | None,
             variant: str = "", with_quant: bool = False, **kw) -> dict:
    """A results.json row dict of a GEMM (status ok when `us` is given). Keys left out of `kw`
    stay out of the dict, as in results written before they existed."""
    d = dict(case_id=f"gemm.{name}.m{m}.{dtype}.{backend}.{variant}{'.q' if with_quant else ''}",
             kind="gemm", name=name, modules=name, layers=kw.pop("layers", 2), m=m, dtype=dtype,
             backend=backend, routine=routine, variant=variant, with_quant=with_quant, n=64, k=32,
             status="ok" if us is not None else "failed", median_us=us, timer="cupti")
    d.update(kw)
    return d


def moe_row(m: int, dtype: str, backend: str, routine: str, us: float | None, variant: str = "",
            with_quant: bool = False, **kw) -> dict:
    """A results.json row dict of the "experts" MoE entry (see gemm_row)."""
    d = dict(case_id=f"moe.experts.m{m}.{dtype}.{backend}.{variant}{'.q' if with_quant else ''}",
             kind="moe", name="experts", modules="experts", layers=2, m=m, dtype=dtype,
             backend=backend, routine=routine, variant=variant, with_quant=with_quant, hidden=64,
             intermediate=128, experts=8, global_experts=8, top_k=2,
             status="ok" if us is not None else "failed", median_us=us, timer="cupti")
    d.update(kw)
    return d


def results_of(rows: list[dict], tp: int = 1, ep: int = 1, cc: str | None = "9.0",
               gemms: tuple[str, ...] = ("qkv_proj", "router"), moe: bool = True,
               model: dict | None = None, tokens_per_m: int | None = None) -> dict:
    """A results.json dict around `rows`: a plan of `gemms` (N=64 K=32, x2) and one MoE entry,
    on an H200 (compute capability `cc`; None records none). tokens_per_m=None leaves the key
    out of the MoE entry, as plans written before it did."""
    entry = dict(name="experts", modules=["experts"], hidden=64, intermediate=128, experts=8,
                 global_experts=8, top_k=2, activation="Swiglu", routing={"method": "renormalize"},
                 layers=2)
    if tokens_per_m is not None:
        entry["tokens_per_m"] = tokens_per_m
    plan = dict(schema_version=1, tp=tp, ep=ep,
                model=model or dict(name="hand-made", source="test", model_type="t", architecture="T"),
                gemms=[dict(name=g, modules=[g], n=64, k=32, layers=2, parallel="column") for g in gemms],
                moe=[entry] if moe else [], unsupported=[])
    gpu = {"name": "NVIDIA H200"} | ({"compute_capability": cc} if cc else {})
    return dict(schema_version=1, command=["scripts/benchmark_model.py", "hand-made"],
                environment={"gpu": gpu, "warnings": []}, settings={}, plan=plan, rows=rows)
