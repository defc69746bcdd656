"""Reading one field of a Hugging Face config under each of its spellings.

In: a transformers config object (or any object with attributes) and the names one field goes by
across model families (`hidden_size`, `n_embd`, `d_model`, ...). Out: the first one that is set, as
vLLM's model classes read it from their own config class.

This is the planner's one access point to config values, so it can also say which keys a plan was
built from: inside `recorded_reads()`, every name that supplied a value is recorded. A recorded
key that config.json does not hold came from the config class's default, not from the model
(plan/config_checks.py refuses those unless --allow_defaults).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: The names `config_value` read a value under, while a `recorded_reads()` block runs.
_reads: ContextVar[list[str] | None] = ContextVar("config_reads", default=None)


def config_value(cfg: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` that `cfg` sets to something other than None, else `default`."""
    for name in names:
        value = getattr(cfg, name, None)
        if value is not None:
            _record(name)
            return value
    return default


def _record(name: str) -> None:
    reads = _reads.get()
    if reads is not None and name not in reads:
        reads.append(name)


@contextmanager
def recorded_reads() -> Iterator[list[str]]:
    """The names `config_value` reads a value under inside the block, each once, in read order."""
    reads: list[str] = []
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


__all__ = ["config_value", "recorded_reads"]
