"""One workdir analysed: what the report shows, computed from one parsed results.json.

In: a results dict (as `core/results_schema.py` loads it; its "plan" read through `core/plan_schema.py`'s
`Plan.from_dict`; rows that predate a field get it from `row_facts.py`). Out: an `Analysis`: the
plan's modules (`Entry`, `plan_entries.py`), their cells per M and recipe (each FP8 scheme its own
recipe; the rules are in `cells.py`, re-exported here), per-step roll-ups (`Rollup`, each computed
once) on the vLLM-default, +quant and kernel-only bases, crossovers, warnings and run labels.
`recipe_totals.py` ranks its totals, `roofline_peaks.py` finds its ceilings; the md_*.py modules,
`markdown.py` and `figures.py` render it. No file I/O, no Markdown; nothing here measures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from ..cases.backends import TRITON
from ..core.plan_schema import Plan
from ..core.results_schema import Row
from ..core.shown_paths import workdir_name
from ..core.version import __version__
from ..doctor.environment import version_warnings
from ..vllm_rules.dispatch import VllmDefault, gpu_family, table_row
from ..vllm_rules.layers import kept_in_bf16
from .attention import AttentionView
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
    TIMED_MARKS,
    TORCH_MOE_LABEL,
    VLLM,
    VLLM_MARKS,
    Cell,
    Crossover,
    backend_label,
    baseline_cell,
    best_cell,
    crossover,
    default_cell,
    has_time,
    module_kind,
    recipe_cell,
    recipe_dtype,
    recipe_label,
    recipe_of,
    recipe_scheme,
    rows_on_quant_basis,
    speedup,
    vllm_mark,
)
from .md_text import fmt_us
from .memory import FitCheck, NoFit
from .plan_entries import Entry, entries_of, plan_of
from .row_facts import CheckpointScheme, DispatchContext, checkpoint_scheme, environment_cc, rows_with_facts


@dataclass(frozen=True)
class Gap:
    """Why a module has no number in a roll-up, and on the vLLM basis the timed row the dispatch
    table names in its place (its backend label, row mark and median), when that row has one."""

    reason: str
    closest_backend: str = ""
    closest_mark: str = ""
    closest_us: float | None = None

    @property
    def closest_label(self) -> str:
        """"triton/per_token [fallback]" ("" without a closest row)."""
        return f"{self.closest_backend}{self.closest_mark}" if self.closest_us is not None else ""

    def __str__(self) -> str:
        """The reason, then "; closest timed: triton/per_token 23.0 us [fallback]" where known."""
        if self.closest_us is None:
            return self.reason
        return f"{self.reason}; closest timed: {self.closest_backend} {fmt_us(self.closest_us)} us{self.closest_mark}"


@dataclass(frozen=True)
class Rollup:
    """GEMM + MoE kernel time of one forward step on one rank for one recipe, basis and M."""

    recipe: str
    """A recipe key, or BASELINE (baseline cells: torch where it ran)."""
    m: int
    total_us: float
    """Sum of best time x per-step count over modules WITH a number (partial when incomplete)."""
    by_kind: dict[str, float]
    """The same sum per module kind (only kinds present in the plan)."""
    missing: tuple[str, ...]
    """Entry names without a number; non-empty means the total is incomplete."""
    n_modules: int
    why_missing: tuple[Gap, ...] = ()
    """Per name in `missing`, why it has no number (on the VLLM basis: what vLLM runs there, why no
    row times it and the closest timed row, see Analysis.default_gap); str() of each is its text."""
    kept: tuple[str, ...] = ()
    """Entries of a quantized recipe counted at their BF16 time (vLLM keeps them unquantized)."""
    low_us: float = 0.0
    """The same sum over each counted cell's p10 (its median where a row has no percentiles)."""
    high_us: float = 0.0
    """The same sum over each counted cell's p90: with low_us, the spread of the total (as wide as
    if every module were slow or fast at once)."""
    no_percentiles: tuple[str, ...] = ()
    """Counted entries whose row recorded no p10/p90: their median stands for both, so a tie test
    on this total is by medians for them."""

    @property
    def spread(self) -> tuple[float, float]:
        return (self.low_us, self.high_us)

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def by_medians(self) -> str:
        """"only" when no counted module recorded p10/p90, "partly" when some did not, else ""."""
        if not self.no_percentiles:
            return ""
        return "only" if len(self.no_percentiles) >= self.n_modules - len(self.missing) else "partly"

    @property
    def no_number(self) -> bool:
        """Whether no module of the recipe's own has a number (its BF16-kept modules aside): such a
        partial sum would read as a cheap quantized step."""
        own = self.n_modules - len(self.kept)
        return own > 0 and len(set(self.missing) - set(self.kept)) == own


