"""config.json checks around the meta build: bad values refused before it, keys left to transformers'
class defaults refused after it (unless --allow_defaults), and every shared and bundled config
planning without --allow_defaults. Each bad config is one row: what is changed, and the field, value
and fix the one-line error must name."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
from plan_helpers import build

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.plan_schema import ModelInfo
from benchmark_model_kernels.plan import config_checks, config_source, planner
from benchmark_model_kernels.vllm_rules import required_keys
from benchmark_model_kernels.vllm_rules.layout import Layout
from support import ROOT, SHARED_CONFIGS, shared_config_dir

LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
         "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
         "num_key_value_heads": 2, "vocab_size": 1000}
QWEN3_MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256,
             "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1000,
             "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True, "hidden_act": "silu"}


class _Drop:
    """The key is removed, not set."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()


def write_config(tmp_path, raw: dict, name: str = "model") -> str:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(raw))
    return str(d)


def changed(base: dict, **kw) -> dict:
    """`base` with keys set (a value of DROP removes the key); `text_config__x` sets text_config.x."""
    raw = copy.deepcopy(base)
    for key, value in kw.items():
        target = raw
        if "__" in key:
            sub, key = key.split("__")
            target = raw.setdefault(sub, {})
        if value is DROP:
            target.pop(key, None)
        else:
            target[key] = value
    return raw


# ------------------------------------------------------------------ values before the build
BAD_VALUES = [
    # (config, field=value in the message, fix in the message)
    (changed(LLAMA, hidden_size=4096.0), "hidden_size=4096.0", "written without a fraction (e.g. 4096)"),
    (changed(LLAMA, hidden_size=255.5), "hidden_size=255.5", "positive integer (model width), not a fraction"),
    (changed(LLAMA, hidden_size="256"), 'hidden_size="256"', "not a string"),
    (changed(LLAMA, hidden_size=True), "hidden_size=true", "not a boolean"),
    (changed(LLAMA, hidden_size=None), "hidden_size=null", "not null"),
    (changed(LLAMA, hidden_size=1 << 21), "hidden_size=2097152", "at most 1048576"),
    (changed(LLAMA, num_hidden_layers=10_000_000), "num_hidden_layers=10000000", "at most 1024 (decoder layers)"),
    (changed(LLAMA, num_hidden_layers=0), "num_hidden_layers=0", "positive integer (decoder layers)"),
    (changed(LLAMA, num_attention_heads=0), "num_attention_heads=0", "positive integer (attention heads)"),
    (changed(LLAMA, num_attention_heads=-8), "num_attention_heads=-8", "positive integer"),
    (changed(LLAMA, num_key_value_heads=[2]), "num_key_value_heads=[2]", "not a list"),
    (changed(LLAMA, vocab_size={"n": 1}), 'vocab_size={"n": 1}', "not an object"),
    (changed(LLAMA, architectures="LlamaForCausalLM"), 'architectures="LlamaForCausalLM"', "list of class names"),
    (changed(QWEN3_MOE, num_experts_per_tok=9), "num_experts_per_tok=9", "exceeds the 8 routed experts (num_experts)"),
    (changed(QWEN3_MOE, num_experts_per_tok=0), "num_experts_per_tok=0", "positive integer (experts per token)"),
    (changed(QWEN3_MOE, num_experts=0), "num_experts=0", "positive integer (routed experts)"),
    (changed(LLAMA, text_config=[1]), "text_config=[1]", "must be an object"),
    (changed(LLAMA, text_config__num_hidden_layers=5000), "text_config.num_hidden_layers=5000", "at most 1024"),
]


@pytest.mark.parametrize("raw,field_value,fix", BAD_VALUES, ids=[r[1] for r in BAD_VALUES])
def test_bad_values_are_refused_before_the_build(tmp_path, raw, field_value, fix):
    with pytest.raises(UsageError) as e:
        planner.plan_model(write_config(tmp_path, raw))
    msg = str(e.value)
    assert msg.startswith(f"config.json: {field_value}: ") and fix in msg and "\n" not in msg


