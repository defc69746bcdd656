"""references/where_to_add.md names only what exists: every backticked path (package paths from
scripts/benchmark_model_kernels/, the rest from the repository root), and every table or function
named in parentheses after a Python file is defined in that file."""

from __future__ import annotations

import glob
import os
import re

from support import ROOT

PAGE = os.path.join(ROOT, "references", "where_to_add.md")
PACKAGE = os.path.join(ROOT, "scripts", "benchmark_model_kernels")
#: A backticked path: no spaces, and a folder in it or a file suffix.
_PATH = re.compile(r"`([^`\s]+)`")
_LOOKS_LIKE_PATH = re.compile(r"/|\.(py|md|json|toml|sh|txt)$")
#: `file.py` (`NAME`, ..., words): the backticked names in the parentheses are defined in that file.
_NAMED = re.compile(r"`([^`\s]+\.py)`\s+\(([^)]*)\)")


def _text() -> str:
    with open(PAGE) as f:
        return f.read()


def _resolve(path: str) -> str | None:
    for base in (ROOT, PACKAGE):
        hits = glob.glob(os.path.join(base, path))
        if hits:
            return hits[0]
    return None


def test_every_backticked_path_exists():
    paths = [p for p in _PATH.findall(_text()) if _LOOKS_LIKE_PATH.search(p) and not p.startswith(("$", "--"))]
    assert len(paths) > 50, "the page names its files"
    missing = sorted({p for p in paths if _resolve(p) is None})
    assert not missing, f"references/where_to_add.md names paths that do not exist: {missing}"


def test_every_named_table_or_function_is_defined_in_its_file():
    named = _NAMED.findall(_text())
    assert len(named) > 20
    undefined = []
    for path, names in named:
        found = _resolve(path)
        assert found, path
        with open(found) as f:
            code = f.read()
        for name in re.findall(r"`(\w+)`", names):
            if not re.search(rf"^\s*(?:def|class) {name}\b|^{name}\b\s*(?::[^=\n]*)?=", code, re.M):
                undefined.append(f"{path}: {name}")
    assert not undefined, f"references/where_to_add.md names what its file does not define: {undefined}"