def _flag_value(command: Any, flag: str) -> str | None:
    """The value a recorded command line gave `flag` ("--flag X" or "--flag=X"), else None."""
    args = [str(c) for c in command] if isinstance(command, list) else []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    return None


def _model_name(name: str) -> str:
    """A model as the report names it: a local checkpoint's absolute directory by its name."""
    return workdir_name(name) if os.path.isabs(name) else name


def _design_words(backend: str) -> str:
    own = "Triton code" if backend == TRITON else "own code"
    return f"vLLM's design in this tool's {own}"


# ----------------------------------------------------------------------------------------------
# One workdir, analysed


class Analysis:
    """Everything the report shows about one workdir, derived from its results.json."""

    def __init__(self, results: dict[str, Any], path: str = ""):
        self.path = path
        self.results = results
        self.plan: Plan | None = plan_of(results)
        self.compute_capability = environment_cc(results)
        self.family = gpu_family(self.compute_capability)
        self.expert_parallel = self.plan is not None and self.plan.ep > 1
        self.dispatch = DispatchContext.of(results, self.plan)
        self.all_rows: list[Row] = rows_with_facts(results, self.plan)
        #: The tables, totals and figures read one timing mode: CUDA graphs where the run timed
        #: them (how vLLM runs decode), else eager; `eager_pairs` sets the other mode beside it.
        self.modes = [m for m in ("graph", "eager") if any(r.mode == m for r in self.all_rows)]
        self.mode = self.modes[0] if self.modes else "graph"
        # GEMM and MoE rows make the module tables and roll-ups; attention rows (one layer type at a
        # KV length each) have their own view, which the roll-up adds per KV length.
        self.rows: list[Row] = [r for r in self.all_rows if r.mode == self.mode and r.kind != "attention"]
        self.attention = AttentionView([r for r in self.all_rows if r.mode == self.mode], self.plan,
                                       self.family)
        self.checkpoint: CheckpointScheme = checkpoint_scheme(self.plan)
        self._groups: dict[tuple[str, str, int, str], list[Row]] = {}
        for r in self.rows:
            self._groups.setdefault((r.kind, r.name, r.m, recipe_of(r)), []).append(r)
        self.entries = entries_of(self.plan, self.rows)
        self.ms: list[int] = sorted({r.m for r in self.rows})
        self.recipes: list[str] = self._recipe_order({recipe_of(r) for r in self.rows})
        self.quantized = [d for d in self.recipes if d != "bf16"]
        # Tables, summary and figures all read the same roll-ups: each is computed once.
        self._rollups: dict[tuple[str, str, int], Rollup] = {}
        #: The memory section's fit decision (None: results.json records no plan or no GPU memory).
        self.fit_check = FitCheck.of(results, self.plan)

    def _recipe_order(self, present: set[str]) -> list[str]:
        """RECIPES order, the checkpoint's FP8 scheme first among the FP8 ones (it is the FP8
        line that answers "what would this checkpoint cost"), unknown recipes last."""
        known = [d for d in RECIPES if d in present]
        if self.checkpoint.recipe in known:
            known.remove(self.checkpoint.recipe)
            first_fp8 = next((i for i, d in enumerate(known) if recipe_dtype(d) == "fp8"), None)
            at = first_fp8 if first_fp8 is not None else (1 if known[:1] == ["bf16"] else 0)
            known.insert(at, self.checkpoint.recipe)
        return known + sorted(present - set(RECIPES))

    # --- recipes
    def recipe_title(self, recipe: str) -> str:
        """The recipe's label, "(checkpoint scheme)" added to the FP8 scheme the plan names."""
        label = recipe_label(recipe)
        return f"{label} (checkpoint scheme)" if recipe == self.checkpoint.recipe else label

    def kept_in_bf16(self, name: str, recipe: str) -> bool:
        """Whether vLLM runs plan entry `name` in BF16 under quantized `recipe` (a report recipe
        key such as "fp8.per_tensor"; vllm_rules/layers.py kept_in_bf16 with this plan's model class
        and per-tensor activation scales)."""
        if recipe == "bf16":
            return False
        model = self.plan.model if self.plan is not None else None
        return kept_in_bf16(name, recipe_dtype(recipe), recipe_scheme(recipe),
                            model.fp8_activation_scales if model else "", model.architecture if model else "")

    def kept_text(self) -> str:
        """One sentence: which of this plan's modules count at their BF16 time under which quantized
        recipes ("" when none does)."""
        if not self.quantized:
            return ""
        kept = {e.name: [d for d in self.quantized if self.kept_in_bf16(e.name, d)] for e in self.entries}
        everywhere = [n for n, ds in kept.items() if ds and len(ds) == len(self.quantized)]
        partly = [(n, ds) for n, ds in kept.items() if ds and len(ds) < len(self.quantized)]
        if not everywhere and not partly:
            return ""
        clauses = [f"{', '.join(everywhere)} at their BF16 time under every recipe"] if everywhere else []
        clauses += [f"{n} at its BF16 time under {', '.join(recipe_label(d) for d in ds)} (vLLM quantizes it "
                    f"under {', '.join(recipe_label(d) for d in self.quantized if d not in ds)}, where its "
                    "quantized rows count)" for n, ds in partly]
        return f"Quantized totals count {'; '.join(clauses)}: vLLM keeps them unquantized."

    def no_fit(self, recipe: str) -> NoFit | None:
        """Why one rank of this run's GPU cannot hold `recipe`'s weights and reserve (memory.py),
        None when it can or nothing says (every total, speed-up and verdict reads this)."""
        return self.fit_check.step(recipe) if self.fit_check is not None else None

    # --- cells
    def rows_for(self, entry: Entry, m: int, recipe: str) -> list[Row]:
        return self._groups.get((entry.kind, entry.name, m, recipe), [])

    def cell(self, entry: Entry, m: int, recipe: str, basis: str = QUANT) -> Cell:
        return recipe_cell(self.rows_for(entry, m, recipe), basis)

    def default_cell(self, entry: Entry, m: int, recipe: str, basis: str = QUANT) -> Cell:
        """The best row timing vLLM's default kernel (or design), on a table's basis."""
        return default_cell(self.rows_for(entry, m, recipe), basis)

    def baseline(self, entry: Entry, m: int) -> Cell:
        return baseline_cell(self.rows_for(entry, m, "bf16"))

    def reference(self, entry: Entry, m: int) -> Cell:
        """The BF16 cell a quantized cell is compared with: vLLM's BF16 default where it has a
        number (the torch MoE composite is no vLLM kernel), else the BF16 baseline."""
        default = self.default_cell(entry, m, "bf16", KERNEL)
        return default if default.us is not None else self.baseline(entry, m)

    def has_number(self, recipe: str) -> bool:
        """Whether any row of this recipe has a time."""
        return any(recipe_of(r) == recipe and has_time(r) for r in self.rows)

    def has_rows(self, entry: Entry, recipe: str) -> bool:
        """Whether any M of this module has a row of this recipe."""
        return any(self.rows_for(entry, m, recipe) for m in self.ms)

    def has_quant_rows(self, recipe: str) -> bool:
        return any(r.with_quant and recipe_of(r) == recipe for r in self.rows)

    # --- vLLM's default kernels
    def vllm_rule(self, entry: Entry, recipe: str) -> VllmDefault | None:
        """vllm_rules/dispatch.py's row for this module's layer kind and recipe on this GPU."""
        shape = next((r for r in self.rows if (r.kind, r.name) == entry.key and r.intermediate is not None), None)
        cell = self.dispatch.cell(entry.kind, recipe_dtype(recipe), recipe_scheme(recipe),
                                  shape.intermediate if shape else None, shape.hidden if shape else None)
        return table_row(self.family, cell)

    def closest_timed(self, entry: Entry, m: int, recipe: str, rule: VllmDefault) -> Cell | None:
        """The best row of the kind the dispatch table names for a vLLM default no row times, when
        it has a number (None otherwise)."""
        if rule.closest is None:
            return None
        rows = [r for r in self.rows_for(entry, m, recipe) if (r.backend, r.routine) == rule.closest]
        cell = best_cell(rows_on_quant_basis(rows))
        return cell if cell.us is not None and cell.row is not None else None

    def default_gap(self, entry: Entry, m: int, recipe: str) -> Gap:
        """Why `entry` has no vLLM-default number at M under `recipe`, worded to follow the
        module's name ("qkv_proj run ..."), with the closest timed row where the table names one."""
        rule = self.vllm_rule(entry, recipe)
        if rule is None:
            if recipe_scheme(recipe) == "per_tensor" and not self.dispatch.activation_scales and self.family:
                return Gap("have no vLLM dispatch rule: the plan predates the record of whether per-tensor "
                           "activation scales are static or dynamic, which decides vLLM's kernel")
            gpu = self.family or "a GPU whose compute capability was not recorded"
            return Gap(f"have no vLLM dispatch rule in this tool for {recipe_label(recipe)} on {gpu}")
        if not rule.match:
            reason = f"run {rule.kernel}, not timed here: {rule.missing}"
            cell = self.closest_timed(entry, m, recipe, rule)
            if cell is None or cell.row is None or cell.us is None:
                return Gap(reason)
            return Gap(reason, cell.backend, vllm_mark(cell.row), cell.us)
        kernel = rule.kernel + (f" ({_design_words(rule.backend)})" if rule.match == "design" else "")
        cell = self.default_cell(entry, m, recipe, QUANT)
        if cell.status == NOT_MEASURED.status:
            return Gap(f"run {kernel}; this run timed no {rule.backend} row for them")
        return Gap(f"run {kernel}; its row has no number ({cell.reason})")

    # --- aggregates
    def rollup(self, recipe: str, m: int, basis: str = QUANT) -> Rollup:
        key = (recipe, basis, m)
        if key not in self._rollups:
            self._rollups[key] = self._rollup(recipe, m, basis)
        return self._rollups[key]

    def _module_cell(self, e: Entry, m: int, recipe: str, basis: str) -> tuple[Cell, bool]:
        """(cell a roll-up counts for `e`, whether it is the BF16 cell of a BF16-kept module)."""
        if recipe == BASELINE:
            return self.baseline(e, m), False
        # vLLM runs the router, the shared-expert gate and lm_head in BF16 under the quantized
        # recipes (vllm_rules/layers.py KEPT_IN_BF16; Qwen3-MoE's router is FP8 on the online
        # per-tensor path), so a quantized step pays their BF16 time: the BF16 default kernel on the
        # vLLM basis, the BF16 baseline otherwise.
        kept = self.kept_in_bf16(e.name, recipe)
        if basis == VLLM:
            return self.cell(e, m, "bf16" if kept else recipe, VLLM), kept
        return (self.baseline(e, m) if kept else self.cell(e, m, recipe, basis)), kept

    def _rollup(self, recipe: str, m: int, basis: str) -> Rollup:
        by_kind: dict[str, float] = {}
        missing: list[str] = []
        why: list[Gap] = []
        kept: list[str] = []
        no_percentiles: list[str] = []
        total = low = high = 0.0
        for e in self.entries:
            by_kind.setdefault(e.module_kind, 0.0)
            c, in_bf16 = self._module_cell(e, m, recipe, basis)
            if in_bf16:
                kept.append(e.name)
            if c.us is None:
                missing.append(e.name)
                own = "bf16" if in_bf16 else recipe
                why.append(self.default_gap(e, m, own) if basis == VLLM else Gap(c.reason or c.status))
                continue
            t = c.us * e.layers
            by_kind[e.module_kind] += t
            total += t
            p10, p90 = c.spread or (c.us, c.us)
            low, high = low + p10 * e.layers, high + p90 * e.layers
            if c.row is None or c.row.p10_us is None or c.row.p90_us is None:
                no_percentiles.append(e.name)
        return Rollup(recipe, m, total, by_kind, tuple(missing), len(self.entries), tuple(why), tuple(kept),
                      low, high, tuple(no_percentiles))

    def crossover(self, entry: Entry, recipe: str, basis: str = QUANT) -> Crossover:
        return crossover([self.reference(entry, m) for m in self.ms],
                         [self.cell(entry, m, recipe, basis) for m in self.ms], self.ms)

    # --- header facts (every key optional)
    @property
    def model(self) -> str:
        # A local model's name is the directory it was read from: shown by its name, without the
        # machine's path (labels reach headings and figure titles alike).
        if self.plan is not None and self.plan.model.name:
            return _model_name(str(self.plan.model.name))
        cmd = self.results.get("command") or []
        return _model_name(str(cmd[1])) if len(cmd) > 1 and not str(cmd[1]).startswith("-") else "unknown"

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
        """The wheel-vs-checkout warning of doctor/environment.py, for results whose environment did
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
        every = self.all_rows
        n = {s: sum(r.status == s for r in every) for s in ("failed", "unsupported", "incorrect")}
        if n["failed"]:
            out.append(f"{n['failed']} of {len(every)} rows FAILED (see 'Cells without a number')")
        if n["incorrect"]:
            out.append(f"{n['incorrect']} of {len(every)} rows INCORRECT: their output missed the reference "
                       "beyond tolerance (see 'Measurement quality'); they have no number in any table")
        if n["unsupported"]:
            out.append(f"{n['unsupported']} of {len(every)} rows unsupported on this GPU/shape")
        events = sum(r.status == "ok" and r.timer == "cuda_events" for r in self.rows)
        if events:
            out.append(f"{events} ok rows were timed with CUDA events, not CUPTI (less precise: "
                       "includes launch gaps)")
        unplaced = self.plan.unsupported if self.plan is not None else ()
        if unplaced:
            names = ", ".join(str(u.module) for u in unplaced[:5])
            out.append(f"the plan has {len(unplaced)} module(s) it could not place ({names}"
                       f"{', ...' if len(unplaced) > 5 else ''}); they are in no table or total")
        out += self._ep_token_warnings()
        if not any(has_time(r) for r in self.rows + self.attention.rows):
            out.append("no row has a number: nothing below is a measurement")
        return out

    def _ep_token_warnings(self) -> list[str]:
        """MoE rows that ran fewer tokens than the plan's EP/TP factor says: results written before
        num_tokens was recorded timed the MoE layer at num_tokens = M."""
        planned = {m.name: int(m.tokens_per_m) for m in self.plan.moe} if self.plan is not None else {}
        out = []
        for e in self.entries:
            factor = planned.get(e.name, 1)
            if e.kind == "moe" and factor > 1 and e.tokens_per_m != factor:
                out.append(f"{e.name}: its rows ran num_tokens = {e.tokens_per_m}M, but under TP="
                           f"{self.tp_ep[0]} EP={self.tp_ep[1]} vLLM's MoE layer runs {factor}M "
                           "(rows written before num_tokens was recorded): its M is the MoE "
                           "layer's tokens, not the attention's")
        return out


def run_labels(analyses: Sequence[Analysis]) -> list[str]:
    """One distinct label per run ("model TP=.. EP=..", numbered when two are equal)."""
    labels = [a.label for a in analyses]
    out = []
    for i, label in enumerate(labels):
        out.append(f"{label} (#{i + 1})" if labels.count(label) > 1 else label)
    return out


__all__ = [
    # cells.py, re-exported: figures.py and the Markdown renderers read the vocabulary through this module
    "RECIPES", "RECIPE_LABELS", "BASELINE_BACKEND", "TORCH_MOE_LABEL", "BASELINE", "QUANT", "KERNEL",
    "VLLM", "VLLM_MARKS", "TIMED_MARKS", "recipe_of", "recipe_dtype", "recipe_scheme", "recipe_label", "MODULE_KINDS",
    "MODULE_KIND_TABLE", "ATTN", "MLP", "MOE", "ROUTER", "LM_HEAD", "OTHER", "module_kind", "Cell",
    "NOT_MEASURED", "Gap", "backend_label", "vllm_mark", "has_time", "best_cell", "rows_on_quant_basis",
    "recipe_cell", "default_cell", "baseline_cell", "speedup", "Crossover", "crossover",
    # row_facts.py, re-exported
    "CheckpointScheme",
    # this module
    "Rollup", "Analysis", "run_labels",
]
