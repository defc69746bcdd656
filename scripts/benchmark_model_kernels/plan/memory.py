"""GPU memory of one rank for a plan: weights per recipe, the K/V cache per token, and how many
tokens of K/V fit on a GPU of a given size beside them.

Pure functions over frozen dataclasses, no I/O; references/memory.md gives the rules, their vLLM
sources and worked examples. In: a `Plan` (per-rank GEMMs, experts, attention entries), a recipe
("bf16", "fp8", "nvfp4"), a K/V cache dtype ("bf16", "fp8") and a GPU memory size in bytes. Out:
`MemoryEstimate`, and `fits` for M sequences of a K/V length each.

What is counted, per rank:
  - GEMM weights (each entry's N x K x layers) and routed experts (the experts on this rank), in the
    recipe's storage with its scale tensors; what vLLM keeps in BF16 under the recipe
    (`vllm_rules.layers.kept_in_bf16`: router, shared-expert gate, lm_head; Qwen3-MoE's router is
    FP8 under online per-tensor FP8) in BF16; biases BF16.
  - The input embedding: round_up(vocab, 64) / TP rows of hidden_size, BF16, unless the lm_head is
    tied to it (then the lm_head GEMM entry is that one tensor).
  - MLA's absorbed W_UK / W_UV: a BF16 copy of kv_b_proj per MLA layer.
  - The K/V cache of every attention layer that holds one (not KV-shared layers), per token; a
    sliding-window layer holds at most `window` tokens of a sequence, a chunked one at most a chunk.
Not counted: norms, rotary tables, the recurrent state of Mamba/GatedDeltaNet layers (a fixed size
per sequence, not per token), a DeepSeek sparse-attention indexer's own key cache; the reserve
stands for activations, CUDA graphs and the CUDA context, which vLLM measures at start-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.plan_schema import AttentionEntry, GemmEntry, ModelInfo, MoeEntry, Plan
from ..vllm_rules.layers import kept_in_bf16
from ..vllm_rules.sharding import pad_vocab

#: Weight recipes (cases.schema.DTYPES).
RECIPES = ("bf16", "fp8", "nvfp4")
#: Bytes per K/V cache element: BF16, or FP8 e4m3 with one scale per layer for K and for V
#: (vllm/model_executor/layers/attention/attention.py: Attention, k_scale / v_scale scalars).
KV_DTYPE_BYTES = {"bf16": 2, "fp8": 1}
#: vLLM's default share of GPU memory it takes for weights, activations and the K/V cache
#: (vllm/config/cache.py: CacheConfig.gpu_memory_utilization, Field(default=0.92)).
VLLM_GPU_MEMORY_UTILIZATION = 0.92
#: Tokens of vLLM's start-up profile run: max_num_batched_tokens of its OpenAI server on an
#: H100/H200-class GPU (vllm/engine/arg_utils.py: EngineArgs._set_default_args,
#: default_max_num_batched_tokens, OPENAI_API_SERVER 8192).
PROFILE_TOKENS = 8192
#: Sequences the profile's sampler step holds logits for (default_max_num_seqs 1024, same place).
PROFILE_SEQS = 1024
#: The CUDA context, cuBLAS/NCCL workspaces and CUDA graph pools: memory vLLM counts outside the
#: weights and the K/V cache ("non-torch" and graph memory in vllm/v1/worker/gpu_worker.py:
#: Worker.determine_available_memory); measured there, stated here.
RUNTIME_RESERVE_BYTES = 1 << 30
#: NVFP4 elements per FP8 block scale (vllm/model_executor/layers/quantization/modelopt.py:
#: ModelOptNvFp4Config, group_size 16); scales are padded to 128 rows x 4 columns
#: (vllm/model_executor/layers/quantization/utils/nvfp4_utils.py: swizzle_blockscale).
NVFP4_GROUP = 16
#: FP8 block-scale tile (weight_block_size [128, 128]).
FP8_BLOCK = 128
#: FP32 scale bytes.
SCALE_BYTES = 4


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def matrix_bytes(n: int, k: int, recipe: str, fp8_scheme: str = "per_tensor") -> int:
    """Bytes of one [N, K] weight in `recipe`, scales included.

    bf16: 2 per element. fp8 (1 per element) plus FP32 scales by scheme: per_tensor one (vLLM
    requantizes the shards of a merged layer to their max scale: vllm/model_executor/layers/
    quantization/fp8.py: Fp8LinearMethod.process_weights_after_loading); per_token one per output
    channel (ChannelQuantScaleParameter, compressed_tensors_w8a8_fp8.py: CompressedTensorsW8A8Fp8);
    block128 one per 128x128 tile (weight_scale_inv [ceil(N/128), ceil(K/128)], fp8.py:
    Fp8LinearMethod.create_weights). nvfp4: half a byte per element, one FP8 scale per 16 along K
    padded to [round_up(N, 128), round_up(K/16, 4)], two FP32 global scales (weight_scale_2,
    input_scale).

    >>> matrix_bytes(256, 256, "bf16"), matrix_bytes(256, 256, "fp8", "block128")
    (131072, 65552)
    """
    elements = n * k
    if recipe == "bf16":
        return 2 * elements
    if recipe == "fp8":
        scales = {"per_tensor": 1, "per_token": n, "block128": _cdiv(n, FP8_BLOCK) * _cdiv(k, FP8_BLOCK)}[fp8_scheme]
        return elements + SCALE_BYTES * scales
    if recipe == "nvfp4":
        block_scales = _round_up(n, 128) * _round_up(_cdiv(k, NVFP4_GROUP), 4)
        return elements // 2 + block_scales + 2 * SCALE_BYTES
    raise ValueError(f"recipe {recipe!r}: one of {', '.join(RECIPES)}")


@dataclass(frozen=True)
class WeightBytes:
    """One rank's weight bytes in one recipe, by part."""

    gemms: int
    """Dense GEMM weights and biases (lm_head included: BF16)."""
    experts: int
    """Routed experts on this rank, both expert GEMMs, scales included."""
    embedding: int
    """The input embedding's rows on this rank (0 when the lm_head is tied to it)."""
    mla_absorbed: int = 0
    """MLA's W_UK and W_UV: BF16 copies of kv_b_proj the decode path multiplies by, kept beside it."""

    @property
    def total(self) -> int:
        return self.gemms + self.experts + self.embedding + self.mla_absorbed


