"""report.md of a deployment: the answer first, then every layout x recipe, the communication of
each layout itemised, the layouts refused, the Pareto figure and what is measured or modelled.

In: a `Deployment` (output.py). Out: report.md and fig_pareto_ctx<context>.png in the deployment's
folder (matplotlib imported only to draw). Nothing here computes a time.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from ..core.files import write_text_atomic
from ..report.cells import recipe_label
from ..report.md_text import fmt_us
from ..report.md_text import table as md_table
from .output import MEASURED_TEXT, MODELLED_TEXT, NOT_MODELLED, SCOPE, Deployment
from .view import BASIS_WORDS, Answer, Quantity, StepCell, answers

REPORT_MD = "report.md"
SAME_RANKING = ("At one B on the same G GPUs every layout serves the same tokens per step, so the most "
                "tokens/s per GPU is also the shortest step (the latency answer).")


def fmt_rate(x: float | None) -> str:
    """Tokens/s: whole numbers with separators, one decimal below 100."""
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def fmt_share(q: Quantity) -> str:
    return "-" if q.value is None else f"{100 * q.value:.0f}%"


def pick_text(c: StepCell) -> str:
    """"TP=1 DP=8 EP, FP8 per-tensor"."""
    return f"{c.label}, {recipe_label(c.recipe_key)}"


def answer_line(a: Answer) -> str:
    """One answer of the report's first section."""
    head = f"- **B={a.batch}, context {a.context}**: "
    best = a.best
    if best is None:
        return head + f"no answer: {a.reason}"
    text = (head + f"**{pick_text(best)}**: {fmt_us(best.step.value)} us per step, "
            f"{fmt_rate(best.per_gpu.value)} tokens/s per GPU, {fmt_rate(best.per_sequence.value)} tokens/s "
            f"per sequence, communication {fmt_share(best.comm_share)} of the step")
    runner = a.runner_up
    if runner is not None and runner.step.value and best.step.value:
        slower = 100 * (runner.step.value / best.step.value - 1)
        text += f"; next: {pick_text(runner)} ({slower:.0f}% longer step)"
    return text


def _cell_text(q: Quantity, fmt: Callable[[float | None], str] = fmt_us) -> str:
    return fmt(q.value) if q.value is not None else "-"


def _step_text(c: StepCell) -> str:
    if not c.fits:
        return "does not fit"
    return fmt_us(c.step.value) if c.step.value is not None else "no number"


def layout_table(cells: Sequence[StepCell]) -> list[str]:
    """Every planned layout x recipe x B x context: step, rates, fit, communication share (refused
    layouts have their own section)."""
    header = ["layout", "recipe", "B", "context", "M (MoE tokens)", "fits", "step (us)", "tokens/s",
              "tokens/s per GPU", "tokens/s per sequence", "communication", "MoE imbalance"]
    rows = []
    for c in (c for c in cells if not c.refused):
        imbalance = f"{c.imbalance.value:.2f}x" if c.imbalance.value is not None else "-"
        rows.append([c.label, recipe_label(c.recipe_key), str(c.batch), str(c.context), f"{c.m} ({c.moe_tokens})",
                     "yes" if c.fits else "no", _step_text(c), _cell_text(c.tokens_per_s, fmt_rate),
                     _cell_text(c.per_gpu, fmt_rate), _cell_text(c.per_sequence, fmt_rate), fmt_share(c.comm_share),
                     imbalance])
    return md_table(header, rows)


def _no_number_lines(cells: Sequence[StepCell]) -> list[str]:
    """Why fitting cells have no step time, each reason once."""
    seen: dict[str, list[str]] = {}
    for c in cells:
        if c.fits and c.step.value is None:
            seen.setdefault(c.step.reason, []).append(f"{c.label} {recipe_label(c.recipe_key)} B={c.batch}")
    return [f"- {', '.join(where[:4])}{' and more' if len(where) > 4 else ''}: {why}" for why, where in seen.items()]


def comm_lines(dep: Deployment) -> list[str]:
    """Per planned layout, its collectives per step at each B (first recipe, first context)."""
    lines = []
    recipe, context = dep.work.recipes[0], dep.work.contexts[0]
    for lp in dep.layouts:
        if not lp.runnable:
            continue
        mine = [c for c in dep.cells if c.layout == lp.name and c.recipe == recipe and c.context == context]
        names = list(dict.fromkeys(x.name for c in mine for x in c.communication))
        if not mine:
            continue
        lines += [f"### {lp.label}", ""]
        if not names:
            why = mine[0].comm.source or mine[0].comm.reason
            lines += [why[:1].upper() + why[1:] + ".", ""]
            continue
        header = ["collective", "op", "group", "calls per step", *[f"B={c.batch} (M={c.m})" for c in mine]]
        body = []
        for name in names:
            first = next(x for c in mine for x in c.communication if x.name == name)
            row = [name, first.op, first.group, str(first.per_step)]
            for c in mine:
                x = next((x for x in c.communication if x.name == name), None)
                row.append("-" if x is None else f"{fmt_us(x.total.value)} us ({x.bytes_per_rank:,} B)")
            body.append(row)
        body.append(["total", "", "", "", *[_cell_text(c.comm) + " us" for c in mine]])
        lines += md_table(header, body) + [""]
        sources = sorted({x.time.source or x.time.reason for c in mine for x in c.communication})
        lines += [f"Source: {'; '.join(sources)}.", ""]
    return lines


def refused_lines(dep: Deployment) -> list[str]:
    refused = [lp for lp in dep.layouts if not lp.runnable]
    if not refused:
        return ["Every layout of TP x DP = G is planned."]
    return md_table(["layout", "kind", "why"], [[lp.label, lp.refusal_kind, lp.refusal] for lp in refused])


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (higher is better), by x."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    front, best_y = [], -1.0
    for i in order:
        if points[i][1] > best_y:
            front.append(i)
            best_y = points[i][1]
    return sorted(front, key=lambda i: points[i][0])


