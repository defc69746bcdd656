"""Merge the per-layer plans of a model into the plan's entries, with per-step counts.

In: one `LayerPlan` per decoder layer (with its index), the top-level one (lm_head and strays) and
the config's `layer_types`. Out: the plan's `GemmEntry`s, `MoeEntry`s and `Unsupported` modules.
Identical entries (same role, per-rank size, kind and bias) become one entry whose `layers` counts
the layer instances that run it, so dense-first, interleaved and hybrid layouts come out right by
construction; a role with several sizes gets unique names (`[layer_type]` or `[2]`, `[3]`, ...).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from ..core.plan_schema import AttentionEntry, GemmEntry, MixerNotTimed, MoeEntry, Unsupported
from .items import LayerPlan

#: Display order of GEMM roles (prefix match); unknown roles go last but before lm_head.
ROLE_ORDER = ("mla.", "indexer.", "qkv_proj", "q_proj", "gdn.", "mamba.", "short_conv.", "o_proj", "gate_up_proj",
              "up_proj", "down_proj", "router", "moe.", "shared_expert.", "shared_expert_gate", "per_layer_input_gate",
              "per_layer_projection", "per_layer_model_projection", "lm_head")


def _role_rank(name: str) -> int:
    for i, r in enumerate(ROLE_ORDER):
        if name.startswith(r):
            return i
    return len(ROLE_ORDER) - 1


def merge(per_layer: list[tuple[int, LayerPlan]], top: LayerPlan, layer_types: Sequence[Any] | None
          ) -> tuple[tuple[GemmEntry, ...], tuple[MoeEntry, ...], tuple[Unsupported, ...]]:
    """Merge identical entries, sum per-step counts, make names unique."""
    groups: dict[tuple, dict] = {}
    order: list[tuple] = []
    layers: list[tuple[int | None, LayerPlan]] = [*per_layer, (None, top)]
    for idx, lay in layers:
        for it in lay.items:
            key = (it.name, it.n, it.k, it.parallel, it.bias, it.m_divisor)
            g = groups.get(key)
            if g is None:
                g = groups[key] = {"modules": [], "layers": 0, "types": set()}
                order.append(key)
            for m in it.modules:
                if m not in g["modules"]:
                    g["modules"].append(m)
            g["layers"] += 1
            if idx is not None and layer_types and idx < len(layer_types):
                g["types"].add(str(layer_types[idx]))
    by_name: dict[str, list[tuple]] = {}
    for key in order:
        by_name.setdefault(key[0], []).append(key)
    # Present entries in the order a layer runs them (stable within a role).
    order.sort(key=lambda key: _role_rank(key[0]))
    gemms = []
    for key in order:
        name = key[0]
        same = by_name[name]
        if len(same) > 1:
            types = groups[key]["types"]
            if len(types) == 1 and all(len(groups[o]["types"]) == 1 and groups[o]["types"] != types
                                       for o in same if o != key):
                name = f"{name}[{next(iter(types))}]"
            elif same.index(key) > 0:
                name = f"{name}[{same.index(key) + 1}]"
        g = groups[key]
        gemms.append(GemmEntry(name, tuple(g["modules"]), key[1], key[2], g["layers"], key[3], key[4], key[5]))

    moe_groups: dict[tuple, dict] = {}
    for _, lay in per_layer:
        for m in lay.moe:
            key = (m.name, m.hidden, m.intermediate, m.experts, m.global_experts, m.top_k, m.activation,
                   m.routing, m.gated, m.bias)
            g = moe_groups.setdefault(key, {"modules": [], "layers": 0})
            if m.module not in g["modules"]:
                g["modules"].append(m.module)
            g["layers"] += 1
    moes = []
    for i, (key, g) in enumerate(moe_groups.items()):
        name = key[0] if i == 0 else f"{key[0]}[{i + 1}]"
        moes.append(MoeEntry(name=name, modules=tuple(g["modules"]), hidden=key[1], intermediate=key[2],
                             experts=key[3], global_experts=key[4], top_k=key[5], activation=key[6],
                             routing=key[7], layers=g["layers"], gated=key[8], bias=key[9]))
    seen: set[Unsupported] = set()
    unsup: list[Unsupported] = []
    for _, lay in layers:
        for u in lay.unsupported:
            if u not in seen:
                seen.add(u)
                unsup.append(u)
    return tuple(gemms), tuple(moes), tuple(unsup)


def merge_mixers(per_layer: list[tuple[int, LayerPlan]]
                 ) -> tuple[tuple[AttentionEntry, ...], tuple[MixerNotTimed, ...]]:
    """One attention entry per distinct layer type (same kind, per-rank heads, head sizes, latent,
    window, chunk and cache sharing), one mixer entry per distinct mixer, each counting its layers;
    names made unique as `attn`, `attn[2]`, ... in layer order."""
    attn: dict[AttentionEntry, list[Any]] = {}
    mixers: dict[tuple[str, str], list[Any]] = {}
    for _, lay in per_layer:
        for a in lay.attention:
            key = replace(a, modules=(), layers=1)
            g = attn.setdefault(key, [[], 0])
            g[0] += [m for m in a.modules if m not in g[0]]
            g[1] += 1
        for x in lay.mixers:
            g = mixers.setdefault((x.name, x.reason), [[], 0])
            g[0] += [m for m in x.modules if m not in g[0]]
            g[1] += 1

    def unique(names: list[str]) -> list[str]:
        seen: dict[str, int] = {}
        out = []
        for n in names:
            seen[n] = seen.get(n, 0) + 1
            out.append(n if seen[n] == 1 else f"{n}[{seen[n]}]")
        return out

    attn_names = unique([a.name for a in attn])
    entries = tuple(replace(a, name=n, modules=tuple(g[0]), layers=g[1])
                    for n, (a, g) in zip(attn_names, attn.items(), strict=True))
    mixer_names = unique([name for name, _ in mixers])
    nots = tuple(MixerNotTimed(n, tuple(g[0]), g[1], reason)
                 for n, ((_, reason), g) in zip(mixer_names, mixers.items(), strict=True))
    return entries, nots


def ranges(idx: list[int]) -> str:
    """Layer indices as a short list of ranges: [1, 2, 3, 7] -> "1-3, 7"."""
    out: list[str] = []
    start: int | None = None
    for j, i in enumerate(idx):
        if start is None:
            start = i
        if j + 1 == len(idx) or idx[j + 1] != i + 1:
            out.append(str(start) if start == i else f"{start}-{i}")
            start = None
    return ", ".join(out)


__all__ = ["ROLE_ORDER", "merge", "merge_mixers", "ranges"]
