"""What one decoder layer contributes to a plan, before identical layers are merged.

`planner` walks a layer and fills a `LayerScan` (what the layer holds); the classifiers in `roles`
and `attention_roles` read it and append to its `LayerPlan` (what vLLM runs for it: `Item`s,
`MoeItem`s and `Unsupported` modules); `merge` turns the per-layer plans into the plan's entries.
`Context` holds what every classifier needs about the model and the parallel `Layout`; a classifier
works on one parent module's `Group` of Linears and places each GEMM with `emit`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.plan_schema import AttentionEntry, MixerNotTimed, Routing, Unsupported
from ..vllm_rules import sharding
from ..vllm_rules.layout import Layout

#: (out features, in features, has bias) of one Linear, as the model stores it (not yet per rank).
Dims = tuple[int, int, bool]


@dataclass
class Item:
    """One GEMM role found in one layer, at its per-rank size."""

    name: str
    modules: list[str]
    n: int
    k: int
    parallel: str
    bias: bool
    m_divisor: int = 1
    """It runs ceil(M / m_divisor) rows (TP: shared experts under sequence-parallel MoE)."""


@dataclass
class MoeItem:
    """One routed-expert block found in one layer, at its per-rank size."""

    name: str
    module: str
    hidden: int
    intermediate: int
    experts: int
    global_experts: int
    top_k: int
    activation: str
    routing: Routing
    gated: bool
    bias: bool


@dataclass
class LayerPlan:
    """What one decoder layer (or the top level) contributes."""

    items: list[Item] = field(default_factory=list)
    moe: list[MoeItem] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)
    attention: list[AttentionEntry] = field(default_factory=list)
    """The layer's attention, one entry of `layers=1` (merged over the layers by `merge`)."""
    mixers: list[MixerNotTimed] = field(default_factory=list)
    """The layer's token mixer when it is not softmax attention (`layers=1`)."""


@dataclass
class LayerScan:
    """One decoder layer being classified.

    `linears` and `others` are keyed by the module's path inside the layer; `consumed` collects the
    paths a classifier has placed, so the grouping by parent module skips them."""

    layer: Any
    """The decoder layer (an nn.Module on meta)."""
    prefix: str
    """Its path in the model, e.g. `model.layers.3`."""
    linears: dict[str, Dims]
    """Every Linear (and GPT-2 Conv1D) in the layer."""
    others: dict[str, Any]
    """Modules with a 2-D `weight` that are not Linears (possible routers)."""
    consumed: set[str] = field(default_factory=set)
    out: LayerPlan = field(default_factory=LayerPlan)

    @property
    def index(self) -> int:
        """The decoder layer's index (the last part of `prefix`); -1 for the top level."""
        last = self.prefix.rsplit(".", 1)[-1]
        return int(last) if last.isdigit() else -1

    def full(self, rel: str) -> str:
        """The model path of `rel`, layer (and expert) indices written as `*`."""
        return star(f"{self.prefix}.{rel}")


@dataclass
class Context:
    """The model-wide values the classifiers read, and the notes they leave for the plan."""

    cfg: Any
    layout: Layout
    """The parallel layout being planned (validated once, where the flags are read)."""
    hidden: int
    num_heads: Any
    notes: list[str] = field(default_factory=list)
    disable_tp: bool = False
    """The layers being classified are built with vLLM's `disable_tp=True` (replicated shared
    experts under sequence-parallel MoE): nothing is TP-split (`tp` reads 1)."""

    @property
    def tp(self) -> int:
        """Ranks a TP-sharded layer is split over: the layout's TP (1 under `disable_tp`)."""
        return 1 if self.disable_tp else self.layout.tp

    @property
    def ep(self) -> int:
        """The layout's EP size (the `--ep` value: DP x TP under expert parallelism, else 1)."""
        return self.layout.ep

    def note(self, text: str) -> None:
        """Add a plan note once (several layers find the same thing)."""
        if text and text not in self.notes:
            self.notes.append(text)


@dataclass
class Group:
    """The not-yet-placed Linears of one parent module of a layer, by leaf name; a classifier
    pops the ones it places from `left`."""

    scan: LayerScan
    parent: str
    module: Any
    left: dict[str, Dims]

    def path(self, leaf: str) -> str:
        return self.scan.full(f"{self.parent}.{leaf}" if self.parent else leaf)


def emit(ctx: Context, out: LayerPlan, role: str, modules: list[str], dims: Dims, *, what: str = "",
         per_rank: tuple[int, int] | None = None) -> None:
    """Place one GEMM of `role` with the logical `dims` of its weight. Its linear kind comes from
    vLLM's role table; its per-rank (N, K) from that kind's split (`what` names it in a TP error),
    unless a special rule (QKV heads, merged shards, Mamba2, GatedDeltaNet) already gave them as
    `per_rank`."""
    kind = sharding.ROLE_KIND[role]
    n, k, bias = dims
    n_r, k_r = per_rank if per_rank is not None else sharding.split(kind, n, k, ctx.tp, what or role)
    out.items.append(Item(role, modules, n_r, k_r, kind, bias))


def star(path: str) -> str:
    """Layer (and expert) indices written as `*`."""
    return re.sub(r"(^|\.)\d+(?=\.|$)", r"\1*", path)


__all__ = ["Dims", "Item", "MoeItem", "LayerPlan", "LayerScan", "Context", "Group", "emit", "star"]
