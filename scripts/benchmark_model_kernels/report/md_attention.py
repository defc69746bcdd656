"""The attention section of report.md: FlashInfer's attention kernels per layer type and phase.

In: an `Analysis` (its `AttentionView`, attention.py). Out: Markdown lines: per layer type and phase
each (M, KV length, KV dtype) with the fastest backend and every backend's median, marked where it
is the kernel vLLM's default or FLASHINFER attention backend runs; then the cells without a number.
Nothing here computes a number or touches a file.
"""

from __future__ import annotations

from ..core.results_schema import Row
from ..vllm_rules.dispatch import vllm_attention_default
from .analysis import Analysis, Cell, best_cell
from .md_text import fmt_us, table

#: Marks of an attention cell: the kernel vLLM's default attention backend runs, or the one its
#: FLASHINFER backend runs (not its default on this GPU).
ATTENTION_MARKS = {"same": "[vLLM]", "vllm_flashinfer": "[vLLM FLASHINFER]"}


def _attention_mark(row: Row | None) -> str:
    mark = ATTENTION_MARKS.get(row.vllm_default, "") if row is not None else ""
    return f" {mark}" if mark else ""


def _attention_cell_text(c: Cell) -> str:
    if c.row is None:
        return c.status
    return f"{fmt_us(c.us)}{_attention_mark(c.row)}"


def kv_text(kv_dtype: str) -> str:
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
                        missing.append(f"- {t.name} {phase} M={m} KV={ctx} {kv_text(kv_dtype)} {b}: "
                                       f"{c.status}: {c.reason.split(': ', 1)[-1]}")
                win = f"{best.backend} {_attention_cell_text(best)}" if best.row is not None else best.status
                body.append([str(m), kv, kv_text(kv_dtype), win, *cells])
            lines += table(["M", "KV tokens", "KV dtype", "fastest", *backends], body) + [""]
    if missing:
        lines += ["Attention cells without a number:", "", *missing, ""]
    return lines


__all__ = ["ATTENTION_MARKS", "kv_text", "attention_lines"]
