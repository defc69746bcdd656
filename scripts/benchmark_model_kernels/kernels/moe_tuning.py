"""Tiles for vLLM's tuned fused-MoE files, searched with this tool's Triton kernel of vLLM's design.

In: one rank's MoE problem at a token count (`triton_moe.problem.MoeProblem`; the count is one key
of vLLM's file), the configs the search starts from (vLLM's default tiles for that key, its
shipped ones when it has a file, the tiles found for the key before it), the run's settings. Out:
`KeyTiming`: the fastest tiles found and, timed in the same process with the same kernel and
settings, the tuned, shipped and default tiles, so the gain of loading the file is measured.

The space is vLLM's tuner ranges (vllm_rules/moe_config_files.py TUNER_RANGES: BLOCK_SIZE_M
16..256, N 32..256, K 64..256, GROUP_SIZE_M 1..64, 4/8 warps, 2..5 stages) less what this kernel
cannot run (`triton_moe.tuning.validate_config`: block FP8 needs a BLOCK_SIZE_K dividing the
block, as vLLM's launch clamps it to the block) and the tiles whose pipelined buffers exceed the
shared-memory budget. vLLM's tuner keeps only the N and K tiles that are multiples of the block
(benchmark_moe.py: get_configs_compute_bound); this space also has the N tiles under the block
that vLLM's default tiles use. Two searches (`SEARCHES`): "descent" (the default) starts from the
fastest seed and walks one tile key at a time over all its values, in the order BLOCK_SIZE_M, N,
K, num_warps, num_stages, GROUP_SIZE_M, keeping any faster config, for up to two passes (at most
`DESCENT_MAX_CONFIGS` timed per key); "full" times every config of the space, as vLLM's tuner
does. Candidates are timed through `triton_tuning.search_config` (compiled in threads, 10
iterations in a CUDA graph), and the tiles found are cached per problem and key in its JSON cache
(`load_cached_config` / `store_config`), so a second run only times the three configs again.

Torch, Triton and FlashInfer are imported lazily, on the GPU path only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from itertools import product
from typing import Any, Callable, Protocol, Sequence

from ..core.files import json_digest
from ..core.results_schema import RunSettings
from ..vllm_rules.moe_config_files import TILE_KEYS, TUNER_RANGES
from .triton_moe.problem import SCHEMES, MoeProblem
from .triton_moe.tuning import validate_config
from .triton_tuning import SMEM_BUDGET_BYTES

SEARCHES = ("descent", "full")
#: The order the descent walks the keys in (the M tile decides most, the group least).
DESCENT_AXES = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps", "num_stages", "GROUP_SIZE_M")
DESCENT_PASSES = 2
#: Seeds (default, shipped, previous key's) plus every other value of every key, twice.
DESCENT_MAX_CONFIGS = 3 + DESCENT_PASSES * sum(len(TUNER_RANGES[k]) - 1 for k in DESCENT_AXES)
#: Changes whenever the search picks differently, so cached tiles of another search are not reused.
SEARCH_VERSION = 1
#: Iterations a candidate is timed with while searching (the three final timings use the run's).
SEARCH_ITERS = 10


def cache_key(p: MoeProblem, search: str, gpu: str, triton_version: str) -> str:
    """The tile cache's name for the tiles searched for `p` (at its token count): readable parts,
    then a digest of every field of the problem, the search, the GPU and Triton."""
    fields = dataclasses.asdict(p)
    digest = json_digest({"problem": fields, "search": f"{search}.{SEARCH_VERSION}", "gpu": gpu,
                          "triton": triton_version})
    return (f"vllm_moe_file-{'_'.join(gpu.split())}-{p.scheme}-E{p.local_experts}-N{p.intermediate}"
            f"-tokens{p.num_tokens}-{digest[:20]}")


def _elem_bytes(scheme: str) -> int:
    return 2 if scheme == "bf16" else 1


def fits_kernel(config: dict[str, int], p: MoeProblem) -> str:
    """Why this kernel cannot run `config` for `p` ("" when it can): validate_config's rule (its
    scheme and FP8 block), or pipelined A/B buffers over the shared-memory budget."""
    try:
        cfg = validate_config(config, p.scheme, p.block_size)
    except ValueError as e:
        return str(e)
    smem = cfg["num_stages"] * (cfg["BLOCK_SIZE_M"] + cfg["BLOCK_SIZE_N"]) * cfg["BLOCK_SIZE_K"] * _elem_bytes(p.scheme)
    if smem > SMEM_BUDGET_BYTES:
        return (f"{cfg['num_stages']} stages of {cfg['BLOCK_SIZE_M']}x{cfg['BLOCK_SIZE_K']} and "
                f"{cfg['BLOCK_SIZE_K']}x{cfg['BLOCK_SIZE_N']} tiles need {smem // 1024} KiB of shared "
                f"memory, more than the {SMEM_BUDGET_BYTES // 1024} KiB budget")
    return ""


def kernel_space(p: MoeProblem) -> list[dict[str, int]]:
    """vLLM's tuner ranges, in vLLM's order, less what this kernel cannot run for `p` (which only
    its scheme and FP8 block decide)."""
    return [dict(c) for c in _space(p.scheme, p.block_size)]


@functools.lru_cache(maxsize=None)
def _space(scheme: str, block_size: int) -> tuple[dict[str, int], ...]:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}: expected one of {', '.join(SCHEMES)}")
    probe = MoeProblem(num_tokens=1, hidden=block_size, intermediate=block_size, local_experts=1, global_experts=1,
                       top_k=1, activation="silu_and_mul", gated=True, scheme=scheme, block_size=block_size)
    space = (dict(zip(TILE_KEYS, values, strict=True)) for values in product(*TUNER_RANGES.values()))
    return tuple(c for c in space if not fits_kernel(c, probe))


def _ident(config: dict[str, int]) -> tuple[int, ...]:
    return tuple(config[k] for k in TILE_KEYS)


#: Times a batch of configs: (config, microseconds) for each one that ran (the others left out).
Measure = Callable[[list[dict[str, int]]], list[tuple[dict[str, int], float]]]


@dataclass(frozen=True)
class SearchResult:
    best: dict[str, int]
    best_us: float
    timed: int
    """Configs timed (each once)."""


class _Timings:
    """Every config timed so far (failures as infinity), each config timed once."""

    def __init__(self, measure: Measure):
        self.measure = measure
        self.us: dict[tuple[int, ...], float] = {}

    def run(self, configs: Sequence[dict[str, int]]) -> None:
        fresh: list[dict[str, int]] = []
        for c in configs:
            if _ident(c) not in self.us and all(_ident(c) != _ident(f) for f in fresh):
                fresh.append(c)
        if not fresh:
            return
        got = {_ident(c): t for c, t in self.measure(fresh)}
        for c in fresh:
            self.us[_ident(c)] = got.get(_ident(c), math.inf)

    def of(self, config: dict[str, int]) -> float:
        return self.us.get(_ident(config), math.inf)

    def fastest(self, configs: Sequence[dict[str, int]]) -> dict[str, int] | None:
        """The fastest of `configs` that ran (the first of equals), or None."""
        ran = [c for c in configs if math.isfinite(self.of(c))]
        return min(ran, key=self.of) if ran else None


def descent_search(seeds: Sequence[dict[str, int]], space: Sequence[dict[str, int]], measure: Measure,
                   passes: int = DESCENT_PASSES) -> SearchResult:
    """From the fastest seed, one key at a time over all its values (vLLM's range plus the current
    value), keeping a faster config, until a pass changes nothing or `passes` are done. A seed
    need not be in `space`; every other candidate is. RuntimeError when nothing ran."""
    timings = _Timings(measure)
    allowed = {_ident(c) for c in space}
    timings.run(list(seeds))
    best = timings.fastest(list(seeds))
    if best is None:  # no seed ran: the first configs of the space that do
        for i in range(0, len(space), 8):
            timings.run(list(space[i:i + 8]))
            best = timings.fastest(list(space[:i + 8]))
            if best is not None:
                break
    if best is None:
        raise RuntimeError(f"no config ran (of {len(timings.us)} tried)")
    for _ in range(passes):
        changed = False
        for axis in DESCENT_AXES:
            values = sorted(set(TUNER_RANGES[axis]) | {best[axis]})
            row = [best] + [c for c in ({**best, axis: v} for v in values)
                            if _ident(c) in allowed and _ident(c) != _ident(best)]
            timings.run(row)
            faster = timings.fastest(row)
            if faster is not None and timings.of(faster) < timings.of(best):
                best, changed = faster, True
        if not changed:
            break
    return SearchResult(dict(best), timings.of(best), len(timings.us))


def full_search(seeds: Sequence[dict[str, int]], space: Sequence[dict[str, int]], measure: Measure) -> SearchResult:
    """Every config of the space and the seeds, timed; the fastest (the first of equals)."""
    timings = _Timings(measure)
    everything = list(seeds) + list(space)
    timings.run(everything)
    best = timings.fastest(everything)
    if best is None:
        raise RuntimeError(f"no config ran (of {len(timings.us)} tried)")
    return SearchResult(dict(best), timings.of(best), len(timings.us))


def search(kind: str, seeds: Sequence[dict[str, int]], space: Sequence[dict[str, int]],
           measure: Measure) -> SearchResult:
    if kind == "descent":
        return descent_search(seeds, space, measure)
    if kind == "full":
        return full_search(seeds, space, measure)
    raise ValueError(f"search={kind!r}: expected one of {', '.join(SEARCHES)}")


def configs_per_key(kind: str, p: MoeProblem) -> int:
    """The most configs one key's search times (for the time estimate)."""
    return DESCENT_MAX_CONFIGS if kind == "descent" else len(kernel_space(p)) + 3


