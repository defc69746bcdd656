"""Resolve MODEL (bundled name, local dir, config.json path or Hub ID) to a config dict.

Only `config.json` is ever read or downloaded, never weights. Bundled configs live in `models/`.
A Hub ID is read from the Hugging Face cache when the Hub cannot be asked (HF_HUB_OFFLINE, no
network), as `hf_hub_download` itself would; one whose config is bundled (`BUNDLED_HUB_IDS`)
falls back to the bundled file when it is in neither, and the plan says so in a note. Nothing
here reaches the network unless MODEL is a Hub ID.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from ..core.errors import UsageError

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
#: The Hub IDs of the bundled configs (bundled name -> Hub IDs; the first is the repository the
#: bundled file's numbers are from, ../shared/configs/PROVENANCE.md; Meta's older
#: Meta-Llama-3.1-* names redirect to the same repositories).
BUNDLED_HUB_IDS: dict[str, tuple[str, ...]] = {
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3",),
    "gpt-oss-120b": ("openai/gpt-oss-120b",),
    "kimi-k2": ("moonshotai/Kimi-K2-Instruct",),
    "llama-3.1-70b": ("meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B"),
    "llama-3.1-8b": ("meta-llama/Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B"),
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1",),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B",),
    "qwen3-8b": ("Qwen/Qwen3-8B",),
}
#: "org/name" as the Hub accepts it.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ConfigSource:
    """A config.json that was found and parsed."""

    name: str
    """What the user passed as MODEL."""
    source: str
    """"bundled", "local" or "hub"."""
    path: str
    """The config.json file that was read."""
    raw: dict[str, Any] = field(repr=False)
    """The parsed JSON."""
    revision: str | None = None
    """Hub revision, when one was given."""
    note: str = ""
    """Where a Hub ID was read from when the Hub was not asked ("" when it was, or MODEL is no Hub ID)."""

    @property
    def directory(self) -> str:
        """Folder holding config.json (where remote code would live)."""
        return os.path.dirname(self.path)


def list_bundled() -> list[str]:
    """Names of the configs bundled with the project, sorted."""
    if not os.path.isdir(MODELS_DIR):
        return []
    return sorted(f[:-5] for f in os.listdir(MODELS_DIR) if f.endswith(".json"))


def read_config_json(path: str, field_name: str = "MODEL") -> dict[str, Any]:
    """Parse a config.json; any problem is a one-line UsageError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(field_name, path, f"cannot read config.json ({e.strerror}); check the path") from None
    except UnicodeDecodeError as e:
        raise UsageError(field_name, path, f"config.json is not UTF-8 text (byte 0x{e.object[e.start]:02x} at "
                         f"offset {e.start}); save it as UTF-8 JSON") from None
    try:
        raw = json.loads(text)  # the json module accepts Infinity/NaN, as published configs use them
    except json.JSONDecodeError as e:
        raise UsageError(field_name, path, f"config.json is not valid JSON (line {e.lineno}: {e.msg}); "
                         "fix the file or pass another model") from None
    except RecursionError:
        raise UsageError(field_name, path, "config.json nests too deep to be a model config; fix the "
                         "file or pass another model") from None
    if not isinstance(raw, dict):
        raise UsageError(field_name, path, "config.json must hold a JSON object; pass a Hugging Face config.json")
    if not isinstance(raw.get("model_type"), str) or not raw.get("model_type"):
        raise UsageError(field_name, path, "config.json has no 'model_type'; pass a Hugging Face model config")
    return raw


def resolve(model: str, revision: str | None = None) -> ConfigSource:
    """Find MODEL's config.json: a directory, a file, a bundled name, or a Hub ID (in that order)."""
    if not model:
        raise UsageError("MODEL", repr(model),
                         "give a bundled name (--list_models), a directory, a config.json or a Hub ID")
    expanded = os.path.expanduser(model)
    if os.path.isdir(expanded):
        path = os.path.join(expanded, "config.json")
        if not os.path.isfile(path):
            raise UsageError("MODEL", model, "directory has no config.json; pass the folder that holds it")
        return ConfigSource(model, "local", path, read_config_json(path))
    if os.path.isfile(expanded):
        return ConfigSource(model, "local", expanded, read_config_json(expanded))
    bundled = os.path.join(MODELS_DIR, f"{model}.json")
    if "/" not in model and os.path.isfile(bundled):
        return ConfigSource(model, "bundled", bundled, read_config_json(bundled))
    if _HUB_ID.match(model) and not model.endswith(".json") and not model.startswith("."):
        return _from_hub(model, revision)
    if model.startswith((".", "/", "~")) or model.endswith(".json") or os.sep in model:
        raise UsageError("MODEL", model, "no such file or directory; pass a folder holding config.json, "
                         "a config.json path, a Hub ID, or a bundled name (--list_models)")
    raise UsageError("MODEL", model, "not a bundled model, path or Hub ID; bundled: "
                     + ", ".join(list_bundled()) + " (or pass a local config.json)")


