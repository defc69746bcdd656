"""report.md and PNG figures, computed only from results.json (one workdir or several).

Everything shown is derived from the rows: per recipe and M the best backend of each plan module,
its speed-up against the BF16 baseline (PyTorch/cuBLAS "torch", what vLLM runs, when it ran), the
per-step roll-up (sum of best time x per-step count by module kind), the crossover M where FP8 /
NVFP4 start to beat BF16, and figures. A cell without a number says why ("failed", "unsupported",
"not measured"); nothing missing is ever counted as zero. references/report.md explains how to
read it.

    python scripts/report.py WORKDIR                 # writes WORKDIR/report.md + fig_*.png
    python scripts/report.py W1 W2 --out cmp/        # one report comparing two runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..vllm_rules.layers import KEPT_IN_BF16, kept_in_bf16
from ..errors import EXIT_USAGE, OneLineArgumentParser, UsageError
from ..files import write_text_atomic
from ..run.results import RESULTS_JSON, RESULTS_SCHEMA_VERSION, Row, load_results, rows_of

REPORT_MD = "report.md"

#: Recipes in display order; others found in results are appended after these.
RECIPES = ("bf16", "fp8", "nvfp4")
RECIPE_LABELS = {"bf16": "BF16", "fp8": "FP8", "nvfp4": "NVFP4"}
#: The BF16 backend speed-ups are measured against when it has a number: cuBLAS via PyTorch,
#: which is what vLLM's unquantized linear layer runs.
BASELINE_BACKEND = "torch"

#: Cost bases of a quantized recipe. QUANT: a backend's kernel + activation-quant row when the run
#: measured one for it (the honest cost when activations arrive in BF16), else its kernel row.
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

#: What the per-step roll-up leaves out; printed under every roll-up.
ROLLUP_EXCLUDES = (
    "attention kernels (prefill/decode attention, SSM/GDN scans), norms, activations outside fused "
    "kernels, rotary embeddings, sampling, communication (all-reduce, all-to-all), CUDA-graph/launch "
    "and scheduling overheads"
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
#: Table text of a module vLLM keeps in BF16 under a quantized recipe (cases.KEPT_IN_BF16).
KEPT_TEXT = "BF16 (kept by vLLM)"


def backend_label(row: Row) -> str:
    """The backend as shown: "cudnn", "torch/per_token" (variant appended when there is one)."""
    return f"{row.backend}/{row.variant}" if row.variant else row.backend


def _has_time(row: Row) -> bool:
    t = row.median_us
    return row.status == "ok" and t is not None and math.isfinite(t) and t > 0


def best_cell(rows: Sequence[Row]) -> Cell:
    """The fastest ok row among `rows`; else "failed" if any failed, "unsupported", or not measured."""
    ok = [r for r in rows if _has_time(r)]
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


def honest_rows(rows: Sequence[Row]) -> list[Row]:
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
    return best_cell(honest_rows(rows))


def baseline_cell(bf16_rows: Sequence[Row]) -> Cell:
    """The BF16 baseline: the "torch" row when it has a number, else the best BF16 kernel row."""
    kernel = [r for r in bf16_rows if not r.with_quant]
    torch_ok = [r for r in kernel if r.backend == BASELINE_BACKEND and _has_time(r)]
    return best_cell(torch_ok) if torch_ok else best_cell(kernel)


def speedup(baseline: Cell, cell: Cell) -> float | None:
    """baseline time / cell time (> 1: the cell is faster), None when either has no number."""
    if baseline.us is None or cell.us is None:
        return None
    return baseline.us / cell.us


# ----------------------------------------------------------------------------------------------
# One workdir, analysed


@dataclass(frozen=True)
class Entry:
    """One plan module as the report shows it."""

    kind: str
    """"gemm" or "moe"."""
    name: str
    """Plan entry name."""
    module_kind: str
    """Roll-up bucket (MODULE_KINDS)."""
    layers: int
    """Per-step invocation count on one rank."""
    shape: str
    """Logical per-rank shape, e.g. "N=6144 K=4096"."""
    padding: tuple[str, ...] = ()
    """Physical shapes that differ from the logical one, e.g. "N 6144->6272 (trtllm)"."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


