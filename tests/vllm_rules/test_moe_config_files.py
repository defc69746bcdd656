"""vLLM's tuned fused-MoE file rules (vllm_rules/moe_config_files.py) as vLLM 0.33.0 states them;
tests/run/test_tune_moe_vllm.py checks the same against vLLM's own functions where vLLM is installed."""

from __future__ import annotations

import json

import pytest

from benchmark_model_kernels.vllm_rules import moe_config_files as vf


@pytest.mark.parametrize("name, spelled", [
    ("NVIDIA H200", "NVIDIA_H200"),
    ("NVIDIA H200 NVL", "NVIDIA_H200"),  # the H200 family shares vLLM's H200 files
    ("NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB_HBM3"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA_A100-SXM4-80GB"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition"),
    ("AMD Instinct MI300X/OAM", "AMD_Instinct_MI300X_OAM"),
    ("NVIDIA H20", "NVIDIA_H20"),  # not an H200
])
def test_device_name_spelled_as_vllm_file_names(name, spelled):
    assert vf.device_name_as_file_name(name) == spelled


@pytest.mark.parametrize("scheme, name", [
    ("bf16", "E=128,N=768,device_name=NVIDIA_H200.json"),
    ("fp8_per_tensor", "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"),
    ("fp8_per_token", "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"),
    ("fp8_block128", "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"),
])
def test_file_name_per_scheme(scheme, name):
    dtype, block = vf.scheme_file_keys(scheme)
    assert vf.config_file_name(128, 768, "NVIDIA H200", dtype, block) == name


def test_file_name_leaves_out_a_block_shape_with_a_zero():
    assert vf.config_file_name(8, 7168, "NVIDIA H100", "fp8_w8a8", [0, 0]) == \
        "E=8,N=7168,device_name=NVIDIA_H100,dtype=fp8_w8a8.json"
    with pytest.raises(ValueError, match="scheme='nvfp4'"):
        vf.scheme_file_keys("nvfp4")


def test_nearest_key_takes_the_first_of_two_equally_near():
    keys = [1, 2, 4, 8, 16, 24, 32]
    assert vf.nearest_key(keys, 20) == 16  # 16 and 24 both 4 away: the first listed
    assert vf.nearest_key(list(reversed(keys)), 20) == 24
    assert vf.nearest_key(keys, 1000) == 32
    with pytest.raises(ValueError):
        vf.nearest_key([], 3)


@pytest.mark.parametrize("m, dtype, block, expected", [
    # get_default_config's general branch (BF16 and FP8 per-tensor/per-token)
    (1, None, None, (16, 64, 128, 1, 4, 4)),
    (64, None, None, (32, 64, 128, 1, 4, 3)),
    (96, None, None, (32, 128, 64, 1, 4, 3)),
    (512, None, None, (64, 128, 64, 1, 8, 3)),
    (4096, None, None, (128, 128, 64, 16, 8, 3)),  # 4096 // 16 experts > 128: grouped
    (4096, "fp8_w8a8", None, (128, 128, 128, 16, 8, 3)),
    # the block-quantized branch
    (4, "fp8_w8a8", (128, 128), (16, 64, 128, 1, 4, 4)),
    (8, "fp8_w8a8", (128, 128), (16, 64, 128, 1, 4, 3)),
    (16, "fp8_w8a8", (128, 128), (16, 128, 128, 1, 4, 3)),
    (64, "fp8_w8a8", (128, 128), (16, 128, 128, 32, 4, 3)),
    (65, "fp8_w8a8", (128, 128), (64, 128, 128, 32, 4, 3)),
])
def test_default_config_is_vllms(m, dtype, block, expected):
    assert vf.default_config(m, 16, 768, 2048, 8, dtype, block) == dict(zip(vf.TILE_KEYS, expected, strict=True))


def test_default_config_of_many_experts_stays_ungrouped():
    assert vf.default_config(4096, 128, 768, 2048, 8, None)["GROUP_SIZE_M"] == 1  # 32 tokens per expert


def test_tuner_space_is_vllms_product_and_block_filter():
    space = vf.tuner_space()
    assert len(space) == 5 * 4 * 3 * 4 * 2 * 4
    assert space[0] == dict(zip(vf.TILE_KEYS, (16, 32, 64, 1, 4, 2), strict=True))
    block = vf.tuner_space([128, 128])
    assert len(block) == 5 * 2 * 2 * 4 * 2 * 4
    assert {(c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"]) for c in block} == {(128, 128), (128, 256), (256, 128),
                                                                        (256, 256)}
    assert vf.TUNER_BATCH_SIZES[:5] == (1, 2, 4, 8, 16) and vf.TUNER_BATCH_SIZES[-1] == 4096
    assert len(vf.TUNER_BATCH_SIZES) == 18


def test_file_doc_round_trips_through_the_loaders_reading():
    tiles = dict(zip(vf.TILE_KEYS, (16, 64, 128, 1, 4, 3), strict=True))
    doc = vf.config_file_doc({64: tiles, 1: {**tiles, "num_stages": 5}}, "3.5.0")
    text = vf.config_file_text(doc)
    assert text.endswith("}\n") and text.startswith('{\n    "triton_version": "3.5.0",\n    "1": {\n')
    assert list(json.loads(text)) == ["triton_version", "1", "64"]
    assert list(json.loads(text)["1"]) == list(vf.TILE_KEYS)
    assert vf.parse_config_file(json.loads(text)) == {1: {**tiles, "num_stages": 5}, 64: tiles}


def test_parse_keeps_the_files_key_order_and_drops_other_keys():
    rocm = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1, "num_warps": 2,
            "num_stages": 2, "waves_per_eu": 0}
    parsed = vf.parse_config_file({"8": rocm, "1": rocm})
    assert list(parsed) == [8, 1] and "waves_per_eu" not in parsed[1]


@pytest.mark.parametrize("doc, message", [
    ([], "holds list"),
    ({"x": {}}, "key 'x'"),
    ({"1": 3}, "expected a config object"),
    ({"1": {"BLOCK_SIZE_M": 16}}, "BLOCK_SIZE_N=None"),
    ({"triton_version": "3.5"}, "no token-count keys"),
])
def test_parse_refuses_a_file_vllm_could_not_use(doc, message):
    with pytest.raises(ValueError, match=message):
        vf.parse_config_file(doc)
