"""checkpoint_fp8_scheme: the FP8 scheme vLLM runs a checkpoint with, from real and worked configs."""

from __future__ import annotations

import json
import os

import pytest

from benchmark_model_kernels.vllm_rules.quant_config import FP8_SCHEMES, checkpoint_fp8_scheme
from support import SHARED_CONFIGS


@pytest.mark.parametrize("qc, scheme", [
    (None, "per_tensor"),
    ({}, "per_tensor"),
    ({"quant_method": "fp8", "activation_scheme": "static"}, "per_tensor"),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "per_tensor"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "block128"),
    ({"quant_method": "fp8", "weight_block_size": [64, 64]}, ""),
    ({"quant_method": "fbgemm_fp8"}, "per_token"),
    ({"quant_method": "mxfp4"}, ""),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "per_tensor"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, ""),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"type": "float", "num_bits": 8, "strategy": "channel"},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": True}}}},
     "per_token"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"type": "float", "num_bits": 8, "strategy": "tensor"},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "tensor"}}}}, "per_tensor"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"type": "float", "num_bits": 8, "strategy": "block", "block_structure": [128, 128]},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "group", "group_size": 128}}}},
     "block128"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"type": "int", "num_bits": 4, "strategy": "group"}}}}, ""),
])
def test_scheme_per_quantization_config(qc, scheme):
    got, why = checkpoint_fp8_scheme(qc)
    assert got == scheme
    assert why  # every answer says which keys decided it
    assert got in FP8_SCHEMES + ("",)


@pytest.mark.parametrize("model, scheme", [
    ("deepseek-v3", "block128"), ("kimi-k2", "block128"), ("minimax-m2.7", "block128"),
    ("gpt-oss-20b", ""), ("llama-3.1-8b", "per_tensor"), ("qwen3-30b-a3b", "per_tensor"),
])
def test_shared_configs(model, scheme):
    path = os.path.join(SHARED_CONFIGS, model, "config.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    with open(path) as f:
        raw = json.load(f)
    assert checkpoint_fp8_scheme(raw.get("quantization_config"))[0] == scheme


def test_config_object_with_to_dict():
    class Quant:
        def to_dict(self):
            return {"quant_method": "fp8", "weight_block_size": [128, 128]}

    assert checkpoint_fp8_scheme(Quant())[0] == "block128"
