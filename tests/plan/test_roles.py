"""Roles and per-rank sizes of every kind of layer part (attention, MLA, MLP, Mamba2, GDN, experts,
router, shared expert), for real configs and for held-out architectures written here. Expected
numbers are hand-computed from vLLM's rules (references/sharding.md); the arithmetic is in the
comments."""

from __future__ import annotations

import pytest
from plan_helpers import gemms, plan_of, plan_raw

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.plan import roles
from benchmark_model_kernels.plan.items import Context, LayerPlan
from benchmark_model_kernels.vllm_rules import sharding
from benchmark_model_kernels.vllm_rules.layout import Layout


def test_mla_with_q_lora_deepseek_v3_tp8_and_ep8():
    p = plan_of("deepseek-v3", 8)
    assert gemms(p) == {
        "mla.fused_qkv_a_proj": (2112, 7168, 61, "replicated", False),  # 1536 + 512 + 64, all 61 layers
        "mla.q_b_proj": (3072, 1536, 61, "column", False),  # 128/8 heads * (128+64)
        "mla.kv_b_proj": (4096, 512, 61, "column", False),  # 16 * (128 + 128)
        "o_proj": (7168, 2048, 61, "row", False),  # K = 16*128
        "gate_up_proj": (4608, 7168, 3, "column", False),  # 2*18432/8, first_k_dense_replace=3
        "down_proj": (7168, 2304, 3, "row", False),  # 18432/8
        "router": (256, 7168, 58, "replicated", False),  # E=256, 61-3 MoE layers
        "shared_expert.gate_up_proj": (512, 7168, 58, "column", False),  # 2*2048*1/8
        "shared_expert.down_proj": (7168, 256, 58, "row", False),  # 2048/8
        "lm_head": (16160, 7168, 1, "vocab", False),  # 129280/8
    }
    (m,) = p.moe
    # TP-MoE: all 256 experts, I = 2048/8
    assert (m.hidden, m.intermediate, m.experts, m.global_experts, m.top_k, m.layers) == (7168, 256, 256, 256, 8, 58)
    assert m.activation == "Swiglu" and m.gated and not m.bias
    r = m.routing
    assert (r.method, r.n_group, r.topk_group, r.routed_scaling_factor, r.use_routing_bias, r.scoring_func,
            r.renormalize) == ("deepseek_v3", 8, 4, 2.5, True, "sigmoid", True)
    p8 = plan_of("deepseek-v3", 8, 8)
    (m8,) = p8.moe
    assert (m8.intermediate, m8.experts, m8.global_experts) == (2048, 32, 256)  # 256/8 experts, full I
    # shared experts stay TP-sharded under EP
    assert gemms(p8)["shared_expert.gate_up_proj"] == (512, 7168, 58, "column", False)

def test_mla_without_q_lora_deepseek_v2_lite_tp2():
    p = plan_of("deepseek-v2-lite", 2)
    g = gemms(p)
    assert g["mla.kv_a_proj_with_mqa"] == (576, 2048, 27, "replicated", False)  # 512 + 64, replicated
    assert g["mla.q_proj"] == (1536, 2048, 27, "column", False)  # 16/2 heads * 192
    assert g["mla.kv_b_proj"] == (2048, 512, 27, "column", False)  # 8 * (128 + 128)
    assert g["o_proj"] == (2048, 1024, 27, "row", False)  # K = 8*128
    assert g["gate_up_proj"] == (10944, 2048, 1, "column", False)  # 2*10944/2, 1 dense layer
    assert g["shared_expert.gate_up_proj"] == (2816, 2048, 26, "column", False)  # 2*(1408*2)/2
    assert "mla.fused_qkv_a_proj" not in g
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k, m.layers) == (704, 64, 6, 26)  # 1408/2
    assert (m.routing.method, m.routing.renormalize) == ("topk", False)  # softmax, norm_topk_prob False

def test_gpt_oss_120b_tp8():
    p = plan_of("gpt-oss-120b", 8)
    assert gemms(p) == {
        "qkv_proj": (640, 2880, 36, "column", True),  # (64/8 + 2*1)*64, with bias
        "o_proj": (2880, 512, 36, "row", True),  # 64*64/8, bias on rank 0
        "router": (128, 2880, 36, "replicated", True),  # router has a bias
        "lm_head": (25136, 2880, 1, "vocab", False),  # 201088/8
    }
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k, m.activation, m.bias) == (360, 128, 4, "SwigluBias", True)
    assert m.routing.method == "renormalize"

