"""vLLM's tensor/expert-parallel sharding rules: one table of linear kinds, the kind of every plan
role, and a few special rules (QKV heads, experts, Mamba2, GatedDeltaNet).

In: logical sizes read from a config or a meta model, and the TP/EP sizes (the MoE token and
sequence-parallel rules read the whole `Layout`). Out: per-rank sizes (or the first local expert
of an EP rank). Every rule cites the vLLM 0.33.0 source it paraphrases, as
`vllm/<path>.py: <class or function>`; references/sharding.md documents the same rules with worked
examples. vLLM's `divide(a, b)` (vllm/distributed/utils.py: divide) asserts `a % b == 0` and never
pads for TP, so a TP that does not divide a size is a bad input here too: a one-line `UsageError`
naming the field that does not divide.
"""

from __future__ import annotations

from ..core.errors import UsageError
from .layout import Layout

#: vLLM pads the vocabulary to a multiple of this before splitting it by TP
#: (vllm/model_executor/layers/vocab_parallel_embedding.py: DEFAULT_VOCAB_PADDING_SIZE).
VOCAB_PADDING = 64

#: linear kind -> (N divided by TP, K divided by TP), from vllm/model_executor/layers/linear.py:
#:   column     ColumnParallelLinear / MergedColumnParallelLinear / QKVParallelLinear: N/tp, K full
#:   row        RowParallelLinear: N full, K/tp (bias added on tp_rank 0 only)
#:   replicated ReplicatedLinear, GateLinear, any layer built with disable_tp=True (LinearBase):
#:              nothing split
#:   vocab      ParallelLMHead (vllm/model_executor/layers/vocab_parallel_embedding.py):
#:              N = round_up(V, 64)/tp, K full
SPLIT = {
    "column": (True, False),
    "row": (False, True),
    "replicated": (False, False),
    "vocab": (True, False),
}

#: plan role -> the linear kind (a SPLIT key) of the vLLM layer that runs it. A role is the name
#: a GEMM gets in the plan; shared-expert roles are the dense-MLP roles under `shared_expert.`.
ROLE_KIND: dict[str, str] = {
    # Self-attention. vllm/model_executor/layers/linear.py: QKVParallelLinear (separate q/k/v, or
    # fused on disk and loaded with shard_id=None: same per-rank shape); o_proj is RowParallelLinear.
    "qkv_proj": "column",
    "o_proj": "row",
    # Cross-attention (Mllama text layers): q alone and k+v fused, with the head split and KV-head
    # replication of vllm/model_executor/layers/linear.py: QKVParallelLinear; o_proj RowParallelLinear.
    "cross_attn.q_proj": "column",
    "cross_attn.kv_proj": "column",
    "cross_attn.o_proj": "row",
    # DeepSeek MLA, vllm/model_executor/models/deepseek_v2.py: DeepseekV2MLAAttention. The q_a +
    # kv_a merge is DeepSeekV2FusedQkvAProjLinear, built with disable_tp=True; without q_lora_rank,
    # kv_a_proj_with_mqa is a ReplicatedLinear; q_b / q / kv_b are ColumnParallelLinear.
    "mla.fused_qkv_a_proj": "replicated",
    "mla.kv_a_proj_with_mqa": "replicated",
    "mla.q_b_proj": "column",
    "mla.q_proj": "column",
    "mla.kv_b_proj": "column",
    # DeepSeek-V3.2 / GLM-5 sparse-attention indexer, vllm/model_executor/models/deepseek_v2.py:
    # Indexer (wq_b ReplicatedLinear; wk + weights_proj merged with disable_tp=True).
    "indexer.wq_b": "replicated",
    "indexer.wk_weights_proj": "replicated",
    # vllm/model_executor/layers/mamba/mamba_mixer2.py: MambaMixer2 (in_proj column, out_proj row).
    "mamba.in_proj": "column",
    "mamba.out_proj": "row",
    # Mamba-1, vllm/model_executor/layers/mamba/mamba_mixer.py: MambaMixer (x_proj RowParallel,
    # dt_proj ColumnParallel; in_proj MergedColumnParallel and out_proj RowParallel as above).
    "mamba.x_proj": "row",
    # LFM2 short convolution, vllm/model_executor/layers/mamba/short_conv.py: ShortConv (in_proj
    # MergedColumnParallelLinear [H, H, H], out_proj RowParallelLinear).
    "short_conv.in_proj": "column",
    "short_conv.out_proj": "row",
    "mamba.dt_proj": "column",
    # vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py: QwenGatedDeltaNetAttention
    # (create_qkvz_proj / create_ba_proj column, out_proj row).
    "gdn.in_proj_qkvz": "column",
    "gdn.in_proj_ba": "column",
    "gdn.out_proj": "row",
    # Dense MLP, vllm/model_executor/models/llama.py: LlamaMLP (gate_up MergedColumnParallelLinear,
    # down RowParallelLinear); non-gated: vllm/model_executor/models/gpt2.py: GPT2MLP (c_fc column,
    # c_proj row).
    "gate_up_proj": "column",
    "up_proj": "column",
    "down_proj": "row",
    # Shared experts are that dense MLP, TP-sharded even under EP
    # (vllm/model_executor/models/deepseek_v2.py: DeepseekV2MoE), except under sequence-parallel
    # MoE, where most models replicate them (`shared_experts_replicated`).
    "shared_expert.gate_up_proj": "column",
    "shared_expert.up_proj": "column",
    "shared_expert.down_proj": "row",
    # Router: vllm/model_executor/layers/fused_moe/router/gate_linear.py: GateLinear (a
    # ReplicatedLinear, N = E global). Qwen's shared-expert gate (H -> 1) is a ReplicatedLinear
    # (vllm/model_executor/models/qwen2_moe.py: Qwen2MoeSparseMoeBlock).
    "router": "replicated",
    "shared_expert_gate": "replicated",
    # vllm/model_executor/layers/vocab_parallel_embedding.py: ParallelLMHead.
    "lm_head": "vocab",
    # KV-shared attention layers hold only the query projection, a ColumnParallelLinear
    # (vllm/model_executor/models/gemma4.py: Gemma4Attention, is_kv_shared_layer).
    "q_proj": "column",
    # Gemma 4 per-layer inputs, vllm/model_executor/models/gemma4.py: Gemma4DecoderLayer
    # (per_layer_input_gate, per_layer_projection ReplicatedLinear) and Gemma4Model
    # (per_layer_model_projection, ColumnParallelLinear with gather_output=True).
    "per_layer_input_gate": "replicated",
    "per_layer_projection": "replicated",
    "per_layer_model_projection": "column",
    # Latent MoE: the projections into and out of the experts' latent width are ReplicatedLinear
    # (vllm/model_executor/models/nemotron_h.py: NemotronHMoE, fc1_latent_proj / fc2_latent_proj).
    "moe.fc1_latent_proj": "replicated",
    "moe.fc2_latent_proj": "replicated",
}

