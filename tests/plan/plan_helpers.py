"""Planning a shared, bundled or hand-written config for the tests of tests/plan/."""

from __future__ import annotations

import functools
import json

from benchmark_model_kernels.core.plan_schema import ModelInfo, Plan
from benchmark_model_kernels.plan import config_source, meta_model, planner
from benchmark_model_kernels.vllm_rules.layout import Layout
from support import shared_config_dir


@functools.lru_cache(maxsize=None)
def build(path: str):
    """(config source, meta build) of the config at `path`, built once per test session."""
    src = config_source.resolve(path)
    return src, meta_model.build_meta_model(src.raw, location=src.directory)


def plan_of(name: str, tp: int = 1, ep: int = 1) -> Plan:
    """Plan of a bundled model or of ../shared/configs/<name> (skipped when absent)."""
    path = name if name in config_source.list_bundled() else shared_config_dir(name)
    src, meta = build(path)
    info = ModelInfo(name=name, source=src.source, model_type=src.raw["model_type"],
                     architecture=meta.architecture, notes=meta.notes)
    return planner.plan_from_build(meta, info, Layout.from_flags(tp, ep))


def plan_raw(tmp_path, raw: dict, tp: int = 1, ep: int = 1) -> Plan:
    """Plan of a config written here (held-out architectures), through `planner.plan_model`."""
    d = tmp_path / raw["model_type"]
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(raw))
    return planner.plan_model(str(d), tp, ep)


def gemms(plan: Plan) -> dict[str, tuple[int, int, int, str, bool]]:
    """GEMM entries by name: (N, K, per-step count, linear kind, bias)."""
    return {g.name: (g.n, g.k, g.layers, g.parallel, g.bias) for g in plan.gemms}