def test_null_is_accepted_where_it_means_derive_or_off():
    config_checks.check_values(changed(LLAMA, num_key_value_heads=None, head_dim=None, intermediate_size=None))
    config_checks.check_values({"model_type": "deepseek_v2", "q_lora_rank": None, "n_group": None})


def test_ten_million_layers_are_refused_at_once(tmp_path):
    import time

    start = time.monotonic()
    with pytest.raises(UsageError, match="at most 1024"):
        planner.plan_model(write_config(tmp_path, changed(LLAMA, num_hidden_layers=10_000_000)))
    assert time.monotonic() - start < 1.0  # no model was built


# ------------------------------------------------------------------ what transformers and vLLM accept
#: A small MiMo-V2-Flash: `moe_layer_freq` is one MoE flag per layer, as XiaomiMiMo/MiMo-V2-Flash
#: publishes it (vllm/model_executor/models/mimo_v2.py: MiMoV2DecoderLayer.is_moe_layer).
MIMO_V2 = {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], "hidden_size": 512,
           "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
           "v_head_dim": 64, "intermediate_size": 1024, "moe_intermediate_size": 128, "n_routed_experts": 16,
           "num_experts_per_tok": 4, "n_group": 1, "topk_group": 1, "sliding_window": 128, "vocab_size": 1000,
           "moe_layer_freq": [0, 1, 1, 1]}


def test_a_per_layer_moe_layer_freq_list_is_accepted_and_planned(tmp_path):
    plan = planner.plan_model(write_config(tmp_path, MIMO_V2))
    assert plan.complete and [(e.name, e.layers) for e in plan.moe] == [("experts", 3)]


@pytest.mark.parametrize("freq,field_value,fix", [
    ([0, 1, "yes", 1], 'moe_layer_freq[2]="yes"', "must be 0 or 1 (1: layer 2 is MoE)"),
    ([0, -1, 1, 1], "moe_layer_freq[1]=-1", "must be 0 or 1 (1: layer 1 is MoE)"),
    ([0, 1], "moe_layer_freq=[0, 1]", "has 2 entries for 4 decoder layers (num_hidden_layers)"),
])
def test_a_per_layer_list_neither_can_build_is_refused_naming_the_entry(tmp_path, freq, field_value, fix):
    with pytest.raises(UsageError) as e:
        planner.plan_model(write_config(tmp_path, changed(MIMO_V2, moe_layer_freq=freq)))
    assert str(e.value).startswith(f"config.json: {field_value}: ") and fix in str(e.value)


def test_a_list_where_vllm_reads_an_interval_is_refused_with_vllms_reason(tmp_path):
    # DeepseekV2DecoderLayer computes layer_idx % moe_layer_freq: a list builds there only as a TypeError.
    raw = changed(_published("deepseek-v3"), moe_layer_freq=[0] * 3 + [1] * 58)
    with pytest.raises(UsageError) as e:
        planner.plan_model(write_config(tmp_path, raw))
    assert str(e.value).startswith("config.json: moe_layer_freq=[0, 0, 0, 1") and "layer interval" in str(e.value)


def test_null_global_kv_heads_keeps_the_kv_heads_of_the_other_layers(tmp_path):
    # Gemma 4 E2B / E4B publish num_global_key_value_heads null: no per-layer KV-head override.
    raw = changed(_published("gemma-4-26b-a4b"), text_config__num_global_key_value_heads=None,
                  text_config__attention_k_eq_v=False)
    plan = planner.plan_model(write_config(tmp_path, raw))
    text = raw["text_config"]
    assert plan.complete
    full = next(a for a in plan.attention if a.head_dim_qk == text["global_head_dim"])
    assert full.num_kv_heads == text["num_key_value_heads"]


