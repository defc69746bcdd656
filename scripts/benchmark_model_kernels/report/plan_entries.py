"""The plan's modules as the report shows them: one `Entry` per GEMM or MoE module.

In: the plan a results.json records (`plan_of`, read through `core/plan_schema.py`) and the rows of
one timing mode. Out: the entries in plan order (a module the plan promises counts even with no row),
then modules only rows name; each with its logical per-rank shape, the physical shapes a padding
backend ran, and the MoE tokens per M. No file I/O, no Markdown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..core.plan_schema import Plan
from ..core.results_schema import Row
from .cells import MOE, backend_label, module_kind


@dataclass(frozen=True)
class Entry:
    """One plan module as the report shows it."""

    kind: str
    """"gemm" or "moe"."""
    name: str
    """Plan entry name."""
    module_kind: str
    """Roll-up bucket (MODULE_KINDS)."""
    layers: int
    """Per-step invocation count on one rank."""
    shape: str
    """Logical per-rank shape, e.g. "N=6144 K=4096"."""
    padding: tuple[str, ...] = ()
    """Physical shapes that differ from the logical one, e.g. "N 6144->6272 (trtllm)"."""
    tokens_per_m: int = 1
    """MoE: tokens the layer runs per token M of the rank's attention (EP/TP under expert
    parallelism, from the rows' num_tokens / M, else the plan); 1 for GEMMs."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


def _logical_shape(r: Row) -> str:
    if r.kind == "moe":
        experts = f"{r.experts}/{r.global_experts}" if r.global_experts else f"{r.experts}"
        return f"H={r.hidden} I={r.intermediate} E={experts} top-{r.top_k}"
    return f"N={r.n} K={r.k}"


def _padding_notes(rows: Iterable[Row]) -> tuple[str, ...]:
    notes: dict[str, list[str]] = {}
    for r in rows:
        if r.kind == "moe":
            pairs = (("H", r.hidden, r.phys_hidden), ("I", r.intermediate, r.phys_intermediate))
        else:
            pairs = (("N", r.n, r.phys_n), ("K", r.k, r.phys_k))
        diff = [f"{a} {lo}->{ph}" for a, lo, ph in pairs if ph is not None and lo is not None and ph != lo]
        if diff:
            backends = notes.setdefault(" ".join(diff), [])
            if f"{r.dtype} {backend_label(r)}" not in backends:
                backends.append(f"{r.dtype} {backend_label(r)}")
    return tuple(f"{k} ({', '.join(v)})" for k, v in notes.items())


def _tokens_per_m(rows: Sequence[Row], planned: int) -> int:
    """What the MoE rows ran per M (num_tokens / M); the plan's factor when no row says."""
    ratios = Counter(r.num_tokens // r.m for r in rows
                     if r.kind == "moe" and r.num_tokens and r.m and r.num_tokens % r.m == 0)
    return ratios.most_common(1)[0][0] if ratios else planned


def plan_of(results: dict[str, Any]) -> Plan | None:
    """The plan a results.json records (None for runs without one: --nks, builtin)."""
    plan = results.get("plan")
    return Plan.from_dict(plan) if isinstance(plan, dict) else None


def _plan_entries(plan: Plan | None) -> list[Entry]:
    """Entries the plan promises (so a module with no row at all still counts as missing)."""
    if plan is None:
        return []
    out = [Entry("gemm", g.name, module_kind(g.name), int(g.layers), f"N={g.n} K={g.k}") for g in plan.gemms]
    for m in plan.moe:
        shape = f"H={m.hidden} I={m.intermediate} E={m.experts}/{m.global_experts} top-{m.top_k}"
        out.append(Entry("moe", m.name, MOE, int(m.layers), shape, tokens_per_m=int(m.tokens_per_m)))
    return out


def entries_of(plan: Plan | None, mode_rows: Sequence[Row]) -> list[Entry]:
    """The plan's entries (padding and MoE token factor read from their rows), then an entry per
    module that only rows name."""
    by_key: dict[tuple[str, str], list[Row]] = {}
    for r in mode_rows:
        by_key.setdefault((r.kind, r.name), []).append(r)
    entries: list[Entry] = []
    seen = set()
    for e in _plan_entries(plan):
        rows = by_key.get(e.key, [])
        entries.append(Entry(e.kind, e.name, e.module_kind, e.layers, e.shape, _padding_notes(rows),
                             _tokens_per_m(rows, e.tokens_per_m)))
        seen.add(e.key)
    for key, rows in by_key.items():
        if key in seen:
            continue
        r = rows[0]
        entries.append(Entry(r.kind, r.name, module_kind(r.name, r.kind), int(r.layers),
                             _logical_shape(r), _padding_notes(rows), _tokens_per_m(rows, 1)))
    return entries


__all__ = ["Entry", "plan_of", "entries_of"]
