"""The config.json keys a plan depends on, per architecture family.

A plan's shapes come from the model transformers builds on meta, and transformers fills every key
config.json leaves out with its config class's default (LlamaConfig: 32 heads, num_key_value_heads
= num_attention_heads, 11008 MLP). vLLM reads the same classes, so a missing key does not fail
anywhere: a misspelled `num_key_value_heads` silently plans (and would serve) full multi-head
attention. The keys below are the ones that shape a plan; `plan/config_checks.py` refuses a plan
whose config lacks one of them while the built config holds a value for it.

Each entry is a key, or a tuple of alternative keys of which config.json must give one (an
attribute_map alias such as GPT-2's `n_embd` for `hidden_size` counts as the key itself). The sizes
and counts the planner reads itself through `vllm_rules.config.config_value` are checked as well,
whatever the family (`recorded_reads`).

Not listed, on purpose:
  - head_dim where transformers and vLLM derive it as hidden_size // num_attention_heads when it is
    absent; where it is listed, a missing head_dim is refused only if the class value differs from
    that quotient (`DERIVED_WHEN_ABSENT`).
  - keys the built config holds no value for when config.json lacks them: nothing was defaulted
    (the model derives them, as vLLM's model class does).
  - layer-choice keys whose default means "no exception layers", which vLLM assumes too
    (`NEUTRAL_DEFAULTS`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: One key, or alternatives of which one must be given.
Key = str | tuple[str, ...]

#: Every decoder: model width, depth, attention heads, vocabulary (lm_head N).
DECODER: tuple[Key, ...] = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
#: Grouped-query attention: the KV heads set the fused QKV width.
GQA: tuple[Key, ...] = ("num_key_value_heads",)
#: The head size, where the config class has it as a field of its own (elsewhere the model derives
#: hidden_size // num_attention_heads, as vLLM does).
HEAD_DIM: tuple[Key, ...] = ("head_dim",)
#: The dense MLP (and, where a family has no separate key, the experts' intermediate size).
MLP: tuple[Key, ...] = ("intermediate_size",)
DENSE: tuple[Key, ...] = DECODER + GQA + MLP
#: DeepSeek multi-head latent attention (vllm/model_executor/models/deepseek_v2.py:
#: DeepseekV2MLAAttention): its GEMM widths come from the LoRA ranks and the split head sizes.
MLA: tuple[Key, ...] = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
#: DeepSeek-style routed experts: count, top-k, expert and shared-expert size, the dense first
#: layers (class defaults differ: DeepseekV3 3, Glm4Moe 1, DeepseekV2 0) and grouped routing.
DEEPSEEK_MOE: tuple[Key, ...] = (
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
    "first_k_dense_replace", "n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob")
#: Qwen-style routed experts (Qwen3MoeConfig's norm_topk_prob default False switches routing to
#: plain top-k).
QWEN_MOE: tuple[Key, ...] = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob")
#: Mixtral-style routed experts: intermediate_size is the experts' size.
MIXTRAL_MOE: tuple[Key, ...] = ("num_local_experts", "num_experts_per_tok")
#: Qwen3-Next / Qwen3.5 GatedDeltaNet layers and which layers they are.
GDN: tuple[Key, ...] = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                        "linear_value_head_dim", ("full_attention_interval", "layer_types"))
#: Any routed-expert model of a family not listed: expert count, top-k, expert size.
GENERIC_MOE: tuple[Key, ...] = (
    ("num_experts", "n_routed_experts", "num_local_experts"),
    ("num_experts_per_tok", "top_k_experts", "num_experts_per_token", "moe_topk"),
    "moe_intermediate_size")


@dataclass(frozen=True)
class FamilyKeys:
    """The keys one family's plan depends on: always, and in addition when it has routed experts."""

    always: tuple[Key, ...]
    moe: tuple[Key, ...] = ()
    class_defaults_only: bool = False
    """Refuse a missing key only where the config class declares a constant default for it. For a
    family not listed: a None default that transformers fills from other keys (multi-head KV
    heads = heads, GPT-2's 4*hidden MLP, GPTBigCode's multi_query) is a rule vLLM repeats, not a
    guess."""


