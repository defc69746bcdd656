"""Weight memory per rank (cases/weights.py), against parameter counts the model cards give."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.cases.weights import weight_bytes, weight_memory_line

GIB = 2**30


@pytest.fixture(scope="module")
def plan_model():
    pytest.importorskip("torch")
    from benchmark_model_kernels.plan.planner import plan_model

    return plan_model


def test_llama_3_1_8b_holds_its_non_embedding_parameters(plan_model):
    # 8.03e9 parameters, of which the 128256 x 4096 input embedding (not a GEMM) is 0.525e9.
    plan = plan_model("llama-3.1-8b", 1, 1)
    assert weight_bytes(plan, "bf16") == pytest.approx((8.03e9 - 0.525e9) * 2, rel=0.01)
    # FP8 halves every GEMM but lm_head, which vLLM keeps in BF16.
    lm_head = 128256 * 4096
    assert weight_bytes(plan, "fp8") == pytest.approx((8.03e9 - 0.525e9 - lm_head) + 2 * lm_head,
                                                      rel=0.01)
    assert weight_bytes(plan, "nvfp4") < weight_bytes(plan, "fp8")


def test_expert_parallelism_divides_the_experts_and_tp_the_gemms(plan_model):
    one = plan_model("qwen3-30b-a3b", 1, 1)
    ep8 = plan_model("qwen3-30b-a3b", 1, 8)
    tp4 = plan_model("qwen3-30b-a3b", 4, 1)
    # 30.5e9 parameters, 0.31e9 of them the input embedding.
    assert weight_bytes(one, "bf16") == pytest.approx((30.5e9 - 0.31e9) * 2, rel=0.02)
    assert weight_bytes(ep8, "bf16") < weight_bytes(one, "bf16") / 4
    assert weight_bytes(tp4, "bf16") < weight_bytes(one, "bf16") / 3
    line = weight_memory_line(one)
    assert line.startswith("# weights per rank") and f"bf16 {weight_bytes(one, 'bf16') / GIB:.1f} GiB" in line
