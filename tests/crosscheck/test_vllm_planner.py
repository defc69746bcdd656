"""vLLM as the planner (`--planner vllm`): the plan read off vLLM's own model class. These tests need
vLLM importable (CPU is enough) and skip without it; run them with the venv that has vLLM:

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu venv-vllm/bin/python -m pytest -m vllm tests/crosscheck
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmark_model_kernels.core.plan_schema import Plan
from benchmark_model_kernels.crosscheck.compare import compare, plan_side
from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.crosscheck.vllm_platform import TargetGpu
from benchmark_model_kernels.plan import planner
from benchmark_model_kernels.vllm_rules.layout import Layout
from support import ROOT, SHARED_CONFIGS

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")]

H200 = TargetGpu("NVIDIA H200", (9, 0))
#: Shared configs neither planner builds (the author's remote code only).
NEITHER = {"llama-3.3-nemotron-super-49b"}


def _shared() -> list[str]:
    if not os.path.isdir(SHARED_CONFIGS):
        return []
    return sorted(n for n in os.listdir(SHARED_CONFIGS)
                  if os.path.isfile(os.path.join(SHARED_CONFIGS, n, "config.json")) and n not in NEITHER)


def _vllm_plan(path: str, tp: int, ep: int) -> Plan:
    from benchmark_model_kernels.crosscheck.planner_choice import plan_chosen

    return plan_chosen(path, Layout.from_flags(tp, ep), "vllm", gpu=H200)


@pytest.mark.parametrize("name", _shared())
def test_the_vllm_planner_equals_the_rules_on_every_shared_config(name):
    path = os.path.join(SHARED_CONFIGS, name)
    layout = (2, 8) if planner.plan_model(path, 1, 1).moe else (2, 1)  # sequence-parallel MoE where it has experts
    rules = planner.plan_model(path, *layout)
    plan = _vllm_plan(path, *layout)
    assert plan.model.planner.startswith("vllm 0.") and plan.complete
    assert plan.model.planner_differences == ()
    assert compare(plan_side(rules), plan_side(plan)) == []
    assert Plan.from_json(plan.to_json()) == plan


def test_the_vllm_planner_runs_the_cuda_class_at_ep_over_tp():
    plan = _vllm_plan(os.path.join(SHARED_CONFIGS, "deepseek-v3.2"), 8, 32)
    assert plan.model.planner.startswith("vllm 0.33.0 vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM")
    g = {e.name: (e.n, e.k, e.layers, e.parallel, e.m_divisor) for e in plan.gemms}
    assert g["gate_up_proj"] == (36864, 7168, 3, "replicated", 8)
    assert g["down_proj"] == (7168, 18432, 3, "replicated", 8)
    assert [m.name for m in plan.mixers_not_timed] == ["indexer"]  # no row times the indexer's logits


#: Families the rules planner has no rule for (it refuses them, or leaves modules unsupported),
#: each from transformers' own config class: (model_type, architecture, class arguments, what is new).
RULES_DO_NOT_KNOW = {
    "afmoe": ("afmoe", "AfmoeForCausalLM",
              {"score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1},
              "attention output gate under another name (gate_proj)"),
    "laguna": ("laguna", "LagunaForCausalLM", {}, "attention output gate g_proj"),
    "zamba2": ("zamba2", "Zamba2ForCausalLM", {}, "shared transformer blocks with LoRA adapters beside Mamba2"),
    "hunyuan-a13b": ("hunyuan_v1_moe", "HunYuanMoEV1ForCausalLM",
                     dict(hidden_size=4096, intermediate_size=3072, num_hidden_layers=32, num_attention_heads=32,
                          num_key_value_heads=8, head_dim=128, num_experts=64, moe_topk=8, num_shared_expert=1,
                          use_qk_norm=True, vocab_size=128167), "a router named gate.wg"),
    "deepseek-v4": ("deepseek_v4", "DeepseekV4ForCausalLM", {},
                    "compressed attention with an indexer and grouped output projections"),
    "hy-v4": ("hy_v4", "HYV4ForCausalLM", {}, "an attention output gate and a sparse-attention indexer"),
    "beam": ("beam", "BeamForCausalLM", {}, "an attention output gate, a platform-split family"),
    "qwen4-exp": ("qwen4_exp", "Qwen4ExpForCausalLM", {"output_gate_type": "sigmoid"},
                  "a config transformers cannot build on meta"),
    "axk2": ("axk2", "AXK2ForCausalLM", {}, "a query gate q_gate_proj"),
    "mistral4": ("mistral4", "Mistral4ForCausalLM", {}, "no causal-LM class in transformers"),
}


def _write(tmp_path, name: str) -> str:
    from transformers import CONFIG_MAPPING

    model_type, arch, extra, _ = RULES_DO_NOT_KNOW[name]
    raw = CONFIG_MAPPING[model_type]().to_dict()
    raw.update(extra, model_type=model_type, architectures=[arch])
    if isinstance(raw.get("text_config"), dict):  # the language model's keys live there
        raw["text_config"].update(extra)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(raw, default=str))
    return str(folder)


def _rules_fail(path: str) -> str:
    from benchmark_model_kernels.core.errors import UsageError

    try:
        plan = planner.plan_model(path, 1, 1)
    except UsageError as e:
        return str(e)
    return "; ".join(u.module for u in plan.unsupported)


@pytest.mark.parametrize("name", list(RULES_DO_NOT_KNOW))
def test_the_vllm_planner_plans_families_the_rules_do_not_know(tmp_path, name):
    path = _write(tmp_path, name)
    assert _rules_fail(path), f"the rules plan {name} now: move it out of RULES_DO_NOT_KNOW"
    plan = _vllm_plan(path, 1, 1)
    assert plan.complete, plan.unsupported
    assert plan.gemms and plan.model.planner.startswith("vllm 0.33.0 ")
    assert any("the rules planner" in d for d in plan.model.planner_differences)
    assert Plan.from_json(plan.to_json()) == plan


def test_modules_no_row_times_are_listed_with_the_reason(tmp_path):
    plan = _vllm_plan(_write(tmp_path, "deepseek-v4"), 1, 1)
    assert plan.model.planner.endswith("(CUDA class for sm_90 (NVIDIA H200))")
    mixers = {m.name: m for m in plan.mixers_not_timed}
    assert "vllm:DeepseekV4FlashMLAAttention" in mixers
    assert "no timed row covers" in mixers["vllm:DeepseekV4FlashMLAAttention"].reason


def test_the_preview_names_the_planner_first(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "scripts"), "VLLM_TARGET_DEVICE": "cpu"}
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"),
                        os.path.join(SHARED_CONFIGS, "llama-3.1-8b"), "--tp", "2", "--print_only",
                        "--assume_cc", "9.0"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = r.stdout.splitlines()[:2]
    assert first == "# planner: vllm 0.33.0 vllm.model_executor.models.llama.LlamaForCausalLM (vLLM's CPU platform " \
                    "(the family has one class for every platform))"
    assert second == "# planner: the rules planner agrees (every GEMM, fused-MoE and attention entry and count)"
    rules = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"),
                            os.path.join(SHARED_CONFIGS, "llama-3.1-8b"), "--print_only", "--planner", "rules"],
                           capture_output=True, text=True, timeout=600, env=env)
    assert rules.stdout.startswith("# planner: rules (vllm_rules/, following vLLM 0.33.0; --planner rules)\n")
