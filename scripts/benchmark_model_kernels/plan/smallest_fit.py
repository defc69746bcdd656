"""The fewest GPUs (and then the smallest TP) whose ranks hold a model, per recipe, for the preview.

A layout fits one GPU of a size when `memory.estimate` leaves room for K/V beside the weights and
the activation reserve (`kv_fits_any`: the rule of the preview's memory table and of
`deploy/layouts.py`). The candidates, fewest GPUs first (1, 2, 4, 8: one NVLink node) and at equal
GPUs the smallest TP first: for a dense model TP=G; for an MoE model TP=1 with EP=G (vLLM's
`-dp G --enable-expert-parallel`: attention replicated, E/G experts per rank) and then TP=G with
EP=G (`-tp G --enable-expert-parallel`). Each candidate is planned by `plan_at` (the rules planner,
plans kept by `plan_cache`), only until every recipe has its layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.plan_schema import Plan
from ..vllm_rules.layout import Layout
from . import memory

#: GPU counts tried: one NVLink node of HGX boards holds 8.
GPU_COUNTS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Fit:
    """The first candidate layout whose rank holds `recipe` on one GPU of `size_gib` (None: none of
    them, up to 8 GPUs)."""

    recipe: str
    size_gib: float
    layout: Layout | None

    @property
    def flags(self) -> str:
        """The layout as this tool's flags, e.g. "--tp 1 --ep 8"."""
        if self.layout is None:
            return ""
        lay = self.layout
        return f"--tp {lay.tp}" + (f" --ep {lay.ep}" if lay.ep > 1 else "")


def candidates(moe: bool, counts: tuple[int, ...] = GPU_COUNTS) -> list[Layout]:
    """The layouts tried, in order (see the module docstring)."""
    out: list[Layout] = []
    for g in counts:
        layouts = [Layout.from_flags(1, g), Layout.from_flags(g, g)] if moe else [Layout.from_flags(g, 1)]
        for lay in layouts:
            if lay not in out:
                out.append(lay)
    return out


def smallest_fits(plan: Plan, plan_at: Callable[[Layout], Plan], size_gib: float, *,
                  utilization: float = memory.VLLM_GPU_MEMORY_UTILIZATION,
                  recipes: tuple[str, ...] = memory.RECIPES, kv_dtype: str = "bf16",
                  planned: dict[Layout, Plan | None] | None = None) -> list[Fit]:
    """Per recipe, the first candidate layout that fits one GPU of `size_gib` GiB. `plan` is the
    preview's own plan (reused for its layout); `plan_at` plans another layout (a UsageError: the
    planner refuses that layout, which is skipped). `planned` keeps plans across sizes."""
    planned = {} if planned is None else planned
    planned.setdefault(Layout.from_flags(plan.tp, plan.ep), plan)
    size = int(size_gib * 2**30)
    found: dict[str, Layout | None] = dict.fromkeys(recipes)
    for layout in candidates(bool(plan.moe)):
        if all(found[r] is not None for r in recipes):
            break
        if layout not in planned:
            try:
                planned[layout] = plan_at(layout)
            except UsageError:
                planned[layout] = None
        this = planned[layout]
        if this is None or not this.complete or any(e.global_experts < layout.ep for e in this.moe):
            continue
        for recipe in recipes:
            if found[recipe] is None and memory.estimate(this, recipe, kv_dtype, size,
                                                         gpu_memory_utilization=utilization).kv_fits_any:
                found[recipe] = layout
    return [Fit(r, size_gib, found[r]) for r in recipes]


def fit_line(fits: list[Fit], where: str) -> str:
    """One preview line: per recipe the fewest GPUs and the flags, e.g.
    "# smallest layout that fits (one 140.4 GiB GPU; --assume_cc h200): bf16 --tp 2 (2 GPUs), ..."."""
    parts = []
    for f in fits:
        if f.layout is None:
            parts.append(f"{f.recipe} does not fit on {GPU_COUNTS[-1]} GPUs (one node)")
        else:
            n = f.layout.world_size
            parts.append(f"{f.recipe} {f.flags} ({n} GPU{'s' if n > 1 else ''})")
    size = fits[0].size_gib if fits else 0
    return f"# smallest layout that fits (one {size:g} GiB GPU; {where}): " + ", ".join(parts)


__all__ = ["Fit", "GPU_COUNTS", "candidates", "fit_line", "smallest_fits"]
