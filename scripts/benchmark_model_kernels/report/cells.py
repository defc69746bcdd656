"""The vocabulary and the rules of one report cell: pure functions of `core/results_schema.py` Rows.

In: the rows of one (module, M, recipe). Out: the best backend's `Cell` on a cost basis (QUANT:
kernel + activation quantization where measured; KERNEL: kernel only; VLLM: the best of the rows
that time vLLM's default kernel, on the QUANT basis), the BF16 baseline cell, speed-ups and a
module's `Crossover` over M; plus the recipes (each FP8 scheme is its own recipe), bases and
roll-up module kinds (MODULE_KIND_TABLE) the rest of report/ names. A cell without a number says
why ("failed", "unsupported", "not measured"); nothing missing is ever counted as zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..core.results_schema import Row

#: Recipes in display order; others found in results are appended after these. FP8 is three
#: recipes: the scale layout (vllm_rules/quant_config.py FP8_SCHEMES) picks a different kernel in
#: vLLM, so two schemes never share a cell, a total or a verdict.
RECIPES = ("bf16", "fp8.per_tensor", "fp8.per_token", "fp8.block128", "nvfp4")
RECIPE_LABELS = {"bf16": "BF16", "fp8.per_tensor": "FP8 per-tensor", "fp8.per_token": "FP8 per-token",
                 "fp8.block128": "FP8 block-128", "nvfp4": "NVFP4",
                 "fp8": "FP8 (scheme not recorded)"}
#: The BF16 backend speed-ups are measured against when it has a number: `torch`. For GEMMs that
#: is F.linear on cuBLAS, vLLM's default; for MoE a PyTorch composite, not a vLLM kernel.
BASELINE_BACKEND = "torch"
#: How the torch MoE row is shown: it chains torch._grouped_mm with sort/gather/index_add.
TORCH_MOE_LABEL = "torch composite"
#: The pseudo-recipe of the baseline roll-up: every module at its BF16 baseline cell.
BASELINE = "bf16_baseline"

#: Cost bases of a quantized recipe. QUANT: a backend's kernel + activation-quant row when the run
#: measured one for it (the cost vLLM pays when activations arrive in BF16), else its kernel row.
#: KERNEL: kernel-only rows.
QUANT = "with_quant"
KERNEL = "kernel"
#: The vLLM-default basis: per module only the rows whose `vllm_default` is set, on the QUANT basis
#: (vLLM quantizes activations on every call).
VLLM = "vllm_default"
#: Row marks of a cell whose winner times vLLM's default ("same") or its design ("design").
VLLM_MARKS = {"same": "[vLLM]", "design": "[vLLM design]"}
#: Row marks by what the row times (Row.timed_as, vllm_rules/dispatch.py TIMED_LABELS); a
#: comparison row has none.
TIMED_MARKS = {"vllm_kernel": VLLM_MARKS["same"], "vllm_design_vllm_tiles": VLLM_MARKS["design"],
               "vllm_design_tuned_tiles": "[vLLM design, tuned tiles]", "fallback": "[fallback]",
               "stand_in": "[stand-in]"}


def recipe_of(row: Row) -> str:
    """The report recipe of a row: its dtype, and for FP8 its scheme ("fp8.block128")."""
    if row.dtype == "fp8":
        return f"fp8.{row.scheme}" if row.scheme else "fp8"
    return row.dtype


def recipe_dtype(recipe: str) -> str:
    """The dtype of a recipe key ("fp8.per_token" -> "fp8")."""
    return recipe.split(".", 1)[0]


def recipe_scheme(recipe: str) -> str:
    """The FP8 scheme of a recipe key ("" for BF16/NVFP4)."""
    return recipe.split(".", 1)[1] if "." in recipe else ""


def recipe_label(recipe: str) -> str:
    return RECIPE_LABELS.get(recipe, recipe)

ATTN = "attention / mixer projections"
MLP = "MLP"
MOE = "MoE"
ROUTER = "router"
LM_HEAD = "lm_head"
OTHER = "other"
MODULE_KINDS = (ATTN, MLP, MOE, ROUTER, LM_HEAD, OTHER)

#: Plan entry name -> module kind of the roll-up; first match wins. A pattern ending in "." matches
#: a name prefix (families such as "mla.*"); otherwise the whole name must match, after dropping a
#: "[...]" suffix ("gate_up_proj[dense]"). MoE rows (kind "moe") are always MoE; unmatched -> OTHER.
MODULE_KIND_TABLE: tuple[tuple[str, str], ...] = (
    ("shared_expert_gate", ROUTER),
    ("router", ROUTER),
    ("lm_head", LM_HEAD),
    ("shared_expert.", MLP),
    ("gate_up_proj", MLP),
    ("up_proj", MLP),
    ("gate_proj", MLP),
    ("down_proj", MLP),
    ("per_layer_input_gate", MLP),
    ("per_layer_projection", MLP),
    ("per_layer_model_projection", MLP),
    ("moe.", MOE),
    ("qkv_proj", ATTN),
    ("q_proj", ATTN),
    ("o_proj", ATTN),
    ("mla.", ATTN),
    ("indexer.", ATTN),
    ("gdn.", ATTN),
    ("mamba.", ATTN),
    ("short_conv.", ATTN),
)


def module_kind(name: str, kind: str = "gemm") -> str:
    """The roll-up bucket of a plan entry (see MODULE_KIND_TABLE)."""
    if kind == "moe":
        return MOE
    base = name.split("[", 1)[0]
    for pattern, bucket in MODULE_KIND_TABLE:
        if base == pattern or (pattern.endswith(".") and base.startswith(pattern)):
            return bucket
    return OTHER


# ----------------------------------------------------------------------------------------------
# Cells: the best number for one (module, M, recipe, basis), or why there is none


@dataclass(frozen=True)
class Cell:
    """One table cell: the winning row, or the reason no row has a number."""

    row: Row | None
    """The fastest ok row (None when there is no number)."""
    status: str
    """"ok", "failed", "unsupported" or "not measured" (no row at all)."""
    reason: str = ""
    """Why there is no number: the distinct "backend: reason" texts of the rows that tried."""

    @property
    def us(self) -> float | None:
        return self.row.median_us if self.row is not None else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(p10, p90) of the winning row's samples; (median, median) for a row recorded without
        percentiles (no spread known: it compares by its median alone); None without a number."""
        return spread_of(self.row) if self.row is not None else None

    @property
    def backend(self) -> str:
        return backend_label(self.row) if self.row is not None else ""


