"""The Markdown of report.md: one workdir's section and the comparison of several, from `Analysis`.

In: one or several `Analysis` objects (analysis.py) and the (title, file name) of figures already
drawn. Out: lists of Markdown lines: `workdir_section` (the summary led by what vLLM runs,
md_summary.py; header; warnings; per-step roll-ups, md_rollup.py; attention, md_attention.py; memory;
per-module tables and crossovers, md_module_tables.py; measurement quality; figures; cells without a
number) and `comparison_section` (several runs side by side); each FP8 scheme is its own recipe
throughout. `module_kind_table_markdown` is the table references/report.md carries. Nothing here
computes a number or touches a file.
"""

from __future__ import annotations

from typing import Sequence

from ..core.results_schema import RESULTS_JSON, derived_run_id
from ..core.shown_paths import recorded_workdirs, shown_command, shown_text, workdir_name
from .analysis import (
    MODULE_KIND_TABLE,
    MOE,
    OTHER,
    RECIPES,
    TIMED_MARKS,
    VLLM,
    VLLM_MARKS,
    Analysis,
    has_time,
    recipe_label,
    run_labels,
)
from .md_attention import attention_lines
from .md_module_tables import crossover_lines, missing_cells_lines, module_tables
from .md_rollup import attention_rollup_lines, rollup_lines, rollup_text
from .md_summary import M_TEXT, summary_lines
from .md_text import fmt_us, fmt_x, table
from .memory import memory_section
from .quality import quality_lines
from .recipe_totals import SUMMARY_BASES, SUMMARY_BASIS_WORDS
from .run_scale import BATCH_ROW_WORDS, EQUAL_M_TEXT, RunScale

#: The row marks, explained under the module tables and in the summary.
MARKS_TEXT = (f"`{VLLM_MARKS['same']}`: the winner times the kernel vLLM dispatches by default for "
              f"this layer kind, recipe and FP8 scheme on this GPU; `{VLLM_MARKS['design']}`: it "
              "times vLLM's design in this tool's Triton code with vLLM's tile choice, "
              f"`{TIMED_MARKS['vllm_design_tuned_tiles']}` with tiles this tool searched (what vLLM "
              f"runs with a tuned config file); `{TIMED_MARKS['fallback']}`: a kernel vLLM runs "
              f"elsewhere (later in its priority list, another GPU or shape); `{TIMED_MARKS['stand_in']}`: "
              "timed in place of a vLLM default no row times; unmarked: a comparison; "
              "`; vLLM default <backend> <us>` follows when another backend won and the vLLM-default "
              "row has a number")


def module_kind_table_markdown() -> str:
    """MODULE_KIND_TABLE as Markdown (references/report.md carries it; a test keeps them equal)."""
    lines = ["| plan entry name | matches | roll-up kind |", "|---|---|---|"]
    for pattern, bucket in MODULE_KIND_TABLE:
        how = f"prefix `{pattern}*`" if pattern.endswith(".") else "whole name (a `[...]` suffix dropped)"
        lines.append(f"| `{pattern}` | {how} | {bucket} |")
    lines.append(f"| any MoE entry (kind `moe`) | always | {MOE} |")
    lines.append(f"| anything else | - | {OTHER} (shown as its own column, never dropped) |")
    return "\n".join(lines)


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
    # The machine's own paths (the workdir, caches, checkouts) are shown relative to the workdir
    # or by their name: a committed report names no one's directories (core/shown_paths.py).
    workdirs = recorded_workdirs(a.results, a.path)
    cmd_text = shown_command(cmd, workdirs) if isinstance(cmd, list) and cmd else "unknown"
    timers = a.timers()
    timer_text = ", ".join(f"{t} ({n} row{'s' if n != 1 else ''})" for t, n in timers.items()) or "no ok rows"
    arch = (model.architecture if model is not None else "") or "unknown"
    layers = model.num_hidden_layers if model is not None else None
    facts = [
        ("Model", f"{a.model} ({arch}{f', {layers} layers' if layers else ''})"),
        ("FP8 scheme in vLLM", f"{recipe_label(a.checkpoint.recipe)} ({a.checkpoint.source})"),
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
        ("Rows", "; ".join(f"{len(rs)} {mode} ({sum(has_time(r) for r in rs)} with a number)"
                           for mode in a.modes if (rs := [r for r in a.all_rows if r.mode == mode]))
         + ("" if len(a.modes) < 2 else f"; tables and totals read the {a.mode} rows")
         if a.modes else "0"),
        ("Run id", str(a.results.get("run_id") or f"{derived_run_id(a.results)} (written before run ids)")),
        ("Results", f"`{workdir_name(a.path)}/{RESULTS_JSON}`" if a.path else f"`{RESULTS_JSON}`"),
    ]
    copied = sum(bool(r.origin) for r in a.rows)
    if copied:  # a number this run did not measure is never shown as if it had
        facts.append(("Copied from the result cache", f"{copied} of {len(a.rows)} rows: not timed by this "
                      "run; each row's `origin` in results.json names the run and case that measured it"))
    return table(("", ""), [(k, v if k == "Command" else shown_text(v, workdirs)) for k, v in facts])