def test_qwen3_next_hybrid_tp8():
    p = plan_of("qwen3-next-80b-a3b", 8)
    assert gemms(p) == {
        "qkv_proj": (1536, 2048, 12, "column", False),  # gated: 2*16/8*256 + 2*1*256; 48/4 full-attn layers
        "gdn.in_proj_qkvz": (1536, 2048, 36, "column", False),  # (2*16*128 + 2*32*128)/8, 36 GDN layers
        "gdn.in_proj_ba": (8, 2048, 36, "column", False),  # 2*32/8
        "gdn.out_proj": (2048, 512, 36, "row", False),  # 32*128/8
        "o_proj": (2048, 512, 12, "row", False),  # 16*256/8
        "router": (512, 2048, 48, "replicated", False),
        "shared_expert.gate_up_proj": (128, 2048, 48, "column", False),  # 2*512/8
        "shared_expert.down_proj": (2048, 64, 48, "row", False),
        "shared_expert_gate": (1, 2048, 48, "replicated", False),
        "lm_head": (18992, 2048, 1, "vocab", False),  # 151936/8
    }
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k) == (64, 512, 10)  # 512/8

def test_nemotron_h_hybrid_tp8():
    p = plan_of("nemotron-h-56b", 8)
    g = gemms(p)
    # 118 layers: 54 Mamba2 (M), 54 MLP (-), 10 attention (*)
    assert g["mamba.in_proj"] == (4640, 8192, 54, "column", False)  # (2*16384 + 2*8*256 + 256)/8
    assert g["mamba.out_proj"] == (8192, 2048, 54, "row", False)  # 16384/8
    assert g["up_proj"] == (4096, 8192, 54, "column", False)  # relu2, non-gated: 32768/8
    assert g["down_proj"] == (8192, 4096, 54, "row", False)
    assert g["qkv_proj"] == (1280, 8192, 10, "column", False)  # (64/8 + 2*8/8)*128
    n = plan_of("nemotron-3-nano-30b-a3b", 8)
    (m,) = n.moe
    assert (m.activation, m.gated, m.intermediate, m.layers) == ("Relu2", False, 232, 23)  # 1856/8
    assert gemms(n)["mamba.in_proj"] == (1288, 2688, 23, "column", False)  # (8192 + 2*8*128 + 64)/8

