"""Place the attention of one decoder layer: self-attention (separate or fused q/k/v), KV-shared
query-only attention, cross-attention, DeepSeek MLA and its sparse-attention indexer.

Each classifier takes the `Group` of one parent module's Linears (found by `roles.group`), places
its GEMMs with `emit` at vLLM's per-rank sizes (`vllm_rules.sharding`: QKV heads and KV-head
replication), and adds the layer's `AttentionEntry` (heads per rank, head sizes, window or chunk,
from `vllm_rules.attention`) or, where no row times the kernel, its `MixerNotTimed`.
"""

from __future__ import annotations

from typing import Any

from ..core.plan_schema import AttentionEntry, MixerNotTimed, Unsupported
from ..vllm_rules import attention as vllm_attention
from ..vllm_rules import sharding
from ..vllm_rules.config import config_value
from .items import Context, Group, emit

#: Leaf names of attention output projections.
ATTN_OUT = ("o_proj", "dense", "out_proj", "c_proj", "wo")
#: Fused-on-disk QKV leaf names (Phi-3, GPT-2, Falcon/GPT-NeoX, MPT, Baichuan).
FUSED_QKV = ("qkv_proj", "c_attn", "query_key_value", "Wqkv", "W_pack")


def _head_dim(ctx: Context, pmod: Any) -> int:
    d = getattr(pmod, "head_dim", None) or config_value(ctx.cfg, "head_dim")
    return int(d) if d else ctx.hidden // int(ctx.num_heads)


