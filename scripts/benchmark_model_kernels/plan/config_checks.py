"""Checks of a config.json around its meta build: its values before, the keys it leaves to
transformers' class defaults after.

Before the build (`check_values`): every size and count the plan can depend on is a positive
integer (not a bool, float, string or null) within a sane bound, and top-k fits the experts, so
`num_hidden_layers: 10000000` is refused at once instead of building ten million layers. What
transformers or vLLM read as a value of its own is accepted: null where it means "derive it" or
"the feature is off", a per-layer list where a model reads one (`Bound`).

After the build (`settle_defaults`): a key the plan depends on (`vllm_rules.required_keys`, or read
by the planner through `config_value`) that config.json lacks while the built config holds a value
for it came from the config class, not the model: refused, naming the key and the value transformers
would use, unless --allow_defaults (then the plan notes it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError, shown_value
from ..vllm_rules.required_keys import (
    DERIVED_WHEN_ABSENT,
    LENGTH_WHEN_ABSENT,
    NEUTRAL_DEFAULTS,
    RELIED_ON_DEFAULTS,
    Key,
    alternatives,
)

#: Sub-objects of a multimodal config.json that hold the language model's keys.
TEXT_SUBCONFIGS = ("text_config",)


class ConfigKeyError(UsageError):
    """A config.json key with a bad value (`config.json: <key>=<value>: <fix>`) or missing
    (`config.json: <key> missing (<fix>)`)."""

    def __init__(self, key: str, value: object, fix: str, *, missing: bool = False):
        super().__init__(key, value, fix)
        self.args = (f"config.json: {key} missing ({fix})" if missing else f"config.json: {key}={value}: {fix}",)


@dataclass(frozen=True)
class Bound:
    """The integers one config key may hold."""

    low: int
    high: int
    what: str
    """What the number counts, for the message."""
    nullable: bool = False
    """null is a value of its own here (transformers derives the key, or the feature is off)."""
    per_layer: bool = False
    """A list of one flag per decoder layer is a value of its own here (nonzero: the layer has the
    feature), each a whole number >= 0 or a boolean."""


_WIDTH, _MLP, _HEADS, _WINDOW = 1 << 20, 1 << 22, 1 << 14, 1 << 24


def _bounds(keys: str, bound: Bound) -> dict[str, Bound]:
    return dict.fromkeys(keys.split(), bound)


#: config.json key -> the integers it may hold. Bounds are far above any published model (the
#: largest: 1024 layers vs 126, 2^20 width vs 16384, 16384 experts vs 512) and keep a typo from
#: building a model nobody could plan.
BOUNDS: dict[str, Bound] = {
    **_bounds("hidden_size n_embd d_model", Bound(1, _WIDTH, "model width")),
    **_bounds("head_dim", Bound(1, _WIDTH, "head size", nullable=True)),
    **_bounds("qk_nope_head_dim qk_rope_head_dim v_head_dim global_head_dim linear_key_head_dim "
              "linear_value_head_dim mamba_head_dim ssm_state_size index_head_dim",
              Bound(1, _WIDTH, "head or rank size")),
    # null: no latent attention (vllm/transformers_utils/configs/deepseek_vl2.py: DeepseekVLV2TextConfig,
    # `kv_lora_rank: int | None`, DeepSeek-VL2-Tiny's multi-head layers; configs/kimi_linear.py:
    # KimiLinearConfig.is_mla)
    **_bounds("kv_lora_rank", Bound(1, _WIDTH, "KV LoRA rank", nullable=True)),
    **_bounds("q_lora_rank", Bound(1, _WIDTH, "q LoRA rank", nullable=True)),
    **_bounds("intermediate_size n_inner", Bound(1, _MLP, "MLP size", nullable=True)),
    **_bounds("moe_intermediate_size moe_shared_expert_intermediate_size intermediate_size_mlp",
              Bound(1, _MLP, "MLP size", nullable=True)),
    # 0: no shared expert (vllm/model_executor/models/qwen2_moe.py: Qwen2MoeSparseMoeBlock, qwen3_next.py)
    **_bounds("shared_expert_intermediate_size", Bound(0, _MLP, "shared-expert MLP size", nullable=True)),
    **_bounds("num_hidden_layers n_layer num_layers", Bound(1, 1024, "decoder layers")),
    **_bounds("num_attention_heads n_head num_heads", Bound(1, _HEADS, "attention heads")),
    **_bounds("num_key_value_heads", Bound(1, _HEADS, "KV heads", nullable=True)),
    **_bounds("linear_num_key_heads linear_num_value_heads mamba_num_heads index_n_heads", Bound(1, _HEADS, "heads")),
    # null: the global layers keep num_key_value_heads (transformers/models/gemma4/configuration_gemma4.py:
    # Gemma4TextConfig.__post_init__ sets no per-layer override; Gemma 4 E2B / E4B)
    **_bounds("num_global_key_value_heads", Bound(1, _HEADS, "KV heads of the global layers", nullable=True)),
    **_bounds("vocab_size", Bound(1, 1 << 24, "vocabulary size")),
    **_bounds("num_experts n_routed_experts num_local_experts", Bound(1, _HEADS, "routed experts", nullable=True)),
    **_bounds("num_experts_per_tok top_k_experts num_experts_per_token moe_topk",
              Bound(1, _HEADS, "experts per token", nullable=True)),
    **_bounds("n_shared_experts", Bound(0, 1024, "shared experts", nullable=True)),
    **_bounds("first_k_dense_replace", Bound(0, 1024, "dense first layers")),
    **_bounds("decoder_sparse_step interleave_moe_layer_step full_attention_interval",
              Bound(1, 1024, "layer interval")),
    # A list: one MoE flag per layer (vllm/model_executor/models/mimo_v2.py: MiMoV2DecoderLayer.is_moe_layer;
    # vllm/models/minimax_m3/nvidia/model.py: _is_moe_layer, `moe_layer_freq[layer_id] != 0`)
    **_bounds("moe_layer_freq", Bound(1, 1024, "layer interval", per_layer=True)),
    **_bounds("n_group topk_group", Bound(1, _HEADS, "expert groups", nullable=True)),
    **_bounds("n_groups", Bound(1, _HEADS, "Mamba2 groups")),
    # The attention plan's windows (vllm_rules.attention: layer_window, layer_chunk); 0 or null: none
    # (vllm/config/model.py: ModelConfig.__post_init__ disables a sliding_window of 0).
    **_bounds("sliding_window attention_chunk_size", Bound(0, _WINDOW, "tokens of the attention window",
                                                            nullable=True)),
    **_bounds("index_topk", Bound(1, _WINDOW, "tokens the sparse attention keeps")),
}
#: Keys holding the routed-expert count and the experts per token, in the planner's read order.
EXPERT_COUNT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
TOP_K_KEYS = ("num_experts_per_tok", "top_k_experts", "num_experts_per_token", "moe_topk")




def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    kinds = {float: "a fraction", str: "a string", list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _check_per_layer(key: str, value: list[Any], layers: object) -> None:
    """A per-layer flag list: every entry a flag, one entry for each decoder layer (vLLM indexes it
    by layer, so a shorter list builds nowhere)."""
    bad = next(((i, v) for i, v in enumerate(value) if not isinstance(v, int) or v < 0), None)
    if bad is not None:
        raise ConfigKeyError(f"{key}[{bad[0]}]", shown_value(bad[1]), "each entry of the per-layer list must be "
                             f"0 or 1 (1: layer {bad[0]} is MoE); fix config.json")
    if isinstance(layers, int) and not isinstance(layers, bool) and len(value) < layers:
        raise ConfigKeyError(key, shown_value(value), f"has {len(value)} entries for {layers} decoder layers "
                             "(num_hidden_layers); give one per layer; fix config.json")


def _check_one(key: str, value: object, bound: Bound, layers: object = None) -> None:
    if value is None and bound.nullable:
        return
    if isinstance(value, list) and bound.per_layer:
        _check_per_layer(key, value, layers)
        return
    wanted = "a positive integer" if bound.low >= 1 else "a whole number >= 0"
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            fix = f"must be {wanted} written without a fraction (e.g. {int(value)}); fix config.json"
        else:
            fix = f"must be {wanted} ({bound.what}), not {_kind(value)}; fix config.json"
        raise ConfigKeyError(key, shown_value(value), fix)
    if not bound.low <= value <= bound.high:
        fix = (f"must be at most {bound.high} ({bound.what}); fix config.json" if value > bound.high
               else f"must be {wanted} ({bound.what}); fix config.json")
        raise ConfigKeyError(key, shown_value(value), fix)


def _first_int(d: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, int] | None:
    return next(((k, d[k]) for k in keys if isinstance(d.get(k), int) and not isinstance(d.get(k), bool)), None)


def _check_top_k(d: dict[str, Any], prefix: str) -> None:
    experts, top_k = _first_int(d, EXPERT_COUNT_KEYS), _first_int(d, TOP_K_KEYS)
    if experts and top_k and top_k[1] > experts[1]:
        raise ConfigKeyError(prefix + top_k[0], top_k[1], f"exceeds the {experts[1]} routed experts "
                             f"({prefix}{experts[0]}); top-k must be between 1 and {experts[1]}")


def language_model_dicts(raw: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(key prefix, dict) of config.json's top level and of its language-model sub-object."""
    out: list[tuple[str, dict[str, Any]]] = [("", raw)]
    for sub in TEXT_SUBCONFIGS:
        if sub not in raw or raw[sub] is None:
            continue
        if not isinstance(raw[sub], dict):
            raise ConfigKeyError(sub, shown_value(raw[sub]), "must be an object holding the language model's keys; "
                                 "fix config.json")
        out.append((f"{sub}.", raw[sub]))
    return out


