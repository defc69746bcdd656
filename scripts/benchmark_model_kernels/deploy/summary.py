"""What `deploy.py` prints before it times anything (and all a --dry_run prints): per layout the
per-rank shapes, the weights per recipe, per B the rank's M, the MoE imbalance and the fit at each
context, and the cases it would time.

In: the `LayoutPlan`s (layouts.py), the workload (view.py), the GPUs and the cases per layout. Out:
text lines. Nothing here plans or runs.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

from ..core.case_schema import Case
from ..plan import memory
from .layouts import Cluster, LayoutPlan, fit
from .view import Workload, moe_imbalance


def shapes_text(lp: LayoutPlan) -> str:
    """One rank's shapes in a phrase: attention heads, experts and their width, GEMM entries."""
    plan = lp.plan
    if plan is None:
        return ""
    parts = []
    for a in plan.attention[:1]:
        heads = f"MLA {a.num_q_heads} heads" if a.kind == "mla" else f"{a.num_q_heads} q / {a.num_kv_heads} KV heads"
        parts.append(heads)
    for m in plan.moe[:1]:
        parts.append(f"{m.experts} of {m.global_experts} experts at I={m.intermediate}, top-{m.top_k}")
    parts.append(f"{len(plan.gemms)} GEMM entries")
    return "; ".join(parts)


def _weights_text(lp: LayoutPlan) -> str:
    return ", ".join(f"{r} {memory.gib(e.weight_bytes)}" for r, e in lp.estimates.items())


def batch_line(lp: LayoutPlan, batch: int, work: Workload) -> str:
    """"B=64: M=8, MoE 64 tokens, imbalance 1.00; context 4096: bf16 fits, fp8 fits"."""
    text = f"B={batch}: M={lp.m(batch)}"
    if lp.plan is not None and lp.plan.moe:
        imbalance = moe_imbalance(lp.plan, lp.layout, lp.moe_tokens(batch), work)
        text += f", MoE {lp.moe_tokens(batch)} tokens, imbalance {imbalance.value:.2f}x"
    for context in work.contexts:
        verdicts = []
        for recipe in work.recipes:
            ok, why = fit(lp, recipe, batch, context)
            verdicts.append(f"{recipe} fits" if ok else f"{recipe} does not fit ({why})")
        text += f"; context {context}: " + ", ".join(verdicts)
    return text


def cases_line(cases: Sequence[Case], cc: str) -> str:
    """"cases: 120 (gemm 60, moe 24, attention 36), 10 unsupported on sm_90"."""
    kinds = Counter(c.kind for c in cases)
    skipped = sum(bool(c.skip_reason) for c in cases)
    split = ", ".join(f"{k} {n}" for k, n in kinds.items())
    return f"cases: {len(cases)} ({split}), {skipped} decided unsupported before launch on sm_{cc.replace('.', '')}"


def summary_lines(model: str, cluster: Cluster, layouts: Sequence[LayoutPlan], work: Workload,
                  cases: Mapping[str, Sequence[Case]]) -> list[str]:
    """The whole summary; `cases`: layout name -> the cases it would time."""
    kind = cluster.kind
    planned = sum(lp.runnable for lp in layouts)
    sm = kind.cc_text.replace(".", "")
    lines = [f"# {model} on {cluster.label} ({memory.gib(kind.memory_bytes)} GiB each, sm_{sm}, communication "
             f"table {kind.comm_system}): {len(layouts)} layouts, {planned} to time",
             f"# B = {' '.join(map(str, work.batches))}; context {' '.join(map(str, work.contexts))}; recipes "
             f"{' '.join(work.recipes)}; routing {work.routing_text}; K/V cache {work.kv_dtype}; pipeline "
             "parallelism is not modelled"]
    for lp in layouts:
        if lp.plan is None or lp.refusal_kind in ("experts",):
            lines.append(f"{lp.label}: {lp.refusal}")
            continue
        lines.append(f"{lp.label}: per rank {shapes_text(lp)}; weights GiB {_weights_text(lp)}"
                     + (f"; refused: {lp.refusal}" if lp.refusal else ""))
        if lp.refusal:
            continue
        lines += [f"  {batch_line(lp, b, work)}" for b in work.batches]
        if lp.name in cases:
            lines.append(f"  {cases_line(cases[lp.name], kind.cc_text)}")
    return lines


__all__ = ["shapes_text", "batch_line", "cases_line", "summary_lines"]
