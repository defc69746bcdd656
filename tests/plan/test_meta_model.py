"""Meta-device build: nothing materialized, towers dropped, aliases, remote code only when asked."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.plan import config_source, meta_model
from support import shared_config_dir


def _raw(name):
    return config_source.resolve(shared_config_dir(name)).raw


def test_build_is_meta_only():
    b = meta_model.build_meta_model(config_source.resolve("llama-3.1-8b").raw)
    assert b.architecture == "LlamaForCausalLM"
    assert all(p.device.type == "meta" for p in b.model.parameters())
    assert all(t.device.type == "meta" for t in b.model.buffers())


def test_assert_on_meta_catches_real_tensors():
    import torch

    with pytest.raises(RuntimeError, match="materialized"):
        meta_model.assert_on_meta(torch.nn.Linear(2, 2))


def test_multimodal_wrapper_builds_language_model_only():
    b = meta_model.build_meta_model(_raw("gemma-3-4b-it"))
    assert b.architecture == "Gemma3ForCausalLM"
    assert not any("vision" in n for n, _ in b.model.named_modules())


def test_alias_kimi_k2():
    b = meta_model.build_meta_model(_raw("kimi-k2"))
    assert b.architecture == "DeepseekV3ForCausalLM" and any("alias" in n for n in b.notes)


def test_remote_code_needs_the_flag():
    with pytest.raises(UsageError, match="--trust-remote-code"):
        meta_model.build_meta_model(_raw("llama-3.3-nemotron-super-49b"))


@pytest.mark.parametrize("raw", [
    {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 64},
    {"model_type": "vit", "hidden_size": 64},
])
def test_not_a_causal_lm(raw):
    with pytest.raises(UsageError, match="causal LM"):
        meta_model.build_meta_model(raw)


def test_trust_remote_code_names_the_missing_file(tmp_path):
    import json
    import shutil

    d = tmp_path / "nemotron-nas"
    d.mkdir()
    shutil.copy(f"{shared_config_dir('llama-3.3-nemotron-super-49b')}/config.json", d / "config.json")
    raw = json.loads((d / "config.json").read_text())
    with pytest.raises(UsageError) as e:
        meta_model.build_meta_model(raw, trust_remote_code=True, location=str(d))
    assert str(e.value) == (f"--trust-remote-code={d}/configuration_decilm.py: missing: config.json's auto_map "
                            "names configuration_decilm.py for AutoConfig; copy the model's .py files beside "
                            "config.json")
    (d / "configuration_decilm.py").write_text("")
    with pytest.raises(UsageError, match="modeling_decilm.py: missing: .* for AutoModelForCausalLM"):
        meta_model.build_meta_model(raw, trust_remote_code=True, location=str(d))


def test_trust_remote_code_without_auto_map_is_one_line(tmp_path):
    raw = {"model_type": "not-a-real-type", "hidden_size": 8}
    with pytest.raises(UsageError, match="has no auto_map naming the author's code"):
        meta_model.build_meta_model(raw, trust_remote_code=True, location=str(tmp_path))
