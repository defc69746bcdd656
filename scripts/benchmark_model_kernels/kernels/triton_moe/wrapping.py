"""The passes of one rank's fused-MoE call, as vLLM 0.33's `fused_experts_impl` runs them.

vllm/model_executor/layers/fused_moe/fused_moe.py: fused_experts_impl, for M tokens and top_k:
align the M x top_k (token, expert) pairs to the tile (`_prepare_expert_assignment`; pairs of
other EP ranks get no slot: ignore_invalid_experts=True), grouped GEMM 1 into intermediate_cache1
[M x top_k, N1], `apply_moe_activation` over ALL M x top_k rows into intermediate_cache2
[M x top_k, I] (BF16), `moe_kernel_quantize_input` of that whole tensor (FP8 schemes: per-token
or 1 x block group scales, or one per-tensor scale: static, or computed over the whole tensor by
`dynamic_scaled_fp8_quant` for the online fp8_per_tensor method), `intermediate_cache3.zero_()`
of the whole [M x top_k, H] output cache when there is an expert map (EP), grouped GEMM 2 into
it, then `ops.moe_sum` over all top_k slots of every token, local or not. So under EP the
activation, the quantization, the zero fill and the sum grow with M x top_k, not with the pairs
this rank's experts compute. The input's own quantization (`moe_kernel_quantize_input` of
hidden_states) is the `+quant` twin's, timed apart.

`passes(p)` lists what `fused.make_fused_moe` launches, with the rows x cols each pass sweeps
(the GEMMs compute the local pairs only; the rest sweep every slot), so a CPU test pins the work
the GPU row does. Pure: imports on a CPU machine without torch or Triton.
"""

from __future__ import annotations

from dataclasses import dataclass

from .problem import FP8_SCHEMES, MoeProblem, _cdiv

__all__ = ["PASS_NAMES", "Pass", "expert_parallel", "naive_block_assignment", "passes"]

#: vLLM's margin of the naive block assignment (`SPARSITY_FACTOR` in fused_moe.py).
NAIVE_SPARSITY = 4
#: Every pass, in launch order.
PASS_NAMES = ("align", "gemm1", "activation", "a2_scale", "a2_quant", "zero_fill", "gemm2",
              "moe_sum")


@dataclass(frozen=True)
class Pass:
    """One step of the call and the tensor it sweeps."""

    name: str
    """One of PASS_NAMES."""
    rows: int
    """Rows swept: M x top_k slots (a GEMM computes only the local pairs among them)."""
    cols: int
    """Columns of each row: I (activation output, quantization), H (zero fill, GEMM 2, sum),
    N1 (GEMM 1), 1 (align: the routed expert ids)."""
    local_only: bool
    """The pass computes only the pairs of this rank's experts (the GEMMs)."""
    source: str
    """The vLLM code it stands for."""

    @property
    def elements(self) -> int:
        return self.rows * self.cols


def expert_parallel(p: MoeProblem) -> bool:
    """vLLM passes an expert map (EP): some of the global experts live on other ranks."""
    return p.local_experts < p.global_experts


def naive_block_assignment(p: MoeProblem) -> bool:
    """vLLM's naive block assignment (fused_moe.py `_prepare_expert_assignment`): without expert
    parallelism (no expert map) and when M*top_k*4 <= the global experts, every pair is its own
    block of the GEMMs (expert_ids = the flat topk_ids) and the align step does not run."""
    return not expert_parallel(p) and p.pairs * NAIVE_SPARSITY <= p.global_experts


def passes(p: MoeProblem) -> tuple[Pass, ...]:
    """The passes of `p`'s call in launch order (see the module docstring)."""
    slots, h, i = p.pairs, p.hidden, p.intermediate
    fp8 = p.scheme in FP8_SCHEMES
    out: list[Pass] = []
    if not naive_block_assignment(p):
        out.append(Pass("align", slots, 1, False, "moe_align_block_size (ignore_invalid_experts)"))
    out.append(Pass("gemm1", slots, p.n1, True, "fused_moe_kernel (w1)"))
    out.append(Pass("activation", slots, i, False, "apply_moe_activation"))
    if p.scheme == "fp8_per_tensor" and p.dynamic_scale:
        out.append(Pass("a2_scale", slots, i, False,
                        "moe_kernel_quantize_input: dynamic_scaled_fp8_quant's amax reduction"))
    if fp8:
        layout = {"fp8_per_tensor": "per tensor", "fp8_per_token": "per token",
                  "fp8_block128": f"per 1x{p.block_size} group"}[p.scheme]
        out.append(Pass("a2_quant", slots, i, False, f"moe_kernel_quantize_input ({layout})"))
    if expert_parallel(p):
        out.append(Pass("zero_fill", slots, h, False, "intermediate_cache3.zero_() (expert map)"))
    out.append(Pass("gemm2", slots, h, True, "fused_moe_kernel (w2, routing weight)"))
    out.append(Pass("moe_sum", slots, h, False, "ops.moe_sum over every top_k slot"))
    return tuple(out)


def scale_groups(p: MoeProblem) -> int:
    """Scales per row of a quantized activation of width I: 1, or I / block groups."""
    return _cdiv(p.intermediate, p.block_size) if p.scheme == "fp8_block128" else 1
