"""MODEL resolution: local dir, config.json path, bundled name, Hub ID (offline), and bad inputs."""

from __future__ import annotations

import json

import pytest

from benchmark_model_kernels.errors import UsageError
from benchmark_model_kernels.plan import config_source

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100}


def test_local_dir_and_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    a = config_source.resolve(str(tmp_path))
    b = config_source.resolve(str(tmp_path / "config.json"))
    assert a.source == b.source == "local" and a.raw == b.raw == TINY


def test_bundled_name():
    s = config_source.resolve("llama-3.1-8b")
    assert s.source == "bundled" and s.raw["hidden_size"] == 4096


def test_hub_offline_is_one_line_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError) as e:
        config_source.resolve("some-org/some-model")
    msg = str(e.value)
    assert msg.startswith("MODEL=some-org/some-model:") and "local path" in msg and "\n" not in msg


def test_hub_connection_error_is_one_line(monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def no_network(*a, **k):
        raise ConnectionError("no route")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    with pytest.raises(UsageError, match="ConnectionError.*local path"):
        config_source.resolve("some-org/some-model")


def test_missing_path(tmp_path):
    with pytest.raises(UsageError, match="no such file or directory"):
        config_source.resolve(str(tmp_path / "nope" / "config.json"))
    with pytest.raises(UsageError, match="has no config.json"):
        config_source.resolve(str(tmp_path))


def test_unknown_name_lists_bundled():
    with pytest.raises(UsageError, match="llama-3.1-8b"):
        config_source.resolve("not-a-model")


@pytest.mark.parametrize("text,match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"hidden_size": 3}', "no 'model_type'"),
])
def test_malformed_config(tmp_path, text, match):
    p = tmp_path / "config.json"
    p.write_text(text)
    with pytest.raises(UsageError, match=match):
        config_source.resolve(str(p))


def test_infinity_literal_is_accepted(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "nemotron_h", "time_step_limit": [0.0, Infinity]}')
    assert config_source.resolve(str(p)).raw["time_step_limit"][1] == float("inf")
