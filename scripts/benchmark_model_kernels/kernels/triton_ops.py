"""The `triton` backend: this tool's Triton kernels of vLLM's designs, timed like every other row.

* "triton.fused_moe" (MoE; bf16, fp8 per_tensor / per_token / block128): vLLM's fused-MoE
  algorithm (align pairs to the tile, grouped GEMM 1, activation, grouped GEMM 2 with the routing
  weights, top-k sum), `kernels/triton_moe/`, wrapped as vLLM's `fused_experts_impl` wraps it
  (under EP the activation, its quantization, the zero fill and the sum over every M x top_k slot:
  `triton_moe/wrapping.py`). On Hopper this is the design vLLM dispatches for BF16, per-token FP8
  and (under TP) block-FP8 MoE; the code is this tool's, not vLLM's. A row runs vLLM's own tiles
  for its shape on this GPU (its shipped config, else its default config:
  vllm_rules/moe_triton.py); the "tuned" variant (cases/backends.py TUNED) runs tiles searched
  here, what vLLM would run with a tuned config file. Per-tensor FP8 computes its activation scale
  per call where the case's format is dynamic (vLLM's online fp8_per_tensor); a block-128
  checkpoint whose scales the shard cannot hold runs vLLM's refined blocks.
* "triton.block_fp8_mm" (GEMM; fp8 block128): vLLM's `w8a8_triton_block_scaled_mm` algorithm
  (`kernels/triton_fp8_gemm.py`), the last fallback of vLLM's block-FP8 linear chain on Hopper,
  with vLLM's tiles for the shape on this GPU (its shipped table, else its default config:
  vllm_rules/block_fp8_gemm.py), as vLLM runs it.

The kernel-only row takes activations already quantized as its scheme needs; the `.q` twin adds
that quantization, timed by `quant_timing`. Searched tiles (the tuned MoE rows) are searched per
shape once and cached beside the autotuner cache (`<autotune_cache>.triton/`), so
a warm run does not search again.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from ..cases.backends import tuned_tiles
from ..cases.kernel_limits import TRITON_MOE_ACTIVATIONS
from ..core.case_schema import Case, GemmShape, MoeShape
from ..core.results_schema import RunSettings
from ..vllm_rules import block_fp8_gemm
from ..vllm_rules.moe_triton import square_block_for_shard
from . import correctness
from .timing import Measurement, UnsupportedCase, bench

ROUTINES = ("triton.fused_moe", "triton.block_fp8_mm")
#: Search timing: few iterations are enough to rank tiles; the row itself uses the run's settings.
_SEARCH_ITERS = 10


def scheme_of(case: Case) -> str:
    """The Triton MoE kernel's scheme name for a case: "bf16" or "fp8_<scheme>" (a case made
    without a scheme: its variant's, less a "-tuned")."""
    if case.dtype == "bf16":
        return "bf16"
    return f"fp8_{case.scheme or case.variant.split('-')[0]}"


def cache_dir(settings: RunSettings) -> str:
    """Where searched tiles are kept: beside the autotuner cache of the run."""
    base = settings.autotune_cache or os.path.join(os.getcwd(), "autotune_cache.json")
    return base + ".triton"


