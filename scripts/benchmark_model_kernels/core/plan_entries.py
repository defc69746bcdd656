"""The entries of a shape plan: where it came from (`ModelInfo`) and each thing one rank runs in one
vLLM forward step (`GemmEntry`, `MoeEntry` with its `Routing`, `AttentionEntry`), the mixers no
row times (`MixerNotTimed`), the modules not placed (`Unsupported`) and vLLM's own view of them
(`CrossCheck`). `plan_schema` assembles them into the `Plan` and checks a plan read back; each
field's docstring is its meaning in the plan JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Values of `GemmEntry.parallel` (vLLM linear class each GEMM comes from).
PARALLEL_KINDS = ("column", "row", "replicated", "vocab")
#: Values of `Routing.scoring_func`.
SCORING_FUNCS = ("softmax", "sigmoid")
#: Values of `Routing.method`: FlashInfer's `--routing_method` names (benchmarks/routines/moe.py,
#: v0.6.17) and the names vllm_rules/moe.py gives routings FlashInfer has no name for. A plan with
#: another is refused when read: it would be timed as something it is not.
ROUTING_METHODS = ("renormalize", "deepseek_v3", "llama4", "renormalize_naive", "topk", "grouped_topk",
                   "softmax_bias", "minimax2", "gemma4", "sparsemixer", "sigmoid_renorm", "sigmoid")
#: Values of `AttentionEntry.kind`: "mha" (multi-head, grouped-query and multi-query attention over a
#: paged K/V cache) and "mla" (DeepSeek's multi-head latent attention, absorbed form).
ATTENTION_KINDS = ("mha", "mla")
#: Values of `CrossCheck.status`.
CROSS_CHECK_STATUSES = ("match", "mismatch", "vllm refuses", "not checked")


@dataclass(frozen=True)
class ModelInfo:
    """Where the plan came from."""

    name: str
    """What the user passed as MODEL (bundled name, path or Hub ID)."""
    source: str
    """How it was resolved: "bundled", "local", or "hub"."""
    model_type: str
    """`config.model_type` as given (before any alias)."""
    architecture: str
    """The transformers class built on meta, e.g. "LlamaForCausalLM"."""
    revision: str | None = None
    """Hub revision, when one was pinned."""
    notes: tuple[str, ...] = ()
    """Human notes shown in the preview (aliases applied, towers dropped, ...)."""
    num_hidden_layers: int = 0
    """Decoder layers of the language model."""
    hidden_size: int = 0
    """Model width H."""
    vocab_size: int = 0
    """Unpadded vocabulary size."""
    fp8_scheme: str = ""
    """The FP8 scheme vLLM would run this checkpoint with ("per_tensor", "per_token", "block128"),
    from its `quantization_config` (vllm_rules.quant_config.checkpoint_fp8_scheme)."""
    fp8_scheme_source: str = ""
    """Why `fp8_scheme` is what it is (the config keys read, or vLLM's online FP8)."""
    fp8_activation_scales: str = ""
    """Where vLLM takes a per-tensor FP8 layer's activation scales from: "static" (the checkpoint's)
    or "dynamic" (computed on every call, as vLLM's online fp8_per_tensor does)
    (vllm_rules.quant_config.per_tensor_activation_scales); "" in plans written before the field."""
    tie_word_embeddings: bool | None = None
    """The lm_head shares the input embedding's tensor (config `tie_word_embeddings`, as vLLM's
    model classes read it); None in plans written before the field (memory then counts both)."""
    planner: str = ""
    """Who derived the plan: "rules (...)" (vllm_rules/), or "vllm <version> <class> (<platform>)"
    (vLLM's own model class, built on meta); "" in plans written before the field (the rules)."""
    planner_differences: tuple[str, ...] = ()
    """Where the rules planner's plan differs from vLLM's, one line each (vLLM's plan is used)."""


@dataclass(frozen=True)
class GemmEntry:
    """One distinct dense GEMM Y[M,N] = X[M,K] W[N,K]^T on one rank."""

    name: str
    """Short stable label, e.g. "qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head",
    "router", "shared_expert.gate_up_proj", "mla.fused_qkv_a_proj", "mamba.in_proj"."""
    modules: tuple[str, ...]
    """Module paths it stands for, layer index written as `*` (e.g. "model.layers.*.self_attn.q_proj")."""
    n: int
    """Per-rank output features."""
    k: int
    """Per-rank input features."""
    layers: int
    """How many times it runs in ONE forward step on one rank (lm_head: 1)."""
    parallel: str
    """vLLM linear kind: "column" (incl. merged/QKV), "row", "replicated", or "vocab" (lm_head)."""
    bias: bool = False
    """Whether this rank adds a bias in the GEMM (row-parallel bias counts on rank 0)."""
    m_divisor: int = 1
    """The GEMM runs ceil(M / m_divisor) of the step's M tokens: TP for shared experts under
    sequence-parallel MoE (vllm_rules.sharding.shared_experts_replicated), 1 otherwise."""


@dataclass(frozen=True)
class Routing:
    """How tokens are routed to experts; names follow FlashInfer's `--routing_method`."""

    method: str
    """"deepseek_v3" (grouped, sigmoid + bias), "grouped_topk" (grouped top-k without a
    correction bias, e.g. DeepSeek-V2's group_limited_greedy), "renormalize" (softmax top-k renorm),
    "renormalize_naive", "topk" (softmax top-k, no renorm), "llama4" (top-1 sigmoid, on input),
    or "sigmoid_renorm"/"minimax2"-style names where no FlashInfer name exists."""
    n_group: int | None = None
    """DeepSeek grouped routing: number of expert groups."""
    topk_group: int | None = None
    """DeepSeek grouped routing: groups kept per token."""
    routed_scaling_factor: float | None = None
    """Scale applied to the routed weights (DeepSeek, Kimi, GLM)."""
    use_routing_bias: bool = False
    """Score-correction bias (`e_score_correction_bias`) is used for selection."""
    scoring_func: str = "softmax"
    """"softmax" or "sigmoid"."""
    renormalize: bool = True
    """Top-k weights renormalized to sum 1."""
    apply_router_weight_on_input: bool = False
    """Llama 4: the routing weight multiplies the expert's input."""


@dataclass(frozen=True)
class MoeEntry:
    """One fused routed-expert layer as one rank runs it."""

    name: str
    """e.g. "experts"."""
    modules: tuple[str, ...]
    """Module paths, layer index as `*`."""
    hidden: int
    """H (never sharded)."""
    intermediate: int
    """Per-rank expert intermediate size I_r (I/TP under TP-MoE, full I under EP)."""
    experts: int
    """Experts on this rank (E/EP, +1 on the first E%EP ranks; rank 0 is planned)."""
    global_experts: int
    """All routed experts E (routing spans these, also under wide EP)."""
    top_k: int
    """Experts per token."""
    activation: str
    """FlashInfer `ActivationType` name: "Swiglu", "Geglu", "Relu2", "SwigluBias", ..."""
    routing: Routing
    """Routing method and parameters from the config."""
    layers: int
    """MoE layers per forward step."""
    gated: bool = True
    """GEMM1 produces 2*I_r (gate and up) when True, I_r otherwise."""
    bias: bool = False
    """Experts carry biases (GPT-OSS)."""
    ep_rank: int = 0
    """Which EP rank was planned (its expert count is `experts`)."""
    tokens_per_m: int = 1
    """The layer's num_tokens per token M of this rank's attention: EP/TP under expert
    parallelism (vllm_rules.sharding.moe_tokens_per_m), 1 without it. An MoE case at M runs
    num_tokens = M * tokens_per_m."""


@dataclass(frozen=True)
class AttentionEntry:
    """One attention layer type as one rank runs it: every layer with the same per-rank heads, head
    dims and window is one entry (e.g. Gemma-3's sliding and full layers are two entries)."""

    name: str
    """Short stable label: "attn", "attn.sliding", "mla"."""
    modules: tuple[str, ...]
    """Module paths it stands for, layer index written as `*`."""
    kind: str
    """"mha" (MHA/GQA/MQA over paged K and V) or "mla" (latent KV, absorbed form)."""
    layers: int
    """How many layers of this type run in ONE forward step on one rank."""
    num_q_heads: int
    """Query heads on this rank (all heads / TP)."""
    num_kv_heads: int
    """K/V heads on this rank: all KV heads / TP, or 1 when TP exceeds them (each KV head is then
    replicated on TP / all-KV-heads ranks). MLA: 1 (the latent is shared by all heads)."""
    head_dim_qk: int
    """MHA: query/key head dim. MLA: the absorbed query/key dim, kv_lora_rank + qk_rope_head_dim."""
    head_dim_vo: int
    """MHA: value/output head dim. MLA: kv_lora_rank (the absorbed value is the latent)."""
    total_q_heads: int
    """Query heads of the whole model layer (before TP)."""
    total_kv_heads: int
    """K/V heads of the whole model layer (before TP); MLA: 1."""
    kv_lora_rank: int = 0
    """MLA: the latent (compressed KV) width; 0 for MHA."""
    qk_rope_head_dim: int = 0
    """MLA: the decoupled RoPE key width stored beside the latent; 0 for MHA."""
    qk_nope_head_dim: int = 0
    """MLA: the per-head query/key width without RoPE, which prefill attends over after
    up-projecting K (its qk head dim is qk_nope_head_dim + qk_rope_head_dim); 0 for MHA."""
    v_head_dim: int = 0
    """MLA: the per-head value width prefill attends over after up-projecting V; 0 for MHA."""
    sliding_window: int = 0
    """Tokens a query attends back over; 0 for full (global) attention."""
    attention_chunk_size: int = 0
    """Llama 4's chunked local attention: a query attends only to the tokens of its own chunk of
    this many (vLLM's ChunkedLocalAttention); 0 for none."""
    kv_shared: bool = False
    """The layer reads the K/V cache an earlier layer wrote (Gemma 4's last num_kv_shared_layers):
    its attention runs, it holds no cache of its own."""

    @property
    def kv_elements_per_token(self) -> int:
        """K/V cache elements one token of one layer takes on this rank: K and V of every local
        KV head (MHA), or the latent plus the RoPE key (MLA)."""
        if self.kind == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return self.num_kv_heads * (self.head_dim_qk + self.head_dim_vo)


@dataclass(frozen=True)
class MixerNotTimed:
    """Layers whose token mixer is not softmax attention (Mamba2, GatedDeltaNet, linear attention):
    their GEMMs are planned, the mixer kernel itself is not timed, and this says so."""

    name: str
    """e.g. "mamba", "linear_attn"."""
    modules: tuple[str, ...]
    """Module paths, layer index as `*`."""
    layers: int
    """Layers with this mixer per forward step."""
    reason: str
    """Why no row times it, e.g. "Mamba2 selective-state-space scan: FlashInfer's driver has no
    routine for it at this version"."""


@dataclass(frozen=True)
class Unsupported:
    """A module the planner found but could not place; reported, never silently dropped."""

    module: str
    n: int
    k: int
    reason: str


@dataclass(frozen=True)
class CrossCheck:
    """The plan compared with vLLM's own model class (`benchmark_model.py --cross_check vllm`)."""

    against: str
    """The vLLM version and class compared against, e.g. "vllm 0.33.0 (DeepseekV3ForCausalLM)"."""
    status: str
    """"match", "mismatch", "vllm refuses", or "not checked" (vLLM's class could not be built on
    the machine that checked: no verdict on the plan; `refused` says why)."""
    differences: tuple[str, ...] = ()
    """One line per difference: missing, extra or different shapes, with module paths."""
    refused: str = ""
    """vLLM's reason, when it would not build the model at this layout."""


__all__ = [
    "PARALLEL_KINDS",
    "SCORING_FUNCS",
    "ROUTING_METHODS",
    "ATTENTION_KINDS",
    "CROSS_CHECK_STATUSES",
    "ModelInfo",
    "GemmEntry",
    "Routing",
    "MoeEntry",
    "AttentionEntry",
    "MixerNotTimed",
    "Unsupported",
    "CrossCheck",
]
