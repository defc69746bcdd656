"""Walk a meta model and derive every per-rank GEMM / fused-MoE shape vLLM runs in one step.

Each decoder layer is scanned on its own: every Linear (and GPT-2 Conv1D) is given a role from its
module name and its siblings (q/k/v/o, MLA parts, gate/up/down, Mamba2, GatedDeltaNet, router, shared
expert, ...), every 3-D expert parameter block becomes a fused-MoE entry, and the sharding rules of
`sharding.py` give the per-rank sizes. Identical entries are merged and their per-step invocation
counts summed over the actual layer instances, so dense-first, interleaved and hybrid layouts come out
right by construction. Anything a layer holds that no rule places becomes `Unsupported`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..vllm_rules import sharding
from ..errors import UsageError
from .schema import GemmEntry, ModelInfo, MoeEntry, Plan, Routing, Unsupported

#: Sub-module name fragments of vision/audio towers (never planned).
TOWER_MARKERS = ("vision", "audio", "visual", "multi_modal_projector", "mm_projector", "image_newline")
#: Leaf names of attention output projections.
ATTN_OUT = ("o_proj", "dense", "out_proj", "c_proj", "wo")
#: Fused-on-disk QKV leaf names (Phi-3, GPT-2, Falcon/GPT-NeoX, MPT, Baichuan).
FUSED_QKV = ("qkv_proj", "c_attn", "query_key_value", "Wqkv", "W_pack")
#: (gate, up, down) leaf names of gated MLPs, and (up, down) of non-gated ones.
GATED_MLP = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
#: (fused gate|up, down) leaf names: Phi-3 gate_up_proj; GraniteMoe shared MLP input_linear (chunked
#: into gate and up, vLLM MergedColumnParallelLinear [I, I]) + output_linear.
FUSED_GATED_MLP = (("gate_up_proj", "down_proj"), ("input_linear", "output_linear"))
NONGATED_MLP = (("up_proj", "down_proj"), ("c_fc", "c_proj"), ("fc1", "fc2"),
                ("dense_h_to_4h", "dense_4h_to_h"), ("fc_in", "fc_out"))
#: Names of shared-expert sub-modules beside routed experts.
SHARED_EXPERT = ("shared_expert", "shared_experts", "shared_mlp")
ROUTER_NAMES = ("gate", "router")
#: Config activation name -> FlashInfer ActivationType name (gated, non-gated).
ACTIVATIONS = {
    "silu": ("Swiglu", "Silu"), "swish": ("Swiglu", "Silu"),
    "gelu": ("Geglu", "Gelu"), "gelu_pytorch_tanh": ("Geglu", "Gelu"), "gelu_new": ("Geglu", "Gelu"),
    "gelu_tanh": ("Geglu", "Gelu"), "relu": (None, "Relu"), "relu2": (None, "Relu2"),
}
TOPK_KEYS = ("num_experts_per_tok", "top_k_experts", "num_experts_per_token", "moe_topk", "top_k")


@dataclass
class _Item:
    """One role found in one layer (pre-merge)."""

    name: str
    modules: list[str]
    n: int
    k: int
    parallel: str
    bias: bool


@dataclass
class _MoeItem:
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
class _Layer:
    """What one decoder layer (or the top level) contributes."""

    items: list[_Item] = field(default_factory=list)
    moe: list[_MoeItem] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)


def _cfg(cfg, *names, default=None):
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return v
    return default


def _linear_dims(mod) -> tuple[int, int, bool] | None:
    """(out, in, bias) of an nn.Linear or a transformers Conv1D (weight stored [in, out])."""
    import torch

    if isinstance(mod, torch.nn.Linear):
        return mod.out_features, mod.in_features, mod.bias is not None
    if type(mod).__name__ == "Conv1D" and getattr(mod, "weight", None) is not None and mod.weight.ndim == 2:
        return int(mod.weight.shape[1]), int(mod.weight.shape[0]), getattr(mod, "bias", None) is not None
    return None


def _star(path: str) -> str:
    """Layer (and expert) indices written as `*`."""
    return re.sub(r"(^|\.)\d+(?=\.|$)", r"\1*", path)


def find_decoder_layers(model, cfg) -> tuple[str, Any]:
    """(path, ModuleList) of the language model's decoder layers: the longest ModuleList outside any
    tower (ties: the one whose length is num_hidden_layers)."""
    import torch

    want = _cfg(cfg, "num_hidden_layers", "n_layer", "num_layers")
    best = None
    for path, mod in model.named_modules():
        if not isinstance(mod, torch.nn.ModuleList) or any(t in path for t in TOWER_MARKERS):
            continue
        if path.rsplit(".", 1)[-1] in ("experts",):
            continue
        score = (len(mod) == want, len(mod))
        if best is None or score > best[0]:
            best = (score, path, mod)
    if best is None:
        raise UsageError("model", type(model).__name__, "has no decoder-layer list to plan; pass a decoder LLM config")
    return best[1], best[2]


class Planner:
    """Derives the per-rank plan of one meta model at one (TP, EP)."""

    def __init__(self, model, cfg, tp: int, ep: int):
        self.model, self.cfg, self.tp, self.ep = model, cfg, tp, ep
        self.hidden = int(_cfg(cfg, "hidden_size", "n_embd", "d_model"))
        self.num_heads = _cfg(cfg, "num_attention_heads", "n_head", "num_heads")
        self.notes: list[str] = []

    # ---------------------------------------------------------------- layers
    def scan_layer(self, layer, prefix: str) -> _Layer:
        import torch

        out = _Layer()
        linears: dict[str, tuple[int, int, bool]] = {}
        experts: dict[str, Any] = {}
        expert_lists: dict[str, Any] = {}
        others: dict[str, Any] = {}
        for rel, mod in layer.named_modules():
            if not rel:
                continue
            dims = _linear_dims(mod)
            if dims is not None:
                linears[rel] = dims
                continue
            if isinstance(mod, torch.nn.ModuleList) and rel.rsplit(".", 1)[-1] == "experts":
                expert_lists[rel] = mod
                continue
            own = dict(mod.named_parameters(recurse=False))
            if isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d)) or isinstance(mod, torch.nn.Embedding):
                continue  # depthwise convs of Mamba/GDN are not GEMMs (vllm_rules §7)
            if any(p.ndim == 3 for p in own.values()):
                experts[rel] = mod
            elif getattr(own.get("weight"), "ndim", 0) == 2:
                # Only a 2-D `weight` is a GEMM operand. Other 2-D parameters are layer state that
                # vLLM never multiplies as a GEMM: Mamba's A_log, Ernie's e_score_correction_bias.
                others[rel] = mod
        consumed: set[str] = set()
        full = lambda rel: _star(f"{prefix}.{rel}")  # noqa: E731

        for rel, mod in experts.items():
            self._fused_experts(layer, rel, mod, linears, others, consumed, out, full)
        for rel, mod in expert_lists.items():
            self._modulelist_experts(layer, rel, mod, linears, others, consumed, out, full)

        groups: dict[str, dict[str, tuple[int, int, bool]]] = {}
        for rel, dims in linears.items():
            if rel in consumed:
                continue
            parent, _, leaf = rel.rpartition(".")
            groups.setdefault(parent, {})[leaf] = dims
        for parent, leaves in groups.items():
            pmod = layer.get_submodule(parent) if parent else layer
            self._group(parent, pmod, leaves, out, full, prefix_name="")
        for rel in others:
            if rel not in consumed:
                n, k = others[rel].weight.shape
                out.unsupported.append(Unsupported(full(rel), int(n), int(k),
                                                   f"{type(others[rel]).__name__} with a 2-D weight has no known role"))
        return out

    def _group(self, parent, pmod, leaves, out: _Layer, full, prefix_name: str) -> None:
        """Classify the Linears of one parent module by their leaf names; leftovers -> Unsupported."""
        left = dict(leaves)
        path = lambda leaf: full(f"{parent}.{leaf}" if parent else leaf)  # noqa: E731
        kind = type(pmod).__name__.lower()
        if not prefix_name and parent.rsplit(".", 1)[-1] in SHARED_EXPERT:
            prefix_name = "shared_expert."  # a shared MLP that sits beside the MoE block (GraniteMoeHybrid)
        if "kv_a_proj_with_mqa" in left:
            self._mla(pmod, left, out, path)
        elif parent.endswith("indexer") and "wq_b" in left:
            self._indexer(left, out, path)
        elif "in_proj_qkvz" in left or "in_proj_qkv" in left:
            self._gdn(pmod, left, out, path)
        elif "x_proj" in left and "dt_proj" in left:
            for leaf in [x for x in ("in_proj", "x_proj", "dt_proj", "out_proj") if x in left]:
                n, k, _ = left.pop(leaf)
                out.unsupported.append(Unsupported(path(leaf), n, k, (
                    f"Mamba-1 mixer ({type(pmod).__name__}) projection: vllm_rules.md has no sharding rule "
                    "for Mamba-1 (only Mamba2 and GatedDeltaNet)")))
        elif "in_proj" in left and "out_proj" in left and ("mamba" in kind or hasattr(pmod, "ssm_state_size")):
            self._mamba(pmod, left, out, path)
        elif "q_proj" in left and "k_proj" in left and ("cross" in parent.rsplit(".", 1)[-1]
                                                         or "crossattention" in kind):
            self._cross_attention(pmod, left, out, path)
        elif ("q_proj" in left and "k_proj" in left) or any(f in left for f in FUSED_QKV):
            self._attention(pmod, left, out, path)

        if left:
            self._mlp(left, out, path, prefix_name)
        for leaf, (n, k, _) in left.items():
            out.unsupported.append(Unsupported(path(leaf), n, k, f"Linear '{leaf}' in {type(pmod).__name__} "
                                               "matches no known role (attention, MLP, MLA, Mamba2, GDN, MoE)"))

    # ------------------------------------------------------------- attention
    def _head_dim(self, pmod) -> int:
        d = getattr(pmod, "head_dim", None) or _cfg(self.cfg, "head_dim")
        return int(d) if d else self.hidden // int(self.num_heads)

    def _attention(self, pmod, left, out: _Layer, path) -> None:
        tp, hq = self.tp, int(self.num_heads)
        d = self._head_dim(pmod)
        fused = next((f for f in FUSED_QKV if f in left), None)
        if fused:
            n, k, bias = left.pop(fused)
            hkv2 = n // d - hq  # on-disk [q | k | v] of Hq*d + 2*Hkv*d (vllm_rules §2, shard_id=None)
            if n % d or hkv2 <= 0 or hkv2 % 2:
                out.unsupported.append(Unsupported(path(fused), n, k, f"fused QKV width {n} is not (Hq + 2*Hkv)*{d}"))
                return
            n_r = sharding.qkv_per_rank(hq, hkv2 // 2, d, tp)
            out.items.append(_Item("qkv_proj", [path(fused)], n_r, k, "column", bias))
        else:
            qn, k, bias = left.pop("q_proj")
            kn, _, _ = left.pop("k_proj")
            has_v = "v_proj" in left
            vn = left.pop("v_proj")[0] if has_v else 0
            q_mult = qn // (hq * d) if qn % (hq * d) == 0 else 0
            if q_mult not in (1, 2) or kn % d:
                out.unsupported.append(Unsupported(path("q_proj"), qn, k,
                                                   f"q_proj width {qn} is not num_attention_heads*head_dim ({hq}*{d})"))
                return
            hkv = kn // d
            d_v = vn // hkv if has_v else None
            n_r = sharding.qkv_per_rank(hq, hkv, d, tp, v_head_dim=d_v, q_multiplier=q_mult, has_v=has_v)
            mods = [path("q_proj"), path("k_proj")] + ([path("v_proj")] if has_v else [])
            if q_mult == 2:
                self._note("gated attention: q_proj holds query + gate (vLLM total_num_heads = 2*Hq)")
            if not has_v:
                self._note("K=V attention layers (no v_proj): fused QKV holds only q and k")
            out.items.append(_Item("qkv_proj", mods, n_r, k, "column", bias))
        self._out_proj(left, out, path, "o_proj", "attention output projection")

    def _out_proj(self, left, out: _Layer, path, name: str, what: str) -> None:
        """The attention output projection, if the layer has one: RowParallel (K split by TP)."""
        oname = next((o for o in ATTN_OUT if o in left), None)
        if oname:
            n, k, bias = left.pop(oname)
            _, k_r = sharding.split("row", n, k, self.tp, what)
            out.items.append(_Item(name, [path(oname)], n, k_r, "row", bias))

    def _cross_attention(self, pmod, left, out: _Layer, path) -> None:
        """Cross-attention of an encoder-decoder / VLM text layer (Mllama): the query comes from the
        text tokens, key and value from the encoder (vision) states, so they are separate GEMMs with
        different M. Same head sharding as QKVParallelLinear: q column Hq/tp*d; k+v fused column
        2*Hkv_r*d (KV replication rule of vllm_rules §2); o_proj row."""
        tp, hq = self.tp, int(self.num_heads)
        d = self._head_dim(pmod)
        qn, qk, qb = left.pop("q_proj")
        kn, kk, kb = left.pop("k_proj")
        vn = left.pop("v_proj")[0] if "v_proj" in left else kn
        if qn != hq * d or kn % d or kn != vn:
            out.unsupported.append(Unsupported(path("q_proj"), qn, qk,
                                               f"cross-attention widths q={qn}, k={kn}, v={vn} do not fit "
                                               f"num_attention_heads*head_dim ({hq}*{d})"))
            return
        hq_r = sharding.require_divides(hq, tp, "num_attention_heads")
        hkv_r = sharding.kv_heads_per_rank(kn // d, tp)
        out.items.append(_Item("cross_attn.q_proj", [path("q_proj")], hq_r * d, qk, "column", qb))
        out.items.append(_Item("cross_attn.kv_proj", [path("k_proj"), path("v_proj")], 2 * hkv_r * d, kk,
                               "column", kb))
        self._note("cross-attention layers: cross_attn.kv_proj runs on the encoder (vision) tokens, "
                   "not on the text tokens of the step")
        self._out_proj(left, out, path, "cross_attn.o_proj", "cross-attention output projection")

    def _mla(self, pmod, left, out: _Layer, path) -> None:
        """DeepSeek MLA (vllm_rules §5)."""
        tp = self.tp
        sharding.require_divides(int(self.num_heads), tp, "num_attention_heads")
        kva = left.pop("kv_a_proj_with_mqa")
        if "q_a_proj" in left:
            qa = left.pop("q_a_proj")
            # DeepSeekV2FusedQkvAProjLinear: merged [q_lora, kv_lora + rope], disable_tp -> replicated
            out.items.append(_Item("mla.fused_qkv_a_proj", [path("q_a_proj"), path("kv_a_proj_with_mqa")],
                                   qa[0] + kva[0], qa[1], "replicated", qa[2] or kva[2]))
        else:
            out.items.append(_Item("mla.kv_a_proj_with_mqa", [path("kv_a_proj_with_mqa")], kva[0], kva[1],
                                   "replicated", kva[2]))
        for leaf, name in (("q_b_proj", "mla.q_b_proj"), ("q_proj", "mla.q_proj"), ("kv_b_proj", "mla.kv_b_proj")):
            if leaf in left:
                n, k, bias = left.pop(leaf)
                n_r, _ = sharding.split("column", n, k, tp, leaf)
                out.items.append(_Item(name, [path(leaf)], n_r, k, "column", bias))
        oname = next((o for o in ATTN_OUT if o in left), None)
        if oname:
            n, k, bias = left.pop(oname)
            _, k_r = sharding.split("row", n, k, tp, "MLA o_proj")
            out.items.append(_Item("o_proj", [path(oname)], n, k_r, "row", bias))

    def _indexer(self, left, out: _Layer, path) -> None:
        """DeepSeek-V3.2 / GLM-5 sparse-attention indexer: wq_b replicated; wk + weights_proj merged,
        disable_tp -> replicated (deepseek_v2.py: Indexer.__init__)."""
        n, k, bias = left.pop("wq_b")
        out.items.append(_Item("indexer.wq_b", [path("wq_b")], n, k, "replicated", bias))
        if "wk" in left and "weights_proj" in left:
            wk, wp = left.pop("wk"), left.pop("weights_proj")
            out.items.append(_Item("indexer.wk_weights_proj", [path("wk"), path("weights_proj")],
                                   wk[0] + wp[0], wk[1], "replicated", wk[2] or wp[2]))

    def _mamba(self, pmod, left, out: _Layer, path) -> None:
        """MambaMixer2 (vllm_rules §7.1)."""
        n, k, bias = left["in_proj"]
        inter, groups = getattr(pmod, "intermediate_size", None), getattr(pmod, "n_groups", None)
        state, heads = getattr(pmod, "ssm_state_size", None), getattr(pmod, "num_heads", None)
        if None in (inter, groups, state, heads) or n != 2 * inter + 2 * groups * state + heads:
            return  # leave both in `left`: reported as unsupported
        left.pop("in_proj")
        n_r = sharding.mamba2_in_proj_per_rank(inter, groups, state, heads, self.tp)
        out.items.append(_Item("mamba.in_proj", [path("in_proj")], n_r, k, "column", bias))
        on, ok, obias = left.pop("out_proj")
        _, k_r = sharding.split("row", on, ok, self.tp, "mamba out_proj")
        out.items.append(_Item("mamba.out_proj", [path("out_proj")], on, k_r, "row", obias))

    def _gdn(self, pmod, left, out: _Layer, path) -> None:
        """Qwen3-Next / Qwen3.5 GatedDeltaNet (vllm_rules §7.2); Qwen3.5's split in_proj_qkv + in_proj_z
        and in_proj_b + in_proj_a are the same merged GEMMs."""
        hk, hv = getattr(pmod, "num_k_heads", None), getattr(pmod, "num_v_heads", None)
        dk, dv = getattr(pmod, "head_k_dim", None), getattr(pmod, "head_v_dim", None)
        if None in (hk, hv, dk, dv):
            return
        qkvz_n, ba_n, out_k = sharding.gdn_per_rank(hk, hv, dk, dv, self.tp)
        qkvz = [x for x in ("in_proj_qkvz", "in_proj_qkv", "in_proj_z") if x in left]
        ba = [x for x in ("in_proj_ba", "in_proj_b", "in_proj_a") if x in left]
        if sum(left[x][0] for x in qkvz) != 2 * hk * dk + 2 * hv * dv or sum(left[x][0] for x in ba) != 2 * hv:
            return
        k = left[qkvz[0]][1]
        out.items.append(_Item("gdn.in_proj_qkvz", [path(x) for x in qkvz], qkvz_n, k, "column",
                               any(left[x][2] for x in qkvz)))
        out.items.append(_Item("gdn.in_proj_ba", [path(x) for x in ba], ba_n, k, "column",
                               any(left[x][2] for x in ba)))
        for x in qkvz + ba:
            left.pop(x)
        if "out_proj" in left:
            on, ok, obias = left.pop("out_proj")
            out.items.append(_Item("gdn.out_proj", [path("out_proj")], on, out_k, "row", obias))

    # ------------------------------------------------------------------ MLP
    def _mlp(self, left, out: _Layer, path, prefix_name: str) -> None:
        """Dense MLP: gated -> merged gate_up (column) + down (row); non-gated -> up + down
        (models/llama.py: LlamaMLP; gpt2.py / falcon.py / starcoder2.py; vllm_rules §4)."""
        tp, p = self.tp, prefix_name
        what = "shared expert intermediate size" if p else "intermediate_size"
        for gu, dn in FUSED_GATED_MLP:  # fused on disk, same per-rank shape as split gate + up
            if gu in left and dn in left:
                n, k, bias = left.pop(gu)
                sharding.require_divides(n // 2, tp, what)
                out.items.append(_Item(p + "gate_up_proj", [path(gu)], n // tp, k, "column", bias))
                self._down(left.pop(dn), dn, out, path, p, what)
                return
        for g, u, dn in GATED_MLP:
            if g in left and u in left and dn in left:
                gn, k, gb = left.pop(g)
                un, _, ub = left.pop(u)
                sharding.require_divides(gn, tp, what)
                sharding.require_divides(un, tp, what)
                out.items.append(_Item(p + "gate_up_proj", [path(g), path(u)], (gn + un) // tp, k, "column", gb or ub))
                self._down(left.pop(dn), dn, out, path, p, what)
                return
        for u, dn in NONGATED_MLP:
            if u in left and dn in left:
                un, k, ub = left.pop(u)
                n_r, _ = sharding.split("column", un, k, tp, what)
                out.items.append(_Item(p + "up_proj", [path(u)], n_r, k, "column", ub))
                self._down(left.pop(dn), dn, out, path, p, what)
                return

    def _down(self, dims, leaf, out: _Layer, path, p, what) -> None:
        n, k, bias = dims
        sharding.require_divides(k, self.tp, what)
        out.items.append(_Item(p + "down_proj", [path(leaf)], n, k // self.tp, "row", bias))

    # ------------------------------------------------------------------ MoE
    def _moe_siblings(self, layer, parent, linears, others, consumed, out: _Layer, full, num_experts) -> None:
        """Router, shared expert(s) and shared-expert gate beside a routed-expert block."""
        pre = f"{parent}." if parent else ""
        for r in ROUTER_NAMES:
            for rel in (pre + r, pre + r + ".proj", pre + r + ".linear"):
                dims = linears.get(rel)
                if dims is None and rel in others:
                    w = others[rel].weight
                    dims = (int(w.shape[0]), int(w.shape[1]), getattr(others[rel], "bias", None) is not None)
                if dims is not None and dims[0] == num_experts and rel not in consumed:
                    consumed.add(rel)
                    # GateLinear(ReplicatedLinear): N = E (global), K = H, BF16 (vllm_rules §6.3)
                    out.items.append(_Item("router", [full(rel)], dims[0], dims[1], "replicated", dims[2]))
        for s in SHARED_EXPERT:
            sp = pre + s
            leaves = {rel[len(sp) + 1:]: d for rel, d in linears.items()
                      if rel.startswith(sp + ".") and "." not in rel[len(sp) + 1:] and rel not in consumed}
            if leaves:
                consumed.update(f"{sp}.{leaf}" for leaf in leaves)
                smod = layer.get_submodule(sp)
                # Shared experts are a TP-sharded dense MLP, also under EP (vllm_rules §6.4)
                self._group(sp, smod, leaves, out, full, prefix_name="shared_expert.")
        for g in (pre + "shared_expert_gate", pre + "shared_experts_gate"):
            if g in linears and g not in consumed:
                consumed.add(g)
                n, k, bias = linears[g]
                out.items.append(_Item("shared_expert_gate", [full(g)], n, k, "replicated", bias))

    def _fused_experts(self, layer, rel, mod, linears, others, consumed, out: _Layer, full) -> None:
        """transformers 5.x fused experts: 3-D `gate_up_proj` ([E,2I,H] or [E,H,2I]) or `up_proj`
        (non-gated), and `down_proj`."""
        params = dict(mod.named_parameters(recurse=False))
        h = self.hidden
        gu = params.get("gate_up_proj")
        up = params.get("up_proj") if gu is None else None
        down = params.get("down_proj")
        first = gu if gu is not None else up
        if first is None or down is None or first.ndim != 3 or down.ndim != 3:
            shp = next(p.shape for p in params.values() if p.ndim == 3)
            out.unsupported.append(Unsupported(full(rel), int(shp[1]), int(shp[2]),
                                               f"{type(mod).__name__}: 3-D parameters without gate_up_proj/up_proj + down_proj"))
            return
        e = int(first.shape[0])
        dims = [int(x) for x in first.shape[1:]]
        if h not in dims:
            out.unsupported.append(Unsupported(full(rel), dims[0], dims[1], f"expert weights do not contain hidden_size={h}"))
            return
        dims.remove(h)
        inter = dims[0] // 2 if gu is not None else dims[0]
        parent = rel.rpartition(".")[0]
        self._add_moe(layer, parent, rel, mod, e, inter, gu is not None,
                      any("bias" in n for n in params), linears, others, consumed, out, full)

    def _modulelist_experts(self, layer, rel, mod, linears, others, consumed, out: _Layer, full) -> None:
        """Older layout: `experts` is a ModuleList of per-expert MLPs (Linear gate/up/down or w1/w3/w2)."""
        e = len(mod)
        own = {r[len(rel) + 1:]: d for r, d in linears.items() if r.startswith(rel + ".")}
        first = {r.split(".", 1)[1]: d for r, d in own.items() if r.split(".", 1)[0] == "0"}
        gated = any(g in first for g, _, _ in GATED_MLP) or "gate_up_proj" in first
        up = next((first[u] for _, u, _ in GATED_MLP if u in first), None) or first.get("gate_up_proj") \
            or next((first[u] for u, _ in NONGATED_MLP if u in first), None)
        if not e or up is None:
            return
        inter = up[0] // 2 if "gate_up_proj" in first else up[0]
        consumed.update(f"{rel}.{r}" for r in own)
        parent = rel.rpartition(".")[0]
        bias = any(d[2] for d in own.values())
        self._add_moe(layer, parent, rel, mod, e, inter, gated, bias, linears, others, consumed, out, full)

    def _add_moe(self, layer, parent, rel, mod, e, inter, gated, bias, linears, others, consumed, out, full):
        local, i_r = sharding.moe_per_rank(e, inter, self.tp, self.ep)
        top_k = int(_cfg(self.cfg, *TOPK_KEYS, default=0))
        pmod = layer.get_submodule(parent) if parent else layer
        router = None
        for r in ROUTER_NAMES:
            pre = f"{parent}.{r}" if parent else r
            try:
                router = layer.get_submodule(pre)
                break
            except AttributeError:
                continue
        routing = self.routing(router, pmod)
        act = self.activation(mod, gated, bias)
        if act is None:
            out.unsupported.append(Unsupported(full(rel), 2 * i_r if gated else i_r, self.hidden,
                                               "activation has no FlashInfer ActivationType"))
        else:
            out.moe.append(_MoeItem("experts", full(rel), self.hidden, i_r, local, e, top_k, act, routing,
                                    gated, bias))
        self._moe_siblings(layer, parent, linears, others, consumed, out, full, e)

    def activation(self, experts_mod, gated: bool, bias: bool) -> str | None:
        """FlashInfer ActivationType name for the experts' activation."""
        if gated and bias and hasattr(experts_mod, "limit") and hasattr(experts_mod, "alpha"):
            self._note("experts use GPT-OSS clamped SwiGLU with biases (SwigluBias: alpha=1.702, limit=7)")
            return "SwigluBias"
        act = str(_cfg(self.cfg, "mlp_hidden_act", "hidden_act", "hidden_activation", "activation_function",
                       default="silu")).lower()
        pair = ACTIVATIONS.get(act)
        if pair is None:
            return None
        return pair[0] if gated else pair[1]

    def routing(self, router, moe_block) -> Routing:
        """Routing method and parameters (vllm_rules §6.5)."""
        cfg = self.cfg
        mt = str(getattr(cfg, "model_type", ""))
        scale = _cfg(cfg, "routed_scaling_factor")
        scale = float(scale) if scale is not None else None
        # The score-correction bias may sit on the router, the MoE block, or a child of either
        # (Ernie 4.5 keeps it in `gate.moe_statics`).
        bias = any(name.rsplit(".", 1)[-1] == "e_score_correction_bias"
                   for m in (router, moe_block) if m is not None
                   for name, _ in list(m.named_parameters()) + list(m.named_buffers())) \
            or bool(getattr(cfg, "use_routing_bias", False))
        renorm = getattr(cfg, "norm_topk_prob", None)
        renorm = True if renorm is None else bool(renorm)
        scoring = str(_cfg(cfg, "scoring_func", default="sigmoid" if bias else "softmax"))
        n_group, topk_group = _cfg(cfg, "n_group"), _cfg(cfg, "topk_group")
        if mt.startswith("llama4"):
            return Routing("llama4", scoring_func="sigmoid", renormalize=False, apply_router_weight_on_input=True)
        if bias and n_group is not None:
            return Routing("deepseek_v3", n_group=int(n_group), topk_group=int(topk_group or n_group),
                           routed_scaling_factor=scale, use_routing_bias=True, scoring_func=scoring,
                           renormalize=renorm)
        if n_group is not None and int(n_group) > 1:
            # Grouped top-k without a score-correction bias (DeepSeek-V2 "group_limited_greedy"):
            # vLLM still runs grouped_topk (deepseek_v2.py: use_grouped_topk=True), which no
            # FlashInfer routing method implements; keep the group parameters in the plan.
            return Routing("grouped_topk", n_group=int(n_group), topk_group=int(topk_group or n_group),
                           routed_scaling_factor=scale, scoring_func=scoring, renormalize=renorm)
        if bias:
            return Routing("minimax2", routed_scaling_factor=scale, use_routing_bias=True, scoring_func=scoring,
                           renormalize=renorm)
        if mt == "phimoe":
            self._note("PhiMoE routes with sparsemixer (no FlashInfer routing method)")
            return Routing("sparsemixer", scoring_func="softmax", renormalize=False)
        if scoring == "sigmoid":
            return Routing("sigmoid_renorm" if renorm else "sigmoid", routed_scaling_factor=scale,
                           scoring_func="sigmoid", renormalize=renorm)
        return Routing("renormalize" if renorm else "topk", routed_scaling_factor=scale, renormalize=renorm)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ------------------------------------------------------- MoE layer choice
    def _apply_vllm_moe_layers(self, per_layer, prefix: str):
        """Make the MoE-vs-dense choice of each layer vLLM's, where transformers differs: HF DeepSeek
        ignores `moe_layer_freq`, HF Qwen3.5-MoE ignores `mlp_only_layers`/`decoder_sparse_step`.
        A layer HF built as MoE that vLLM runs dense gets the dense MLP of `intermediate_size`
        (DeepseekV2MLP / Qwen2MoeMLP: merged gate_up column + down row); a layer HF built dense that
        vLLM runs as MoE gets the MoE part of an HF MoE layer."""
        want = vllm_moe_layers(self.cfg, len(per_layer))
        if want is None:
            return per_layer
        moe_part = next((self._moe_part(lay) for _, lay in per_layer if lay.moe), None)
        fixed, to_dense, to_moe = [], [], []
        for i, lay in per_layer:
            has_moe = bool(lay.moe)
            if has_moe and i not in want:
                mlp_path = lay.moe[0].module.rpartition(".")[0]  # e.g. model.layers.*.mlp
                keep = _Layer([it for it in lay.items if not _is_moe_part(it.name)], [],
                              [u for u in lay.unsupported if not u.module.startswith(mlp_path + ".")])
                self._dense_from_config(keep, mlp_path)
                to_dense.append(i)
                lay = keep
            elif not has_moe and i in want and moe_part is not None:
                items, moes = moe_part
                lay = _Layer([it for it in lay.items if it.name not in ("gate_up_proj", "up_proj", "down_proj")]
                             + items, moes, lay.unsupported)
                to_moe.append(i)
            fixed.append((i, lay))
        if to_dense:
            self._note(f"layers {_ranges(to_dense)} run a dense MLP in vLLM (moe_layer_freq / mlp_only_layers / "
                       "decoder_sparse_step) although transformers builds them as MoE")
        if to_moe:
            self._note(f"layers {_ranges(to_moe)} run MoE in vLLM although transformers builds them dense")
        return fixed

    @staticmethod
    def _moe_part(lay: _Layer):
        return [it for it in lay.items if _is_moe_part(it.name)], list(lay.moe)

    def _dense_from_config(self, out: _Layer, mlp_path: str) -> None:
        inter = _cfg(self.cfg, "intermediate_size")
        bias = bool(getattr(self.cfg, "mlp_bias", False))
        if not inter:
            out.unsupported.append(Unsupported(mlp_path, 0, self.hidden,
                                               "vLLM runs a dense MLP here but the config has no intermediate_size"))
            return
        i_r = sharding.require_divides(int(inter), self.tp, "intermediate_size")
        out.items.append(_Item("gate_up_proj", [f"{mlp_path}.gate_proj", f"{mlp_path}.up_proj"], 2 * i_r,
                               self.hidden, "column", bias))
        out.items.append(_Item("down_proj", [f"{mlp_path}.down_proj"], self.hidden, i_r, "row", bias))

    # ------------------------------------------------------------------ top
    def plan(self, info: ModelInfo) -> Plan:
        prefix, layers = find_decoder_layers(self.model, self.cfg)
        layer_types = getattr(self.cfg, "layer_types", None)
        per_layer: list[tuple[int, _Layer]] = []
        for i, layer in enumerate(layers):
            per_layer.append((i, self.scan_layer(layer, f"{prefix}.{i}")))
        per_layer = self._apply_vllm_moe_layers(per_layer, prefix)
        top = _Layer()
        head = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
        for path, mod in self.model.named_modules():
            if path == prefix or path.startswith(prefix + ".") or any(t in path for t in TOWER_MARKERS):
                continue
            dims = _linear_dims(mod)
            if dims is None:
                continue
            n, k, bias = dims
            if mod is head:
                # ParallelLMHead: N = round_up(V, 64)/tp, K = H, once per step (vllm_rules §3)
                top.items.append(_Item("lm_head", [path], sharding.vocab_per_rank(n, self.tp), k, "vocab", bias))
            else:
                top.unsupported.append(Unsupported(path, n, k, "Linear outside the decoder layers with no known role"))
        if self.ep > 1 and not any(l.moe for _, l in per_layer):
            raise UsageError("--ep", self.ep, "the model has no routed experts; use --ep 1")
        gemms, moes, unsup = _merge(per_layer, top, layer_types)
        info = ModelInfo(**{**info.__dict__, "notes": tuple(info.notes) + tuple(self.notes),
                            "num_hidden_layers": len(layers), "hidden_size": self.hidden,
                            "vocab_size": int(_cfg(self.cfg, "vocab_size", default=0))})
        return Plan(model=info, tp=self.tp, ep=self.ep, gemms=gemms, moe=moes, unsupported=unsup)


