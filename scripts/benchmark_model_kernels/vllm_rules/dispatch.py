"""Which kernel vLLM dispatches by default, per (GPU family, layer kind, recipe, FP8 scheme).

vLLM picks a kernel per layer from a priority list and the first one whose support check passes
wins. This table records that first choice for a default install (no environment overrides), and
which of this tool's rows times exactly that kernel (`same`), the same algorithm in this tool's
own code (`design`), or nothing (then `missing` says why no row can be it). The report leads with
these cells; every other row is a comparison, never "what vLLM runs".

Sources (vLLM 0.33.0):
- dense: vllm/model_executor/layers/utils.py: dispatch_unquantized_gemm (F.linear);
  vllm/model_executor/kernels/linear/__init__.py: _POSSIBLE_*_KERNELS (priority order);
  .../scaled_mm/cutlass.py: CutlassFP8ScaledMMLinearKernel (CC >= 89, ops.cutlass_scaled_mm);
  .../scaled_mm/flashinfer.py: FlashInferFP8ScaledMMLinearKernel (CC >= 100, per-tensor only).
- MoE: vllm/model_executor/layers/fused_moe/oracle/unquantized.py (Hopper prefers Triton),
  oracle/fp8.py: _get_priority_backends, select_fp8_moe_backend (FlashInfer TRTLLM, then
  FlashInfer CUTLASS, DeepGEMM, Triton; block-128 on SM90 moves Triton first for TP and
  FlashInfer CUTLASS first for EP), oracle/nvfp4.py (Marlin W4A16 below SM100).
- attention (`VLLM_ATTENTION_DEFAULTS`): vllm/platforms/cuda.py: _get_backend_priorities (the
  first backend of the list whose checks pass); what vLLM's FLASHINFER backend calls:
  vllm/v1/attention/backends/flashinfer.py (_get_flashinfer_trtllm_api_decode_kernel: XQA on
  SM90, trtllm-gen on SM100; _get_prefill_wrapper: BatchPrefillWithPagedKVCacheWrapper with
  backend "auto"; get_q_data_type: BF16 query for XQA decode, FP8 query for prefill with an FP8
  KV cache); MLA prefill: vllm/v1/attention/backends/mla/prefill/flash_attn.py (MHA over the
  up-projected K/V, qk head dim qk_nope_head_dim + qk_rope_head_dim, v head dim v_head_dim).
"""

from __future__ import annotations

from dataclasses import dataclass

from .quant_config import FP8_SCHEMES


@dataclass(frozen=True)
class VllmDefault:
    """vLLM's default kernel for one (family, kind, recipe, scheme) and the row that times it."""

    family: str
    """"sm90" (H100/H200) or "sm100" (B200/GB200)."""
    kind: str
    """"gemm" or "moe"."""
    recipe: str
    """"bf16", "fp8" or "nvfp4"."""
    scheme: str
    """FP8 scheme (FP8_SCHEMES) or "" for the other recipes."""
    kernel: str
    """What vLLM runs, in vLLM's words."""
    backend: str = ""
    """This tool's backend label whose rows time it ("" when none does)."""
    routine: str = ""
    """Narrows `backend` to one routine ("" = any routine of that backend and recipe)."""
    match: str = ""
    """"same" (the kernel vLLM calls), "design" (vLLM's algorithm, this tool's own code) or ""."""
    missing: str = ""
    """Why no row is vLLM's kernel, when `match` is ""."""
    ep_only: bool | None = None
    """True/False: the rule applies only with/without expert parallelism; None: always."""


_VLLM_CUTLASS_MM = ("vLLM's own CUTLASS kernel (vllm._custom_ops.cutlass_scaled_mm) needs vLLM "
                    "installed; the FP8 rows here time cuBLASLt/cuDNN/FlashInfer instead")
_MARLIN = ("vLLM runs NVFP4 below SM100 as Marlin W4A16 (weights dequantized to BF16 in the "
           "kernel), which this tool does not time")

