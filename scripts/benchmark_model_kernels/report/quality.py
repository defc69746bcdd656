"""The report's "Measurement quality" section: how far each number can be trusted.

In: an `Analysis`. Out: Markdown lines for three questions a kernel engineer asks before reading a
table: how wide is each row's spread (p10/p50/p90/p99 of its per-iteration times), did each row's
output match its reference (max abs error, relative L2, argmax parity; rows beyond tolerance are
"incorrect" and have no number anywhere), and what does launching cost without CUDA graphs (eager
vs graph medians and launches per call, at every M the run timed both). Rows written before these
facts were recorded say so (report/row_facts.py); nothing is filled in.
"""

from __future__ import annotations

import statistics

from ..core.results_schema import Row
from .analysis import Analysis
from .cells import backend_label, has_time, recipe_label, recipe_of
from .md_text import fmt_us as _fmt
from .md_text import table as _table

#: Widest-spread rows listed.
WIDEST = 8
#: Not-checked reasons and incorrect rows listed at most.
LISTED = 12


def _what(r: Row) -> str:
    return f"{r.name} {recipe_label(recipe_of(r))} {backend_label(r)}{' +quant' if r.with_quant else ''}"


def relative_spread(r: Row) -> float | None:
    """(p90 - p10) / p50 of a row with percentiles, else None."""
    if r.p10_us is None or r.p90_us is None or not r.p50_us:
        return None
    return (r.p90_us - r.p10_us) / r.p50_us


def spread_lines(a: Analysis) -> list[str]:
    timed = [r for r in a.all_rows if has_time(r)]
    with_spread = [r for r in timed if relative_spread(r) is not None]
    if not timed:
        return ["No row has a number."]
    lines = [f"{len(with_spread)} of {len(timed)} rows with a number have percentiles of their "
             "per-iteration times (the median stays the headline)."]
    missing = {r.spread_note or "no reason recorded" for r in timed if relative_spread(r) is None}
    lines += [f"- without percentiles: {why}" for why in sorted(missing)[:LISTED]]
    if not with_spread:
        return lines
    by_recipe: dict[str, list[float]] = {}
    for r in with_spread:
        by_recipe.setdefault(recipe_of(r), []).append(relative_spread(r) or 0.0)
    lines += ["", *_table(["recipe", "rows", "median (p90-p10)/p50", "widest"], [
        [recipe_label(d), str(len(v)), f"{100 * statistics.median(v):.1f}%", f"{100 * max(v):.1f}%"]
        for d, v in by_recipe.items()])]
    widest = sorted(with_spread, key=lambda r: -(relative_spread(r) or 0.0))[:WIDEST]
    lines += ["", f"Widest spreads ({a.mode if len(a.modes) < 2 else 'both modes'}):", "", *_table(
        ["row", "M", "mode", "p10", "p50", "p90", "p99", "n"],
        [[_what(r), str(r.m), r.mode, _fmt(r.p10_us), _fmt(r.p50_us), _fmt(r.p90_us), _fmt(r.p99_us),
          str(r.n_samples or "-")] for r in widest])]
    lines += ["", "A recipe or backend that is faster by less than the p10-p90 spread is a tie, not a "
              "win: the summary's 'fastest' line and the crossovers say so."]
    return lines


