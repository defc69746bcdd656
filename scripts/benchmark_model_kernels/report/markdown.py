"""The Markdown of report.md: every table and section, rendered from an `Analysis` (analysis.py).

In: one or several `Analysis` objects and the (title, file name) of figures already drawn. Out: lists
of Markdown lines: `workdir_section` (summary, header, warnings, per-step roll-up, per-module tables,
crossovers, figures, cells without a number) and `comparison_section` (several runs side by side);
`module_kind_table_markdown` is the table references/report.md carries. Nothing here computes a
number or touches a file.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Iterable, Sequence

from ..run.results import RESULTS_JSON
from ..vllm_rules.layers import KEPT_IN_BF16, kept_in_bf16
from .analysis import (
    BASELINE,
    BASELINE_BACKEND,
    KERNEL,
    MODULE_KIND_TABLE,
    MODULE_KINDS,
    MOE,
    OTHER,
    QUANT,
    RECIPE_LABELS,
    RECIPES,
    Analysis,
    Cell,
    Entry,
    Rollup,
    Verdict,
    backend_label,
    bases,
    has_time,
    rollup_variants,
    run_labels,
    speedup,
    summary_verdicts,
)

#: What the per-step roll-up leaves out; printed under every roll-up.
ROLLUP_EXCLUDES = (
    "attention kernels (prefill/decode attention, SSM/GDN scans), norms, activations outside fused "
    "kernels, rotary embeddings, sampling, communication (all-reduce, all-to-all), CUDA-graph/launch "
    "and scheduling overheads"
)

#: Table text of a module vLLM keeps in BF16 under a quantized recipe (vllm_rules/layers.py).
KEPT_TEXT = "BF16 (kept by vLLM)"


def module_kind_table_markdown() -> str:
    """MODULE_KIND_TABLE as Markdown (references/report.md carries it; a test keeps them equal)."""
    lines = ["| plan entry name | matches | roll-up kind |", "|---|---|---|"]
    for pattern, bucket in MODULE_KIND_TABLE:
        how = f"prefix `{pattern}*`" if pattern.endswith(".") else "whole name (a `[...]` suffix dropped)"
        lines.append(f"| `{pattern}` | {how} | {bucket} |")
    lines.append(f"| any MoE entry (kind `moe`) | always | {MOE} |")
    lines.append(f"| anything else | - | {OTHER} (shown as its own column, never dropped) |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Cells and tables


def fmt_us(us: float | None) -> str:
    """Microseconds with about 3 significant digits ("19.6", "2.41", "1234")."""
    if us is None:
        return "-"
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _md(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines


def _missing_text(c: Cell) -> str:
    return c.status  # the reason goes to the 'Cells without a number' list, keeping tables narrow


def _module_cell(e: Entry) -> str:
    text = f"{e.name} ({e.shape}) x{e.layers}"
    if e.padding:
        text += "; padded: " + "; ".join(e.padding)
    return text


def _quant_cell_text(c: Cell, base: Cell) -> str:
    if c.us is None:
        return _missing_text(c)
    sp = speedup(base, c)
    vs = ""
    if sp is not None and base.row is not None and base.row.backend != BASELINE_BACKEND:
        vs = f" vs {base.backend} bf16"
    return f"{fmt_us(c.us)} {c.backend} ({fmt_x(sp)}{vs})"


def _bf16_cell_text(best: Cell, base: Cell) -> str:
    if best.us is None:
        return _missing_text(best)
    text = f"{fmt_us(best.us)} {best.backend}"
    if base.row is not None and base.row is not best.row:
        text += f" ({base.backend} {fmt_us(base.us)})"
    return text


def _header_lines(a: Analysis) -> list[str]:
    env = a.results.get("environment") or {}
    settings = a.results.get("settings") or {}
    model = a.plan.model if a.plan is not None else None
    tp, ep = a.tp_ep
    versions = env.get("versions")
    if isinstance(versions, dict) and versions:
        versions_text = ", ".join(f"{k} {'unknown' if v is None else v}" for k, v in versions.items())
    else:
        versions_text = "unknown"
    gpu = env.get("gpu") if isinstance(env.get("gpu"), dict) else {}
    gpu_text = a.gpu + "".join(f", {label} {gpu[k]}" for k, label in (
        ("compute_capability", "compute capability"), ("sm_count", "SMs"), ("memory_gb", "GB"))
        if gpu.get(k) is not None)
    probe = env.get("timer_probe") if isinstance(env.get("timer_probe"), dict) else {}
    cmd = a.results.get("command")
    cmd_text = shlex.join(str(c) for c in cmd) if isinstance(cmd, list) and cmd else "unknown"
    timers = a.timers()
    timer_text = ", ".join(f"{t} ({n} row{'s' if n != 1 else ''})" for t, n in timers.items()) or "no ok rows"
    arch = (model.architecture if model is not None else "") or "unknown"
    layers = model.num_hidden_layers if model is not None else None
    facts = [
        ("Model", f"{a.model} ({arch}{f', {layers} layers' if layers else ''})"),
        ("TP / EP", f"{tp} / {ep}"),
        ("GPU", gpu_text),
        ("Versions", versions_text),
        ("Command", f"`{cmd_text}`"),
        ("Timer (ok rows)", timer_text),
        ("Timer probe", f"{probe.get('timer') or 'unknown'}"
         + (f" ({probe['warning']})" if probe.get("warning") else "")
         + (f" (error: {probe['error']})" if probe.get("error") else "") if probe else "not run"),
        ("Settings", ", ".join(f"{k}={v}" for k, v in settings.items()) or "unknown"),
        ("Date (UTC)", str(a.results.get("timestamp") or "unknown")),
        ("Rows", f"{len(a.rows)} ({sum(has_time(r) for r in a.rows)} with a number)"),
        ("Results", f"`{os.path.join(a.path, RESULTS_JSON) if a.path else RESULTS_JSON}`"),
    ]
    return _table(("", ""), [(k, v) for k, v in facts])


def _basis_title(a: Analysis, dtype: str, basis: str) -> str:
    label = RECIPE_LABELS.get(dtype, dtype)
    if basis == KERNEL:
        return f"{label}, kernel only (activations already quantized)"
    if a.has_quant_rows(dtype):
        return f"{label}, kernel + activation quantization (BF16 activations in)"
    return f"{label}, kernel only (this run measured no activation-quant time for {label})"




def _rollup_text(r: Rollup, short: bool = False) -> str:
    if r.n_modules and len(r.missing) == r.n_modules:
        return "no number" if short else f"no number (all {r.n_modules} modules missing)"
    text = fmt_us(r.total_us)
    if not r.complete:
        text += (f" (incomplete: {len(r.missing)}/{r.n_modules} missing)" if short
                 else f" (incomplete: {len(r.missing)} of {r.n_modules} modules missing)")
    return text




def _rollup_lines(a: Analysis) -> list[str]:
    lines = [
        "Sum over the plan of (best time x per-step count), in microseconds: the GEMM + fused-MoE "
        "kernel time of ONE forward step on ONE rank at each M. It is NOT end-to-end latency: it "
        f"leaves out {ROLLUP_EXCLUDES}. A total marked incomplete is the partial sum over the "
        "modules that have a number; the missing modules are listed below the tables. Speed-ups "
        "are against the BF16 baseline total and only shown when both totals are complete. "
        f"Under FP8 and NVFP4 the {', '.join(KEPT_IN_BF16)} GEMMs count with their BF16 baseline "
        "time, because vLLM keeps them unquantized.",
        "",
    ]
    variants = rollup_variants(a)
    dropped = [RECIPE_LABELS.get(d, d) for d in a.recipes if not a.has_number(d)]
    body, missing_notes = [], []
    for recipe, basis, title in variants:
        row = [title]
        for m in a.ms:
            base = a.rollup(BASELINE, m)
            r = a.rollup(recipe, m, basis)
            sp = base.total_us / r.total_us if (r.complete and base.complete and r.total_us) else None
            shown = sp is not None and recipe != BASELINE
            row.append(_rollup_text(r) + (f" ({fmt_x(sp)})" if shown else ""))
            if r.missing and len(r.missing) < r.n_modules:
                missing_notes.append(f"- {title}, M={m}: missing {', '.join(r.missing)}")
        body.append(row)
    lines += ["Totals (us per step; in parentheses the speed-up vs the BF16 baseline total):", ""]
    lines += _table(["recipe", *[f"M={m}" for m in a.ms]], body)
    if dropped:
        lines += ["", f"Not in the roll-up: {', '.join(dropped)} (no module has a number at any M)."]

    kinds = [k for k in MODULE_KINDS if any(e.module_kind == k for e in a.entries)]
    split = []
    for m in a.ms:
        for recipe, basis, title in variants:
            r = a.rollup(recipe, m, basis)
            cells = []
            for k in kinds:
                of_kind = [e.name for e in a.entries if e.module_kind == k]
                n_missing = sum(name in r.missing for name in of_kind)
                if n_missing == len(of_kind):
                    cells.append("missing")
                else:
                    cells.append(fmt_us(r.by_kind.get(k)) + ("*" if n_missing else ""))
            split.append([str(m), title, *cells])
    lines += ["", "Split by module kind (us per step; `*`: partial, a module of this kind has no number):", ""]
    lines += _table(["M", "recipe", *kinds], split)
    if missing_notes:
        lines += ["", "Missing modules per incomplete total:", "", *missing_notes]
    return lines


def _module_tables(a: Analysis) -> list[str]:
    lines: list[str] = []
    header = ["module (logical shape) x per-step count", *[f"M={m}" for m in a.ms]]
    lines += [
        "### BF16 (best backend; in parentheses the baseline when it is not the best)", "",
        "Cells: time in us and the fastest backend.", "",
    ]
    body = []
    for e in a.entries:
        body.append([_module_cell(e), *[_bf16_cell_text(a.cell(e, m, "bf16", KERNEL), a.baseline(e, m))
                                        for m in a.ms]])
    lines += _table(header, body) + [""]
    for d in a.quantized:
        if not a.has_number(d):
            n = {st: sum(r.dtype == d and r.status == st for r in a.rows) for st in ("unsupported", "failed")}
            lines += [f"### {RECIPE_LABELS.get(d, d)}", "",
                      f"No cell has a number ({n['unsupported']} unsupported, {n['failed']} failed rows); "
                      "the reasons are under 'Cells without a number'.", ""]
            continue
        for basis in bases(a, d):
            lines += [f"### {_basis_title(a, d, basis)}", "",
                      f"Cells: best time in us, its backend, (speed-up vs {BASELINE_BACKEND} bf16; another "
                      "baseline is named when torch has no number).", ""]
            body = []
            for e in a.entries:
                if kept_in_bf16(e.name) and not a.has_rows(e, d):
                    body.append([_module_cell(e), *[KEPT_TEXT] * len(a.ms)])
                    continue
                body.append([_module_cell(e), *[_quant_cell_text(a.cell(e, m, d, basis), a.baseline(e, m))
                                                for m in a.ms]])
            lines += _table(header, body) + [""]
    return lines


def _crossover_lines(a: Analysis) -> list[str]:
    if not a.quantized or "bf16" not in a.recipes:
        return ["No quantized recipe and BF16 baseline both in these results: no crossovers."]
    cols = [(d, basis) for d in a.quantized for basis in bases(a, d)]
    header = ["module"]
    for d, basis in cols:
        label = RECIPE_LABELS.get(d, d)
        how = "+quant" if basis == QUANT and a.has_quant_rows(d) else "kernel"
        header.append(f"{label} {how} beats BF16 from")
    body = [[f"{e.name} ({e.shape})",
             *[KEPT_TEXT if kept_in_bf16(e.name) and not a.has_rows(e, d) else a.crossover(e, d, b).text()
               for d, b in cols]] for e in a.entries]
    return [
        f"Smallest M in the sweep at which the recipe's best time beats the BF16 baseline "
        f"({BASELINE_BACKEND} where it ran, else the best BF16 backend).",
        "",
        *_table(header, body),
    ]


def _missing_cells_lines(a: Analysis) -> list[str]:
    """Every row without a number, grouped by identical (status, reason), then by case across M."""
    groups: dict[tuple[str, str], dict[str, list[int]]] = {}
    for r in a.rows:
        if has_time(r):
            continue
        status = r.status if r.status != "ok" else "failed"
        why = r.reason or ("ok row without a time" if r.status == "ok" else "no reason recorded")
        what = f"{r.name} {r.dtype} {backend_label(r)}{' +quant' if r.with_quant else ''}"
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


# ----------------------------------------------------------------------------------------------
# Summary: the answer first (per-step totals per recipe and the fastest recipe per M)


def _verdict_text(v: Verdict) -> str:
    if not v.fastest:
        return "no complete total"
    if v.fastest.startswith("BF16 baseline"):
        return "BF16 baseline"
    return f"**{v.fastest}** ({fmt_x(v.speedup)} vs baseline)" if v.speedup else f"**{v.fastest}**"


def _common_reason(a: Analysis, dtype: str) -> str:
    reasons: dict[str, int] = {}
    for r in a.rows:
        if r.dtype == dtype and not has_time(r) and r.reason:
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
    return max(reasons, key=reasons.get) if reasons else ""


def summary_lines(a: Analysis) -> list[str]:
    verdicts = summary_verdicts(a)
    if not verdicts:
        return ["No row has an M: nothing to summarize."]
    titles = [t for t, _ in verdicts[0].totals]
    body = []
    for v in verdicts:
        base = dict(v.totals).get(titles[0])
        cells = []
        for title, total in v.totals:
            if total is None:
                cells.append("incomplete")
            elif title == titles[0] or not base:
                cells.append(fmt_us(total))
            else:
                cells.append(f"{fmt_us(total)} ({fmt_x(base / total)})")
        body.append([str(v.m), *cells, _verdict_text(v)])
    gpu = a.gpu if a.gpu != "unknown" else "an unknown GPU"
    lines = [
        f"GEMM + fused-MoE kernel time of one forward step on one rank of {gpu}, in us (lower is "
        "better), and in parentheses the speed-up over the BF16 baseline. Kernel time only: no "
        "attention, communication or launch gaps, so not a serving latency.",
        "",
        *_table(["M (tokens per rank)", *titles, "fastest"], body),
        "",
        f"- **BF16 baseline** = the `{BASELINE_BACKEND}` backend (PyTorch: `F.linear` on cuBLAS for "
        "GEMMs, grouped GEMMs for MoE), i.e. vLLM's unquantized path; where it has no number, the best "
        "BF16 backend. **best** = the fastest measured backend per module and M. **+quant** adds the "
        "measured activation quantization, which vLLM runs on every call.",
    ]
    if any(kept_in_bf16(e.name) for e in a.entries) and a.quantized:
        kept = ", ".join(e.name for e in a.entries if kept_in_bf16(e.name))
        lines.append(f"- Quantized totals count {kept} at the BF16 baseline time: vLLM keeps them "
                     "unquantized.")
    for d in a.quantized:
        if not a.has_number(d):
            why = _common_reason(a, d)
            lines.append(f"- {RECIPE_LABELS.get(d, d)}: no number on this GPU"
                         + (f" (e.g. {why})" if why else "") + ".")
    unranked = sorted({t for v in verdicts for t in v.not_ranked})
    if unranked:
        lines.append(f"- Not ranked where incomplete (a module has no number): {', '.join(unranked)}; "
                     "see the per-step roll-up below.")
    failed = sum(r.status == "failed" for r in a.rows)
    if failed:
        lines.append(f"- **{failed} rows failed**: see 'Cells without a number'.")
    return lines


# ----------------------------------------------------------------------------------------------
# Sections


def workdir_section(a: Analysis, figures: Sequence[tuple[str, str]], level: int = 1) -> list[str]:
    """The Markdown of one workdir; `figures` are (title, file name relative to report.md)."""
    h = "#" * level
    lines = [f"{h} Kernel benchmark: {a.label}", ""]
    if a.rows:
        lines += [f"{h}# Summary", ""] + summary_lines(a) + [""]
    lines += _header_lines(a) + [""]
    warns = a.warnings()
    lines += [f"{h}# Warnings", ""] + ([f"- {w}" for w in warns] if warns else ["None."]) + [""]
    if not a.rows:
        return lines + ["results.json has no rows: nothing was measured.", ""]
    lines += [f"{h}# Per-step roll-up (GEMM + MoE kernels only)", ""] + _rollup_lines(a) + [""]
    lines += [f"{h}# Per-module times by M", ""]
    lines += [
        "Times are medians in microseconds, one rank. Shapes are per-rank logical (what vLLM's layer "
        "has); a backend that pads runs the physical shape listed after 'padded'. A cell without a "
        "number says failed / unsupported / not measured; the reasons are under 'Cells without a "
        "number'.",
        "",
    ]
    lines += _module_tables(a)
    lines += [f"{h}# Crossovers", ""] + _crossover_lines(a) + [""]
    if figures:
        lines += [f"{h}# Figures", ""]
        for title, fname in figures:
            lines += [f"**{title}**", "", f"![{title}]({fname})", ""]
    lines += [f"{h}# Cells without a number", ""] + _missing_cells_lines(a) + [""]
    return lines


def comparison_section(analyses: Sequence[Analysis], figures: Sequence[tuple[str, str]]) -> list[str]:
    """Per-step roll-up totals of several workdirs side by side."""
    lines = [
        "## Comparison: per-step GEMM + MoE kernel time (us, one rank)", "",
        "Each cell is the per-step roll-up total of one run (see each run's section for the split "
        "and what is left out). Under expert parallelism an MoE row's M is the tokens on ONE rank, "
        "so runs with different EP are not the same global batch at the same M. "
        "A run whose GPU differs is named in the label.", "",
    ]
    gpus = {a.gpu for a in analyses}
    labels = run_labels(analyses)
    ms = sorted({m for a in analyses for m in a.ms})
    present = [d for d in RECIPES if any(d in a.recipes for a in analyses)]
    present += sorted({d for a in analyses for d in a.recipes} - set(present))
    recipes = [d for d in present if any(a.has_number(d) for a in analyses)]
    if len(recipes) < len(present):
        lines += ["Not compared (no run has a number): "
                  + ", ".join(RECIPE_LABELS.get(d, d) for d in present if d not in recipes) + ".", ""]
    for d in recipes:
        quant = ", +quant where measured" if d != "bf16" else ""
        lines += [f"### {RECIPE_LABELS.get(d, d)} (best backend{quant})", ""]
        body = []
        for i, (a, label) in enumerate(zip(analyses, labels, strict=True), 1):
            row = [f"#{i} {label}" + (f" [{a.gpu}]" if len(gpus) > 1 else "")]
            for m in ms:
                if d not in a.recipes or m not in a.ms:
                    row.append("not measured")
                else:
                    row.append(_rollup_text(a.rollup(d, m, QUANT), short=True))
            body.append(row)
        lines += _table(["run", *[f"M={m}" for m in ms]], body) + [""]
    for title, fname in figures:
        lines += [f"**{title}**", "", f"![{title}]({fname})", ""]
    return lines


__all__ = [
    "ROLLUP_EXCLUDES", "KEPT_TEXT", "module_kind_table_markdown", "fmt_us", "fmt_x", "summary_lines",
    "workdir_section", "comparison_section",
]