# ---------------------------------------------------------------------------- one key


@dataclass(frozen=True)
class Timed:
    """One config's final timing: microseconds, or why there is none."""

    config: dict[str, int] | None
    median_us: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class KeyTiming:
    """One key of one shape: the tiles found and the three timings."""

    num_tokens: int
    tuned: Timed
    shipped: Timed
    default: Timed
    searched: int
    """Configs the search timed (0: the tiles came from the tile cache)."""
    timer: str = ""
    check: str = ""
    """The tuned tiles' correctness check: "passed", "failed: ..." or "" (not checked)."""


class KeyBench(Protocol):
    """What tune_key needs of a GPU: time candidates quickly, time one config fully, check one."""

    def measure(self, configs: list[dict[str, int]]) -> list[tuple[dict[str, int], float]]: ...

    def time(self, config: dict[str, int]) -> tuple[float, str]:
        """(median microseconds, timer) of one config at the run's settings."""
        ...

    def check(self, config: dict[str, int]) -> str: ...


@dataclass(frozen=True)
class KeyRequest:
    """What one key's tuning is asked for."""

    problem: MoeProblem
    """The shape at the key's token count."""
    default: dict[str, int]
    """vLLM's get_default_config tiles at this key."""
    shipped: dict[str, int] | None
    """vLLM's shipped tiles at this key (its nearest key), None when vLLM ships no file."""
    previous: dict[str, int] | None = None
    """The tiles found for the key before, a third seed."""
    search: str = "descent"
    cached: dict[str, int] | None = None
    """Tiles found by an earlier run (the tile cache): no search then."""