def _logical_shape(r: Row) -> str:
    if r.kind == "moe":
        experts = f"{r.experts}/{r.global_experts}" if r.global_experts else f"{r.experts}"
        return f"H={r.hidden} I={r.intermediate} E={experts} top-{r.top_k}"
    return f"N={r.n} K={r.k}"


def _padding_notes(rows: Iterable[Row]) -> tuple[str, ...]:
    notes: dict[str, list[str]] = {}
    for r in rows:
        if r.kind == "moe":
            pairs = (("H", r.hidden, r.phys_hidden), ("I", r.intermediate, r.phys_intermediate))
        else:
            pairs = (("N", r.n, r.phys_n), ("K", r.k, r.phys_k))
        diff = [f"{a} {lo}->{ph}" for a, lo, ph in pairs if ph is not None and lo is not None and ph != lo]
        if diff:
            backends = notes.setdefault(" ".join(diff), [])
            if f"{r.dtype} {backend_label(r)}" not in backends:
                backends.append(f"{r.dtype} {backend_label(r)}")
    return tuple(f"{k} ({', '.join(v)})" for k, v in notes.items())


def _plan_entries(plan: dict[str, Any] | None) -> list[Entry]:
    """Entries the plan promises (so a module with no row at all still counts as missing)."""
    out: list[Entry] = []
    if not isinstance(plan, dict):
        return out
    for g in plan.get("gemms") or []:
        out.append(Entry("gemm", g["name"], module_kind(g["name"]), int(g.get("layers", 1)),
                         f"N={g.get('n')} K={g.get('k')}"))
    for m in plan.get("moe") or []:
        experts = f"{m.get('experts')}/{m.get('global_experts')}"
        shape = f"H={m.get('hidden')} I={m.get('intermediate')} E={experts} top-{m.get('top_k')}"
        out.append(Entry("moe", m["name"], MOE, int(m.get("layers", 1)), shape))
    return out


@dataclass(frozen=True)
class Rollup:
    """GEMM + MoE kernel time of one forward step on one rank for one recipe and M."""

    recipe: str
    """A dtype, or "bf16_baseline" (baseline cells: torch where it ran)."""
    m: int
    total_us: float
    """Sum of best time x per-step count over modules WITH a number (partial when incomplete)."""
    by_kind: dict[str, float]
    """The same sum per module kind (only kinds present in the plan)."""
    missing: tuple[str, ...]
    """Entry names without a number; non-empty means the total is incomplete."""
    n_modules: int

    @property
    def complete(self) -> bool:
        return not self.missing


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
    for m, b, c in zip(ms, baselines, cells):
        if b.us is None or c.us is None:
            no_data.append(m)
            continue
        compared.append(m)
        if c.us < b.us:
            wins.append(m)
    return Crossover(wins[0] if wins else None, tuple(wins), tuple(compared), tuple(no_data))


