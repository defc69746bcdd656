"""vLLM sharding rules checked against the worked examples of references/sharding.md."""

from __future__ import annotations

import doctest

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.vllm_rules import sharding
from benchmark_model_kernels.vllm_rules.layout import Layout


def test_split_table():
    assert sharding.split("column", 1024, 512, 4, "x") == (256, 512)
    assert sharding.split("row", 1024, 512, 4, "x") == (1024, 128)
    assert sharding.split("replicated", 1024, 512, 4, "x") == (1024, 512)
    assert sharding.split("vocab", 50257, 768, 2, "x") == (25152, 768)  # round_up(50257,64)=50304, /2


def test_vocab_padding():
    assert sharding.pad_vocab(50257) == 50304
    assert sharding.pad_vocab(128256) == 128256
    assert sharding.vocab_per_rank(129280, 8) == 16160  # DeepSeek-V3 lm_head at TP8
    with pytest.raises(UsageError, match="padded vocabulary"):
        sharding.vocab_per_rank(64 * 5, 3)  # 320 % 3 != 0


def test_llama31_70b_tp8():
    # H=8192, Hq=64, Hkv=8, d=128, I=28672, V=128256
    assert sharding.qkv_per_rank(64, 8, 128, 8) == 1280  # (64/8 + 2*8/8)*128 = (8+2)*128
    assert sharding.split("row", 8192, 64 * 128, 8, "o") == (8192, 1024)  # K = 8192/8
    assert sharding.split("column", 2 * 28672, 8192, 8, "gu") == (7168, 8192)  # 2*28672/8
    assert sharding.split("row", 8192, 28672, 8, "down") == (8192, 3584)  # 28672/8
    assert sharding.vocab_per_rank(128256, 8) == 16032  # 128256/8


def test_qwen3_30b_a3b_tp8_kv_replication():
    # Hq=32, Hkv=4, d=128: TP8 > Hkv -> 1 kv head per rank: (32/8 + 2*1)*128 = 768
    assert sharding.qkv_per_rank(32, 4, 128, 8) == 768
    assert sharding.moe_per_rank(128, 768, 8, 1) == (128, 96)  # TP-MoE: all experts, 768/8
    assert sharding.moe_per_rank(128, 768, 4, 1) == (128, 192)


def test_gpt_oss_120b_tp8():
    # Hq=64, Hkv=8, d=64: (8 + 2*1)*64 = 640; experts I=2880/8 = 360
    assert sharding.qkv_per_rank(64, 8, 64, 8) == 640
    assert sharding.moe_per_rank(128, 2880, 8, 1) == (128, 360)


def test_deepseek_v3_moe_tp8_vs_ep8():
    assert sharding.moe_per_rank(256, 2048, 8, 1) == (256, 256)  # 2048/8
    assert sharding.moe_per_rank(256, 2048, 8, 8) == (32, 2048)  # 256/8 experts, full I


def test_ep_remainder_goes_to_rank0_and_wide_ep():
    assert sharding.moe_per_rank(128, 768, 8, 48) == (3, 768)  # 128//48 = 2, 128%48 = 32 > 0 -> rank 0 gets 3
    assert sharding.moe_per_rank(256, 2048, 8, 256) == (1, 2048)
    # EP above the expert count: vLLM's determine_expert_map gives the first E ranks one expert
    # each and the rest none; rank 0 holds one.
    assert sharding.moe_per_rank(256, 2048, 8, 512) == (1, 2048)
    assert sharding.moe_per_rank(32, 2880, 1, 64) == (1, 2880)


def test_gated_attention_doubles_q():
    # Qwen3-Next: Hq=16, Hkv=2, d=256, TP8: 2*(16/8)*256 + 2*1*256 = 1024 + 512
    assert sharding.qkv_per_rank(16, 2, 256, 8, q_multiplier=2) == 1536


def test_kv_heads_rules():
    assert sharding.kv_heads_per_rank(8, 4) == 2
    assert sharding.kv_heads_per_rank(8, 8) == 1
    assert sharding.kv_heads_per_rank(2, 8) == 1
    with pytest.raises(UsageError, match="multiple of num_key_value_heads=3"):
        sharding.kv_heads_per_rank(3, 4)
    with pytest.raises(UsageError, match="num_key_value_heads=6"):
        sharding.kv_heads_per_rank(6, 4)