def correctness_lines(a: Analysis) -> list[str]:
    timed = [r for r in a.all_rows if r.median_us is not None or r.status == "incorrect"]
    if not timed:
        return ["No row was timed."]
    passed = [r for r in timed if r.check == "passed"]
    failed = [r for r in timed if r.status == "incorrect" or r.check == "failed"]
    unchecked = [r for r in timed if r.check == "" and r.status != "incorrect"]
    lines = [f"Of {len(timed)} timed rows: {len(passed)} passed their correctness check, "
             f"{len(failed)} are incorrect, {len(unchecked)} were not checked. Each check is one extra "
             "call outside the timed region (references/correctness.md: the references and the "
             "tolerance per recipe)."]
    measured = [r for r in passed if r.rel_l2_err is not None]
    if measured:
        groups: dict[tuple[str, str], list[Row]] = {}
        for r in measured:
            groups.setdefault((recipe_of(r), backend_label(r)), []).append(r)
        rows = []
        for (recipe, backend), rs in groups.items():
            worst = max(rs, key=lambda r: r.rel_l2_err or 0.0)
            parity = [r.argmax_match for r in rs if r.argmax_match is not None]
            rows.append([recipe_label(recipe), backend, str(len(rs)), f"{worst.rel_l2_err:.2e}",
                         f"{max(r.max_abs_err or 0.0 for r in rs):.3g}",
                         f"{min(parity):.3f}" if parity else "-"])
        lines += ["", "Against the project's FP32 references (torch and Triton rows):", "",
                  *_table(["recipe", "backend", "rows", "worst rel L2", "worst max abs",
                           "lowest argmax parity"], rows)]
    driver = [r for r in passed if r.rel_l2_err is None]
    if driver:
        rules = sorted({r.check_note for r in driver})
        lines += ["", f"{len(driver)} FlashInfer driver rows passed the driver's own --refcheck:"]
        lines += [f"- {rule}" for rule in rules[:LISTED]]
    if failed:
        lines += ["", "**Incorrect rows** (no number in any table; they count as failed):", ""]
        lines += [f"- {_what(r)} at M={r.m} ({r.mode}): {r.check_note or r.reason}" for r in failed[:LISTED]]
    if unchecked:
        why: dict[str, int] = {}
        for r in unchecked:
            key = r.check_note or "no reason recorded"
            why[key] = why.get(key, 0) + 1
        lines += ["", "Not checked:"] + [f"- {n} rows: {text}" for text, n in sorted(why.items())[:LISTED]]
    return lines


def eager_pairs(a: Analysis) -> list[tuple[Row, Row]]:
    """(graph row, its eager twin) for every timed graph row whose eager twin has a number."""
    by_id = {r.case_id: r for r in a.all_rows}
    pairs = []
    for r in a.all_rows:
        if r.mode != "eager" or not has_time(r):
            continue
        base = r.case_id.replace(".eager", "", 1)
        graph = by_id.get(base)
        if graph is not None and graph.mode == "graph" and has_time(graph):
            pairs.append((graph, r))
    return pairs


def launch_lines(a: Analysis) -> list[str]:
    pairs = eager_pairs(a)
    if not pairs:
        if "eager" in a.modes:
            return ["The run timed eager rows but none has a CUDA-graph twin with a number."]
        return ["This run timed CUDA-graph replays only; `--modes graph eager` adds eager rows with "
                "their launches per call."]
    winners = set()
    for e in a.entries:
        for m in a.ms:
            for d in a.recipes:
                cell = a.cell(e, m, d)
                if cell.row is not None:
                    winners.add(cell.row.case_id)
    shown = [p for p in pairs if p[0].case_id in winners] or pairs
    shown.sort(key=lambda p: (p[0].kind, p[0].name, recipe_of(p[0]), p[0].m))
    rows = []
    for graph, eager in shown:
        overhead = (eager.median_us or 0.0) - (graph.median_us or 0.0)
        launches = "-" if eager.launches_per_call is None else f"{eager.launches_per_call:g}"
        rows.append([_what(graph), str(graph.m), _fmt(graph.median_us), _fmt(eager.median_us),
                     f"{overhead:+.2f}", f"{(eager.median_us or 0) / (graph.median_us or 1):.2f}x", launches])
    lines = [f"{len(pairs)} rows were timed both ways; below, the fastest backend of each table cell. "
             "eager - graph is what launching without a CUDA graph adds (CUPTI spans from the first "
             "kernel's start to the last one's end, so gaps between launches count); launches = GPU "
             "kernels, memsets and memcpys of one call (CUPTI activity records).", "",
             *_table(["row", "M", "graph us", "eager us", "eager - graph us", "eager / graph",
                      "launches per call"], rows)]
    no_count = {eager.reason for _, eager in pairs if eager.launches_per_call is None and eager.reason}
    lines += [f"- launches not counted: {why}" for why in sorted(no_count)[:LISTED]]
    return lines


def quality_lines(a: Analysis, level: int) -> list[str]:
    h = "#" * (level + 1)
    return [f"{h}# Spread of the timed iterations", "", *spread_lines(a), "",
            f"{h}# Correctness against a reference", "", *correctness_lines(a), "",
            f"{h}# Eager vs CUDA graph: launch overhead", "", *launch_lines(a), ""]


__all__ = ["correctness_lines", "eager_pairs", "launch_lines", "quality_lines", "relative_spread",
           "spread_lines"]