def test_num_hidden_layers_absent_is_the_length_of_the_files_own_layer_pattern(tmp_path):
    raw = _drop(_published("nemotron-3-nano-30b-a3b"), ["num_hidden_layers"])
    plan = planner.plan_model(write_config(tmp_path, raw))
    pattern = raw["hybrid_override_pattern"]
    assert plan.complete and not any("config.json lacks" in n for n in plan.model.notes)
    assert sum(e.layers for e in plan.moe) == pattern.count("E")
    # Without the pattern the count is the class's guess again: refused, naming what is missing.
    with pytest.raises(UsageError, match="hybrid_override_pattern"):
        planner.plan_model(write_config(tmp_path, _drop(raw, ["hybrid_override_pattern"]), "nopattern"))


def test_null_kv_lora_rank_passes_the_value_check_and_the_real_reason_shows(tmp_path):
    # null is "no latent attention" (DeepSeek-VL2-Tiny's text config); DeepseekV3Config itself
    # requires an integer, and that refusal (naming the field) is what the user sees.
    config_checks.check_values(changed(_published("deepseek-v3"), kv_lora_rank=None))
    with pytest.raises(UsageError) as e:
        planner.plan_model(write_config(tmp_path, changed(_published("deepseek-v3"), kv_lora_rank=None)))
    assert "DeepseekV3Config refuses" in str(e.value) and "kv_lora_rank" in str(e.value)


