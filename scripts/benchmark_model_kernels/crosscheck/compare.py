"""Compare a plan with the per-rank layers vLLM built: missing, extra and different shapes.

Both sides are reduced to the same records: one `LinearShape` per distinct per-rank GEMM (N, K, linear
kind, bias, rows as a divisor of M), one `moe_shape` (an MoE entry without name, modules or
count) per distinct fused-MoE layer and one `AttentionShape` per distinct attention layer, each with how
many times one forward step runs it and where it lives. The plan's entries already are that
(`layers` is the per-step count); vLLM's modules are counted per decoder-layer instance
(`vllm_layers`). Equal records with equal counts agree; the rest is paired by the module's leaf
name (`qkv_proj`, `experts`, ...) into "different" lines, and what stays unpaired is "missing"
(vLLM runs it, the plan does not) or "extra" (the plan lists it, vLLM does not run it).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

from ..core.plan_schema import MoeEntry, Plan, Routing
from ..plan.merge import ranges

#: vLLM's MoEActivation value (vllm/model_executor/layers/fused_moe/activation.py: MoEActivation)
#: -> the FlashInfer ActivationType name the plan uses (vllm_rules.moe.ACTIVATIONS).
VLLM_ACTIVATIONS = {
    "silu": "Swiglu", "gelu": "Geglu", "gelu_tanh": "Geglu", "swigluoai": "SwigluBias", "relu2_no_mul": "Relu2",
    "silu_no_mul": "Silu", "gelu_no_mul": "Gelu", "gelu_tanh_no_mul": "Gelu",
}
#: Plan routing methods vLLM runs as a model's own custom_routing_function -> that function's
#: qualified name (vllm/model_executor/models/llama4.py: Llama4MoE.custom_routing_function; phimoe.py:
#: phimoe_routing_function; gemma4.py: Gemma4Router.routing_function).
CUSTOM_ROUTING = {"llama4": "Llama4MoE.custom_routing_function", "sparsemixer": "phimoe_routing_function",
                  "gemma4": "Gemma4Router.routing_function"}
#: How a difference in a linear layer's bias alone starts its line: the same GEMM shape on both
#: sides, so no shape mismatch (`CrossCheckResult.status` does not count it).
BIAS_ONLY = "bias: "


def flashinfer_activation(vllm_value: str) -> str:
    """The plan's name for vLLM's MoE activation (the value itself when it has none)."""
    return VLLM_ACTIVATIONS.get(vllm_value, f"vllm:{vllm_value}")


def routing_key(selection: str, n_group: int | None, topk_group: int | None, scoring: str | None,
                renormalize: bool | None, correction_bias: bool, on_input: bool, scale: float = 1.0) -> Routing:
    """The routing both sides are compared by, as a `Routing` whose method is how experts are
    selected ("topk", "grouped" or "custom:<function>", a model's own function, whose scoring and
    renormalization are its own): the groups, the scoring, renormalization, the score-correction
    bias, whether the weight scales the input, and the routed scaling factor the expert outputs are
    multiplied by (1.0: none; vLLM applies it to the top-k weights or to the summed output, the same
    product)."""
    if selection.startswith("custom"):
        scoring, renormalize = "", False
    return Routing(selection, n_group=n_group, topk_group=topk_group, routed_scaling_factor=float(scale),
                   use_routing_bias=correction_bias, scoring_func=scoring or "", renormalize=bool(renormalize),
                   apply_router_weight_on_input=on_input)


def moe_shape(hidden: int, intermediate: int, experts: int, global_experts: int, top_k: int, activation: str,
              gated: bool, bias: bool, tokens_per_m: int, routing: Routing) -> MoeEntry:
    """One fused-MoE layer as compared: an MoE entry without name, modules or count, its routing a
    `routing_key`."""
    return MoeEntry("experts", (), hidden, intermediate, experts, global_experts, top_k, activation, routing, 1,
                    gated=gated, bias=bias, tokens_per_m=tokens_per_m)


def moe_text(e: MoeEntry) -> str:
    r = e.routing
    groups = f" {r.n_group}/{r.topk_group}" if r.method == "grouped" else ""
    route = f"{r.method}{groups}{' ' + r.scoring_func if r.scoring_func else ''}{' renorm' if r.renormalize else ''}" \
            f"{' +corr-bias' if r.use_routing_bias else ''}{' on-input' if r.apply_router_weight_on_input else ''}" \
            f"{f' scale={r.routed_scaling_factor:g}' if r.routed_scaling_factor not in (None, 1.0) else ''}"
    return (f"H={e.hidden} I_r={e.intermediate} experts={e.experts}/{e.global_experts} top_k={e.top_k} "
            f"act={e.activation}{'' if e.gated else ' (non-gated)'}{' +bias' if e.bias else ''} "
            f"tokens={e.tokens_per_m}xM routing={route}")


@dataclass(frozen=True)
class LinearShape:
    """One per-rank dense GEMM as compared: Y[ceil(M/m_divisor), n] = X[., k] W[n, k]^T."""

    n: int
    k: int
    parallel: str
    bias: bool
    m_divisor: int = 1

    def text(self) -> str:
        rows = f" on M/{self.m_divisor}" if self.m_divisor > 1 else ""
        return f"{self.n} x {self.k} {self.parallel}{' +bias' if self.bias else ''}{rows}"


@dataclass(frozen=True)
class AttentionShape:
    """One attention layer as one rank runs it: vLLM's `Attention` / `MLAAttention` attributes
    (num_heads, num_kv_heads, head_size, head_size_v or MLA's kv_lora_rank, sliding_window, Llama
    4's attention_chunk_size, a KV-sharing target) against the plan's attention entry."""

    kind: str
    num_heads: int
    num_kv_heads: int
    head_size: int
    head_size_v: int
    sliding_window: int = 0
    chunk: int = 0
    kv_shared: bool = False
    prefill_dims: tuple[int, int] = (0, 0)
    """MLA: (qk_nope_head_dim, v_head_dim), the per-head K and V prefill up-projects; (0, 0) for MHA."""

    def text(self) -> str:
        window = f" window={self.sliding_window}" if self.sliding_window else ""
        chunk = f" chunk={self.chunk}" if self.chunk else ""
        prefill = f" prefill nope/v={self.prefill_dims[0]}/{self.prefill_dims[1]}" if any(self.prefill_dims) else ""
        return (f"{self.kind} heads={self.num_heads} kv_heads={self.num_kv_heads} head_size={self.head_size}/"
                f"{self.head_size_v}{window}{chunk}{' kv-shared' if self.kv_shared else ''}{prefill}")


@dataclass(frozen=True)
class Placed:
    """A shape at one place: its leaf role name (for pairing) and where it lives."""

    role: str
    where: str


@dataclass
class Side:
    """One side's shapes: per-step counts and where each lives."""

    gemms: Counter = field(default_factory=Counter)
    moes: Counter = field(default_factory=Counter)
    attention: Counter = field(default_factory=Counter)
    places: dict = field(default_factory=dict)

    def add(self, shape: LinearShape | MoeEntry | AttentionShape, count: int, role: str, where: str) -> None:
        kind = {LinearShape: self.gemms, AttentionShape: self.attention}.get(type(shape), self.moes)
        kind[shape] += count
        self.places.setdefault(shape, []).append(Placed(role, where))


@dataclass(frozen=True)
class CrossCheckResult:
    """What the cross-check found; `differences` is empty on agreement."""

    against: str
    """e.g. "vllm 0.33.0 vllm.model_executor.models.deepseek_v2.DeepseekV3ForCausalLM (...)"."""
    differences: tuple[str, ...] = ()
    refused: str = ""
    """vLLM's one-line refusal, when it would not build the model at this layout."""
    not_checked: str = ""
    """Why vLLM's class could not be built on this machine (no verdict on the plan)."""

    @property
    def status(self) -> str:
        if self.not_checked:
            return "not checked"
        if self.refused:
            return "vllm refuses"
        return "mismatch" if any(not d.startswith(BIAS_ONLY) for d in self.differences) else "match"


def role_of(name: str) -> str:
    """The leaf role of a plan entry name or a module path: "shared_expert.down_proj[2]" -> "down_proj"."""
    return name.split("[", 1)[0].rsplit(".", 1)[-1]


def moe_routing_key(e: MoeEntry) -> Routing:
    """The compared routing of a plan MoE entry (`routing_key`)."""
    r = e.routing
    scale = r.routed_scaling_factor if r.routed_scaling_factor is not None else 1.0
    if r.method in CUSTOM_ROUTING:
        return routing_key(f"custom:{CUSTOM_ROUTING[r.method]}", None, None, None, None, r.use_routing_bias,
                           r.apply_router_weight_on_input, scale)
    grouped = r.method in ("deepseek_v3", "grouped_topk") and (r.n_group or 1) > 1
    return routing_key("grouped" if grouped else "topk", r.n_group if grouped else None,
                       r.topk_group if grouped else None, r.scoring_func, r.renormalize, r.use_routing_bias,
                       r.apply_router_weight_on_input, scale)


def plan_side(plan: Plan) -> Side:
    """The plan's entries as compared records (a GEMM's parallel kind at TP=1 is what it would be
    at any TP: vLLM keeps its class)."""
    side = Side()
    for g in plan.gemms:
        where = f"plan {g.name} ({', '.join(g.modules)})"
        side.add(LinearShape(g.n, g.k, g.parallel, g.bias, g.m_divisor), g.layers, role_of(g.name), where)
    for e in plan.moe:
        shape = moe_shape(e.hidden, e.intermediate, e.experts, e.global_experts, e.top_k, e.activation, e.gated,
                          e.bias, e.tokens_per_m, moe_routing_key(e))
        side.add(shape, e.layers, "experts", f"plan {e.name} ({', '.join(e.modules)})")
    for a in plan.attention:
        shape = AttentionShape(a.kind, a.num_q_heads, a.num_kv_heads, a.head_dim_qk, a.head_dim_vo, a.sliding_window,
                               a.attention_chunk_size, a.kv_shared, (a.qk_nope_head_dim, a.v_head_dim))
        side.add(shape, a.layers, "attn", f"plan {a.name} ({', '.join(a.modules)})")
    return side


def _pair_key(role: str) -> str:
    """Leaf names that are the same role on both sides (the router is `gate` or `router`)."""
    return "router" if role in ("gate", "router") else role


def compare(plan: Side, vllm: Side) -> list[str]:
    """One line per difference between the plan's and vLLM's shapes (empty when they agree)."""
    lines: list[str] = []
    for kind in ("gemms", "moes", "attention"):
        want: Counter = getattr(vllm, kind)
        have: Counter = getattr(plan, kind)
        missing = {s: c - have.get(s, 0) for s, c in want.items() if c > have.get(s, 0)}
        extra = {s: c - want.get(s, 0) for s, c in have.items() if c > want.get(s, 0)}
        if kind == "gemms":
            lines += _bias_only(plan, vllm, missing, extra)
        for v_shape in list(missing):
            v_roles = {_pair_key(p.role) for p in vllm.places[v_shape]}
            p_shape = next((s for s in extra if {_pair_key(p.role) for p in plan.places[s]} & v_roles), None)
            if p_shape is None:
                continue
            lines.append(f"different: {_where(vllm, v_shape)}: vLLM runs {_text(v_shape)} x{missing[v_shape]}, "
                         f"the plan {_text(p_shape)} x{extra[p_shape]} [{_where(plan, p_shape)}]")
            del missing[v_shape], extra[p_shape]
        for s, c in missing.items():
            lines.append(f"missing: {_where(vllm, s)}: vLLM runs {_text(s)} x{c}, the plan has no such entry")
        for s, c in extra.items():
            lines.append(f"extra: {_where(plan, s)}: the plan lists {_text(s)} x{c}, vLLM runs no such layer")
    return lines


def _bias_only(plan: Side, vllm: Side, missing: dict, extra: dict) -> list[str]:
    """Lines for the GEMMs both sides run at the same shape, count and role but one with a bias and
    the other without (taken out of `missing` and `extra`)."""
    lines = []
    for v_shape in list(missing):
        v_roles = {_pair_key(p.role) for p in vllm.places[v_shape]}
        twin = replace(v_shape, bias=not v_shape.bias)
        if twin not in extra or extra[twin] != missing[v_shape] \
                or not {_pair_key(p.role) for p in plan.places[twin]} & v_roles:
            continue
        has, lacks = ("vLLM's layer", "the plan's entry") if v_shape.bias else ("the plan's entry", "vLLM's layer")
        lines.append(f"{BIAS_ONLY}{_where(vllm, v_shape)}: {has} has a bias, {lacks} none (same {v_shape.n} x "
                     f"{v_shape.k} GEMM x{missing[v_shape]}) [{_where(plan, twin)}]")
        del missing[v_shape], extra[twin]
    return lines


def _text(shape: LinearShape | MoeEntry | AttentionShape) -> str:
    return moe_text(shape) if isinstance(shape, MoeEntry) else shape.text()


def _where(side: Side, shape: LinearShape | MoeEntry | AttentionShape) -> str:
    return "; ".join(p.where for p in side.places[shape])


def layer_ranges(paths: list[str]) -> str:
    """Module paths of the same module over decoder layers, the layer index as a range:
    ["m.layers.0.mlp", "m.layers.1.mlp", "m.layers.5.mlp"] -> "m.layers.{0-1,5}.mlp"."""
    groups: dict[str, list[int]] = {}
    for p in paths:
        m = re.search(r"\.(\d+)(?=\.|$)", p)
        if not m:
            groups.setdefault(p, [])
            continue
        pattern = p[:m.start(1)] + "{}" + p[m.end(1):]
        groups.setdefault(pattern, []).append(int(m.group(1)))
    out = []
    for pattern, idx in groups.items():
        out.append(pattern.replace("{}", "{" + ranges(sorted(set(idx))).replace(" ", "") + "}") if idx else pattern)
    return ", ".join(out)

__all__ = ["VLLM_ACTIVATIONS", "CUSTOM_ROUTING", "BIAS_ONLY", "flashinfer_activation", "routing_key", "LinearShape",
           "moe_shape", "AttentionShape",
           "moe_text", "Placed", "Side", "CrossCheckResult", "role_of", "plan_side", "compare", "layer_ranges",
           "moe_routing_key"]
