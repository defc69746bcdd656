"""vllm_rules/layers.py against vLLM 0.33.0's own model files: the model classes whose router vLLM
builds with the quantization config (QUANTIZED_ROUTERS), found by reading vLLM's source, and the
router's method on the online fp8_per_tensor path for the bundled MoE models, asked of vLLM. Needs
vLLM importable (CPU is enough):

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python -m pytest -m vllm \\
        tests/vllm_rules/test_layers_vllm.py
"""

from __future__ import annotations

import ast
import json
import os

import pytest

from benchmark_model_kernels.crosscheck import vllm_dispatch as vd
from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.vllm_rules.layers import QUANTIZED_ROUTERS, router_in_fp8

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "scripts", "benchmark_model_kernels", "plan", "models")


def _model_files() -> dict[str, ast.Module]:
    import vllm.model_executor.models as models

    folder = os.path.dirname(models.__file__)
    return {f[:-3]: ast.parse(open(os.path.join(folder, f)).read()) for f in os.listdir(folder) if f.endswith(".py")}


def _quantized_router_modules(files: dict[str, ast.Module]) -> set[str]:
    """Model files that call GateLinear with a quant_config that is not None, and the files that
    import their blocks or models."""
    direct = set()
    for name, tree in files.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "GateLinear":
                q = next((k.value for k in n.keywords if k.arg == "quant_config"), None)
                if q is not None and not (isinstance(q, ast.Constant) and q.value is None):
                    direct.add(name)
    users = {name for name, tree in files.items() for n in ast.walk(tree)
             if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module in direct}
    return direct | users


def test_quantized_routers_are_the_classes_whose_files_build_gatelinear_with_the_quant_config():
    from vllm.model_executor.models import registry

    modules = _quantized_router_modules(_model_files())
    archs = {arch for table in (registry._TEXT_GENERATION_MODELS, registry._MULTIMODAL_MODELS)
             for arch, (module, _cls) in table.items() if module in modules}
    assert archs == set(QUANTIZED_ROUTERS)


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "mixtral-8x7b"])
def test_online_fp8_per_tensor_quantizes_the_router_where_the_rule_says(model):
    with open(os.path.join(MODELS, f"{model}.json")) as f:
        raw = {k: v for k, v in json.load(f).items() if k != "_comment"}
    online = tuple(q for q in vd.QUESTIONS if q.shorthand == "fp8_per_tensor")
    _, answers = vd.ask_vllm(raw, ("sm90",), ((1, 1),), online, max_layers=1)
    routers = [a for a in answers if a.get("kind") == "router"]
    assert routers, answers
    quantized = {a["method"] != "UnquantizedLinearMethod" for a in routers}
    assert quantized == {router_in_fp8("fp8", "per_tensor", "dynamic", raw["architectures"][0])}
