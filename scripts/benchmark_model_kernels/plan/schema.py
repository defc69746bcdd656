"""The shape plan: every per-rank GEMM and fused-MoE problem one GPU runs in one vLLM forward step.

Schema-first: these frozen dataclasses ARE the plan JSON (`Plan.to_json()` / `Plan.from_json()`),
written by `benchmark_model.py --plan_json` and consumed by the runner (`--plan`). Sizes are
per-rank *logical* sizes (what vLLM's layer shapes are, before any backend padding); `layers` are
per-step invocation counts on one rank.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

PLAN_SCHEMA_VERSION = 1

#: Values of `GemmEntry.parallel` (vLLM linear class each GEMM comes from).
PARALLEL_KINDS = ("column", "row", "replicated", "vocab")


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
class Unsupported:
    """A module the planner found but could not place; reported, never silently dropped."""

    module: str
    n: int
    k: int
    reason: str


@dataclass(frozen=True)
class Plan:
    """Everything one rank runs: the runner's input, the preview's content."""

    model: ModelInfo
    tp: int
    ep: int
    gemms: tuple[GemmEntry, ...] = ()
    moe: tuple[MoeEntry, ...] = ()
    unsupported: tuple[Unsupported, ...] = ()
    schema_version: int = PLAN_SCHEMA_VERSION

    @property
    def complete(self) -> bool:
        return not self.unsupported

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        def build(klass: Any, raw: dict[str, Any]) -> Any:
            names = {f.name for f in fields(klass)}
            kw = {k: v for k, v in raw.items() if k in names}
            for k, v in kw.items():
                if isinstance(v, list):
                    kw[k] = tuple(v)
            return klass(**kw)

        tp, ep = int(d["tp"]), int(d["ep"])
        moe = []
        for m in d.get("moe", []):
            m = dict(m)
            m["routing"] = build(Routing, m.get("routing") or {"method": "renormalize"})
            if "tokens_per_m" not in m:  # plans written before the field: the same rule
                m["tokens_per_m"] = ep // tp if ep > 1 and ep % tp == 0 else 1
            moe.append(build(MoeEntry, m))
        return cls(
            model=build(ModelInfo, d["model"]),
            tp=tp,
            ep=ep,
            gemms=tuple(build(GemmEntry, g) for g in d.get("gemms", [])),
            moe=tuple(moe),
            unsupported=tuple(build(Unsupported, u) for u in d.get("unsupported", [])),
            schema_version=int(d.get("schema_version", PLAN_SCHEMA_VERSION)),
        )

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return cls.from_dict(json.loads(text))


__all__ = [
    "PLAN_SCHEMA_VERSION",
    "PARALLEL_KINDS",
    "ModelInfo",
    "GemmEntry",
    "Routing",
    "MoeEntry",
    "Unsupported",
    "Plan",
]
