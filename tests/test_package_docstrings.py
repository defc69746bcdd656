"""Every module and sub-package of each package folder is named in its folder's `__init__.py`
docstring, so that docstring is a true map of the folder: a new module adds its phrase there."""

from __future__ import annotations

import ast
import os
import re

import pytest

from support import ROOT

PACKAGE = os.path.join(ROOT, "scripts", "benchmark_model_kernels")
FOLDERS = sorted(os.path.relpath(d, PACKAGE) for d, _, files in os.walk(PACKAGE)
                 if "__init__.py" in files and "__pycache__" not in d)


def _members(folder: str) -> list[str]:
    """The folder's modules (x.py) and sub-packages (x/ with an __init__.py)."""
    path = os.path.join(PACKAGE, folder)
    names = []
    for entry in sorted(os.listdir(path)):
        if entry.endswith(".py") and entry != "__init__.py":
            names.append(entry[:-3])
        elif os.path.isfile(os.path.join(path, entry, "__init__.py")):
            names.append(entry)
    return names


def _named(name: str, doc: str) -> bool:
    """`name`, `name.py` or `name/` in backticks (a folder may lead: `core/files.py`), or name.py
    or name/ as a word."""
    quoted = rf"`(?:[\w/]+/)?{re.escape(name)}(?:\.py|/)?`"
    bare = rf"(?<![\w.]){re.escape(name)}(?:\.py\b|/)"
    return re.search(quoted, doc) is not None or re.search(bare, doc) is not None


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_module_is_named_in_its_folders_docstring(folder):
    with open(os.path.join(PACKAGE, folder, "__init__.py")) as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    missing = [name for name in _members(folder) if not _named(name, doc)]
    where = os.path.normpath(os.path.join("scripts/benchmark_model_kernels", folder, "__init__.py"))
    assert not missing, f"{where}: its docstring names none of {missing} (one phrase each: what it is)"