def _gemm_bytes(g: GemmEntry, recipe: str, fp8_scheme: str, model: ModelInfo) -> int:
    kept = recipe != "bf16" and kept_in_bf16(g.name, recipe, fp8_scheme if recipe == "fp8" else "",
                                             model.fp8_activation_scales, model.architecture)
    stored = "bf16" if kept else recipe
    bias = 2 * g.n if g.bias else 0
    return g.layers * (matrix_bytes(g.n, g.k, stored, fp8_scheme) + bias)


def _expert_bytes(m: MoeEntry, recipe: str, fp8_scheme: str) -> int:
    """The experts of one MoE entry: GEMM1 [2I or I, H] and GEMM2 [H, I] per expert; FP8 MoE
    scales follow the linear schemes per expert (vllm/model_executor/layers/quantization/fp8.py:
    Fp8MoEMethod.create_weights, w13/w2 weight scales)."""
    gemm1 = matrix_bytes((2 if m.gated else 1) * m.intermediate, m.hidden, recipe, fp8_scheme)
    gemm2 = matrix_bytes(m.hidden, m.intermediate, recipe, fp8_scheme)
    bias = 2 * ((2 if m.gated else 1) * m.intermediate + m.hidden) if m.bias else 0
    return m.layers * m.experts * (gemm1 + gemm2 + bias)


def embedding_rows(plan: Plan) -> int:
    """Input-embedding rows on one rank: round_up(vocab, 64) / TP
    (vllm/model_executor/layers/vocab_parallel_embedding.py: VocabParallelEmbedding.__init__,
    num_embeddings_per_partition)."""
    return pad_vocab(plan.model.vocab_size) // plan.tp


def fp8_scheme_of(plan: Plan) -> str:
    """The FP8 scheme the fp8 recipe is stored in: the checkpoint's, else vLLM's online FP8 (per
    tensor)."""
    return plan.model.fp8_scheme or "per_tensor"