def test_a_config_refused_for_another_cause_says_that_cause(tmp_path):
    # A per-layer list no longer stops a config at the value check: transformers' missing class is the reason.
    raw = {"model_type": "minimax_m3", "architectures": ["MiniMaxM3ForCausalLM"], "hidden_size": 512,
           "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000, "moe_layer_freq": [0, 1, 1, 1]}
    with pytest.raises(UsageError) as e:
        planner.plan_model(write_config(tmp_path, raw))
    assert str(e.value).startswith("model_type=minimax_m3: ") and "no native class" in str(e.value)


# ------------------------------------------------------------------ keys left to class defaults
def _published(name: str) -> dict:
    with open(os.path.join(shared_config_dir(name), "config.json")) as f:
        return json.load(f)


MISSING_KEYS = [
    # (config source, keys dropped, the message's "<key> missing (transformers would default it to ...")
    ("llama-3.1-8b", ["num_key_value_heads"], "num_key_value_heads missing (transformers would default it to 32 "
     "for llama; add it, or pass --allow_defaults)"),
    ("llama-3.1-8b", ["intermediate_size", "vocab_size"], "vocab_size, intermediate_size missing (transformers "
     "would default them to 32000, 11008 for llama; add them, or pass --allow_defaults)"),
    ("qwen3-32b", ["head_dim"], "head_dim missing (transformers would default it to 128 for qwen3"),  # 5120/64 = 80
    ("qwen3-30b-a3b", ["num_experts_per_tok"], "num_experts_per_tok missing (transformers would default it to 8 "
     "for qwen3_moe"),
    ("qwen3-30b-a3b", ["norm_topk_prob"], "norm_topk_prob missing (transformers would default it to false"),
    ("deepseek-v3", ["first_k_dense_replace"], "first_k_dense_replace missing (transformers would default it to 3 "
     "for deepseek_v3"),
    ("deepseek-v3", ["n_group"], "n_group missing (transformers would default it to 8 for deepseek_v3"),
    ("mixtral-8x7b", ["num_local_experts"], "num_local_experts missing (transformers would default it to 8 "
     "for mixtral"),
    ("llama-4-maverick-17b-128e", ["text_config.interleave_moe_layer_step"], "interleave_moe_layer_step missing "
     "(transformers would default it to 1 for llama4_text"),
    ("gemma-3-27b-it", ["text_config.num_key_value_heads"], "num_key_value_heads missing (transformers would "
     "default it to 4 for gemma3_text"),
    ("nemotron-3-nano-30b-a3b", ["n_routed_experts"], "n_routed_experts missing (transformers would default it "
     "to 8 for nemotron_h"),
    # The class's default pattern "ME*-" holds an MoE layer, so the (dense) 56B's absent MoE keys count too.
    ("nemotron-h-56b", ["hybrid_override_pattern"], "hybrid_override_pattern, n_routed_experts, num_experts_per_tok"),
    ("gpt-oss-120b", ["head_dim"], "head_dim missing (transformers would default it to 64 for gpt_oss"),  # 2880/64
]


def _drop(raw: dict, keys: list[str]) -> dict:
    raw = copy.deepcopy(raw)
    for key in keys:
        sub, _, leaf = key.rpartition(".")
        (raw[sub] if sub else raw).pop(leaf)
    return raw


@pytest.mark.parametrize("name,keys,message", MISSING_KEYS, ids=[f"{r[0]}-{'+'.join(r[1])}" for r in MISSING_KEYS])
def test_a_key_left_to_the_class_default_is_refused(tmp_path, name, keys, message):
    path = write_config(tmp_path, _drop(_published(name), keys))
    with pytest.raises(UsageError) as e:
        planner.plan_model(path)
    assert str(e.value).startswith(f"config.json: {message}")


def test_allow_defaults_plans_and_notes_each_default(tmp_path):
    path = write_config(tmp_path, _drop(_published("llama-3.1-8b"), ["num_key_value_heads"]))
    plan = planner.plan_model(path, allow_defaults=True)
    note = next(n for n in plan.model.notes if "num_key_value_heads" in n)
    assert note.startswith("warning: config.json lacks num_key_value_heads") and "(32)" in note
    assert "--allow_defaults" in note
    assert {g.name: g.n for g in plan.gemms}["qkv_proj"] == 3 * 4096  # full multi-head attention: the default


ACCEPTED = [
    # (config source, keys dropped, why the plan does not depend on a guess)
    ("llama-3.2-3b", ["head_dim"], "LlamaConfig derives it as hidden_size // num_attention_heads, as vLLM does"),
    ("qwen3-8b", ["head_dim"], "Qwen3Config's default 128 is 4096 // 32 anyway"),
    ("qwen3-30b-a3b", ["decoder_sparse_step", "mlp_only_layers"], "the default is every layer MoE"),
    ("deepseek-v3", ["num_key_value_heads"], "MLA: no GEMM is shaped by KV heads"),
    ("nemotron-h-56b", [], "dense: its MoE keys are not required (the class has defaults for them)"),
]


@pytest.mark.parametrize("name,keys,why", ACCEPTED, ids=[f"{r[0]}-{'+'.join(r[1])}" for r in ACCEPTED])
def test_a_derived_or_unused_key_may_be_absent(tmp_path, name, keys, why):
    plan = planner.plan_model(write_config(tmp_path, _drop(_published(name), keys)))
    assert plan.complete and not any("config.json lacks" in n for n in plan.model.notes), why


def test_generic_family_refuses_only_constant_class_defaults(tmp_path):
    # phi (not in the family table): PhiConfig's num_key_value_heads default is None, filled with
    # num_attention_heads (multi-head attention, as vLLM does); ernie4_5_moe's class says 4.
    phi = {"model_type": "phi", "architectures": ["PhiForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000}
    assert planner.plan_model(write_config(tmp_path, phi, "phi")).complete
    ernie = {"model_type": "ernie4_5_moe", "architectures": ["Ernie4_5_MoeForCausalLM"], "hidden_size": 256,
             "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8,
             "vocab_size": 1000, "moe_num_experts": 8, "moe_k": 2}
    with pytest.raises(UsageError, match=r"^config.json: num_key_value_heads missing \(transformers would "
                                         r"default it to 4 for ernie4_5_moe"):
        planner.plan_model(write_config(tmp_path, ernie, "ernie"))


def test_sizes_the_planner_reads_are_checked_whatever_the_table_says(tmp_path, monkeypatch):
    # The planner reads first_k_dense_replace through config_value (vLLM's MoE-layer rule); with the
    # key taken out of deepseek_v3's table row, the recorded read still refuses the class default 3.
    row = required_keys.PLAN_KEYS["deepseek_v3"]
    monkeypatch.setitem(required_keys.PLAN_KEYS, "deepseek_v3", required_keys.FamilyKeys(
        row.always, tuple(k for k in row.moe if k != "first_k_dense_replace")))
    path = write_config(tmp_path, _drop(_published("deepseek-v3"), ["first_k_dense_replace"]))
    with pytest.raises(UsageError, match=r"^config.json: first_k_dense_replace missing \(.* to 3 for deepseek_v3"):
        planner.plan_model(path)


def test_published_config_relying_on_class_defaults_is_noted():
    # google/gemma-3-4b-it leaves heads, head_dim and vocabulary to Gemma3TextConfig (its own sizes).
    plan = planner.plan_model(shared_config_dir("gemma-3-4b-it"))
    note = next(n for n in plan.model.notes if "Gemma3TextConfig" in n)
    assert "google/gemma-3-4b-it" in note and "num_key_value_heads" in note
    # The same keys missing from another Gemma 3 (27B sizes) are refused.
    raw = _drop(_published("gemma-3-27b-it"), ["text_config.num_attention_heads"])
    with pytest.raises(UsageError, match="num_attention_heads missing"):
        planner.plan_checked(*_build_of(raw), allow_defaults=False)


def _build_of(raw: dict):
    from benchmark_model_kernels.plan import meta_model

    b = meta_model.build_meta_model(raw)
    info = ModelInfo(name="x", source="local", model_type=raw["model_type"], architecture=b.architecture)
    return b, info, Layout(), raw


def _all_configs() -> list[str]:
    shared = sorted(os.path.join(SHARED_CONFIGS, n) for n in os.listdir(SHARED_CONFIGS)
                    if os.path.isfile(os.path.join(SHARED_CONFIGS, n, "config.json"))) if os.path.isdir(
        SHARED_CONFIGS) else []
    return shared + config_source.list_bundled()


@pytest.mark.parametrize("path", _all_configs(), ids=os.path.basename)
def test_every_shared_and_bundled_config_plans_without_allow_defaults(path):
    src = config_source.resolve(path)
    config_checks.check_values(src.raw)
    try:
        _, meta = build(path)
    except UsageError as e:
        assert "no native class" in str(e)  # nemotron-nas needs the author's code
        return
    info = ModelInfo(name=path, source=src.source, model_type=src.raw["model_type"], architecture=meta.architecture)
    plan = planner.plan_checked(meta, info, Layout(), src.raw)
    assert not any("--allow_defaults" in n for n in plan.model.notes)


# ------------------------------------------------------------------ the CLI: one line, exit 2
CLI_CASES = [
    (changed(LLAMA, num_hidden_layers=10_000_000), "error: config.json: num_hidden_layers=10000000: must be at most"),
    (changed(LLAMA, num_key_value_heads=DROP), "error: config.json: num_key_value_heads missing (transformers would "
     "default it to 8 for llama; add it, or pass --allow_defaults)"),
    (changed(QWEN3_MOE, num_experts_per_tok=64), "error: config.json: num_experts_per_tok=64: exceeds the 8 routed"),
]


@pytest.mark.parametrize("raw,line", CLI_CASES, ids=["layers", "kv-heads", "top-k"])
def test_cli_refuses_in_one_line_and_leaves_the_file_alone(tmp_path, raw, line):
    path = write_config(tmp_path, raw)
    before = (tmp_path / "model" / "config.json").read_bytes()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), path, "--print_only"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and r.stderr.startswith(line)
    assert "Traceback" not in r.stderr + r.stdout
    assert (tmp_path / "model" / "config.json").read_bytes() == before


def test_cli_allow_defaults_proceeds_with_the_note(tmp_path):
    path = write_config(tmp_path, changed(LLAMA, num_key_value_heads=DROP))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), path, "--print_only",
                        "--allow_defaults"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "# note: warning: config.json lacks num_key_value_heads" in r.stdout