def test_gemma4_k_eq_v_global_layers_keep_the_v_slot():
    # gemma-4-26b-a4b: 16 q heads; sliding: 8 KV heads of 256; global (K=V, no v_proj): 2 KV heads
    # of global_head_dim 512. vLLM builds a plain QKVParallelLinear and loads k_proj into both K
    # and V (vllm/model_executor/models/gemma4.py: Gemma4ForCausalLM.load_weights._weight_iterator).
    for tp, full, sliding in (
        (1, 16 * 512 + 2 * 2 * 512, (16 + 2 * 8) * 256),  # 10240, 8192
        (2, 8 * 512 + 2 * 1 * 512, (8 + 2 * 4) * 256),  # 5120, 4096
        (4, 4 * 512 + 2 * 1 * 512, (4 + 2 * 2) * 256),  # 3072 (TP > 2 global KV heads: Hkv_r = 1, replicated), 2048
    ):
        g = gemms(plan_of("gemma-4-26b-a4b", tp))
        assert g["qkv_proj[full_attention]"] == (full, 2816, 5, "column", False)
        assert g["qkv_proj[sliding_attention]"] == (sliding, 2816, 25, "column", False)
        assert g["o_proj[full_attention]"] == (2816, 16 * 512 // tp, 5, "row", False)
        assert g["o_proj[sliding_attention]"] == (2816, 16 * 256 // tp, 25, "row", False)

def test_fused_on_disk_layouts_equal_split_ones():
    # Phi-3 stores qkv_proj / gate_up_proj fused: per-rank shapes equal the split rule
    p = plan_of("phi-3-mini-4k-instruct", 4)
    g = gemms(p)
    assert g["qkv_proj"] == (2304, 3072, 32, "column", False)  # (32/4 + 2*32/4)*96
    assert g["gate_up_proj"] == (4096, 3072, 32, "column", False)  # 2*8192/4
    assert g["down_proj"] == (3072, 2048, 32, "row", False)

def test_non_gated_starcoder2():
    g = gemms(plan_of("starcoder2-7b", 4))
    assert g["up_proj"] == (4608, 4608, 32, "column", True)  # c_fc 18432/4, bias
    assert g["down_proj"] == (4608, 4608, 32, "row", True)
    assert g["qkv_proj"] == (1408, 4608, 32, "column", True)  # (36/4 + 2*4/4)*128


# ------------------------------------------------------------------------------------------------
# Held-out architectures (not in ../shared/configs): small but realistic configs written here.

HELD_OUT = {
    "gpt2": ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_head": 12,
              "n_layer": 2, "vocab_size": 50257}, 4, {
        "qkv_proj": (576, 768, 2, "column", True),  # c_attn Conv1D, MHA: 3*768/4
        "o_proj": (768, 192, 2, "row", True),  # c_proj: K = 768/4
        "up_proj": (768, 768, 2, "column", True),  # c_fc: 4*768/4
        "down_proj": (768, 768, 2, "row", True),  # c_proj: K = 3072/4
        "lm_head": (12576, 768, 1, "vocab", False),  # round_up(50257, 64) = 50304; /4
    }),
    "falcon-7b": ({"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 4544,
                   "num_attention_heads": 71, "num_hidden_layers": 2, "multi_query": True,
                   "new_decoder_architecture": False, "parallel_attn": True, "bias": False,
                   "vocab_size": 65024}, 1, {
        "qkv_proj": (4672, 4544, 2, "column", False),  # multi_query: (71 + 2*1)*64
        "o_proj": (4544, 4544, 2, "row", False),
        "up_proj": (18176, 4544, 2, "column", False),  # 4H
        "down_proj": (4544, 18176, 2, "row", False),
        "lm_head": (65024, 4544, 1, "vocab", False),
    }),
    "falcon-40b": ({"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 8192,
                    "num_attention_heads": 128, "num_kv_heads": 8, "num_hidden_layers": 2,
                    "new_decoder_architecture": True, "bias": False, "vocab_size": 65024}, 16, {
        "qkv_proj": (640, 8192, 2, "column", False),  # 128/16*64 + 2*1*64 (tp 16 > 8 kv heads: replicated)
        "o_proj": (8192, 512, 2, "row", False),  # 128*64/16
        "up_proj": (2048, 8192, 2, "column", False),  # 4*8192/16
        "down_proj": (8192, 2048, 2, "row", False),
        "lm_head": (4064, 8192, 1, "vocab", False),  # 65024/16
    }),
    "gpt-neox": ({"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 2560,
                  "num_attention_heads": 32, "num_hidden_layers": 2, "intermediate_size": 10240,
                  "vocab_size": 50304}, 4, {
        "qkv_proj": (1920, 2560, 2, "column", True),  # query_key_value fused per head: 3*2560/4
        "o_proj": (2560, 640, 2, "row", True),
        "up_proj": (2560, 2560, 2, "column", True),  # dense_h_to_4h 10240/4
        "down_proj": (2560, 2560, 2, "row", True),
        "lm_head": (12576, 2560, 1, "vocab", False),  # 50304/4
    }),
    "gemma2": ({"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_size": 3584,
                "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                "intermediate_size": 14336, "num_hidden_layers": 2, "vocab_size": 256000,
                "sliding_window": 4096}, 8, {
        "qkv_proj": (1024, 3584, 2, "column", False),  # (16/8 + 2*8/8)*256
        "o_proj": (3584, 512, 2, "row", False),  # Hq*d = 4096 != H: 4096/8
        "gate_up_proj": (3584, 3584, 2, "column", False),  # 2*14336/8
        "down_proj": (3584, 1792, 2, "row", False),
        "lm_head": (32000, 3584, 1, "vocab", False),  # tied, still run: 256000/8
    }),
    "phi-2": ({"model_type": "phi", "architectures": ["PhiForCausalLM"], "hidden_size": 2560,
               "num_attention_heads": 32, "intermediate_size": 10240, "num_hidden_layers": 2,
               "vocab_size": 51200}, 2, {
        "qkv_proj": (3840, 2560, 2, "column", True),  # 3*2560/2
        "o_proj": (2560, 1280, 2, "row", True),  # `dense`
        "up_proj": (5120, 2560, 2, "column", True),  # fc1 10240/2
        "down_proj": (2560, 5120, 2, "row", True),  # fc2
        "lm_head": (25600, 2560, 1, "vocab", True),  # phi's lm_head has a bias; 51200/2
    }),
    "gpt-bigcode": ({"model_type": "gpt_bigcode", "architectures": ["GPTBigCodeForCausalLM"], "n_embd": 6144,
                     "n_head": 48, "n_layer": 2, "n_inner": 24576, "multi_query": True,
                     "vocab_size": 49152}, 4, {
        "qkv_proj": (1792, 6144, 2, "column", True),  # 48/4*128 + 2*1*128 (one kv head, replicated)
        "o_proj": (6144, 1536, 2, "row", True),
        "up_proj": (6144, 6144, 2, "column", True),  # 24576/4
        "down_proj": (6144, 6144, 2, "row", True),
        "lm_head": (12288, 6144, 1, "vocab", False),
    }),
    "mamba2": ({"model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "hidden_size": 2560,
                "num_heads": 80, "head_dim": 64, "n_groups": 1, "state_size": 128, "expand": 2,
                "num_hidden_layers": 2, "vocab_size": 50288}, 4, {
        # I = 80*64 = 5120; n_groups = 1 replicated per rank: 2*5120/4 + 2*128 + 80/4 = 2836
        "mamba.in_proj": (2836, 2560, 2, "column", False),
        "mamba.out_proj": (2560, 1280, 2, "row", False),  # 5120/4
        "lm_head": (12576, 2560, 1, "vocab", False),  # round_up(50288, 64) = 50304; /4
    }),
    "falcon-h1": ({"model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"], "hidden_size": 2048,
                   "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
                   "intermediate_size": 8192, "num_hidden_layers": 2, "mamba_n_heads": 64, "mamba_d_head": 64,
                   "mamba_n_groups": 1, "mamba_d_ssm": 4096, "mamba_d_state": 256, "mamba_expand": 2,
                   "vocab_size": 65537}, 4, {
        "qkv_proj": (512, 2048, 2, "column", False),  # 8/4*128 + 2*1*128 (tp 4 > 2 kv heads)
        "mamba.in_proj": (2576, 2048, 2, "column", False),  # 2*4096/4 + 2*256 + 64/4
        "mamba.out_proj": (2048, 1024, 2, "row", False),  # 4096/4
        "o_proj": (2048, 256, 2, "row", False),
        "gate_up_proj": (4096, 2048, 2, "column", False),  # 2*8192/4
        "down_proj": (2048, 2048, 2, "row", False),
        "lm_head": (16400, 2048, 1, "vocab", False),  # round_up(65537, 64) = 65600; /4
    }),
    "qwen2-vl": ({"model_type": "qwen2_vl", "architectures": ["Qwen2VLForConditionalGeneration"],
                  "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                  "intermediate_size": 18944, "num_hidden_layers": 2, "vocab_size": 152064,
                  "vision_config": {"depth": 2, "embed_dim": 1280, "hidden_size": 3584, "num_heads": 16}}, 4, {
        "qkv_proj": (1152, 3584, 2, "column", True),  # 28/4*128 + 2*(4/4)*128, qkv bias
        "o_proj": (3584, 896, 2, "row", False),
        "gate_up_proj": (9472, 3584, 2, "column", False),  # 2*18944/4
        "down_proj": (3584, 4736, 2, "row", False),
        "lm_head": (38016, 3584, 1, "vocab", False),  # 152064/4
    }),
    "llava": ({"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
               "text_config": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                               "num_key_value_heads": 32, "intermediate_size": 11008, "num_hidden_layers": 2,
                               "vocab_size": 32064},
               "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "num_hidden_layers": 2,
                                 "intermediate_size": 4096, "num_attention_heads": 16, "image_size": 336,
                                 "patch_size": 14}}, 2, {
        "qkv_proj": (6144, 4096, 2, "column", False),  # 3*4096/2
        "o_proj": (4096, 2048, 2, "row", False),
        "gate_up_proj": (11008, 4096, 2, "column", False),  # 2*11008/2
        "down_proj": (4096, 5504, 2, "row", False),
        "lm_head": (16032, 4096, 1, "vocab", False),  # 32064/2
    }),
}