def tune_key(req: KeyRequest, bench: KeyBench) -> tuple[KeyTiming, dict[str, int]]:
    """(the key's timings, the tiles found): search unless `req.cached`, then time the tuned,
    shipped and default tiles once each (a config two of them share is timed once)."""
    p = req.problem
    if req.cached is not None:
        tuned, searched = dict(req.cached), 0
    else:
        seeds = [c for c in (req.default, req.shipped, req.previous) if c is not None and not fits_kernel(c, p)]
        found = search(req.search, seeds, kernel_space(p), bench.measure)
        tuned, searched = found.best, found.timed
    timed: dict[tuple[int, ...], tuple[float, str]] = {}
    timer = ""

    def final(config: dict[str, int] | None, absent: str) -> Timed:
        nonlocal timer
        if config is None:
            return Timed(None, reason=absent)
        why = fits_kernel(config, p)
        if why:
            return Timed(config, reason=f"this kernel cannot run it: {why}")
        if _ident(config) not in timed:
            try:
                timed[_ident(config)] = bench.time(config)
            except Exception as e:  # noqa: BLE001 - a config that fails to run is reported, not fatal
                return Timed(config, reason=f"{type(e).__name__}: {str(e)[:200]}")
        us, timer = timed[_ident(config)]
        return Timed(config, us)

    tuned_t = final(tuned, "")
    shipped_t = final(req.shipped, "vLLM ships no file for this shape")
    default_t = final(req.default, "")
    # The search ranks configs on short timings; where the final timing puts vLLM's own tiles
    # ahead, the file keeps those, so that loading it never makes vLLM slower than it is without.
    for own in (shipped_t, default_t):
        if own.median_us is not None and own.config is not None and (
                tuned_t.median_us is None or own.median_us < tuned_t.median_us):
            tuned, tuned_t = dict(own.config), own
    result = KeyTiming(num_tokens=p.num_tokens, tuned=tuned_t, shipped=shipped_t, default=default_t,
                       searched=searched, timer=timer,
                       check=bench.check(tuned) if tuned_t.median_us is not None else "")
    return result, tuned