def _timer(settings: RunSettings) -> Callable[[Callable[..., Any], tuple[Any, ...]], float]:
    # Tiles are ranked by kernel time, in a CUDA graph whatever the row's mode: an eager search
    # would rank launch gaps and count launches for every candidate.
    quick = dataclasses.replace(settings, num_iters=_SEARCH_ITERS, dry_run_iters=3, cuda_graph=True)

    def time_us(fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
        return bench(fn, quick, input_args=args).median_us

    return time_us


def _gpu_key() -> tuple[str, str]:
    import torch  # lazy: only on the GPU worker
    import triton

    return torch.cuda.get_device_name(), triton.__version__


def moe_problem(case: Case) -> Any:
    """The Triton MoE problem of a case whose activation the kernel has (cases/kernel_limits.py
    `triton_moe_limit` marks the others unsupported before they reach a worker): block-128 FP8 at
    the block vLLM runs the shard with, per-tensor FP8 with a dynamic scale where the case's
    activation format is dynamic."""
    from .triton_moe.problem import FP8_GROUP, MoeProblem

    p = case.physical
    assert isinstance(p, MoeShape)
    scheme = scheme_of(case)
    block = FP8_GROUP
    if scheme == "fp8_block128":
        refined = square_block_for_shard(FP8_GROUP, p.intermediate, p.hidden)
        if refined is None:
            raise UnsupportedCase(f"block-128 FP8 MoE: vLLM refuses intermediate={p.intermediate} "
                                  f"with hidden={p.hidden} (vllm_rules/moe_triton.py)")
        block = refined
    return MoeProblem(num_tokens=p.num_tokens, hidden=p.hidden, intermediate=p.intermediate,
                      local_experts=p.experts, global_experts=p.global_experts, top_k=p.top_k,
                      activation=TRITON_MOE_ACTIVATIONS[case.activation], gated=case.gated,
                      scheme=scheme, has_bias=case.activation == "SwigluBias", block_size=block,
                      dynamic_scale=case.activation_quant == "fp8_per_tensor_dynamic")


Build = Callable[[dict[str, int]], tuple[Callable[..., Any], tuple[Any, ...]]]


#: (case, what the output is checked against, the FP32 reference of the built inputs).
Checked = tuple[Case, str, Callable[[], Any]]


def _time_tuned(settings: RunSettings, key: str, build: Build, space: Callable[[], list[dict[str, int]]],
                check: Callable[[dict[str, Any]], dict[str, int]], checked: Checked) -> Measurement:
    """Time `build(config)` with the cached tiles for `key`, searching (and caching) them first
    when none are stored; the row's note says which, and the tiles."""
    from .triton_tuning import load_cached_config, search_config, store_config

    config = load_cached_config(cache_dir(settings), key, check)
    note = "tiles from the cache"
    if config is None:
        candidates = space()
        config = search_config(build, candidates, _timer(settings))
        store_config(cache_dir(settings), key, config, check)
        note = f"tiles searched over {len(candidates)} configs"
    return _time_config(settings, build, config, note, checked)


def _time_config(settings: RunSettings, build: Build, config: dict[str, int], note: str,
                 checked: Checked) -> Measurement:
    """Time `build(config)`; the row's note is `note` and the tiles. With settings.check the
    output of one more call is compared with `checked`'s reference (kernels/correctness.py)."""
    from .triton_tuning import CONFIG_KEYS

    fn, args = build(config)
    fn(*args)
    m = bench(fn, settings, input_args=args)
    tiles = ",".join(str(config[k]) for k in CONFIG_KEYS)
    result = {}
    if settings.check:
        case, described, reference = checked
        result = correctness.verify(fn, args, reference, case.kind, case.dtype, described).fields()
    return dataclasses.replace(m, note="; ".join(x for x in (f"{note}: {tiles}", m.note) if x), check=result)


def _run_moe(case: Case, settings: RunSettings) -> Measurement:
    """vLLM's tiles for the shape on this GPU, or (the tuned variant) tiles searched here, with
    vLLM's own among the candidates."""
    from .triton_moe import fused, problem, tuning

    p = moe_problem(case)
    inputs = problem.build_inputs(p, "cuda")
    gpu, triton_version = _gpu_key()
    vllm_config, vllm_note = tuning.vllm_config(p, gpu)

    def build(config: dict[str, int]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return fused.make_fused_moe(p, inputs, config)

    checked = (case, "FP32 per-expert loop over the same routing and dequantized inputs "
                     "(problem.reference_moe; no re-quantization between the GEMMs)",
               lambda: problem.reference_moe(p, inputs))
    if not tuned_tiles(case.variant):
        return _time_config(settings, build, vllm_config, f"vLLM's tiles, {vllm_note}", checked)

    def space() -> list[dict[str, int]]:
        searched = tuning.config_space(p.scheme, p.num_tokens, top_k=p.top_k,
                                       local_experts=p.local_experts, block=p.block_size)
        return [vllm_config] + [c for c in searched if c != vllm_config]

    return _time_tuned(settings, tuning.config_key(p, gpu, triton_version), build, space,
                       lambda c: tuning.validate_config(c, p.scheme, p.block_size), checked)


def _run_block_gemm(case: Case, settings: RunSettings) -> Measurement:
    from . import triton_fp8_gemm as g

    shape = case.physical
    assert isinstance(shape, GemmShape)
    p = g.BlockFp8Problem(shape.m, shape.n, shape.k)
    inputs = g.build_inputs(p, "cuda")
    gpu, _ = _gpu_key()
    tiles = block_fp8_gemm.vllm_tiles(p.m, p.n, p.k, gpu)
    return _time_config(settings, lambda c: g.make_block_fp8_gemm(p, inputs, c), tiles.config,
                        f"vLLM's tiles, {tiles.describe()}",
                        (case, "FP32 product of the same block-quantized inputs, dequantized "
                               "(triton_fp8_gemm.reference)", lambda: g.reference(p, inputs)))


def run_case(case: Case, settings: RunSettings) -> Measurement:
    """Time one triton Case on the current CUDA device (UnsupportedCase for known gaps)."""
    if case.skip_reason:
        raise UnsupportedCase(case.skip_reason)
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedCase("the triton backend needs a CUDA GPU; none is visible")
    if case.routine == "triton.fused_moe":
        return _run_moe(case, settings)
    if case.routine == "triton.block_fp8_mm":
        return _run_block_gemm(case, settings)
    raise ValueError(f"routine={case.routine!r}: expected one of {', '.join(ROUTINES)}")


__all__ = ["ROUTINES", "cache_dir", "moe_problem", "run_case", "scheme_of"]
