"""Config.json files for the fidelity check on architectures outside ../shared/configs: each built
from transformers' own config class with its family's published sizes where known (otherwise the
class defaults, which are the flagship checkpoint's), written as <out>/<name>/config.json. The
table of examples/vllm_fidelity/unseen.md is `benchmarks/vllm_fidelity.py --configs <out>`.

    ../venv-vllm/bin/python benchmarks/vllm_fidelity_unseen_configs.py --out /tmp/unseen
"""

from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(os.path.dirname(HERE), "..", "shared", "configs")

#: name -> (model_type, architecture, config-class arguments); None: a shared config changed (below).
CONFIGS = {
    "olmoe-1b-7b": ("olmoe", "OlmoeForCausalLM", dict(hidden_size=2048, intermediate_size=1024,
        num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16, num_experts=64, num_experts_per_tok=8,
        vocab_size=50304)),
    "qwen1.5-moe-a2.7b": ("qwen2_moe", "Qwen2MoeForCausalLM", dict(hidden_size=2048, intermediate_size=5632,
        num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16, moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632, num_experts=60, num_experts_per_tok=4, vocab_size=151936)),
    "qwen3-4b": ("qwen3", "Qwen3ForCausalLM", dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True, vocab_size=151936)),
    "qwen3-moe-sparse-step2": ("qwen3_moe", "Qwen3MoeForCausalLM", dict(hidden_size=2048, intermediate_size=6144,
        num_hidden_layers=12, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
        moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, decoder_sparse_step=2,
        mlp_only_layers=[3], vocab_size=151936)),
    "granite-3.1-8b": ("granite", "GraniteForCausalLM", dict(hidden_size=4096, intermediate_size=12800,
        num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=8, vocab_size=49155)),
    "granite-3.1-3b-a800m": ("granitemoe", "GraniteMoeForCausalLM", dict(hidden_size=1536, intermediate_size=512,
        num_hidden_layers=32, num_attention_heads=24, num_key_value_heads=8, num_local_experts=40,
        num_experts_per_tok=8, vocab_size=49155)),
    "granite-moe-shared": ("granitemoeshared", "GraniteMoeSharedForCausalLM", dict(hidden_size=1024,
        intermediate_size=512, shared_intermediate_size=1024, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=8, num_local_experts=32, num_experts_per_tok=8, vocab_size=49155)),
    "granite-4.0-h-tiny": ("granitemoehybrid", "GraniteMoeHybridForCausalLM", dict(hidden_size=1536,
        intermediate_size=512, shared_intermediate_size=1024, num_hidden_layers=8, num_attention_heads=12,
        num_key_value_heads=4, num_local_experts=64, num_experts_per_tok=6, mamba_n_heads=48, mamba_d_head=64,
        mamba_n_groups=1, mamba_d_state=128, mamba_expand=2, layer_types=['mamba', 'mamba', 'mamba', 'attention',
        'mamba', 'mamba', 'mamba', 'attention'], vocab_size=100352)),
    "dbrx": ("dbrx", "DbrxForCausalLM", dict(d_model=6144, n_heads=48, n_layers=40, max_seq_len=32768,
        vocab_size=100352, attn_config={'kv_n_heads': 8, 'clip_qkv': 8, 'rope_theta': 500000},
        ffn_config={'moe_num_experts': 16, 'moe_top_k': 4, 'ffn_hidden_size': 10752, 'ffn_act_fn': {'name':
        'silu'}})),
    "jamba-mini": ("jamba", "JambaForCausalLM", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
        num_attention_heads=32, num_key_value_heads=8, num_experts=16, num_experts_per_tok=2, vocab_size=65536)),
    "exaone4-32b": ("exaone4", "Exaone4ForCausalLM", dict(hidden_size=5120, intermediate_size=27392,
        num_hidden_layers=64, num_attention_heads=40, num_key_value_heads=8, head_dim=128, vocab_size=102400)),
    "falcon-7b": ("falcon", "FalconForCausalLM", dict(hidden_size=4544, num_attention_heads=71,
        num_hidden_layers=32, multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False,
        vocab_size=65024)),
    "falcon-40b": ("falcon", "FalconForCausalLM", dict(hidden_size=8192, num_attention_heads=128, num_kv_heads=8,
        num_hidden_layers=60, new_decoder_architecture=True, parallel_attn=True, bias=False, vocab_size=65024)),
    "starcoder-15b": ("gpt_bigcode", "GPTBigCodeForCausalLM", dict(n_embd=6144, n_head=48, n_layer=40,
        n_inner=24576, multi_query=True, vocab_size=49152)),
    "stablelm-2-1.6b": ("stablelm", "StableLmForCausalLM", dict(hidden_size=2048, intermediate_size=5632,
        num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32, use_qkv_bias=True,
        partial_rotary_factor=0.25, vocab_size=100352)),
    "command-r7b": ("cohere2", "Cohere2ForCausalLM", dict(hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, vocab_size=256000)),
    "olmo2-7b": ("olmo2", "Olmo2ForCausalLM", dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, vocab_size=100352)),
    "ernie-4.5-21b-a3b": ("ernie4_5_moe", "Ernie4_5_MoeForCausalLM", dict(hidden_size=2560, intermediate_size=12288,
        num_hidden_layers=28, num_attention_heads=20, num_key_value_heads=4, head_dim=128, moe_num_experts=64,
        moe_k=6, moe_intermediate_size=1536, moe_num_shared_experts=2, moe_layer_start_index=1, vocab_size=103424)),
    "glm-4.5-air": ("glm4_moe", "Glm4MoeForCausalLM", dict(hidden_size=4096, intermediate_size=10944,
        num_hidden_layers=46, num_attention_heads=96, num_key_value_heads=8, head_dim=128,
        moe_intermediate_size=1408, n_routed_experts=128, n_shared_experts=1, num_experts_per_tok=8,
        first_k_dense_replace=1, partial_rotary_factor=0.5, attention_bias=True, n_group=1, topk_group=1,
        use_qk_norm=False, vocab_size=151552)),
    "hunyuan-a13b": ("hunyuan_v1_moe", "HunYuanMoEV1ForCausalLM", dict(hidden_size=4096, intermediate_size=3072,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128, num_experts=64,
        moe_topk=8, num_shared_expert=1, use_qk_norm=True, vocab_size=128167)),
    "dots.llm1": ("dots1", "Dots1ForCausalLM", dict(hidden_size=4096, intermediate_size=10944, num_hidden_layers=62,
        num_attention_heads=32, num_key_value_heads=32, moe_intermediate_size=1408, n_routed_experts=128,
        n_shared_experts=2, num_experts_per_tok=6, first_k_dense_replace=1, vocab_size=152064)),
    "seed-oss-36b": ("seed_oss", "SeedOssForCausalLM", dict(hidden_size=5120, intermediate_size=27648,
        num_hidden_layers=64, num_attention_heads=80, num_key_value_heads=8, head_dim=128, attention_bias=True,
        attention_out_bias=False, vocab_size=155136)),
    "minimax-text-01": ("minimax", "MiniMaxForCausalLM", dict(hidden_size=6144, intermediate_size=9216,
        num_hidden_layers=8, num_attention_heads=64, num_key_value_heads=8, head_dim=128, num_local_experts=32,
        num_experts_per_tok=2, vocab_size=200064)),
    "phi-3.5-moe": ("phimoe", "PhimoeForCausalLM", dict(hidden_size=4096, intermediate_size=6400,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, num_local_experts=16,
        num_experts_per_tok=2, vocab_size=32064)),
    "afm-4.5b": ("arcee", "ArceeForCausalLM", dict(hidden_size=2560, intermediate_size=18432, num_hidden_layers=36,
        num_attention_heads=20, num_key_value_heads=4, vocab_size=128004)),
    "mistral-nemo-12b": ("mistral", "MistralForCausalLM", dict(hidden_size=5120, intermediate_size=14336,
        num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=131072)),
    "llama-headdim-256": ("llama", "LlamaForCausalLM", dict(hidden_size=3072, intermediate_size=8192,
        num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=128256,
        attention_bias=True, mlp_bias=True)),
    "llama4-scout-step2": ("llama4", "Llama4ForConditionalGeneration", None),
    "deepseek-v2-236b": ("deepseek_v2", "DeepseekV2ForCausalLM", dict(hidden_size=5120, intermediate_size=12288,
        moe_intermediate_size=1536, num_hidden_layers=60, num_attention_heads=128, num_key_value_heads=128,
        n_shared_experts=2, n_routed_experts=160, num_experts_per_tok=6, first_k_dense_replace=1, moe_layer_freq=1,
        n_group=8, topk_group=3, topk_method='group_limited_greedy', q_lora_rank=1536, kv_lora_rank=512,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, routed_scaling_factor=16.0, vocab_size=102400)),
    "deepseek-v2-noqlora-freq2": ("deepseek_v2", "DeepseekV2ForCausalLM", dict(hidden_size=2048,
        intermediate_size=10944, moe_intermediate_size=1408, num_hidden_layers=27, num_attention_heads=16,
        num_key_value_heads=16, n_shared_experts=2, n_routed_experts=64, num_experts_per_tok=6,
        first_k_dense_replace=1, moe_layer_freq=2, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128,
        qk_rope_head_dim=64, v_head_dim=128, vocab_size=102400)),
    "gemma2-9b": ("gemma2", "Gemma2ForCausalLM", dict(hidden_size=3584, intermediate_size=14336,
        num_hidden_layers=42, num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000)),
    "nemotron-minitron-8b": ("nemotron", "NemotronForCausalLM", dict(hidden_size=4096, intermediate_size=16384,
        num_hidden_layers=32, num_attention_heads=48, num_key_value_heads=8, head_dim=128, vocab_size=256000)),
    "glm-4-9b-0414": ("glm4", "Glm4ForCausalLM", dict(hidden_size=4096, intermediate_size=13696,
        num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=2, head_dim=128, attention_bias=True,
        vocab_size=151552)),
    "ernie-4.5-0.3b": ("ernie4_5", "Ernie4_5ForCausalLM", dict(hidden_size=1024, intermediate_size=3072,
        num_hidden_layers=18, num_attention_heads=16, num_key_value_heads=2, head_dim=128, vocab_size=103424)),
    "hunyuan-7b-dense": ("hunyuan_v1_dense", "HunYuanDenseV1ForCausalLM", dict(hidden_size=4096,
        intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        use_qk_norm=True, vocab_size=128167)),
    "bamba-9b": ("bamba", "BambaForCausalLM", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
        num_attention_heads=32, num_key_value_heads=8, attn_layer_indices=[3, 7], mamba_n_heads=128,
        mamba_d_head=64, mamba_n_groups=1, mamba_d_state=128, mamba_expand=2, vocab_size=128256)),
    "smollm3-3b": ("smollm3", "SmolLM3ForCausalLM", dict(hidden_size=2048, intermediate_size=11008,
        num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=4, vocab_size=128256)),
    "olmo3-7b": ("olmo3", "Olmo3ForCausalLM", dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, vocab_size=100278)),
    "apertus-8b": ("apertus", "ApertusForCausalLM", dict(hidden_size=4096, intermediate_size=21504,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, vocab_size=131072)),
    "flex-olmo": ("flex_olmo", "FlexOlmoForCausalLM", dict(hidden_size=4096, intermediate_size=11008,
        num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=32, num_experts=7, num_experts_per_tok=7,
        vocab_size=100352)),
    "glm-4.7-flash": ("glm4_moe_lite", "Glm4MoeLiteForCausalLM", dict()),
    "exaone-moe": ("exaone_moe", "ExaoneMoeForCausalLM", dict()),
    "lfm2-8b-a1b": ("lfm2_moe", "Lfm2MoeForCausalLM", dict()),
    "lfm2-1.2b": ("lfm2", "Lfm2ForCausalLM", dict()),
    "falcon-h1-7b": ("falcon_h1", "FalconH1ForCausalLM", dict()),
    "zamba2-2.7b": ("zamba2", "Zamba2ForCausalLM", dict()),
    "longcat-flash": ("longcat_flash", "LongcatFlashForCausalLM", dict()),
    "step3p5": ("step3p5", "Step3p5ForCausalLM", dict()),
    "afmoe": ("afmoe", "AfmoeForCausalLM", dict()),
    "olmo-hybrid": ("olmo_hybrid", "OlmoHybridForCausalLM", dict()),
    "ministral3-8b": ("ministral3", "Ministral3ForCausalLM", dict()),
    "mamba2-2.7b": ("mamba2", "Mamba2ForCausalLM", dict()),
    "kimi-linear-48b": ("kimi_linear", "KimiLinearForCausalLM", dict()),
    "cohere2-moe": ("cohere2_moe", "Cohere2MoeForCausalLM", dict()),
    "laguna": ("laguna", "LagunaForCausalLM", dict()),
    "mixtral-headdim": ("mixtral", "MixtralForCausalLM", dict(hidden_size=4096, intermediate_size=8192,
        num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=8, head_dim=64, num_local_experts=8,
        num_experts_per_tok=2)),
    "qwen2-moe-noshared": ("qwen2_moe", "Qwen2MoeForCausalLM", dict(hidden_size=3584, intermediate_size=18944,
        num_hidden_layers=8, num_attention_heads=28, num_key_value_heads=4, moe_intermediate_size=2560,
        shared_expert_intermediate_size=0, num_experts=64, num_experts_per_tok=8, vocab_size=151936)),
    "qwen3-next-small": ("qwen3_next", "Qwen3NextForCausalLM", dict(hidden_size=2048, intermediate_size=5120,
        num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=2, head_dim=256, linear_num_value_heads=32,
        linear_num_key_heads=16, moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts=64,
        num_experts_per_tok=10, full_attention_interval=4)),
}