def weight_bytes(plan: Plan, recipe: str) -> WeightBytes:
    """One rank's weights in `recipe`. The embedding stays BF16 under every recipe (Fp8Config and
    ModelOpt quantize linear and MoE layers only: vllm/model_executor/layers/quantization/fp8.py:
    Fp8Config.get_quant_method). A tied lm_head is the embedding's tensor
    (vllm/model_executor/models/llama.py: LlamaForCausalLM.__init__, lm_head.tie_weights)."""
    scheme = fp8_scheme_of(plan)
    gemms = sum(_gemm_bytes(g, recipe, scheme, plan.model) for g in plan.gemms)
    experts = sum(_expert_bytes(m, recipe, scheme) for m in plan.moe)
    has_head = any(g.name == "lm_head" for g in plan.gemms)
    tied = bool(plan.model.tie_word_embeddings) and has_head
    embedding = 0 if tied else 2 * embedding_rows(plan) * plan.model.hidden_size
    # MLA splits kv_b_proj (dequantized to the activation dtype) into W_UK^T and W_UV parameters
    # and keeps kv_b_proj for prefill (vllm/model_executor/layers/attention/mla_attention.py:
    # MLAAttention.process_weights_after_loading, split_kv_b_proj + replace_parameter).
    absorbed = sum(2 * g.n * g.k * g.layers for g in plan.gemms if g.name.split("[", 1)[0] == "mla.kv_b_proj")
    return WeightBytes(gemms, experts, embedding, absorbed)


def _cache_layers(plan: Plan) -> tuple[AttentionEntry, ...]:
    """The attention entries that hold a K/V cache of their own (KV-shared layers read another's)."""
    return tuple(a for a in plan.attention if not a.kv_shared)


def kv_bytes_per_token(plan: Plan, kv_dtype: str) -> int:
    """K/V bytes one token takes on this rank over every layer that caches it: per layer the local
    KV heads' K and V (MHA; a replicated KV head is held whole on each rank that has it), or the
    latent plus RoPE key (MLA, held whole on every TP rank: vllm/model_executor/layers/attention/
    mla_attention.py: MLAAttention.get_kv_cache_spec, num_kv_heads=1, max_tp_shards=1)."""
    return sum(a.layers * a.kv_elements_per_token for a in _cache_layers(plan)) * KV_DTYPE_BYTES[kv_dtype]


def tokens_held(a: AttentionEntry, kv_len: int) -> int:
    """Tokens of one sequence of `kv_len` that a layer of `a` keeps: all of them (full attention),
    at most the window (sliding: vllm/v1/kv_cache_interface.py: SlidingWindowSpec.
    max_admission_blocks_per_request, the last sliding_window - 1 tokens plus those in flight; its
    manager frees the blocks behind the window) or at most a chunk (ChunkedLocalAttentionSpec).
    The hybrid K/V cache manager draws every layer group's blocks from one pool
    (vllm/v1/core/kv_cache_planning.py: _get_kv_cache_groups_uniform_page_size,
    get_kv_cache_config_from_groups), so the bytes of all layers add up."""
    bound = a.sliding_window or a.attention_chunk_size
    return min(kv_len, bound) if bound else kv_len


def kv_bytes(plan: Plan, kv_dtype: str, batch: int, kv_len: int) -> int:
    """K/V bytes of `batch` sequences of `kv_len` tokens on this rank, windows applied."""
    per_seq = sum(a.layers * a.kv_elements_per_token * tokens_held(a, kv_len) for a in _cache_layers(plan))
    return batch * per_seq * KV_DTYPE_BYTES[kv_dtype]


def activation_reserve(plan: Plan) -> int:
    """The stated reserve for what vLLM's profile run measures: RUNTIME_RESERVE_BYTES, plus BF16
    activations of PROFILE_TOKENS tokens at the widest layer (hidden state in and out, and the
    widest GEMM output but the lm_head's, or the MoE layer's token-expert pairs: tokens x
    tokens_per_m x top_k x (GEMM1 width + H)), plus FP32 logits of PROFILE_SEQS sequences over the
    full padded vocabulary (the sampler's dummy step, vllm/v1/worker/gpu_model_runner.py:
    GPUModelRunner._dummy_sampler_run)."""
    widest = max((g.n for g in plan.gemms if g.name != "lm_head"), default=0)  # logits: below
    act = PROFILE_TOKENS * 2 * (2 * plan.model.hidden_size + widest)
    moe = max((PROFILE_TOKENS * m.tokens_per_m * m.top_k * 2 * ((2 if m.gated else 1) * m.intermediate + m.hidden)
               for m in plan.moe), default=0)
    logits = PROFILE_SEQS * pad_vocab(plan.model.vocab_size) * 4
    return RUNTIME_RESERVE_BYTES + max(act, moe) + logits


