"""One workdir analysed: what the report shows, computed from one parsed results.json.

In: a results dict (as `run/results.py` loads it; its "plan" read through `plan/schema.py`'s
`Plan.from_dict`). Out: an `Analysis`: the plan's modules (`Entry`), their cells per M and recipe
(the rules are in `cells.py`, re-exported here), per-step roll-ups (`Rollup`, each computed once),
crossovers, the summary's ranking (`Verdict`), warnings, run labels and the roofline peaks.
`markdown.py` and `figures.py` render it. No file I/O, no Markdown; nothing here measures.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .. import __version__
from ..env.environment import version_warnings
from ..plan.schema import Plan
from ..run.results import Row, rows_of
from ..vllm_rules.layers import kept_in_bf16
from .cells import (
    ATTN,
    BASELINE,
    BASELINE_BACKEND,
    KERNEL,
    LM_HEAD,
    MLP,
    MODULE_KIND_TABLE,
    MODULE_KINDS,
    MOE,
    NOT_MEASURED,
    OTHER,
    QUANT,
    RECIPE_LABELS,
    RECIPES,
    ROUTER,
    Cell,
    Crossover,
    backend_label,
    baseline_cell,
    best_cell,
    crossover,
    has_time,
    module_kind,
    recipe_cell,
    rows_on_quant_basis,
    speedup,
)

# ----------------------------------------------------------------------------------------------
# Plan entries and roll-ups


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


def plan_of(results: dict[str, Any]) -> Plan | None:
    """The plan a results.json records (None for runs without one: --nks, builtin)."""
    plan = results.get("plan")
    return Plan.from_dict(plan) if isinstance(plan, dict) else None


def _plan_entries(plan: Plan | None) -> list[Entry]:
    """Entries the plan promises (so a module with no row at all still counts as missing)."""
    if plan is None:
        return []
    out = [Entry("gemm", g.name, module_kind(g.name), int(g.layers), f"N={g.n} K={g.k}") for g in plan.gemms]
    for m in plan.moe:
        shape = f"H={m.hidden} I={m.intermediate} E={m.experts}/{m.global_experts} top-{m.top_k}"
        out.append(Entry("moe", m.name, MOE, int(m.layers), shape))
    return out


@dataclass(frozen=True)
class Rollup:
    """GEMM + MoE kernel time of one forward step on one rank for one recipe and M."""

    recipe: str
    """A dtype, or BASELINE (baseline cells: torch where it ran)."""
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


def _flag_value(command: Any, flag: str) -> str | None:
    """The value a recorded command line gave `flag` ("--flag X" or "--flag=X"), else None."""
    args = [str(c) for c in command] if isinstance(command, list) else []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    return None


# ----------------------------------------------------------------------------------------------
# One workdir, analysed


class Analysis:
    """Everything the report shows about one workdir, derived from its results.json."""

    def __init__(self, results: dict[str, Any], path: str = ""):
        self.path = path
        self.results = results
        self.rows: list[Row] = rows_of(results)
        self.plan: Plan | None = plan_of(results)
        self._groups: dict[tuple[str, str, int, str], list[Row]] = {}
        for r in self.rows:
            self._groups.setdefault((r.kind, r.name, r.m, r.dtype), []).append(r)
        self.entries = self._entries()
        self.ms: list[int] = sorted({r.m for r in self.rows})
        present = {r.dtype for r in self.rows}
        self.recipes: list[str] = [d for d in RECIPES if d in present] + sorted(present - set(RECIPES))
        self.quantized = [d for d in self.recipes if d != "bf16"]
        # Tables, summary and figures all read the same roll-ups: each is computed once.
        self._rollups: dict[tuple[str, str, int], Rollup] = {}

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
        return any(r.dtype == dtype and has_time(r) for r in self.rows)

    def has_rows(self, entry: Entry, dtype: str) -> bool:
        """Whether any M of this module has a row of this recipe."""
        return any(self.rows_for(entry, m, dtype) for m in self.ms)

    def has_quant_rows(self, dtype: str) -> bool:
        return any(r.with_quant and r.dtype == dtype for r in self.rows)

    # --- aggregates
    def rollup(self, recipe: str, m: int, basis: str = QUANT) -> Rollup:
        key = (recipe, basis, m)
        if key not in self._rollups:
            self._rollups[key] = self._rollup(recipe, m, basis)
        return self._rollups[key]

    def _rollup(self, recipe: str, m: int, basis: str) -> Rollup:
        by_kind: dict[str, float] = {}
        missing: list[str] = []
        total = 0.0
        for e in self.entries:
            by_kind.setdefault(e.module_kind, 0.0)
            # vLLM runs the router, the shared-expert gate and lm_head in BF16 under every recipe
            # (vllm_rules/layers.py KEPT_IN_BF16), so a quantized step pays their BF16 time.
            in_bf16 = recipe == BASELINE or (recipe != "bf16" and kept_in_bf16(e.name))
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
        if self.plan is not None and self.plan.model.name:
            return str(self.plan.model.name)
        cmd = self.results.get("command") or []
        return str(cmd[1]) if len(cmd) > 1 and not str(cmd[1]).startswith("-") else "unknown"

    @property
    def tp_ep(self) -> tuple[Any, Any]:
        return (self.plan.tp, self.plan.ep) if self.plan is not None else ("unknown", "unknown")

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

    def _version_warnings(self, recorded: list[str]) -> list[str]:
        """The wheel-vs-checkout warning of env/environment.py, for results whose environment did
        not record it (older or hand-made files): judged by the same rule, never a second copy."""
        env = self.results.get("environment") or {}
        versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
        wheel, checkout = versions.get("flashinfer_wheel"), versions.get("flashinfer_checkout")
        if not wheel or not checkout or any(str(wheel) in w and str(checkout) in w for w in recorded):
            return []
        pair = {"flashinfer_wheel": str(wheel), "flashinfer_checkout": str(checkout)}
        repo = _flag_value(self.results.get("command"), "--flashinfer_repo") or "checkout path not recorded"
        return [w for w in version_warnings(pair, repo) if w not in recorded]

    def warnings(self) -> list[str]:
        env = self.results.get("environment") or {}
        out = [str(w) for w in (env.get("warnings") or []) if str(w).strip()]
        out += self._version_warnings(out)
        tool_version = (self.results.get("tool") or {}).get("version")
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
        unplaced = self.plan.unsupported if self.plan is not None else ()
        if unplaced:
            names = ", ".join(str(u.module) for u in unplaced[:5])
            out.append(f"the plan has {len(unplaced)} module(s) it could not place ({names}"
                       f"{', ...' if len(unplaced) > 5 else ''}); they are in no table or total")
        if not any(has_time(r) for r in self.rows):
            out.append("no row has a number: nothing below is a measurement")
        return out


# ----------------------------------------------------------------------------------------------
# Roll-up variants and the summary's ranking


def bases(a: Analysis, dtype: str) -> list[str]:
    """Cost bases shown for a recipe: +quant and kernel-only when the run timed the quantization."""
    return [QUANT, KERNEL] if a.has_quant_rows(dtype) else [QUANT]


def rollup_variants(a: Analysis) -> list[tuple[str, str, str]]:
    """(recipe, basis, title) of every roll-up row: the BF16 baseline, then each recipe and basis."""
    out = [(BASELINE, QUANT, f"BF16 baseline ({BASELINE_BACKEND} where it ran)")]
    # A recipe with no measured row is left out: its total would hold only the modules vLLM keeps
    # in BF16 (router, lm_head), which would read as a quantized step.
    for d in [d for d in a.recipes if a.has_number(d)]:
        for basis in bases(a, d):
            if d == "bf16":
                suffix = " best"
            else:
                suffix = " best +quant" if basis == QUANT and a.has_quant_rows(d) else " best kernel only"
            out.append((d, basis, f"{RECIPE_LABELS.get(d, d)}{suffix}"))
    return out


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
    for recipe, basis, title in rollup_variants(a):
        if recipe not in (BASELINE, "bf16") and basis == KERNEL and a.has_quant_rows(recipe):
            continue  # kernel-only is an ideal case: vLLM quantizes activations on every call
        out.append((recipe, basis, title))
    return out


def summary_verdicts(a: Analysis) -> list[Verdict]:
    out = []
    for m in a.ms:
        base = a.rollup(BASELINE, m)
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



__all__ = [
    # cells.py, re-exported: figures.py and markdown.py read everything through this module
    "RECIPES", "RECIPE_LABELS", "BASELINE_BACKEND", "BASELINE", "QUANT", "KERNEL", "MODULE_KINDS",
    "MODULE_KIND_TABLE", "ATTN", "MLP", "MOE", "ROUTER", "LM_HEAD", "OTHER", "module_kind", "Cell",
    "NOT_MEASURED", "backend_label", "has_time", "best_cell", "rows_on_quant_basis", "recipe_cell",
    "baseline_cell", "speedup", "Crossover", "crossover",
    # this module
    "Entry", "plan_of", "Rollup", "Analysis", "bases", "rollup_variants", "Verdict",
    "summary_candidates", "summary_verdicts", "run_labels", "roofline_peaks",
]
