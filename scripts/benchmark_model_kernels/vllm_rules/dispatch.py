"""Which kernel vLLM dispatches by default, per (GPU family, layer kind, recipe, FP8 scheme).

vLLM picks a kernel per layer from a priority list and the first one whose support check passes
wins. This table records that first choice for a default install of vLLM `VLLM_VERSION` (no
environment overrides; FlashInfer and vLLM's bundled DeepGEMM usable), in vLLM's own name
(`vllm_kernel`: the linear kernel class or the MoE backend its selection function returns), and
which of this tool's rows times exactly that kernel (`same`), the same algorithm in this tool's
own code (`design`), or nothing (then `missing` says why, and `closest` names the timed row the
report shows instead). The report leads with these cells; every other row is a comparison, never
"what vLLM runs". `timed_label` turns a row into what it times relative to vLLM (TIMED_LABELS).

The table is checked against vLLM itself: crosscheck/vllm_dispatch.py asks vLLM's selection code
on a faked GPU, benchmarks/vllm_dispatch_fidelity.py writes the answers with this table beside them
(examples/vllm_fidelity/), and a `vllm`-marker test fails on any disagreement.

Sources (vLLM 0.33.0):
- dense: vllm/model_executor/layers/utils.py: dispatch_unquantized_gemm (F.linear);
  vllm/model_executor/kernels/linear/__init__.py: init_fp8_linear_kernel, init_nvfp4_linear_kernel
  and the _POSSIBLE_*_KERNELS priority lists; .../scaled_mm/cutlass.py: CutlassFP8ScaledMMLinearKernel
  (any activation scales); .../scaled_mm/flashinfer.py: FlashInferFP8ScaledMMLinearKernel (CC >= 100,
  per-tensor weights and activations only), FlashInferFp8DeepGEMMDynamicBlockScaledKernel (FlashInfer
  for M < 32, DeepGEMM above); quantization/utils/humming/priority.py: prefers_humming (Humming
  ahead of Marlin on SM90).
- activation scales: quantization/fp8.py: Fp8LinearMethod (static checkpoint scales stay static;
  dynamic ones go per token where cutlass_fp8_supported()) and Fp8MoEMethod (per tensor, dynamic
  unless static); online/fp8.py: Fp8PerTensorOnlineLinearMethod (per token where CUTLASS FP8 is
  supported), Fp8PerTensorOnlineMoEMethod (dynamic per tensor).
- MoE: fused_moe/oracle/unquantized.py (Hopper prefers Triton); oracle/fp8.py:
  _get_priority_backends, select_fp8_moe_backend (FlashInfer TRTLLM, FlashInfer CUTLASS, DeepGEMM,
  vLLM CUTLASS where the caller allows it (compressed-tensors and online per-channel do), Triton;
  block-128 on SM90 moves Triton first for TP and FlashInfer CUTLASS first for EP),
  refine_fp8_moe_block_shape (a block-128 checkpoint whose per-rank intermediate size 128 does not
  divide is refined to gcd(128, I_r, H) >= 32, which only Triton takes); the experts' own checks:
  experts/flashinfer_cutlass_moe.py: FlashInferExperts (static per-tensor activations or blocks),
  experts/cutlass_moe.py: CutlassExpertsFp8 (SM 9.0-10.x, channel weights with per-token
  activations), experts/triton_cutlass_moe.py: TritonOrCutlassExperts (Triton for M <= 8 on
  SM100); oracle/nvfp4.py: select_nvfp4_moe_backend.
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

from ..core.case_schema import TIMED_LABELS
from .layers import QUANTIZED_ROUTERS
from .moe_triton import refined_block_shape
from .quant_config import FP8_SCHEMES

#: The vLLM release this table matches (checked by the `vllm`-marker test with that release).
VLLM_VERSION = "0.33.0"

#: Activation scales of a per-tensor FP8 layer: from the checkpoint ("static") or computed per call
#: ("dynamic": a checkpoint with activation_scheme dynamic, or vLLM's online `fp8_per_tensor`).
ACTIVATION_SCALES = ("static", "dynamic")

#: (backend, routine) of one kind of timed row.
RowKey = tuple[str, str]


@dataclass(frozen=True)
class VllmDefault:
    """vLLM's default kernel for one (family, kind, recipe, scheme) and the row that times it."""

    family: str
    """"sm90" (H100/H200) or "sm100" (B200/GB200)."""
    kind: str
    """"gemm", "moe" or "router" (the MoE router GEMM, where it differs from the dense layers)."""
    recipe: str
    """"bf16", "fp8" or "nvfp4"."""
    scheme: str
    """FP8 scheme (FP8_SCHEMES) or "" for the other recipes."""
    kernel: str
    """What vLLM runs, in words."""
    vllm_kernel: str
    """What vLLM's selection code returns, in vLLM's names: the linear kernel class
    (init_fp8_linear_kernel, init_nvfp4_linear_kernel), `default_unquantized_gemm`
    (dispatch_unquantized_gemm), or the MoE backend ("Fp8MoeBackend.TRITON"; select_*_moe_backend)."""
    backend: str = ""
    """This tool's backend label whose rows time it ("" when none does)."""
    routine: str = ""
    """Narrows `backend` to one routine ("" = any routine of that backend and recipe)."""
    match: str = ""
    """"same" (the kernel vLLM calls), "design" (vLLM's algorithm, this tool's own code) or ""."""
    missing: str = ""
    """Why no row is vLLM's kernel, when `match` is ""."""
    closest: RowKey | None = None
    """Where no row is vLLM's kernel: the timed row the report shows in its place."""
    fallbacks: tuple[RowKey, ...] = ()
    """Rows that time a kernel vLLM runs elsewhere (later in the same priority list, on another GPU
    or shape)."""
    ep_only: bool | None = None
    """True/False: the rule applies only with/without expert parallelism; None: always."""
    activation_scales: str = ""
    """Per-tensor FP8: the rule for "static" or "dynamic" activation scales (ACTIVATION_SCALES);
    "" for the other schemes (always dynamic)."""
    refined: bool | None = None
    """Block-128 FP8 MoE: True/False: the rule applies only when vLLM refines / keeps the 128x128
    blocks (oracle/fp8.py: refine_fp8_moe_block_shape); None: always."""
    architectures: tuple[str, ...] = ()
    """The rule holds only for these vLLM model classes (a router that a model builds with or without
    the quantization config); (): every model."""
    activation_quant: str = ""
    """FP8: the activation quantization vLLM sets the kernel up for, in vLLM's names
    (vllm/config/quantization.py: QUANT_KEY_NAMES): "fp8_per_tensor_static", "fp8_per_tensor_dynamic",
    "fp8_per_token" (dynamic) or "fp8_per_block_dynamic" (1x128 groups)."""


