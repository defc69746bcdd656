"""The per-step roll-up sections of report.md: GEMM + MoE totals, and with attention added.

In: an `Analysis` (its roll-ups and the rows `recipe_totals.rollup_variants` lists). Out: Markdown
lines: the totals per recipe and M with their speed-up over the BF16 baseline, the split by module
kind and the missing modules (a total of a recipe one rank cannot hold marked 'does not fit (needs X
GiB, GPU has Y GiB)', memory.py's decision, and no speed-up; a speed-up within the p10-p90 ranges a
tie); then GEMM + MoE + attention per recipe, M and KV length (KV BF16 and FP8), 'does not fit' where
one rank cannot hold it. Nothing here computes a number or touches a file.
"""

from __future__ import annotations

from ..vllm_rules.layers import KEPT_IN_BF16
from .analysis import BASELINE, MODULE_KINDS, QUANT, VLLM, Analysis, Rollup, recipe_label
from .md_attention import kv_text
from .md_text import NO_FIT_MARK, TIE_TEXT, fmt_us, table, with_speedup
from .recipe_totals import rollup_variants, speedup_of

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


def rollup_text(r: Rollup, short: bool = False) -> str:
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


def _quantized_router_text(a: Analysis) -> str:
    """"; this model's router is FP8 under ..." where vLLM quantizes the router of this model class
    under some recipe of the run (vllm_rules/layers.py QUANTIZED_ROUTERS), else ""."""
    fp8_router = [d for d in a.quantized if not a.kept_in_bf16("router", d)]
    if not fp8_router or not any(e.name == "router" for e in a.entries):
        return ""
    return (f"; this model's router is quantized under {', '.join(recipe_label(d) for d in fp8_router)}: "
            "vLLM's online fp8_per_tensor builds its GateLinear with the quantization config")


def rollup_lines(a: Analysis) -> list[str]:
    lines = [
        "Sum over the plan of (best time x per-step count), in microseconds: the GEMM + fused-MoE "
        "kernel time of ONE forward step on ONE rank at each M. It is NOT end-to-end latency: it "
        f"leaves out {ROLLUP_EXCLUDES}. A total marked incomplete is the partial sum over the "
        "modules that have a number; the missing modules are listed below the tables. Speed-ups "
        "are against the BF16 baseline total and only shown when both totals are complete; where "
        f"the two totals' p10-p90 ranges overlap the cell reads '{TIE_TEXT}' instead. A total of "
        "a recipe whose weights and reserve one GPU of this run cannot hold reads 'does not fit "
        "(needs X GiB, GPU has Y GiB)' beside its kernel time (Memory per rank), with no speed-up. "
        f"Modules vLLM keeps unquantized ({', '.join(KEPT_IN_BF16)}{_quantized_router_text(a)}) count "
        "with their BF16 time under the quantized recipes (the BF16 vLLM default on the vLLM-default "
        "lines, the BF16 baseline on the others). **vLLM default** counts per module only the rows "
        "that time vLLM's default kernel (or its design), +quant where timed; the Summary says "
        "why a missing one is not timed.",
        "",
    ]
    variants = rollup_variants(a)
    dropped = [recipe_label(d) for d in a.recipes if not a.has_number(d)]
    base_no_fit = a.no_fit(BASELINE) is not None
    body, missing_notes = [], []
    for recipe, basis, title in variants:
        row = [title]
        no_fit = a.no_fit(recipe)
        for m in a.ms:
            base = a.rollup(BASELINE, m)
            r = a.rollup(recipe, m, basis)
            sp = speedup_of(base, r) if recipe != BASELINE and no_fit is None else None
            if no_fit is not None:  # kernel time one GPU cannot serve: marked, never a plain total
                row.append(f"{rollup_text(r)}, {no_fit.text}")
            elif sp is not None:
                row.append(with_speedup(rollup_text(r), sp.ratio, sp.tie, base_no_fit))
            else:
                row.append(rollup_text(r))
            if r.missing and not r.no_number:
                missing_notes.append(f"- {title}, M={m}: missing {', '.join(r.missing)}")
        body.append(row)
    lines += ["Totals (us per step; in parentheses the speed-up vs the BF16 baseline total):", ""]
    lines += table(["recipe", *[f"M={m}" for m in a.ms]], body)
    if base_no_fit:
        lines += ["", f"{NO_FIT_MARK}: over the BF16 baseline total, which does not fit one GPU: a ratio of "
                  "kernel times, not a gain over a configuration one GPU can run."]
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
            split.append([str(m), title + (" (does not fit)" if a.no_fit(recipe) else ""), *cells])
    lines += ["", "Split by module kind (us per step; `*`: partial, a module of this kind has no number):", ""]
    lines += table(["M", "recipe", *kinds], split)
    if missing_notes:
        lines += ["", "Missing modules per incomplete total:", "", *missing_notes]
    return lines


def attention_rollup_lines(a: Analysis) -> list[str]:
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
    check = a.fit_check
    ms = a.ms or sorted({r.m for r in view.rows if r.phase == "decode"})
    variants = rollup_variants(a) if a.rows else [("", QUANT, "attention only")]
    kv_dtypes = view.kv_dtypes
    header = ["recipe", "M", "KV tokens", "GEMM + MoE"]
    for d in kv_dtypes:
        header += [f"attention, {kv_text(d)}", f"total, {kv_text(d)}"]
    body, notes = [], []
    for recipe, basis, title in variants:
        for m in ms:
            gemm_moe = a.rollup(recipe, m, basis) if recipe else None
            for kv in view.kv_lens:
                row = [title, str(m), str(kv), rollup_text(gemm_moe, short=True) if gemm_moe else "-"]
                for d in kv_dtypes:
                    att = view.total(m, kv, d, vllm_basis=basis == VLLM)
                    dagger = "†" if att.stand_ins else ""
                    att_text = fmt_us(att.total_us) + dagger + ("" if att.complete else
                                                               f" (incomplete: {', '.join(att.missing)} missing)")
                    if att.missing and len(att.missing) == len(view.types):
                        att_text = "no number"
                    both = gemm_moe is not None and gemm_moe.complete and att.complete
                    no_fit = (check.kv(recipe, d, m, kv) or a.no_fit(recipe)) if recipe and check is not None else None
                    if no_fit is not None:
                        total = no_fit.text
                    elif both and gemm_moe:
                        total = fmt_us(gemm_moe.total_us + att.total_us) + dagger
                    else:
                        total = "incomplete" if gemm_moe is not None else "-"
                    row += [att_text, total]
                    for s_ in att.stand_ins:
                        if f"- † {s_}" not in notes:
                            notes.append(f"- † {s_}")
                body.append(row)
    lines += table(header, body)
    if notes:
        lines += ["", "Stand-ins on the vLLM-default lines:", "", *notes]
    return lines


__all__ = [
    "ROLLUP_EXCLUDES", "ROLLUP_WITH_ATTENTION_EXCLUDES", "rollup_text", "rollup_lines", "attention_rollup_lines",
]
