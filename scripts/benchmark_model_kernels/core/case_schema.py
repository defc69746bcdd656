"""The case schema: one timed measurement = (plan entry, M, recipe dtype, backend, with_quant).

`cases/build.py` makes Cases from a Plan; everything downstream (the runner, the backends, the
report) reads the decisions recorded here instead of deriving them again. `Case.to_dict` /
`Case.from_dict` are its JSON form: cases.json of a dry run, and how the run stage hands a torch or
quant case to its worker process.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from .plan_schema import Routing

KINDS = ("gemm", "moe", "attention")
#: Timing modes: "graph" replays the op in a CUDA graph (launch overhead hidden, how vLLM runs
#: decode), "eager" launches it plainly (the overhead shows, and launches per call are counted).
MODES = ("graph", "eager")
#: Recipes: W16A16, FP8 per-tensor W8A8, NVFP4 W4A4.
DTYPES = ("bf16", "fp8", "nvfp4")
#: KV-cache dtypes of an attention case (its `dtype`): vLLM's kv_cache_dtype "auto" (the model's
#: BF16) and "fp8" (e4m3). The query is BF16 in both.
KV_DTYPES = ("bf16", "fp8")
#: Attention phases: "decode" (M sequences, one new token each, over kv_len cached tokens) and
#: "prefill" (one sequence of L tokens, causal).
PHASES = ("decode", "prefill")


#: FlashInfer ActivationType names (flashinfer/tllm_enums.py) that are element-wise: GEMM1 makes I
#: values, no gate half. What an activation name alone says about gating: a shape given by its
#: activation (--moe_activation) and an MoE row of a results.json without its `gated` field.
NON_GATED_ACTIVATIONS = frozenset({"Relu2", "Relu", "Gelu", "Silu", "Identity"})

#: What a timed row is relative to vLLM's default kernel for its layer (Case.timed_as), decided by
#: vllm_rules/dispatch.py: timed_label: vLLM's kernel (the same code path); vLLM's kernel design
#: (this tool's Triton code of vLLM's algorithm) with vLLM's tile choice, or with tiles this tool
#: searched (what vLLM runs with a tuned config file); a fallback (a kernel vLLM runs elsewhere:
#: later in the same priority list, another GPU or shape); a stand-in (timed in place of a default
#: no row can time); a comparison (a kernel vLLM does not run for this layer).
TIMED_LABELS = ("vllm_kernel", "vllm_design_vllm_tiles", "vllm_design_tuned_tiles", "fallback", "stand_in",
                "comparison")

#: KV lengths a decode case reads when --kv_lens is not given: a short chat turn, a long one, and a
#: long-context request.
DEFAULT_KV_LENS = (1024, 8192, 32768)
#: vLLM's default KV-cache block size (vllm/config/cache.py: CacheConfig.DEFAULT_BLOCK_SIZE = 16 at
#: vLLM 0.33.0), the driver's --page_size.
VLLM_BLOCK_SIZE = 16


def id_part(text: str) -> str:
    """Case ids keep only [A-Za-z0-9._-] (they are file names and the driver's --case_tag)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


@dataclass(frozen=True)
class GemmShape:
    """Y[m,n] = X[m,k] W[n,k]^T."""

    m: int
    n: int
    k: int


@dataclass(frozen=True)
class MoeShape:
    """One fused-MoE layer on one rank for `num_tokens` tokens."""

    num_tokens: int
    """Tokens whose expert pairs this rank's layer receives: M * EP/TP (M without EP)."""
    hidden: int
    intermediate: int
    """Per-rank expert intermediate size."""
    experts: int
    """Local experts on this rank."""
    global_experts: int
    top_k: int


@dataclass(frozen=True)
class AttentionShape:
    """One attention layer of one rank for one step: `batch_size` sequences of `q_len` new tokens,
    each reading `kv_len` cached tokens (paged, `page_size` tokens a page; 0: ragged K/V)."""

    phase: str
    """"decode" or "prefill" (PHASES)."""
    batch_size: int
    """Sequences: M for decode, 1 for prefill."""
    q_len: int
    """New (query) tokens per sequence: 1 for decode, L for prefill."""
    kv_len: int
    """K/V tokens each sequence's queries read: the context, or the sliding window (or the chunk of
    chunked local attention) when that is shorter: a windowed decode reads min(context, window)."""
    context_len: int
    """Tokens in each sequence's context (the --kv_lens or --prefill_lens value)."""
    num_q_heads: int
    num_kv_heads: int
    """K/V heads on this rank (1 for MLA: one latent shared by all heads)."""
    head_dim_qk: int
    """Query/key head dim (MLA decode: kv_lora_rank + qk_rope_head_dim)."""
    head_dim_vo: int
    """Value/output head dim (MLA decode: kv_lora_rank)."""
    page_size: int = 0
    """Tokens per KV page (vLLM's block size); 0 for the ragged prefill routine."""
    kv_lora_rank: int = 0
    """MLA: the latent width (the driver's --head_dim_ckv); 0 for MHA."""
    qk_rope_head_dim: int = 0
    """MLA: the RoPE key width stored beside the latent (--head_dim_kpe); 0 for MHA."""
    sliding_window: int = 0
    """The layer's window (0: full attention)."""
    attention_chunk_size: int = 0
    """Llama 4's chunked local attention: the chunk a query attends within (0: none)."""
    causal: bool = False
    """Causal mask over the new tokens (prefill)."""

    @property
    def tokens(self) -> int:
        """Query tokens of the step: batch_size * q_len (the case's M)."""
        return self.batch_size * self.q_len


@dataclass(frozen=True)
class Case:
    """One measurement to make. Every Case becomes exactly one results Row."""

    case_id: str
    """Unique and stable across runs (used by --resume and as the driver's --case_tag):
    "<kind>.<name>.m<M>.<dtype>.<backend>[.<variant>][.eager][.q]" with only [A-Za-z0-9._-];
    attention: "attention.<name>.<phase>.m<M>[.kv<KV length>].<kv dtype>.<backend>[.eager]"."""
    kind: str
    """"gemm", "moe" or "attention"."""
    name: str
    """Plan entry name ("qkv_proj", "experts", "attn", ...) or the --nks name."""
    modules: tuple[str, ...]
    layers: int
    """Per-step invocation count, copied from the plan (1 for --nks shapes)."""
    m: int
    """Tokens M of this step in this rank's attention. An MoE case runs `logical.num_tokens` =
    M * EP/TP under expert parallelism (vllm_rules.sharding.moe_tokens_per_m)."""
    dtype: str
    """"bf16", "fp8" or "nvfp4"; attention: the KV-cache dtype ("bf16" or "fp8", KV_DTYPES)."""
    backend: str
    """Backend label as the user filters it: "cudnn", "cublas", "cublaslt", "cutlass", "trtllm",
    "cute-dsl", "trtllm_low_latency", "torch", ..."""
    routine: str
    """FlashInfer driver routine ("mm_bf16", "bmm_fp8", "mm_fp8", "mm_fp4", "cutlass_fused_moe",
    "trtllm_fp8_per_tensor_scale_moe", "trtllm_fp4_block_scale_moe", "cute_dsl_fp4_block_scale_moe")
    or a torch op label ("torch.linear", "torch._scaled_mm", "torch._grouped_mm",
    "torch._scaled_grouped_mm")."""
    logical: GemmShape | MoeShape | AttentionShape
    """Shape as vLLM's layer has it (per rank)."""
    physical: GemmShape | MoeShape | AttentionShape
    """Shape the kernel actually runs after this backend's vLLM padding (attention: the same)."""
    variant: str = ""
    """Extra label: "per_tensor", "per_token" (torch FP8 dynamic), "quantized_input" (cutlass NVFP4
    MoE with FP4 activations), "" otherwise."""
    with_quant: bool = False
    """Row adds the activation-quantization time measured separately (quant_us)."""
    activation_quant: str = ""
    """The activation format the kernel consumes, decided once by the case builder
    (cases/backends.py: activation_quant): a QUANT_FORMATS key such as "fp8_per_tensor_static" or
    "nvfp4_8x4"; "" when it takes BF16 activations or quantizes them inside the timed call. A
    with_quant twin times exactly this quantization."""
    activation: str = ""
    """MoE: FlashInfer ActivationType name."""
    gated: bool = True
    """MoE: gated activation (GEMM1 is 2*I)."""
    routing: Routing | None = None
    """MoE: routing method and parameters."""
    driver_args: tuple[str, ...] = ()
    """Full argv for FlashInfer's driver, starting with "--routine" (empty for torch cases)."""
    skip_reason: str = ""
    """Non-empty: known before launch to be unsupported; becomes status "unsupported" with this
    reason, e.g. "mm_fp4 cutlass needs SM100+; this GPU is sm_90"."""
    scheme: str = ""
    """FP8 rows: the scale layout the kernel consumes ("per_tensor", "per_token", "block128");
    "" for BF16 and NVFP4."""
    vllm_default: str = ""
    """How this row relates to the kernel vLLM dispatches by default for its layer kind, recipe
    and scheme on the GPU it runs on (vllm_rules/dispatch.py): "same" (that kernel), "design"
    (vLLM's algorithm in this tool's code), "" (a comparison, or the GPU is not known yet)."""
    timed_as: str = ""
    """What this row times relative to vLLM's default kernel for its layer on the GPU it runs on,
    decided once by the case builder from vllm_rules/dispatch.py (timed_label): "vllm_kernel",
    "vllm_design_vllm_tiles", "vllm_design_tuned_tiles", "fallback", "stand_in" or "comparison"
    (TIMED_LABELS); "" when the GPU has no table or is not known yet."""
    vllm_runs: str = ""
    """What vLLM runs for this layer instead, when `timed_as` is neither vLLM's kernel nor its design."""

    mode: str = "graph"
    """"graph" (CUDA-graph replay) or "eager" (plain launches); eager ids end in ".eager"."""
    note: str = ""
    """A caveat a timed row of this case carries in its reason, e.g. an attention decode over a
    sliding window timed over the window's tokens; "" for none."""

    @property
    def base_case_id(self) -> str:
        """For a with_quant case, the id of the kernel-only case it adds quant time to."""
        return self.case_id[: -len(".q")] if self.with_quant and self.case_id.endswith(".q") else self.case_id

    @property
    def job(self) -> str:
        """Which worker path runs the case: "quant" (the activation-quantization timer), "torch"
        (the PyTorch baseline) or "driver" (FlashInfer's benchmark driver)."""
        if self.with_quant:
            return "quant"
        if self.backend == "triton":
            return "triton"
        if self.backend == "torch" or not self.driver_args:
            return "torch"
        return "driver"

    def to_dict(self) -> dict[str, Any]:
        """The case as JSON-ready dicts and lists (`from_dict` inverts it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        """The Case `to_dict` made (shapes, routing and tuples rebuilt from plain JSON)."""
        d = dict(d)
        shape = {"gemm": GemmShape, "moe": MoeShape, "attention": AttentionShape}[d["kind"]]
        d["logical"] = shape(**d["logical"])
        d["physical"] = shape(**d["physical"])
        if d.get("routing") is not None:
            d["routing"] = Routing(**d["routing"])
        for key in ("modules", "driver_args"):
            d[key] = tuple(d.get(key) or ())
        return cls(**d)


@dataclass(frozen=True)
class AttentionSweep:
    """What the attention cases cover (the --kv_lens, --prefill_lens, --kv_dtypes, --page_size and
    --no_attention flags)."""

    kv_lens: tuple[int, ...] = DEFAULT_KV_LENS
    """Cached tokens each decode sequence reads."""
    prefill_lens: tuple[int, ...] = ()
    """Prompt lengths of the prefill cases (none unless given)."""
    kv_dtypes: tuple[str, ...] = KV_DTYPES
    """KV-cache dtypes (KV_DTYPES)."""
    page_size: int = VLLM_BLOCK_SIZE
    """Tokens per KV page."""
    enabled: bool = True
    """False: no attention cases (--no_attention)."""


#: The default sweep (the flags' defaults), and no attention cases at all.
DEFAULT_SWEEP = AttentionSweep()
NO_ATTENTION = AttentionSweep(enabled=False)
