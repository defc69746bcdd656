"""The report's memory section: one rank's weights and K/V cache on the run's GPU, per recipe, and the
M x K/V-length cells whose K/V cache does not fit beside the weights (plan/memory.py,
references/memory.md); and the one fit decision every total, speed-up and verdict of the report
reads (`FitCheck`: "does not fit (needs X GiB, GPU has Y GiB)").

In: a results.json dict (its plan, the GPU memory its environment records, the K/V lengths its
settings record) and the run's Ms. Out: Markdown lines, and `FitCheck`. A plan written before
attention entries records no K/V sizes: its K/V columns say so instead of reading 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.plan_schema import Plan
from ..plan import memory
from .cells import BASELINE, recipe_dtype
from .plan_entries import plan_of

#: fits(recipe, kv_dtype, M sequences, K/V length) -> whether one rank holds them (fit_test).
FitTest = Callable[[str, str, int, int], bool]

#: K/V lengths of the fit cells when results.json's settings record none.
DEFAULT_KV_LENS = (1024, 8192, 32768)

#: What a K/V cell of a plan written before attention entries reads (no K/V size was recorded).
KV_NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class NoFit:
    """Why one rank cannot hold a configuration: what it needs (weights + reserve + its K/V cache)
    against what vLLM takes of the GPU (gpu_memory_utilization of its memory)."""

    needs_bytes: int
    has_bytes: int

    @property
    def text(self) -> str:
        return f"does not fit (needs {memory.gib(self.needs_bytes)} GiB, GPU has {memory.gib(self.has_bytes)} GiB)"


def no_fit(est: memory.MemoryEstimate, plan: Plan, batch: int, kv_len: int) -> NoFit | None:
    """The one fit decision of the report: plan/memory.py's `fits` for `batch` sequences of `kv_len`
    tokens (kv_len 0: the weights and the reserve alone, a step with no K/V cache), with what it
    needs and has; None when it fits."""
    if memory.fits(est, plan, batch, kv_len):
        return None
    kv = memory.kv_bytes(plan, est.kv_dtype, batch, kv_len) if kv_len else 0
    return NoFit(est.weight_bytes + est.reserve_bytes + kv, est.usable_bytes)


def records_kv(results: dict[str, Any]) -> bool:
    """Whether the plan results.json records holds attention entries at all (plans written before
    them have no "attention" key: their K/V size per token is unknown, not 0)."""
    plan = results.get("plan")
    return isinstance(plan, dict) and "attention" in plan


def gpu_memory_bytes(results: dict[str, Any]) -> int | None:
    """The GPU's memory as results.json's environment records it (NVML total, `memory_gb` in 10^9
    bytes: env/gpu.py: gpu_info); None when it records none."""
    gpu = (results.get("environment") or {}).get("gpu") or {}
    value = gpu.get("memory_gb")
    return int(value * 1e9) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def kv_lens_of(results: dict[str, Any]) -> tuple[int, ...]:
    """The run's K/V lengths (settings.kv_lens), else DEFAULT_KV_LENS."""
    lens = (results.get("settings") or {}).get("kv_lens")
    if isinstance(lens, list) and lens and all(isinstance(n, int) and n > 0 for n in lens):
        return tuple(lens)
    return DEFAULT_KV_LENS


class FitCheck:
    """One rank of the run's GPU against the run's plan, by the memory section's arithmetic: per
    report recipe key ("fp8.block128", or the BF16 baseline) whether its weights and reserve fit
    (`step`), and with M sequences of a K/V length (`kv`, where the plan records K/V sizes)."""

    def __init__(self, plan: Plan, size: int, kv_known: bool):
        self.plan, self.size, self.kv_known = plan, size, kv_known
        self.util = memory.VLLM_GPU_MEMORY_UTILIZATION
        self._ests: dict[tuple[str, str], memory.MemoryEstimate] = {}

    @classmethod
    def of(cls, results: dict[str, Any], plan: Plan | None) -> FitCheck | None:
        """None when results.json records no plan or no GPU memory (then nothing is marked)."""
        size = gpu_memory_bytes(results)
        if plan is None or size is None:
            return None
        return cls(plan, size, records_kv(results) and bool(plan.attention))

    def estimate(self, recipe: str, kv_dtype: str = "bf16") -> memory.MemoryEstimate | None:
        """plan/memory.py's estimate for a report recipe key; None for a recipe it does not cover."""
        dtype = "bf16" if recipe == BASELINE else recipe_dtype(recipe)
        if dtype not in memory.RECIPES or kv_dtype not in memory.KV_DTYPE_BYTES:
            return None
        key = (dtype, kv_dtype)
        if key not in self._ests:
            self._ests[key] = memory.estimate(self.plan, dtype, kv_dtype, self.size, gpu_memory_utilization=self.util)
        return self._ests[key]

    def step(self, recipe: str) -> NoFit | None:
        """Why one rank cannot hold `recipe`'s weights and reserve (any step at all), else None."""
        est = self.estimate(recipe)
        return no_fit(est, self.plan, 0, 0) if est is not None else None

    def kv(self, recipe: str, kv_dtype: str, m: int, kv_len: int) -> NoFit | None:
        """Why one rank cannot hold `recipe` with M sequences of `kv_len` tokens in a `kv_dtype`
        cache, else None (also None where the plan records no K/V sizes: see kv_known)."""
        est = self.estimate(recipe, kv_dtype)
        if est is None or not self.kv_known:
            return None
        return no_fit(est, self.plan, m, kv_len)


