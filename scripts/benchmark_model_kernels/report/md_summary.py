"""The summary of report.md, the answer first: per-step totals per recipe and the fastest recipe per M.

In: an `Analysis` (its roll-ups and `recipe_totals.py`'s ranking). Out: Markdown lines: each recipe's
vLLM-default and best-measured totals with their speed-up over the reference total, the fastest
recipe per M on each basis (a tie where the p10-p90 ranges overlap; by medians where rows recorded
no percentiles; bold only for a ranked win), a recipe one rank cannot hold marked "does not fit"
(memory.py's decision) instead of a number, then what the lines mean, the checkpoint's FP8 scheme and
why a total is incomplete or missing. Nothing here computes a number or touches a file.
"""

from __future__ import annotations

from typing import Sequence

from ..vllm_rules.dispatch import VLLM_VERSION
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
from .md_text import NO_FIT_MARK, TIE_TEXT, fmt_us, fmt_x, table, with_speedup
from .recipe_totals import (
    SUMMARY_BASES,
    SUMMARY_BASIS_WORDS,
    Verdict,
    measured_recipes,
    speedup_of,
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
    """The fastest line's cell. Bold only for a ranked win (at least two totals compared, none
    within the fastest's p10-p90 range); a line with nothing to compare is plain text."""
    left_out = [f"{recipe_label(d)} left out: does not fit" for d in v.not_fit]
    if not v.fastest:
        return "no complete total" + (" that fits one GPU (" + "; ".join(left_out) + ")" if left_out else "")
    ref_recipe, ref_basis, ref_title = summary_reference(a)
    label = recipe_label(v.fastest)
    if not v.compared:
        # Not a result: no other total was complete (or fit), so nothing was compared.
        return f"{label} (only complete total{' that fits one GPU' if v.not_fit else ''})"
    notes = []
    # A tie among the ranked totals that also ties the reference needs no second "tie".
    if (v.fastest, v.basis) != (ref_recipe, ref_basis) and v.speedup is not None and not (v.ties and v.speedup_tie):
        mark = NO_FIT_MARK if v.ref_no_fit else ""
        notes.append(f"{TIE_TEXT} with {ref_title}{mark}" if v.speedup_tie else f"{fmt_x(v.speedup)}{mark}")
    ranked = sum(total is not None for _, total in v.totals)
    if v.not_ranked:
        notes.append(f"of {ranked} complete totals")
    notes += left_out
    if v.by_medians:
        notes.append(MEDIANS_WORDS[v.by_medians])
    tail = f" ({'; '.join(notes)})" if notes else ""
    if v.ties:
        # A win smaller than the p10-p90 spread of the totals is no win: nothing is bold.
        return f"{TIE_TEXT}: {label} = {', '.join(recipe_label(d) for d in v.ties)}{tail}"
    return f"**{label}**{tail}"


#: What a verdict or speed-up says when rows recorded no p10/p90 (Rollup.by_medians).
MEDIANS_WORDS = {"only": "by medians only: no p10/p90 recorded",
                 "partly": "partly by medians: some rows recorded no p10/p90"}


def _summary_total_text(a: Analysis, recipe: str, r: Rollup, ref: Rollup, is_reference: bool) -> str:
    no_fit = a.no_fit(recipe)
    if no_fit is not None:
        return no_fit.text
    if r.no_number:
        return "no number"
    if not r.complete or r.total_us <= 0:
        return "incomplete"
    sp = None if is_reference else speedup_of(ref, r)
    if sp is None:
        return fmt_us(r.total_us)
    return with_speedup(fmt_us(r.total_us), sp.ratio, sp.tie, a.no_fit(ref.recipe) is not None)


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
        body.append([title, *[_summary_total_text(a, recipe, a.rollup(recipe, m, basis),
                                                  a.rollup(ref_recipe, m, ref_basis), is_reference) for m in a.ms]])
    for basis in SUMMARY_BASES:
        verdicts = summary_verdicts(a, basis)
        title = f"fastest, {SUMMARY_BASIS_WORDS[basis]}"
        # A line that compares nothing at any M is no result: its title is not bold either.
        body.append([f"**{title}**" if any(v.compared for v in verdicts) else title,
                     *[_verdict_text(a, v) for v in verdicts]])
    return table(["recipe", *[f"M={m}" for m in a.ms]], body)


def _fit_lines(a: Analysis) -> list[str]:
    """The recipes one rank cannot hold, with what they need, and what a speed-up over such a
    reference is."""
    lines = []
    no_fit = [(d, nf) for d in dict.fromkeys([BASELINE, *measured_recipes(a)]) if (nf := a.no_fit(d))]
    shown = [f"{recipe_label('bf16') if d == BASELINE else recipe_label(d)} {nf.text}" for d, nf in no_fit]
    if shown:
        lines.append("- " + "; ".join(dict.fromkeys(shown)) + " on one GPU of this run (Memory per rank): "
                     "such a total is kernel time no single GPU of this size serves, so it has no number, "
                     "speed-up or place in a fastest line here (the roll-up below still lists its kernel time).")
    ref_recipe, _, ref_title = summary_reference(a)
    if a.no_fit(ref_recipe) is not None:
        lines.append(f"- {NO_FIT_MARK}: a speed-up over the {ref_title} total, which does not fit one GPU: a "
                     "ratio of kernel times, not a gain over a configuration one GPU can run.")
    return lines


def _tie_lines(a: Analysis, summary_table: Sequence[str]) -> list[str]:
    """What a tie is (where the table has one), and which comparisons are by medians because rows
    recorded no p10/p90."""
    lines = []
    if any(TIE_TEXT in line for line in summary_table):
        lines.append(f"- **{TIE_TEXT}**: the two totals' p10-p90 ranges (the sums of their modules' p10s and "
                     "p90s) overlap, so the difference is within the run-to-run spread: no gain, no loss.")
    medians = {r.by_medians for m in a.ms for d in [BASELINE, *measured_recipes(a)]
               for basis in SUMMARY_BASES if (r := a.rollup(d, m, basis)).complete} - {""}
    if medians:
        how = ("by medians only (no row recorded p10/p90)" if medians == {"only"}
               else "partly by medians (some rows recorded no p10/p90)")
        lines.append(f"- Speed-ups, ties and fastest lines here are {how}: a module without percentiles "
                     "has no spread, so its share of a difference reads as a win however small.")
    return lines


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
        # One clause per reason: the closest-timed number differs per module and M, so it is
        # gathered into one range per module instead of repeating the reason for each cell.
        merged: dict[str, dict[str, set[int]]] = {}
        closest: dict[str, dict[str, dict[str, list[tuple[float, set[int]]]]]] = {}
        for m in a.ms:
            r = a.rollup(d, m, VLLM)
            for name, gap in zip(r.missing, r.why_missing, strict=True):
                merged.setdefault(gap.reason, {}).setdefault(name, set()).add(m)
                if gap.closest_us is not None:
                    closest.setdefault(gap.reason, {}).setdefault(gap.closest_label, {}).setdefault(
                        name, []).append((gap.closest_us, {m}))
        if not merged:
            continue
        parts = []
        for base, names in merged.items():
            at = sorted(set().union(*names.values()))
            where = "" if at == a.ms else f" at M={','.join(map(str, at))}"
            parts.append(f"{_gap_subject(a, list(names))}{where} {base}{_closest_words(closest.get(base, {}), at)}")
        out.append(f"- **{a.recipe_title(d)} vLLM default** is incomplete: " + "; ".join(parts) + ".")
    return out


def _closest_words(by_label: dict[str, dict[str, list[tuple[float, set[int]]]]], at: list[int]) -> str:
    """"; closest timed: torch/per_tensor [stand-in] (qkv_proj 5.97-8.82 us, o_proj 5.14 us at M=8)":
    per module the range of the closest timed row's medians, and its M where not every M of the gap."""
    out = []
    for label, per_name in by_label.items():
        spans = []
        for name, values in per_name.items():
            lo, hi = min(us for us, _ in values), max(us for us, _ in values)
            ms = sorted(set().union(*(m for _, m in values)))
            span = f"{name} {fmt_us(lo)} us" if lo == hi else f"{name} {fmt_us(lo)}-{fmt_us(hi)} us"
            spans.append(span if ms == at else f"{span} at M={','.join(map(str, ms))}")
        out.append(f"; closest timed: {label} ({', '.join(spans)})")
    return "".join(out)


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
    summary_table = _summary_table(a)
    ref_recipe, _, ref_title = summary_reference(a)
    why_ref = " (the BF16 vLLM-default total is incomplete)" if ref_recipe == BASELINE else ""
    if a.no_fit(ref_recipe) is not None:
        why_ref += f", which does not fit one GPU ({NO_FIT_MARK})"
    lines = [
        f"GEMM + fused-MoE kernel time of one forward step on one rank of {gpu}, in us (lower is "
        f"better), and in parentheses the speed-up over the {ref_title} total{why_ref}. Kernel "
        "time only: no attention, communication or launch gaps, so not a serving latency. "
        f"{M_TEXT}.{ep_text}"
        + (" The roll-up with attention below adds this run's attention rows per KV length."
           if a.attention.rows else ""),
        "",
        *summary_table,
        "",
        *_fit_lines(a),
        *_tie_lines(a, summary_table),
        *_scheme_lines(a),
        *_definition_lines(a),
    ]
    if a.kept_text():
        lines.append(f"- {a.kept_text()}")
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