#: model_type of the built language-model config -> the keys its plan depends on.
PLAN_KEYS: dict[str, FamilyKeys] = {
    # Llama-style decoders: GQA attention and a gated (or plain) MLP; Llama and Mistral derive a
    # missing head_dim as hidden_size // num_attention_heads.
    "llama": FamilyKeys(DENSE + HEAD_DIM), "mistral": FamilyKeys(DENSE + HEAD_DIM),
    "qwen2": FamilyKeys(DENSE), "cohere": FamilyKeys(DENSE), "starcoder2": FamilyKeys(DENSE),
    "phi3": FamilyKeys(DENSE),
    # Qwen3 and Gemma 3 read head_dim as a key of its own (defaults 128 and 256), not H/heads.
    "qwen3": FamilyKeys(DENSE + HEAD_DIM), "gemma3_text": FamilyKeys(DENSE + HEAD_DIM),
    # Mixtral / PhiMoE: every layer routes num_local_experts experts of intermediate_size.
    "mixtral": FamilyKeys(DENSE + HEAD_DIM, MIXTRAL_MOE), "phimoe": FamilyKeys(DENSE, MIXTRAL_MOE),
    # GPT-OSS: Mixtral-style experts; head_dim 64 is not hidden_size/heads (2880/64).
    "gpt_oss": FamilyKeys(DENSE + HEAD_DIM, MIXTRAL_MOE),
    # MiniMax-M2: Mixtral-style experts with sigmoid routing.
    "minimax_m2": FamilyKeys(DENSE + HEAD_DIM, MIXTRAL_MOE),
    # Qwen2/3-MoE: separate expert size; Qwen2-MoE adds a gated shared expert.
    "qwen2_moe": FamilyKeys(DENSE, QWEN_MOE + ("shared_expert_intermediate_size",)),
    "qwen3_moe": FamilyKeys(DENSE, QWEN_MOE),
    # Qwen3-Next / Qwen3.5: GatedDeltaNet + gated attention layers, experts with a shared expert
    # (Qwen3.5's text config has neither a dense intermediate_size nor norm_topk_prob).
    "qwen3_next": FamilyKeys(DENSE + HEAD_DIM + GDN, QWEN_MOE + ("shared_expert_intermediate_size",)),
    "qwen3_5_moe_text": FamilyKeys(DECODER + GQA + HEAD_DIM + GDN,
                                   ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                    "shared_expert_intermediate_size")),
    # DeepSeek-V2/V3 (and Kimi-K2, built as deepseek_v3): MLA instead of GQA, so neither
    # num_key_value_heads nor head_dim shapes a GEMM; intermediate_size is the dense layers' MLP.
    "deepseek_v2": FamilyKeys(DECODER + MLP + MLA, DEEPSEEK_MOE),
    "deepseek_v3": FamilyKeys(DECODER + MLP + MLA, DEEPSEEK_MOE),
    # DeepSeek-V3.2 / GLM-5: MLA plus the sparse-attention indexer (wq_b: heads x head size).
    "deepseek_v32": FamilyKeys(DECODER + MLP + MLA + ("index_n_heads", "index_head_dim"), DEEPSEEK_MOE),
    "glm_moe_dsa": FamilyKeys(DECODER + MLP + MLA + ("index_n_heads", "index_head_dim"), DEEPSEEK_MOE),
    # GLM-4.5: GQA attention with DeepSeek-style experts.
    "glm4_moe": FamilyKeys(DENSE, DEEPSEEK_MOE),
    # Llama 4: experts of intermediate_size, dense layers of intermediate_size_mlp, MoE every
    # interleave_moe_layer_step-th layer (Maverick 2, class default 1).
    "llama4_text": FamilyKeys(DENSE + HEAD_DIM + ("intermediate_size_mlp",),
                              MIXTRAL_MOE + ("interleave_moe_layer_step",)),
    # Gemma 4: experts beside the dense MLP. Its global K=V layers' global_head_dim and
    # num_global_key_value_heads become per-layer overrides in Gemma4TextConfig (no global value
    # on the built config to compare), so they are not checked here.
    "gemma4_text": FamilyKeys(DENSE + HEAD_DIM, ("num_experts", "top_k_experts", "moe_intermediate_size")),
    # Nemotron-H: hybrid_override_pattern places (and counts) the Mamba2 / attention / MLP / MoE
    # layers; Mamba2 in_proj width from heads, head size, state size and groups. The dense 56B has
    # no experts.
    "nemotron_h": FamilyKeys(
        ("hidden_size", "num_attention_heads", "vocab_size") + GQA + HEAD_DIM + MLP
        + (("hybrid_override_pattern", "layers_block_type"), "mamba_num_heads", "mamba_head_dim",
           "ssm_state_size", "n_groups"),
        ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
         "n_shared_experts", "n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob")),
}

