"""vLLM's physical padding per (routine, backend, dtype): the shape a kernel really runs.

vLLM rounds some weight dimensions up before handing them to a FlashInfer kernel (zero rows,
activations padded at run time, output sliced back), and in a few places raises instead of padding.
Timing the logical shape would time a problem vLLM never runs; padding around a vLLM error would time
a deployment vLLM refuses. So: `PAD_RULES` rounds up, `VLLM_LIMITS` turns the shape into a reason
(it becomes `Case.skip_reason`). Sources are vLLM 0.33.0: each rule's `source` names the vLLM
function as `path.py:function`, the path relative to vllm/model_executor/layers/ (for example
vllm/model_executor/layers/quantization/utils/nvfp4_utils.py: pad_nvfp4_weight_for_cutlass); the
rendered tables live in references/padding.md (see docs_tables.py).

In: a logical GemmShape / MoeShape and the (routine, backend, recipe) that runs it. Out: the
physical shape, or the reason vLLM refuses it.

Dimension names: GEMM "n", "k"; MoE "hidden" (H), "intermediate" (per-rank I_r) and "gemm1_rows"
(2*I_r for gated activations, I_r otherwise; a limit-only dimension).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.case_schema import GemmShape, MoeShape

#: Padding for every backend of a routine.
ALL_BACKENDS: tuple[str, ...] = ()

GEMM_DIMS = ("n", "k")
MOE_DIMS = ("hidden", "intermediate", "gemm1_rows")


@dataclass(frozen=True)
class PadRule:
    """vLLM rounds one dimension up to a multiple for one routine / backend set / recipe."""

    routine: str
    """FlashInfer driver routine (or torch op label) the rule applies to."""
    backends: tuple[str, ...]
    """Backend labels it applies to; () = every backend of the routine."""
    dtype: str
    """Recipe: "bf16", "fp8" or "nvfp4"."""
    dim: str
    """"n", "k" (GEMM) or "hidden", "intermediate" (MoE)."""
    multiple: int
    """Round the dimension up to a multiple of this."""
    gated: bool | None
    """MoE only: applies to gated activations (True), non-gated (False) or both (None)."""
    source: str
    """vLLM function that does it, `path.py:function` under vllm/model_executor/layers/."""


@dataclass(frozen=True)
class VllmLimit:
    """vLLM raises (or cannot load the checkpoint) unless `dim % multiple == 0`: never pad around it."""

    routine: str
    """Routine the limit applies to."""
    backends: tuple[str, ...]
    """Backend labels; () = every backend of the routine."""
    dtype: str
    """Recipe the limit applies to."""
    dim: str
    """Dimension checked (logical, before padding): "n", "k", "hidden", "intermediate", "gemm1_rows"."""
    multiple: int
    """Required multiple."""
    gated: bool | None
    """MoE only: applies to gated (True), non-gated (False) or both (None)."""
    error: str
    """What vLLM does, quoted or paraphrased."""
    source: str
    """vLLM function that raises, `path.py:function` under vllm/model_executor/layers/."""


_NVFP4_LINEAR_PAD = "quantization/utils/nvfp4_utils.py:pad_nvfp4_weight_for_cutlass"
_FP8_MOE_PAD = "quantization/utils/flashinfer_utils.py:align_moe_weights_for_fi"
_NVFP4_MOE_PAD = "quantization/utils/flashinfer_utils.py:align_fp4_moe_weights_for_fi"
_NVFP4_MOE_HIDDEN = "quantization/utils/flashinfer_utils.py:align_fp4_moe_hidden_dim_for_fi"
_NVFP4_CUTLASS_MOE = "quantization/utils/flashinfer_fp4_moe.py:prepare_nvfp4_moe_layer_for_fi_or_cutlass"

PAD_RULES: tuple[PadRule, ...] = (
    # FlashInfer CuTe-DSL / CUTLASS / cuDNN NVFP4 linear: weight N and K padded to 32 (zero
    # rows/cols), activation padded on K, output sliced to N. FI TRTLLM linear pads nothing
    # (vllm/model_executor/layers/quantization/utils/nvfp4_utils.py: pad_nvfp4_weight_for_cutlass).
    PadRule("mm_fp4", ("cudnn", "cutlass", "cute-dsl"), "nvfp4", "n", 32, None, _NVFP4_LINEAR_PAD),
    PadRule("mm_fp4", ("cudnn", "cutlass", "cute-dsl"), "nvfp4", "k", 32, None, _NVFP4_LINEAR_PAD),
    # FP8 per-tensor MoE on both FlashInfer backends: I_r to 16 (gated) / 128 (non-gated), gate
    # and up halves padded independently; hidden size is not padded
    # (vllm/model_executor/layers/quantization/utils/flashinfer_utils.py: align_moe_weights_for_fi).
    PadRule("cutlass_fused_moe", ALL_BACKENDS, "fp8", "intermediate", 16, True, _FP8_MOE_PAD),
    PadRule("cutlass_fused_moe", ALL_BACKENDS, "fp8", "intermediate", 128, False, _FP8_MOE_PAD),
    PadRule("trtllm_fp8_per_tensor_scale_moe", ALL_BACKENDS, "fp8", "intermediate", 16, True,
            _FP8_MOE_PAD),
    PadRule("trtllm_fp8_per_tensor_scale_moe", ALL_BACKENDS, "fp8", "intermediate", 128, False,
            _FP8_MOE_PAD),
    # NVFP4 TRTLLM and CuTe-DSL MoE: H to 256 (activations padded at run time, output trimmed);
    # I_r to 64 (gated, so GEMM1's 2*I_r rows are 128-aligned) / 128 (non-gated)
    # (vllm/model_executor/layers/quantization/utils/flashinfer_utils.py:
    # align_fp4_moe_hidden_dim_for_fi, align_fp4_moe_weights_for_fi;
    # vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py:
    # prepare_nvfp4_moe_layer_for_flashinfer_cutedsl).
    PadRule("trtllm_fp4_block_scale_moe", ALL_BACKENDS, "nvfp4", "hidden", 256, None,
            _NVFP4_MOE_HIDDEN),
    PadRule("trtllm_fp4_block_scale_moe", ALL_BACKENDS, "nvfp4", "intermediate", 64, True,
            _NVFP4_MOE_PAD),
    PadRule("trtllm_fp4_block_scale_moe", ALL_BACKENDS, "nvfp4", "intermediate", 128, False,
            _NVFP4_MOE_PAD),
    PadRule("cute_dsl_fp4_block_scale_moe", ALL_BACKENDS, "nvfp4", "hidden", 256, None,
            "quantization/utils/flashinfer_fp4_moe.py:prepare_nvfp4_moe_layer_for_flashinfer_cutedsl"),
    PadRule("cute_dsl_fp4_block_scale_moe", ALL_BACKENDS, "nvfp4", "intermediate", 64, True,
            "quantization/utils/flashinfer_fp4_moe.py:prepare_nvfp4_moe_layer_for_flashinfer_cutedsl"),
    PadRule("cute_dsl_fp4_block_scale_moe", ALL_BACKENDS, "nvfp4", "intermediate", 128, False,
            "quantization/utils/flashinfer_fp4_moe.py:prepare_nvfp4_moe_layer_for_flashinfer_cutedsl"),
    # FI CUTLASS NVFP4 MoE, non-gated: I_r zero-padded to the 128-row scale tile
    # (vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py:
    # prepare_nvfp4_moe_layer_for_fi_or_cutlass).
    PadRule("cutlass_fused_moe", ALL_BACKENDS, "nvfp4", "intermediate", 128, False,
            _NVFP4_CUTLASS_MOE),
)

VLLM_LIMITS: tuple[VllmLimit, ...] = (
    # Every NVFP4 linear (ModelOpt W4A4) checks K at weight creation
    # (vllm/model_executor/layers/quantization/modelopt.py: KNvfp4Static.create_weights).
    VllmLimit("mm_fp4", ALL_BACKENDS, "nvfp4", "k", 16, None,
              "ValueError: in features size is not multiple of 16",
              "quantization/modelopt.py:KNvfp4Static.create_weights"),
    # Gated FI-CUTLASS NVFP4 MoE cannot pad the w1/w3 halves: 2*I_r must fill 128-row scale tiles
    # (vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py:
    # prepare_nvfp4_moe_layer_for_fi_or_cutlass).
    VllmLimit("cutlass_fused_moe", ALL_BACKENDS, "nvfp4", "gemm1_rows", 128, True,
              "NotImplementedError: Intermediate size padding for w1 and w3 is not currently "
              "supported (2*I_r % 128 != 0)", _NVFP4_CUTLASS_MOE),
)


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= value."""
    return -(-value // multiple) * multiple


def _applies(rule: PadRule | VllmLimit, routine: str, backend: str, dtype: str,
             gated: bool | None) -> bool:
    if rule.routine != routine or rule.dtype != dtype:
        return False
    if rule.backends and backend not in rule.backends:
        return False
    return rule.gated is None or gated is None or rule.gated == gated


def pad_rules_for(routine: str, backend: str, dtype: str, gated: bool | None = None
                  ) -> tuple[PadRule, ...]:
    """The PAD_RULES that apply (at most one per dimension)."""
    return tuple(r for r in PAD_RULES if _applies(r, routine, backend, dtype, gated))


def _limit_reason(dims: dict[str, int], routine: str, backend: str, dtype: str,
                  gated: bool | None) -> str:
    for lim in VLLM_LIMITS:
        if not _applies(lim, routine, backend, dtype, gated) or lim.dim not in dims:
            continue
        value = dims[lim.dim]
        if value % lim.multiple:
            return (f"vLLM limit: {lim.dim}={value} is not a multiple of {lim.multiple} for "
                    f"{dtype} {routine}; vLLM raises {lim.error} ({lim.source}); not padded around")
    return ""


def physical_gemm(shape: GemmShape, routine: str, backend: str, dtype: str
                  ) -> tuple[GemmShape, str]:
    """(physical shape, reason). A non-empty reason means vLLM refuses this shape on this backend;
    the shape is then returned unpadded and the case must be skipped with that reason.

    >>> physical_gemm(GemmShape(8, 1000, 2000), "mm_fp4", "cutlass", "nvfp4")
    (GemmShape(m=8, n=1024, k=2016), '')
    >>> physical_gemm(GemmShape(8, 1000, 2000), "mm_fp4", "trtllm", "nvfp4")
    (GemmShape(m=8, n=1000, k=2000), '')
    """
    reason = _limit_reason({"n": shape.n, "k": shape.k}, routine, backend, dtype, None)
    if reason:
        return shape, reason
    padded = shape
    for rule in pad_rules_for(routine, backend, dtype):
        padded = replace(padded, **{rule.dim: round_up(getattr(padded, rule.dim), rule.multiple)})
    return padded, ""


def physical_moe(shape: MoeShape, routine: str, backend: str, dtype: str, gated: bool
                 ) -> tuple[MoeShape, str]:
    """(physical shape, reason) for one fused-MoE layer; see `physical_gemm`.

    >>> physical_moe(MoeShape(16, 2880, 360, 128, 128, 4), "trtllm_fp4_block_scale_moe",
    ...              "trtllm", "nvfp4", gated=True)[0]
    MoeShape(num_tokens=16, hidden=3072, intermediate=384, experts=128, global_experts=128, top_k=4)
    """
    dims = {"hidden": shape.hidden, "intermediate": shape.intermediate,
            "gemm1_rows": (2 if gated else 1) * shape.intermediate}
    reason = _limit_reason(dims, routine, backend, dtype, gated)
    if reason:
        return shape, reason
    padded = shape
    for rule in pad_rules_for(routine, backend, dtype, gated):
        padded = replace(padded, **{rule.dim: round_up(getattr(padded, rule.dim), rule.multiple)})
    return padded, ""


__all__ = [
    "PadRule",
    "VllmLimit",
    "PAD_RULES",
    "VLLM_LIMITS",
    "round_up",
    "pad_rules_for",
    "physical_gemm",
    "physical_moe",
]
