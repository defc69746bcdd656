"""Which per-step totals the report lists, and the summary's ranking of them.

In: an `Analysis` (its roll-ups, each computed once there). Out: the roll-up rows per recipe and
basis (`rollup_variants`: the BF16 baseline, then per recipe its vLLM default and its best on each
basis), the summary's reference total, one total against another (`Speedup`: a tie where their
p10-p90 ranges overlap, by medians where rows recorded no percentiles), and per M the fastest recipe
on the vLLM-default and the best-measured basis (`Verdict`, ties by the p10-p90 spread; a recipe one
rank cannot hold left out, memory.py's decision). No file I/O, no Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass

from .analysis import Analysis, Rollup
from .cells import BASELINE, BASELINE_BACKEND, KERNEL, QUANT, VLLM, clear_win

#: Title of the BF16 baseline roll-up (torch rows where they ran).
BASELINE_TITLE = f"BF16 baseline ({BASELINE_BACKEND} where it ran)"
#: The two bases the summary ranks on: what vLLM runs, and the best this run measured (+quant).
SUMMARY_BASES = (VLLM, QUANT)
SUMMARY_BASIS_WORDS = {VLLM: "vLLM default", QUANT: "best measured"}


def bases(a: Analysis, recipe: str) -> list[str]:
    """Cost bases shown for a recipe: +quant and kernel-only when the run timed the quantization."""
    return [QUANT, KERNEL] if a.has_quant_rows(recipe) else [QUANT]


def measured_recipes(a: Analysis) -> list[str]:
    """Recipes with at least one number. One without is left out of every total: its total would
    hold only the modules vLLM keeps in BF16 (router, lm_head), which would read as a quantized
    step."""
    return [d for d in a.recipes if a.has_number(d)]


def rollup_variants(a: Analysis) -> list[tuple[str, str, str]]:
    """(recipe, basis, title) of every roll-up row: the BF16 baseline, then per recipe its vLLM
    default and its best on each basis."""
    out = [(BASELINE, QUANT, BASELINE_TITLE)]
    for d in measured_recipes(a):
        title = a.recipe_title(d)
        out.append((d, VLLM, f"{title} vLLM default"))
        for basis in bases(a, d):
            if d == "bf16":
                suffix = " best"
            else:
                suffix = " best +quant" if basis == QUANT and a.has_quant_rows(d) else " best kernel only"
            out.append((d, basis, f"{title}{suffix}"))
    return out


def summary_candidates(a: Analysis, basis: str) -> list[tuple[str, str, str]]:
    """(recipe, basis, title) the summary ranks on one basis (VLLM or QUANT): every recipe with a
    number; on the QUANT basis +quant where the run timed it (vLLM quantizes activations on every
    call), so kernel-only totals stay in the roll-up section."""
    return [(d, basis, f"{a.recipe_title(d)} {SUMMARY_BASIS_WORDS[basis]}") for d in measured_recipes(a)]


def summary_reference(a: Analysis) -> tuple[str, str, str]:
    """(recipe, basis, title) the summary's speed-ups divide: the BF16 vLLM-default total when it is
    complete at every M, else the BF16 baseline (torch where it ran)."""
    if a.ms and all(a.rollup("bf16", m, VLLM).complete for m in a.ms):
        return ("bf16", VLLM, f"{a.recipe_title('bf16')} vLLM default")
    return (BASELINE, QUANT, BASELINE_TITLE)


def medians_of(*totals: Rollup) -> str:
    """How a comparison of `totals` is made where rows lack percentiles: "only" (no total has a
    p10/p90 anywhere), "partly" (some modules lack them) or "" (every counted module has them)."""
    words = {r.by_medians for r in totals}
    if words == {""}:
        return ""
    return "only" if words == {"only"} else "partly"


@dataclass(frozen=True)
class Speedup:
    """One complete total against a reference total."""

    ratio: float
    """Reference total / this total (> 1: faster than the reference)."""
    tie: bool
    """Their p10-p90 ranges overlap: by the report's rule no gain (and no loss). Never set when
    neither total has a percentile (by_medians "only")."""
    by_medians: str
    """medians_of the two totals."""


def speedup_of(ref: Rollup, r: Rollup) -> Speedup | None:
    """`r` against `ref`; None unless both totals are complete and positive."""
    if not (ref.complete and r.complete) or ref.total_us <= 0 or r.total_us <= 0:
        return None
    medians = medians_of(ref, r)
    # Without any percentile the ranges are single points: no overlap test, the ratio of medians
    # stands (said "by medians only").
    tie = medians != "only" and not clear_win(r.spread, ref.spread) and not clear_win(ref.spread, r.spread)
    return Speedup(ref.total_us / r.total_us, tie, medians)


@dataclass(frozen=True)
class Verdict:
    """The fastest recipe at one M on one basis, by per-step roll-up total (results.json only)."""

    m: int
    basis: str
    """VLLM (each recipe's vLLM-default total) or QUANT (each recipe's best measured total)."""
    totals: tuple[tuple[str, float | None], ...]
    """(recipe, total us) per candidate in table order; None when the total is incomplete."""
    fastest: str
    """Recipe of the fastest complete total ("" when no total is complete)."""
    speedup: float | None
    """Reference total (summary_reference) / fastest total (> 1: faster than the reference)."""
    not_ranked: tuple[str, ...]
    """Recipes left out of the ranking because their total is incomplete."""
    ties: tuple[str, ...] = ()
    """Ranked recipes whose total's p10-p90 spread overlaps the fastest's: the win over them is
    smaller than the spread, so they tie with it."""
    not_fit: tuple[str, ...] = ()
    """Recipes with a complete total left out because one rank cannot hold them (Analysis.no_fit)."""
    speedup_tie: bool = False
    """The fastest total's p10-p90 range overlaps the reference's: no gain over it."""
    by_medians: str = ""
    """medians_of the fastest, the totals it was ranked against and the reference."""
    ref_no_fit: bool = False
    """The reference total itself does not fit one rank: its speed-up is a kernel-time ratio only."""

    @property
    def compared(self) -> bool:
        """Whether at least two totals were ranked: only then is the line a result."""
        return sum(t is not None for _, t in self.totals) >= 2

    @property
    def win(self) -> bool:
        """A ranked win by more than the p10-p90 spread over every other ranked total."""
        return self.compared and not self.ties


def summary_verdicts(a: Analysis, basis: str = QUANT) -> list[Verdict]:
    """One Verdict per M on `basis`; on a tie the earlier recipe (BF16 first) wins. A recipe one rank
    of the GPU cannot hold is no candidate: its total is a kernel time no single GPU serves."""
    ref_recipe, ref_basis, _ = summary_reference(a)
    ref_no_fit = a.no_fit(ref_recipe) is not None
    out = []
    for m in a.ms:
        ref = a.rollup(ref_recipe, m, ref_basis)
        totals: list[tuple[str, float | None]] = []
        ranked: list[tuple[float, int, str]] = []
        not_ranked, not_fit = [], []
        for i, (recipe, _, _) in enumerate(summary_candidates(a, basis)):
            r = a.rollup(recipe, m, basis)
            complete = r.complete and r.total_us > 0
            if complete and a.no_fit(recipe) is not None:
                not_fit.append(recipe)
                totals.append((recipe, None))
                continue
            totals.append((recipe, r.total_us if complete else None))
            if complete:
                ranked.append((r.total_us, i, recipe))
            else:
                not_ranked.append(recipe)
        best = min(ranked) if ranked else None
        sp = speedup_of(ref, a.rollup(best[2], m, basis)) if best else None
        ties: tuple[str, ...] = ()
        medians = ""
        if best:
            fastest = a.rollup(best[2], m, basis)
            ties = tuple(d for _, _, d in sorted(ranked) if d != best[2]
                         and not clear_win(fastest.spread, a.rollup(d, m, basis).spread))
            medians = medians_of(ref, *(a.rollup(d, m, basis) for *_, d in ranked))
        out.append(Verdict(m, basis, tuple(totals), best[2] if best else "", sp.ratio if sp else None,
                           tuple(not_ranked), ties, tuple(not_fit), bool(sp and sp.tie), medians, ref_no_fit))
    return out


__all__ = [
    "bases", "measured_recipes", "rollup_variants", "BASELINE_TITLE", "SUMMARY_BASES", "SUMMARY_BASIS_WORDS",
    "Speedup", "Verdict", "medians_of", "speedup_of", "summary_candidates", "summary_reference", "summary_verdicts",
]
