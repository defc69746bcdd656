"""Human-readable preview of a Plan (what `benchmark_model.py --print_only` prints)."""

from __future__ import annotations

from ..core.plan_schema import AttentionEntry, ModelInfo, MoeEntry, Plan, Routing
from ..vllm_rules.attention import kv_head_replicas
from . import memory

#: Bytes per K/V cache element of each KV dtype the preview states (BF16 and FP8 e4m3).
KV_BYTES = memory.KV_DTYPE_BYTES
#: GPU sizes (GiB) the memory table shows when no size is given and no GPU is present: H100 80 GB,
#: H200 141 GB, B200 192 GB, as their memory is sold.
DEFAULT_GPU_MEM_GIB = (80.0, 141.0, 192.0)


def _routing_text(r: Routing) -> str:
    parts = [r.method, f"scoring={r.scoring_func}", f"renorm={'yes' if r.renormalize else 'no'}"]
    if r.n_group is not None:
        parts += [f"n_group={r.n_group}", f"topk_group={r.topk_group}"]
    if r.routed_scaling_factor is not None:
        parts.append(f"scale={r.routed_scaling_factor:g}")
    if r.use_routing_bias:
        parts.append("score-correction bias")
    if r.apply_router_weight_on_input:
        parts.append("weight on input")
    return " ".join(parts)


def _moe_gemm_header(moes: tuple[MoeEntry, ...]) -> str:
    """The two expert GEMMs' weight shapes: GEMM1 holds gate and up (2*I) for gated experts, up only
    (I) for non-gated ones."""
    gated = {e.gated for e in moes}
    first = "2*I" if gated == {True} else "I" if gated == {False} else "2*I gated, I non-gated"
    return f"GEMM1 [E_local, {first}, H] then GEMM2 [E_local, H, I]  (I = inter/rank)"


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _window_text(a: AttentionEntry) -> str:
    if a.sliding_window:
        return f"sliding {a.sliding_window}"
    if a.attention_chunk_size:
        return f"chunk {a.attention_chunk_size}"
    return "full"


def _kv_heads_text(a: AttentionEntry, tp: int) -> str:
    if a.kind == "mla":
        return "1 (latent)"
    text = f"{a.num_kv_heads}/{a.total_kv_heads}"
    replicas = kv_head_replicas(a.total_kv_heads, tp)
    return text + (f" (x{replicas} replicated)" if replicas > 1 else "")


def attention_lines(plan: Plan) -> list[str]:
    """The preview's attention section: one line per layer type, then the mixers no row times."""
    if not plan.attention and not plan.mixers_not_timed:
        return []
    lines = [f"Attention ({len(plan.attention)}):  heads per rank / model; KV bytes per token and layer "
             "on this rank (bf16 / fp8 cache)"]
    if plan.attention:
        rows = [["name", "kind", "x/step", "q heads", "kv heads", "head dim qk/vo", "window", "KV B/token",
                 "modules"]]
        for a in plan.attention:
            kv = "none (shared)" if a.kv_shared else " / ".join(
                str(a.kv_elements_per_token * b) for b in KV_BYTES.values())
            dims = f"{a.head_dim_qk}/{a.head_dim_vo}"
            if a.kind == "mla":
                dims += f" (latent {a.kv_lora_rank} + rope {a.qk_rope_head_dim})"
            rows.append([a.name, a.kind, str(a.layers), f"{a.num_q_heads}/{a.total_q_heads}",
                         _kv_heads_text(a, plan.tp), dims, _window_text(a), kv, ", ".join(a.modules)])
        lines += _table(rows, right={2})
    for x in plan.mixers_not_timed:
        lines.append(f"  not timed[{x.name}] x{x.layers} ({', '.join(x.modules)}): {x.reason}")
    return lines