def workdir_section(a: Analysis, figures: Sequence[tuple[str, str]], level: int = 1) -> list[str]:
    """The Markdown of one workdir; `figures` are (title, file name relative to report.md)."""
    h = "#" * level
    lines = [f"{h} Kernel benchmark: {a.label}", ""]
    if a.rows:
        lines += [f"{h}# Summary", ""] + summary_lines(a) + [""]
    lines += _header_lines(a) + [""]
    warns = [shown_text(w, recorded_workdirs(a.results, a.path)) for w in a.warnings()]
    lines += [f"{h}# Warnings", ""] + ([f"- {w}" for w in warns] if warns else ["None."]) + [""]
    if not a.rows and not a.attention.rows:
        return lines + ["results.json has no rows: nothing was measured.", ""]
    if a.rows:
        lines += [f"{h}# Per-step roll-up (GEMM + MoE kernels only)", ""] + rollup_lines(a) + [""]
    if a.attention.rows:
        lines += [f"{h}# Per-step roll-up with attention (GEMM + MoE + attention)", ""]
        lines += attention_rollup_lines(a) + [""]
        lines += [f"{h}# Attention by layer type (FlashInfer's kernels)", ""] + attention_lines(a, level) + [""]
    lines += memory_section(a.results, a.ms, f"{h}#")
    if not a.rows:
        return lines
    lines += [f"{h}# Per-module times by M", ""]
    lines += [
        "Times are medians in microseconds, one rank. Shapes are per-rank logical (what vLLM's layer "
        "has); a backend that pads runs the physical shape listed after 'padded'. "
        f"{M_TEXT}; an MoE module cell says `num_tokens=kM` when that is not M. Marks: {MARKS_TEXT}. "
        "A cell without a number says failed / unsupported / not measured; the reasons are under "
        "'Cells without a number'.",
        "",
    ]
    lines += module_tables(a)
    lines += [f"{h}# Crossovers", ""] + crossover_lines(a) + [""]
    lines += [f"{h}# Measurement quality", ""] + quality_lines(a, level) + [""]
    if figures:
        lines += [f"{h}# Figures", ""]
        for title, fname in figures:
            lines += [f"**{title}**", "", f"![{title}]({fname})", ""]
    lines += [f"{h}# Cells without a number", ""] + missing_cells_lines(a) + [""]
    return lines


def _ep_comparison_text(analyses: Sequence[Analysis]) -> str:
    """What M means across runs, and the MoE token factor of each run that has MoE layers."""
    factors = []
    for i, a in enumerate(analyses, 1):
        moe = [e for e in a.entries if e.kind == "moe"]
        if moe:
            k = moe[0].tokens_per_m
            factors.append(f"#{i} num_tokens = {'M' if k == 1 else f'{k}M'}")
    text = (f"{M_TEXT}, so at the same M runs with a different EP/TP run a different number of MoE "
            "tokens and are a different global batch.")
    return text + (f" MoE tokens per run: {', '.join(factors)}." if factors else "")