#: model_type of the configs whose vLLM attention reads `attn_output_gate` with default True: q_proj
#: then holds query and gate, 2*Hq*d (vllm/model_executor/models/qwen3_next.py: Qwen3NextAttention;
#: qwen3_5.py builds its attention from it).
ATTN_OUTPUT_GATE_BY_DEFAULT = frozenset({
    "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
})


def attention_output_gate(cfg: object) -> bool:
    """Whether the attention's q_proj carries an output gate: the config's `attn_output_gate`,
    default True for ATTN_OUTPUT_GATE_BY_DEFAULT, False otherwise."""
    value = getattr(cfg, "attn_output_gate", None)
    if value is None:
        return str(getattr(cfg, "model_type", "")) in ATTN_OUTPUT_GATE_BY_DEFAULT
    return bool(value)


def divisors_hint(total: int, limit: int = 64) -> str:
    """Human list of the TP sizes that divide `total` (powers of two up to `limit`)."""
    ok = [str(t) for t in (1, 2, 4, 8, 16, 32, 64) if t <= limit and total % t == 0]
    return ", ".join(ok) if ok else "1"


def require_divides(total: int, tp: int, what: str, field: str = "--tp") -> int:
    """`total / tp`, or a UsageError naming `what` (vLLM `divide()` asserts the same)."""
    if tp <= 0 or total % tp:
        raise UsageError(field, tp, f"does not divide {what}={total}; use one of {divisors_hint(total)}")
    return total // tp


def split(parallel: str, n: int, k: int, tp: int, what: str) -> tuple[int, int]:
    """Per-rank (N, K) of a plain linear of `parallel` kind (a SPLIT key); `what` names the layer
    in the error when TP does not divide."""
    split_n, split_k = SPLIT[parallel]
    if parallel == "vocab":
        return vocab_per_rank(n, tp), k
    n_r = require_divides(n, tp, f"{what} output features") if split_n else n
    k_r = require_divides(k, tp, f"{what} input features") if split_k else k
    return n_r, k_r