#: model_type -> vLLM's rule for which decoder layers are MoE (the rest run a dense MLP):
#:   "first_k_freq": layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0
#:                   (models/deepseek_v2.py: DeepseekV2DecoderLayer; GLM-5 DSA and Kimi-K2 reuse it)
#:   "sparse_step":  layer_idx not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0
#:                   (models/qwen2_moe.py, qwen3_moe.py, qwen3_next.py and the Qwen3.5 / Qwen3-VL MoE
#:                   text models built on them)
VLLM_MOE_LAYER_RULE = {
    "deepseek_v2": "first_k_freq", "deepseek_v3": "first_k_freq", "deepseek_v32": "first_k_freq",
    "kimi_k2": "first_k_freq", "glm_moe_dsa": "first_k_freq",
    "qwen2_moe": "sparse_step", "qwen3_moe": "sparse_step", "qwen3_next": "sparse_step",
    "qwen3_5_moe": "sparse_step", "qwen3_5_moe_text": "sparse_step",
    "qwen3_vl_moe": "sparse_step", "qwen3_vl_moe_text": "sparse_step",
}


def vllm_moe_layers(cfg, num_layers: int) -> set[int] | None:
    """Indices of the layers vLLM runs as MoE, or None when no rule applies to this model type."""
    rule = VLLM_MOE_LAYER_RULE.get(str(getattr(cfg, "model_type", "")))
    if rule == "first_k_freq":
        first = int(_cfg(cfg, "first_k_dense_replace", default=0))
        freq = int(_cfg(cfg, "moe_layer_freq", default=1)) or 1
        return {i for i in range(num_layers) if i >= first and i % freq == 0}
    if rule == "sparse_step":
        only = set(_cfg(cfg, "mlp_only_layers", default=[]) or [])
        step = int(_cfg(cfg, "decoder_sparse_step", default=1)) or 1
        return {i for i in range(num_layers) if i not in only and (i + 1) % step == 0}
    return None