def self_attention(ctx: Context, g: Group) -> None:
    """Self-attention: q/k/v (separate or fused on disk) -> one qkv_proj GEMM, then o_proj."""
    left, out, path = g.left, g.scan.out, g.path
    tp, hq = ctx.tp, _layer_heads(ctx, g.module)
    d = _head_dim(ctx, g.module)
    fused = next((f for f in FUSED_QKV if f in left), None)
    if fused:
        n, k, bias = left.pop(fused)
        # On disk [q | k | v] of Hq*d + 2*Hkv*d, loaded with shard_id=None: split by the global
        # sizes, then sharded like separate q, k, v (vllm/model_executor/layers/linear.py:
        # QKVParallelLinear.weight_loader).
        hkv2 = n // d - hq
        if n % d or hkv2 <= 0 or hkv2 % 2:
            out.unsupported.append(Unsupported(path(fused), n, k, f"fused QKV width {n} is not (Hq + 2*Hkv)*{d}"))
            return
        n_r = sharding.qkv_per_rank(hq, hkv2 // 2, d, tp)
        emit(ctx, out, "qkv_proj", [path(fused)], (n, k, bias), per_rank=(n_r, k))
        _attention_entry(ctx, g, hq, hkv2 // 2, d, d)
    else:
        qn, k, bias = left.pop("q_proj")
        kn, _, _ = left.pop("k_proj")
        has_v = "v_proj" in left
        vn = left.pop("v_proj")[0] if has_v else 0
        q_mult = qn // (hq * d) if qn % (hq * d) == 0 else 0
        gate = sharding.attention_output_gate(ctx.cfg)
        if q_mult not in (1, 2) or kn % d or (q_mult == 2) != gate:
            why = (f"q_proj width {qn} is not num_attention_heads*head_dim ({hq}*{d})" if q_mult not in (1, 2)
                   or kn % d else f"q_proj width {qn} is {q_mult}*{hq}*{d} but the config "
                   f"{'declares' if gate else 'declares no'} attention output gate (q_proj = query + gate)")
            out.unsupported.append(Unsupported(path("q_proj"), qn, k, why + "; per-layer head counts this "
                                               "layer does not state are not planned"))
            return
        hkv = kn // d
        # K=V layer (no v_proj): vLLM keeps the V slot, k_proj is loaded into K and V
        # (vllm/model_executor/models/gemma4.py: Gemma4ForCausalLM.load_weights._weight_iterator),
        # so V is Hkv_r*d wide like K.
        d_v = vn // hkv if has_v else d
        n_r = sharding.qkv_per_rank(hq, hkv, d, tp, v_head_dim=d_v, q_multiplier=q_mult)
        mods = [path("q_proj"), path("k_proj")] + ([path("v_proj")] if has_v else [])
        if q_mult == 2:
            ctx.note("gated attention: q_proj holds query + gate (vLLM total_num_heads = 2*Hq)")
        if not has_v:
            ctx.note("K=V attention layers (no v_proj): fused QKV keeps a V slot, k_proj loaded into K and V")
        emit(ctx, out, "qkv_proj", mods, (qn, k, bias), per_rank=(n_r, k))
        _attention_entry(ctx, g, hq, hkv, d, d_v)
    _out_proj(ctx, g, "o_proj", "attention output projection")


def _attention_entry(ctx: Context, g: Group, hq: int, hkv: int, d: int, d_v: int, kv_shared: bool = False) -> None:
    """The layer's softmax attention as one rank runs it: heads per rank
    (vllm_rules.attention.mha_heads_per_rank), head sizes as the q/k/v widths hold them, and the
    window or chunk vLLM builds for this layer index (layer_window, layer_chunk)."""
    index = g.scan.index
    window, chunk = vllm_attention.layer_window(ctx.cfg, index), vllm_attention.layer_chunk(ctx.cfg, index)
    hq_r, hkv_r = vllm_attention.mha_heads_per_rank(hq, hkv, ctx.tp)
    name = "attn" + (".sliding" if window else ".chunked" if chunk else "") + (".kv_shared" if kv_shared else "")
    g.scan.out.attention.append(AttentionEntry(
        name, (g.scan.full(g.parent),), "mha", 1, hq_r, hkv_r, d, d_v, hq, hkv,
        sliding_window=window, attention_chunk_size=chunk, kv_shared=kv_shared))


def _layer_heads(ctx: Context, pmod: Any) -> int:
    """This layer's query heads: its own count where the module states one (layers with their own
    head counts), else the config's num_attention_heads."""
    for attr in ("num_heads", "num_attention_heads"):
        value = getattr(pmod, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return int(ctx.num_heads)


def query_only_attention(ctx: Context, g: Group) -> None:
    """A layer that reads another layer's K and V (KV-shared layers, e.g. Gemma 4's last
    num_kv_shared_layers): only q_proj, a ColumnParallelLinear of Hq*d split by TP, then o_proj
    (vllm/model_executor/models/gemma4.py: Gemma4Attention.__init__, is_kv_shared_layer)."""
    left, out, path = g.left, g.scan.out, g.path
    hq, d = _layer_heads(ctx, g.module), _head_dim(ctx, g.module)
    qn, k, bias = left.pop("q_proj")
    if qn != hq * d:
        out.unsupported.append(Unsupported(path("q_proj"), qn, k, f"query-only attention: q_proj width {qn} is "
                                           f"not num_attention_heads*head_dim ({hq}*{d})"))
        return
    hq_r = sharding.require_divides(hq, ctx.tp, "num_attention_heads")
    emit(ctx, out, "q_proj", [path("q_proj")], (qn, k, bias), per_rank=(hq_r * d, k))
    # The K/V heads of the layer whose cache it reads: the module's query heads per KV head.
    groups = getattr(g.module, "num_key_value_groups", None)
    if isinstance(groups, int) and groups > 0 and hq % groups == 0:
        _attention_entry(ctx, g, hq, hq // groups, d, d, kv_shared=True)
    else:
        ctx.note(f"KV-shared attention {g.path('q_proj')}: no K/V head count on the module; no attention entry")
    ctx.note("KV-shared attention layers (no k_proj/v_proj): q_proj and o_proj only, K and V read from an "
             "earlier layer")
    _out_proj(ctx, g, "o_proj", "attention output projection")


def _out_proj(ctx: Context, g: Group, role: str, what: str) -> None:
    """The attention output projection, if the layer has one: RowParallel (K split by TP)."""
    oname = next((o for o in ATTN_OUT if o in g.left), None)
    if oname:
        emit(ctx, g.scan.out, role, [g.path(oname)], g.left.pop(oname), what=what)


def cross_attention(ctx: Context, g: Group) -> None:
    """Cross-attention of an encoder-decoder / VLM text layer (Mllama): the query comes from the
    text tokens, key and value from the encoder (vision) states, so they are separate GEMMs with
    different M. Same head sharding as QKVParallelLinear: q column Hq/tp*d; k+v fused column
    2*Hkv_r*d (KV heads replicated when tp > Hkv); o_proj row."""
    left, out, path = g.left, g.scan.out, g.path
    tp, hq = ctx.tp, int(ctx.num_heads)
    d = _head_dim(ctx, g.module)
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
    emit(ctx, out, "cross_attn.q_proj", [path("q_proj")], (qn, qk, qb), per_rank=(hq_r * d, qk))
    emit(ctx, out, "cross_attn.kv_proj", [path("k_proj"), path("v_proj")], (kn + vn, kk, kb),
         per_rank=(2 * hkv_r * d, kk))
    ctx.note("cross-attention layers: cross_attn.kv_proj runs on the encoder (vision) tokens, "
             "not on the text tokens of the step")
    out.mixers.append(MixerNotTimed("cross_attn", (g.scan.full(g.parent),), 1,
                                    vllm_attention.cross_attention_reason()))
    _out_proj(ctx, g, "cross_attn.o_proj", "cross-attention output projection")


def mla(ctx: Context, g: Group) -> None:
    """DeepSeek MLA (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MLAAttention, which
    asserts that TP divides the heads)."""
    left, out, path = g.left, g.scan.out, g.path
    sharding.require_divides(int(ctx.num_heads), ctx.tp, "num_attention_heads")
    kva = left.pop("kv_a_proj_with_mqa")
    if "q_a_proj" in left:
        qa = left.pop("q_a_proj")
        # DeepSeekV2FusedQkvAProjLinear: merged [q_lora, kv_lora + rope], disable_tp -> replicated
        emit(ctx, out, "mla.fused_qkv_a_proj", [path("q_a_proj"), path("kv_a_proj_with_mqa")],
             (qa[0] + kva[0], qa[1], qa[2] or kva[2]))
    else:
        emit(ctx, out, "mla.kv_a_proj_with_mqa", [path("kv_a_proj_with_mqa")], kva)
    for leaf, role in (("q_b_proj", "mla.q_b_proj"), ("q_proj", "mla.q_proj"), ("kv_b_proj", "mla.kv_b_proj")):
        if leaf in left:
            emit(ctx, out, role, [path(leaf)], left.pop(leaf), what=leaf)
    _out_proj(ctx, g, "o_proj", "MLA o_proj")
    heads = int(ctx.num_heads)
    rank, rope = int(config_value(ctx.cfg, "kv_lora_rank")), int(config_value(ctx.cfg, "qk_rope_head_dim"))
    q_r, d_qk, d_vo = vllm_attention.mla_absorbed(heads, rank, rope, ctx.tp)
    window = vllm_attention.layer_window(ctx.cfg, g.scan.index)
    out.attention.append(AttentionEntry("mla" + (".sliding" if window else ""), (g.scan.full(g.parent),), "mla", 1,
                                        q_r, 1, d_qk, d_vo, heads, 1, kv_lora_rank=rank, qk_rope_head_dim=rope,
                                        qk_nope_head_dim=int(config_value(ctx.cfg, "qk_nope_head_dim")),
                                        v_head_dim=int(config_value(ctx.cfg, "v_head_dim")),
                                        sliding_window=window))


def indexer(ctx: Context, g: Group) -> None:
    """DeepSeek-V3.2 / GLM-5 sparse-attention indexer: wq_b replicated; wk + weights_proj merged,
    disable_tp -> replicated (vllm/model_executor/models/deepseek_v2.py: Indexer.__init__)."""
    left, out, path = g.left, g.scan.out, g.path
    emit(ctx, out, "indexer.wq_b", [path("wq_b")], left.pop("wq_b"))
    if "wk" in left and "weights_proj" in left:
        wk, wp = left.pop("wk"), left.pop("weights_proj")
        emit(ctx, out, "indexer.wk_weights_proj", [path("wk"), path("weights_proj")],
             (wk[0] + wp[0], wk[1], wk[2] or wp[2]))
    heads, dim = config_value(ctx.cfg, "index_n_heads"), config_value(ctx.cfg, "index_head_dim")
    topk = config_value(ctx.cfg, "index_topk")
    if heads and dim and topk:
        out.mixers.append(MixerNotTimed("indexer", (g.scan.full(g.parent),), 1,
                                        vllm_attention.indexer_reason(int(heads), int(dim), int(topk))))


__all__ = ["ATTN_OUT", "FUSED_QKV", "self_attention", "query_only_attention", "cross_attention", "mla", "indexer"]
