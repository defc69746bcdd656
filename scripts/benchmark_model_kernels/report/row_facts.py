"""Facts a results row carries today, filled in for rows written before they were recorded.

In: a parsed results.json. Out: its Rows (`core/results_schema.py`) with `scheme`, `vllm_default`,
`timed_as`, (MoE) `num_tokens` and `mode` present. A row that recorded a field keeps it; a row whose
dict lacks the key gets it by the rule the case builder applies now (`cases.backends.scheme_of`,
`vllm_rules.dispatch` for the compute capability the environment recorded and the plan's per-tensor
activation scales; a Triton row without `timed_as` searched its tiles: none ran vLLM's then), an
old MoE row ran num_tokens = M (runs before expert-parallel token scaling), and a row from before
timing modes ran in the mode its run's settings.cuda_graph says. Facts that cannot be derived are
marked instead: a timed row from before percentiles says so in `spread_note`, one from before
correctness checks in `check_note`. Also the checkpoint's FP8 scheme as the plan records it, with
the defaults for plans that predate it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..cases.backends import scheme_of
from ..core.plan_schema import Plan
from ..core.results_schema import Row, row_from_dict
from ..env.gpu import parse_compute_capability
from ..vllm_rules.dispatch import LayerCell, gpu_family, is_vllm_default, refined_fp8_block, table_row, timed_label

#: The scheme assumed where the plan names none: vLLM's online FP8 of a BF16 checkpoint.
DEFAULT_FP8_SCHEME = "per_tensor"


def compute_capability(gpu: dict[str, Any]) -> tuple[int, int] | None:
    """environment["gpu"]["compute_capability"] as (major, minor), from "9.0", [9, 0] or 90."""
    return parse_compute_capability(gpu.get("compute_capability"))


def environment_cc(results: dict[str, Any]) -> tuple[int, int] | None:
    """The compute capability results.json's environment recorded (None when it did not)."""
    env = results.get("environment") or {}
    gpu = env.get("gpu") if isinstance(env, dict) else None
    return compute_capability(gpu) if isinstance(gpu, dict) else None


#: How a timed row written before percentiles / correctness checks is marked.
NO_SPREAD_RECORDED = "recorded before per-iteration times were kept: median and std only"
NO_CHECK_RECORDED = "recorded before correctness checks: not checked"


def _marked(row: Row, raw: dict[str, Any], mode: str) -> Row:
    """`mode` for a row from before modes; the marks of a timed row from before spreads/checks
    (which added the string fields `spread_note` and `check`: a row writes them always, its null
    fields never, `row_text`)."""
    marks: dict[str, Any] = {}
    if not row.mode:
        marks["mode"] = mode
    if row.median_us is not None and "spread_note" not in raw and not row.spread_note:
        marks["spread_note"] = NO_SPREAD_RECORDED
    if row.median_us is not None and "check" not in raw and not row.check_note:
        marks["check_note"] = NO_CHECK_RECORDED
    return replace(row, **marks) if marks else row


@dataclass(frozen=True)
class DispatchContext:
    """What the dispatch table needs to know of a run besides a row: its GPU and layout, and the
    plan's per-tensor activation scales ("" when the plan predates that record)."""

    compute_capability: tuple[int, int] | None
    expert_parallel: bool = False
    activation_scales: str = ""

    @classmethod
    def of(cls, results: dict[str, Any], plan: Plan | None) -> DispatchContext:
        scales = plan.model.fp8_activation_scales if plan is not None else ""
        return cls(environment_cc(results), plan is not None and plan.ep > 1, scales)

    def cell(self, kind: str, dtype: str, scheme: str, intermediate: int | None, hidden: int | None) -> LayerCell:
        """The dispatch table's cell of one layer (a block-128 MoE refined where vLLM refines it)."""
        refined = (kind == "moe" and scheme == "block128" and intermediate is not None and hidden is not None
                   and refined_fp8_block(intermediate, hidden) > 0)
        return LayerCell(kind, dtype, scheme, self.expert_parallel, self.activation_scales, refined)


def _with_facts(raw: dict[str, Any], context: DispatchContext, mode: str = "graph") -> Row:
    row = _marked(row_from_dict(raw), raw, mode)
    scheme = row.scheme if "scheme" in raw else scheme_of(row.kind, row.dtype, row.routine,
                                                          row.backend, row.variant)
    facts: dict[str, Any] = {}
    if "vllm_default" not in raw or "timed_as" not in raw:
        rule = table_row(gpu_family(context.compute_capability),
                         context.cell(row.kind, row.dtype, scheme, row.intermediate, row.hidden))
        if "vllm_default" not in raw:
            facts["vllm_default"] = rule.match if rule is not None and is_vllm_default(rule, row.backend,
                                                                                       row.routine) else ""
        if "timed_as" not in raw and row.kind != "attention":
            timed = timed_label(rule, row.backend, row.routine, tuned_tiles=row.backend == "triton")
            facts.update(timed_as=timed.label, vllm_runs=timed.vllm_runs)
    tokens = row.num_tokens if row.num_tokens is not None or row.kind != "moe" else row.m
    if scheme != row.scheme:
        facts["scheme"] = scheme
    if tokens != row.num_tokens:
        facts["num_tokens"] = tokens
    return replace(row, **facts) if facts else row


def rows_with_facts(results: dict[str, Any], plan: Plan | None) -> list[Row]:
    """Every row of `results`, with the facts it lacks derived (see the module docstring)."""
    context = DispatchContext.of(results, plan)
    settings = results.get("settings") if isinstance(results.get("settings"), dict) else {}
    mode = "eager" if settings.get("cuda_graph") is False else "graph"
    return [_with_facts(raw, context, mode) for raw in results.get("rows", [])]


@dataclass(frozen=True)
class CheckpointScheme:
    """The FP8 scheme vLLM would serve the checkpoint with, and why the report says so."""

    scheme: str
    """"per_tensor", "per_token" or "block128" (never empty: DEFAULT_FP8_SCHEME stands in)."""
    source: str
    """The plan's reason, or why the report assumed DEFAULT_FP8_SCHEME."""

    @property
    def recipe(self) -> str:
        return f"fp8.{self.scheme}"


def checkpoint_scheme(plan: Plan | None) -> CheckpointScheme:
    """The plan's `fp8_scheme`; per-tensor when the plan predates it, has none (no plan), or the
    checkpoint is quantized to something that is not FP8 (its source then says so)."""
    if plan is None:
        return CheckpointScheme(DEFAULT_FP8_SCHEME, "no plan (shapes given by hand): vLLM's online "
                                "FP8 is per-tensor")
    scheme, source = plan.model.fp8_scheme, plan.model.fp8_scheme_source
    if scheme:
        return CheckpointScheme(scheme, source or "recorded by the plan")
    if not source:
        return CheckpointScheme(DEFAULT_FP8_SCHEME, "not recorded by this run")
    return CheckpointScheme(DEFAULT_FP8_SCHEME, f"{source}; the FP8 lines assume vLLM's online "
                            "per-tensor FP8 of its weights")


__all__ = ["DEFAULT_FP8_SCHEME", "DispatchContext", "NO_SPREAD_RECORDED", "NO_CHECK_RECORDED", "compute_capability",
           "environment_cc", "rows_with_facts", "CheckpointScheme", "checkpoint_scheme"]