@pytest.mark.parametrize("arch", sorted(HELD_OUT))
def test_held_out_architectures(tmp_path, arch):
    raw, tp, expected = HELD_OUT[arch]
    p = plan_raw(tmp_path, raw, tp)
    assert p.complete, p.unsupported
    assert gemms(p) == expected
    # language model only: no vision/audio tower module anywhere
    assert not any(t in m for e in p.gemms for m in e.modules for t in ("vision", "visual", "projector"))

def test_qwen2_moe_shared_expert_gate_and_olmoe(tmp_path):
    raw = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 2048,
           "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
           "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
           "num_experts_per_tok": 4, "num_hidden_layers": 4, "decoder_sparse_step": 2, "mlp_only_layers": [],
           "norm_topk_prob": False, "vocab_size": 151936}
    p = plan_raw(tmp_path, raw, 4)
    g = gemms(p)
    # decoder_sparse_step 2: layers 1 and 3 are MoE ((i+1) % 2 == 0), layers 0 and 2 dense
    assert g["gate_up_proj"] == (2816, 2048, 2, "column", False)  # 2*5632/4
    assert g["shared_expert.gate_up_proj"] == (2816, 2048, 2, "column", False)  # 2*5632/4
    assert g["shared_expert.down_proj"] == (2048, 1408, 2, "row", False)
    assert g["shared_expert_gate"] == (1, 2048, 2, "replicated", False)  # H -> 1
    assert g["router"] == (60, 2048, 2, "replicated", False)
    assert g["qkv_proj"] == (1536, 2048, 4, "column", True)  # 3*16/4*128, qkv bias
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.top_k, m.layers, m.routing.method) == (352, 60, 4, 2, "topk")  # 1408/4
    olmoe = {"model_type": "olmoe", "architectures": ["OlmoeForCausalLM"], "hidden_size": 2048,
             "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 1024, "num_experts": 64,
             "num_experts_per_tok": 8, "num_hidden_layers": 2, "vocab_size": 50304, "norm_topk_prob": False}
    (m,) = plan_raw(tmp_path, olmoe, 2, 4).moe
    assert (m.intermediate, m.experts, m.global_experts) == (1024, 16, 64)  # EP 4: 64/4 experts, full I

