"""The `triton` backend: this tool's Triton kernels of vLLM's designs, timed like every other row.

* "triton.fused_moe" (MoE; bf16, fp8 per_tensor / per_token / block128): vLLM's fused-MoE
  algorithm (align pairs to the tile, grouped GEMM 1, activation, grouped GEMM 2 with the routing
  weights, top-k sum), `run/triton_moe/`. On Hopper this is the design vLLM dispatches for BF16,
  per-token FP8 and (under TP) block-FP8 MoE; the code is this tool's, not vLLM's.
* "triton.block_fp8_mm" (GEMM; fp8 block128): vLLM's `w8a8_block_fp8_matmul` algorithm
  (`run/triton_fp8_gemm.py`), the last fallback of vLLM's block-FP8 linear chain on Hopper.

The kernel-only row takes activations already quantized as its scheme needs; the `.q` twin adds
that quantization, timed by `quant_timing`. Tiles are searched per shape once and cached beside the
autotuner cache (`<autotune_cache>.triton/`), so a warm run does not search again.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from ..cases.schema import Case, GemmShape, MoeShape
from .results import RunSettings
from .timing import Measurement, UnsupportedCase, bench

ROUTINES = ("triton.fused_moe", "triton.block_fp8_mm")
#: FlashInfer ActivationType (the Case's name) -> the Triton MoE kernel's activation.
ACTIVATIONS = {
    "Swiglu": "silu_and_mul",
    "Geglu": "gelu_and_mul",
    "GegluTanh": "gelu_tanh_and_mul",
    "SwigluBias": "swigluoai",
    "Relu2": "relu2",
    "Silu": "silu",
    "Gelu": "gelu",
}
#: Search timing: few iterations are enough to rank tiles; the row itself uses the run's settings.
_SEARCH_ITERS = 10


def scheme_of(case: Case) -> str:
    """The Triton MoE kernel's scheme name for a case: "bf16" or "fp8_<variant>"."""
    return "bf16" if case.dtype == "bf16" else f"fp8_{case.variant}"


def cache_dir(settings: RunSettings) -> str:
    """Where searched tiles are kept: beside the autotuner cache of the run."""
    base = settings.autotune_cache or os.path.join(os.getcwd(), "autotune_cache.json")
    return base + ".triton"


def _timer(settings: RunSettings) -> Callable[[Callable[..., Any], tuple[Any, ...]], float]:
    quick = dataclasses.replace(settings, num_iters=_SEARCH_ITERS, dry_run_iters=3)

    def time_us(fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
        return bench(fn, quick, input_args=args).median_us

    return time_us


def _gpu_key() -> tuple[str, str]:
    import torch  # lazy: only on the GPU worker
    import triton

    return torch.cuda.get_device_name(), triton.__version__


def moe_problem(case: Case) -> Any:
    """The Triton MoE problem of a case (ValueError names the field that does not fit)."""
    from .triton_moe.problem import MoeProblem

    p = case.physical
    assert isinstance(p, MoeShape)
    act = ACTIVATIONS.get(case.activation)
    if act is None:
        raise UnsupportedCase(f"triton.fused_moe has no {case.activation} activation "
                              f"(it has {', '.join(ACTIVATIONS)})")
    return MoeProblem(num_tokens=p.num_tokens, hidden=p.hidden, intermediate=p.intermediate,
                      local_experts=p.experts, global_experts=p.global_experts, top_k=p.top_k,
                      activation=act, gated=case.gated, scheme=scheme_of(case),
                      has_bias=case.activation == "SwigluBias")


def _run_moe(case: Case, settings: RunSettings) -> Measurement:
    from .triton_moe import fused, problem, tuning
    from .triton_tuning import load_cached_config, search_config, store_config

    p = moe_problem(case)
    inputs = problem.build_inputs(p, "cuda")
    gpu, triton_version = _gpu_key()
    key = tuning.config_key(p, gpu, triton_version)
    config = load_cached_config(cache_dir(settings), key)
    note = "tiles from the cache"
    if config is None:
        space = tuning.config_space(p.scheme, p.num_tokens, top_k=p.top_k,
                                    local_experts=p.local_experts)
        config = search_config(lambda c: fused.make_fused_moe(p, inputs, c), space,
                               _timer(settings))
        store_config(cache_dir(settings), key, config)
        note = f"tiles searched over {len(space)} configs"
    fn, args = fused.make_fused_moe(p, inputs, config)
    fn(*args)
    m = bench(fn, settings, input_args=args)
    tiles = ",".join(str(config[k]) for k in tuning.CONFIG_KEYS)
    return dataclasses.replace(m, note="; ".join(x for x in (f"{note}: {tiles}", m.note) if x))


def _run_block_gemm(case: Case, settings: RunSettings) -> Measurement:
    from . import triton_fp8_gemm as g
    from .triton_tuning import load_cached_config, search_config, store_config

    shape = case.physical
    assert isinstance(shape, GemmShape)
    p = g.BlockFp8Problem(shape.m, shape.n, shape.k)
    inputs = g.build_inputs(p, "cuda")
    gpu, triton_version = _gpu_key()
    key = g.config_cache_key(gpu, p.m, p.n, p.k, triton_version)
    config = load_cached_config(cache_dir(settings), key)
    if config is None:
        config = search_config(lambda c: g.make_block_fp8_gemm(p, inputs, c), g.config_space(p.m),
                               _timer(settings))
        store_config(cache_dir(settings), key, config)
    fn, args = g.make_block_fp8_gemm(p, inputs, config)
    fn(*args)
    return bench(fn, settings, input_args=args)


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


__all__ = ["ACTIVATIONS", "ROUTINES", "cache_dir", "moe_problem", "run_case", "scheme_of"]
