"""The summary of report.md, the answer first: per-step totals per recipe and the fastest recipe per M.

In: an `Analysis` (its roll-ups and `recipe_totals.py`'s ranking). Out: Markdown lines: each recipe's
vLLM-default and best-measured totals with their speed-up over the reference total, the fastest
recipe per M on each basis (ties within the p10-p90 spread), then what the lines mean, the
checkpoint's FP8 scheme and why a total is incomplete or missing. Nothing here computes a number or
touches a file.
"""

from __future__ import annotations

from typing import Sequence

from ..vllm_rules.dispatch import VLLM_VERSION
from ..vllm_rules.layers import kept_in_bf16
from .analysis import (
    BASELINE,
    BASELINE_BACKEND,
    TIMED_MARKS,
    TORCH_MOE_LABEL,
    VLLM,
    VLLM_MARKS,
    Analysis,
    Rollup,
    has_time,
    recipe_dtype,
    recipe_label,
    recipe_of,
)
from .md_text import fmt_us, fmt_x, table
from .recipe_totals import (
    SUMMARY_BASES,
    SUMMARY_BASIS_WORDS,
    Verdict,
    measured_recipes,
    summary_reference,
    summary_verdicts,
)

#: What the torch MoE row is, wherever the report explains it.
TORCH_MOE_TEXT = ("PyTorch composite (torch._grouped_mm + sort/gather/index_add), not a vLLM kernel "
                  "(torch._scaled_grouped_mm in FP8)")

#: What M is, wherever the report explains it.
M_TEXT = ("M = tokens of one rank's attention per step; an MoE layer under expert parallelism "
          "runs num_tokens = M*EP/TP (it gathers the tokens of the EP/TP data-parallel attention "
          "replicas)")


def _verdict_text(a: Analysis, v: Verdict) -> str:
    if not v.fastest:
        return "no complete total"
    ref_recipe, ref_basis, _ = summary_reference(a)
    is_reference = (v.fastest, v.basis) == (ref_recipe, ref_basis)
    name = f"**{recipe_label(v.fastest)}**"
    text = name if is_reference or v.speedup is None else f"{name} ({fmt_x(v.speedup)})"
    ranked = sum(total is not None for _, total in v.totals)
    if v.ties:
        # A win smaller than the p10-p90 spread of the totals is no win.
        text = f"tie: {text} = {', '.join(recipe_label(d) for d in v.ties)} (within the p10-p90 spread)"
    if v.not_ranked and ranked == 1:
        # Not a win: the other recipes' totals are incomplete, so nothing was compared.
        return f"{text} (only complete total)"
    if v.not_ranked:
        return f"{text} (of {ranked} complete totals)"
    return text


def _summary_total_text(r: Rollup, ref: Rollup, is_reference: bool) -> str:
    if r.no_number:
        return "no number"
    if not r.complete or r.total_us <= 0:
        return "incomplete"
    if is_reference or not ref.complete or not r.total_us:
        return fmt_us(r.total_us)
    return f"{fmt_us(r.total_us)} ({fmt_x(ref.total_us / r.total_us)})"


def _summary_table(a: Analysis) -> list[str]:
    """Rows: each recipe's vLLM-default and best-measured totals (the BF16 baseline first when it
    is the reference), then the fastest recipe per M on each basis; columns: M."""
    reference = summary_reference(a)
    ref_recipe, ref_basis, _ = reference
    lines_spec = [reference] if ref_recipe == BASELINE else []
    lines_spec += [(d, basis, f"{a.recipe_title(d)} {SUMMARY_BASIS_WORDS[basis]}")
                   for d in measured_recipes(a) for basis in SUMMARY_BASES]
    body = []
    for recipe, basis, title in lines_spec:
        is_reference = (recipe, basis) == (ref_recipe, ref_basis)
        body.append([title, *[_summary_total_text(a.rollup(recipe, m, basis), a.rollup(ref_recipe, m, ref_basis),
                                                  is_reference) for m in a.ms]])
    for basis in SUMMARY_BASES:
        body.append([f"**fastest, {SUMMARY_BASIS_WORDS[basis]}**",
                     *[_verdict_text(a, v) for v in summary_verdicts(a, basis)]])
    return table(["recipe", *[f"M={m}" for m in a.ms]], body)


def _common_reason(a: Analysis, recipe: str) -> str:
    reasons: dict[str, int] = {}
    for r in a.rows:
        if recipe_of(r) == recipe and not has_time(r) and r.reason:
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
    return max(reasons, key=reasons.get) if reasons else ""


def _gap_subject(a: Analysis, names: Sequence[str]) -> str:
    """"dense GEMMs (qkv_proj, o_proj)" / "MoE layers (experts)" / both, joined by "and"."""
    kinds = {e.name: e.kind for e in a.entries}
    gemms = [n for n in names if kinds.get(n) != "moe"]
    moes = [n for n in names if kinds.get(n) == "moe"]
    parts = ([f"dense GEMMs ({', '.join(gemms)})"] if gemms else []) + (
        [f"MoE layers ({', '.join(moes)})"] if moes else [])
    return " and ".join(parts)