def pad_vocab(vocab: int) -> int:
    """round_up(V, 64) (vllm/model_executor/layers/vocab_parallel_embedding.py: pad_vocab_size)."""
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING


def vocab_per_rank(vocab: int, tp: int) -> int:
    """LM-head N per rank: divide(round_up(V, 64), tp)
    (vllm/model_executor/layers/vocab_parallel_embedding.py: VocabParallelEmbedding.__init__)."""
    return require_divides(pad_vocab(vocab), tp, "the padded vocabulary (vocab_size rounded up to 64)")


def kv_heads_per_rank(num_kv_heads: int, tp: int) -> int:
    """KV heads per rank (vllm/model_executor/layers/linear.py: QKVParallelLinear.__init__):
    tp < Hkv -> Hkv/tp (must divide); tp >= Hkv -> 1 head per rank, replicated tp/Hkv times (tp must
    be a multiple of Hkv)."""
    if tp >= num_kv_heads:
        if tp % num_kv_heads:
            raise UsageError(
                "--tp", tp,
                f"must be a multiple of num_key_value_heads={num_kv_heads} when larger than it "
                f"(vLLM replicates KV heads); use a divisor or multiple of {num_kv_heads}",
            )
        return 1
    return require_divides(num_kv_heads, tp, "num_key_value_heads")


def qkv_per_rank(
    num_heads: int, num_kv_heads: int, head_dim: int, tp: int, *,
    v_head_dim: int | None = None, q_multiplier: int = 1,
) -> int:
    """Per-rank N of the fused QKV GEMM (vllm/model_executor/layers/linear.py: QKVParallelLinear):
    N_r = q_multiplier*Hq/tp*d + Hkv_r*d + Hkv_r*d_v.
    `q_multiplier=2` is Qwen3-Next's gated attention (total_num_heads = 2*Hq,
    vllm/model_executor/models/qwen3_next.py: Qwen3NextAttention).
    A K=V layer (Gemma 4 global attention, no v_proj on disk) still has the V slot: vLLM builds a
    plain QKVParallelLinear and loads k_proj into both K and V (vllm/model_executor/models/
    gemma4.py: Gemma4Attention.__init__, Gemma4ForCausalLM.load_weights._weight_iterator)."""
    hq_r = require_divides(num_heads, tp, "num_attention_heads")
    hkv_r = kv_heads_per_rank(num_kv_heads, tp)
    d_v = head_dim if v_head_dim is None else v_head_dim
    return q_multiplier * hq_r * head_dim + hkv_r * head_dim + hkv_r * d_v


def moe_per_rank(num_experts: int, intermediate: int, tp: int, ep: int) -> tuple[int, int]:
    """(experts on rank 0, per-rank intermediate I_r) of a routed-expert layer
    (vllm/model_executor/layers/fused_moe/config.py: FusedMoEParallelConfig.make;
    vllm/model_executor/layers/fused_moe/expert_map_manager.py: determine_expert_map).
    TP-MoE (ep == 1): all E experts, I/tp (FusedMoEConfig asserts it divides).
    EP (ep > 1, tp_moe = 1): E//ep experts (+1 on the first E%ep ranks, so rank 0 gets it), full I.
    vLLM accepts ep > E: the first E ranks hold one expert each, the others none (rank 0: one)."""
    if ep <= 1:
        return num_experts, require_divides(intermediate, tp, "moe_intermediate_size (TP-sharded experts)")
    return num_experts // ep + (1 if num_experts % ep else 0), intermediate