VLLM_DEFAULTS: tuple[VllmDefault, ...] = (
    # ---- Hopper (SM 9.0)
    VllmDefault("sm90", "gemm", "bf16", "", "F.linear (cuBLAS)", "torch", "torch.linear", "same"),
    VllmDefault("sm90", "gemm", "fp8", "per_tensor", "vLLM CUTLASS cutlass_scaled_mm",
                missing=_VLLM_CUTLASS_MM),
    VllmDefault("sm90", "gemm", "fp8", "per_token", "vLLM CUTLASS cutlass_scaled_mm",
                missing=_VLLM_CUTLASS_MM),
    VllmDefault("sm90", "gemm", "fp8", "block128",
                "FlashInfer fp8_blockscale_gemm (M < 32) / DeepGEMM, then CUTLASS block, then Triton",
                missing="the first choices need DeepGEMM or FlashInfer's SM90 block-scale GEMM; the "
                        "triton row times vLLM's last fallback (w8a8_block_fp8_matmul's algorithm)"),
    VllmDefault("sm90", "gemm", "nvfp4", "", "Marlin W4A16", missing=_MARLIN),
    VllmDefault("sm90", "moe", "bf16", "", "Triton fused_moe", "triton", match="design"),
    VllmDefault("sm90", "moe", "fp8", "per_tensor", "FlashInfer CUTLASS fused MoE (SM90 build)",
                "cutlass", "cutlass_fused_moe", "same"),
    VllmDefault("sm90", "moe", "fp8", "per_token", "Triton fused_moe (per-token FP8)", "triton",
                match="design"),
    VllmDefault("sm90", "moe", "fp8", "block128", "Triton fused_moe (block FP8)", "triton",
                match="design", ep_only=False),
    VllmDefault("sm90", "moe", "fp8", "block128", "FlashInfer CUTLASS fused MoE (block FP8)",
                missing="the FlashInfer driver has no SM90 block-FP8 CUTLASS MoE routine",
                ep_only=True),
    VllmDefault("sm90", "moe", "nvfp4", "", "Marlin W4A16 MoE", missing=_MARLIN),
    # ---- Blackwell (SM 10.x)
    VllmDefault("sm100", "gemm", "bf16", "", "F.linear (cuBLAS)", "torch", "torch.linear", "same"),
    VllmDefault("sm100", "gemm", "fp8", "per_tensor", "FlashInfer bmm_fp8 (backend auto)",
                missing="the driver times bmm_fp8 per named backend, not FlashInfer's auto choice"),
    VllmDefault("sm100", "gemm", "fp8", "per_token", "vLLM CUTLASS cutlass_scaled_mm",
                missing=_VLLM_CUTLASS_MM),
    VllmDefault("sm100", "gemm", "nvfp4", "", "FlashInfer CuTe-DSL NVFP4 GEMM", "cute-dsl", "mm_fp4",
                "same"),
    VllmDefault("sm100", "moe", "bf16", "", "FlashInfer TRTLLM BF16 MoE",
                missing="the FlashInfer driver has no BF16 trtllm MoE routine; cutlass_fused_moe "
                        "is vLLM's second choice"),
    VllmDefault("sm100", "moe", "fp8", "per_tensor", "FlashInfer TRTLLM per-tensor FP8 MoE", "trtllm",
                "trtllm_fp8_per_tensor_scale_moe", "same"),
    VllmDefault("sm100", "gemm", "fp8", "block128", "DeepGEMM / vLLM CUTLASS block-scaled GEMM",
                missing="vLLM's block-FP8 linear kernels need DeepGEMM or vLLM installed; the "
                        "FlashInfer gemm_fp8_nt_groupwise and triton rows are comparisons"),
    VllmDefault("sm100", "moe", "fp8", "block128", "FlashInfer TRTLLM block-scale FP8 MoE", "trtllm",
                "trtllm_fp8_block_scale_moe", "same"),
    VllmDefault("sm100", "moe", "nvfp4", "", "FlashInfer TRTLLM NVFP4 MoE", "trtllm",
                "trtllm_fp4_block_scale_moe", "same"),
)