NOT_MEASURED = Cell(None, "not measured")


def spread_of(row: Row) -> tuple[float, float] | None:
    """(p10, p90) of a timed row, (median, median) when it recorded no percentiles."""
    if row.median_us is None:
        return None
    if row.p10_us is None or row.p90_us is None:
        return (row.median_us, row.median_us)
    return (row.p10_us, row.p90_us)


def clear_win(fast: tuple[float, float], slow: tuple[float, float]) -> bool:
    """Whether the interval `fast` (p10, p90) lies wholly below `slow`: a win larger than the
    spread. Overlapping intervals are a tie."""
    return fast[1] < slow[0]


def backend_label(row: Row) -> str:
    """The backend as shown: "cudnn", "torch/per_token" (variant appended when there is one);
    the torch MoE row is "torch composite", so it never reads as a vLLM kernel."""
    name = TORCH_MOE_LABEL if (row.kind, row.backend) == ("moe", BASELINE_BACKEND) else row.backend
    return f"{name}/{row.variant}" if row.variant else name


def vllm_mark(row: Row | None) -> str:
    """What the row times relative to vLLM's default (TIMED_MARKS): " [vLLM]", " [vLLM design]",
    " [vLLM design, tuned tiles]", " [fallback]", " [stand-in]"; "" for a comparison. A row
    without `timed_as` is marked by `vllm_default` alone."""
    if row is None:
        return ""
    mark = TIMED_MARKS.get(row.timed_as, "") if row.timed_as else VLLM_MARKS.get(row.vllm_default, "")
    return f" {mark}" if mark else ""


def has_time(row: Row) -> bool:
    """Whether the row is a number: ok with a finite, positive median."""
    t = row.median_us
    return row.status == "ok" and t is not None and math.isfinite(t) and t > 0


def best_cell(rows: Sequence[Row]) -> Cell:
    """The fastest ok row among `rows`; else "failed" if any failed, "unsupported", or not measured."""
    ok = [r for r in rows if has_time(r)]
    if ok:
        return Cell(min(ok, key=lambda r: r.median_us), "ok")
    if not rows:
        return NOT_MEASURED
    status = "failed" if any(r.status != "unsupported" for r in rows) else "unsupported"
    reasons: list[str] = []
    for r in rows:
        why = r.reason or ("ok row without a time" if r.status == "ok" else "no reason recorded")
        text = f"{backend_label(r)}{' +quant' if r.with_quant else ''}: {why}"
        if text not in reasons:
            reasons.append(text)
    return Cell(None, status, "; ".join(reasons))