def test_granite_moe_hybrid_shared_mlp_and_mamba(tmp_path):
    raw = {"model_type": "granitemoehybrid", "architectures": ["GraniteMoeHybridForCausalLM"], "hidden_size": 1536,
           "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 512, "num_local_experts": 62,
           "num_experts_per_tok": 6, "shared_intermediate_size": 1024, "num_hidden_layers": 4,
           "layer_types": ["mamba", "mamba", "attention", "mamba"], "mamba_n_heads": 48, "mamba_d_head": 64,
           "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_expand": 2, "vocab_size": 100352}
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported
    g = gemms(p)
    # shared_mlp.input_linear is a fused [gate | up] of 2*1024 -> MergedColumnParallel: 2*1024/2
    assert g["shared_expert.gate_up_proj"] == (1024, 1536, 4, "column", False)
    assert g["shared_expert.down_proj"] == (1536, 512, 4, "row", False)  # output_linear K = 1024/2
    # Mamba2 I = 48*64 = 3072, n_groups = 1: 2*3072/2 + 2*128 + 48/2 = 3352
    assert g["mamba.in_proj"] == (3352, 1536, 3, "column", False)
    assert g["qkv_proj"] == (1280, 1536, 1, "column", False)  # 12/2*128 + 2*(4/2)*128
    (m,) = p.moe
    assert (m.intermediate, m.experts, m.layers) == (256, 62, 4)  # 512/2

