"""Human-readable preview of a Plan (what `benchmark_model.py --print_only` prints)."""

from __future__ import annotations

from .schema import MoeEntry, Plan, Routing


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


def format_plan(plan: Plan) -> str:
    """The preview text: model, TP/EP, one line per GEMM and MoE entry, unsupported lines."""
    m = plan.model
    lines = [f"# model: {m.name} ({m.source}{', revision ' + m.revision if m.revision else ''})",
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
    lines.append("")
    for u in plan.unsupported:
        lines.append(f"# unsupported: {u.module} ({u.n} x {u.k}): {u.reason}")
    check = plan.cross_check
    if check is not None:
        if check.refused:
            lines.append(f"# cross-check against {check.against}: vLLM refuses: {check.refused}")
        elif check.differences:
            lines.append(f"# cross-check against {check.against}: {len(check.differences)} difference(s)")
            lines += [f"# cross-check {d}" for d in check.differences]
        else:
            lines.append(f"# cross-check against {check.against}: match (every per-rank GEMM and fused-MoE "
                         "shape and count agrees)")
    if plan.complete:
        lines.append("# plan complete")
    else:
        lines.append(f"# plan INCOMPLETE: {len(plan.unsupported)} module(s) could not be placed (listed above)")
    return "\n".join(lines) + "\n"


__all__ = ["format_plan"]