@dataclass(frozen=True)
class VllmAttentionDefault:
    """vLLM's default attention backend for one (family, attention kind, phase, KV dtype), and
    which FlashInfer driver backend, if any, runs the kernel it dispatches."""

    family: str
    """"sm90" or "sm100"."""
    attention: str
    """"mha" (MHA/GQA/MQA) or "mla"."""
    phase: str
    """"decode" or "prefill"."""
    kv_dtype: str
    """"bf16" or "fp8"."""
    kernel: str
    """vLLM's default backend and the kernel it runs, in vLLM's words."""
    backend: str = ""
    """The driver backend whose rows time that kernel ("" when none does)."""
    missing: str = ""
    """Why no row is vLLM's default, when `backend` is ""."""
    flashinfer_backend: str = ""
    """The driver backend vLLM's FLASHINFER attention backend runs here when it is not the
    default (--attention-backend FLASHINFER); those rows are marked `vllm_flashinfer`."""
    flashinfer_note: str = ""
    """What vLLM's FLASHINFER backend runs here, and why no row matches it, when none does."""


_FA_MISSING = ("vLLM's FLASH_ATTN backend runs vllm-flash-attn (FlashAttention 3 on Hopper, built "
               "into vLLM), which this tool does not time; the attention rows are FlashInfer's kernels")
_FA_MLA_MISSING = ("vLLM's FLASH_ATTN_MLA backend runs vllm-flash-attn's MLA decode, which this "
                   "tool does not time; the MLA rows are FlashInfer's kernels")
#: The driver backend that calls FlashInfer's trtllm_* attention APIs directly: on sm_90 the decode
#: API picks XQA (flashinfer/decode.py trtllm_batch_decode_with_kv_cache, backend "auto"), on
#: sm_100 trtllm-gen (routine_cc_to_supported_backends notes in the driver).
_NATIVE = "trtllm-native"
_FP8_Q = ("vLLM's FLASHINFER prefill with an FP8 KV cache quantizes the query to FP8 "
          "(flashinfer.py get_q_data_type) and runs fa3; these rows keep the query BF16")
_MLA_PREFILL = ("vLLM runs MLA prefill as MHA over the up-projected K/V "
                "(vllm/v1/attention/backends/mla/prefill/flash_attn.py)")

VLLM_ATTENTION_DEFAULTS: tuple[VllmAttentionDefault, ...] = (
    # ---- Hopper: FLASH_ATTN leads the non-MLA list, FLASH_ATTN_MLA the MLA one.
    VllmAttentionDefault("sm90", "mha", "decode", "bf16", "FLASH_ATTN (vllm-flash-attn FA3)",
                         missing=_FA_MISSING, flashinfer_backend=_NATIVE),
    VllmAttentionDefault("sm90", "mha", "decode", "fp8", "FLASH_ATTN (vllm-flash-attn FA3)",
                         missing=_FA_MISSING, flashinfer_backend=_NATIVE),
    VllmAttentionDefault("sm90", "mha", "prefill", "bf16", "FLASH_ATTN (vllm-flash-attn FA3)",
                         missing=_FA_MISSING, flashinfer_backend="fa3"),
    VllmAttentionDefault("sm90", "mha", "prefill", "fp8", "FLASH_ATTN (vllm-flash-attn FA3)",
                         missing=_FA_MISSING, flashinfer_note=_FP8_Q),
    VllmAttentionDefault("sm90", "mla", "decode", "bf16", "FLASH_ATTN_MLA", missing=_FA_MLA_MISSING),
    VllmAttentionDefault("sm90", "mla", "decode", "fp8", "FLASH_ATTN_MLA", missing=_FA_MLA_MISSING),
    VllmAttentionDefault("sm90", "mla", "prefill", "bf16", "vllm-flash-attn varlen (MLA prefill)",
                         missing=_MLA_PREFILL + " with vllm-flash-attn, which this tool does not time"),
    VllmAttentionDefault("sm90", "mla", "prefill", "fp8", "vllm-flash-attn varlen (MLA prefill)",
                         missing=_MLA_PREFILL + " with vllm-flash-attn, which this tool does not time"),
    # ---- Blackwell: FLASHINFER leads the non-MLA list (causal), FLASHINFER_MLA the MLA one; both
    # call the trtllm-gen kernels, which the driver's trtllm-native backend times.
    VllmAttentionDefault("sm100", "mha", "decode", "bf16", "FLASHINFER (trtllm-gen decode)", _NATIVE),
    VllmAttentionDefault("sm100", "mha", "decode", "fp8", "FLASHINFER (trtllm-gen decode)", _NATIVE),
    VllmAttentionDefault("sm100", "mha", "prefill", "bf16", "FLASHINFER (trtllm-gen context)", _NATIVE),
    VllmAttentionDefault("sm100", "mha", "prefill", "fp8", "FLASHINFER (trtllm-gen context)",
                         missing="vLLM quantizes the query to FP8 for this kernel; these rows keep "
                                 "the query BF16"),
    VllmAttentionDefault("sm100", "mla", "decode", "bf16", "FLASHINFER_MLA (trtllm-gen MLA)", _NATIVE),
    VllmAttentionDefault("sm100", "mla", "decode", "fp8", "FLASHINFER_MLA (trtllm-gen MLA)", _NATIVE),
)


