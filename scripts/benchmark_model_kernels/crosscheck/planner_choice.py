"""Which planner plans: vLLM's own model class where vLLM is importable, the rules otherwise.

`--planner vllm` (the default where vLLM is importable) plans from the class vLLM builds for the
config and layout (`vllm_planner`), after the rules planner (`plan.planner`) has planned the same
config without vLLM imported; the preview then names vLLM's version and class and lists, one line
each, where the rules' plan differs. `--planner rules` (the default without vLLM) is the rules
planner alone. A config the rules planner cannot plan (a family it has no rule for, a model type
transformers has no class for) is still planned by vLLM; a config value neither could build
(`plan.config_checks`) stops both. When vLLM's class cannot be built on this machine, the rules'
plan is used and the preview says why; so it is where vLLM's build refuses a config the rules plan
(`--cross_check vllm` then shows vLLM's refusal).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.errors import UsageError
from ..core.plan_schema import ModelInfo, Plan
from ..plan import config_checks, config_source, planner
from ..vllm_rules.layout import Layout
from ..vllm_rules.quant_config import checkpoint_fp8_scheme
from .vllm_build import INSTALL_HINT, VLLM_VERSION_FOLLOWED, VllmBuildProblem, require_vllm, vllm_available
from .vllm_platform import TargetGpu

PLANNERS = ("vllm", "rules")


def default_planner() -> str:
    """"vllm" where vLLM is importable in this Python, else "rules"."""
    return "vllm" if vllm_available() else "rules"


def rules_label(why: str) -> str:
    """The preview's planner line for the rules planner, with why it plans."""
    return f"rules (vllm_rules/, following vLLM {VLLM_VERSION_FOLLOWED}; {why})"


def check_planner(choice: str | None) -> str:
    """The planner to use for `--planner choice` (None: the default), or a one-line UsageError."""
    if choice is None:
        return default_planner()
    if choice == "vllm" and not vllm_available():
        raise UsageError("--planner", "vllm", f"vLLM is not importable in this Python; {INSTALL_HINT}, or pass "
                         "--planner rules")
    return choice


def plan_chosen(model: str, layout: Layout, choice: str, *, revision: str | None = None,
                trust_remote_code: bool = False, allow_defaults: bool = False, plan_dir: str | None = None,
                gpu: TargetGpu | None = None, chosen_by_flag: bool = False) -> Plan:
    """The plan of MODEL at `layout` by the planner `choice` ("vllm" or "rules"), its ModelInfo
    naming the planner (and, for vLLM's, the rules planner's differences)."""
    kwargs: dict[str, Any] = dict(revision=revision, trust_remote_code=trust_remote_code,
                                  allow_defaults=allow_defaults, plan_dir=plan_dir)
    if choice == "rules":
        plan = planner.plan_layout(model, layout, **kwargs)
        why = "--planner rules" if chosen_by_flag else "vLLM is not importable in this Python"
        return replace(plan, model=replace(plan.model, planner=rules_label(why)))
    src = config_source.resolve(model, revision)
    config_checks.check_values(src.raw)
    rules: Plan | None = None
    rules_error = ""
    try:
        rules = planner.plan_layout(model, layout, **kwargs)
    except config_checks.ConfigKeyError:
        raise  # a config value or key both planners read the same way
    except UsageError as e:
        if e.field in ("--tp", "--ep"):
            raise  # a layout the rules refuse as vLLM's own checks do
        rules_error = str(e)
    from .vllm_planner import plan_with_vllm

    require_vllm()
    try:
        planned = plan_with_vllm(src.raw, layout, rules.model if rules else _info(model, src, revision), rules,
                                 rules_error, gpu=gpu, trust_remote_code=trust_remote_code,
                                 code_dir=src.directory)
    except (VllmBuildProblem, UsageError) as e:
        # vLLM's build failed here (its CPU platform, or a refusal the rules do not share): the rules'
        # plan, saying why; no plan at all only where neither planner makes one.
        if rules is None:
            raise UsageError("--planner", "vllm", f"{e}; the rules planner made no plan either: {rules_error}") \
                if isinstance(e, VllmBuildProblem) else e from None
        why = "vLLM's class could not be built on this machine" if isinstance(e, VllmBuildProblem) else \
            "vLLM's build refused it"
        return replace(rules, model=replace(rules.model, planner=rules_label(f"{why}: {e}")))
    info = planned.plan.model
    return replace(planned.plan, model=replace(info, planner=planned.planner,
                                               planner_differences=planned.differences))


def _info(model: str, src: Any, revision: str | None) -> ModelInfo:
    """The model info of a config the rules planner made no plan of, from config.json alone."""
    raw = src.raw
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    quantization = raw.get("quantization_config") or text.get("quantization_config")
    scheme, why = checkpoint_fp8_scheme(quantization)
    return ModelInfo(name=model, source=src.source, model_type=str(raw.get("model_type", "")),
                     architecture=",".join(raw.get("architectures") or []), revision=revision,
                     hidden_size=int(text.get("hidden_size") or 0), vocab_size=int(text.get("vocab_size") or 0),
                     fp8_scheme=scheme, fp8_scheme_source=why, notes=(src.note,) if src.note else (),
                     tie_word_embeddings=bool(text.get("tie_word_embeddings", raw.get("tie_word_embeddings", False))))


__all__ = ["PLANNERS", "default_planner", "rules_label", "check_planner", "plan_chosen"]
