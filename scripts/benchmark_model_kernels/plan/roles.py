"""Give every Linear and expert block of one decoder layer its role, and its per-rank size.

In: a `LayerScan` (the layer's Linears, expert blocks and 2-D-weight modules, found by `planner`)
and the model's `Context`. Out: `Item`s, `MoeItem`s and `Unsupported` modules appended to the
scan's `LayerPlan`. A role comes from a module's leaf name and its siblings (q/k/v/o, MLA parts,
gate/up/down, Mamba2, GatedDeltaNet, router, shared expert, ...); its linear kind from
`vllm_rules.sharding.ROLE_KIND`; its per-rank size from `vllm_rules.sharding` (`emit`); the experts'
activation and routing from `vllm_rules.moe`. `group` sends attention and MLA to
`attention_roles` and places the other mixers (Mamba-1/2, short conv, GatedDeltaNet), the MLPs and
the routed experts with their router and shared experts here. Whatever no rule places becomes
`Unsupported`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.plan_schema import MixerNotTimed, Unsupported
from ..vllm_rules import attention as vllm_attention
from ..vllm_rules import moe as vllm_moe
from ..vllm_rules import sharding
from ..vllm_rules.config import config_value
from . import attention_roles
from .attention_roles import ATTN_OUT, FUSED_QKV
from .items import Context, Dims, Group, LayerScan, MoeItem, emit

#: (gate, up, down) leaf names of gated MLPs, and (up, down) of non-gated ones.
GATED_MLP = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
#: (fused gate|up, down) leaf names: Phi-3 gate_up_proj; GraniteMoe shared MLP input_linear (chunked
#: into gate and up, vLLM MergedColumnParallelLinear [I, I]) + output_linear.
FUSED_GATED_MLP = (("gate_up_proj", "down_proj"), ("input_linear", "output_linear"))
NONGATED_MLP = (("up_proj", "down_proj"), ("c_fc", "c_proj"), ("fc1", "fc2"),
                ("dense_h_to_4h", "dense_4h_to_h"), ("fc_in", "fc_out"))
#: Leaf names of Gemma 4's per-layer-input GEMMs in a decoder layer.
PER_LAYER_INPUT = ("per_layer_input_gate", "per_layer_projection")
#: Leaf names of the latent projections around latent routed experts (NemotronH moe_latent_size).
LATENT_PROJ = ("fc1_latent_proj", "fc2_latent_proj")
#: Names of shared-expert sub-modules beside routed experts.
SHARED_EXPERT = ("shared_expert", "shared_experts", "shared_mlp")
ROUTER_NAMES = ("gate", "router")
#: 2-D parameters of an expert block that stacks every expert's gate (w1), up (v1) and down (w2)
#: rows, each [E*I, H] (DBRX's DbrxExpertGLU).
STACKED_GLU = frozenset({"w1", "v1", "w2"})
#: Config fields holding the number of experts each token is routed to.
TOPK_KEYS = ("num_experts_per_tok", "top_k_experts", "num_experts_per_token", "moe_topk", "top_k")


@dataclass
class _Experts:
    """One routed-expert block: its path in the layer, module, and logical sizes."""

    rel: str
    module: Any
    count: int
    intermediate: int
    gated: bool
    bias: bool
    hidden: int = 0
    """The width the experts work in: hidden_size, or moe_latent_size for latent MoE (0: hidden_size)."""


def group(ctx: Context, scan: LayerScan, parent: str, leaves: dict[str, Dims], prefix_name: str = "") -> None:
    """Classify the Linears of one parent module by their leaf names; leftovers -> Unsupported."""
    pmod = scan.layer.get_submodule(parent) if parent else scan.layer
    g = Group(scan, parent, pmod, dict(leaves))
    left, out = g.left, scan.out
    kind = type(pmod).__name__.lower()
    if not prefix_name and parent.rsplit(".", 1)[-1] in SHARED_EXPERT:
        prefix_name = "shared_expert."  # a shared MLP that sits beside the MoE block (GraniteMoeHybrid)
    if "kv_a_proj_with_mqa" in left:
        attention_roles.mla(ctx, g)
    elif parent.endswith("indexer") and "wq_b" in left:
        attention_roles.indexer(ctx, g)
    elif "in_proj_qkvz" in left or "in_proj_qkv" in left:
        _gdn(ctx, g)
    elif all(x in left for x in ("in_proj", "x_proj", "dt_proj", "out_proj")):
        _mamba1(ctx, g)
    elif "in_proj" in left and "out_proj" in left and "shortconv" in kind:
        _short_conv(ctx, g)
    elif "in_proj" in left and "out_proj" in left and ("mamba" in kind or hasattr(pmod, "ssm_state_size")):
        _mamba(ctx, g)
    elif "q_proj" in left and "k_proj" in left and ("cross" in parent.rsplit(".", 1)[-1]
                                                     or "crossattention" in kind):
        attention_roles.cross_attention(ctx, g)
    elif ("q_proj" in left and "k_proj" in left) or any(f in left for f in FUSED_QKV):
        attention_roles.self_attention(ctx, g)
    elif "q_proj" in left and "attention" in kind and any(o in left for o in ATTN_OUT):
        attention_roles.query_only_attention(ctx, g)
    for leaf in PER_LAYER_INPUT:
        if leaf in left:
            # Gemma 4 per-layer inputs: ReplicatedLinear gate H -> H_pl and projection H_pl -> H
            # (vllm/model_executor/models/gemma4.py: Gemma4DecoderLayer.__init__).
            emit(ctx, out, leaf, [g.path(leaf)], left.pop(leaf))

    if left:
        _mlp(ctx, g, prefix_name)
    for leaf, (n, k, _) in left.items():
        out.unsupported.append(Unsupported(g.path(leaf), n, k, f"Linear '{leaf}' in {type(pmod).__name__} "
                                           "matches no known role (attention, MLP, MLA, Mamba2, GDN, MoE)"))


def _mamba(ctx: Context, g: Group) -> None:
    """MambaMixer2 (vllm/model_executor/layers/mamba/mamba_mixer2.py: MambaMixer2.__init__)."""
    left, out, path, pmod = g.left, g.scan.out, g.path, g.module
    n, k, bias = left["in_proj"]
    inter, groups = getattr(pmod, "intermediate_size", None), getattr(pmod, "n_groups", None)
    state, heads = getattr(pmod, "ssm_state_size", None), getattr(pmod, "num_heads", None)
    if None in (inter, groups, state, heads) or n != 2 * inter + 2 * groups * state + heads:
        return  # leave both in `left`: reported as unsupported
    left.pop("in_proj")
    n_r = sharding.mamba2_in_proj_per_rank(inter, groups, state, heads, ctx.tp)
    emit(ctx, out, "mamba.in_proj", [path("in_proj")], (n, k, bias), per_rank=(n_r, k))
    emit(ctx, out, "mamba.out_proj", [path("out_proj")], left.pop("out_proj"), what="mamba out_proj")
    groups_r = groups // ctx.tp if groups % ctx.tp == 0 else 1
    out.mixers.append(MixerNotTimed("mamba", (g.scan.full(g.parent),), 1, vllm_attention.mamba2_reason(
        heads // ctx.tp, inter // heads, groups_r, state)))


def _mamba1(ctx: Context, g: Group) -> None:
    """Mamba-1 mixer (Jamba, Mamba): in_proj H -> [x | z] of 2I, a MergedColumnParallelLinear
    ([I, I], 2I/TP per rank); x_proj I -> dt_rank + 2*d_state RowParallel (K = I/TP); dt_proj
    dt_rank -> I ColumnParallel (I/TP, with bias); out_proj I -> H RowParallel
    (vllm/model_executor/layers/mamba/mamba_mixer.py: MambaMixer.__init__)."""
    left, out, path = g.left, g.scan.out, g.path
    in_n, k, _ = left["in_proj"]
    x_n, x_k, _ = left["x_proj"]
    dt_n, dt_k, _ = left["dt_proj"]
    inter = in_n // 2
    if in_n % 2 or x_k != inter or dt_n != inter or left["out_proj"][1] != inter:
        return  # leave them in `left`: reported as unsupported
    i_r = sharding.require_divides(inter, ctx.tp, "Mamba intermediate size (mamba_expand*hidden_size)")
    emit(ctx, out, "mamba.in_proj", [path("in_proj")], left.pop("in_proj"), per_rank=(2 * i_r, k))
    emit(ctx, out, "mamba.x_proj", [path("x_proj")], left.pop("x_proj"), per_rank=(x_n, i_r))
    emit(ctx, out, "mamba.dt_proj", [path("dt_proj")], left.pop("dt_proj"), per_rank=(i_r, dt_k))
    emit(ctx, out, "mamba.out_proj", [path("out_proj")], left.pop("out_proj"), what="mamba out_proj")
    state = (x_n - dt_k) // 2
    out.mixers.append(MixerNotTimed("mamba1", (g.scan.full(g.parent),), 1, vllm_attention.mamba1_reason(i_r, state)))


def _short_conv(ctx: Context, g: Group) -> None:
    """LFM2 short convolution: in_proj H -> [B | C | x] of 3H, a MergedColumnParallelLinear
    ([H, H, H]: 3H/TP per rank), the depthwise conv (no GEMM), out_proj H -> H RowParallel
    (vllm/model_executor/layers/mamba/short_conv.py: ShortConv.__init__)."""
    left, out, path = g.left, g.scan.out, g.path
    n, k, _ = left["in_proj"]
    if n != 3 * k or left["out_proj"][1] != k:
        return  # leave them in `left`: reported as unsupported
    shard = sharding.require_divides(k, ctx.tp, "short conv width (hidden_size)")
    emit(ctx, out, "short_conv.in_proj", [path("in_proj")], left.pop("in_proj"), per_rank=(3 * shard, k))
    emit(ctx, out, "short_conv.out_proj", [path("out_proj")], left.pop("out_proj"), what="short conv out_proj")
    out.mixers.append(MixerNotTimed("short_conv", (g.scan.full(g.parent),), 1,
                                    vllm_attention.short_conv_reason(shard)))


def _gdn(ctx: Context, g: Group) -> None:
    """Qwen3-Next / Qwen3.5 GatedDeltaNet (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:
    QwenGatedDeltaNetAttention); Qwen3.5's split in_proj_qkv + in_proj_z and in_proj_b + in_proj_a
    are the same merged GEMMs."""
    left, out, path, pmod = g.left, g.scan.out, g.path, g.module
    hk, hv = getattr(pmod, "num_k_heads", None), getattr(pmod, "num_v_heads", None)
    dk, dv = getattr(pmod, "head_k_dim", None), getattr(pmod, "head_v_dim", None)
    if None in (hk, hv, dk, dv):
        return
    qkvz_n, ba_n, out_k = sharding.gdn_per_rank(hk, hv, dk, dv, ctx.tp)
    qkvz = [x for x in ("in_proj_qkvz", "in_proj_qkv", "in_proj_z") if x in left]
    ba = [x for x in ("in_proj_ba", "in_proj_b", "in_proj_a") if x in left]
    if sum(left[x][0] for x in qkvz) != 2 * hk * dk + 2 * hv * dv or sum(left[x][0] for x in ba) != 2 * hv:
        return
    k = left[qkvz[0]][1]
    emit(ctx, out, "gdn.in_proj_qkvz", [path(x) for x in qkvz],
         (sum(left[x][0] for x in qkvz), k, any(left[x][2] for x in qkvz)), per_rank=(qkvz_n, k))
    emit(ctx, out, "gdn.in_proj_ba", [path(x) for x in ba],
         (sum(left[x][0] for x in ba), k, any(left[x][2] for x in ba)), per_rank=(ba_n, k))
    for x in qkvz + ba:
        left.pop(x)
    if "out_proj" in left:
        on, ok, obias = left.pop("out_proj")
        emit(ctx, out, "gdn.out_proj", [path("out_proj")], (on, ok, obias), per_rank=(on, out_k))
    out.mixers.append(MixerNotTimed("gdn", (g.scan.full(g.parent),), 1, vllm_attention.gdn_reason(
        hk // ctx.tp, hv // ctx.tp, dk, dv)))


# ------------------------------------------------------------------------ MLP
def _mlp(ctx: Context, g: Group, prefix_name: str) -> None:
    """Dense MLP: gated -> merged gate_up (column) + down (row); non-gated -> up + down
    (vllm/model_executor/models/llama.py: LlamaMLP; vllm/model_executor/models/gpt2.py: GPT2MLP;
    falcon.py: FalconMLP; starcoder2.py: Starcoder2MLP). Each merged shard must divide by TP
    (vllm/model_executor/layers/linear.py: MergedColumnParallelLinear)."""
    model_type = str(getattr(ctx.cfg, "model_type", ""))
    if not prefix_name and not ctx.disable_tp and sharding.dense_mlp_sequence_parallel(ctx.layout, model_type):
        # The whole decoder layer is sequence-parallel: the dense MLP is replicated at full width
        # on ceil(M/TP) tokens per rank (sharding.dense_mlp_sequence_parallel)
        start = len(g.scan.out.items)
        _mlp(replace(ctx, disable_tp=True), g, prefix_name)
        for it in g.scan.out.items[start:]:
            it.parallel, it.m_divisor = "replicated", ctx.tp
        ctx.note(f"sequence-parallel decoder layers (EP={ctx.ep}, TP={ctx.tp}, DP={ctx.layout.dp}; vLLM's CUDA "
                 f"class): the dense layers' MLP runs replicated at full width on ceil(M/{ctx.tp}) tokens per rank")
        return
    left, out, path = g.left, g.scan.out, g.path
    tp, p = ctx.tp, prefix_name
    what = "shared expert intermediate size" if p else "intermediate_size"
    for gu, dn in FUSED_GATED_MLP:  # fused on disk, same per-rank shape as split gate + up
        if gu in left and dn in left:
            n, k, bias = left.pop(gu)
            sharding.require_divides(n // 2, tp, what)
            emit(ctx, out, p + "gate_up_proj", [path(gu)], (n, k, bias), per_rank=(n // tp, k))
            _down(ctx, g, dn, p, what)
            return
    for gt, u, dn in GATED_MLP:
        if gt in left and u in left and dn in left:
            gn, k, gb = left.pop(gt)
            un, _, ub = left.pop(u)
            sharding.require_divides(gn, tp, what)
            sharding.require_divides(un, tp, what)
            emit(ctx, out, p + "gate_up_proj", [path(gt), path(u)], (gn + un, k, gb or ub),
                 per_rank=((gn + un) // tp, k))
            _down(ctx, g, dn, p, what)
            return
    for u, dn in NONGATED_MLP:
        if u in left and dn in left:
            emit(ctx, out, p + "up_proj", [path(u)], left.pop(u), what=what)
            _down(ctx, g, dn, p, what)
            return


def _down(ctx: Context, g: Group, leaf: str, p: str, what: str) -> None:
    n, k, bias = g.left.pop(leaf)
    sharding.require_divides(k, ctx.tp, what)
    emit(ctx, g.scan.out, p + "down_proj", [g.path(leaf)], (n, k, bias), per_rank=(n, k // ctx.tp))


# ------------------------------------------------------------------------ MoE
def _moe_siblings(ctx: Context, scan: LayerScan, parent: str, num_experts: int) -> None:
    """Router, shared expert(s) and shared-expert gate beside a routed-expert block."""
    linears, others, consumed = scan.linears, scan.others, scan.consumed
    pre = f"{parent}." if parent else ""
    # Under sequence-parallel MoE the block first keeps this rank's ceil(M/TP) chunk of the tokens
    # (sequence_parallel_chunk), then runs the router, the shared experts and their gate on it
    # (vllm/model_executor/models/qwen3_next.py: Qwen3NextSparseMoeBlock.forward,
    # deepseek_v2.py: DeepseekV2MoE.forward).
    model_type = str(getattr(ctx.cfg, "model_type", ""))
    chunked = sharding.moe_block_chunked(ctx.layout, model_type)
    replicated = sharding.shared_experts_replicated(ctx.layout, model_type)

    def on_chunk(start: int) -> None:
        for it in scan.out.items[start:]:
            it.m_divisor = ctx.tp

    for r in ROUTER_NAMES:
        for rel in (pre + r, pre + r + ".proj", pre + r + ".linear", pre + r + ".layer"):
            dims = linears.get(rel)
            if dims is None and rel in others:
                w = others[rel].weight
                dims = (int(w.shape[0]), int(w.shape[1]), getattr(others[rel], "bias", None) is not None)
            if dims is not None and dims[0] == num_experts and rel not in consumed:
                consumed.add(rel)
                # N = E (global), K = H, replicated; BF16 but where layers.router_in_fp8 (sharding.ROLE_KIND)
                start = len(scan.out.items)
                emit(ctx, scan.out, "router", [scan.full(rel)], dims)
                if chunked:
                    on_chunk(start)
                    ctx.note(f"sequence-parallel MoE (EP={ctx.ep}, TP={ctx.tp}, DP={ctx.layout.dp}): the MoE "
                             f"block's router runs on ceil(M/{ctx.tp}) tokens per rank")
    for s in SHARED_EXPERT:
        sp = pre + s
        leaves = {rel[len(sp) + 1:]: d for rel, d in linears.items()
                  if rel.startswith(sp + ".") and "." not in rel[len(sp) + 1:] and rel not in consumed}
        if leaves:
            consumed.update(f"{sp}.{leaf}" for leaf in leaves)
            # Shared experts are a TP-sharded dense MLP, also under EP
            # (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MoE), but replicated at full
            # width on ceil(M/TP) tokens under sequence-parallel MoE (sharding.shared_experts_replicated)
            if replicated:
                start = len(scan.out.items)
                group(replace(ctx, disable_tp=True), scan, sp, leaves, prefix_name="shared_expert.")
                for it in scan.out.items[start:]:
                    it.parallel = "replicated"
                on_chunk(start)
                ctx.note(f"sequence-parallel MoE (EP={ctx.ep}, TP={ctx.tp}, DP={ctx.layout.dp}): router "
                         f"and shared experts run on ceil(M/{ctx.tp}) tokens per rank, the shared experts "
                         "replicated at full width")
            else:
                group(ctx, scan, sp, leaves, prefix_name="shared_expert.")
    for leaf in LATENT_PROJ:
        rel = pre + leaf
        if rel in linears and rel not in consumed:
            consumed.add(rel)
            start = len(scan.out.items)
            emit(ctx, scan.out, f"moe.{leaf}", [scan.full(rel)], linears[rel])
            if chunked:
                on_chunk(start)
    for gate in (pre + "shared_expert_gate", pre + "shared_experts_gate"):
        if gate in linears and gate not in consumed:
            consumed.add(gate)
            start = len(scan.out.items)
            emit(ctx, scan.out, "shared_expert_gate", [scan.full(gate)], linears[gate])
            if chunked:
                on_chunk(start)


def fused_experts(ctx: Context, scan: LayerScan, rel: str, mod: Any) -> None:
    """transformers 5.x fused experts: 3-D `gate_up_proj` ([E,2I,H] or [E,H,2I]) or `up_proj`
    (non-gated), and `down_proj`."""
    params = dict(mod.named_parameters(recurse=False))
    h = ctx.hidden
    gu = params.get("gate_up_proj")
    up = params.get("up_proj") if gu is None else None
    down = params.get("down_proj")
    first = gu if gu is not None else up
    if first is None or down is None or first.ndim != 3 or down.ndim != 3:
        shp = next(p.shape for p in params.values() if p.ndim == 3)
        scan.out.unsupported.append(Unsupported(
            scan.full(rel), int(shp[1]), int(shp[2]),
            f"{type(mod).__name__}: 3-D parameters without gate_up_proj/up_proj + down_proj"))
        return
    e = int(first.shape[0])
    dims = [int(x) for x in first.shape[1:]]
    latent = config_value(ctx.cfg, "moe_latent_size")
    if h not in dims and latent and int(latent) in dims:
        # Latent MoE: the experts work in moe_latent_size, with replicated projections H -> latent
        # before and latent -> H after them (vllm/model_executor/models/nemotron_h.py: NemotronHMoE,
        # FusedMoE(hidden_size=moe_latent_size), routed_input/output_transform).
        h = int(latent)
    if h not in dims:
        scan.out.unsupported.append(Unsupported(scan.full(rel), dims[0], dims[1],
                                                f"expert weights do not contain hidden_size={h}"))
        return
    dims.remove(h)
    inter = dims[0] // 2 if gu is not None else dims[0]
    _add_moe(ctx, scan, _Experts(rel, mod, e, inter, gu is not None, any("bias" in n for n in params), h))


def modulelist_experts(ctx: Context, scan: LayerScan, rel: str, mod: Any) -> None:
    """Older layout: `experts` is a ModuleList of per-expert MLPs (Linear gate/up/down or w1/w3/w2)."""
    e = len(mod)
    own = {r[len(rel) + 1:]: d for r, d in scan.linears.items() if r.startswith(rel + ".")}
    first = {r.split(".", 1)[1]: d for r, d in own.items() if r.split(".", 1)[0] == "0"}
    gated = any(g in first for g, _, _ in GATED_MLP) or "gate_up_proj" in first
    up = next((first[u] for _, u, _ in GATED_MLP if u in first), None) or first.get("gate_up_proj") \
        or next((first[u] for u, _ in NONGATED_MLP if u in first), None)
    if not e or up is None:
        return
    inter = up[0] // 2 if "gate_up_proj" in first else up[0]
    scan.consumed.update(f"{rel}.{r}" for r in own)
    _add_moe(ctx, scan, _Experts(rel, mod, e, inter, gated, any(d[2] for d in own.values())))


def stacked_glu_experts(ctx: Context, scan: LayerScan, rel: str, mod: Any) -> None:
    """DBRX experts: `experts.mlp` holds w1 (gate), v1 (up) and w2 (down) of all E experts stacked
    as [E*I, H]. vLLM runs them as one gated fused-MoE layer of E experts, I = ffn_hidden_size,
    top-k moe_top_k, renormalized (vllm/model_executor/models/dbrx.py: DbrxMoE, DbrxExperts); the
    router is `router.layer`, a GateLinear H -> E (DbrxRouter)."""
    e, inter = getattr(mod, "moe_num_experts", None), getattr(mod, "ffn_hidden_size", None)
    w1 = mod.w1
    if not e or not inter or tuple(w1.shape) != (int(e) * int(inter), ctx.hidden):
        scan.out.unsupported.append(Unsupported(scan.full(rel), int(w1.shape[0]), int(w1.shape[1]), (
            f"{type(mod).__name__}: stacked w1/v1/w2 of shape {tuple(w1.shape)} are not "
            f"[moe_num_experts*ffn_hidden_size, hidden_size={ctx.hidden}]")))
        return
    block = rel.rpartition(".")[0] if rel.endswith(".mlp") else rel
    _add_moe(ctx, scan, _Experts(block, mod, int(e), int(inter), True, False))


def _top_k(ctx: Context, block: Any) -> int:
    """Experts per token: the config's field, else the MoE block's own `top_k` (DBRX keeps it in
    ffn_config, which its DbrxFFN copies to `top_k`)."""
    top_k = int(config_value(ctx.cfg, *TOPK_KEYS, default=0))
    return top_k or int(getattr(block, "top_k", 0) or 0)


def _add_moe(ctx: Context, scan: LayerScan, ex: _Experts) -> None:
    parent = ex.rel.rpartition(".")[0]
    local, i_r = sharding.moe_per_rank(ex.count, ex.intermediate, ctx.tp, ctx.ep)
    if ctx.ep > ex.count:
        ctx.note(f"EP={ctx.ep} exceeds the {ex.count} routed experts: ranks {ex.count}-{ctx.ep - 1} hold no expert "
                 "(rank 0, planned, holds one)")
    layer = scan.layer
    pmod = layer.get_submodule(parent) if parent else layer
    top_k = _top_k(ctx, pmod)
    router = None
    for r in ROUTER_NAMES:
        try:
            router = layer.get_submodule(f"{parent}.{r}" if parent else r)
            break
        except AttributeError:
            continue
    routing, note = vllm_moe.routing(ctx.cfg, router, pmod)
    ctx.note(note)
    act, note = vllm_moe.activation(ctx.cfg, ex.module, ex.gated, ex.bias)
    ctx.note(note)
    if act is None:
        scan.out.unsupported.append(Unsupported(scan.full(ex.rel), 2 * i_r if ex.gated else i_r, ctx.hidden,
                                                "activation has no FlashInfer ActivationType"))
    else:
        scan.out.moe.append(MoeItem("experts", scan.full(ex.rel), ex.hidden or ctx.hidden, i_r, local, ex.count,
                                    top_k, act, routing, ex.gated, ex.bias))
    _moe_siblings(ctx, scan, parent, ex.count)


__all__ = ["ATTN_OUT", "FUSED_QKV", "PER_LAYER_INPUT", "LATENT_PROJ",
           "GATED_MLP", "FUSED_GATED_MLP", "NONGATED_MLP", "SHARED_EXPERT", "ROUTER_NAMES",
           "TOPK_KEYS", "STACKED_GLU", "Group", "emit", "group", "fused_experts", "modulelist_experts",
           "stacked_glu_experts"]
