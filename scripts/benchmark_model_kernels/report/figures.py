"""PNG figures of the report (matplotlib, Agg backend), drawn only from an `Analysis` (analysis.py).

In: one or several Analyses and the folder to draw into. Out: fig_*.png files there, and for each
[(title, file name)] for report.md; nothing is drawn when there is nothing to draw. One workdir:
kernel time vs M per module (log-log, one line per backend; at most PANELS_PER_FIGURE panels per
PNG), a roofline per recipe (each FP8 scheme its own panel), and stacked bars of the per-step
roll-up (vLLM default and best per recipe). Several workdirs (a model-config sweep, e.g.
`benchmark_model.py A B C --ms 64`): grouped bars of the per-step totals per M, with their p10-p90
spread, and grouped bars of each recipe's speed-up over the run's reference per model. report.py
draws a report's figures side by side in forked processes (side_by_side.py), the same files.
"""

from __future__ import annotations

import io
import math
import os
import textwrap
from typing import Callable, Sequence

from ..core.files import write_bytes_atomic
from .analysis import (
    ATTN,
    BASELINE,
    BASELINE_BACKEND,
    LM_HEAD,
    MLP,
    MODULE_KINDS,
    MOE,
    OTHER,
    QUANT,
    RECIPES,
    ROUTER,
    VLLM,
    Analysis,
    backend_label,
    has_time,
    recipe_dtype,
    recipe_label,
    recipe_of,
)
from .recipe_totals import rollup_variants, summary_reference
from .roofline_peaks import roofline_peaks
from .run_scale import RunScale

PANELS_PER_FIGURE = 12
DPI = 110
#: Line style per recipe (each FP8 scheme its own dash); colours go per backend so a backend reads
#: the same in every panel.
RECIPE_STYLE: dict[str, object] = {"bf16": "-", "fp8.per_tensor": "--", "fp8.per_token": (0, (6, 2, 1, 2)),
                                   "fp8.block128": (0, (4, 1, 1, 1, 1, 1)), "nvfp4": ":"}
KIND_COLORS = {ATTN: "#4C72B0", MLP: "#55A868", MOE: "#C44E52", ROUTER: "#8172B2", LM_HEAD: "#CCB974", OTHER: "#777777"}
RECIPE_COLORS = {BASELINE: "#999999", "bf16": "#4C72B0", "fp8.per_tensor": "#DD8452",
                 "fp8.per_token": "#C44E52", "fp8.block128": "#8C613C", "nvfp4": "#55A868"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _log_m_axis(ax, ms: Sequence[int]) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(ms)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(m) for m in ms], fontsize=8)
    ax.set_xlim(min(ms) / 1.4, max(ms) * 1.4)  # the same M range in every panel


def _grid(n: int) -> tuple[int, int]:
    cols = min(4, math.ceil(math.sqrt(n)))
    return math.ceil(n / cols), cols


def _series_key(row) -> tuple[str, str, bool]:
    return (recipe_of(row), backend_label(row), bool(row.with_quant))


def _series_label(key: tuple[str, str, bool]) -> str:
    recipe, backend, quant = key
    return f"{recipe_label(recipe)} {backend}{' +quant' if quant else ''}"