def _check_architectures(raw: dict[str, Any]) -> None:
    archs = raw.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise ConfigKeyError("architectures", shown_value(archs), 'must be a list of class names such as '
                             '["LlamaForCausalLM"]; fix config.json')


def check_values(raw: dict[str, Any]) -> None:
    """Refuse a size or count of the wrong type or out of range, a top-k above the experts, and
    an `architectures` that is not a list of class names."""
    _check_architectures(raw)
    for prefix, d in language_model_dicts(raw):
        for key, bound in BOUNDS.items():
            if key in d:
                _check_one(prefix + key, d[key], bound, d.get("num_hidden_layers"))
        _check_top_k(d, prefix)


# ------------------------------------------------------------------ defaulted keys
@dataclass(frozen=True)
class DefaultedKey:
    """A key config.json lacks and the built config holds: the value transformers would use."""

    key: str
    value: Any


def _given(raw: dict[str, Any]) -> dict[str, Any]:
    """The keys config.json sets at its top level or in its language-model sub-object. An explicit
    null counts as given: the file says "derive it" (`check_values` refuses null where it is not
    a value of its own)."""
    given: dict[str, Any] = {}
    for _, d in language_model_dicts(raw):
        given.update(d)
    return given


def _spellings(name: str, cfg: Any) -> set[str]:
    """`name` and its attribute_map aliases (GPT-2 `n_embd` for `hidden_size`, and back)."""
    amap: dict[str, str] = getattr(type(cfg), "attribute_map", None) or {}
    return {name} | {alias for alias, target in amap.items() if target == name} | (
        {amap[name]} if name in amap else set())