def vllm_attention_default(family: str, attention: str, phase: str,
                           kv_dtype: str) -> VllmAttentionDefault | None:
    """The attention table's row for one cell, or None (another GPU family, or no row)."""
    for row in VLLM_ATTENTION_DEFAULTS:
        if (row.family, row.attention, row.phase, row.kv_dtype) == (family, attention, phase, kv_dtype):
            return row
    return None


def attention_default_match(compute_capability: tuple[int, int] | None, attention: str, phase: str,
                            kv_dtype: str, backend: str) -> str:
    """"same" (the kernel vLLM's default attention backend runs), "vllm_flashinfer" (the kernel
    vLLM's FLASHINFER backend runs, not the default on this GPU) or "" for one attention row."""
    row = vllm_attention_default(gpu_family(compute_capability), attention, phase, kv_dtype)
    if row is None:
        return ""
    if row.backend and row.backend == backend:
        return "same"
    return "vllm_flashinfer" if row.flashinfer_backend and row.flashinfer_backend == backend else ""


def gpu_family(compute_capability: tuple[int, int] | None) -> str:
    """"sm90", "sm100" or "" (no table for that GPU) from a compute capability."""
    if compute_capability is None:
        return ""
    major = compute_capability[0]
    return {9: "sm90", 10: "sm100"}.get(major, "")


def vllm_default(family: str, kind: str, recipe: str, scheme: str = "",
                 expert_parallel: bool = False) -> VllmDefault | None:
    """The table row for one cell, or None when the table has none (another GPU family)."""
    for row in VLLM_DEFAULTS:
        if (row.family, row.kind, row.recipe, row.scheme) != (family, kind, recipe, scheme):
            continue
        if row.ep_only is not None and row.ep_only != expert_parallel:
            continue
        return row
    return None


def is_vllm_default(row: VllmDefault | None, backend: str, routine: str) -> bool:
    """Whether a case of `backend`/`routine` times the kernel (or design) of `row`."""
    if row is None or not row.match or row.backend != backend:
        return False
    return not row.routine or row.routine == routine


def default_match(compute_capability: tuple[int, int] | None, kind: str, recipe: str, scheme: str,
                  backend: str, routine: str, expert_parallel: bool) -> str:
    """"same", "design" or "": how a row of `backend`/`routine` relates to vLLM's default kernel
    for (kind, recipe, scheme) on a GPU of `compute_capability` ("" when it is not it, or the
    GPU is unknown or has no table)."""
    row = vllm_default(gpu_family(compute_capability), kind, recipe, scheme, expert_parallel)
    return row.match if row is not None and is_vllm_default(row, backend, routine) else ""


__all__ = ["FP8_SCHEMES", "VLLM_ATTENTION_DEFAULTS", "VLLM_DEFAULTS", "VllmAttentionDefault",
           "VllmDefault", "attention_default_match", "default_match", "gpu_family", "is_vllm_default",
           "vllm_attention_default", "vllm_default"]