def mamba2_in_proj_per_rank(
    intermediate: int, n_groups: int, state_size: int, num_heads: int, tp: int
) -> int:
    """Per-rank N of MambaMixer2.in_proj (vllm/model_executor/layers/mamba/mamba_mixer2.py:
    MambaMixer2.__init__, with MambaStateShapeCalculator.extra_groups_for_head_shards):
    n_groups % tp == 0 -> (2I + 2*G*N + nheads)/tp; n_groups == 1 -> the one group is replicated per
    rank: 2I/tp + 2N + nheads/tp; otherwise vLLM asserts."""
    require_divides(num_heads, tp, "mamba_num_heads")
    i_r = require_divides(intermediate, tp, "mamba intermediate size (num_heads*head_dim)")
    if n_groups % tp == 0:
        return 2 * i_r + 2 * (n_groups // tp) * state_size + num_heads // tp
    if n_groups == 1:
        return 2 * i_r + 2 * state_size + num_heads // tp
    raise UsageError("--tp", tp, f"does not divide n_groups={n_groups} (Mamba2, and n_groups != 1); "
                     f"use one of {divisors_hint(n_groups)}")


def gdn_per_rank(num_k_heads: int, num_v_heads: int, head_k_dim: int, head_v_dim: int, tp: int
                 ) -> tuple[int, int, int]:
    """Per-rank (N of in_proj_qkvz, N of in_proj_ba, K of out_proj) of a GatedDeltaNet layer
    (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py: QwenGatedDeltaNetAttention,
    create_qkvz_proj / create_ba_proj): the fused qkvz
    shard is interleaved per key-head group, so Hk (and Hv) must divide by tp."""
    hk_r = require_divides(num_k_heads, tp, "linear_num_key_heads")
    hv_r = require_divides(num_v_heads, tp, "linear_num_value_heads")
    return 2 * hk_r * head_k_dim + 2 * hv_r * head_v_dim, 2 * hv_r, hv_r * head_v_dim


def moe_tokens_per_m(layout: Layout) -> int:
    """Tokens a rank's MoE layer runs per token M of its attention: EP/TP under expert parallelism,
    1 without it.

    vLLM builds the EP group from data-parallel x tensor-parallel ranks (EP = DP*TP,
    vllm/model_executor/layers/fused_moe/config.py: FusedMoEParallelConfig.make, use_ep ->
    ep_size = dp_size * tp_size). Each of the DP attention replicas holds its own M tokens; the
    MoE layer gathers the tokens of all DP ranks (`get_ep_group().dispatch`: an all-gather, or an
    all-to-all of the token-expert pairs), so one EP rank computes its local experts' share of
    M*DP = M*EP/TP tokens, routed over all experts (vllm/model_executor/layers/fused_moe/layer.py:
    FusedMoE.forward_impl, do_naive_dispatch_combine when dp_size > 1; the all-to-all
    prepare/finalize kernels move the same pairs). TP=EP (DP=1) gives M; TP=1 EP=8 gives 8M.

    >>> [moe_tokens_per_m(Layout.from_flags(tp, ep)) for tp, ep in ((1, 1), (4, 4), (1, 8), (2, 8))]
    [1, 1, 8, 4]
    """
    return layout.tokens_per_m


#: model_type of the configs whose vLLM MoE block builds its shared experts with
#: `disable_tp=parallel_config.use_sequence_parallel_moe` (replicated, full width) and runs the
#: block on `sequence_parallel_chunk`ed tokens: vllm/model_executor/models/deepseek_v2.py:
#: DeepseekV2MoE (DeepseekV2MLP(is_sequence_parallel=...); DeepSeek-V2/V3/V3.2, Kimi-K2, GLM-5),
#: llama4.py: Llama4MoE, qwen3_next.py: Qwen3NextSparseMoeBlock (Qwen3.5 reuses it), nemotron_h.py:
#: NemotronHMoE, AXK1.py: AXK1MoE. Not Glm4MoE (vllm/model_executor/models/glm4_moe.py: Glm4MoE
#: builds Glm4MoeMLP without it: TP-sharded always; GLM-4.7-Flash's glm4_moe_lite.py reuses it).
SP_MOE_SHARED_EXPERT_MODEL_TYPES = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa",
    "llama4", "llama4_text", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text", "nemotron_h", "axk1",
})


#: model_type of the configs whose vLLM MoE block keeps this rank's ceil(M/TP) chunk of the tokens
#: (`sequence_parallel_chunk`) before its router under sequence-parallel MoE, shared experts or
#: not: the models above, and vllm/model_executor/models/qwen3_moe.py: Qwen3MoeSparseMoeBlock
#: (Qwen3-VL-MoE reuses it, qwen3_vl_moe.py), gpt_oss.py: MLPBlock, granitemoe.py: GraniteMoeMoE,
#: mimo_v2.py: MiMoV2MoE.
SP_MOE_CHUNKED_MODEL_TYPES = SP_MOE_SHARED_EXPERT_MODEL_TYPES | frozenset({
    "qwen3_moe", "qwen3_vl_moe", "qwen3_vl_moe_text", "gpt_oss", "granitemoe", "mimo_v2_flash",
})


