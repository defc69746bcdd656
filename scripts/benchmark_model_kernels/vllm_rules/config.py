"""Reading one field of a Hugging Face config under each of its spellings.

In: a transformers config object (or any object with attributes) and the names one field goes by
across model families (`hidden_size`, `n_embd`, `d_model`, ...). Out: the first one that is set, as
vLLM's model classes read it from their own config class.
"""

from __future__ import annotations

from typing import Any


def config_value(cfg: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` that `cfg` sets to something other than None, else `default`."""
    for name in names:
        value = getattr(cfg, name, None)
        if value is not None:
            return value
    return default


__all__ = ["config_value"]