def _vllm_gap_lines(a: Analysis) -> list[str]:
    """Per recipe whose vLLM-default total is incomplete: which kernel is not timed, and why."""
    out = []
    for d in measured_recipes(a):
        gaps: dict[str, dict[str, set[int]]] = {}
        for m in a.ms:
            r = a.rollup(d, m, VLLM)
            for name, why in zip(r.missing, r.why_missing, strict=True):
                gaps.setdefault(why, {}).setdefault(name, set()).add(m)
        if not gaps:
            continue
        parts = []
        for why, names in gaps.items():
            at = sorted(set().union(*names.values()))
            where = "" if at == a.ms else f" at M={','.join(map(str, at))}"
            parts.append(f"{_gap_subject(a, list(names))}{where} {why}")
        out.append(f"- **{a.recipe_title(d)} vLLM default** is incomplete: " + "; ".join(parts) + ".")
    return out


def _definition_lines(a: Analysis) -> list[str]:
    """What the lines of the summary table mean, and what the torch and triton rows are."""
    lines = [
        "- **vLLM default** = per module, the row that times the kernel vLLM dispatches by default "
        f"for this GPU, layer kind, recipe and FP8 scheme (vllm_rules/dispatch.py, matching vLLM {VLLM_VERSION}; "
        "marked "
        f"`{VLLM_MARKS['same']}` in the module tables) or vLLM's design of it "
        f"(`{VLLM_MARKS['design']}`, `{TIMED_MARKS['vllm_design_tuned_tiles']}`), +quant where timed; "
        "where no row can time it the line is incomplete and names the closest timed row "
        f"(`{TIMED_MARKS['fallback']}`: a kernel vLLM runs elsewhere, `{TIMED_MARKS['stand_in']}`: "
        "timed in its place). **best measured** = the fastest measured "
        "backend per module and M, +quant where the run timed the activation quantization (vLLM "
        "quantizes activations on every call).",
        f"- **BF16 baseline** = the `{BASELINE_BACKEND}` rows: `F.linear` on cuBLAS for GEMMs (vLLM's "
        f"default BF16 GEMM) and, for MoE, `{TORCH_MOE_LABEL}`: a {TORCH_MOE_TEXT}; where torch has "
        "no number, the best BF16 backend.",
    ]
    if any(r.backend == "triton" for r in a.rows):
        lines.append("- `triton` rows = vLLM's design in this tool's Triton code: the algorithm of "
                     "vLLM's Triton kernels, written and tuned here.")
    return lines


def _scheme_lines(a: Analysis) -> list[str]:
    """The checkpoint's FP8 scheme, and what the summary does when the run has no row of it."""
    if not any(recipe_dtype(d) == "fp8" for d in a.recipes):
        return []
    label = recipe_label(a.checkpoint.recipe)
    lines = [f"- FP8 scheme this checkpoint runs with in vLLM: **{label}** ({a.checkpoint.source}); its "
             "lines are marked (checkpoint scheme). Each FP8 scheme is its own recipe: vLLM runs a "
             "different kernel for each."]
    if a.checkpoint.recipe not in a.recipes:
        lines.append(f"- {label} (checkpoint scheme): this run has no row of that scheme.")
    return lines


def summary_lines(a: Analysis) -> list[str]:
    if not a.ms:
        return ["No row has an M: nothing to summarize."]
    gpu = a.gpu if a.gpu != "unknown" else "an unknown GPU"
    ep = [e for e in a.entries if e.tokens_per_m > 1]
    ep_text = (f" Here the MoE layers run num_tokens = {ep[0].tokens_per_m}M." if ep else "")
    ref_recipe, _, ref_title = summary_reference(a)
    why_ref = " (the BF16 vLLM-default total is incomplete)" if ref_recipe == BASELINE else ""
    lines = [
        f"GEMM + fused-MoE kernel time of one forward step on one rank of {gpu}, in us (lower is "
        f"better), and in parentheses the speed-up over the {ref_title} total{why_ref}. Kernel "
        "time only: no attention, communication or launch gaps, so not a serving latency. "
        f"{M_TEXT}.{ep_text}"
        + (" The roll-up with attention below adds this run's attention rows per KV length."
           if a.attention.rows else ""),
        "",
        *_summary_table(a),
        "",
        *_scheme_lines(a),
        *_definition_lines(a),
    ]
    if any(kept_in_bf16(e.name) for e in a.entries) and a.quantized:
        kept = ", ".join(e.name for e in a.entries if kept_in_bf16(e.name))
        lines.append(f"- Quantized totals count {kept} at their BF16 time under every recipe: vLLM "
                     "keeps them unquantized.")
    lines += _vllm_gap_lines(a)
    for d in a.quantized:
        if not a.has_number(d):
            why = _common_reason(a, d)
            lines.append(f"- {recipe_label(d)}: no number on this GPU" + (f" (e.g. {why})" if why else "") + ".")
    unranked = [f"{a.recipe_title(d)} {SUMMARY_BASIS_WORDS[basis]}" for basis in SUMMARY_BASES
                for d in dict.fromkeys(d for v in summary_verdicts(a, basis) for d in v.not_ranked)]
    if unranked:
        lines.append(f"- Not ranked where incomplete (a module has no number): {', '.join(unranked)}; "
                     "see the per-step roll-up below.")
    failed = sum(r.status == "failed" for r in a.rows)
    if failed:
        lines.append(f"- **{failed} rows failed**: see 'Cells without a number'.")
    return lines


__all__ = ["TORCH_MOE_TEXT", "M_TEXT", "summary_lines"]