def memory_lines(plan: Plan, sizes_gib: tuple[float, ...], utilization: float, where: str) -> list[str]:
    """The preview's memory table: per GPU size and recipe, one rank's weights, vLLM's usable
    memory, the K/V budget and the tokens of K/V it holds in BF16 and FP8 (references/memory.md).
    `where` says where the sizes came from."""
    w = {r: memory.weight_bytes(plan, r) for r in memory.RECIPES}
    per_token = {d: memory.kv_bytes_per_token(plan, d) for d in KV_BYTES}
    reserve = memory.activation_reserve(plan)
    tied = {True: "tied to the lm_head", False: "its own tensor", None: "tie unknown: counted"}
    lines = [f"Memory per rank (GiB; {where}; vLLM takes gpu_memory_utilization={utilization:g} of the GPU, "
             f"a reserve of {memory.gib(reserve)} GiB for activations, CUDA graphs and context):",
             f"  weights per recipe (embedding {memory.gib(2 * memory.embedding_rows(plan) * plan.model.hidden_size)} "
             f"GiB BF16, {tied[plan.model.tie_word_embeddings]}; fp8 scales {memory.fp8_scheme_of(plan)}): "
             + ", ".join(f"{r} {memory.gib(w[r].total)}" for r in memory.RECIPES),
             "  K/V cache per token on this rank: " + ", ".join(f"{d} {per_token[d]} B" for d in KV_BYTES)
             + ("; sliding-window and chunked layers hold at most their window of each sequence"
                if any(a.sliding_window or a.attention_chunk_size for a in plan.attention) else "")]
    if plan.mixers_not_timed:
        lines.append("  not counted: the recurrent or indexer state of the mixers not timed "
                     f"({', '.join(x.name for x in plan.mixers_not_timed)})")
    rows = [["GPU GiB", "recipe", "weights", "usable", "K/V budget", "K/V tokens bf16", "K/V tokens fp8"]]
    notes = []
    for size in sizes_gib:
        for recipe in memory.RECIPES:
            est = {d: memory.estimate(plan, recipe, d, int(size * 2**30), gpu_memory_utilization=utilization)
                   for d in KV_BYTES}
            e = est["bf16"]
            if not e.weights_fit:
                notes.append(f"  {size:g} GiB {recipe}: does not fit: weights {memory.gib(e.weight_bytes)} GiB > "
                             f"{memory.gib(e.usable_bytes)} GiB usable")
            elif not e.kv_fits_any:
                notes.append(f"  {size:g} GiB {recipe}: no room for K/V: weights {memory.gib(e.weight_bytes)} GiB + "
                             f"reserve {memory.gib(e.reserve_bytes)} GiB > {memory.gib(e.usable_bytes)} GiB usable")
            tokens = [f"{est[d].kv_tokens_fit:,}" if est[d].kv_fits_any else "-" for d in KV_BYTES]
            rows.append([f"{size:g}", recipe, memory.gib(e.weight_bytes), memory.gib(e.usable_bytes),
                         memory.gib(e.kv_budget_bytes) if e.kv_fits_any else "-", *tokens])
    return lines + _table(rows, right={0, 2, 3, 4, 5, 6}) + notes


def planner_lines(m: ModelInfo) -> list[str]:
    """Who planned (none for a plan from before the field), and where the rules planner differs
    from vLLM's plan, one line each."""
    if not m.planner:
        return []
    lines = [f"# planner: {m.planner}"]
    if m.planner.startswith("vllm "):
        lines.append(f"# planner: the rules planner differs in {len(m.planner_differences)} line(s); vLLM's plan "
                     "is used" if m.planner_differences else
                     "# planner: the rules planner agrees (every GEMM, fused-MoE and attention entry and count)")
        lines += [f"# planner difference: {d}" for d in m.planner_differences]
    return lines