def test_mamba2_n_groups_rule():
    # Nemotron-H-56B: I=16384 (256 heads*64), G=8, N=256: (2*16384 + 2*8*256 + 256)/8 = 37120/8
    assert sharding.mamba2_in_proj_per_rank(16384, 8, 256, 256, 8) == 4640
    # n_groups=1, TP4: 2*I/4 + 2*N + nh/4 (the group is replicated on every rank)
    assert sharding.mamba2_in_proj_per_rank(4096, 1, 128, 64, 4) == 2048 + 256 + 16
    with pytest.raises(UsageError, match="n_groups=6"):
        sharding.mamba2_in_proj_per_rank(4096, 6, 128, 64, 4)


def test_gdn_rule():
    # Qwen3-Next: Hk=16, Hv=32, dk=dv=128, TP8: qkvz (2*2*128 + 2*4*128) = 1536, ba 2*4 = 8, out K 4*128
    assert sharding.gdn_per_rank(16, 32, 128, 128, 8) == (1536, 8, 512)
    with pytest.raises(UsageError, match="linear_num_key_heads=16"):
        sharding.gdn_per_rank(16, 32, 128, 128, 32)


def test_divide_error_names_field():
    with pytest.raises(UsageError) as e:
        sharding.qkv_per_rank(28, 4, 128, 8)
    assert str(e.value) == "--tp=8: does not divide num_attention_heads=28; use one of 1, 2, 4"


def test_first_local_expert_gives_the_remainder_to_the_first_ranks():
    # 10 experts on 4 ranks: 3, 3, 2, 2 -> blocks start at 0, 3, 6, 8
    assert [Layout.from_flags(1, 4).first_local_expert(10, r) for r in range(4)] == [0, 3, 6, 8]
    # DeepSeek-V3 at EP=96: 256 = 2*96 + 64, ranks 0-63 hold 3 experts, ranks 64-95 hold 2
    assert Layout.from_flags(1, 96).first_local_expert(256, 63) == 189
    assert Layout.from_flags(1, 96).first_local_expert(256, 64) == 192
    assert Layout.from_flags(1, 96).first_local_expert(256, 95) == 254  # the last 2 experts: 254, 255
    assert Layout.from_flags(1, 8).first_local_expert(256, 3) == 96  # even split: 32 per rank


def test_role_table_kinds_are_split_kinds():
    assert set(sharding.ROLE_KIND.values()) <= set(sharding.SPLIT)
    assert sharding.ROLE_KIND["qkv_proj"] == "column" and sharding.ROLE_KIND["o_proj"] == "row"
    assert sharding.ROLE_KIND["mla.fused_qkv_a_proj"] == "replicated" and sharding.ROLE_KIND["lm_head"] == "vocab"


def test_doctests():
    assert doctest.testmod(sharding).failed == 0


@pytest.mark.parametrize("tp, ep, per_m", [(1, 1, 1), (4, 1, 1), (4, 4, 1), (8, 8, 1), (1, 8, 8),
                                           (2, 8, 4), (1, 64, 64), (8, 64, 8)])
def test_moe_tokens_per_m_is_ep_over_tp(tp, ep, per_m):
    """TP=EP: the EP group is the TP group, every rank sees the same M; EP = DP x TP: each EP rank
    receives the pairs of DP = EP/TP attention replicas' M tokens."""
    assert sharding.moe_tokens_per_m(Layout.from_flags(tp, ep)) == per_m


def test_a_layout_refuses_ep_not_a_multiple_of_tp():
    with pytest.raises(UsageError, match="--ep"):
        Layout.from_flags(4, 6)


def test_sequence_parallel_moe_and_shared_experts_replicated():
    # vllm/config/parallel.py: ParallelConfig.use_sequence_parallel_moe: EP and tp > 1 and dp > 1
    layouts = [Layout.from_flags(tp, ep) for tp, ep in ((2, 8), (4, 8), (8, 8), (1, 8), (2, 1))]
    assert [sharding.sequence_parallel_moe(lay) for lay in layouts] == [True, True, False, False, False]
    assert sharding.shared_experts_replicated(Layout.from_flags(2, 8), "deepseek_v3")
    assert not sharding.shared_experts_replicated(Layout.from_flags(2, 8), "glm4_moe")  # Glm4MoE: always TP-sharded
    assert not sharding.shared_experts_replicated(Layout.from_flags(8, 8), "deepseek_v3")
