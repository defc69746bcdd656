"""vllm_rules/moe_triton.py against vLLM 0.33.0's own functions: the carried tile tables, the tile
choice of every bundled MoE model's per-rank shape at the usual layouts on the GPUs vLLM ships
tables for, and the FP8 block refinement. Needs vLLM importable (CPU is enough):

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python -m pytest -m vllm \\
        tests/vllm_rules/test_moe_triton_vllm.py
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.vllm_rules import moe_triton as mt

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The bundled MoE models (plan/models/) and the layouts the reports run.
MODELS = ("qwen3-30b-a3b", "deepseek-v3", "kimi-k2", "gpt-oss-120b", "mixtral-8x7b")
LAYOUTS = ((1, 1), (2, 1), (4, 1), (8, 1), (1, 8), (8, 8))
#: Devices with tables (H100, H200 and its NVL, B200, GB200) and one without any.
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA B200", "NVIDIA GB200",
           "NVIDIA RTX 6000 Ada Generation")
#: Token counts of a step, before the EP/TP factor: the report's Ms and a few between keys.
MS = (1, 3, 8, 20, 64, 100, 512, 1000, 4096)


def _fused_moe():
    import vllm.model_executor.layers.fused_moe.fused_moe as fused_moe

    return fused_moe


@pytest.fixture
def on_device(vllm_device):
    """Set the device name vLLM's platform reports (what get_config_file_name reads through the
    functools.cache'd get_device_name_as_file_name)."""
    return lambda name: vllm_device(name, _fused_moe().get_moe_configs)


def test_carried_tables_are_the_installed_vllms(tile_tables_script):
    version, tables = tile_tables_script.shipped_tables()
    with open(mt._TABLES, encoding="utf-8") as f:
        assert f.read() == tile_tables_script.render(version, tables), "run benchmarks/vllm_tile_tables.py"
    import vllm

    assert mt.tables_vllm_version() == vllm.__version__


def _calls():
    """Every per-rank MoE call of the bundled models at LAYOUTS and MS, BF16 and FP8 W8A8, with the
    block-128 checkpoint's block shape as vLLM refines it for the shard."""
    from benchmark_model_kernels.plan import planner

    calls = set()
    for model in MODELS:
        for tp, ep in LAYOUTS:
            for entry in planner.plan_model(model, tp, ep).moe:
                for m in MS:
                    tokens = m * entry.tokens_per_m
                    for dtype, block in ((None, None), (mt.FP8_W8A8, None), (mt.FP8_W8A8, 128)):
                        shape = None
                        if block:
                            refined = mt.square_block_for_shard(block, entry.intermediate, entry.hidden)
                            if refined is None:
                                continue
                            shape = (refined, refined)
                        calls.add(mt.TritonMoeCall(tokens, entry.hidden, entry.intermediate, entry.experts,
                                                   entry.top_k, dtype, shape))
    return sorted(calls, key=repr)


def test_tile_choice_is_vllms(on_device):
    fused_moe = _fused_moe()
    calls = _calls()
    shipped = 0
    for device in DEVICES:
        on_device(device)
        for call in calls:
            ours = mt.vllm_tiles(call, device)
            assert ours.file_name == fused_moe.get_config_file_name(
                call.local_experts, call.intermediate, call.dtype, list(call.block_shape) if call.block_shape else None)
            theirs = fused_moe.try_get_optimal_moe_config(
                (call.local_experts, 2 * call.intermediate, call.hidden),
                (call.local_experts, call.hidden, call.intermediate), call.top_k, call.dtype, call.num_tokens,
                list(call.block_shape) if call.block_shape else None)
            theirs.pop("SPLIT_K", None)  # vLLM sets it to 1 for every call
            assert ours.config == theirs, (device, call, ours.describe())
            shipped += ours.m_key is not None
    assert shipped > 100  # the H100/H200/B200 tables are found, not only the defaults


@pytest.mark.parametrize("tp", (1, 2, 4, 8))
def test_block_refinement_is_vllms(tp):
    from vllm.model_executor.layers.fused_moe.oracle.fp8 import refine_fp8_moe_block_shape

    for inter in range(32, 2049, 32):
        for hidden in (2048, 2880, 4096, 7168, 5120, 1536):
            config = SimpleNamespace(intermediate_size_per_partition=inter, tp_size=tp, hidden_dim=hidden)
            theirs = refine_fp8_moe_block_shape(config, [128, 128])
            ours = mt.refined_block_shape((128, 128), inter, hidden, tp)
            assert ours == (tuple(theirs) if theirs else None), (inter, hidden, tp)
            assert mt.square_block_for_shard(128, inter, hidden) == (theirs[0] if theirs else 128 if inter % 128 == 0
                                                                      else None)