def format_plan(plan: Plan) -> str:
    """The preview text: model, TP/EP, one line per GEMM and MoE entry, unsupported lines."""
    m = plan.model
    lines = planner_lines(m) + [
             f"# model: {m.name} ({m.source}{', revision ' + m.revision if m.revision else ''})",
             f"# class: {m.architecture}  model_type: {m.model_type}  layers: {m.num_hidden_layers}  "
             f"hidden: {m.hidden_size}  vocab: {m.vocab_size}",
             f"# parallel: TP={plan.tp} EP={plan.ep}  (per-rank shapes of rank 0; counts per forward step)"]
    if m.fp8_scheme or m.fp8_scheme_source:
        lines.append(f"# fp8 scheme of the checkpoint: {m.fp8_scheme or 'none (not an FP8 checkpoint)'}"
                     f" ({m.fp8_scheme_source})")
    lines += [f"# note: {n}" for n in m.notes]
    lines.append("")
    lines.append(f"GEMMs ({len(plan.gemms)}):  Y[M,N] = X[M,K] W[N,K]^T")
    rows = [["name", "N x K", "x/step", "parallel", "bias", "modules"]]
    for g in plan.gemms:
        rows.append([g.name, f"{g.n} x {g.k}", str(g.layers),
                     g.parallel + (f" (M/{g.m_divisor})" if g.m_divisor > 1 else ""), "bias" if g.bias else "-",
                     ", ".join(g.modules)])
    lines += _table(rows, right={1, 2})
    if plan.moe:
        lines.append("")
        lines.append(f"Fused MoE ({len(plan.moe)}):  {_moe_gemm_header(plan.moe)}")
        rows = [["name", "hidden", "inter/rank", "experts local/global", "top_k", "activation", "x/step", "modules"]]
        for e in plan.moe:
            rows.append([e.name, str(e.hidden), str(e.intermediate), f"{e.experts}/{e.global_experts}",
                         str(e.top_k), e.activation + (" (+bias)" if e.bias else ""), str(e.layers),
                         ", ".join(e.modules)])
        lines += _table(rows, right={1, 2, 3, 4, 6})
        for e in plan.moe:
            lines.append(f"  routing[{e.name}]: {_routing_text(e.routing)}")
            if e.tokens_per_m > 1:
                lines.append(f"  tokens[{e.name}]: num_tokens = {e.tokens_per_m} x M: EP={plan.ep} over "
                             f"TP={plan.tp} is {e.tokens_per_m} data-parallel attention ranks, each "
                             f"with its own M tokens, dispatching to every EP rank")
            else:
                lines.append(f"  tokens[{e.name}]: num_tokens = M (no data-parallel attention)")
            if e.top_k > e.experts:
                lines.append(f"  note[{e.name}]: wide EP: top_k={e.top_k} > {e.experts} local experts "
                             f"(routing spans all {e.global_experts})")
    attention = attention_lines(plan)
    if attention:
        lines += [""] + attention
    lines.append("")
    for u in plan.unsupported:
        lines.append(f"# unsupported: {u.module} ({u.n} x {u.k}): {u.reason}")
    check = plan.cross_check
    if check is not None:
        if check.status == "not checked":
            lines.append(f"# cross-check against {check.against}: not checked (no verdict on the plan): "
                         f"{check.refused}")
        elif check.refused:
            lines.append(f"# cross-check against {check.against}: vLLM refuses: {check.refused}")
        elif check.status == "mismatch":
            lines.append(f"# cross-check against {check.against}: {len(check.differences)} difference(s)")
            lines += [f"# cross-check {d}" for d in check.differences]
        else:
            lines.append(f"# cross-check against {check.against}: match (every per-rank GEMM, fused-MoE and "
                         "attention shape and count agrees)")
            lines += [f"# cross-check {d}" for d in check.differences]  # a bias alone: no shape mismatch
    if plan.complete:
        lines.append("# plan complete")
    else:
        lines.append(f"# plan INCOMPLETE: {len(plan.unsupported)} module(s) could not be placed (listed above)")
    return "\n".join(lines) + "\n"


__all__ = ["KV_BYTES", "DEFAULT_GPU_MEM_GIB", "attention_lines", "memory_lines", "planner_lines", "format_plan"]
