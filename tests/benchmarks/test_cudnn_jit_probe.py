"""benchmarks/cudnn_jit_probe.py: the experiment's order (what the cited H200 numbers compare) and
its command line. The probe itself needs a GPU; it is run there (examples/h200/sweep_speed/)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "benchmarks", "cudnn_jit_probe.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import cudnn_jit_probe as probe  # noqa: E402


def test_the_same_shape_runs_cold_then_again_then_without_the_cuda_jit_cache():
    first, again, disabled = probe.steps()[:3]
    assert first["spec"] == again["spec"] == disabled["spec"]
    assert first["spec"]["tune"] and first["env"] == again["env"] == {}
    assert disabled["env"] == {"CUDA_CACHE_DISABLE": "1"}


def test_the_side_by_side_shapes_are_run_again_in_one_process():
    steps = probe.steps()
    group = next(s for s in steps if "side_by_side" in s)
    after = steps[steps.index(group) + 1]
    assert [s["spec"]["shapes"][0] for s in group["side_by_side"]] == after["spec"]["shapes"]
    assert len({tuple(s["spec"]["shapes"][0]) for s in group["side_by_side"]}) == 4


def test_out_is_required():
    done = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True)
    assert done.returncode == 2 and "--out is required" in done.stderr


@pytest.mark.parametrize("flag", ["--help"])
def test_help_explains_by_example(flag):
    done = subprocess.run([sys.executable, SCRIPT, flag], capture_output=True, text=True)
    assert done.returncode == 0 and "--out" in done.stdout and "example:" in done.stdout
