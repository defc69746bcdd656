"""The deployment view assembled from real per-rank results: the step of each layout, recipe, B and
context, its labels and sources, deployment.json against its schema, and the report's answers."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest

from benchmark_model_kernels.deploy.comm_times import CommModel
from benchmark_model_kernels.deploy.layouts import PlanOptions, layout_plans, parse_gpus
from benchmark_model_kernels.deploy.output import DEPLOYMENT_JSON, Deployment, document, write_deployment
from benchmark_model_kernels.deploy.report import answer_line, pareto_front, write_report
from benchmark_model_kernels.deploy.routing import Routing, busiest_rank, expert_loads
from benchmark_model_kernels.deploy.view import (
    MEASURED,
    MODELLED,
    Communication,
    LayoutRun,
    Target,
    Workload,
    answers,
    assemble,
)
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.cells import MOE, QUANT
from support import ROOT

#: Real H200 runs (examples/h200): Qwen3-30B-A3B at TP=1 with attention rows at KV 1024 and 32768,
#: and at TP=1 EP=8 (GEMM and MoE rows only).
TP1 = os.path.join(ROOT, "examples", "h200", "attention", "qwen3-30b-a3b_tp1", "results.json")
EP8 = os.path.join(ROOT, "examples", "h200", "vllm_default", "qwen3-30b-a3b_tp1_ep8", "results.json")
SCHEMA = os.path.join(ROOT, "references", "deployment.schema.json")


def load(path):
    with open(path) as f:
        return json.load(f)


def target(cluster):
    return Target(cluster, Communication(CommModel(), cluster.kind.comm_system))


@pytest.fixture(scope="module")
def one_gpu():
    cluster = parse_gpus("1xH200")
    work = Workload((1, 8, 64), (1024, 32768), ("bf16", "fp8"), routing=Routing())
    layouts = layout_plans(PlanOptions("qwen3-30b-a3b"), cluster, work.recipes)
    assert [lp.label for lp in layouts] == ["TP=1"]
    cells = assemble(LayoutRun(layouts[0], load(TP1), TP1), work, target(cluster))
    return Deployment("qwen3-30b-a3b", cluster, work, tuple(layouts), tuple(cells), ("deploy.py", "test"))


@pytest.fixture(scope="module")
def eight_gpus():
    cluster = parse_gpus("8xH200")
    zipf = Routing("zipf", 1.2)
    work = Workload((8, 64), (4096,), ("bf16",), routing=zipf)
    layouts = layout_plans(PlanOptions("qwen3-30b-a3b"), cluster, work.recipes)
    cells = []
    for lp in layouts:
        results = load(EP8) if lp.label == "TP=1 DP=8 EP" else None
        cells += assemble(LayoutRun(lp, results, EP8 if results else f"{lp.name} (not timed)"), work, target(cluster))
    return Deployment("qwen3-30b-a3b", cluster, work, tuple(layouts), tuple(cells))


def cell(dep, layout, recipe, batch, context):
    return next(c for c in dep.cells if (c.label, c.recipe, c.batch, c.context) == (layout, recipe, batch, context))


def test_step_is_the_reports_rollup_plus_attention(one_gpu):
    a = Analysis(load(TP1), TP1)
    for recipe, key in (("bf16", "bf16"), ("fp8", "fp8.per_tensor")):
        c = cell(one_gpu, "TP=1", recipe, 8, 1024)
        roll = a.rollup(key, 8, QUANT)
        att = a.attention.total(8, 1024, "bf16")
        assert c.recipe_key == key and c.fits and c.m == 8 and c.moe_tokens == 8
        assert c.moe.value == pytest.approx(roll.by_kind[MOE])
        assert c.gemm.value == pytest.approx(roll.total_us - roll.by_kind[MOE])
        assert c.attention.value == pytest.approx(att.total_us)
        assert c.comm.value == 0.0 and c.communication == ()  # one GPU: no collective
        assert c.step.value == pytest.approx(roll.total_us + att.total_us)
        assert c.tokens_per_s.value == pytest.approx(8 / (c.step.value / 1e6))
        assert c.per_gpu.value == pytest.approx(c.tokens_per_s.value)
        assert c.per_sequence.value == pytest.approx(1e6 / c.step.value)
        assert (c.gemm.label, c.attention.label, c.step.label, c.per_gpu.label) == (MEASURED, MEASURED, MODELLED,
                                                                                  MODELLED)
        assert c.gemm.source.startswith(TP1) and c.imbalance.value == 1.0


def test_a_cell_that_does_not_fit_has_a_reason_not_a_step(one_gpu):
    c = cell(one_gpu, "TP=1", "bf16", 64, 32768)
    assert not c.fits and c.step.value is None
    assert c.fit_reason.startswith("K/V of 64 sequences x 32768 tokens needs")
    assert c.step.reason == f"does not fit: {c.fit_reason}"


def test_under_ep_the_moe_waits_for_the_busiest_rank(eight_gpus):
    c = cell(eight_gpus, "TP=1 DP=8 EP", "bf16", 64, 4096)
    assert (c.m, c.moe_tokens) == (8, 64)
    _, imbalance = busiest_rank(expert_loads(128, 8, 64, Routing("zipf", 1.2)), eight_gpus.layouts[1].layout)
    assert imbalance > 1 and c.imbalance.value == pytest.approx(imbalance) and c.imbalance.label == MODELLED
    assert c.moe_uniform.label == MEASURED
    assert c.moe.value == pytest.approx(c.moe_uniform.value * imbalance) and c.moe.label == MODELLED
    names = [x.name for x in c.communication]
    assert names == ["MoE dispatch (all-gather)", "MoE combine (reduce-scatter)", "DP token-count sync"]
    assert all(x.time.source.startswith("typical, not measured here") for x in c.communication)
    assert c.comm.value == pytest.approx(sum(x.time.value * x.per_step for x in c.communication))
    # that run has no attention rows: no step, and the cell says why
    assert c.step.value is None and "has no attention rows" in c.step.reason


def test_refused_layouts_have_a_reason_in_every_cell(eight_gpus):
    for c in (c for c in eight_gpus.cells if c.label == "TP=1 DP=8"):
        assert not c.fits and c.step.value is None and c.step.reason.startswith("not planned: ")
        assert c.refused == c.step.reason == c.fit_reason
        assert c.comm.value is None and c.comm.reason == c.refused


@pytest.mark.parametrize("which", ["one_gpu", "eight_gpus"])
def test_deployment_json_is_valid_against_its_schema(which, request, tmp_path):
    dep = request.getfixturevalue(which)
    path = write_deployment(dep, str(tmp_path))
    assert os.path.basename(path) == DEPLOYMENT_JSON
    doc = load(path)
    jsonschema.validate(doc, load(SCHEMA))
    assert doc == json.loads(json.dumps(document(dep)))
    for c in doc["cells"]:  # every number labelled with its source, or a reason
        for key in ("gemm_us", "moe_us", "attention_us", "communication_us", "step_us", "tokens_per_s_per_gpu"):
            q = c[key]
            assert (q["value"] is None and q["reason"]) or (q["label"] in (MEASURED, MODELLED) and q["source"])


def test_schema_refuses_a_number_without_its_source(one_gpu):
    doc = document(one_gpu)
    doc["cells"][0]["step_us"] = {"value": 12.0}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, load(SCHEMA))


def test_answer_lines(one_gpu):
    found = {(a.batch, a.context): a for a in answers(one_gpu.cells, one_gpu.work)}
    best = found[(8, 1024)].best
    fp8, bf16 = cell(one_gpu, "TP=1", "fp8", 8, 1024), cell(one_gpu, "TP=1", "bf16", 8, 1024)
    assert best is (fp8 if fp8.step.value < bf16.step.value else bf16)
    line = answer_line(found[(8, 1024)])
    assert line.startswith(f"- **B=8, context 1024**: **TP=1, {'FP8 per-tensor' if best is fp8 else 'BF16'}**: ")
    assert f"{best.step.value:,.0f} us per step" in line and "tokens/s per GPU" in line and "next: TP=1, " in line
    assert answer_line(found[(64, 32768)]) == "- **B=64, context 32768**: no answer: no layout and recipe fits"


def test_report_leads_with_the_answer_and_draws_the_pareto(one_gpu, tmp_path):
    path = write_report(one_gpu, str(tmp_path))
    text = open(path).read()
    lines = text.splitlines()
    assert lines[0] == "# Deployment: qwen3-30b-a3b on 1xH200" and lines[2] == "## Answer"
    assert answer_line(answers(one_gpu.cells, one_gpu.work)[0]) in lines
    assert "`vllm bench serve`" in text and "## What is measured and what is modelled" in text
    assert "pipeline parallelism" in text.lower()
    assert "| TP=1 | BF16 | 64 | 32768 | 64 (64) | no | does not fit |" in text
    for context in (1024, 32768):
        assert f"![context {context}](fig_pareto_ctx{context}.png)" in text
        assert os.path.getsize(tmp_path / f"fig_pareto_ctx{context}.png") > 1000


def test_pareto_front_keeps_the_points_nothing_beats():
    points = [(1.0, 10.0), (2.0, 8.0), (1.5, 7.0), (3.0, 2.0), (0.5, 11.0)]
    assert pareto_front(points) == [4, 0, 1, 3]
