"""benchmarks/cache_check.py: every result-cache entry read and checked as a run reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support import ROOT

SCRIPT = os.path.join(ROOT, "benchmarks", "cache_check.py")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_a_poisoned_entry_and_a_link_are_invalid_and_exit_1(tmp_path):
    (tmp_path / "ab").mkdir()
    key = "ab" + "0" * 62
    (tmp_path / "ab" / f"{key}.json").write_text(json.dumps(
        {"key": key, "outcome": {"status": "ok", "median_us": -5.0}, "origin": {}}))
    (tmp_path / "ab" / "other.json").symlink_to(tmp_path / "ab" / f"{key}.json")
    out = _run(str(tmp_path), "--json", str(tmp_path / "record.json"))
    assert out.returncode == 1, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "2 entries, 0 valid, 2 invalid"
    record = json.loads((tmp_path / "record.json").read_text())
    problems = {item["entry"]: item["problem"] for item in record["invalid"]}
    assert "median_us" in problems[f"ab/{key}.json"]
    assert problems["ab/other.json"].startswith("cannot be read")


def test_an_empty_cache_is_valid_and_a_missing_one_is_exit_2(tmp_path):
    out = _run(str(tmp_path))
    assert out.returncode == 0 and out.stdout.strip() == "0 entries, 0 valid, 0 invalid"
    missing = _run(str(tmp_path / "absent"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