_VLLM_CUTLASS_MM = ("vLLM's own CUTLASS kernel (vllm._custom_ops.cutlass_scaled_mm) is compiled into "
                    "vLLM, which this tool does not time")
_VLLM_CUTLASS_MOE = ("vLLM's own CUTLASS grouped GEMM (CutlassExpertsFp8, vllm._custom_ops.cutlass_moe_mm) "
                     "is compiled into vLLM, which this tool does not time")
_HUMMING = ("vLLM runs NVFP4 on SM90 as Humming W4A16 (weights dequantized to BF16 in the kernel), "
            "which this tool does not time")
#: Rows this table names by (backend, routine).
_TORCH_MM = ("torch", "torch._scaled_mm")
_TRITON_MOE = ("triton", "triton.fused_moe")
_TRITON_BLOCK_MM = ("triton", "triton.block_fp8_mm")
_CUTLASS_MOE = ("cutlass", "cutlass_fused_moe")

_FP8_ROUTER = ("FP8 like the dense layers (vLLM CUTLASS cutlass_scaled_mm, activations per token): vLLM's "
               "online fp8_per_tensor quantizes the router (GateLinear), which Qwen3-MoE builds with the "
               "quantization config (vllm/model_executor/models/qwen3_moe.py: Qwen3MoeSparseMoeBlock)")
