"""examples/ holds current evidence a reader can use: every folder indexed in examples/README.md,
every combined_results.csv in the current format, no machine's absolute path in a report or
README, no archive or workdir lock, and the whole folder under a size cap (it ships inside the
skill bundle an agent loads)."""

from __future__ import annotations

import csv
import os
import re

import pytest

from benchmark_model_kernels.core.results_schema import CSV_COLUMNS, RESULTS_CSV
from support import ROOT

EXAMPLES = os.path.join(ROOT, "examples")
INDEX = os.path.join(EXAMPLES, "README.md")
#: Folders whose sub-folders are indexed one by one (each question run on that GPU has a folder of its own).
GROUPS = ("h200", "h100")
#: The cap on examples/ in bytes: 16.4 MB once the reliability, triton_moe and deployment runs were
#: re-made with the current code on H100s, rounded up. The aim is under 10 MB;
#: lower it as runs are pruned, raise it only for a new question's run after deleting what that run
#: supersedes (git history keeps superseded runs).
SIZE_CAP_BYTES = 17 * 1000 * 1000

#: An absolute path of some machine: a "/" that starts a path (not "p10/p90", "deploy/data/",
#: "https://host/home/...", "~/flashinfer") followed by a top-level folder where runs, homes and
#: installs live. `$OUT/...` and relative paths are what a reader can use and are allowed.
MACHINE_PATH = re.compile(
    r"(?<![\w.~:/\\$-])/(?:tmp|root|work|home|Users|mnt|scratch|opt|usr|var|srv|data)(?=/|\b)")
#: Files that must not be committed under examples/: archives (opaque to a reader and to git) and
#: the lock a run holds on its workdir.
FORBIDDEN = re.compile(r"(\.tar\.gz|\.tgz|\.gz|\.xz|\.bz2|\.zst|\.zip|(^|/)run\.lock)$")


def _files() -> list[str]:
    out = []
    for top, dirs, names in os.walk(EXAMPLES):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(os.path.relpath(os.path.join(top, n), EXAMPLES) for n in sorted(names))
    return out


def _folders() -> list[str]:
    """Every folder directly under examples/ and under each GROUPS folder, as "name/"."""
    def subdirs(path: str) -> list[str]:
        return sorted(d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))
                      and not d.startswith((".", "__")))
    out = [f"{d}/" for d in subdirs(EXAMPLES)]
    for group in GROUPS:
        if os.path.isdir(os.path.join(EXAMPLES, group)):
            out += [f"{group}/{d}/" for d in subdirs(os.path.join(EXAMPLES, group))]
    return out


def _index_rows() -> dict[str, list[str]]:
    """examples/README.md's index table: first cell's folder -> the row's cells."""
    rows = {}
    with open(INDEX) as f:
        for line in f:
            m = re.match(r"\|\s*`([^`]+)`\s*\|", line)
            if m:
                rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    return rows


def test_every_examples_folder_is_in_the_index():
    rows = _index_rows()
    missing = [d for d in _folders() if d not in rows]
    assert not missing, f"examples/README.md's index has no row for {missing}: add one (question, " \
                        f"command, code commit, FlashInfer version, date)"


def test_every_index_row_names_a_folder_that_exists_and_says_how_it_was_made():
    rows = _index_rows()
    gone = [d for d in rows if not os.path.isdir(os.path.join(EXAMPLES, d))]
    assert not gone, f"examples/README.md indexes folders that are not there: {gone}"
    for folder, cells in rows.items():
        if folder.rstrip("/") in GROUPS:
            continue
        assert len(cells) == 6 and all(cells[1:]), \
            f"{folder}: a row needs the question, command, code, FlashInfer version and date: {cells}"


def test_every_committed_csv_has_the_current_columns():
    csvs = [p for p in _files() if os.path.basename(p) == RESULTS_CSV]
    assert csvs, "examples/ holds no combined_results.csv"
    wrong = []
    for rel in csvs:
        with open(os.path.join(EXAMPLES, rel), newline="") as f:
            header = next(csv.reader(f), [])
        if tuple(header) != CSV_COLUMNS:
            wrong.append(rel)
    assert not wrong, (f"not in the current CSV format (core/results_schema.py CSV_COLUMNS): {wrong}; "
                       f"write each again from its results.json with csv_text(rows_of(r), run_facts(r))")


def test_no_report_or_readme_names_a_machine_path():
    found = []
    for rel in _files():
        if os.path.basename(rel) not in ("report.md", "README.md"):
            continue
        with open(os.path.join(EXAMPLES, rel), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = MACHINE_PATH.search(line)
                if m:
                    found.append(f"{rel}:{n}: {line[max(0, m.start() - 20):m.start() + 40].strip()}")
    assert not found, "machine paths (re-render reports with scripts/report.py; in a README write " \
                      "a placeholder such as W for the GPU machine's folder):\n" + "\n".join(found)


@pytest.mark.parametrize("text, machine", [
    ("--workdir /tmp/kc", True), ("`/root/out/ev/x`", True), ("(/work/main/workdirs)", True),
    ("/home/user/x", True), ("p10/p90 and GB/s", False), ("deploy/data/comm.json", False),
    ("https://example.com/home/x", False), ("git clone ... ~/flashinfer", False),
    ("$OUT/ev/qwen", False), ("--workdir W", False),
])
def test_the_machine_path_pattern(text, machine):
    assert bool(MACHINE_PATH.search(text)) is machine


def test_no_archive_or_run_lock_is_committed():
    bad = [p for p in _files() if FORBIDDEN.search(p.replace(os.sep, "/"))]
    assert not bad, f"archives and workdir locks do not belong in examples/ (git history keeps " \
                    f"what an archive held): {bad}"


def test_examples_stay_under_the_size_cap():
    size = sum(os.path.getsize(os.path.join(EXAMPLES, p)) for p in _files())
    assert size <= SIZE_CAP_BYTES, (f"examples/ is {size / 1e6:.1f} MB, over its cap of "
                                    f"{SIZE_CAP_BYTES / 1e6:.0f} MB: prune superseded runs first")