def _ranges(idx: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7"."""
    out, start = [], None
    for j, i in enumerate(idx):
        if start is None:
            start = i
        if j + 1 == len(idx) or idx[j + 1] != i + 1:
            out.append(str(start) if start == i else f"{start}-{i}")
            start = None
    return ", ".join(out)


def _is_moe_part(name: str) -> bool:
    return name == "router" or name.startswith("shared_expert")


#: Display order of GEMM roles (prefix match); unknown roles go last but before lm_head.
ROLE_ORDER = ("mla.", "indexer.", "qkv_proj", "gdn.", "mamba.", "o_proj", "gate_up_proj", "up_proj",
              "down_proj", "router", "shared_expert.", "shared_expert_gate", "lm_head")


def _role_rank(name: str) -> int:
    for i, r in enumerate(ROLE_ORDER):
        if name.startswith(r):
            return i
    return len(ROLE_ORDER) - 1


def _merge(per_layer, top: _Layer, layer_types):
    """Merge identical entries, sum per-step counts, make names unique."""
    groups: dict[tuple, dict] = {}
    order: list[tuple] = []
    for idx, lay in per_layer + [(None, top)]:
        for it in lay.items:
            key = (it.name, it.n, it.k, it.parallel, it.bias)
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
        gemms.append(GemmEntry(name, tuple(g["modules"]), key[1], key[2], g["layers"], key[3], key[4]))

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
    seen, unsup = set(), []
    for _, lay in per_layer + [(None, top)]:
        for u in lay.unsupported:
            if u not in seen:
                seen.add(u)
                unsup.append(u)
    return tuple(gemms), tuple(moes), tuple(unsup)


def check_parallel(tp: int, ep: int) -> None:
    """TP/EP values vLLM accepts: EP is 1 or a multiple of TP (ep = dp*tp)."""
    if tp < 1:
        raise UsageError("--tp", tp, "must be a positive integer (GPUs per tensor-parallel group)")
    if ep < 1:
        raise UsageError("--ep", ep, "must be a positive integer (1 = no expert parallelism)")
    if ep > 1 and ep % tp:
        raise UsageError("--ep", ep, f"must be 1 or a multiple of --tp={tp} (vLLM's EP size is dp*tp)")


def plan_from_build(build, info: ModelInfo, tp: int, ep: int) -> Plan:
    """Plan of a MetaBuild (meta_model.build_meta_model) at (tp, ep)."""
    check_parallel(tp, ep)
    return Planner(build.model, build.config, tp, ep).plan(info)


def plan_model(model: str, tp: int = 1, ep: int = 1, revision: str | None = None,
               trust_remote_code: bool = False) -> Plan:
    """Resolve MODEL, build it on meta, and plan it: the one call other modules need."""
    from . import config_source
    from . import meta_model

    check_parallel(tp, ep)
    src = config_source.resolve(model, revision)
    location = src.name if src.source == "hub" else src.directory
    build = meta_model.build_meta_model(src.raw, trust_remote_code=trust_remote_code, location=location,
                                        revision=revision)
    info = ModelInfo(name=model, source=src.source, model_type=str(src.raw.get("model_type")),
                     architecture=build.architecture, revision=revision, notes=build.notes)
    return plan_from_build(build, info, tp, ep)


__all__ = ["Planner", "check_parallel", "find_decoder_layers", "plan_from_build", "plan_model"]
