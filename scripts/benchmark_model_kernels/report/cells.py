"""The vocabulary and the rules of one report cell: pure functions of `run/results.py` Rows.

In: the rows of one (module, M, recipe). Out: the best backend's `Cell` on a cost basis (QUANT:
kernel + activation quantization where measured; KERNEL: kernel only), the BF16 baseline cell,
speed-ups and a module's `Crossover` over M; plus the recipes, bases and roll-up module kinds
(MODULE_KIND_TABLE) the rest of report/ names. A cell without a number says why ("failed",
"unsupported", "not measured"); nothing missing is ever counted as zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..run.results import Row

#: Recipes in display order; others found in results are appended after these.
RECIPES = ("bf16", "fp8", "nvfp4")
RECIPE_LABELS = {"bf16": "BF16", "fp8": "FP8", "nvfp4": "NVFP4"}
#: The BF16 backend speed-ups are measured against when it has a number: cuBLAS via PyTorch,
#: which is what vLLM's unquantized linear layer runs.
BASELINE_BACKEND = "torch"
#: The pseudo-recipe of the baseline roll-up: every module at its BF16 baseline cell.
BASELINE = "bf16_baseline"

#: Cost bases of a quantized recipe. QUANT: a backend's kernel + activation-quant row when the run
#: measured one for it (the cost vLLM pays when activations arrive in BF16), else its kernel row.
#: KERNEL: kernel-only rows.
QUANT = "with_quant"
KERNEL = "kernel"

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
    ("qkv_proj", ATTN),
    ("o_proj", ATTN),
    ("mla.", ATTN),
    ("indexer.", ATTN),
    ("gdn.", ATTN),
    ("mamba.", ATTN),
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
    def backend(self) -> str:
        return backend_label(self.row) if self.row is not None else ""


NOT_MEASURED = Cell(None, "not measured")


def backend_label(row: Row) -> str:
    """The backend as shown: "cudnn", "torch/per_token" (variant appended when there is one)."""
    return f"{row.backend}/{row.variant}" if row.variant else row.backend


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
    """Best cell of one (module, M, recipe) for a cost basis (QUANT or KERNEL)."""
    if basis == KERNEL:
        return best_cell([r for r in rows if not r.with_quant])
    return best_cell(rows_on_quant_basis(rows))


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
    """Smallest M in the sweep with recipe time < baseline time (None: never / no data)."""
    wins: tuple[int, ...]
    """Every M where it wins."""
    compared: tuple[int, ...]
    """Ms where both numbers exist."""
    no_data: tuple[int, ...]
    """Ms where one of the two has no number."""

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
        gaps = [m for m in self.no_data if self.first_win is None or m < self.first_win]
        if gaps:
            text += f"; no data at M={', '.join(map(str, gaps))}"
        return text


def crossover(baselines: Sequence[Cell], cells: Sequence[Cell], ms: Sequence[int]) -> Crossover:
    """Crossover of one module: `baselines[i]` and `cells[i]` are the cells at `ms[i]`."""
    wins, compared, no_data = [], [], []
    for m, b, c in zip(ms, baselines, cells, strict=True):
        if b.us is None or c.us is None:
            no_data.append(m)
            continue
        compared.append(m)
        if c.us < b.us:
            wins.append(m)
    return Crossover(wins[0] if wins else None, tuple(wins), tuple(compared), tuple(no_data))


__all__ = [
    "RECIPES", "RECIPE_LABELS", "BASELINE_BACKEND", "BASELINE", "QUANT", "KERNEL", "MODULE_KINDS",
    "MODULE_KIND_TABLE", "ATTN", "MLP", "MOE", "ROUTER", "LM_HEAD", "OTHER", "module_kind", "Cell",
    "NOT_MEASURED", "backend_label", "has_time", "best_cell", "rows_on_quant_basis", "recipe_cell",
    "baseline_cell", "speedup", "Crossover", "crossover",
]