def rows_on_quant_basis(rows: Sequence[Row]) -> list[Row]:
    """Per backend (backend, routine, variant): its with_quant rows when the run has any, else its
    kernel rows. A failed with_quant twin is NOT replaced by the kernel-only number."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.backend, r.routine, r.variant), []).append(r)
    out: list[Row] = []
    for group in groups.values():
        quant = [r for r in group if r.with_quant]
        out.extend(quant if quant else group)
    return out


def recipe_cell(rows: Sequence[Row], basis: str) -> Cell:
    """Best cell of one (module, M, recipe) for a cost basis (QUANT, KERNEL or VLLM)."""
    if basis == KERNEL:
        return best_cell([r for r in rows if not r.with_quant])
    if basis == VLLM:
        return best_cell(rows_on_quant_basis([r for r in rows if r.vllm_default in VLLM_MARKS]))
    return best_cell(rows_on_quant_basis(rows))


def default_cell(rows: Sequence[Row], basis: str) -> Cell:
    """The best vLLM-default row of one (module, M, recipe) on a table's basis (QUANT or KERNEL):
    rows marked "same" or "design" (an attention row's "vllm_flashinfer" is no default)."""
    return recipe_cell([r for r in rows if r.vllm_default in VLLM_MARKS], basis)


def baseline_cell(bf16_rows: Sequence[Row]) -> Cell:
    """The BF16 baseline: the "torch" row when it has a number, else the best BF16 kernel row."""
    kernel = [r for r in bf16_rows if not r.with_quant]
    torch_ok = [r for r in kernel if r.backend == BASELINE_BACKEND and has_time(r)]
    return best_cell(torch_ok) if torch_ok else best_cell(kernel)


def speedup(baseline: Cell, cell: Cell) -> float | None:
    """baseline time / cell time (> 1: the cell is faster), None when either has no number."""
    if baseline.us is None or cell.us is None:
        return None
    return baseline.us / cell.us


# ----------------------------------------------------------------------------------------------
# Crossovers: the smallest M where a recipe's cell beats the baseline's


@dataclass(frozen=True)
class Crossover:
    """Where a quantized recipe starts to beat the BF16 baseline for one module."""

    first_win: int | None
    """Smallest M in the sweep where the recipe wins by more than the spread (its p90 below the
    baseline's p10; medians alone for rows without percentiles). None: never / no data."""
    wins: tuple[int, ...]
    """Every M where it wins."""
    compared: tuple[int, ...]
    """Ms where both numbers exist."""
    no_data: tuple[int, ...]
    """Ms where one of the two has no number."""
    ties: tuple[int, ...] = ()
    """Ms where the recipe's median is lower but the two p10-p90 spreads overlap: a tie."""

    def text(self) -> str:
        if not self.compared:
            return "no data"
        lo, hi = self.compared[0], self.compared[-1]
        sweep = f"M={lo}..{hi}" if len(self.compared) > 1 else f"M={lo}"
        if self.first_win is None:
            text = f"never in this sweep ({sweep})"
        else:
            text = f"M={self.first_win}"
            later_losses = [m for m in self.compared if m > self.first_win and m not in self.wins]
            if later_losses:
                text += f" (loses again at M={', '.join(map(str, later_losses))})"
        if self.ties:
            text += f"; tie within the p10-p90 spread at M={', '.join(map(str, self.ties))}"
        gaps = [m for m in self.no_data if self.first_win is None or m < self.first_win]
        if gaps:
            text += f"; no data at M={', '.join(map(str, gaps))}"
        return text


def crossover(baselines: Sequence[Cell], cells: Sequence[Cell], ms: Sequence[int]) -> Crossover:
    """Crossover of one module: `baselines[i]` and `cells[i]` are the cells at `ms[i]`."""
    wins, compared, no_data, ties = [], [], [], []
    for m, b, c in zip(ms, baselines, cells, strict=True):
        if b.us is None or c.us is None or b.spread is None or c.spread is None:
            no_data.append(m)
            continue
        compared.append(m)
        if c.us < b.us and clear_win(c.spread, b.spread):
            wins.append(m)
        elif c.us < b.us:
            ties.append(m)
    return Crossover(wins[0] if wins else None, tuple(wins), tuple(compared), tuple(no_data), tuple(ties))


__all__ = [
    "RECIPES", "RECIPE_LABELS", "BASELINE_BACKEND", "TORCH_MOE_LABEL", "BASELINE", "QUANT", "KERNEL",
    "VLLM", "VLLM_MARKS", "TIMED_MARKS", "recipe_of", "recipe_dtype", "recipe_scheme", "recipe_label", "MODULE_KINDS",
    "MODULE_KIND_TABLE", "ATTN", "MLP", "MOE", "ROUTER", "LM_HEAD", "OTHER", "module_kind", "Cell",
    "NOT_MEASURED", "backend_label", "vllm_mark", "has_time", "best_cell", "rows_on_quant_basis",
    "recipe_cell", "default_cell", "baseline_cell", "speedup", "Crossover", "crossover", "spread_of",
    "clear_win",
]