@dataclass(frozen=True)
class MemoryEstimate:
    """One rank of `plan` on a GPU of `gpu_mem_bytes`, weights in `recipe`, K/V cache in `kv_dtype`."""

    recipe: str
    kv_dtype: str
    gpu_mem_bytes: int
    weight_bytes: int
    """All weights of this rank (`WeightBytes.total`)."""
    kv_bytes_per_token: int
    """K/V bytes of one token over every caching layer of this rank."""
    reserve_bytes: int
    """Activations, CUDA graphs and context (`activation_reserve`)."""
    kv_tokens_fit: int
    """Tokens of K/V that fit in the budget if every caching layer holds each token (exact while
    sequences are no longer than the smallest window; `fits` applies the windows)."""
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION
    usable_bytes: int = 0
    """ceil(gpu_mem_bytes x gpu_memory_utilization): vLLM's requested memory
    (vllm/v1/worker/utils.py: request_memory)."""
    kv_budget_bytes: int = 0
    """usable - weights - reserve (negative: the weights and reserve do not fit)."""
    fp8_scheme: str = ""
    """The FP8 scheme of the fp8 recipe's scales ("" for other recipes)."""

    @property
    def weights_fit(self) -> bool:
        return self.weight_bytes <= self.usable_bytes

    @property
    def kv_fits_any(self) -> bool:
        return self.kv_budget_bytes > 0


def check_recipe(recipe: str, kv_dtype: str) -> None:
    if recipe not in RECIPES:
        raise ValueError(f"recipe {recipe!r}: one of {', '.join(RECIPES)}")
    if kv_dtype not in KV_DTYPE_BYTES:
        raise ValueError(f"kv_dtype {kv_dtype!r}: one of {', '.join(KV_DTYPE_BYTES)}")


def estimate(plan: Plan, recipe: str, kv_dtype: str, gpu_mem_bytes: int, *,
             gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION) -> MemoryEstimate:
    """The memory of one rank of `plan`: vLLM takes gpu_memory_utilization of the GPU, the weights
    and the profile run's peak come out of it, the K/V cache gets the rest
    (vllm/v1/worker/gpu_worker.py: Worker.determine_available_memory, available_kv_cache_memory =
    requested_memory - non_kv_cache_memory)."""
    check_recipe(recipe, kv_dtype)
    if gpu_mem_bytes <= 0 or not 0 < gpu_memory_utilization <= 1:
        raise ValueError("gpu_mem_bytes must be positive and gpu_memory_utilization in (0, 1]")
    weights = weight_bytes(plan, recipe).total
    per_token = kv_bytes_per_token(plan, kv_dtype)
    reserve = activation_reserve(plan)
    usable = math.ceil(gpu_mem_bytes * gpu_memory_utilization)
    budget = usable - weights - reserve
    fit = budget // per_token if budget > 0 and per_token else 0
    return MemoryEstimate(recipe, kv_dtype, gpu_mem_bytes, weights, per_token, reserve, fit,
                          gpu_memory_utilization, usable, budget, fp8_scheme_of(plan) if recipe == "fp8" else "")


def fits(est: MemoryEstimate, plan: Plan, batch: int, kv_len: int) -> bool:
    """Whether `batch` sequences of `kv_len` tokens each fit in the K/V budget of `est`, each
    sliding-window or chunked layer holding at most its window of each sequence."""
    if est.kv_budget_bytes <= 0:
        return False
    return kv_bytes(plan, est.kv_dtype, batch, kv_len) <= est.kv_budget_bytes


def gib(n: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{n / 2**30:.1f}"


__all__ = ["RECIPES", "KV_DTYPE_BYTES", "VLLM_GPU_MEMORY_UTILIZATION", "PROFILE_TOKENS", "PROFILE_SEQS",
           "RUNTIME_RESERVE_BYTES", "matrix_bytes", "WeightBytes", "weight_bytes", "embedding_rows", "fp8_scheme_of",
           "kv_bytes_per_token", "tokens_held", "kv_bytes", "activation_reserve", "MemoryEstimate", "check_recipe",
           "estimate", "fits", "gib"]