def _built_value(cfg: Any, name: str) -> Any:
    try:
        return getattr(cfg, name, None)
    except Exception:  # Gemma 4's per-layer attributes raise on a global read: no one value to name
        return None


def _derived_as_when_absent(name: str, value: Any, cfg: Any, given: dict[str, Any]) -> bool:
    """True when `value` is what transformers and vLLM use for an absent `name` anyway: derived
    from other keys (`given` holds config.json's), or the neutral "every layer alike" value."""
    if name in NEUTRAL_DEFAULTS and value == NEUTRAL_DEFAULTS[name]:
        return True
    lists = [given[k] for k in LENGTH_WHEN_ABSENT.get(name, ()) if isinstance(given.get(k), (list, str))]
    if lists and all(value == len(x) for x in lists):
        return True
    parts = DERIVED_WHEN_ABSENT.get(name)
    if not parts:
        return False
    num, den = (_built_value(cfg, p) for p in parts)
    return isinstance(num, int) and isinstance(den, int) and den > 0 and value == num // den


def declares_constant_default(cfg: Any, name: str) -> bool:
    """Whether `cfg`'s class gives `name` (or its attribute_map target) a fixed default, rather
    than None filled from other keys. A class that is not a dataclass (remote code) cannot say:
    True."""
    klass = type(cfg)
    if not dataclasses.is_dataclass(klass):
        return True
    amap: dict[str, str] = getattr(klass, "attribute_map", None) or {}
    by_name = {f.name: f for f in dataclasses.fields(klass)}
    f = by_name.get(name) or by_name.get(amap.get(name, ""))
    if f is None:
        return False
    has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    return has_default and f.default is not None