def time_vs_m(a: Analysis, out_dir: str, prefix: str) -> list[tuple[str, str]]:
    """Kernel time vs M, one panel per module, one line per (recipe, backend, +quant)."""
    plt = _plt()
    from matplotlib.ticker import FuncFormatter

    entries = [e for e in a.entries if any(has_time(r) for r in a.rows if (r.kind, r.name) == e.key)]
    if not entries:
        return []
    keys = sorted({_series_key(r) for r in a.rows if has_time(r)},
                  key=lambda k: (list(RECIPE_STYLE).index(k[0]) if k[0] in RECIPE_STYLE else 9, k[1], k[2]))
    # One hue per backend (the same in every recipe, which the line style tells apart); the +quant
    # twin takes the light shade of its backend's hue (tab20 pairs dark/light).
    cmap = plt.get_cmap("tab20")
    backends = sorted({k[1] for k in keys})
    colors = {k: cmap((2 * backends.index(k[1]) + (1 if k[2] else 0)) % cmap.N) for k in keys}
    figs = []
    chunks = [entries[i:i + PANELS_PER_FIGURE] for i in range(0, len(entries), PANELS_PER_FIGURE)]
    for part, chunk in enumerate(chunks, 1):
        nrows, ncols = _grid(len(chunk))
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.3 * ncols, 3.4 * nrows + 1.2),
                                 squeeze=False, layout="constrained")
        handles = {}
        for ax, e in zip(axes.flat, chunk, strict=False):
            for key in keys:
                pts = sorted((r.m, r.median_us) for r in a.rows
                             if (r.kind, r.name) == e.key and has_time(r) and _series_key(r) == key)
                if not pts:
                    continue
                (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=RECIPE_STYLE.get(key[0], "-."),
                                  marker="x" if key[2] else "o", markersize=4, color=colors[key], linewidth=1.4)
                handles.setdefault(key, line)
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()
            narrow = hi / lo < 10  # less than a decade: label every minor tick, else only 2s and 5s
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(
                lambda v, _, narrow=narrow: f"{v:g}" if narrow or f"{v:g}"[0] in "25" else ""))
            _log_m_axis(ax, a.ms)
            tokens = f"  num_tokens={e.tokens_per_m}M" if e.tokens_per_m > 1 else ""
            ax.set_title(textwrap.fill(f"{e.name}  {e.shape}{tokens}  x{e.layers}", 44), fontsize=9)
            ax.set_xlabel("M (tokens)", fontsize=8)
            ax.set_ylabel("median time (us)", fontsize=8)
            ax.tick_params(axis="y", labelsize=8)
            ax.grid(True, which="both", alpha=0.3)
        _hide_unused(axes, len(chunk))
        ordered = [k for k in keys if k in handles]
        labels = [_series_label(k) for k in ordered]
        fig.legend([handles[k] for k in ordered], labels, loc="outside lower center",
                   ncol=_legend_columns(fig, labels), fontsize=8, frameon=False)
        figs.append(_save_part(fig, out_dir, f"{prefix}time_vs_m", part, len(chunks),
                               f"Kernel time vs M per module, {a.label}",
                               "log-log; solid BF16, dashed FP8 per-tensor, dash-dot per-token, "
                               "dash-dot-dot block-128, dotted NVFP4; x markers: kernel + activation quant; "
                               "M = tokens of one rank's attention"))
    return figs