class Analysis:
    """Everything the report shows about one workdir, derived from its results.json."""

    def __init__(self, results: dict[str, Any], path: str = ""):
        self.path = path
        self.results = results
        self.rows: list[Row] = rows_of(results)
        plan = results.get("plan")
        self.plan: dict[str, Any] | None = plan if isinstance(plan, dict) else None
        self._groups: dict[tuple[str, str, int, str], list[Row]] = {}
        for r in self.rows:
            self._groups.setdefault((r.kind, r.name, r.m, r.dtype), []).append(r)
        self.entries = self._entries()
        self.ms: list[int] = sorted({r.m for r in self.rows})
        present = {r.dtype for r in self.rows}
        self.recipes: list[str] = [d for d in RECIPES if d in present] + sorted(present - set(RECIPES))
        self.quantized = [d for d in self.recipes if d != "bf16"]

    def _entries(self) -> list[Entry]:
        by_key: dict[tuple[str, str], list[Row]] = {}
        for r in self.rows:
            by_key.setdefault((r.kind, r.name), []).append(r)
        entries: list[Entry] = []
        seen = set()
        for e in _plan_entries(self.plan):
            rows = by_key.get(e.key, [])
            entries.append(Entry(e.kind, e.name, e.module_kind, e.layers, e.shape, _padding_notes(rows)))
            seen.add(e.key)
        for key, rows in by_key.items():
            if key in seen:
                continue
            r = rows[0]
            entries.append(Entry(r.kind, r.name, module_kind(r.name, r.kind), int(r.layers),
                                 _logical_shape(r), _padding_notes(rows)))
        return entries

    # --- cells
    def rows_for(self, entry: Entry, m: int, dtype: str) -> list[Row]:
        return self._groups.get((entry.kind, entry.name, m, dtype), [])

    def cell(self, entry: Entry, m: int, dtype: str, basis: str = QUANT) -> Cell:
        return recipe_cell(self.rows_for(entry, m, dtype), basis)

    def baseline(self, entry: Entry, m: int) -> Cell:
        return baseline_cell(self.rows_for(entry, m, "bf16"))

    def has_number(self, dtype: str) -> bool:
        """Whether any row of this recipe has a time."""
        return any(r.dtype == dtype and _has_time(r) for r in self.rows)

    def has_rows(self, entry: Entry, dtype: str) -> bool:
        """Whether any M of this module has a row of this recipe."""
        return any(self.rows_for(entry, m, dtype) for m in self.ms)

    def has_quant_rows(self, dtype: str) -> bool:
        return any(r.with_quant and r.dtype == dtype for r in self.rows)

    # --- aggregates
    def rollup(self, recipe: str, m: int, basis: str = QUANT) -> Rollup:
        by_kind: dict[str, float] = {}
        missing: list[str] = []
        total = 0.0
        for e in self.entries:
            by_kind.setdefault(e.module_kind, 0.0)
            # vLLM runs the router, the shared-expert gate and lm_head in BF16 under every recipe
            # (cases.KEPT_IN_BF16), so a quantized step pays their BF16 time.
            in_bf16 = recipe == "bf16_baseline" or (recipe != "bf16" and kept_in_bf16(e.name))
            c = self.baseline(e, m) if in_bf16 else self.cell(e, m, recipe, basis)
            if c.us is None:
                missing.append(e.name)
                continue
            t = c.us * e.layers
            by_kind[e.module_kind] += t
            total += t
        return Rollup(recipe, m, total, by_kind, tuple(missing), len(self.entries))

    def crossover(self, entry: Entry, dtype: str, basis: str = QUANT) -> Crossover:
        return crossover([self.baseline(entry, m) for m in self.ms],
                         [self.cell(entry, m, dtype, basis) for m in self.ms], self.ms)

    # --- header facts (every key optional)
    @property
    def model(self) -> str:
        model = (self.plan or {}).get("model") or {}
        if model.get("name"):
            return str(model["name"])
        cmd = self.results.get("command") or []
        return str(cmd[1]) if len(cmd) > 1 and not str(cmd[1]).startswith("-") else "unknown"

    @property
    def tp_ep(self) -> tuple[Any, Any]:
        plan = self.plan or {}
        return plan.get("tp", "unknown"), plan.get("ep", "unknown")

    @property
    def gpu(self) -> str:
        env = self.results.get("environment") or {}
        gpu = env.get("gpu")
        if isinstance(gpu, dict):
            return str(gpu.get("name") or "unknown")
        if isinstance(gpu, str) and gpu:
            return gpu
        return str(env.get("gpu_name") or "unknown")

    @property
    def label(self) -> str:
        if self.plan is None:  # --nks / builtin runs: no model, no TP/EP; name the workdir
            return os.path.basename(os.path.normpath(self.path)) if self.path else "run without a plan"
        tp, ep = self.tp_ep
        return f"{self.model} TP={tp} EP={ep}"

    def timers(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.rows:
            if r.status == "ok":
                counts[r.timer or "unknown"] = counts.get(r.timer or "unknown", 0) + 1
        return counts

    def warnings(self) -> list[str]:
        env = self.results.get("environment") or {}
        out = [str(w) for w in (env.get("warnings") or []) if str(w).strip()]
        versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
        wheel, checkout = versions.get("flashinfer_wheel"), versions.get("flashinfer_checkout")
        if wheel and checkout and not any(str(wheel) in w and str(checkout) in w for w in out):
            from ..env.environment import versions_match  # light: heavy imports there are lazy

            if versions_match(str(wheel), str(checkout)) is False:
                out.append(f"FlashInfer wheel {wheel} != driver checkout {checkout}: the driver may "
                           "call APIs the wheel does not have; numbers may not match either release")
        tool_version = (self.results.get("tool") or {}).get("version")
        from .. import __version__

        if tool_version and tool_version != __version__:
            out.append(f"results written by benchmark-model-kernels {tool_version}; report by {__version__}")
        n = {s: sum(r.status == s for r in self.rows) for s in ("failed", "unsupported")}
        if n["failed"]:
            out.append(f"{n['failed']} of {len(self.rows)} rows FAILED (see 'Cells without a number')")
        if n["unsupported"]:
            out.append(f"{n['unsupported']} of {len(self.rows)} rows unsupported on this GPU/shape")
        events = sum(r.status == "ok" and r.timer == "cuda_events" for r in self.rows)
        if events:
            out.append(f"{events} ok rows were timed with CUDA events, not CUPTI (less precise: "
                       "includes launch gaps)")
        unplaced = (self.plan or {}).get("unsupported") or []
        if unplaced:
            names = ", ".join(str(u.get("module", "?")) for u in unplaced[:5])
            out.append(f"the plan has {len(unplaced)} module(s) it could not place ({names}"
                       f"{', ...' if len(unplaced) > 5 else ''}); they are in no table or total")
        if not any(_has_time(r) for r in self.rows):
            out.append("no row has a number: nothing below is a measurement")
        return out


# ----------------------------------------------------------------------------------------------
# Markdown


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
    plan = a.plan or {}
    model = plan.get("model") or {}
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
    arch = model.get("architecture") or "unknown"
    layers = model.get("num_hidden_layers")
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
        ("Rows", f"{len(a.rows)} ({sum(_has_time(r) for r in a.rows)} with a number)"),
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


def _bases(a: Analysis, dtype: str) -> list[str]:
    return [QUANT, KERNEL] if a.has_quant_rows(dtype) else [QUANT]


def _rollup_text(r: Rollup, short: bool = False) -> str:
    if r.n_modules and len(r.missing) == r.n_modules:
        return "no number" if short else f"no number (all {r.n_modules} modules missing)"
    text = fmt_us(r.total_us)
    if not r.complete:
        text += (f" (incomplete: {len(r.missing)}/{r.n_modules} missing)" if short
                 else f" (incomplete: {len(r.missing)} of {r.n_modules} modules missing)")
    return text


def _rollup_variants(a: Analysis) -> list[tuple[str, str, str]]:
    """(recipe, basis, title) of every roll-up row: the BF16 baseline, then each recipe and basis."""
    out = [("bf16_baseline", QUANT, f"BF16 baseline ({BASELINE_BACKEND} where it ran)")]
    # A recipe with no measured row is left out: its total would hold only the modules vLLM keeps
    # in BF16 (router, lm_head), which would read as a quantized step.
    for d in [d for d in a.recipes if a.has_number(d)]:
        for basis in _bases(a, d):
            if d == "bf16":
                suffix = " best"
            else:
                suffix = " best +quant" if basis == QUANT and a.has_quant_rows(d) else " best kernel only"
            out.append((d, basis, f"{RECIPE_LABELS.get(d, d)}{suffix}"))
    return out


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
    variants = _rollup_variants(a)
    dropped = [RECIPE_LABELS.get(d, d) for d in a.recipes if not a.has_number(d)]
    body, missing_notes = [], []
    for recipe, basis, title in variants:
        row = [title]
        for m in a.ms:
            base = a.rollup("bf16_baseline", m)
            r = a.rollup(recipe, m, basis)
            sp = base.total_us / r.total_us if (r.complete and base.complete and r.total_us) else None
            shown = sp is not None and recipe != "bf16_baseline"
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
        for basis in _bases(a, d):
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
    cols = [(d, basis) for d in a.quantized for basis in _bases(a, d)]
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
        if _has_time(r):
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


@dataclass(frozen=True)
class Verdict:
    """The fastest recipe at one M, by per-step roll-up total (results.json only)."""

    m: int
    totals: tuple[tuple[str, float | None], ...]
    """(roll-up title, total us) per candidate in table order; None when the total is incomplete."""
    fastest: str
    """Title of the fastest complete total ("" when no total is complete)."""
    speedup: float | None
    """BF16 baseline total / fastest total (> 1: faster than the baseline)."""
    not_ranked: tuple[str, ...]
    """Candidates left out of the ranking because their total is incomplete."""


def summary_candidates(a: Analysis) -> list[tuple[str, str, str]]:
    """(recipe, basis, title) the summary ranks: the BF16 baseline, the best BF16, and every
    quantized recipe with a number on the basis vLLM pays (+quant when the run timed it)."""
    out = []
    for recipe, basis, title in _rollup_variants(a):
        if recipe not in ("bf16_baseline", "bf16") and basis == KERNEL and a.has_quant_rows(recipe):
            continue  # kernel-only is an ideal case: vLLM quantizes activations on every call
        out.append((recipe, basis, title))
    return out


def summary_verdicts(a: Analysis) -> list[Verdict]:
    out = []
    for m in a.ms:
        base = a.rollup("bf16_baseline", m)
        totals, ranked, not_ranked = [], [], []
        for i, (recipe, basis, title) in enumerate(summary_candidates(a)):
            r = a.rollup(recipe, m, basis)
            total = r.total_us if r.complete and r.total_us > 0 else None
            totals.append((title, total))
            # On a tie the earlier candidate wins: the baseline, then BF16, then quantized recipes.
            (ranked if total is not None else not_ranked).append((total, i, title))
        best = min(ranked) if ranked else None
        sp = base.total_us / best[0] if best and base.complete and best[0] else None
        out.append(Verdict(m, tuple(totals), best[2] if best else "", sp,
                           tuple(t for *_, t in not_ranked)))
    return out


def _verdict_text(v: Verdict) -> str:
    if not v.fastest:
        return "no complete total"
    if v.fastest.startswith("BF16 baseline"):
        return "BF16 baseline"
    return f"**{v.fastest}** ({fmt_x(v.speedup)} vs baseline)" if v.speedup else f"**{v.fastest}**"


def _common_reason(a: Analysis, dtype: str) -> str:
    reasons: dict[str, int] = {}
    for r in a.rows:
        if r.dtype == dtype and not _has_time(r) and r.reason:
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
        for i, (a, label) in enumerate(zip(analyses, labels), 1):
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


def run_labels(analyses: Sequence[Analysis]) -> list[str]:
    """One distinct label per run ("model TP=.. EP=..", numbered when two are equal)."""
    labels = [a.label for a in analyses]
    out = []
    for i, label in enumerate(labels):
        out.append(f"{label} (#{i + 1})" if labels.count(label) > 1 else label)
    return out


# ----------------------------------------------------------------------------------------------
# Peaks for the roofline: from the rows themselves, else roofline.PEAKS


def _peaks_from_rows(rows: Sequence[Row]) -> tuple[dict[str, float], float | None]:
    """The peaks the run itself used: pct_peak_tflops = 100 * tflops / peak  =>  peak = 100 * tflops / pct."""
    tflops: dict[str, list[float]] = {}
    bw: list[float] = []
    for r in rows:
        if r.tflops and r.pct_peak_tflops:
            tflops.setdefault(r.dtype, []).append(100.0 * r.tflops / r.pct_peak_tflops)
        if r.tb_per_sec and r.pct_peak_bandwidth:
            bw.append(100.0 * r.tb_per_sec / r.pct_peak_bandwidth)
    return ({d: statistics.median(v) for d, v in tflops.items()}, statistics.median(bw) if bw else None)


def _compute_capability(gpu: dict[str, Any]) -> tuple[int, int] | None:
    """environment["gpu"]["compute_capability"] as (major, minor), from "9.0", [9, 0] or 90."""
    cc = gpu.get("compute_capability")
    try:
        if isinstance(cc, (list, tuple)) and len(cc) == 2:
            return int(cc[0]), int(cc[1])
        if isinstance(cc, str) and "." in cc:
            major, minor = cc.split(".", 1)
            return int(major), int(minor)
        if isinstance(cc, (int, str)):
            return int(cc) // 10, int(cc) % 10
    except ValueError:
        pass
    return None


def _peaks_from_table(a: Analysis) -> tuple[dict[str, float], float | None, str]:
    """The datasheet peaks of roofline.PEAKS for the run's GPU (optional sibling module)."""
    try:
        from ..run import roofline  # noqa: PLC0415
        find_peak, peak_tflops = roofline.find_peak, roofline.peak_tflops
    except (ImportError, AttributeError):
        return {}, None, "roofline.py (datasheet peaks) is not available"
    env = a.results.get("environment") or {}
    gpu = env.get("gpu") if isinstance(env.get("gpu"), dict) else {}
    peak = find_peak(a.gpu, _compute_capability(gpu)) if a.gpu != "unknown" else None
    if peak is None:
        return {}, None, f"GPU {a.gpu!r} has no entry in roofline.PEAKS"
    tflops = {d: t for d in a.recipes if (t := peak_tflops(peak, d))}
    return tflops, peak.hbm_tb_per_sec, f"{peak.name} datasheet peaks"


def roofline_peaks(a: Analysis) -> tuple[dict[str, float], float | None, str]:
    """(dense TFLOP/s per dtype, HBM TB/s, note). Prefers the peaks the run recorded in its rows."""
    tflops, bw = _peaks_from_rows(a.rows)
    note = "ceilings: the peaks the run used for its %-of-peak columns"
    if not tflops or bw is None:
        t2, bw2, source = _peaks_from_table(a)
        if not t2 and bw2 is None:
            return tflops, bw, (note if tflops or bw else f"no ceilings drawn: {source}")
        tflops = {**t2, **tflops}
        bw = bw if bw is not None else bw2
        note = f"ceilings: {source}"
    return tflops, bw, note


# ----------------------------------------------------------------------------------------------
# Entry points


def _load(workdir: str) -> dict[str, Any]:
    if not os.path.isdir(workdir):
        raise UsageError("WORKDIR", workdir, "no such directory; pass a benchmark workdir that holds results.json")
    path = os.path.join(workdir, RESULTS_JSON)
    if not os.path.isfile(path):
        raise UsageError("WORKDIR", workdir, f"has no {RESULTS_JSON}; pass the workdir of a finished or "
                         "interrupted benchmark run")
    try:
        results = load_results(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError("WORKDIR", workdir, f"{RESULTS_JSON} is not valid JSON ({exc}); restore it or "
                         "rerun the benchmark") from None
    if not isinstance(results, dict) or not isinstance(results.get("rows", []), list):
        raise UsageError("WORKDIR", workdir, f"{RESULTS_JSON} is not a benchmark results file (no 'rows' list)")
    schema = results.get("schema_version")
    if schema != RESULTS_SCHEMA_VERSION:
        raise UsageError("WORKDIR", workdir, f"{RESULTS_JSON} has schema_version {schema}; this report "
                         f"reads version {RESULTS_SCHEMA_VERSION}: use the tool version that wrote it")
    try:
        rows_of(results)
    except TypeError as exc:
        raise UsageError("WORKDIR", workdir, f"{RESULTS_JSON} has a malformed row ({exc})") from None
    return results


def default_out_dir(workdirs: Sequence[str]) -> str:
    """One workdir: itself. Several: their common parent directory (where a multi-model run puts
    its sub-workdirs), unless that is the filesystem root."""
    if len(workdirs) == 1:
        return workdirs[0]
    common = os.path.commonpath([os.path.abspath(w) for w in workdirs])
    if os.path.dirname(common) == common:
        raise UsageError("--out", "(not given)", "the workdirs share no parent directory; pass --out DIR")
    return common


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-." else "_" for c in text)
    return "_".join(p for p in keep.split("_") if p)[:60] or "run"


def write_report(workdirs: Sequence[str], out_dir: str | None = None) -> str:
    """Write report.md (+ fig_*.png) for one or several workdirs; returns the report.md path.

    Raises UsageError for a missing workdir/results.json or an unusable out_dir. Reads results.json
    only; writes only report.md and fig_*.png files in out_dir.
    """
    if not workdirs:
        raise UsageError("WORKDIR", "(none)", "pass at least one benchmark workdir")
    analyses = [Analysis(_load(w), w) for w in workdirs]
    out = out_dir if out_dir is not None else default_out_dir(workdirs)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError("--out", out, "is a file; pass a directory for report.md and the figures")
    os.makedirs(out, exist_ok=True)

    try:
        from . import figures as report_figures
    except ImportError as exc:  # matplotlib missing: the tables still stand on their own
        report_figures, figure_note = None, f"Figures skipped: {exc}."
    else:
        figure_note = ""

    several = len(analyses) > 1
    labels = run_labels(analyses)
    body: list[str] = []
    if several:
        comp_figs = report_figures.comparison_figures(analyses, labels, out) if report_figures else []
        body += [f"# Kernel benchmark comparison: {len(analyses)} runs", ""]
        body += [f"- #{i} {label}: `{a.path}`" for i, (a, label) in enumerate(zip(analyses, labels), 1)] + [""]
        body += comparison_section(analyses, comp_figs)
    for i, (a, label) in enumerate(zip(analyses, labels)):
        prefix = f"fig_{i + 1}_{_slug(label)}_" if several else "fig_"
        figs = report_figures.workdir_figures(a, out, prefix) if report_figures else []
        body += workdir_section(a, figs, level=2 if several else 1)
    if figure_note:
        body += ["", figure_note]
    body += ["", "---", "", "Generated by `scripts/report.py` from results.json only; "
             "references/report.md explains every section.", ""]

    path = os.path.join(out, REPORT_MD)
    write_text_atomic(path, "\n".join(body))
    return path


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="report.py",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write report.md and PNG figures from one or several benchmark workdirs "
        "(each holding a results.json). Reads results.json only; never modifies it.",
        epilog="examples:\n"
        "  python scripts/report.py runs/llama8b\n"
        "      -> runs/llama8b/report.md and runs/llama8b/fig_*.png\n"
        "  python scripts/report.py runs/llama8b_tp1 runs/llama8b_tp2 --out runs/compare\n"
        "      -> one report comparing both runs (per-step totals side by side) plus each run's section\n"
        "  python scripts/report.py runs/sweep/*/\n"
        "      -> several workdirs without --out: the report goes to their common parent (runs/sweep)\n",
    )
    p.add_argument("workdirs", nargs="+", metavar="WORKDIR",
                   help="benchmark workdir holding results.json, e.g. runs/llama8b (repeat to compare runs)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where report.md and fig_*.png go, e.g. --out runs/compare "
                   "(default: the workdir itself; with several workdirs their common parent)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        path = write_report(args.workdirs, args.out)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(path)
    return 0


__all__ = [
    "REPORT_MD", "MODULE_KIND_TABLE", "MODULE_KINDS", "QUANT", "KERNEL", "Cell", "Entry", "Rollup",
    "Crossover", "Analysis", "module_kind", "best_cell", "honest_rows", "recipe_cell", "baseline_cell",
    "speedup", "crossover", "roofline_peaks", "Verdict", "summary_candidates", "summary_verdicts",
    "summary_lines", "KEPT_TEXT", "default_out_dir", "module_kind_table_markdown",
    "write_report", "main",
]