_REFINED = "Triton fused_moe (block FP8, blocks refined to fit the shard)"
_T, _D = "fp8_per_tensor_static", "fp8_per_tensor_dynamic"
_TOK, _BLK = "fp8_per_token", "fp8_per_block_dynamic"

VLLM_DEFAULTS: tuple[VllmDefault, ...] = (
    # ---- Hopper (SM 9.0)
    VllmDefault("sm90", "gemm", "bf16", "", "F.linear (cuBLAS)", "default_unquantized_gemm", "torch",
                "torch.linear", "same"),
    VllmDefault("sm90", "gemm", "fp8", "per_tensor", "vLLM CUTLASS cutlass_scaled_mm (static per-tensor "
                "activations)", "CutlassFP8ScaledMMLinearKernel", missing=_VLLM_CUTLASS_MM,
                closest=_TORCH_MM, fallbacks=(_TORCH_MM,), activation_scales="static", activation_quant=_T),
    VllmDefault("sm90", "gemm", "fp8", "per_tensor", "vLLM CUTLASS cutlass_scaled_mm (activations "
                "quantized per token on every call)", "CutlassFP8ScaledMMLinearKernel",
                missing=_VLLM_CUTLASS_MM, closest=_TORCH_MM, activation_scales="dynamic", activation_quant=_TOK),
    VllmDefault("sm90", "gemm", "fp8", "per_token", "vLLM CUTLASS cutlass_scaled_mm",
                "CutlassFP8ScaledMMLinearKernel", missing=_VLLM_CUTLASS_MM, closest=_TORCH_MM,
                fallbacks=(_TORCH_MM,), activation_quant=_TOK),
    VllmDefault("sm90", "gemm", "fp8", "block128",
                "FlashInfer fp8_blockscale_gemm (M < 32) / DeepGEMM fp8_gemm_nt",
                "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
                missing="this tool times neither FlashInfer's SM90 block-scale GEMM nor DeepGEMM",
                closest=_TRITON_BLOCK_MM, fallbacks=(_TRITON_BLOCK_MM,), activation_quant=_BLK),
    VllmDefault("sm90", "gemm", "nvfp4", "", "Humming W4A16", "HummingNvFp4LinearKernel", missing=_HUMMING),
    VllmDefault("sm90", "moe", "bf16", "", "Triton fused_moe", "UnquantizedMoeBackend.TRITON", "triton",
                match="design"),
    VllmDefault("sm90", "moe", "fp8", "per_tensor", "FlashInfer CUTLASS fused MoE (SM90 build)",
                "Fp8MoeBackend.FLASHINFER_CUTLASS", "cutlass", "cutlass_fused_moe", "same",
                fallbacks=(_TRITON_MOE,), activation_scales="static", activation_quant=_T),
    VllmDefault("sm90", "moe", "fp8", "per_tensor", "Triton fused_moe (dynamic per-tensor activation scale)",
                "Fp8MoeBackend.TRITON", "triton", match="design",
                activation_scales="dynamic", activation_quant=_D),
    VllmDefault("sm90", "moe", "fp8", "per_token", "vLLM CUTLASS grouped GEMM (CutlassExpertsFp8)",
                "Fp8MoeBackend.VLLM_CUTLASS", missing=_VLLM_CUTLASS_MOE, closest=_TRITON_MOE,
                fallbacks=(_TRITON_MOE,), activation_quant=_TOK),
    VllmDefault("sm90", "moe", "fp8", "block128", "Triton fused_moe (block FP8)", "Fp8MoeBackend.TRITON",
                "triton", match="design", ep_only=False, activation_quant=_BLK),
    VllmDefault("sm90", "moe", "fp8", "block128", "FlashInfer CUTLASS fused MoE (block FP8)",
                "Fp8MoeBackend.FLASHINFER_CUTLASS",
                missing="the FlashInfer driver has no SM90 block-FP8 CUTLASS MoE routine",
                closest=_TRITON_MOE, fallbacks=(_TRITON_MOE,), ep_only=True, refined=False, activation_quant=_BLK),
    VllmDefault("sm90", "moe", "fp8", "block128", _REFINED, "Fp8MoeBackend.TRITON", "triton", match="design",
                ep_only=True, refined=True, activation_quant=_BLK),
    VllmDefault("sm90", "moe", "nvfp4", "", "Humming W4A16 MoE", "NvFp4MoeBackend.HUMMING", missing=_HUMMING),
    VllmDefault("sm90", "router", "fp8", "per_tensor", _FP8_ROUTER, "CutlassFP8ScaledMMLinearKernel",
                missing=_VLLM_CUTLASS_MM, closest=_TORCH_MM, activation_scales="dynamic",
                architectures=QUANTIZED_ROUTERS, activation_quant=_TOK),
    # ---- Blackwell (SM 10.x)
    VllmDefault("sm100", "gemm", "bf16", "", "F.linear (cuBLAS)", "default_unquantized_gemm", "torch",
                "torch.linear", "same"),
    VllmDefault("sm100", "gemm", "fp8", "per_tensor", "FlashInfer bmm_fp8 (backend auto)",
                "FlashInferFP8ScaledMMLinearKernel",
                missing="the driver times bmm_fp8 per named backend, not FlashInfer's auto choice",
                closest=("cublas", "bmm_fp8"), fallbacks=(_TORCH_MM,), activation_scales="static",
                activation_quant=_T),
    VllmDefault("sm100", "gemm", "fp8", "per_tensor", "vLLM CUTLASS cutlass_scaled_mm (activations "
                "quantized per token on every call)", "CutlassFP8ScaledMMLinearKernel",
                missing=_VLLM_CUTLASS_MM, closest=_TORCH_MM, activation_scales="dynamic", activation_quant=_TOK),
    VllmDefault("sm100", "gemm", "fp8", "per_token", "vLLM CUTLASS cutlass_scaled_mm",
                "CutlassFP8ScaledMMLinearKernel", missing=_VLLM_CUTLASS_MM, closest=_TORCH_MM,
                fallbacks=(_TORCH_MM,), activation_quant=_TOK),
    VllmDefault("sm100", "gemm", "fp8", "block128", "DeepGEMM fp8_gemm_nt", "DeepGemmFp8BlockScaledMMKernel",
                missing="this tool does not time DeepGEMM; the FlashInfer gemm_fp8_nt_groupwise and "
                        "triton rows are comparisons",
                closest=_TRITON_BLOCK_MM, fallbacks=(_TRITON_BLOCK_MM,), activation_quant=_BLK),
    VllmDefault("sm100", "gemm", "nvfp4", "", "FlashInfer CuTe-DSL NVFP4 GEMM",
                "FlashInferCuteDslNvFp4LinearKernel", "cute-dsl", "mm_fp4", "same",
                fallbacks=(("cutlass", "mm_fp4"), ("trtllm", "mm_fp4"), ("cudnn", "mm_fp4"))),
    VllmDefault("sm100", "moe", "bf16", "", "FlashInfer TRTLLM BF16 MoE",
                "UnquantizedMoeBackend.FLASHINFER_TRTLLM",
                missing="the FlashInfer driver has no BF16 trtllm MoE routine",
                closest=_CUTLASS_MOE, fallbacks=(_CUTLASS_MOE, _TRITON_MOE)),
    VllmDefault("sm100", "moe", "fp8", "per_tensor", "FlashInfer TRTLLM per-tensor FP8 MoE",
                "Fp8MoeBackend.FLASHINFER_TRTLLM", "trtllm", "trtllm_fp8_per_tensor_scale_moe", "same",
                fallbacks=(_CUTLASS_MOE, _TRITON_MOE), activation_scales="static", activation_quant=_T),
    VllmDefault("sm100", "moe", "fp8", "per_tensor", "Triton fused_moe (dynamic per-tensor activation scale)",
                "Fp8MoeBackend.TRITON", "triton", match="design",
                activation_scales="dynamic", activation_quant=_D),
    VllmDefault("sm100", "moe", "fp8", "per_token", "vLLM CUTLASS grouped GEMM (CutlassExpertsFp8; Triton "
                "for M <= 8)", "Fp8MoeBackend.VLLM_CUTLASS", missing=_VLLM_CUTLASS_MOE, closest=_TRITON_MOE,
                fallbacks=(_TRITON_MOE,), activation_quant=_TOK),
    VllmDefault("sm100", "moe", "fp8", "block128", "FlashInfer TRTLLM block-scale FP8 MoE",
                "Fp8MoeBackend.FLASHINFER_TRTLLM", "trtllm", "trtllm_fp8_block_scale_moe", "same",
                fallbacks=(_TRITON_MOE,), refined=False, activation_quant=_BLK),
    VllmDefault("sm100", "moe", "fp8", "block128", _REFINED, "Fp8MoeBackend.TRITON", "triton", match="design",
                fallbacks=(("trtllm", "trtllm_fp8_block_scale_moe"),), refined=True, activation_quant=_BLK),
    VllmDefault("sm100", "moe", "nvfp4", "", "FlashInfer TRTLLM NVFP4 MoE", "NvFp4MoeBackend.FLASHINFER_TRTLLM",
                "trtllm", "trtllm_fp4_block_scale_moe", "same", fallbacks=(_CUTLASS_MOE,)),
    VllmDefault("sm100", "router", "fp8", "per_tensor", _FP8_ROUTER, "CutlassFP8ScaledMMLinearKernel",
                missing=_VLLM_CUTLASS_MM, closest=_TORCH_MM, activation_scales="dynamic",
                architectures=QUANTIZED_ROUTERS, activation_quant=_TOK),
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


@dataclass(frozen=True)
class LayerCell:
    """One layer's question to the table: its kind, recipe and scheme on one rank of a layout."""

    kind: str
    """"gemm", "moe" or "router"."""
    recipe: str
    """"bf16", "fp8" or "nvfp4"."""
    scheme: str = ""
    """FP8 scheme (FP8_SCHEMES), "" for the other recipes."""
    expert_parallel: bool = False
    activation_scales: str = ""
    """Per-tensor FP8: "static" or "dynamic" (ACTIVATION_SCALES); "" where not known or not
    per-tensor (a per-tensor cell without it has no rule)."""
    refined: bool = False
    """Block-128 FP8 MoE whose shard vLLM refines (`refined_fp8_block`)."""
    architecture: str = ""
    """The vLLM model class ("" where not known: rules for some models only do not apply)."""


def refined_fp8_block(intermediate_per_rank: int, hidden: int) -> int:
    """The block size vLLM refines a 128x128 block-FP8 MoE checkpoint to when 128 does not divide
    the per-rank intermediate size (0: no refinement, or none possible), as
    vllm/model_executor/layers/fused_moe/oracle/fp8.py: refine_fp8_moe_block_shape does: the
    largest block >= 32 dividing 128, I_r and H (`moe_triton.refined_block_shape` with square blocks,
    where the MoE's TP size drops out). Only vLLM's Triton MoE takes a refined block.

    >>> refined_fp8_block(192, 2048), refined_fp8_block(768, 2048), refined_fp8_block(48, 2048)
    (64, 0, 0)
    """
    refined = refined_block_shape((128, 128), intermediate_per_rank, hidden, moe_tp_size=2)
    return refined[0] if refined else 0


def vllm_default(family: str, kind: str, recipe: str, scheme: str = "", expert_parallel: bool = False,
                 activation_scales: str = "", refined: bool = False) -> VllmDefault | None:
    """The table row for one cell, or None when the table has none (another GPU family, or a
    per-tensor cell whose activation scales are not known)."""
    return table_row(family, LayerCell(kind, recipe, scheme, expert_parallel, activation_scales, refined))


def table_row(family: str, cell: LayerCell) -> VllmDefault | None:
    """The table row for `cell` on a GPU family, or None (see `vllm_default`)."""
    for row in VLLM_DEFAULTS:
        if (row.family, row.kind, row.recipe, row.scheme) != (family, cell.kind, cell.recipe, cell.scheme):
            continue
        if row.ep_only is not None and row.ep_only != cell.expert_parallel:
            continue
        if row.activation_scales != (cell.activation_scales if cell.scheme == "per_tensor" else ""):
            continue
        if row.refined is not None and row.refined != cell.refined:
            continue
        if row.architectures and cell.architecture not in row.architectures:
            continue
        return row
    return None


def is_vllm_default(row: VllmDefault | None, backend: str, routine: str) -> bool:
    """Whether a case of `backend`/`routine` times the kernel (or design) of `row`."""
    if row is None or not row.match or row.backend != backend:
        return False
    return not row.routine or row.routine == routine


def default_match(compute_capability: tuple[int, int] | None, kind: str, recipe: str, scheme: str,
                  backend: str, routine: str, expert_parallel: bool, activation_scales: str = "",
                  refined: bool = False) -> str:
    """"same", "design" or "": how a row of `backend`/`routine` relates to vLLM's default kernel
    for (kind, recipe, scheme) on a GPU of `compute_capability` ("" when it is not it, or the
    GPU is unknown or has no table)."""
    row = vllm_default(gpu_family(compute_capability), kind, recipe, scheme, expert_parallel,
                       activation_scales, refined)
    return row.match if row is not None and is_vllm_default(row, backend, routine) else ""


@dataclass(frozen=True)
class TimedAs:
    """What one timed row is relative to vLLM's default kernel for its layer."""

    label: str
    """A TIMED_LABELS value; "" when the GPU has no table (or the cell no rule)."""
    vllm_runs: str = ""
    """What vLLM runs for this layer, when the row is not vLLM's kernel or design."""


def timed_label(row: VllmDefault | None, backend: str, routine: str, tuned_tiles: bool = False) -> TimedAs:
    """What a row of `backend`/`routine` times relative to the table row `row`: vLLM's kernel,
    vLLM's design (with tiles this tool searched when `tuned_tiles`, else vLLM's own tile choice),
    a fallback, the stand-in the report shows for an untimed default, or a comparison."""
    if row is None:
        return TimedAs("")
    if is_vllm_default(row, backend, routine):
        if row.match == "same":
            return TimedAs("vllm_kernel")
        return TimedAs("vllm_design_tuned_tiles" if tuned_tiles else "vllm_design_vllm_tiles")
    key = (backend, routine)
    if key in row.fallbacks:
        return TimedAs("fallback", row.kernel)
    if key == row.closest:
        return TimedAs("stand_in", row.kernel)
    return TimedAs("comparison", row.kernel)


__all__ = ["ACTIVATION_SCALES", "FP8_SCHEMES", "TIMED_LABELS", "VLLM_ATTENTION_DEFAULTS", "VLLM_DEFAULTS",
           "VLLM_VERSION", "LayerCell", "TimedAs", "VllmAttentionDefault", "VllmDefault",
           "attention_default_match", "default_match", "gpu_family", "is_vllm_default", "refined_fp8_block",
           "table_row", "timed_label", "vllm_attention_default", "vllm_default"]