def test_mllama_cross_attention_is_not_self_attention(tmp_path):
    raw = {"model_type": "mllama", "architectures": ["MllamaForConditionalGeneration"],
           "text_config": {"model_type": "mllama_text_model", "hidden_size": 4096, "num_attention_heads": 32,
                           "num_key_value_heads": 8, "intermediate_size": 14336, "num_hidden_layers": 5,
                           "cross_attention_layers": [3], "vocab_size": 128256},
           "vision_config": {"model_type": "mllama_vision_model"}}
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported
    g = gemms(p)
    assert g["qkv_proj"] == (3072, 4096, 4, "column", False)  # 4 self-attn layers: 32/2*128 + 2*(8/2)*128
    assert g["cross_attn.q_proj"] == (2048, 4096, 1, "column", False)  # q only: 32/2*128
    assert g["cross_attn.kv_proj"] == (1024, 4096, 1, "column", False)  # on vision tokens: 2*(8/2)*128
    assert g["cross_attn.o_proj"] == (4096, 2048, 1, "row", False)
    assert g["gate_up_proj"] == (14336, 4096, 5, "column", False)  # every layer has the MLP: 2*14336/2

def test_jamba_mamba1_mixer_and_unrenormalized_routing_tp2(tmp_path):
    raw = {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "num_experts": 16,
           "num_experts_per_tok": 2, "num_hidden_layers": 8, "attn_layer_period": 8, "attn_layer_offset": 4,
           "expert_layer_period": 2, "expert_layer_offset": 1, "mamba_d_state": 16, "mamba_d_conv": 4,
           "mamba_expand": 2, "mamba_dt_rank": 256, "vocab_size": 65536, "use_mamba_kernels": False}
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported  # nothing for non-GEMM state such as A_log
    g = gemms(p)
    # Mamba-1 (vLLM MambaMixer), I = 2*4096 = 8192, 7 mixer layers (attention at layer 4):
    assert g["mamba.in_proj"] == (8192, 4096, 7, "column", False)  # merged [x | z]: 2*8192/2
    assert g["mamba.x_proj"] == (288, 4096, 7, "row", False)  # dt_rank + 2*d_state = 256 + 32, K = 8192/2
    assert g["mamba.dt_proj"] == (4096, 256, 7, "column", True)  # 8192/2, K = dt_rank
    assert g["mamba.out_proj"] == (4096, 4096, 7, "row", False)  # K = 8192/2
    assert g["qkv_proj"][2] == 1 and g["gate_up_proj"][2] == 4  # 1 attention layer; 4 dense (even) layers
    (m,) = p.moe
    assert m.layers == 4  # expert_layer_period 2, offset 1: layers 1, 3, 5, 7
    # vllm/model_executor/models/jamba.py: JambaMoE builds its experts with renormalize=False
    assert (m.routing.method, m.routing.renormalize, m.intermediate) == ("topk", False, 7168)  # 14336/2
    with pytest.raises(UsageError, match="Mamba intermediate size"):
        plan_raw(tmp_path, {**raw, "hidden_size": 4100, "num_attention_heads": 41, "num_key_value_heads": 41}, 3)


def test_ernie_moe_statics_is_not_a_gemm_and_marks_routing_bias(tmp_path):
    raw = {"model_type": "ernie4_5_moe", "architectures": ["Ernie4_5_MoeForCausalLM"], "hidden_size": 2560,
           "num_attention_heads": 20, "num_key_value_heads": 4, "intermediate_size": 12288,
           "moe_intermediate_size": 1536, "moe_num_experts": 64, "moe_k": 6, "moe_num_shared_experts": 2,
           "moe_layer_start_index": 1, "moe_layer_interval": 1, "num_hidden_layers": 3, "vocab_size": 103424}
    p = plan_raw(tmp_path, raw, 2)
    assert p.complete, p.unsupported  # gate.moe_statics.e_score_correction_bias is routing state
    (m,) = p.moe
    assert m.routing.use_routing_bias and (m.intermediate, m.layers) == (768, 2)  # 1536/2; layers 1, 2
    assert gemms(p)["shared_expert.gate_up_proj"] == (3072, 2560, 2, "column", False)  # 2*(1536*2)/2


