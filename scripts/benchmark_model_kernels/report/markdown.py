"""The Markdown of report.md: every table and section, rendered from an `Analysis` (analysis.py).

In: one or several `Analysis` objects and the (title, file name) of figures already drawn. Out: lists
of Markdown lines: `workdir_section` (summary led by what vLLM runs, header, warnings, per-step
roll-up, per-module tables, crossovers, figures, cells without a number) and `comparison_section`
(several runs side by side); each FP8 scheme is its own recipe throughout.
`module_kind_table_markdown` is the table references/report.md carries. Nothing here computes a
number or touches a file.
"""

from __future__ import annotations

import os
import shlex
from typing import Sequence

from ..core.results_schema import RESULTS_JSON, Row, derived_run_id
from ..vllm_rules.dispatch import vllm_attention_default
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
    RECIPES,
    SUMMARY_BASES,
    SUMMARY_BASIS_WORDS,
    TORCH_MOE_LABEL,
    VLLM,
    VLLM_MARKS,
    Analysis,
    Cell,
    Entry,
    Rollup,
    Verdict,
    backend_label,
    bases,
    best_cell,
    has_time,
    measured_recipes,
    recipe_dtype,
    recipe_label,
    recipe_of,
    rollup_variants,
    run_labels,
    speedup,
    summary_reference,
    summary_verdicts,
    vllm_mark,
)
from .md_text import fmt_us, fmt_x
from .md_text import table as _table
from .memory import fit_test, memory_section
from .quality import quality_lines

#: What the per-step roll-up leaves out; printed under every roll-up.
ROLLUP_EXCLUDES = (
    "attention kernels (prefill/decode attention, SSM/GDN scans), norms, activations outside fused "
    "kernels, rotary embeddings, sampling, communication (all-reduce, all-to-all), CUDA-graph/launch "
    "and scheduling overheads"
)

#: What the roll-up with attention still leaves out (the plan's untimed mixers are added by name).
ROLLUP_WITH_ATTENTION_EXCLUDES = (
    "communication (all-reduce, all-to-all), norms, activations outside fused kernels, rotary "
    "embeddings, the KV-cache write, sampling, CUDA-graph/launch gaps and scheduling overheads"
)
#: Marks of an attention cell: the kernel vLLM's default attention backend runs, or the one its
#: FLASHINFER backend runs (not its default on this GPU).
ATTENTION_MARKS = {"same": "[vLLM]", "vllm_flashinfer": "[vLLM FLASHINFER]"}

#: Table text of a module vLLM keeps in BF16 under a quantized recipe (vllm_rules/layers.py).
KEPT_TEXT = "BF16 (kept by vLLM)"

#: What the torch MoE row is, wherever the report explains it.
TORCH_MOE_TEXT = ("PyTorch composite (torch._grouped_mm + sort/gather/index_add), not a vLLM kernel "
                  "(torch._scaled_grouped_mm in FP8)")
#: The BF16 cell a quantized module cell is compared with (Analysis.reference).
REFERENCE_TEXT = ("BF16 vLLM default where it has a number, else the BF16 baseline (torch where it "
                  "ran, else the best BF16 backend)")
#: What M is, wherever the report explains it.
M_TEXT = ("M = tokens of one rank's attention per step; an MoE layer under expert parallelism "
          "runs num_tokens = M*EP/TP (it gathers the tokens of the EP/TP data-parallel attention "
          "replicas)")
#: The row marks, explained under the module tables and in the summary.
MARKS_TEXT = (f"`{VLLM_MARKS['same']}`: the winner times the kernel vLLM dispatches by default for "
              f"this layer kind, recipe and FP8 scheme on this GPU; `{VLLM_MARKS['design']}`: it "
              "times vLLM's design in this tool's Triton code; `; vLLM default <backend> <us>` follows "
              "when another backend won and the vLLM-default row has a number")


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
        ("Results", f"`{os.path.join(a.path, RESULTS_JSON) if a.path else RESULTS_JSON}`"),
    ]
    copied = sum(bool(r.origin) for r in a.rows)
    if copied:  # a number this run did not measure is never shown as if it had
        facts.append(("Copied from the result cache", f"{copied} of {len(a.rows)} rows: not timed by this "
                      "run; each row's `origin` in results.json names the run and case that measured it"))
    return _table(("", ""), [(k, v) for k, v in facts])


def _basis_title(a: Analysis, recipe: str, basis: str) -> str:
    label = a.recipe_title(recipe)
    if basis == KERNEL:
        return f"{label}, kernel only (activations already quantized)"
    if a.has_quant_rows(recipe):
        return f"{label}, kernel + activation quantization (BF16 activations in)"
    return f"{label}, kernel only (this run measured no activation-quant time for {recipe_label(recipe)})"


