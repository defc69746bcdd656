"""Memory per rank (plan/memory.py) against numbers worked out here from the configs: parameter
counts x bytes per recipe, the K/V cache per token, the budget at vLLM's gpu_memory_utilization
and the tokens that fit; windows bounding what sliding layers hold."""

from __future__ import annotations

import math

import pytest
from plan_helpers import plan_of

from benchmark_model_kernels.plan import memory

GiB = 2**30


def test_llama_3_1_70b_tp4():
    p = plan_of("llama-3.1-70b", 4)
    # config: hidden 8192, 80 layers, 64 heads, 8 KV heads, head_dim 128, intermediate 28672,
    # vocab 128256 (a multiple of 64: no padding), tie_word_embeddings false. Per rank at TP=4:
    qkv = (64 // 4 + 2 * (8 // 4)) * 128 * 8192  # 2560 x 8192 = 20,971,520
    o = 8192 * (64 * 128 // 4)  # 8192 x 2048 = 16,777,216
    gate_up = (2 * 28672 // 4) * 8192  # 14336 x 8192 = 117,440,512
    down = 8192 * (28672 // 4)  # 8192 x 7168 = 58,720,256
    layer = qkv + o + gate_up + down
    assert layer == 213_909_504
    head = embedding = (128256 // 4) * 8192  # 32064 rows of 8192 each = 262,668,288
    # bf16: 2 bytes per element for everything
    bf16 = 2 * (80 * layer + head + embedding)
    assert bf16 == 35_276_193_792
    # fp8 per tensor (no quantization_config: vLLM's online FP8): 1 byte per element + one FP32
    # scale per GEMM and layer (4 x 80); lm_head and embedding stay BF16
    fp8 = 80 * layer + 4 * 4 * 80 + 2 * (head + embedding)
    assert fp8 == 18_163_434_752
    # nvfp4: N x K / 2 + FP8 block scales [round_up(N, 128), round_up(K / 16, 4)] + 2 FP32 globals
    def nvfp4(n: int, k: int) -> int:
        return n * k // 2 + (-(-n // 128) * 128) * (-(-(k // 16) // 4) * 4) + 8

    nv = 80 * (nvfp4(2560, 8192) + nvfp4(8192, 2048) + nvfp4(14336, 8192) + nvfp4(8192, 7168)) \
        + 2 * (head + embedding)
    assert nv == 10_676_603_392
    assert [memory.weight_bytes(p, r).total for r in ("bf16", "fp8", "nvfp4")] == [bf16, fp8, nv]

    # K/V: 80 layers x 2 local KV heads x (128 + 128) x 2 bytes
    assert memory.kv_bytes_per_token(p, "bf16") == 80 * 2 * 256 * 2 == 81_920
    assert memory.kv_bytes_per_token(p, "fp8") == 40_960
    # reserve: 1 GiB + 8192 tokens x 2 B x (2 x 8192 hidden in/out + 14336 widest GEMM output)
    # + FP32 logits of 1024 sequences over 128256
    reserve = GiB + 8192 * 2 * (2 * 8192 + 14336) + 1024 * 128256 * 4
    assert memory.activation_reserve(p) == reserve == 2_102_394_880
    # an H200 taken as 141 GiB at vLLM's 0.92: usable = ceil(141 GiB x 0.92)
    size = 141 * GiB
    usable = math.ceil(size * 0.92)
    est = memory.estimate(p, "bf16", "bf16", size)
    assert (est.usable_bytes, est.weight_bytes, est.reserve_bytes) == (usable, bf16, reserve)
    assert est.kv_budget_bytes == usable - bf16 - reserve == 101_907_200_738
    assert est.kv_tokens_fit == 101_907_200_738 // 81_920 == 1_243_984
    assert memory.estimate(p, "fp8", "fp8", size).kv_tokens_fit == (usable - fp8 - reserve) // 40_960
    # 37 sequences of 32768 tokens (1,212,416) fit, 38 (1,245,184) do not
    assert memory.fits(est, p, 37, 32768) and not memory.fits(est, p, 38, 32768)


def test_deepseek_v3_ep8():
    p = plan_of("deepseek-v3", 1, 8)
    # config: hidden 7168, 61 layers (first 3 dense), 128 heads, q_lora_rank 1536, kv_lora_rank
    # 512, qk_nope 128, qk_rope 64, v_head 128, dense intermediate 18432, 256 experts of 2048,
    # 1 shared expert, vocab 129280 (a multiple of 64), FP8 block-128 checkpoint. TP=1, EP=8.
    qkv_a = (1536 + 512 + 64) * 7168  # fused q_a + kv_a, replicated
    q_b = 128 * (128 + 64) * 1536
    kv_b = 128 * (128 + 128) * 512
    o = 7168 * (128 * 128)
    mla = qkv_a + q_b + kv_b + o
    dense = 2 * 18432 * 7168 + 7168 * 18432  # 3 dense layers: gate_up + down
    router = 256 * 7168  # BF16 under every recipe
    shared = 2 * 2048 * 7168 + 7168 * 2048  # 58 MoE layers: one shared expert, TP=1: full width
    head = embedding = 129280 * 7168
    expert = 2 * 2048 * 7168 + 7168 * 2048  # GEMM1 [2I, H] + GEMM2 [H, I]
    local = 256 // 8  # experts on rank 0
    gemm_elements = 61 * mla + 3 * dense + 58 * (router + shared) + head
    assert gemm_elements == 16_189_947_904
    absorbed = 2 * 61 * kv_b  # W_UK^T and W_UV: a BF16 copy of kv_b_proj per layer
    bf16 = 2 * gemm_elements + 2 * local * 58 * expert + 2 * embedding + absorbed
    assert bf16 == 199_757_266_944
    w = memory.weight_bytes(p, "bf16")
    assert (w.gemms, w.experts, w.embedding, w.mla_absorbed) == (
        2 * gemm_elements, 2 * local * 58 * expert, 2 * embedding, absorbed)
    assert w.total == bf16

    # fp8 block128: 1 byte per element + FP32 scales per 128x128 tile: ceil(N/128) x ceil(K/128)
    def tiles(n: int, k: int) -> int:
        return -(-n // 128) * -(-k // 128)

    mla_scales = tiles(2112, 7168) + tiles(24576, 1536) + tiles(32768, 512) + tiles(7168, 16384)
    assert mla_scales == 17 * 56 + 192 * 12 + 256 * 4 + 56 * 128 == 11_448
    scales = 61 * mla_scales + 3 * (tiles(36864, 7168) + tiles(7168, 18432)) \
        + 58 * (tiles(4096, 7168) + tiles(7168, 2048))
    kept = 58 * router + head  # router and lm_head stay BF16
    fp8_gemms = (gemm_elements - kept) + 4 * scales + 2 * kept
    assert fp8_gemms == 17_226_764_640
    fp8_experts = local * 58 * (expert + 4 * (tiles(4096, 7168) + tiles(7168, 2048)))
    assert fp8_experts == 81_758_552_064
    fp8 = fp8_gemms + fp8_experts + 2 * embedding + absorbed
    assert memory.weight_bytes(p, "fp8").total == fp8 == 102_885_495_136

    # K/V: MLA caches the latent and the RoPE key (512 + 64) of every layer, whole on every rank
    assert memory.kv_bytes_per_token(p, "bf16") == 61 * 576 * 2 == 70_272
    # on 141 GiB: BF16 weights (186 GiB) do not fit; FP8 leaves a budget
    size = 141 * GiB
    assert not memory.estimate(p, "bf16", "bf16", size).weights_fit
    est = memory.estimate(p, "fp8", "fp8", size)
    assert est.fp8_scheme == "block128"
    budget = math.ceil(size * 0.92) - fp8 - est.reserve_bytes
    assert est.kv_budget_bytes == budget and est.kv_tokens_fit == budget // 35_136
    assert not memory.fits(memory.estimate(p, "bf16", "bf16", size), p, 1, 1)


def test_sliding_layers_hold_at_most_their_window():
    # gpt-oss-120b at TP=8: 18 sliding layers (window 128) and 18 full ones, 1 KV head of 64 per rank
    p = plan_of("gpt-oss-120b", 8)
    per_layer = 1 * (64 + 64) * 2  # one token of one layer, BF16
    assert memory.kv_bytes_per_token(p, "bf16") == 36 * per_layer
    assert memory.kv_bytes(p, "bf16", 1, 100) == 36 * per_layer * 100
    # 8192 tokens: the full layers hold all of them, the sliding ones only 128
    assert memory.kv_bytes(p, "bf16", 4, 8192) == 4 * (18 * per_layer * 8192 + 18 * per_layer * 128)


def test_tied_embedding_counted_once():
    # llama-3.2-3b ties its lm_head to the embedding: one tensor of 128256 x 3072
    p = plan_of("llama-3.2-3b", 1)
    assert p.model.tie_word_embeddings is True
    assert memory.weight_bytes(p, "bf16").embedding == 0
    untied = plan_of("llama-3.1-8b", 1)
    assert untied.model.tie_word_embeddings is False
    assert memory.weight_bytes(untied, "bf16").embedding == 2 * 128256 * 4096


def test_weights_over_the_gpu_and_bad_arguments():
    p = plan_of("llama-3.1-70b", 1)
    est = memory.estimate(p, "bf16", "bf16", 80 * GiB)
    assert not est.weights_fit and est.kv_tokens_fit == 0 and not memory.fits(est, p, 1, 1)
    with pytest.raises(ValueError, match="recipe 'int4'"):
        memory.estimate(p, "int4", "bf16", 80 * GiB)
    with pytest.raises(ValueError, match="kv_dtype 'fp4'"):
        memory.estimate(p, "bf16", "fp4", 80 * GiB)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        memory.estimate(p, "bf16", "bf16", 80 * GiB, gpu_memory_utilization=1.5)


def test_qwen3_moe_router_is_stored_fp8_under_online_per_tensor():
    # vLLM's online fp8_per_tensor quantizes Qwen3-MoE's router (vllm_rules/layers.py
    # QUANTIZED_ROUTERS): 128 x 2048 x 48 layers at 1 byte + one FP32 scale per layer, not 2 bytes.
    p = plan_of("qwen3-30b-a3b", 1)
    router = next(g for g in p.gemms if g.name == "router")
    assert (router.n, router.k, router.layers) == (128, 2048, 48)
    bf16_gemms = memory.weight_bytes(p, "bf16").gemms
    fp8_gemms = memory.weight_bytes(p, "fp8").gemms
    others = [g for g in p.gemms if g.name not in ("router", "lm_head")]
    head = next(g for g in p.gemms if g.name == "lm_head")
    expected = sum(g.layers * (g.n * g.k + 4) for g in others) + 48 * (128 * 2048 + 4) + 2 * head.n * head.k
    assert fp8_gemms == expected and bf16_gemms - fp8_gemms > 48 * 128 * 2048