def test_emit_takes_the_kind_from_the_role_table_and_splits_by_it():
    ctx = Context(cfg=None, layout=Layout(tp=4), hidden=4096, num_heads=32)
    out = LayerPlan()
    roles.emit(ctx, out, "o_proj", ["m.o_proj"], (4096, 4096, True), what="o")
    roles.emit(ctx, out, "router", ["m.gate"], (64, 4096, False))
    roles.emit(ctx, out, "lm_head", ["lm_head"], (50257, 4096, False))
    roles.emit(ctx, out, "qkv_proj", ["m.q", "m.k", "m.v"], (6144, 4096, False), per_rank=(1536, 4096))
    assert [(i.name, i.n, i.k, i.parallel, i.bias) for i in out.items] == [
        ("o_proj", 4096, 1024, "row", True),  # K = 4096/4
        ("router", 64, 4096, "replicated", False),  # nothing split
        ("lm_head", 12576, 4096, "vocab", False),  # round_up(50257, 64) = 50304; /4
        ("qkv_proj", 1536, 4096, "column", False),  # a special rule's per-rank size, kept as given
    ]
    with pytest.raises(UsageError, match="o input features=4095"):
        roles.emit(ctx, out, "o_proj", ["m.o_proj"], (4096, 4095, False), what="o")
    with pytest.raises(KeyError):
        roles.emit(ctx, out, "no_such_role", ["m.x"], (1, 1, False))


def test_every_role_the_classifiers_name_has_a_linear_kind():
    dense = {"qkv_proj", "o_proj", "gate_up_proj", "up_proj", "down_proj", "router", "shared_expert_gate", "lm_head"}
    assert dense | {"shared_expert." + r for r in ("gate_up_proj", "up_proj", "down_proj")} <= set(sharding.ROLE_KIND)
    assert set(sharding.ROLE_KIND.values()) <= set(sharding.SPLIT)


def test_shared_experts_replicated_under_sequence_parallel_moe_deepseek_v3():
    # TP=2 EP=8 -> DP=4: vLLM's use_sequence_parallel_moe; DeepseekV2MLP(disable_tp=True) on ceil(M/2)
    g = {e.name: e for e in plan_of("deepseek-v3", 2, 8).gemms}
    gu, dn = g["shared_expert.gate_up_proj"], g["shared_expert.down_proj"]
    assert (gu.n, gu.k, gu.parallel, gu.m_divisor) == (4096, 7168, "replicated", 2)  # 2*2048, not /2
    assert (dn.n, dn.k, dn.parallel, dn.m_divisor) == (7168, 2048, "replicated", 2)  # K = 2048 full
    assert g["o_proj"].m_divisor == 1 and g["o_proj"].k == 8192  # attention still TP=2: 64 heads*128
    # the router runs after the chunk too (DeepseekV2MoE.forward / Qwen3NextSparseMoeBlock.forward)
    assert (g["router"].n, g["router"].parallel, g["router"].m_divisor) == (256, "replicated", 2)
    assert {e.name: e for e in plan_of("deepseek-v3", 8, 8).gemms}["router"].m_divisor == 1


def test_shared_experts_without_sequence_parallel_moe_deepseek_v3():
    # TP=8 EP=8 -> DP=1: no sequence-parallel MoE, split by TP as before
    g = {e.name: e for e in plan_of("deepseek-v3", 8, 8).gemms}
    assert (g["shared_expert.gate_up_proj"].n, g["shared_expert.gate_up_proj"].parallel,
            g["shared_expert.gate_up_proj"].m_divisor) == (512, "column", 1)  # 2*2048/8
    assert (g["shared_expert.down_proj"].k, g["shared_expert.down_proj"].parallel) == (256, "row")  # 2048/8
    # TP=1 EP=8: full width anyway, and no sequence parallelism (tp == 1)
    g = {e.name: e for e in plan_of("deepseek-v3", 1, 8).gemms}
    assert (g["shared_expert.gate_up_proj"].n, g["shared_expert.gate_up_proj"].parallel,
            g["shared_expert.gate_up_proj"].m_divisor) == (4096, "column", 1)
    assert (g["shared_expert.down_proj"].n, g["shared_expert.down_proj"].k) == (7168, 2048)