def pareto_figure(dep: Deployment, context: int, folder: str) -> str | None:
    """fig_pareto_ctx<context>.png: tokens/s per GPU against tokens/s per sequence, one point per
    layout, recipe and B that fits and has a step time; the file name, or None without points."""
    cells = [c for c in dep.cells if c.context == context and c.has_number and c.per_gpu.value and c.per_sequence.value]
    if not cells:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(dict.fromkeys(c.label for c in cells))
    recipes = list(dict.fromkeys(c.recipe_key for c in cells))
    markers = "o^sDvP*X"
    colors = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(8, 5.5))
    points = [(c.per_sequence.value or 0.0, c.per_gpu.value or 0.0) for c in cells]
    front = pareto_front(points)
    for i, c in enumerate(cells):
        x, y = points[i]
        ax.scatter([x], [y], color=colors(layouts.index(c.label) % 10), marker=markers[recipes.index(c.recipe_key) % 8],
                   s=46, zorder=3)
        if i in front:  # the points off the front cluster by B; the front's carry its label
            ax.annotate(f"B={c.batch}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
    ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="#444444", lw=1, ls="--",
            zorder=2, label="Pareto front")
    for i, label in enumerate(layouts):
        ax.scatter([], [], color=colors(i % 10), marker="o", label=label)
    for i, key in enumerate(recipes):
        ax.scatter([], [], color="#777777", marker=markers[i % 8], label=recipe_label(key))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens/s per sequence (one decode step; B labels the Pareto front's points)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(f"{dep.model} on {dep.cluster.label}, context {context}: one decode step per layout and recipe",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    name = f"fig_pareto_ctx{context}.png"
    fig.tight_layout()
    fig.savefig(os.path.join(folder, name), dpi=110)
    plt.close(fig)
    return name


def report_lines(dep: Deployment, figures: Sequence[tuple[int, str]]) -> list[str]:
    work = dep.work
    lines = [f"# Deployment: {dep.model} on {dep.cluster.label}", "", "## Answer", "",
             f"Best layout and recipe per global batch B (concurrent sequences) and context length, by "
             f"tokens/s per GPU: {SCOPE}. {SAME_RANKING}", ""]
    lines += [answer_line(a) for a in answers(dep.cells, work)]
    lines += ["", "## Every layout and recipe", "",
              f"Per layout (TP x DP = {dep.cluster.count}), recipe, B and context: M = ceil(B/DP) tokens per rank "
              "(the MoE layer runs M x DP), whether one rank holds the recipe's weights beside its K/V "
              "(references/memory.md), the step time, tokens/s (total, per GPU, per sequence), the share of the "
              "step spent in communication, and the MoE imbalance of the busiest expert-parallel rank under "
              f"routing `{work.routing_text}`.", ""]
    lines += layout_table(dep.cells)
    missing = _no_number_lines(dep.cells)
    if missing:
        lines += ["", "Cells that fit but have no step time:", "", *missing]
    lines += ["", "## Layouts refused or not planned", "", *refused_lines(dep), "",
              f"## Communication per step (recipe {work.recipes[0]}, context {work.contexts[0]})", ""]
    lines += comm_lines(dep)
    lines += ["## Pareto: tokens/s per GPU against tokens/s per sequence", ""]
    if figures:
        for context, name in figures:
            lines += [f"![context {context}]({name})", ""]
    else:
        lines += ["No figure: no cell fits and has a step time.", ""]
    lines += ["## What is measured and what is modelled", "",
              f"- {MEASURED_TEXT}; per module: {BASIS_WORDS.get(work.basis, work.basis)}.",
              f"- {MODELLED_TEXT}.",
              "- Communication sources, in order of preference: " + ("; ".join(dep.comm_sources) or "none") + ".",
              f"- Routing `{work.routing_text}`: under expert parallelism the step waits for the EP rank with the "
              "most token-expert pairs; its MoE time is the measured (uniform) time scaled by those pairs over "
              "the mean, a linear model that is exact where the kernel is compute-bound and errs high where "
              "it is bound by reading expert weights (small M).",
              f"- K/V cache {work.kv_dtype}; vLLM's all2all backend `{dep.all2all_backend}` for the MoE dispatch "
              "and combine.",
              f"- Scope: {SCOPE}. {NOT_MODELLED[0].upper() + NOT_MODELLED[1:]}.", ""]
    if dep.workdirs:
        lines += ["## Per-layout runs", "",
                  "Each layout's per-rank cases were timed into its own workdir (results.json; "
                  "`scripts/report.py <workdir>` renders its kernel report):", ""]
        labels = {lp.name: lp.label for lp in dep.layouts}
        lines += [f"- {labels.get(name, name)}: `{path}`" for name, path in dep.workdirs.items()] + [""]
    if dep.command:
        lines += ["Command: `" + " ".join(dep.command) + "`", ""]
    return lines


def write_report(dep: Deployment, folder: str) -> str:
    """report.md and its figures in `folder`; the report's path."""
    figures = [(ctx, name) for ctx in dep.work.contexts if (name := pareto_figure(dep, ctx, folder))]
    path = os.path.join(folder, REPORT_MD)
    write_text_atomic(path, "\n".join(report_lines(dep, figures)) + "\n")
    return path


__all__ = ["REPORT_MD", "SAME_RANKING", "fmt_rate", "answer_line", "layout_table", "comm_lines", "refused_lines",
           "pareto_front", "pareto_figure", "report_lines", "write_report"]
