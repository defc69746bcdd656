"""One layout's decode steps assembled: per recipe, global batch B and context length, the time of
one step and what it serves, each part labelled measured or modelled and its source.

In: a `LayoutPlan` (layouts.py), the results.json its per-rank cases were timed into, the
workload (batches, contexts, recipes, routing) and the communication model. Out: one `StepCell`
per (recipe, B, context). Per step on the busiest rank:

  step = GEMMs + MoE x imbalance + attention + communication

* GEMMs, MoE and attention are the per-step roll-up of the layout's own results.json at the
  rank's M = ceil(B/DP) and the attention rows at the context length, read as the report reads
  them (`report.analysis.Analysis.rollup` and `Analysis.attention.total`, the sum report.md's
  roll-up with attention shows): measured;
* imbalance: under expert parallelism the step waits for the rank holding the most token-expert
  pairs; the measured MoE time (uniform routing) is scaled by that rank's pairs over the mean
  (deploy/routing.py): modelled;
* communication: the collectives vLLM issues for the layout (deploy/collectives.py), each timed
  by deploy/comm_times.py, which names its source (measured here, nccl-tests, or a table);
* tokens/s = B / step (one new token per sequence per decode step), per GPU over the G GPUs,
  per sequence 1 / step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..core.plan_schema import Plan
from ..report.analysis import Analysis
from ..report.cells import MOE, QUANT, VLLM
from ..report.row_facts import checkpoint_scheme
from ..vllm_rules.layout import Layout
from .collectives import Collective, MoeDispatch, collectives, hidden_size
from .comm_times import CommModel
from .layouts import Cluster, LayoutPlan, fit
from .routing import Routing, busiest_rank, expert_loads

MEASURED = "measured"
MODELLED = "modelled"
#: The per-step bases a deployment can be read on (report/cells.py): the fastest measured
#: backend per module (+ activation quantization where timed), or the kernel vLLM dispatches.
BASES = {"best": QUANT, "vllm_default": VLLM}
BASIS_WORDS = {QUANT: "fastest measured backend per module, + activation quantization where timed",
               VLLM: "the kernel vLLM dispatches by default per module"}


@dataclass(frozen=True)
class Quantity:
    """A number with its label and source, or why there is none."""

    value: float | None
    label: str = ""
    """MEASURED or MODELLED ("" without a value)."""
    source: str = ""
    reason: str = ""

    @classmethod
    def measured(cls, value: float, source: str) -> Quantity:
        return cls(value, MEASURED, source)

    @classmethod
    def modelled(cls, value: float, source: str) -> Quantity:
        return cls(value, MODELLED, source)

    @classmethod
    def missing(cls, reason: str) -> Quantity:
        return cls(None, reason=reason)

    @property
    def known(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Workload:
    """What the deployment is asked to serve, and how its steps are read."""

    batches: tuple[int, ...]
    """Global concurrent sequences in one decode step."""
    contexts: tuple[int, ...]
    """Tokens of K/V each sequence reads."""
    recipes: tuple[str, ...]
    """"bf16", "fp8" (the checkpoint's FP8 scheme) or "nvfp4"."""
    kv_dtype: str = "bf16"
    basis: str = QUANT
    routing: Routing = Routing()

    @property
    def routing_text(self) -> str:
        return self.routing.label


@dataclass(frozen=True)
class CommLine:
    """One collective of a decode step and its time."""

    name: str
    op: str
    group: str
    bytes_per_rank: int
    per_step: int
    time: Quantity
    """One call's time."""
    note: str = ""
    cited: str = ""
    """Where vLLM issues it (the collective's source)."""

    @property
    def total(self) -> Quantity:
        t = self.time
        return replace_value(t, t.value * self.per_step) if t.value is not None else t


def replace_value(q: Quantity, value: float) -> Quantity:
    return Quantity(value, q.label, q.source, q.reason)


@dataclass(frozen=True)
class StepCell:
    """One decode step of one layout, recipe, global batch and context length."""

    layout: str
    """LayoutPlan.name, e.g. "tp2_dp4_ep"."""
    label: str
    recipe: str
    recipe_key: str
    """The report's recipe (the FP8 scheme spelled out, e.g. "fp8.per_tensor")."""
    batch: int
    context: int
    m: int
    moe_tokens: int
    gpus: int
    fits: bool
    fit_reason: str
    gemm: Quantity
    moe_uniform: Quantity
    imbalance: Quantity
    moe: Quantity
    attention: Quantity
    communication: tuple[CommLine, ...]
    comm: Quantity
    step: Quantity
    tokens_per_s: Quantity
    per_gpu: Quantity
    per_sequence: Quantity
    comm_share: Quantity
    notes: tuple[str, ...] = field(default=())
    refused: str = ""
    """The layout's refusal ("" when it is planned): every cell of a refused layout gives it."""

    @property
    def has_number(self) -> bool:
        """A step time for a layout that fits: what the answer ranks."""
        return self.fits and self.step.known


def recipe_key(plan: Plan | None, recipe: str) -> str:
    """The report's recipe key of a deployment recipe: "fp8" is the checkpoint's FP8 scheme (what
    vLLM serves it with, report/row_facts.py checkpoint_scheme), others are themselves."""
    return checkpoint_scheme(plan).recipe if recipe == "fp8" else recipe


def kernel_parts(analysis: Analysis, key: str, m: int, context: int, work: Workload, source: str
                 ) -> tuple[Quantity, Quantity, Quantity, tuple[str, ...]]:
    """(GEMMs but MoE, MoE, attention) of one decode step at M and the context length, and notes:
    the report's roll-up and attention total on the workload's basis."""
    if m not in analysis.ms:
        untimed = Quantity.missing(f"no row timed M={m} in {source}")
        return untimed, untimed, untimed, ()
    roll = analysis.rollup(key, m, work.basis)
    where = f"{source}: {BASIS_WORDS.get(work.basis, work.basis)}"
    if roll.complete:
        moe_us = roll.by_kind.get(MOE, 0.0)
        gemm = Quantity.measured(roll.total_us - moe_us, where)
        moe = Quantity.measured(moe_us, where)
    else:
        gaps = "; ".join(f"{n}: {w}" for n, w in zip(roll.missing, roll.why_missing, strict=False))
        gemm = moe = Quantity.missing(f"no number for {gaps or ', '.join(roll.missing)}")
    view = analysis.attention
    if not view.rows:
        return gemm, moe, Quantity.missing(f"{source} has no attention rows"), ()
    att = view.total(m, context, work.kv_dtype, vllm_basis=work.basis == VLLM)
    if not att.complete:
        gaps = "; ".join(f"{n}: {w}" for n, w in zip(att.missing, att.why_missing, strict=False))
        return gemm, moe, Quantity.missing(f"no attention number at {context} tokens for {gaps}"), ()
    return gemm, moe, Quantity.measured(att.total_us, f"{source}: decode attention at {context} tokens, "
                                        f"K/V {work.kv_dtype}, fastest row per layer type"), att.stand_ins


def moe_imbalance(plan: Plan, layout: Layout, tokens: int, work: Workload) -> Quantity:
    """The busiest EP rank's token-expert pairs over the mean, at `tokens` tokens entering the MoE
    layer across the EP group; 1 without expert parallelism (every rank runs every expert's slice,
    so routing moves no work between ranks)."""
    if not plan.moe:
        return Quantity.modelled(1.0, "no MoE layer")
    if not layout.use_ep:
        return Quantity.modelled(1.0, "no expert parallelism: every rank holds a slice of every expert")
    worst = 1.0
    for entry in plan.moe:
        loads = expert_loads(entry.global_experts, entry.top_k, tokens, work.routing)
        _, imbalance = busiest_rank(loads, layout)
        worst = max(worst, float(imbalance))
    return Quantity.modelled(worst, f"routing {work.routing_text}: the busiest of {layout.ep} EP ranks' "
                             f"token-expert pairs over the mean, {tokens} tokens (deploy/routing.py)")


def step_collectives(plan: Plan, layout: Layout, m: int, key: str,
                     all2all_backend: str = "allgather_reducescatter") -> list[Collective]:
    """The collectives of one decode step (deploy/collectives.py) at M attention tokens per rank under
    recipe `key`."""
    # FlashInfer CUTLASS, vLLM's per-tensor FP8 MoE kernel on SM90/SM100, takes quantized input,
    # so vLLM quantizes before the dispatch (deploy/collectives.py MoeDispatch).
    dispatch = MoeDispatch.fp8(hidden_size(plan), "per_tensor") if key == "fp8.per_tensor" and plan.moe else None
    return collectives(plan, layout, m, all2all_backend=all2all_backend, dispatch=dispatch)


@dataclass(frozen=True)
class Communication:
    """The collectives of a layout's decode step and their times on one system."""

    model: CommModel
    system: str
    all2all_backend: str = "allgather_reducescatter"

    def lines(self, plan: Plan, layout: Layout, m: int, key: str) -> tuple[CommLine, ...]:
        """The collectives at M attention tokens per rank under recipe `key`, each timed."""
        out = []
        for c in step_collectives(plan, layout, m, key, self.all2all_backend):
            t = self.model.time(c, self.system)
            label = MEASURED if str(t.source).startswith("measured") else MODELLED
            time = (Quantity(float(t.us), label, str(t.source)) if t.us is not None
                    else Quantity.missing(str(t.note or t.source)))
            group = f"{c.group_kind} of {c.group}" if c.group_kind else str(c.group)
            out.append(CommLine(c.name, c.op, group, int(c.bytes_per_rank), int(c.per_step), time,
                                str(c.note or t.note or ""), str(c.source)))
        return tuple(out)


def comm_total(lines: Sequence[CommLine]) -> Quantity:
    """The communication of one step: every collective's time x its calls per step."""
    missing = [f"{c.name}: {c.time.reason}" for c in lines if not c.time.known]
    if missing:
        return Quantity.missing("no time for " + "; ".join(missing))
    total = sum(c.total.value or 0.0 for c in lines)
    if not lines:
        return Quantity.modelled(0.0, "no collective: one GPU, or layers that need none")
    label = MEASURED if all(c.time.label == MEASURED for c in lines) else MODELLED
    sources = sorted({c.time.source for c in lines})
    return Quantity(total, label, "; ".join(sources))


def _sum_parts(parts: Sequence[Quantity]) -> Quantity:
    missing = [p.reason for p in parts if not p.known]
    if missing:
        return Quantity.missing(missing[0])
    return Quantity.modelled(sum(p.value or 0.0 for p in parts),
                             "GEMMs + MoE x imbalance + attention (measured kernels) + communication")


def _routed_moe(uniform: Quantity, imbalance: Quantity) -> Quantity:
    """The MoE time of the busiest rank: the measured (uniform) time x the imbalance."""
    if not uniform.known or uniform.value is None:
        return uniform
    if not imbalance.known or imbalance.value is None:
        return Quantity.missing(imbalance.reason)
    if imbalance.value == 1.0:
        return uniform
    return Quantity.modelled(uniform.value * imbalance.value,
                             f"measured MoE time x {imbalance.value:.3f} ({imbalance.source})")


def _rates(step: Quantity, batch: int, gpus: int) -> tuple[Quantity, Quantity, Quantity]:
    if not step.known or not step.value:
        why = Quantity.missing(step.reason or "no step time")
        return why, why, why
    seconds = step.value / 1e6
    src = "from the step time: one new token per sequence per decode step"
    return (Quantity.modelled(batch / seconds, src), Quantity.modelled(batch / seconds / gpus, src),
            Quantity.modelled(1 / seconds, src))


@dataclass(frozen=True)
class Target:
    """Where the deployment runs: the GPUs and the model of their communication."""

    cluster: Cluster
    comm: Communication | None
    """None: no communication model (every step then says so)."""


@dataclass(frozen=True)
class LayoutRun:
    """One layout and what its run wrote."""

    plan: LayoutPlan
    results: dict[str, Any] | None
    """The layout's results.json; None: its cases were not timed (refused, or its run wrote none)."""
    source: str
    """Where the results are (a path), named by every measured number."""


def assemble(run: LayoutRun, work: Workload, target: Target) -> list[StepCell]:
    """Every (recipe, B, context) cell of one layout, each a number or the reason for none."""
    lp = run.plan
    analysis = Analysis(run.results, run.source) if run.results is not None else None
    no_results = lp.refusal or f"no results.json for {lp.label} ({run.source})"
    planned = lp.plan is not None and not lp.refusal
    out = []
    for recipe in work.recipes:
        key = recipe_key(lp.plan, recipe)
        for batch in work.batches:
            m, tokens = lp.m(batch), lp.moe_tokens(batch)
            lines: tuple[CommLine, ...] = ()
            if planned and target.comm is not None and lp.plan is not None:
                lines = target.comm.lines(lp.plan, lp.layout, m, key)
            if not planned:
                comm = Quantity.missing(no_results)
            else:
                comm = comm_total(lines) if target.comm is not None else Quantity.missing("no communication model")
            imbalance = (moe_imbalance(lp.plan, lp.layout, tokens, work) if planned and lp.plan is not None
                         else Quantity.missing(no_results))
            for context in work.contexts:
                fits, why_not = fit(lp, recipe, batch, context) if planned else (False, no_results)
                if analysis is None:
                    gemm = moe_uniform = att = Quantity.missing(no_results)
                    notes: tuple[str, ...] = ()
                else:
                    gemm, moe_uniform, att, notes = kernel_parts(analysis, key, m, context, work, run.source)
                moe = _routed_moe(moe_uniform, imbalance)
                if not planned:
                    step = Quantity.missing(lp.refusal or no_results)
                elif not fits:
                    step = Quantity.missing(f"does not fit: {why_not}")
                else:
                    step = _sum_parts([gemm, moe, att, comm])
                share = (Quantity.modelled(comm.value / step.value, "communication / step")
                         if step.value and comm.value is not None
                         else Quantity.missing(step.reason or comm.reason))
                out.append(StepCell(lp.name, lp.label, recipe, key, batch, context, m, tokens, target.cluster.count,
                                    fits, why_not, gemm, moe_uniform, imbalance, moe, att, lines, comm, step,
                                    *_rates(step, batch, target.cluster.count), share, notes, lp.refusal))
    return out


def best_cells(cells: Sequence[StepCell], batch: int, context: int) -> list[StepCell]:
    """The cells of one (B, context) with a step time, fastest first (at one B on the same G GPUs
    the shortest step is also the most tokens/s per GPU)."""
    mine = [c for c in cells if c.batch == batch and c.context == context and c.has_number]
    return sorted(mine, key=lambda c: (c.step.value if c.step.value is not None else math.inf, c.layout, c.recipe))


@dataclass(frozen=True)
class Answer:
    """The best layout and recipe at one global batch and context length."""

    batch: int
    context: int
    ranked: tuple[StepCell, ...]
    """Every cell with a step time, fastest first."""
    reason: str = ""
    """Why no cell has a step time ("" when one has)."""

    @property
    def best(self) -> StepCell | None:
        return self.ranked[0] if self.ranked else None

    @property
    def runner_up(self) -> StepCell | None:
        return self.ranked[1] if len(self.ranked) > 1 else None


def answers(cells: Sequence[StepCell], work: Workload) -> list[Answer]:
    """One Answer per (B, context), in the workload's order."""
    out = []
    for batch in work.batches:
        for context in work.contexts:
            ranked = best_cells(cells, batch, context)
            reason = ""
            if not ranked:
                mine = [c for c in cells if c.batch == batch and c.context == context]
                fitting = [c for c in mine if c.fits]
                reason = ("no layout and recipe fits" if not fitting else
                          f"no fitting cell has a step time (e.g. {fitting[0].label} {fitting[0].recipe}: "
                          f"{fitting[0].step.reason})")
            out.append(Answer(batch, context, tuple(ranked), reason))
    return out


__all__ = ["MEASURED", "MODELLED", "BASES", "BASIS_WORDS", "Quantity", "Workload", "CommLine", "StepCell",
           "step_collectives", "Communication", "Target", "LayoutRun", "recipe_key", "kernel_parts", "moe_imbalance",
           "comm_total", "assemble", "best_cells", "Answer", "answers"]
