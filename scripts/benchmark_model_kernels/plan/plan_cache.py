"""Plans kept between runs: a plan is a pure function of the config, the layout and this code.

Building the model on meta tensors imports transformers (and whatever it pulls in: torchvision,
scikit-learn where installed) and takes seconds; a sweep or a re-run plans the same config again.
A plan is kept under a key of everything it depends on (the config's JSON, MODEL as given and how
it resolved, the revision, TP, EP, --allow_defaults, the transformers and torch versions, and the
code of plan/, vllm_rules/, core/errors.py and the plan schema), so a kept plan is never stale:
a changed config, version or rule is another key. Configs with remote code are never kept (their
code is not in the key).
Only plans that were made are kept; a config the planner refuses is refused again each time.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..core.files import digest_files, json_digest, python_files
from ..core.plan_schema import Plan, PlanError

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The code a plan depends on, relative to the package.
_PLAN_CODE = ("plan", "vllm_rules", "core/errors.py", "core/plan_schema.py", "core/plan_entries.py")
KEY_FORMAT = 1


def default_plan_dir() -> str:
    """$XDG_CACHE_HOME/benchmark-model-kernels/plans, or under ~/.cache (beside the result cache)."""
    from ..core.files import user_cache_dir

    return user_cache_dir("plans")


def code_digest() -> str:
    """Digest of the planner's code (every .py under plan/ and vllm_rules/, core's errors and plan schema)."""
    return digest_files(python_files(_PACKAGE, _PLAN_CODE), _PACKAGE)


def plan_key(raw: dict[str, Any], *, model: str, source: str, revision: str | None, tp: int, ep: int,
             allow_defaults: bool) -> str:
    from ..env.versions import dist_version

    record = {"format": KEY_FORMAT, "config": raw, "model": model, "source": source,
              "revision": revision, "tp": tp, "ep": ep, "allow_defaults": allow_defaults,
              "transformers": dist_version("transformers"), "torch": dist_version("torch"),
              "code": code_digest()}
    return json_digest(record)


def read_kept(folder: str, key: str) -> Plan | None:
    """The plan kept under `key`, or None (absent, unreadable, or not a plan this code reads)."""
    try:
        with open(os.path.join(folder, key + ".json"), encoding="utf-8") as f:
            return Plan.from_dict(json.load(f))
    except (OSError, ValueError, PlanError, TypeError, KeyError):
        return None


def keep(folder: str, key: str, plan: Plan) -> None:
    """Keep `plan` under `key`; a folder that cannot be written only costs the next run the time."""
    from ..core.files import write_text_atomic

    try:
        os.makedirs(folder, exist_ok=True)
        write_text_atomic(os.path.join(folder, key + ".json"), plan.to_json() + "\n")
    except OSError:
        pass


__all__ = ["code_digest", "default_plan_dir", "keep", "plan_key", "read_kept"]