def _budget_table(check: FitCheck) -> list[str]:
    lines = ["| recipe | K/V cache | weights GiB | reserve GiB | K/V budget GiB | K/V bytes/token | K/V tokens |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for recipe in memory.RECIPES:
        # Without K/V sizes in the plan the two K/V dtypes would be the same row of made-up zeros.
        for kv in memory.KV_DTYPE_BYTES if check.kv_known else ("bf16",):
            e = check.estimate(recipe, kv)
            assert e is not None  # every plan/memory.py recipe and K/V dtype is covered
            nf = no_fit(e, check.plan, 0, 0)
            budget = nf.text if nf else memory.gib(e.kv_budget_bytes)
            if not check.kv_known:
                kv_text, per_token, tokens = KV_NOT_RECORDED, KV_NOT_RECORDED, KV_NOT_RECORDED
            else:
                kv_text, per_token = kv, f"{e.kv_bytes_per_token:,}"
                tokens = "-" if nf else f"{e.kv_tokens_fit:,}"
            lines.append(f"| {recipe} | {kv_text} | {memory.gib(e.weight_bytes)} | {memory.gib(e.reserve_bytes)} | "
                         f"{budget} | {per_token} | {tokens} |")
    return lines


def _cells_table(fits: FitTest, ms: Sequence[int], kv_lens: Sequence[int]) -> list[str]:
    lines = ["| M (sequences) | " + " | ".join(f"K/V length {n}" for n in kv_lens) + " |",
             "|---:|" + "---|" * len(kv_lens)]
    for m in ms:
        cells = []
        for n in kv_lens:
            out = [f"{r}/{kv}" for r in memory.RECIPES for kv in memory.KV_DTYPE_BYTES if not fits(r, kv, m, n)]
            cells.append(", ".join(out) if out else "all fit")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def fit_test(results: dict[str, Any], plan: Plan | None) -> FitTest | None:
    """Whether a roll-up cell's step fits one rank of the run's GPU: `recipe` (a report recipe
    key, "fp8.block128", or the BF16 baseline) with M sequences of `kv_len` tokens in a `kv_dtype`
    cache, by the memory section's arithmetic (FitCheck.kv). None when results.json records no
    plan, no GPU memory or no K/V sizes (then nothing is marked)."""
    check = FitCheck.of(results, plan)
    if check is None or not check.kv_known:
        return None
    return lambda recipe, kv_dtype, m, kv_len: check.kv(recipe, kv_dtype, m, kv_len) is None


def memory_section(results: dict[str, Any], ms: Sequence[int], heading: str = "##") -> list[str]:
    """The section's lines (a heading, the budget per recipe and K/V dtype, the cells that do not
    fit), or a line saying why there is none."""
    lines = [f"{heading} Memory per rank", ""]
    plan = plan_of(results)
    size = gpu_memory_bytes(results)
    if plan is None or size is None:
        why = "records no plan" if plan is None else "records no GPU memory size (environment.gpu.memory_gb)"
        return lines + [f"No memory table: results.json {why}.", ""]
    check = FitCheck(plan, size, records_kv(results) and bool(plan.attention))
    util = memory.VLLM_GPU_MEMORY_UTILIZATION
    kv_lens = kv_lens_of(results)
    lines += [f"One rank on this run's GPU ({memory.gib(size)} GiB), vLLM taking gpu_memory_utilization={util:g} "
              "of it; weights with their scales and the input embedding, a reserve for activations, CUDA graphs "
              "and context, the K/V cache in the rest (references/memory.md). Sliding-window and chunked "
              "layers hold at most their window of each sequence. A recipe whose weights and reserve exceed "
              "that share does not fit: its per-step totals, speed-ups and verdicts say so.", ""]
    lines += _budget_table(check) + [""]
    if not records_kv(results):
        lines += ["K/V sizes not recorded: this run's plan was written before the plan held attention "
                  "entries, so the K/V bytes per token, the tokens that fit and the cells below are not "
                  "known; re-plan the model with the current tool to get them.", ""]
    if not (plan.model.hidden_size and plan.model.vocab_size):
        lines += ["The plan records no hidden_size or vocab_size: the input embedding and the logits of "
                  "the reserve are not counted (0), so the weights and reserve above are too small.", ""]
    if plan.model.tie_word_embeddings is None and any(g.name == "lm_head" for g in plan.gemms):
        lines += ["The plan does not record whether lm_head is tied to the input embedding (written before "
                  "tie_word_embeddings was recorded): the weights count the embedding as its own tensor.", ""]
    if plan.mixers_not_timed:
        lines += [f"Not counted: the recurrent or indexer state of {', '.join(x.name for x in plan.mixers_not_timed)}.",
                  ""]
    fits = fit_test(results, plan)  # None without attention entries
    if ms and fits is not None:
        lines += ["Cells whose K/V cache does not fit (M sequences of each K/V length; each cell lists the "
                  "recipe/K/V-dtype pairs that do not fit):", ""]
        lines += _cells_table(fits, ms, kv_lens) + [""]
    return lines


__all__ = ["DEFAULT_KV_LENS", "KV_NOT_RECORDED", "FitCheck", "FitTest", "NoFit", "fit_test", "gpu_memory_bytes",
           "kv_lens_of", "memory_section", "no_fit", "records_kv"]