#: Seconds to wait for the Hub's host name to resolve before leaving it to huggingface_hub.
HUB_LOOKUP_WAIT_S = 3.0
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _hub_host_unresolvable() -> str | None:
    """"cannot resolve <host>" when the Hub's host name has no address (no network, no DNS):
    huggingface_hub would retry for about 25 s before failing. None when it resolves, the lookup is
    slow, or a proxy resolves names instead of this machine."""
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return None
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    failure: list[OSError] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, 443)
        except OSError as e:
            failure.append(e)

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(HUB_LOOKUP_WAIT_S)
    return f"cannot resolve {host}: no network?" if failure and isinstance(failure[0], socket.gaierror) else None


def _local_lookalike_hint(repo_id: str) -> str:
    """What a Hub-looking MODEL is not, locally: a typo in a folder name reads like a Hub ID."""
    org = repo_id.split("/")[0]
    if os.path.isdir(org):
        return f"; no local folder {repo_id} either (./{org}/ exists: a typo in the folder name?)"
    return f"; not a local folder either (no ./{repo_id} here)"


def bundled_name_of(repo_id: str) -> str | None:
    """The bundled config of Hub ID `repo_id` (the Hub's IDs are case-insensitive), or None."""
    for name, ids in BUNDLED_HUB_IDS.items():
        if repo_id.lower() in (i.lower() for i in ids):
            return name
    return None


def cached_config(repo_id: str, revision: str | None) -> str | None:
    """config.json of `repo_id` at `revision` (None: main) in the Hugging Face cache, found by
    huggingface_hub itself (HF_HUB_CACHE / HF_HOME honoured), never asking the Hub; None if absent."""
    try:
        from huggingface_hub import hf_hub_download

        return hf_hub_download(repo_id, "config.json", revision=revision, local_files_only=True)
    except Exception:  # not cached (LocalEntryNotFoundError), or a revision the cache has no ref for
        return None


def hub_offline() -> bool:
    """HF_HUB_OFFLINE set, as huggingface_hub reads it (read now: a test or a caller may set it late)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _not_fetched(repo_id: str, revision: str | None, why: str) -> ConfigSource:
    """The Hub was not asked or did not answer (`why`): config.json from the Hugging Face cache,
    else the bundled config of that Hub ID (no --revision: a bundled file has none), else one line."""
    cached = cached_config(repo_id, revision)
    if cached:
        return ConfigSource(repo_id, "hub", cached, read_config_json(cached), revision,
                            note=f"config.json of {repo_id} from the Hugging Face cache ({why})")
    bundled = bundled_name_of(repo_id)
    if bundled and revision is None:
        path = os.path.join(MODELS_DIR, f"{bundled}.json")
        return ConfigSource(repo_id, "bundled", path, read_config_json(path),
                            note=f"using the bundled config of {repo_id} ({bundled}; {why}, and not in the "
                                 "Hugging Face cache)")
    if bundled:
        alternative = f"drop --revision to use the bundled config of {repo_id} ({bundled})"
    else:
        alternative = "or use a bundled name (--list_models)"
    raise UsageError("MODEL", repo_id, f"cannot fetch config.json from the Hugging Face Hub ({why}) and "
                     f"the Hugging Face cache has none{' at revision ' + revision if revision else ''}"
                     f"{_local_lookalike_hint(repo_id)}; download it elsewhere and pass the local path "
                     f"(e.g. ./{repo_id.split('/')[-1]}/config.json), {alternative}")


def _from_hub(repo_id: str, revision: str | None) -> ConfigSource:
    """Download only config.json from the Hub (huggingface_hub). Offline (HF_HUB_OFFLINE, an
    unresolvable Hub host) or refused by the Hub: the cached file, else the bundled config."""
    if hub_offline():
        return _not_fetched(repo_id, revision, "HF_HUB_OFFLINE is set")
    unresolvable = _hub_host_unresolvable()
    if unresolvable:
        return _not_fetched(repo_id, revision, unresolvable)
    try:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(repo_id, "config.json", revision=revision)
    except Exception as e:  # no network, 401/404, bad revision: all are "cannot fetch"
        return _not_fetched(repo_id, revision, f"{type(e).__name__}")
    return ConfigSource(repo_id, "hub", path, read_config_json(path), revision)


__all__ = ["BUNDLED_HUB_IDS", "ConfigSource", "MODELS_DIR", "bundled_name_of", "cached_config", "hub_offline",
           "list_bundled", "read_config_json", "resolve"]
