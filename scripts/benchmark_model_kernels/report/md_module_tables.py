"""The per-module sections of report.md: module tables by M, crossovers, cells without a number.

In: an `Analysis` (its entries and cells per M, recipe and basis). Out: Markdown lines: a BF16 table
(best backend, the baseline beside it), per quantized recipe and basis a table of best times with
their speed-up over the BF16 reference, the smallest M at which each recipe beats BF16, and every
row without a number grouped by reason. Nothing here computes a number or touches a file.
"""

from __future__ import annotations

from .analysis import (
    BASELINE_BACKEND,
    KERNEL,
    QUANT,
    Analysis,
    Cell,
    backend_label,
    has_time,
    recipe_label,
    recipe_of,
    speedup,
    vllm_mark,
)
from .md_text import fmt_us, fmt_x, table
from .plan_entries import Entry
from .recipe_totals import bases

#: Table text of a module vLLM keeps in BF16 under a quantized recipe (vllm_rules/layers.py).
KEPT_TEXT = "BF16 (kept by vLLM)"

#: The BF16 cell a quantized module cell is compared with (Analysis.reference).
REFERENCE_TEXT = ("BF16 vLLM default where it has a number, else the BF16 baseline (torch where it "
                  "ran, else the best BF16 backend)")


def _missing_text(c: Cell) -> str:
    return c.status  # the reason goes to the 'Cells without a number' list, keeping tables narrow


def _shape_text(e: Entry) -> str:
    """The logical shape; an MoE layer that runs more tokens than M says how many."""
    return e.shape + (f", num_tokens={e.tokens_per_m}M" if e.tokens_per_m > 1 else "")


def _module_cell(e: Entry) -> str:
    text = f"{e.name} ({_shape_text(e)}) x{e.layers}"
    if e.padding:
        text += "; padded: " + "; ".join(e.padding)
    return text


def _default_note(winner: Cell, default: Cell) -> str:
    """"; vLLM default triton 15.1" when vLLM's default has a number but another row won."""
    if default.us is None or default.row is winner.row:
        return ""
    return f"; vLLM default {default.backend} {fmt_us(default.us)}"


def _quant_cell_text(c: Cell, ref: Cell, default: Cell) -> str:
    if c.us is None:
        return _missing_text(c)
    sp = speedup(ref, c)
    vs = ""
    if sp is not None and ref.row is not None and ref.backend != BASELINE_BACKEND:
        vs = f" vs {ref.backend} bf16"
    return f"{fmt_us(c.us)} {c.backend}{vllm_mark(c.row)} ({fmt_x(sp)}{vs}){_default_note(c, default)}"


def _bf16_cell_text(best: Cell, base: Cell, default: Cell) -> str:
    if best.us is None:
        return _missing_text(best)
    text = f"{fmt_us(best.us)} {best.backend}{vllm_mark(best.row)}"
    if base.row is not None and base.row is not best.row and base.row is not default.row:
        text += f" ({base.backend} {fmt_us(base.us)})"
    return text + _default_note(best, default)


def _basis_title(a: Analysis, recipe: str, basis: str) -> str:
    label = a.recipe_title(recipe)
    if basis == KERNEL:
        return f"{label}, kernel only (activations already quantized)"
    if a.has_quant_rows(recipe):
        return f"{label}, kernel + activation quantization (BF16 activations in)"
    return f"{label}, kernel only (this run measured no activation-quant time for {recipe_label(recipe)})"


def _no_number_lines(a: Analysis, recipe: str) -> list[str]:
    n = {st: sum(recipe_of(r) == recipe and r.status == st for r in a.rows) for st in ("unsupported", "failed")}
    return [f"### {a.recipe_title(recipe)}", "",
            f"No cell has a number ({n['unsupported']} unsupported, {n['failed']} failed rows); "
            "the reasons are under 'Cells without a number'.", ""]


def module_tables(a: Analysis) -> list[str]:
    lines: list[str] = []
    header = ["module (logical shape) x per-step count", *[f"M={m}" for m in a.ms]]
    lines += [
        "### BF16 (best backend; in parentheses the baseline when it is neither the best nor vLLM's "
        "default)", "",
        "Cells: time in us and the fastest backend.", "",
    ]
    body = []
    for e in a.entries:
        body.append([_module_cell(e), *[_bf16_cell_text(a.cell(e, m, "bf16", KERNEL), a.baseline(e, m),
                                                        a.default_cell(e, m, "bf16", KERNEL))
                                        for m in a.ms]])
    lines += table(header, body) + [""]
    for d in a.quantized:
        if not a.has_number(d):
            lines += _no_number_lines(a, d)
            continue
        for basis in bases(a, d):
            lines += [f"### {_basis_title(a, d, basis)}", "",
                      f"Cells: best time in us, its backend, (speed-up vs the {REFERENCE_TEXT}; named "
                      f"when it is not the {BASELINE_BACKEND} GEMM).", ""]
            body = []
            for e in a.entries:
                if a.kept_in_bf16(e.name, d) and not a.has_rows(e, d):
                    body.append([_module_cell(e), *[KEPT_TEXT] * len(a.ms)])
                    continue
                body.append([_module_cell(e), *[_quant_cell_text(a.cell(e, m, d, basis), a.reference(e, m),
                                                                 a.default_cell(e, m, d, basis))
                                                for m in a.ms]])
            lines += table(header, body) + [""]
    return lines


def crossover_lines(a: Analysis) -> list[str]:
    if not a.quantized or "bf16" not in a.recipes:
        return ["No quantized recipe and BF16 baseline both in these results: no crossovers."]
    cols = [(d, basis) for d in a.quantized for basis in bases(a, d)]
    header = ["module"]
    for d, basis in cols:
        how = "+quant" if basis == QUANT and a.has_quant_rows(d) else "kernel"
        header.append(f"{a.recipe_title(d)} {how} beats BF16 from")
    body = [[f"{e.name} ({_shape_text(e)})",
             *[KEPT_TEXT if a.kept_in_bf16(e.name, d) and not a.has_rows(e, d) else a.crossover(e, d, b).text()
               for d, b in cols]] for e in a.entries]
    return [
        f"Smallest M in the sweep at which the recipe's best time beats the {REFERENCE_TEXT}.",
        "",
        *table(header, body),
    ]


def missing_cells_lines(a: Analysis) -> list[str]:
    """Every row without a number, grouped by identical (status, reason), then by case across M."""
    groups: dict[tuple[str, str], dict[str, list[int]]] = {}
    for r in a.rows:
        if has_time(r):
            continue
        status = r.status if r.status != "ok" else "failed"
        why = r.reason or ("ok row without a time" if r.status == "ok" else "no reason recorded")
        what = f"{r.name} {recipe_label(recipe_of(r))} {backend_label(r)}{' +quant' if r.with_quant else ''}"
        groups.setdefault((status, why.strip()), {}).setdefault(what, []).append(r.m)
    if not groups:
        return ["Every row has a number."]
    lines = []
    order = sorted(groups.items(), key=lambda kv: (kv[0][0] != "failed", kv[0][1]))
    for (status, why), cases in order:
        n = sum(len(ms) for ms in cases.values())
        where = [f"{what} at M={','.join(map(str, sorted(ms)))}" for what, ms in cases.items()]
        shown = "; ".join(where[:10]) + (f"; ... ({len(where)} cases in all)" if len(where) > 10 else "")
        lines.append(f"- **{status}** ({n} row{'s' if n != 1 else ''}): {why}  \n  {shown}")
    return lines


__all__ = ["KEPT_TEXT", "REFERENCE_TEXT", "module_tables", "crossover_lines", "missing_cells_lines"]