def _rollup_text(r: Rollup, short: bool = False) -> str:
    if r.n_modules and r.no_number:
        if short:
            return "no number"
        own = r.n_modules - len(r.kept)
        return f"no number (all {own} modules missing)" if not r.kept else (
            f"no number (all {own} quantized modules missing)")
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
        f"Under every FP8 scheme and NVFP4 the {', '.join(KEPT_IN_BF16)} GEMMs count with their BF16 "
        "time (the BF16 vLLM default on the vLLM-default lines, the BF16 baseline on the others), "
        "because vLLM keeps them unquantized. **vLLM default** counts per module only the rows "
        "that time vLLM's default kernel (or its design), +quant where timed; the Summary says "
        "why a missing one is not timed.",
        "",
    ]
    variants = rollup_variants(a)
    dropped = [recipe_label(d) for d in a.recipes if not a.has_number(d)]
    body, missing_notes = [], []
    for recipe, basis, title in variants:
        row = [title]
        for m in a.ms:
            base = a.rollup(BASELINE, m)
            r = a.rollup(recipe, m, basis)
            sp = base.total_us / r.total_us if (r.complete and base.complete and r.total_us) else None
            shown = sp is not None and recipe != BASELINE
            row.append(_rollup_text(r) + (f" ({fmt_x(sp)})" if shown else ""))
            if r.missing and not r.no_number:
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


def _attention_mark(row: Row | None) -> str:
    mark = ATTENTION_MARKS.get(row.vllm_default, "") if row is not None else ""
    return f" {mark}" if mark else ""


def _attention_cell_text(c: Cell) -> str:
    if c.row is None:
        return c.status
    return f"{fmt_us(c.us)}{_attention_mark(c.row)}"


def _kv_text(kv_dtype: str) -> str:
    return "KV BF16" if kv_dtype == "bf16" else "KV FP8"


def attention_lines(a: Analysis, level: int = 2) -> list[str]:
    """The attention section: per layer type and phase, each (M, KV length, KV dtype) with the
    fastest backend and every backend's median; then the rows without a number and why."""
    view = a.attention
    h = "#" * (level + 2)
    rule = vllm_attention_default(a.family, "mha", "decode", "bf16")
    default = (f"vLLM's default attention backend on this GPU is {rule.kernel}"
               + (f" ({rule.missing})" if rule.missing else "") if rule else
               "this tool has no vLLM attention rule for this GPU")
    lines = [
        "FlashInfer's attention kernels, timed by its benchmark driver, one layer per call: decode = "
        "M sequences of one new token each reading `KV` cached tokens; prefill = one sequence of "
        "M tokens, causal. Medians in microseconds, one rank, one layer (the roll-up multiplies by "
        f"the layers per step). {default}. Marks: `{ATTENTION_MARKS['same']}` the kernel vLLM's "
        f"default attention backend runs; `{ATTENTION_MARKS['vllm_flashinfer']}` the one vLLM's "
        "FLASHINFER attention backend runs (--attention-backend FLASHINFER), not its default here.",
        "",
    ]
    missing: list[str] = []
    for t in view.types:
        for phase in ("decode", "prefill"):
            keys = view.keys(t.name, phase)
            if not keys:
                continue
            backends = view.backends(t.name, phase)
            lines += [f"{h} {t.name} {phase}: {t.layers} layers per step, {t.shape}", ""]
            body = []
            for m, ctx, kv_dtype in keys:
                best = view.cell(t.name, phase, m, ctx, kv_dtype)
                kv_len = next((r.kv_len for r in view.rows_for(t.name, phase, m, ctx, kv_dtype) if r.kv_len), ctx)
                kv = f"{ctx} (reads {kv_len})" if kv_len != ctx else str(ctx)
                cells = []
                for b in backends:
                    c = best_cell([r for r in view.rows_for(t.name, phase, m, ctx, kv_dtype) if r.backend == b])
                    cells.append(_attention_cell_text(c) if c.status != "not measured" else "-")
                    if c.row is None and c.status != "not measured":
                        missing.append(f"- {t.name} {phase} M={m} KV={ctx} {_kv_text(kv_dtype)} {b}: "
                                       f"{c.status}: {c.reason.split(': ', 1)[-1]}")
                win = f"{best.backend} {_attention_cell_text(best)}" if best.row is not None else best.status
                body.append([str(m), kv, _kv_text(kv_dtype), win, *cells])
            lines += _table(["M", "KV tokens", "KV dtype", "fastest", *backends], body) + [""]
    if missing:
        lines += ["Attention cells without a number:", "", *missing, ""]
    return lines


