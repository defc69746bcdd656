"""The committed Blackwell plan (examples/blackwell_plan/) is what this code plans: each release's
test lists regenerate, on a CPU, from the FlashInfer answers committed beside them, and each
release's own driver parser accepted every line (parser_check.json, written by
benchmarks/blackwell_plan.py in that release's environment)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os

import pytest

from benchmark_model_kernels.cases.capabilities import Capabilities
from support import ROOT

PLAN_DIR = os.path.join(ROOT, "examples", "blackwell_plan")
RELEASES = ("v0.6.17", "v0.6.18", "v0.7.4")
#: Releases whose driver source was at hand (no wheel ships benchmarks/, and the FlashInfer mirror
#: held no 0.7 tag: examples/blackwell_plan/README.md).
WITH_DRIVER = ("v0.6.17", "v0.6.18")


def _script():
    spec = importlib.util.spec_from_file_location(
        "blackwell_plan_under_test", os.path.join(ROOT, "benchmarks", "blackwell_plan.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _plan(model: str, tp: int, ep: int):
    from benchmark_model_kernels.plan.planner import plan_model

    return plan_model(model, tp, ep)


def _caps(release: str) -> Capabilities:
    with open(os.path.join(PLAN_DIR, release, "capabilities.json")) as f:
        return Capabilities.from_dict(json.load(f))


@pytest.mark.parametrize("release", RELEASES)
def test_committed_blackwell_test_lists_are_what_the_code_plans(release, monkeypatch):
    pytest.importorskip("torch")
    script = _script()
    monkeypatch.setattr(script, "plan_model", _plan)
    caps = _caps(release)
    assert caps.flashinfer.startswith(release[1:])
    for model, tp, ep in script.MODELS:
        with open(os.path.join(PLAN_DIR, release, script.testlist_name(model, tp, ep))) as f:
            committed = f.read()
        assert script.plan_testlist(model, tp, ep, caps) == committed, (release, model)


@pytest.mark.parametrize("release", RELEASES)
def test_each_releases_own_parser_accepted_every_line(release):
    with open(os.path.join(PLAN_DIR, release, "parser_check.json")) as f:
        check = json.load(f)
    script = _script()
    assert check["flashinfer"] == _caps(release).flashinfer
    assert set(check["files"]) == {script.testlist_name(*m) for m in script.MODELS}
    if release not in WITH_DRIVER:
        assert check["driver"] is None and "no benchmarks/" in check["why"]
        return
    for name, result in check["files"].items():
        assert result["runnable"] > 0 and result["rejected"] == [], name
