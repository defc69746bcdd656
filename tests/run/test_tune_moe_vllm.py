"""The files scripts/tune_moe.py writes, loaded by vLLM 0.33.0 itself: with VLLM_TUNED_CONFIG_FOLDER
pointing at the folder, vLLM's get_moe_configs finds every file by its own name rule and
try_get_optimal_moe_config returns the tuned tiles at every key (and the nearest key's between
them), for the layouts and schemes of the examples. The timings are the stand-in's
(tests/helpers_tune_moe.py); the files' names, layout and keys are the real ones. Needs vLLM
importable (CPU is enough):

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python -m pytest -m vllm \\
        tests/run/test_tune_moe_vllm.py
"""

from __future__ import annotations

import json
import os
import re

import pytest

from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.vllm_rules.moe_config_files import TUNER_BATCH_SIZES, nearest_key
from helpers_tune_moe import H200, StandIn, optimum, tune, vllm_files

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")]

#: (MODEL, TP, EP, schemes): the layouts of examples/h200/tuned_moe_configs/.
LAYOUTS = [
    ("qwen3-30b-a3b", 1, 1, ("bf16", "fp8_per_tensor", "fp8_block128")),
    ("qwen3-30b-a3b", 1, 8, ("bf16", "fp8_per_tensor", "fp8_block128")),
    ("deepseek-v3", 8, 8, ("fp8_block128",)),
    ("mixtral-8x7b", 2, 1, ("bf16", "fp8_per_token")),
]
NAME = re.compile(r"^E=(\d+),N=(\d+),device_name=NVIDIA_H200(?:,dtype=(\w+))?(?:,block_shape=\[(\d+),(\d+)\])?\.json$")


@pytest.fixture
def vllm_on_h200(monkeypatch):
    """vLLM's fused_moe module with its platform reporting an H200 (what get_config_file_name reads
    through the cached get_device_name_as_file_name) and its file cache cleared."""
    import vllm.model_executor.layers.fused_moe.fused_moe as fused_moe
    from vllm.platforms import current_platform
    from vllm.utils.platform_utils import get_device_name_as_file_name

    def clear() -> None:
        get_device_name_as_file_name.cache_clear()
        fused_moe.get_moe_configs.cache_clear()

    monkeypatch.setattr(current_platform, "get_device_name", lambda device_id=0: H200)
    clear()
    yield fused_moe
    monkeypatch.undo()
    clear()


@pytest.mark.parametrize("model, tp, ep, schemes", LAYOUTS)
def test_vllm_loads_every_written_file_and_gets_the_tuned_tiles_at_every_key(tmp_path, monkeypatch, vllm_on_h200,
                                                                             model, tp, ep, schemes):
    StandIn.made, StandIn.measured, StandIn.fail_at = [], [], set()
    rc, err, _ = tune(tmp_path, model, "--tp", str(tp), "--ep", str(ep), "--schemes", *schemes)
    assert rc == 0, err
    folder = tmp_path / "out"
    names = vllm_files(folder)
    assert len(names) == len(schemes)
    monkeypatch.setenv("VLLM_TUNED_CONFIG_FOLDER", str(folder))
    record = json.loads((folder / "tune_moe.json").read_text())
    fused_moe = vllm_on_h200
    for name in names:
        e, n, dtype, block_n, block_k = NAME.match(name).groups()
        e, n = int(e), int(n)
        block = [int(block_n), int(block_k)] if block_n else None
        assert fused_moe.get_config_file_name(e, n, dtype, block) == name
        fused_moe.get_moe_configs.cache_clear()
        configs = fused_moe.get_moe_configs(e, n, dtype, block[0] if block else None, block[1] if block else None)
        assert configs == {k: optimum(k) for k in TUNER_BATCH_SIZES}, name
        hidden = int(re.search(r"H=(\d+)", record["files"][name]["shape"]).group(1))
        top_k = int(re.search(r"top_k=(\d+)", record["files"][name]["shape"]).group(1))
        for m in sorted({*TUNER_BATCH_SIZES, 3, 20, 40, 100, 700, 5000}):
            tiles = fused_moe.try_get_optimal_moe_config((e, 2 * n, hidden), (e, hidden, n), top_k, dtype, m, block)
            assert tiles == optimum(nearest_key(list(TUNER_BATCH_SIZES), m)), (name, m)
    assert os.path.isfile(folder / "tune_moe.md")


#: The files the H200 run wrote (examples/h200/tuned_moe_configs/), as committed.
H200_FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "examples", "h200", "tuned_moe_configs")


def test_vllm_loads_the_committed_h200_files_and_gets_their_tiles_at_every_key(monkeypatch, vllm_on_h200):
    names = vllm_files(H200_FOLDER)
    assert len(names) == 7  # Qwen3-30B-A3B TP=1 and TP=1 EP=8 x 3 schemes, DeepSeek-V3 TP=8 EP=8 block-128
    monkeypatch.setenv("VLLM_TUNED_CONFIG_FOLDER", H200_FOLDER)
    with open(os.path.join(H200_FOLDER, "tune_moe.json")) as f:
        record = json.load(f)
    fused_moe = vllm_on_h200
    for name in names:
        with open(os.path.join(H200_FOLDER, name)) as f:
            written = {int(k): v for k, v in json.load(f).items() if k.isdigit()}
        e, n, dtype, block_n, block_k = NAME.match(name).groups()
        e, n = int(e), int(n)
        block = [int(block_n), int(block_k)] if block_n else None
        assert fused_moe.get_config_file_name(e, n, dtype, block) == name
        fused_moe.get_moe_configs.cache_clear()
        assert fused_moe.get_moe_configs(e, n, dtype, block[0] if block else None,
                                         block[1] if block else None) == written, name
        hidden = int(re.search(r"H=(\d+)", record["files"][name]["shape"]).group(1))
        top_k = int(re.search(r"top_k=(\d+)", record["files"][name]["shape"]).group(1))
        for m in sorted({*written, 3, 20, 100, 700, 5000}):
            tiles = fused_moe.try_get_optimal_moe_config((e, 2 * n, hidden), (e, hidden, n), top_k, dtype, m, block)
            assert tiles == written[nearest_key(sorted(written), m)], (name, m)