#: A family not listed: the keys every decoder has, and the generic expert keys.
GENERIC = FamilyKeys(DENSE, GENERIC_MOE, class_defaults_only=True)

#: Keys transformers and vLLM derive from others when absent: missing is refused only when the
#: class's value differs from the derived one (then the class default, not the model, decides).
DERIVED_WHEN_ABSENT = {"head_dim": ("hidden_size", "num_attention_heads")}

#: Counts transformers derives from the length of a per-layer list config.json gives: absent, the
#: count is the file's own (transformers/models/nemotron_h/configuration_nemotron_h.py:
#: NemotronHConfig.num_hidden_layers is len(layers_block_type), which __post_init__ fills from
#: hybrid_override_pattern, one character per layer; vLLM reads the same attribute).
LENGTH_WHEN_ABSENT: dict[str, tuple[str, ...]] = {"num_hidden_layers": ("layers_block_type", "hybrid_override_pattern")}

#: Layer-choice keys whose default means "every layer alike" (vllm/model_executor/models/qwen2_moe.py:
#: Qwen2MoeDecoderLayer reads decoder_sparse_step with the same default; deepseek_v2.py:
#: DeepseekV2DecoderLayer, moe_layer_freq): a missing one holding this value is no guess.
NEUTRAL_DEFAULTS: dict[str, object] = {"decoder_sparse_step": 1, "moe_layer_freq": 1, "mlp_only_layers": []}


@dataclass(frozen=True)
class ReliedOnDefaults:
    """Class defaults a published config leaves to its config class, accepted (with a plan note)
    when config.json gives `given` exactly as that checkpoint does."""

    model_type: str
    given: tuple[tuple[str, int], ...]
    keys: tuple[str, ...]
    checkpoint: str


#: google/gemma-3-4b-it's text_config gives hidden_size 2560 and leaves the heads, head_dim and
#: vocabulary to Gemma3TextConfig, whose defaults (8, 4, 256, 262208) are that model's sizes; vLLM
#: reads the same class defaults.
RELIED_ON_DEFAULTS = (
    ReliedOnDefaults("gemma3_text", (("hidden_size", 2560), ("num_hidden_layers", 34)),
                     ("num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size"),
                     "google/gemma-3-4b-it"),
)


def family_keys(model_type: str) -> FamilyKeys:
    """The keys of `model_type`'s family, or GENERIC for a family not listed."""
    return PLAN_KEYS.get(model_type, GENERIC)


def plan_keys(family: FamilyKeys, has_experts: bool) -> tuple[Key, ...]:
    """The keys a plan of `family` depends on (its MoE keys only if the model has experts)."""
    return family.always + (family.moe if has_experts else ())


def alternatives(key: Key) -> tuple[str, ...]:
    """The names one entry may be given under."""
    return (key,) if isinstance(key, str) else key


__all__ = ["Key", "FamilyKeys", "PLAN_KEYS", "GENERIC", "DERIVED_WHEN_ABSENT", "LENGTH_WHEN_ABSENT", "NEUTRAL_DEFAULTS",
           "ReliedOnDefaults", "RELIED_ON_DEFAULTS", "family_keys", "plan_keys", "alternatives"]
