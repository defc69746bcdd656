"""The whole decoder layer sequence-parallel in the CUDA class of vLLM's platform-split DeepSeek-V3.2
/ GLM-5.x family (vllm/models/deepseek_v32/nvidia/model.py: DeepseekV32DecoderLayer): when it
applies, by layout and model type."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.vllm_rules import sharding
from benchmark_model_kernels.vllm_rules.layout import Layout


@pytest.mark.parametrize("tp,ep,expected", [
    (8, 32, True),   # EP > TP > 1: DP = 4
    (2, 8, True),
    (8, 8, False),   # TP = EP: DP = 1, no sequence-parallel MoE
    (1, 8, False),   # TP = 1: nothing to split the tokens over
    (8, 1, False),   # no expert parallelism
])
def test_it_follows_sequence_parallel_moe(tp, ep, expected):
    layout = Layout.from_flags(tp, ep)
    assert sharding.dense_mlp_sequence_parallel(layout, "deepseek_v32") is expected
    assert sharding.dense_mlp_sequence_parallel(layout, "glm_moe_dsa") is expected


@pytest.mark.parametrize("model_type", ["deepseek_v3", "deepseek_v2", "kimi_k2", "glm4_moe", "qwen3_moe"])
def test_generic_classes_keep_their_dense_mlp_tp_sharded(model_type):
    # vllm/model_executor/models/deepseek_v2.py: DeepseekV2DecoderLayer builds the dense MLP
    # without is_sequence_parallel; only the MoE block is sequence-parallel there.
    assert not sharding.dense_mlp_sequence_parallel(Layout.from_flags(8, 32), model_type)


def test_the_families_are_the_ones_the_cuda_package_serves():
    # vllm/models/deepseek_v32/__init__.py: DeepseekV32ForCausalLM and GlmMoeDsaForCausalLM (GLM-5.x).
    assert sharding.SP_DECODER_LAYER_MODEL_TYPES == {"deepseek_v32", "glm_moe_dsa"}
