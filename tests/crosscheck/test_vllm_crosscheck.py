"""Plans checked against vLLM's own model classes (`--cross_check vllm`). These tests need vLLM
importable (CPU is enough) and skip without it; run them with the venv that has vLLM:

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu venv-vllm/bin/python -m pytest -m vllm tests/crosscheck
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.crosscheck.vllm_platform import TargetGpu
from benchmark_model_kernels.plan import planner
from support import shared_config_dir

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")]


def plan_of(name: str, tp: int = 1, ep: int = 1):
    return planner.plan_model(shared_config_dir(name), tp, ep)


def plan_raw(tmp_path, raw: dict, tp: int = 1, ep: int = 1):
    d = tmp_path / raw["model_type"]
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(raw))
    return planner.plan_model(str(d), tp, ep)


def _raw(name: str) -> dict:
    return json.load(open(f"{shared_config_dir(name)}/config.json"))


def _check(plan, raw):
    from benchmark_model_kernels.crosscheck.check import cross_check

    return cross_check(plan, raw, gpu=H200)


@pytest.mark.parametrize("name,tp,ep", [
    ("llama-3.1-8b", 2, 1),
    ("deepseek-v3", 2, 8),        # shared experts replicated on ceil(M/2) rows (sequence-parallel MoE)
    ("gemma-4-26b-a4b", 1, 1),    # K=V global layers keep the V slot: qkv 10240 x 2816
    ("qwen3-30b-a3b", 2, 8),      # router on the sequence-parallel chunk
    ("gpt-oss-20b", 1, 64),       # EP above the 32 experts
    ("qwen3-next-80b-a3b", 4, 8),  # gated attention + GatedDeltaNet + shared expert
])
def test_shared_configs_match_vllm(name, tp, ep):
    result = _check(plan_of(name, tp, ep), _raw(name))
    assert result.status == "match", result.differences or result.refused
    assert result.against.startswith("vllm ")


def test_held_out_layouts_match_vllm(tmp_path):
    raw = _raw("nemotron-3-nano-30b-a3b")
    raw["moe_latent_size"] = 1024  # latent MoE
    assert _check(plan_raw(tmp_path, raw, 2, 4), raw).status == "match"
    raw = _raw("gemma-4-26b-a4b")  # dense, KV-shared layers, per-layer inputs
    text = raw["text_config"]
    for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
        text.pop(key)
    text.update(enable_moe_block=False, num_kv_shared_layers=12, hidden_size_per_layer_input=256,
                use_double_wide_mlp=True)
    result = _check(plan_raw(tmp_path, raw, 2), raw)
    assert result.status == "match", result.differences
    from transformers import CONFIG_MAPPING

    raw = CONFIG_MAPPING["axk1"]().to_dict()  # MLA + shared experts, replicated under sequence-parallel MoE
    raw["architectures"] = ["AXK1ForCausalLM"]
    result = _check(plan_raw(tmp_path, raw, 2, 8), raw)
    assert result.status == "match", result.differences


def test_a_wrong_plan_is_one_line_per_difference():
    plan = plan_of("llama-3.1-8b", 2)
    wrong = replace(plan, gemms=tuple(replace(g, n=g.n + 128) if g.name == "qkv_proj" else g for g in plan.gemms))
    result = _check(wrong, _raw("llama-3.1-8b"))
    assert result.status == "mismatch"
    (line,) = result.differences
    assert line.startswith("different: model.layers.{0-31}.self_attn.qkv_proj (QKVParallelLinear): vLLM runs "
                           "3072 x 4096 column x32, the plan 3200 x 4096 column x32")


@pytest.mark.parametrize("name,tp", [
    ("mistral-7b-v0.1", 1),        # model-level window 4096 (no layer_types): cache_config.sliding_window
    ("llama-3.1-70b", 16),         # 1 KV head per rank, replicated 2x
    ("deepseek-v3", 8),            # MLA: 16 heads, 576 / 512
    ("llama-4-scout-17b-16e", 8),  # ChunkedLocalAttention 8192 on 36 layers, 12 NoPE layers full
    ("gemma-3-27b-it", 2),         # 52 sliding (1024) + 10 full layers
])
def test_attention_entries_match_vllms_attention_layers(name, tp):
    plan = plan_of(name, tp)
    assert _check(plan, _raw(name)).status == "match"
    wrong = replace(plan, attention=tuple(replace(a, num_kv_heads=a.num_kv_heads + 1) for a in plan.attention))
    result = _check(wrong, _raw(name))
    assert result.status == "mismatch"
    assert all(d.startswith("different: ") and "kv_heads=" in d for d in result.differences)
    assert len(result.differences) == len(plan.attention)


def test_a_transformers_backend_model_is_checked_against_that_backend(tmp_path):
    # vLLM serves Starcoder2 through its generic Transformers backend: that class is what it builds.
    result = _check(plan_of("starcoder2-7b", 2), _raw("starcoder2-7b"))
    assert result.status == "match", result.differences or result.refused or result.not_checked
    assert "transformers.TransformersForCausalLM" in result.against
    # vLLM decorated transformers' Starcoder2Model for torch.compile in place while it built; the
    # class is put back, so a plan built on meta afterwards in this process still works
    import transformers

    assert not any("TorchCompile" in b.__name__ for b in transformers.Starcoder2Model.__mro__)
    assert plan_raw(tmp_path, {**_raw("starcoder2-7b"), "num_hidden_layers": 2}, 2).gemms


H200 = TargetGpu("NVIDIA H200", (9, 0))


@pytest.mark.parametrize("name,hidden,inter,dense", [
    ("deepseek-v3.2", 7168, 18432, 3),
    ("glm-5.1", 6144, 12288, 3),
])
def test_the_cuda_class_of_a_platform_split_family_is_built(name, hidden, inter, dense):
    # vllm/models/deepseek_v32/__init__.py: the nvidia class on CUDA; at TP=8 EP=32 (DP=4) its
    # decoder layers are sequence-parallel, the first dense layers' MLP replicated at full width.
    from benchmark_model_kernels.crosscheck import vllm_layers
    from benchmark_model_kernels.crosscheck.compare import LinearShape
    from benchmark_model_kernels.crosscheck.vllm_build import build_vllm_model

    plan = plan_of(name, 8, 32)
    with build_vllm_model(_raw(name), 8, 32, gpu=H200) as built:
        assert built.model_class == "vllm.models.deepseek_v32.nvidia.model.DeepseekV32ForCausalLM"
        assert built.platform == "CUDA class for sm_90 (NVIDIA H200)"
        side = vllm_layers.vllm_side(built.model, 8)
    assert side.gemms[LinearShape(2 * inter, hidden, "replicated", False, 8)] == dense  # gate_up_proj
    assert side.gemms[LinearShape(hidden, inter, "replicated", False, 8)] == dense  # down_proj
    result = _check(plan, _raw(name))
    assert result.status == "match", result.differences
    assert result.against.endswith("nvidia.model.DeepseekV32ForCausalLM (CUDA class for sm_90 (NVIDIA H200))")


def test_a_generic_family_says_it_was_built_on_the_cpu_platform():
    result = _check(plan_of("deepseek-v3", 8, 32), _raw("deepseek-v3"))
    assert result.status == "match", result.differences
    assert result.against.startswith("vllm 0.") and "deepseek_v2.DeepseekV3ForCausalLM (vLLM's CPU platform" \
        in result.against


def test_the_routed_scaling_factor_is_compared_with_vllms():
    plan = plan_of("deepseek-v3", 2, 8)
    assert _check(plan, _raw("deepseek-v3")).status == "match"
    for scale in (1.0, 99.0):
        wrong = replace(plan, moe=tuple(replace(e, routing=replace(e.routing, routed_scaling_factor=scale))
                                        for e in plan.moe))
        result = _check(wrong, _raw("deepseek-v3"))
        assert result.status == "mismatch"
        (line,) = result.differences
        assert line.startswith("different: model.layers.{3-60}.mlp.experts") and "scale=2.5 x58" in line


def test_a_build_problem_is_not_a_verdict(monkeypatch):
    # Plumbing: the CUDA class cannot be imported on this machine (a stand-in for a missing CUDA library).
    from benchmark_model_kernels.crosscheck import vllm_build

    def no_cuda_class(*args, **kwargs):
        raise ImportError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(vllm_build, "class_for_target", no_cuda_class)
    result = _check(plan_of("deepseek-v3.2", 8, 32), _raw("deepseek-v3.2"))
    assert result.status == "not checked" and not result.refused and "libcuda" in result.not_checked


def test_cli_records_the_version_and_exits_0(tmp_path, capsys):
    from benchmark_model_kernels import cli_model

    out = tmp_path / "plan.json"
    rc = cli_model.main([shared_config_dir("deepseek-v3"), "--tp", "2", "--ep", "8", "--cross_check", "vllm",
                         "--plan_json", str(out)])
    assert rc == 0, capsys.readouterr()
    assert "# cross-check against vllm " in capsys.readouterr().out
    check = json.loads(out.read_text())["cross_check"]
    assert check["status"] == "match" and check["against"].startswith("vllm 0.")


#: Configs outside the shared set whose plans first differed from vLLM 0.33.0 or did not build
#: (examples/vllm_fidelity/unseen.md), each small but with its family's published layer sizes.
UNSEEN = {
    "dbrx": {"model_type": "dbrx", "architectures": ["DbrxForCausalLM"], "d_model": 6144, "n_heads": 48,
             "n_layers": 2, "max_seq_len": 32768, "vocab_size": 100352,
             "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
             "ffn_config": {"moe_num_experts": 16, "moe_top_k": 4, "ffn_hidden_size": 10752,
                            "ffn_act_fn": {"name": "silu"}}},
    "jamba": {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "num_experts": 16,
              "num_experts_per_tok": 2, "num_hidden_layers": 8, "attn_layer_period": 8, "attn_layer_offset": 4,
              "expert_layer_period": 2, "expert_layer_offset": 1, "mamba_d_state": 16, "mamba_d_conv": 4,
              "mamba_expand": 2, "mamba_dt_rank": 256, "vocab_size": 65536, "use_mamba_kernels": False},
    "ernie4_5_moe": {"model_type": "ernie4_5_moe", "architectures": ["Ernie4_5_MoeForCausalLM"],
                     "hidden_size": 2560, "num_attention_heads": 20, "num_key_value_heads": 4, "head_dim": 128,
                     "intermediate_size": 12288, "moe_intermediate_size": 1536, "moe_num_experts": 64, "moe_k": 6,
                     "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_layer_interval": 1,
                     "num_hidden_layers": 3, "vocab_size": 103424, "max_position_embeddings": 131072},
    # xIELU activation; max_position_embeddings below any fixed max_model_len the build might ask for
    "apertus": {"model_type": "apertus", "architectures": ["ApertusForCausalLM"], "hidden_size": 4096,
                "intermediate_size": 21504, "num_hidden_layers": 2, "num_attention_heads": 32,
                "num_key_value_heads": 8, "vocab_size": 131072, "max_position_embeddings": 2048},
}


@pytest.mark.parametrize("name,tp,ep", [("dbrx", 2, 1), ("jamba", 2, 8), ("ernie4_5_moe", 2, 4), ("apertus", 4, 1)])
def test_unseen_configs_match_vllm(tmp_path, name, tp, ep):
    raw = UNSEEN[name]
    result = _check(plan_raw(tmp_path, raw, tp, ep), raw)
    assert result.status == "match", result.differences or result.refused
