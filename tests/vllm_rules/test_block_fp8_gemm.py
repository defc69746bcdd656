"""vllm_rules/block_fp8_gemm.py: the tiles vLLM's Triton block-FP8 dense GEMM runs a call with."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.plan import planner
from benchmark_model_kernels.vllm_rules import block_fp8_gemm as bg

H200 = "NVIDIA H200"


def test_file_name_spells_the_device_as_vllm_does():
    assert (bg.config_file_name(2112, 7168, "NVIDIA H100 80GB HBM3")
            == "N=2112,K=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json")
    # No fused-MoE H200 rule here: an H200 NVL looks for its own name.
    assert "device_name=NVIDIA_H200_NVL," in bg.config_file_name(1536, 7168, "NVIDIA H200 NVL")


def test_a_shape_without_a_table_runs_the_default_config():
    tiles = bg.vllm_tiles(8, 6144, 4096, H200)  # Llama-3.1-8B qkv_proj: vLLM ships no table
    assert tiles.m_key is None
    assert tiles.config == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32,
                            "num_warps": 4, "num_stages": 2}
    assert "default config" in tiles.describe() and tiles.file_name in tiles.describe()


@pytest.mark.parametrize("m, key", [(1, 1), (3, 2), (6, 4), (20, 16), (5000, 4096)])
def test_a_shipped_table_gives_the_entry_of_the_nearest_m_key(m, key):
    name = bg.config_file_name(1536, 7168, H200)  # DeepSeek-V3 q_a_proj-sized, shipped for the H200
    table = bg.shipped_table(name)
    assert table is not None
    tiles = bg.vllm_tiles(m, 1536, 7168, H200)
    keys = [k for k, _ in table]
    assert tiles.m_key == min(keys, key=lambda k: abs(k - m)) == key
    assert tiles.config == dict(table)[key] and f"M key {key}" in tiles.describe()


def test_deepseek_v3_dense_shapes_find_vllms_h200_tables():
    plan = planner.plan_model("deepseek-v3", 1, 1)
    found = [g.name for g in plan.gemms if bg.vllm_tiles(8, g.n, g.k, H200).m_key is not None]
    assert len(found) >= 3, found  # the attention projections vLLM tuned for DeepSeek-V3


def test_the_carried_tables_hold_whole_tiles():
    for name in ("N=1536,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",):
        for _, config in bg.shipped_table(name) or ():
            assert set(config) == set(bg.CONFIG_KEYS) and config["BLOCK_SIZE_K"] == 128