def _attention_rollup_lines(a: Analysis) -> list[str]:
    """The roll-up with attention: per recipe, M and KV length, GEMM + MoE + attention, KV BF16 for
    every recipe (vLLM's default kv_cache_dtype "auto") and the FP8-KV variant."""
    view = a.attention
    left_out = ROLLUP_WITH_ATTENTION_EXCLUDES
    mixers = view.mixers_not_timed()
    if mixers:
        left_out += "; and these token mixers, whose kernels no row times: " + "; ".join(mixers)
    lines = [
        "One decode step at M: the GEMM + MoE total above plus, per attention layer type, its "
        "fastest decode row at that KV length x its layers per step. The KV cache is BF16 under "
        "every recipe (vLLM's default kv_cache_dtype `auto` keeps the model's dtype whatever the "
        "weights' recipe); the FP8-KV columns are that variant (`--kv-cache-dtype fp8`). On a "
        "vLLM-default line attention counts only rows of vLLM's default attention kernel; where no "
        "row times it, the fastest FlashInfer row stands in (`†`, listed below). A total reads "
        "'does not fit' where one rank cannot hold that recipe's weights beside M sequences of that "
        "K/V length (the memory section); the kernel times are still shown. Prefill rows are "
        f"not in these totals. Still left out: {left_out}.",
        "",
    ]
    fits = fit_test(a.results, a.plan)
    ms = a.ms or sorted({r.m for r in view.rows if r.phase == "decode"})
    variants = rollup_variants(a) if a.rows else [("", QUANT, "attention only")]
    kv_dtypes = view.kv_dtypes
    header = ["recipe", "M", "KV tokens", "GEMM + MoE"]
    for d in kv_dtypes:
        header += [f"attention, {_kv_text(d)}", f"total, {_kv_text(d)}"]
    body, notes = [], []
    for recipe, basis, title in variants:
        for m in ms:
            gemm_moe = a.rollup(recipe, m, basis) if recipe else None
            for kv in view.kv_lens:
                row = [title, str(m), str(kv), _rollup_text(gemm_moe, short=True) if gemm_moe else "-"]
                for d in kv_dtypes:
                    att = view.total(m, kv, d, vllm_basis=basis == VLLM)
                    dagger = "†" if att.stand_ins else ""
                    att_text = fmt_us(att.total_us) + dagger + ("" if att.complete else
                                                               f" (incomplete: {', '.join(att.missing)} missing)")
                    if att.missing and len(att.missing) == len(view.types):
                        att_text = "no number"
                    both = gemm_moe is not None and gemm_moe.complete and att.complete
                    if recipe and fits is not None and not fits(recipe, d, m, kv):
                        total = "does not fit"
                    elif both and gemm_moe:
                        total = fmt_us(gemm_moe.total_us + att.total_us) + dagger
                    else:
                        total = "incomplete" if gemm_moe is not None else "-"
                    row += [att_text, total]
                    for s_ in att.stand_ins:
                        if f"- † {s_}" not in notes:
                            notes.append(f"- † {s_}")
                body.append(row)
    lines += _table(header, body)
    if notes:
        lines += ["", "Stand-ins on the vLLM-default lines:", "", *notes]
    return lines


def _no_number_lines(a: Analysis, recipe: str) -> list[str]:
    n = {st: sum(recipe_of(r) == recipe and r.status == st for r in a.rows) for st in ("unsupported", "failed")}
    return [f"### {a.recipe_title(recipe)}", "",
            f"No cell has a number ({n['unsupported']} unsupported, {n['failed']} failed rows); "
            "the reasons are under 'Cells without a number'.", ""]


def _module_tables(a: Analysis) -> list[str]:
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
    lines += _table(header, body) + [""]
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
                if kept_in_bf16(e.name) and not a.has_rows(e, d):
                    body.append([_module_cell(e), *[KEPT_TEXT] * len(a.ms)])
                    continue
                body.append([_module_cell(e), *[_quant_cell_text(a.cell(e, m, d, basis), a.reference(e, m),
                                                                 a.default_cell(e, m, d, basis))
                                                for m in a.ms]])
            lines += _table(header, body) + [""]
    return lines


