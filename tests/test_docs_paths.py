"""Every file of this project that the docs name (README.md, SKILL.md, references/, the READMEs of
examples/, benchmarks/ and tests/) exists: a script, test or benchmark renamed or removed must
take its mentions with it."""

from __future__ import annotations

import glob
import os
import re

import pytest

from support import ROOT

DOCS = sorted({os.path.relpath(p, ROOT) for pattern in (
    "README.md", "SKILL.md", "references/**/*.md", "examples/**/README.md", "benchmarks/**/*.md",
    "tests/**/README.md") for p in glob.glob(os.path.join(ROOT, pattern), recursive=True)})

# A path of this project: preceded by neither a word, a path nor a variable; a line number after a
# colon is not part of it.
_PATH = re.compile(r"(?<![\w/$.-])((?:scripts|benchmarks|tests)/[\w./-]*\w)")
# FlashInfer's own benchmarks/ (its driver and routines), which the docs cite by the same prefix.
FLASHINFER_PATHS = re.compile(r"^benchmarks/(flashinfer_benchmark\.py|routines/)")


@pytest.mark.parametrize("doc", DOCS)
def test_every_project_path_a_doc_names_exists(doc):
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    missing = sorted({p for p in _PATH.findall(text)
                      if not FLASHINFER_PATHS.match(p) and not os.path.exists(os.path.join(ROOT, p))})
    assert not missing, f"{doc} names {missing}"
