"""Which planner plans, on a machine without vLLM (the default test run): the rules, named first in
the preview; `--planner vllm` is one line saying how to install vLLM."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmark_model_kernels.crosscheck import planner_choice
from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from support import ROOT

pytestmark = pytest.mark.skipif(vllm_available(), reason="checks the machine without vLLM")


def _preview(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), "llama-3.1-8b",
                           "--print_only", *flags], capture_output=True, text=True, timeout=300)


def test_without_vllm_the_rules_plan_and_say_so():
    assert planner_choice.default_planner() == "rules"
    r = _preview()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# planner: rules (vllm_rules/, following vLLM 0.33.0; vLLM is not importable in "
                               "this Python)\n# model: llama-3.1-8b (bundled)\n")
    assert _preview("--planner", "rules").stdout.startswith("# planner: rules (vllm_rules/, following vLLM 0.33.0; "
                                                             "--planner rules)\n")


def test_planner_vllm_without_vllm_is_one_line():
    r = _preview("--planner", "vllm")
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: --planner=vllm: vLLM is not importable in this Python; install vLLM") \
        and line.endswith("or pass --planner rules")