def _style_step_panel(ax, m: int) -> None:
    """Title and axes of one per-step roll-up panel (one M)."""
    ax.set_title(f"M = {m}", fontsize=10)
    ax.set_ylabel("us per step (one rank)", fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(True, axis="y", alpha=0.3)


def _legend_columns(fig, labels: Sequence[str], most: int = 6) -> int:
    """As many legend columns as fit the figure's width at fontsize 8 (about 5.5 px a character
    plus the handle), so a legend of long labels is never cut off at the edges."""
    width_px = fig.get_figwidth() * DPI
    per_entry = max((len(t) for t in labels), default=1) * 5.5 + 45
    return max(1, min(most, len(labels), int(width_px // per_entry)))


def _hide_unused(axes, used: int) -> None:
    """Hide the grid cells past the first `used` panels."""
    for ax in list(axes.flat)[used:]:
        ax.set_visible(False)


def _save_png(fig, path: str) -> None:
    """Render to memory, then write atomically: a crash or a full disk leaves no half PNG. The
    figure is stored with a palette of at most 256 colours (Pillow, which matplotlib needs anyway):
    line charts on a white background use a few dozen, and the file is about a quarter of the
    true-colour one."""
    from PIL import Image

    rgba = io.BytesIO()
    fig.savefig(rgba, format="png", dpi=DPI, facecolor="white")
    rgba.seek(0)
    with Image.open(rgba) as image:
        paletted = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    png = io.BytesIO()
    paletted.save(png, format="png", optimize=True)
    write_bytes_atomic(path, png.getvalue())


def _save_part(fig, out_dir: str, stem: str, part: int, parts: int, title: str,
               subtitle: str) -> tuple[str, str]:
    """Title, save and close one (part of a) multi-panel figure; returns (title, file name)."""
    plt = _plt()
    if parts > 1:
        title, stem = f"{title} ({part}/{parts})", f"{stem}_{part}"
    fig.suptitle(f"{title}\n({subtitle})", fontsize=10)
    fname = f"{stem}.png"
    _save_png(fig, os.path.join(out_dir, fname))
    plt.close(fig)
    return title, fname


def roofline(a: Analysis, out_dir: str, prefix: str) -> list[tuple[str, str]]:
    """Achieved TFLOP/s vs arithmetic intensity per recipe (kernel-only rows), with the GPU's ceilings."""
    pts: dict[str, list[tuple[float, float, str]]] = {}
    for r in a.rows:
        if not has_time(r) or r.with_quant or not r.flops or not r.bytes:
            continue
        tflops = r.tflops if r.tflops else r.flops / (r.median_us * 1e6)
        pts.setdefault(recipe_of(r), []).append((r.flops / r.bytes, tflops, backend_label(r)))
    if not pts:
        return []
    plt = _plt()
    peaks, bw, note = roofline_peaks(a)
    dtypes = [d for d in a.recipes if d in pts]
    backends = sorted({p[2] for v in pts.values() for p in v})
    cmap = plt.get_cmap("tab10")
    colors = {b: cmap(i % 10) for i, b in enumerate(backends)}
    markers = "osD^v<>Ph*"
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.2 * len(dtypes), 4.6), squeeze=False, layout="constrained")
    all_x = [p[0] for v in pts.values() for p in v]
    x_lo, x_hi = min(all_x) / 2, max(all_x) * 2
    for ax, d in zip(axes.flat, dtypes, strict=True):
        for i, b in enumerate(backends):
            sel = [p for p in pts[d] if p[2] == b]
            if sel:
                ax.scatter([p[0] for p in sel], [p[1] for p in sel], s=18, color=colors[b],
                           marker=markers[i % len(markers)], label=b, alpha=0.85)
        peak = peaks.get(recipe_dtype(d))
        if peak or bw:
            import numpy as np

            xs = np.geomspace(x_lo, x_hi, 200)
            roof = np.minimum(bw * xs if bw else np.full_like(xs, np.inf), peak if peak else np.inf)
            parts = ([f"{peak:,.0f} TFLOP/s"] if peak else []) + ([f"{bw:.2f} TB/s"] if bw else [])
            ax.plot(xs, roof, color="black", linewidth=1.2, label="ceiling: " + ", ".join(parts))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x_lo, x_hi)
        ax.set_xlabel("arithmetic intensity (FLOP / byte)", fontsize=9)
        ax.set_ylabel("achieved TFLOP/s", fontsize=9)
        ax.set_title(f"{a.recipe_title(d)} kernels", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    title = f"Roofline, {a.label} on {a.gpu}"
    fig.suptitle(f"{title}\n(one point per module and M, kernel-only rows; {note})", fontsize=10)
    fname = f"{prefix}roofline.png"
    _save_png(fig, os.path.join(out_dir, fname))
    plt.close(fig)
    return [(title, fname)]


def _bar_variants(a: Analysis) -> list[tuple[str, str, str]]:
    """(recipe, basis, bar label): recipe_totals.rollup_variants on the vLLM-default and +quant bases,
    with short labels ("*": the checkpoint's FP8 scheme)."""
    out = []
    for d, basis, _ in rollup_variants(a):
        if basis not in (QUANT, VLLM):
            continue
        if d == BASELINE:
            label = f"BF16\n{BASELINE_BACKEND}"
        else:
            if basis == VLLM:
                kind = "vLLM"
            else:
                kind = "best" if d == "bf16" else ("+quant" if a.has_quant_rows(d) else "kernel")
            mark = "*" if d == a.checkpoint.recipe else ""
            name = recipe_label(d).replace("FP8 ", "FP8\n")  # two short lines fit under a bar
            label = f"{name}{mark}\n{kind}"
        out.append((d, basis, label))
    return out


def rollup_bars(a: Analysis, out_dir: str, prefix: str) -> list[tuple[str, str]]:
    """Per-step roll-up per recipe, stacked by module kind, one panel per M."""
    if not a.ms or not any(a.rollup(d, m).total_us > 0 for d in a.recipes for m in a.ms):
        return []
    plt = _plt()
    variants = _bar_variants(a)
    kinds = [k for k in MODULE_KINDS if any(e.module_kind == k for e in a.entries)]
    figs = []
    chunks = [a.ms[i:i + PANELS_PER_FIGURE] for i in range(0, len(a.ms), PANELS_PER_FIGURE)]
    for part, ms in enumerate(chunks, 1):
        nrows, ncols = _grid(len(ms))
        fig, axes = plt.subplots(nrows, ncols, figsize=(max(3.2, 1.0 + 0.9 * len(variants)) * ncols,
                                 3.8 * nrows + 0.8), squeeze=False, layout="constrained")
        for ax, m in zip(axes.flat, ms, strict=False):
            tops = []
            for x, (recipe, basis, _) in enumerate(variants):
                r = a.rollup(recipe, m, basis)
                bottom = 0.0
                # A total without any of its own modules would draw only the BF16-kept ones.
                for k in kinds if not r.no_number else ():
                    v = r.by_kind.get(k, 0.0)
                    ax.bar(x, v, bottom=bottom, color=KIND_COLORS.get(k, "#777777"), width=0.7,
                           hatch=None if r.complete else "//", edgecolor="white" if r.complete else "black",
                           linewidth=0.5, label=k)
                    bottom += v
                tops.append((x, bottom, r))
            ymax = max((t[1] for t in tops), default=0.0) or 1.0
            for x, top, r in tops:
                if r.no_number:
                    text = "no number"
                elif r.complete:
                    text = f"{top:,.0f}"
                else:
                    text = f"{top:,.0f}\nincomplete\n({len(r.missing)}/{r.n_modules} missing)"
                ax.text(x, top + ymax * 0.02, text, ha="center", va="bottom", fontsize=7)
            ax.set_ylim(0, ymax * 1.35)
            ax.set_xticks(range(len(variants)))
            ax.set_xticklabels([v[2] for v in variants], fontsize=7)
            _style_step_panel(ax, m)
        _hide_unused(axes, len(ms))
        handles = [plt.Rectangle((0, 0), 1, 1, color=KIND_COLORS.get(k, "#777777")) for k in kinds]
        names = list(kinds)
        if any(a.rollup(d, m, b).missing for d, b, _ in variants for m in ms):
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", hatch="//"))
            names.append("incomplete total (modules missing)")
        fig.legend(handles, names, loc="outside lower center", ncol=_legend_columns(fig, names, 4), fontsize=8,
                   frameon=False)
        figs.append(_save_part(fig, out_dir, f"{prefix}rollup", part, len(chunks),
                               f"Per-step GEMM + MoE kernel time by module kind, {a.label}",
                               "vLLM default / best backend per module x per-step count; * checkpoint "
                               "FP8 scheme; excludes attention kernels, norms, communication"))
    return figs


FigureJob = Callable[[], list[tuple[str, str]]]


def workdir_figure_jobs(a: Analysis, out_dir: str, prefix: str = "fig_") -> list[FigureJob]:
    """Every figure of one workdir as independent jobs, each drawing its own files and returning
    [(title, file name relative to out_dir)]: time vs M, roofline, roll-up bars."""
    return [lambda: time_vs_m(a, out_dir, prefix), lambda: roofline(a, out_dir, prefix),
            lambda: rollup_bars(a, out_dir, prefix)]


def comparison_tick_labels(analyses: Sequence[Analysis], labels: Sequence[str], m: int) -> list[str]:
    """Each run's label in the panel of per-rank M, with its GPUs and the global batch that M
    is (M x DP sequences per decode step): equal per-rank M is not equal load."""
    out = []
    for i, (a, lab) in enumerate(zip(analyses, labels, strict=True)):
        scale = RunScale.of(a)
        out.append(textwrap.fill(f"#{i + 1} {lab}", 18) + "\n" + scale.batch_text(m))
    return out


#: The comparison figure's title (report.md's caption and the PNG's own).
COMPARISON_TITLE = "Per-step GEMM + MoE kernel time per run, at equal per-rank M (not equal load)"

#: Under the title: what a bar is and what its label says about the run's size.
COMPARISON_SUBTITLE = ("(one rank; n/a: no number; M = tokens of one rank's attention, an MoE layer under "
                       "EP runs M*EP/TP;\nunder each run: its global batch M x DP sequences per step / "
                       "its GPUs TP x DP; equal M across layouts is not equal load)")


def comparison_figures(analyses: Sequence[Analysis], labels: Sequence[str], out_dir: str,
                       prefix: str = "fig_") -> list[tuple[str, str]]:
    """Grouped bars: per M one panel, per run a group, per recipe a bar (per-step roll-up total)."""
    ms = sorted({m for a in analyses for m in a.ms})
    recipes = [d for d in RECIPES if any(a.has_number(d) for a in analyses)]
    recipes += sorted({d for a in analyses for d in a.recipes if a.has_number(d)} - set(recipes))
    if not ms or not recipes:
        return []
    plt = _plt()
    ms = ms[:PANELS_PER_FIGURE]
    nrows, ncols = _grid(len(ms))
    width = 0.8 / len(recipes)
    panel_w = max(3.6, 1.2 * len(analyses) + 1.5)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols, 4.0 * nrows + 0.8),
                             squeeze=False, layout="constrained")
    for ax, m in zip(axes.flat, ms, strict=False):
        for j, d in enumerate(recipes):
            for i, a in enumerate(analyses):
                x = i + (j - (len(recipes) - 1) / 2) * width
                r = a.rollup(d, m, QUANT) if m in a.ms else None
                if r is None or r.no_number:
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="#555555")
                    continue
                ax.bar(x, r.total_us, width=width,
                       color=RECIPE_COLORS.get(d, "#777777"), hatch=None if r.complete else "//",
                       edgecolor="black" if not r.complete else "white", linewidth=0.5)
                if r.high_us > r.low_us:  # the p10-p90 spread of the total
                    ax.errorbar(x, r.total_us, yerr=[[r.total_us - r.low_us], [r.high_us - r.total_us]],
                                fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
        ax.set_xlim(-0.6, len(analyses) - 0.4)
        ax.set_xticks(range(len(analyses)))
        ax.set_xticklabels(comparison_tick_labels(analyses, labels, m), fontsize=7)
        _style_step_panel(ax, m)
        ax.set_title(f"M = {m} per rank", fontsize=10)
    _hide_unused(axes, len(ms))
    names = [recipe_label(d) + (" best" if d == "bf16" else " best (+quant where measured)")
             for d in recipes]
    fname = _save_recipe_figure(plt, fig, out_dir, f"{prefix}comparison.png", recipes, names, "incomplete total",
                                COMPARISON_TITLE + "\n" + COMPARISON_SUBTITLE)
    return [(COMPARISON_TITLE, fname), *speedup_figure(analyses, labels, out_dir, prefix)]


def _save_recipe_figure(plt, fig, out_dir: str, fname: str, recipes: Sequence[str], names: Sequence[str],
                        hatched: str, suptitle: str) -> str:
    """A legend of one colour per recipe plus the hatched bar's meaning, the title, the PNG."""
    handles = [plt.Rectangle((0, 0), 1, 1, color=RECIPE_COLORS.get(d, "#777777")) for d in recipes]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", hatch="//"))
    names = [*names, hatched]
    fig.legend(handles, names, loc="outside lower center", ncol=_legend_columns(fig, names), fontsize=8,
               frameon=False)
    fig.suptitle(suptitle, fontsize=10)
    _save_png(fig, os.path.join(out_dir, fname))
    plt.close(fig)
    return fname


def sweep_speedup(a: Analysis, recipe: str, m: int) -> tuple[float, float, float] | None:
    """(speed-up, low, high) of `recipe`'s best-measured total over the run's summary reference
    at M (low/high from the two totals' p10-p90 spreads); None where either total is incomplete."""
    ref_recipe, ref_basis, _ = summary_reference(a)
    ref, r = a.rollup(ref_recipe, m, ref_basis), a.rollup(recipe, m, QUANT)
    if not (ref.complete and r.complete) or r.total_us <= 0 or ref.total_us <= 0:
        return None
    low = ref.low_us / r.high_us if r.high_us > 0 else ref.total_us / r.total_us
    high = ref.high_us / r.low_us if r.low_us > 0 else ref.total_us / r.total_us
    return ref.total_us / r.total_us, low, high


def speedup_figure(analyses: Sequence[Analysis], labels: Sequence[str], out_dir: str,
                   prefix: str = "fig_") -> list[tuple[str, str]]:
    """Grouped bars: per M one panel, per run (model) a group, per quantized recipe a bar of its
    speed-up over that run's reference; a bar whose p10-p90 range includes 1x is hatched (a tie)."""
    ms = sorted({m for a in analyses for m in a.ms})[:PANELS_PER_FIGURE]
    recipes = [d for d in RECIPES if d != "bf16" and any(a.has_number(d) for a in analyses)]
    if not ms or not recipes or not any(sweep_speedup(a, d, m) for a in analyses for d in recipes for m in ms):
        return []
    plt = _plt()
    nrows, ncols = _grid(len(ms))
    width = 0.8 / len(recipes)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(3.6, 1.2 * len(analyses) + 1.5) * ncols,
                                                    4.0 * nrows + 0.8), squeeze=False, layout="constrained")
    for ax, m in zip(axes.flat, ms, strict=False):
        for j, d in enumerate(recipes):
            for i, a in enumerate(analyses):
                x = i + (j - (len(recipes) - 1) / 2) * width
                sp = sweep_speedup(a, d, m) if m in a.ms else None
                if sp is None:
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="#555555")
                    continue
                value, low, high = sp
                tie = low <= 1.0 <= high
                ax.bar(x, value, width=width, color=RECIPE_COLORS.get(d, "#777777"), hatch="//" if tie else None,
                       edgecolor="black" if tie else "white", linewidth=0.5)
                if high > low:
                    ax.errorbar(x, value, yerr=[[max(0.0, value - low)], [max(0.0, high - value)]], fmt="none",
                                ecolor="black", elinewidth=0.8, capsize=2)
                ax.text(x, high, f"{value:.2f}x", ha="center", va="bottom", fontsize=6)
        ax.axhline(1.0, color="#333333", linewidth=0.8, linestyle="--")
        ax.set_xlim(-0.6, len(analyses) - 0.4)
        ax.set_xticks(range(len(analyses)))
        ax.set_xticklabels([textwrap.fill(f"#{i + 1} {lab}", 18) for i, lab in enumerate(labels)], fontsize=7)
        ax.set_title(f"M = {m}", fontsize=9)
        ax.set_ylabel("speed-up over the run's BF16 reference", fontsize=8)
    _hide_unused(axes, len(ms))
    names = [f"{recipe_label(d)} best (+quant where measured)" for d in recipes]
    title = "Recipe speed-up per model (per-step GEMM + MoE total)"
    fname = _save_recipe_figure(plt, fig, out_dir, f"{prefix}speedup.png", recipes, names, "tie: 1x within p10-p90",
                                title + "\n(reference: each run's BF16 vLLM-default total, else its BF16 "
                                "baseline; bars: p10-p90 of both totals)")
    return [(title, fname)]
