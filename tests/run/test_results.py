"""results.json checked on read (`validate_results`): each bad file is one row naming the JSON path,
the value and the fix; every results.json the tool wrote here (examples/, the hand-made fixtures)
passes; report.py turns a bad one into one `error:` line."""

from __future__ import annotations

import copy
import glob
import json
import os
import subprocess
import sys

import pytest

from benchmark_model_kernels.run.results import RESULTS_SCHEMA_VERSION, ResultsError, validate_results
from support import FIXTURES, ROOT

RESULTS_FIXTURES = os.path.join(FIXTURES, "results")


def fixture(name: str) -> dict:
    with open(os.path.join(RESULTS_FIXTURES, f"{name}.json")) as f:
        return json.load(f)


def _written_results() -> list[str]:
    return sorted(glob.glob(os.path.join(ROOT, "examples", "**", "results*.json"), recursive=True)
                  + glob.glob(os.path.join(RESULTS_FIXTURES, "*.json")))


@pytest.mark.parametrize("path", _written_results(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_written_results_file_passes(path):
    with open(path) as f:
        validate_results(json.load(f))


class _Drop:
    """The key is removed, not set."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()

BAD_RESULTS = [
    # (key path into tiny_mixed.json, value, the message: "<json path>=<value>: <fix>")
    ("schema_version", 2, f"schema_version=2: this tool reads results schema version {RESULTS_SCHEMA_VERSION}"),
    ("schema_version", "1", 'schema_version="1": this tool reads results schema version'),
    ("schema_version", DROP, "schema_version=null: this tool reads results schema version"),
    ("rows", {}, "rows={}: must be a list of row objects"),
    ("rows", DROP, "rows: missing; a benchmark results file holds a list of rows"),
    ("rows.0", "x", 'rows[0]="x": must be an object (one measurement)'),
    ("rows.0.m", "8", 'rows[0].m="8": must be an integer >= 1'),
    ("rows.0.m", 0, "rows[0].m=0: must be an integer >= 1"),
    ("rows.0.layers", 1.5, "rows[0].layers=1.5: must be an integer >= 1"),
    ("rows.0.n", -64, "rows[0].n=-64: must be an integer >= 0"),
    ("rows.0.median_us", "fast", 'rows[0].median_us="fast": must be a number (or null)'),
    ("rows.0.median_us", True, "rows[0].median_us=true: must be a number (or null)"),
    ("rows.0.with_quant", "no", 'rows[0].with_quant="no": must be true or false'),
    ("rows.0.status", "okay", "rows[0].status=\"okay\": must be one of 'ok', 'unsupported', 'failed'"),
    ("rows.0.kind", "conv", "rows[0].kind=\"conv\": must be one of 'gemm', 'moe'"),
    ("rows.0.timer", "wallclock", "rows[0].timer=\"wallclock\": must be one of 'cupti'"),
    ("rows.0.case_id", None, "rows[0].case_id=null: must be a string, not null"),
    ("rows.0.case_id", DROP, "rows[0].case_id: missing; every row records it"),
    ("settings", [], "settings=[]: must be an object"),
    ("plan", "qwen", 'plan="qwen": must be an object or null'),
    ("plan.gemms.0.n", -5, "plan.gemms[0].n=-5: must be a positive integer"),
    ("plan.model", DROP, "plan.model: missing; a plan needs it"),
]


def _set(d: dict, path: str, value: object) -> None:
    *parents, last = path.split(".")
    for part in parents:
        d = d[int(part)] if part.isdigit() else d[part]
    key = int(last) if last.isdigit() else last
    if value is DROP:
        del d[key]
    else:
        d[key] = value


@pytest.mark.parametrize("where,value,message", BAD_RESULTS, ids=[f"{r[0]}={r[1]!r}" for r in BAD_RESULTS])
def test_bad_results_name_path_value_and_fix(where, value, message):
    d = copy.deepcopy(fixture("tiny_mixed"))
    _set(d, where, value)
    with pytest.raises(ResultsError) as e:
        validate_results(d)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)  # callers catching ValueError (--resume) see it too


@pytest.mark.parametrize("payload", [[], "results", None, 3])
def test_top_level_must_be_an_object(payload):
    with pytest.raises(ResultsError, match=r"^\(top level\)=.*: must be a JSON object"):
        validate_results(payload)


def test_rows_written_before_a_field_and_unknown_keys_pass():
    d = fixture("tiny_mixed")
    d["rows"][0].pop("timer", None)  # a field added later: its default applies
    d["rows"][0]["from_a_newer_tool"] = 1  # ignored, as row_from_dict ignores it
    validate_results(d)


@pytest.mark.parametrize("where,value,fragment", [
    ("rows.0.m", "8", 'has a malformed row (rows[0].m="8": must be an integer >= 1)'),
    ("plan.gemms.0.n", -5, "has a malformed plan (plan.gemms[0].n=-5: must be a positive integer)"),
    ("settings", [], "has a malformed field (settings=[]: must be an object)"),
])
def test_report_cli_refuses_bad_results_in_one_line(tmp_path, where, value, fragment):
    d = fixture("tiny_mixed")
    _set(d, where, value)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(d))
    before = path.read_bytes()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "report.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: WORKDIR={tmp_path}: results.json ") and fragment in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert path.read_bytes() == before and not (tmp_path / "report.md").exists()


def test_every_row_field_has_a_check():
    """A Row field whose annotation the validator does not know would pass unchecked."""
    from dataclasses import fields

    from benchmark_model_kernels.run.results import Row

    for f in fields(Row):
        assert str(f.type) in {"str", "int", "bool", "int | None", "float | None", "list[float] | None"}, \
            f"Row.{f.name}: {f.type}"
