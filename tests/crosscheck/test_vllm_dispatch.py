"""vLLM's own kernel selection against the hand table (crosscheck/vllm_dispatch.py).

The `vllm`-marker test asks vLLM itself (CPU is enough) and fails on any disagreement; run it with
the venv that has vLLM:

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu venv-vllm/bin/python -m pytest -m vllm tests/crosscheck

The other tests need no vLLM: the committed fidelity table (examples/vllm_fidelity/) must still
agree with the hand table, and a disagreement reads as one line.
"""

from __future__ import annotations

import json
import os

import pytest

from benchmark_model_kernels.crosscheck import vllm_dispatch as vd
from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.vllm_rules.dispatch import VLLM_VERSION

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIDELITY = os.path.join(ROOT, "examples", "vllm_fidelity", f"dispatch_vllm-{VLLM_VERSION}.json")
QWEN3 = os.path.join(ROOT, "scripts", "benchmark_model_kernels", "plan", "models", "qwen3-30b-a3b.json")



def _qwen3() -> dict:
    with open(QWEN3) as f:
        return {k: v for k, v in json.load(f).items() if k != "_comment"}


def _one(answers, gpu, question_start, kind, tp, ep):
    found = [a for a in answers if a["gpu"] == gpu and a["quantization"].startswith(question_start)
             and a.get("kind") == kind and (a["tp"], a["ep"]) == (tp, ep)]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")
def test_hand_table_agrees_with_vllm():
    version, answers = vd.ask_vllm(_qwen3(), ("sm90", "sm100"), ((1, 1), (4, 1), (1, 8)), max_layers=2)
    assert version == VLLM_VERSION
    assert vd.disagreements(answers) == []
    assert sum(vd.compare_answer(a).covered for a in answers) >= 80
    # the cells the hand table was corrected for
    per_token = _one(answers, "sm90", "fp8 per-token, checkpoint", "moe", 1, 1)
    assert per_token["kernel"] == "Fp8MoeBackend.VLLM_CUTLASS" and per_token["detail"] == "TritonOrCutlassExperts"
    online = _one(answers, "sm90", "fp8 per-tensor, online", "moe", 1, 1)
    assert (online["kernel"], online["activation_quant"]) == ("Fp8MoeBackend.TRITON", "fp8_per_tensor_dynamic")
    assert _one(answers, "sm90", "fp8 per-tensor, online", "router", 1, 1)["method"] == "Fp8PerTensorOnlineLinearMethod"
    refined = _one(answers, "sm90", "fp8 block-128, checkpoint", "moe", 4, 1)
    assert (refined["kernel"], refined["block"]) == ("Fp8MoeBackend.TRITON", [64, 64])


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")
def test_hand_table_agrees_with_vllm_for_deepseek_v3():
    # MLA projections, three dense MLP layers before the MoE ones, a router vLLM builds unquantized
    with open(os.path.join(ROOT, "scripts", "benchmark_model_kernels", "plan", "models", "deepseek-v3.json")) as f:
        raw = {k: v for k, v in json.load(f).items() if k != "_comment"}
    version, answers = vd.ask_vllm(raw, ("sm90", "sm100"), ((2, 8),), vd.plan_questions("dynamic"), max_layers=4)
    assert vd.refusals(answers) == []
    assert vd.disagreements(answers) == []
    router = _one(answers, "sm90", "fp8 per-tensor, online", "router", 2, 8)
    assert router["method"] == "UnquantizedLinearMethod"


def test_committed_fidelity_table_agrees_with_the_hand_table():
    with open(FIDELITY) as f:
        payload = json.load(f)
    assert payload["vllm"] == payload["hand_table_matches"] == VLLM_VERSION
    covered = [r for r in payload["rows"] if vd.compare_answer(r).covered]
    assert len(covered) >= 100
    assert [vd.where_text(r) for r in covered if not vd.compare_answer(r).agrees] == []
    assert {r["gpu"] for r in payload["rows"]} == {"sm90", "sm100", "sm120"}


def test_a_disagreement_is_one_line_naming_both_answers_and_vllms_function():
    answer = {"gpu": "sm90", "quantization": "fp8 per-token, checkpoint (compressed-tensors FP8-dynamic)",
              "tp": 1, "ep": 8, "kind": "moe", "kernel": "Fp8MoeBackend.TRITON", "activation_quant": "fp8_per_token",
              "block": [], "source": "vllm/model_executor/layers/fused_moe/oracle/fp8.py: select_fp8_moe_backend"}
    assert vd.disagreements([answer]) == [
        "sm90 moe, fp8 per-token, checkpoint (compressed-tensors FP8-dynamic) at TP=1 EP=8: the hand table says "
        "Fp8MoeBackend.VLLM_CUTLASS, vLLM selects Fp8MoeBackend.TRITON "
        "(vllm/model_executor/layers/fused_moe/oracle/fp8.py: select_fp8_moe_backend)"]
    # a block-128 checkpoint's shard at TP=4: vllm_rules refines it, so 128x128 blocks disagree
    block = {"gpu": "sm90", "tp": 4,
             "quantization": "fp8 block-128, checkpoint (quant_method fp8, weight_block_size [128, 128])",
             "ep": 1, "kind": "moe", "kernel": "Fp8MoeBackend.TRITON", "block": [128, 128],
             "activation_quant": "fp8_per_block_dynamic", "intermediate_per_rank": 192, "hidden": 2048}
    assert vd.disagreements([block]) == [
        "sm90 moe, fp8 block-128, checkpoint (quant_method fp8, weight_block_size [128, 128]) at TP=4: "
        "blocks: vllm_rules refines, vLLM runs [128, 128]"]
    # answers outside the hand table (another GPU, another recipe) are no disagreement
    assert vd.disagreements([{**answer, "gpu": "sm120"}]) == []


def test_plan_questions_follow_the_checkpoints_per_tensor_scales():
    names = [q.name for q in vd.plan_questions("dynamic")]
    assert "fp8 per-tensor, online --quantization fp8_per_tensor" in names
    assert "fp8 per-tensor, static checkpoint (ModelOpt FP8)" in [q.name for q in vd.plan_questions("static")]
    assert {q.recipe for q in vd.plan_questions("dynamic")} == {"bf16", "fp8", "nvfp4"}
