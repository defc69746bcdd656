"""The report's memory section: one rank's weights and K/V cache on the run's GPU, per recipe, and the
M x K/V-length cells whose K/V cache does not fit beside the weights (plan/memory.py,
references/memory.md).

In: a results.json dict (its plan, the GPU memory its environment records, the K/V lengths its
settings record) and the run's Ms. Out: Markdown lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.plan_schema import Plan
from ..plan import memory
from .cells import BASELINE, recipe_dtype
from .plan_entries import plan_of

#: fits(recipe, kv_dtype, M sequences, K/V length) -> whether one rank holds them (fit_test).
FitTest = Callable[[str, str, int, int], bool]

#: K/V lengths of the fit cells when results.json's settings record none.
DEFAULT_KV_LENS = (1024, 8192, 32768)


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


def _budget_table(plan: Plan, size: int, util: float) -> list[str]:
    lines = ["| recipe | K/V cache | weights GiB | reserve GiB | K/V budget GiB | K/V bytes/token | K/V tokens |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for recipe in memory.RECIPES:
        for kv in memory.KV_DTYPE_BYTES:
            e = memory.estimate(plan, recipe, kv, size, gpu_memory_utilization=util)
            if not e.weights_fit:
                budget, tokens = f"does not fit: weights > {memory.gib(e.usable_bytes)} usable", "-"
            else:
                budget = memory.gib(e.kv_budget_bytes) if e.kv_fits_any else "none"
                tokens = f"{e.kv_tokens_fit:,}"
            lines.append(f"| {recipe} | {kv} | {memory.gib(e.weight_bytes)} | {memory.gib(e.reserve_bytes)} | "
                         f"{budget} | {e.kv_bytes_per_token:,} | {tokens} |")
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
    cache, by the memory section's arithmetic. None when results.json records no plan or no GPU
    memory (then nothing is marked)."""
    size = gpu_memory_bytes(results)
    if plan is None or size is None or not plan.attention:
        return None
    util = memory.VLLM_GPU_MEMORY_UTILIZATION
    ests: dict[tuple[str, str], memory.MemoryEstimate] = {}

    def fits(recipe: str, kv_dtype: str, m: int, kv_len: int) -> bool:
        dtype = "bf16" if recipe == BASELINE else recipe_dtype(recipe)
        if dtype not in memory.RECIPES or kv_dtype not in memory.KV_DTYPE_BYTES:
            return True  # a recipe the memory model does not cover is not marked
        key = (dtype, kv_dtype)
        if key not in ests:
            ests[key] = memory.estimate(plan, dtype, kv_dtype, size, gpu_memory_utilization=util)
        return memory.fits(ests[key], plan, m, kv_len)

    return fits


def memory_section(results: dict[str, Any], ms: Sequence[int], heading: str = "##") -> list[str]:
    """The section's lines (a heading, the budget per recipe and K/V dtype, the cells that do not
    fit), or a line saying why there is none."""
    lines = [f"{heading} Memory per rank", ""]
    plan = plan_of(results)
    size = gpu_memory_bytes(results)
    if plan is None or size is None:
        why = "records no plan" if plan is None else "records no GPU memory size (environment.gpu.memory_gb)"
        return lines + [f"No memory table: results.json {why}.", ""]
    util = memory.VLLM_GPU_MEMORY_UTILIZATION
    kv_lens = kv_lens_of(results)
    lines += [f"One rank on this run's GPU ({memory.gib(size)} GiB), vLLM taking gpu_memory_utilization={util:g} "
              "of it; weights with their scales and the input embedding, a reserve for activations, CUDA graphs "
              "and context, the K/V cache in the rest (references/memory.md). Sliding-window and chunked "
              "layers hold at most their window of each sequence.", ""]
    lines += _budget_table(plan, size, util) + [""]
    if plan.mixers_not_timed:
        lines += [f"Not counted: the recurrent or indexer state of {', '.join(x.name for x in plan.mixers_not_timed)}.",
                  ""]
    fits = fit_test(results, plan)  # None without attention entries
    if ms and fits is not None:
        lines += ["Cells whose K/V cache does not fit (M sequences of each K/V length; each cell lists the "
                  "recipe/K/V-dtype pairs that do not fit):", ""]
        lines += _cells_table(fits, ms, kv_lens) + [""]
    return lines


__all__ = ["DEFAULT_KV_LENS", "FitTest", "fit_test", "gpu_memory_bytes", "kv_lens_of", "memory_section"]
