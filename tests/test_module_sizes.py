"""No module of the package is over MAX_LINES lines: a longer one is split by what its parts do."""

from __future__ import annotations

import os

from support import ROOT

PACKAGE = os.path.join(ROOT, "scripts", "benchmark_model_kernels")
MAX_LINES = 500

#: Modules over the limit while they are being split (path under the package: why it may be).
OVER_THE_LIMIT: dict[str, str] = {}


def _line_counts() -> dict[str, int]:
    counts = {}
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    counts[os.path.relpath(path, PACKAGE).replace(os.sep, "/")] = len(f.read().splitlines())
    return counts


def test_no_module_is_over_the_limit():
    over = {path: n for path, n in _line_counts().items() if n > MAX_LINES and path not in OVER_THE_LIMIT}
    assert not over, f"modules over {MAX_LINES} lines (split them by what their parts do): {over}"


def test_every_allowed_module_is_still_over_the_limit():
    counts = _line_counts()
    stale = [path for path in OVER_THE_LIMIT if counts.get(path, 0) <= MAX_LINES]
    assert not stale, f"{stale}: now within {MAX_LINES} lines (or gone); remove them from OVER_THE_LIMIT"
