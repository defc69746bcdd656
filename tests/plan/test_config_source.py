"""MODEL resolution: local dir, config.json path, bundled name, Hub ID (offline), and bad inputs."""

from __future__ import annotations

import json

import pytest

from benchmark_model_kernels.core.errors import UsageError
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
    monkeypatch.setattr(config_source, "_hub_host_unresolvable", lambda: None)  # a name server answers
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


def test_non_utf8_config_is_one_line(tmp_path):
    p = tmp_path / "config.json"
    p.write_bytes(b'{"model_type": "llama", "name": "\xff\xfe"}')
    with pytest.raises(UsageError) as e:
        config_source.resolve(str(p))
    assert str(e.value) == (f"MODEL={p}: config.json is not UTF-8 text (byte 0xff at offset 33); "
                            "save it as UTF-8 JSON")


def test_unresolvable_hub_host_fails_at_once_without_retries(monkeypatch, tmp_path):
    import socket

    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for var in config_source._PROXY_VARS:
        monkeypatch.delenv(var, raising=False)

    def no_dns(*a, **k):
        raise socket.gaierror(-2, "Name or service not known")

    def must_not_download(*a, **k):
        if not k.get("local_files_only"):  # the cache may be read: that asks no host
            raise AssertionError("hf_hub_download would retry for ~25 s")
        raise FileNotFoundError("not cached")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", must_not_download)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        config_source.resolve("some-org/some-model")
    assert "cannot resolve huggingface.co" in str(e.value) and "not a local folder either" in str(e.value)


@pytest.mark.parametrize("model,hint", [
    ("models/foo", "no local folder models/foo either (./models/ exists: a typo in the folder name?)"),
    ("org/name", "not a local folder either (no ./org/name here)"),
])
def test_hub_looking_path_gets_a_local_hint(monkeypatch, tmp_path, model, hint):
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError) as e:
        config_source.resolve(model)
    assert hint in str(e.value) and "HF_HUB_OFFLINE" in str(e.value)


def test_dot_slash_path_is_never_a_hub_id(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"^MODEL=./models/foo: no such file or directory"):
        config_source.resolve("./models/foo")