def _crossover_lines(a: Analysis) -> list[str]:
    if not a.quantized or "bf16" not in a.recipes:
        return ["No quantized recipe and BF16 baseline both in these results: no crossovers."]
    cols = [(d, basis) for d in a.quantized for basis in bases(a, d)]
    header = ["module"]
    for d, basis in cols:
        how = "+quant" if basis == QUANT and a.has_quant_rows(d) else "kernel"
        header.append(f"{a.recipe_title(d)} {how} beats BF16 from")
    body = [[f"{e.name} ({_shape_text(e)})",
             *[KEPT_TEXT if kept_in_bf16(e.name) and not a.has_rows(e, d) else a.crossover(e, d, b).text()
               for d, b in cols]] for e in a.entries]
    return [
        f"Smallest M in the sweep at which the recipe's best time beats the {REFERENCE_TEXT}.",
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


# ----------------------------------------------------------------------------------------------
# Summary: the answer first (per-step totals per recipe and the fastest recipe per M)


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
    return _table(["recipe", *[f"M={m}" for m in a.ms]], body)


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
        "for this GPU, layer kind, recipe and FP8 scheme (vllm_rules/dispatch.py; marked "
        f"`{VLLM_MARKS['same']}` in the module tables) or vLLM's design of it "
        f"(`{VLLM_MARKS['design']}`), +quant where timed. **best measured** = the fastest measured "
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
    if not a.rows and not a.attention.rows:
        return lines + ["results.json has no rows: nothing was measured.", ""]
    if a.rows:
        lines += [f"{h}# Per-step roll-up (GEMM + MoE kernels only)", ""] + _rollup_lines(a) + [""]
    if a.attention.rows:
        lines += [f"{h}# Per-step roll-up with attention (GEMM + MoE + attention)", ""]
        lines += _attention_rollup_lines(a) + [""]
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
    lines += _module_tables(a)
    lines += [f"{h}# Crossovers", ""] + _crossover_lines(a) + [""]
    lines += [f"{h}# Measurement quality", ""] + quality_lines(a, level) + [""]
    if figures:
        lines += [f"{h}# Figures", ""]
        for title, fname in figures:
            lines += [f"**{title}**", "", f"![{title}]({fname})", ""]
    lines += [f"{h}# Cells without a number", ""] + _missing_cells_lines(a) + [""]
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
        f"measured). {_ep_comparison_text(analyses)} A run whose GPU differs is named in the label.", "",
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
    for d in recipes:
        lines += [f"### {recipe_label(d)}", ""]
        body = []
        for i, (a, label) in enumerate(zip(analyses, labels, strict=True), 1):
            name = f"#{i} {label}" + (f" [{a.gpu}]" if len(gpus) > 1 else "")
            if d == a.checkpoint.recipe:
                name += " (checkpoint scheme)"
            for basis in SUMMARY_BASES:
                row = [name, SUMMARY_BASIS_WORDS[basis]]
                for m in ms:
                    if d not in a.recipes or m not in a.ms:
                        row.append("not measured")
                    else:
                        row.append(_rollup_text(a.rollup(d, m, basis), short=True))
                body.append(row)
        lines += _table(["run", "total", *[f"M={m}" for m in ms]], body) + [""]
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
    fit_by_run = {i: fit_test(a.results, a.plan) for i, a, _ in runs}
    for d in recipes:
        body = []
        for i, a, label in runs:
            for kv in kvs:
                for basis in SUMMARY_BASES:
                    row = [f"#{i} {label}", str(kv), SUMMARY_BASIS_WORDS[basis]]
                    for m in ms:
                        if d not in a.recipes or m not in a.ms or kv not in a.attention.kv_lens:
                            row.append("not measured")
                            continue
                        fits = fit_by_run[i]
                        if fits is not None and not fits(d, COMPARISON_KV_DTYPE, m, kv):
                            row.append("does not fit")
                            continue
                        gemm_moe = a.rollup(d, m, basis)
                        att = a.attention.total(m, kv, COMPARISON_KV_DTYPE, vllm_basis=basis == VLLM)
                        both = gemm_moe.complete and att.complete
                        row.append(fmt_us(gemm_moe.total_us + att.total_us) + ("†" if att.stand_ins else "")
                                   if both else "incomplete")
                    body.append(row)
        lines += [f"### {recipe_label(d)}", ""]
        lines += _table(["run", "KV tokens", "total", *[f"M={m}" for m in ms]], body) + [""]
    return lines


__all__ = [
    "ROLLUP_EXCLUDES", "KEPT_TEXT", "TORCH_MOE_TEXT", "M_TEXT", "MARKS_TEXT", "module_kind_table_markdown",
    "fmt_us", "fmt_x", "summary_lines", "workdir_section", "comparison_section",
]