def comparison_section(analyses: Sequence[Analysis], figures: Sequence[tuple[str, str]]) -> list[str]:
    """Per-step roll-up totals of several workdirs side by side, per recipe and basis."""
    lines = [
        "## Comparison: per-step GEMM + MoE kernel time (us, one rank)", "",
        "Each cell is the per-step roll-up total of one run (see each run's section for the split "
        "and what is left out): its vLLM-default total and its best measured total (+quant where "
        f"measured). {_ep_comparison_text(analyses)} A run whose GPU differs is named in the label. A "
        "recipe one GPU of that run cannot hold reads 'does not fit (needs X GiB, GPU has Y GiB)' (the "
        "run's memory section; its kernel time is in the run's roll-up).", "",
    ]
    gpus = {a.gpu for a in analyses}
    labels = run_labels(analyses)
    ms = sorted({m for a in analyses for m in a.ms})
    present = [d for d in RECIPES if any(d in a.recipes for a in analyses)]
    present += sorted({d for a in analyses for d in a.recipes} - set(present))
    recipes = [d for d in present if any(a.has_number(d) for a in analyses)]
    if len(recipes) < len(present):
        lines += ["Not compared (no run has a number): "
                  + ", ".join(recipe_label(d) for d in present if d not in recipes) + ".", ""]
    scales = [RunScale.of(a) for a in analyses]
    for d in recipes:
        lines += [f"### {recipe_label(d)}", ""]
        body = []
        for i, (a, label, scale) in enumerate(zip(analyses, labels, scales, strict=True), 1):
            name = f"#{i} {label}" + (f" [{a.gpu}]" if len(gpus) > 1 else "")
            if d == a.checkpoint.recipe:
                name += " (checkpoint scheme)"
            body.append([name, scale.gpus_text, BATCH_ROW_WORDS, *[scale.batch_text(m) for m in ms]])
            for basis in SUMMARY_BASES:
                row = [name, scale.gpus_text, SUMMARY_BASIS_WORDS[basis]]
                for m in ms:
                    if d not in a.recipes or m not in a.ms:
                        row.append("not measured")
                    elif (no_fit := a.no_fit(d)) is not None:  # no total one GPU of that run serves
                        row.append(no_fit.text)
                    else:
                        row.append(rollup_text(a.rollup(d, m, basis), short=True))
                body.append(row)
        lines += table(["run", "GPUs", "total", *[f"M={m}" for m in ms]], body) + ["", EQUAL_M_TEXT, ""]
    lines += _attention_comparison_lines(analyses, labels, ms, recipes)
    for title, fname in figures:
        lines += [f"**{title}**", "", f"![{title}]({fname})", ""]
    return lines


#: The K/V cache dtype of the attention comparison: vLLM's default kv_cache_dtype `auto` (BF16).
COMPARISON_KV_DTYPE = "bf16"


def _attention_comparison_lines(analyses: Sequence[Analysis], labels: Sequence[str], ms: Sequence[int],
                                recipes: Sequence[str]) -> list[str]:
    """The runs with attention rows side by side: GEMM + MoE + attention per recipe, KV length and
    basis, KV cache BF16 (each run's own section has the FP8-KV variant and the split)."""
    runs = [(i, a, label) for i, (a, label) in enumerate(zip(analyses, labels, strict=True), 1)
            if a.attention.rows]
    if not runs:
        return []
    kvs = sorted({kv for _, a, _ in runs for kv in a.attention.kv_lens})
    lines = [
        "## Comparison: per-step GEMM + MoE + attention (us, one rank, K/V cache BF16)", "",
        "Each cell is one run's GEMM + MoE total (the tables above) plus its attention layers' fastest "
        "decode rows at that KV length times their layers per step, as in the attention roll-up of "
        "that run's section; `†` marks a vLLM-default total whose attention is counted at its "
        "fastest FlashInfer row because no row times vLLM's default attention kernel on that GPU "
        "(listed in the run's section). A cell is 'incomplete' when a module or an attention layer "
        "type has no number, and 'does not fit' when one rank of that run's GPU cannot hold the "
        "recipe's weights beside M sequences of that K/V length (the run's memory section). Runs "
        "without attention rows are left out.", "",
    ]
    for d in recipes:
        body = []
        for i, a, label in runs:
            scale = RunScale.of(a)
            body.append([f"#{i} {label}", scale.gpus_text, "-", BATCH_ROW_WORDS,
                         *[scale.batch_text(m) for m in ms]])
            for kv in kvs:
                for basis in SUMMARY_BASES:
                    row = [f"#{i} {label}", scale.gpus_text, str(kv), SUMMARY_BASIS_WORDS[basis]]
                    for m in ms:
                        if d not in a.recipes or m not in a.ms or kv not in a.attention.kv_lens:
                            row.append("not measured")
                            continue
                        check = a.fit_check
                        no_fit = (check.kv(d, COMPARISON_KV_DTYPE, m, kv) or a.no_fit(d)) if check else None
                        if no_fit is not None:
                            row.append(no_fit.text)
                            continue
                        gemm_moe = a.rollup(d, m, basis)
                        att = a.attention.total(m, kv, COMPARISON_KV_DTYPE, vllm_basis=basis == VLLM)
                        both = gemm_moe.complete and att.complete
                        row.append(fmt_us(gemm_moe.total_us + att.total_us) + ("†" if att.stand_ins else "")
                                   if both else "incomplete")
                    body.append(row)
        lines += [f"### {recipe_label(d)}", ""]
        lines += table(["run", "GPUs", "KV tokens", "total", *[f"M={m}" for m in ms]], body)
        lines += ["", EQUAL_M_TEXT, ""]
    return lines


__all__ = [
    "MARKS_TEXT", "COMPARISON_KV_DTYPE", "module_kind_table_markdown", "workdir_section", "comparison_section",
    # the renderers workdir_section assembles, and md_text.py's numbers, re-exported for callers
    "summary_lines", "attention_lines", "fmt_us", "fmt_x",
]
