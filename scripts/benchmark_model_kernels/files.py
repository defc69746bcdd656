"""Writing files so that a crash or an interrupt never leaves half of one."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def write_text_atomic(path: str, text: str) -> None:
    """Write `text` to `path` through a temp file unique to this writer in the same folder, then
    rename: readers see the old file or the new one, and two writers never share a temp file."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str, payload: Any) -> None:
    """`payload` as indented JSON (one space, trailing newline), written atomically."""
    write_text_atomic(path, json.dumps(payload, indent=1) + "\n")


__all__ = ["write_json_atomic", "write_text_atomic"]