#: Fields the published config.json holds and vLLM's class reads, which the transformers class
#: does not write (GLM-4.7-Flash's first_k_dense_replace, Trinity's routing fields).
EXTRA = {
    "glm-4.7-flash": {"first_k_dense_replace": 1},
    "afmoe": {"score_func": "sigmoid", "route_norm": True, "n_group": 1, "topk_group": 1},
    # LFM2-1.2B: 16 layers, attention at 2, 5, 8, 10, 12, 14, short convolutions elsewhere
    "lfm2-1.2b": {"hidden_size": 2048, "num_hidden_layers": 16, "block_dim": 2048, "conv_dim": 2048,
                  "block_ff_dim": 12288, "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0,
                  "block_auto_adjust_ff_dim": True, "block_norm_eps": 1e-5, "block_use_swiglu": True,
                  "full_attn_idxs": [2, 5, 8, 10, 12, 14],
                  "layer_types": ["full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)]},
}


def config_of(name: str) -> dict:
    model_type, arch, kwargs = CONFIGS[name]
    if kwargs is None:  # Llama 4 Scout with MoE every second layer, 12 layers, RoPE in every layer
        with open(os.path.join(SHARED, "llama-4-scout-17b-16e", "config.json"), encoding="utf-8") as f:
            raw = json.load(f)
        raw["text_config"].update(interleave_moe_layer_step=2, num_hidden_layers=12, no_rope_layers=[])
        return raw
    from transformers import CONFIG_MAPPING

    raw = CONFIG_MAPPING[model_type](**kwargs).to_dict()
    raw.update(EXTRA.get(name, {}))
    raw["architectures"] = [arch]
    return raw


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder to write <name>/config.json into, e.g. --out /tmp/unseen")
    args = p.parse_args(argv)
    for name in CONFIGS:
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        with open(os.path.join(args.out, name, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config_of(name), f, indent=1)
    print(f"{len(CONFIGS)} configs written under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
