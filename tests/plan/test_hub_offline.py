"""A Hub ID offline: read from the Hugging Face cache (as hf_hub_download finds it), else the
bundled config of that Hub ID with a note saying so, else one line; never the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.plan import config_source, planner
from support import ROOT, TINY_LLAMA

REVISION = "0123456789abcdef0123456789abcdef01234567"


def fake_hub_cache(cache: str, repo_id: str, config: dict) -> str:
    """A cache folder as huggingface_hub lays it out: <repo folder>/snapshots/<commit>/config.json
    and refs/main naming that commit. The repo folder's name is huggingface_hub's own."""
    from huggingface_hub.file_download import repo_folder_name

    repo = os.path.join(cache, repo_folder_name(repo_id=repo_id, repo_type="model"))
    os.makedirs(os.path.join(repo, "snapshots", REVISION))
    os.makedirs(os.path.join(repo, "refs"))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(REVISION)
    path = os.path.join(repo, "snapshots", REVISION, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache in tmp_path, offline, and no download possible."""
    from huggingface_hub import constants

    cache = str(tmp_path / "hub")
    os.makedirs(cache)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)  # read when the module loads: set it there
    monkeypatch.setenv("HF_HUB_CACHE", cache)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return cache


def test_offline_hub_id_in_the_cache_resolves_from_it(hub_cache):
    path = fake_hub_cache(hub_cache, "some-org/tiny", TINY_LLAMA)
    src = config_source.resolve("some-org/tiny")
    assert src.source == "hub" and os.path.samefile(src.path, path) and src.raw == TINY_LLAMA
    assert "from the Hugging Face cache (HF_HUB_OFFLINE is set)" in src.note
    assert config_source.resolve("some-org/tiny", REVISION).raw == TINY_LLAMA  # by its commit too


def test_a_revision_the_cache_lacks_is_one_line(hub_cache):
    fake_hub_cache(hub_cache, "some-org/tiny", TINY_LLAMA)
    with pytest.raises(UsageError) as e:
        config_source.resolve("some-org/tiny", "v2")
    assert "the Hugging Face cache has none at revision v2" in str(e.value) and "\n" not in str(e.value)


def test_unresolvable_hub_host_reads_the_cache_without_asking_the_hub(hub_cache, monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(config_source, "_hub_host_unresolvable", lambda: "cannot resolve huggingface.co: no network?")
    real = huggingface_hub.hf_hub_download

    def cache_only(*a, **k):
        assert k.get("local_files_only"), "the Hub was asked"
        return real(*a, **k)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", cache_only)
    fake_hub_cache(hub_cache, "some-org/tiny", TINY_LLAMA)
    assert config_source.resolve("some-org/tiny").note.endswith("(cannot resolve huggingface.co: no network?)")


@pytest.mark.parametrize("repo_id,bundled", [("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
                                             ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
                                             ("qwen/qwen3-30b-a3b", "qwen3-30b-a3b")])
def test_offline_hub_id_of_a_bundled_config_uses_it(hub_cache, repo_id, bundled):
    src = config_source.resolve(repo_id)
    assert src.source == "bundled" and src.path == os.path.join(config_source.MODELS_DIR, f"{bundled}.json")
    assert src.note.startswith(f"using the bundled config of {repo_id} ({bundled};")


def test_the_cache_wins_over_the_bundled_config(hub_cache):
    fake_hub_cache(hub_cache, "Qwen/Qwen3-30B-A3B", {**TINY_LLAMA, "hidden_size": 128})
    src = config_source.resolve("Qwen/Qwen3-30B-A3B")
    assert src.source == "hub" and src.raw["hidden_size"] == 128


def test_bundled_fallback_is_not_taken_for_a_revision(hub_cache):
    with pytest.raises(UsageError, match="drop --revision to use the bundled config of Qwen/Qwen3-30B-A3B"):
        config_source.resolve("Qwen/Qwen3-30B-A3B", "main")


def test_every_bundled_hub_id_names_a_bundled_file():
    assert set(config_source.BUNDLED_HUB_IDS) <= set(config_source.list_bundled())


def test_the_plan_notes_where_the_config_came_from(hub_cache):
    plan = planner.plan_model("Qwen/Qwen3-30B-A3B")
    assert plan.model.name == "Qwen/Qwen3-30B-A3B" and plan.model.source == "bundled"
    assert any(n.startswith("using the bundled config of Qwen/Qwen3-30B-A3B") for n in plan.model.notes)


def test_preview_of_a_cached_hub_id_offline_as_a_program(tmp_path):
    """The usual air-gapped set-up: HF_HUB_OFFLINE=1 and config.json already in HF_HUB_CACHE."""
    cache = str(tmp_path / "hub")
    fake_hub_cache(cache, "some-org/tiny", TINY_LLAMA)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache}
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), "some-org/tiny",
                          "--print_only", "--planner", "rules"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "# model: some-org/tiny (hub)" in out.stdout and "from the Hugging Face cache" in out.stdout


def test_a_plan_kept_online_is_not_returned_with_an_offline_note(hub_cache, tmp_path, monkeypatch):
    """The plan cache keys the note too: the same config read from the cache offline and downloaded
    online are two kept plans, each saying where its config came from."""
    import huggingface_hub

    path = fake_hub_cache(hub_cache, "some-org/tiny", TINY_LLAMA)
    kept = str(tmp_path / "plans")
    offline = planner.plan_model("some-org/tiny", plan_dir=kept)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(config_source, "_hub_host_unresolvable", lambda: None)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: path)  # the Hub answers
    online = planner.plan_model("some-org/tiny", plan_dir=kept)
    assert any("from the Hugging Face cache" in n for n in offline.model.notes)
    assert not any("Hugging Face cache" in n for n in online.model.notes)
    assert len(os.listdir(kept)) == 2
