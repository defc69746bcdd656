"""Resolve MODEL (bundled name, local dir, config.json path or Hub ID) to a config dict.

Only `config.json` is ever read or downloaded, never weights. Bundled configs live in `models/`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
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
    try:
        raw = json.loads(text)  # the json module accepts Infinity/NaN, as published configs use them
    except json.JSONDecodeError as e:
        raise UsageError(field_name, path, f"config.json is not valid JSON (line {e.lineno}: {e.msg}); "
                         "fix the file or pass another model") from None
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


def _from_hub(repo_id: str, revision: str | None) -> ConfigSource:
    """Download only config.json from the Hub (huggingface_hub); offline -> one-line error."""
    fix = (f"cannot fetch config.json from the Hugging Face Hub{{why}}; download it elsewhere and pass "
           f"the local path (e.g. ./{repo_id.split('/')[-1]}/config.json), or use a bundled name (--list_models)")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise UsageError("MODEL", repo_id, fix.format(why=" (HF_HUB_OFFLINE is set)"))
    try:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(repo_id, "config.json", revision=revision)
    except Exception as e:  # no network, 401/404, bad revision: all are "cannot fetch"
        reason = type(e).__name__
        raise UsageError("MODEL", repo_id, fix.format(why=f" ({reason})")) from None
    return ConfigSource(repo_id, "hub", path, read_config_json(path), revision)


__all__ = ["ConfigSource", "MODELS_DIR", "list_bundled", "read_config_json", "resolve"]
