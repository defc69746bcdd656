"""vLLM's Triton fused-MoE tile choice and FP8 block refinement, restated (CPU, no vLLM).
tests/vllm_rules/test_moe_triton_vllm.py checks the same functions against vLLM itself."""

from __future__ import annotations

import json

import pytest

from benchmark_model_kernels.vllm_rules import moe_triton as mt


def qwen3_call(m: int, *, experts: int = 128, inter: int = 768, dtype: str | None = None,
               block: tuple[int, int] | None = None) -> mt.TritonMoeCall:
    """Qwen3-30B-A3B's experts on one rank: hidden 2048, top_k 8."""
    return mt.TritonMoeCall(m, 2048, inter, experts, 8, dtype, block)


def test_file_names_follow_vllms_rule():
    assert mt.config_file_name(qwen3_call(8), "NVIDIA H200") == "E=128,N=768,device_name=NVIDIA_H200.json"
    assert (mt.config_file_name(qwen3_call(8, dtype=mt.FP8_W8A8), "NVIDIA H200")
            == "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json")
    assert (mt.config_file_name(qwen3_call(8, inter=192, dtype=mt.FP8_W8A8, block=(64, 64)), "NVIDIA H200 NVL")
            == "E=128,N=192,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[64,64].json")
    assert mt.config_file_name(qwen3_call(8), "NVIDIA H100 80GB HBM3") == (
        "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json")


def test_qwen3_on_h200_bf16_takes_the_shipped_table_and_fp8_the_default():
    bf16 = mt.vllm_tiles(qwen3_call(512), "NVIDIA H200")
    assert bf16.m_key == 512 and "shipped E=128,N=768,device_name=NVIDIA_H200.json" in bf16.describe()
    assert set(bf16.config) == set(mt.CONFIG_KEYS)
    # vLLM 0.33.0 ships no FP8 W8A8 table for E=128, N=768 on the H200, and none at all for the
    # 16 local experts of TP=1 EP=8.
    fp8 = mt.vllm_tiles(qwen3_call(512, dtype=mt.FP8_W8A8), "NVIDIA H200")
    assert fp8.m_key is None and "get_default_config" in fp8.describe()
    assert fp8.config == mt.default_config(qwen3_call(512, dtype=mt.FP8_W8A8))
    for dtype in (None, mt.FP8_W8A8):
        assert mt.vllm_tiles(qwen3_call(4096, experts=16, dtype=dtype), "NVIDIA H200").m_key is None


def test_nearest_m_key_of_a_shipped_table():
    table = dict(mt.shipped_table("E=128,N=768,device_name=NVIDIA_H200.json") or ())
    assert {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096} <= set(table)
    assert mt.vllm_tiles(qwen3_call(20), "NVIDIA H200").m_key == 16  # 16 and 24 tie: the first
    assert mt.vllm_tiles(qwen3_call(21), "NVIDIA H200").m_key == 24
    assert mt.vllm_tiles(qwen3_call(100_000), "NVIDIA H200").m_key == 4096


@pytest.mark.parametrize("m, dtype, block, expected", [
    # (BLOCK_SIZE_M, N, K, GROUP_SIZE_M, num_warps, num_stages) of get_default_config
    (1, None, None, (16, 64, 128, 1, 4, 4)),
    (64, None, None, (32, 64, 128, 1, 4, 3)),
    (512, None, None, (64, 128, 64, 1, 8, 3)),
    (4096, None, None, (128, 128, 64, 1, 8, 3)),   # 32 tokens per expert: no grouping
    (512, mt.FP8_W8A8, None, (64, 128, 128, 1, 8, 3)),
    (4, mt.FP8_W8A8, (128, 128), (16, 64, 128, 1, 4, 4)),
    (8, mt.FP8_W8A8, (128, 128), (16, 64, 128, 1, 4, 3)),
    (64, mt.FP8_W8A8, (64, 64), (16, 64, 64, 32, 4, 3)),
    (512, mt.FP8_W8A8, (128, 128), (64, 128, 128, 32, 4, 3)),
])
def test_default_config(m, dtype, block, expected):
    config = mt.default_config(qwen3_call(m, dtype=dtype, block=block))
    assert tuple(config[k] for k in mt.CONFIG_KEYS) == expected and set(config) == set(mt.CONFIG_KEYS)


def test_default_config_groups_m_blocks_above_128_tokens_per_expert():
    assert mt.default_config(qwen3_call(4096, experts=16))["GROUP_SIZE_M"] == 16
    assert mt.default_config(qwen3_call(2048, experts=16))["GROUP_SIZE_M"] == 1


@pytest.mark.parametrize("inter, hidden, tp, refined", [
    (192, 2048, 4, (64, 64)),   # Qwen3-30B-A3B at TP=4
    (768, 2048, 1, None),       # divides: nothing to refine
    (384, 2048, 2, None),
    (96, 2048, 8, (32, 32)),
    (48, 2048, 16, None),       # gcd 16 < 32: vLLM refuses the shard
    (192, 7168, 4, (64, 64)),
])
def test_refined_block_shape(inter, hidden, tp, refined):
    assert mt.refined_block_shape((128, 128), inter, hidden, tp) == refined


def test_square_block_for_shard():
    assert mt.square_block_for_shard(128, 768, 2048) == 128
    assert mt.square_block_for_shard(128, 192, 2048) == 64
    assert mt.square_block_for_shard(128, 48, 2048) is None


def test_carried_tables_are_vllms_nvidia_bf16_and_fp8_tables():
    with open(mt._TABLES, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["vllm_version"] == mt.tables_vllm_version() == "0.33.0"
    assert doc["row"] == ["M", *mt.CONFIG_KEYS]
    assert len(doc["files"]) > 200
    for name, rows in doc["files"].items():
        parts = name[:-len(".json")].split(",")
        assert name.endswith(".json") and parts[0].startswith("E=") and parts[1].startswith("N="), name
        assert parts[2].startswith("device_name=NVIDIA_"), name
        assert all(not p.startswith("dtype=") or p == "dtype=fp8_w8a8" for p in parts), name
        keys = [row[0] for row in rows]
        assert len(set(keys)) == len(keys) and rows, name
        for row in rows:
            assert len(row) in (7, 8) and all(isinstance(v, int) and v > 0 for v in row[:7]), name
        table = mt.shipped_table(name)
        assert table is not None and [m for m, _ in table] == keys