class TritonKeyBench:
    """KeyBench on the current CUDA GPU: this tool's Triton fused MoE at one shape and token count,
    its inputs built once (seeded, uniform routing over the global experts)."""

    def __init__(self, p: MoeProblem, settings: RunSettings, compile_workers: int = 8):
        from .triton_moe import problem

        self.problem = p
        self.inputs = problem.build_inputs(p, "cuda")
        self.settings = settings
        self.compile_workers = compile_workers
        self.quick = dataclasses.replace(settings, num_iters=SEARCH_ITERS, dry_run_iters=3, cuda_graph=True)

    def _build(self, config: dict[str, int]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        from .triton_moe import fused

        return fused.make_fused_moe(self.problem, self.inputs, config)

    def measure(self, configs: list[dict[str, int]]) -> list[tuple[dict[str, int], float]]:
        from .timing import bench
        from .triton_tuning import search_config

        results: list[tuple[dict[str, int], float]] = []
        try:
            search_config(self._build, configs, lambda fn, args: bench(fn, self.quick, input_args=args).median_us,
                          compile_workers=self.compile_workers, results=results)
        except RuntimeError:  # every candidate failed: none of them is a result
            return []
        return results

    def time(self, config: dict[str, int]) -> tuple[float, str]:
        from .timing import bench

        fn, args = self._build(config)
        fn(*args)
        m = bench(fn, self.settings, input_args=args)
        return m.median_us, m.timer

    def check(self, config: dict[str, int]) -> str:
        if not self.settings.check:
            return ""
        from . import correctness
        from .triton_moe import problem

        fn, args = self._build(config)
        result = correctness.verify(fn, args, lambda: problem.reference_moe(self.problem, self.inputs), "moe",
                                    "bf16" if self.problem.scheme == "bf16" else "fp8",
                                    "FP32 per-expert loop over the same routing and dequantized inputs")
        return result.check if result.check == "passed" else f"{result.check}: {result.note}"


__all__ = ["DESCENT_MAX_CONFIGS", "KeyBench", "KeyRequest", "KeyTiming", "SEARCHES", "SearchResult", "Timed",
           "TritonKeyBench", "cache_key", "configs_per_key", "descent_search", "fits_kernel", "full_search",
           "kernel_space", "search", "tune_key"]
