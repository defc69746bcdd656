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

from benchmark_model_kernels.core.results_schema import RESULTS_SCHEMA_VERSION, ResultsError, validate_results
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

    from benchmark_model_kernels.core.results_schema import Row

    for f in fields(Row):
        assert str(f.type) in {"str", "int", "bool", "bool | None", "int | None", "float | None",
                               "list[float] | None"}, \
            f"Row.{f.name}: {f.type}"


# ---------------------------------------------------------------- run facts: CSVs that concatenate


def _results(run_id, gpu, cc, model, tp, ep, rows):
    from dataclasses import asdict

    payload = {"schema_version": 1, "tool": {"name": "benchmark-model-kernels", "version": "0.1.0"},
               "timestamp": "2026-12-01T10:00:00+00:00", "command": ["benchmark_model.py", model],
               "environment": {"gpu": {"name": gpu, "compute_capability": cc},
                               "versions": {"flashinfer_wheel": "0.6.17"}},
               "plan": {"model": {"name": model}, "tp": tp, "ep": ep}, "rows": [asdict(r) for r in rows]}
    if run_id:
        payload["run_id"] = run_id
    return payload


def _row(case_id, median):
    from benchmark_model_kernels.core.results_schema import Row

    return Row(case_id=case_id, kind="gemm", name="qkv_proj", modules="", layers=32, m=8, dtype="bf16",
               backend="cudnn", routine="mm_bf16", variant="", with_quant=False, median_us=median,
               status="ok", samples_us=[median], p50_us=median, n_samples=1)


def test_csvs_of_two_runs_concatenate_into_one_table_that_tells_them_apart():
    import csv
    import io

    from benchmark_model_kernels.core.results_schema import CSV_COLUMNS, RUN_COLUMNS, csv_text, rows_of, run_facts

    a = _results("20261201T100000Z-aaaaaaaa", "NVIDIA H200", "9.0", "llama-3.1-8b", 1, 1,
                 [_row("gemm.qkv_proj.m8.bf16.cudnn", 10.0)])
    b = _results("20261201T110000Z-bbbbbbbb", "NVIDIA B200", [10, 0], "llama-3.1-8b", 4, 1,
                 [_row("gemm.qkv_proj.m8.bf16.cudnn", 4.0)])
    texts = [csv_text(rows_of(r), run_facts(r)) for r in (a, b)]
    # Concatenate as `tail -n +2` would: one header, every line of both.
    merged = texts[0] + "".join(texts[1].splitlines(keepends=True)[1:])
    table = list(csv.DictReader(io.StringIO(merged)))
    assert list(table[0]) == list(CSV_COLUMNS) and CSV_COLUMNS[: len(RUN_COLUMNS)] == RUN_COLUMNS
    assert [(t["run_id"], t["gpu"], t["compute_capability"], t["tp"], t["median_us"]) for t in table] == [
        ("20261201T100000Z-aaaaaaaa", "NVIDIA H200", "9.0", "1", "10.0"),
        ("20261201T110000Z-bbbbbbbb", "NVIDIA B200", "10.0", "4", "4.0"),
    ]
    assert all(t["tool_version"] == "0.1.0" and t["flashinfer_version"] == "0.6.17" for t in table)
    assert "samples_us" not in table[0] and table[0]["p50_us"] == "10.0"


def test_a_results_json_from_before_run_ids_gets_a_stable_derived_one():
    from benchmark_model_kernels.core.results_schema import derived_run_id, new_run_id, run_facts

    old = _results("", "NVIDIA H200", "9.0", "qwen3-30b-a3b", 1, 1, [])
    assert derived_run_id(old) == derived_run_id(dict(old)) and derived_run_id(old).startswith("legacy-")
    assert run_facts(old)["run_id"] == derived_run_id(old)
    assert run_facts({"rows": []})["gpu"] == ""  # nothing recorded: empty cells, never a guess
    ids = {new_run_id("2026-12-01T10:00:00+00:00") for _ in range(20)}
    assert len(ids) == 20 and all(i.startswith("20261201T100000Z-") for i in ids)


def test_settings_read_back_from_json_keep_their_modes_tuple():
    from dataclasses import asdict

    from benchmark_model_kernels.core.results_schema import RunSettings

    s = RunSettings(modes=("graph", "eager"), check=False)
    back = RunSettings.from_dict(json.loads(json.dumps(asdict(s))) | {"unknown_key": 1})
    assert back == s