def sequence_parallel_moe(layout: Layout) -> bool:
    """vLLM's `ParallelConfig.use_sequence_parallel_moe` (vllm/config/parallel.py) at the default
    all2all backend "allgather_reducescatter" (in its list): enable_expert_parallel and
    tensor_parallel_size > 1 and data_parallel_size > 1, with DP = EP/TP here.

    >>> [sequence_parallel_moe(Layout.from_flags(tp, ep)) for tp, ep in ((2, 8), (8, 8), (1, 8))]
    [True, False, False]
    """
    return layout.sequence_parallel_moe


def shared_experts_replicated(layout: Layout, model_type: str) -> bool:
    """Whether the shared experts run full width on every rank (not split by TP): under
    sequence-parallel MoE, for the models of `SP_MOE_SHARED_EXPERT_MODEL_TYPES`. They then see
    ceil(M/TP) tokens per rank (vllm/model_executor/models/utils.py: sequence_parallel_chunk_impl
    pads M to a multiple of TP and keeps this rank's chunk). The routed experts still run
    M*EP/TP tokens (`moe_tokens_per_m`): the dispatch gathers ceil(M/TP) from each of the EP ranks."""
    return sequence_parallel_moe(layout) and model_type in SP_MOE_SHARED_EXPERT_MODEL_TYPES


def moe_block_chunked(layout: Layout, model_type: str) -> bool:
    """Whether the MoE block's router (and shared experts, gate) run on ceil(M/TP) tokens per
    rank: under sequence-parallel MoE, for the models of `SP_MOE_CHUNKED_MODEL_TYPES`.

    >>> tp2_ep8, tp8_ep8 = Layout.from_flags(2, 8), Layout.from_flags(8, 8)
    >>> [moe_block_chunked(tp2_ep8, "qwen3_moe"), moe_block_chunked(tp2_ep8, "glm4_moe")]
    [True, False]
    >>> moe_block_chunked(tp8_ep8, "qwen3_moe")
    False
    """
    return sequence_parallel_moe(layout) and model_type in SP_MOE_CHUNKED_MODEL_TYPES


#: model_type of the configs whose vLLM CUDA class runs the whole decoder layer sequence-parallel
#: under sequence-parallel MoE: attention on the all-gathered tokens, then a reduce-scatter, so the
#: MLP of the first dense layers (`first_k_dense_replace`) runs on this rank's ceil(M/TP) chunk,
#: replicated at full width (vllm/models/deepseek_v32/nvidia/model.py: DeepseekV32DecoderLayer,
#: `use_sequence_parallel`, `DeepseekV2MLP(is_sequence_parallel=self.use_sequence_parallel)`;
#: vllm/models/deepseek_v32/__init__.py resolves DeepseekV32ForCausalLM and GlmMoeDsaForCausalLM
#: to it on CUDA, while vLLM's CPU and XPU platforms keep the generic deepseek_v2.py class, whose
#: dense MLP stays TP-sharded).
SP_DECODER_LAYER_MODEL_TYPES = frozenset({"deepseek_v32", "glm_moe_dsa"})


def dense_mlp_sequence_parallel(layout: Layout, model_type: str) -> bool:
    """Whether a dense layer's MLP runs replicated at full width on ceil(M/TP) tokens per rank:
    under sequence-parallel MoE, for the models of `SP_DECODER_LAYER_MODEL_TYPES` (their CUDA class).

    >>> [dense_mlp_sequence_parallel(Layout.from_flags(tp, ep), "deepseek_v32") for tp, ep in ((8, 32), (8, 8))]
    [True, False]
    >>> dense_mlp_sequence_parallel(Layout.from_flags(8, 32), "deepseek_v3")
    False
    """
    return sequence_parallel_moe(layout) and model_type in SP_DECODER_LAYER_MODEL_TYPES


__all__ = [
    "VOCAB_PADDING", "SPLIT", "ROLE_KIND", "require_divides", "split", "pad_vocab", "vocab_per_rank",
    "kv_heads_per_rank", "qkv_per_rank", "moe_per_rank", "moe_tokens_per_m",
    "mamba2_in_proj_per_rank", "gdn_per_rank", "SP_MOE_SHARED_EXPERT_MODEL_TYPES", "SP_MOE_CHUNKED_MODEL_TYPES",
    "sequence_parallel_moe", "shared_experts_replicated", "moe_block_chunked", "SP_DECODER_LAYER_MODEL_TYPES",
    "dense_mlp_sequence_parallel", "ATTN_OUTPUT_GATE_BY_DEFAULT",
    "attention_output_gate",
]