def defaulted_keys(raw: dict[str, Any], cfg: Any, keys: Iterable[Key],
                   class_defaults_only: bool = False) -> list[DefaultedKey]:
    """The `keys` config.json leaves to the built config `cfg`'s class (or derives differently);
    with `class_defaults_only`, only those the class gives a constant default."""
    given = _given(raw)
    out: list[DefaultedKey] = []
    for key in keys:
        names = alternatives(key)
        if any(s in given for n in names for s in _spellings(n, cfg)):
            continue
        held = next(((n, v) for n in names if (v := _built_value(cfg, n)) is not None), None)
        if held is None or _derived_as_when_absent(held[0], held[1], cfg, given):
            continue
        if class_defaults_only and not declares_constant_default(cfg, held[0]):
            continue
        if all(d.key != held[0] for d in out):
            out.append(DefaultedKey(*held))
    return out


def _relied_on(raw: dict[str, Any], cfg: Any) -> tuple[set[str], str]:
    """Keys a published config of this family leaves to the class (and whose checkpoint)."""
    given = _given(raw)
    for r in RELIED_ON_DEFAULTS:
        if getattr(cfg, "model_type", None) == r.model_type and all(given.get(k) == v for k, v in r.given):
            return set(r.keys), r.checkpoint
    return set(), ""


def _listing(defaulted: list[DefaultedKey]) -> tuple[str, str]:
    return ", ".join(d.key for d in defaulted), ", ".join(shown_value(d.value, 32) for d in defaulted)


def settle_defaults(raw: dict[str, Any], cfg: Any, keys: Iterable[Key], allow_defaults: bool,
                    class_defaults_only: bool = False) -> list[str]:
    """Plan notes for the `keys` config.json leaves to transformers' defaults, or a refusal.

    Keys a published checkpoint relies on (RELIED_ON_DEFAULTS) are noted; any other is refused
    unless `allow_defaults`, then noted as a warning."""
    defaulted = defaulted_keys(raw, cfg, keys, class_defaults_only)
    relied, checkpoint = _relied_on(raw, cfg)
    accepted = [d for d in defaulted if d.key in relied]
    refused = [d for d in defaulted if d.key not in relied]
    model_type = getattr(cfg, "model_type", "?")
    notes = []
    if accepted:
        names, values = _listing(accepted)
        notes.append(f"config.json leaves {names} to {type(cfg).__name__}'s defaults ({values}), as "
                     f"{checkpoint}'s published config does; vLLM reads the same defaults")
    if refused and not allow_defaults:
        names, values = _listing(refused)
        one = len(refused) == 1
        raise ConfigKeyError(names, None, f"transformers would default {'it' if one else 'them'} to {values} "
                             f"for {model_type}; add {'it' if one else 'them'}, or pass --allow_defaults",
                             missing=True)
    if refused:
        names, values = _listing(refused)
        notes.append(f"warning: config.json lacks {names}; planned with transformers' defaults for {model_type} "
                     f"({values}) under --allow_defaults: the shapes may not be the model's")
    return notes


__all__ = ["ConfigKeyError", "Bound", "BOUNDS", "EXPERT_COUNT_KEYS", "TOP_K_KEYS", "DefaultedKey",
           "language_model_dicts", "check_values", "declares_constant_default", "defaulted_keys", "settle_defaults"]
