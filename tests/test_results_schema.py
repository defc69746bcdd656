"""references/results.schema.json: the published layout of results.json, kept equal to the code and
met by every results.json the repository ships (examples/, test fixtures)."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import MISSING, asdict, fields, replace

import pytest

from benchmark_model_kernels.core.results_schema import (
    ROW_CHOICES,
    ROW_POSITIVE,
    Row,
    load_results,
    results_text,
    row_from_dict,
    row_records,
    rows_of,
    validate_results,
)

jsonschema = pytest.importorskip("jsonschema")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_PATH = os.path.join(ROOT, "references", "results.schema.json")
COMMITTED = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "results.json"), recursive=True)
                   + glob.glob(os.path.join(ROOT, "tests", "fixtures", "results", "**", "*.json"), recursive=True))


def _schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def _validator():
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _row_schema(name: str, annotation: str) -> dict:
    """What the schema must say for a Row field: the rule core/results_schema.py validates with."""
    base, nullable = annotation.removesuffix(" | None"), annotation.endswith(" | None")
    sch: dict = {"str": {"type": "string"}, "bool": {"type": "boolean"}, "float": {"type": "number"},
                 "int": {"type": "integer", "minimum": 1 if name in ROW_POSITIVE else 0},
                 "list[float]": {"type": "array", "items": {"type": "number"}}}[base]
    if name in ROW_CHOICES:
        sch = {**sch, "enum": list(ROW_CHOICES[name])}
    if nullable:
        sch = {**sch, "type": [sch["type"], "null"]}
    return sch


def test_the_schema_row_is_exactly_the_row_dataclass():
    row = _schema()["$defs"]["row"]
    assert list(row["properties"]) == [f.name for f in fields(Row)]
    for f in fields(Row):
        assert row["properties"][f.name] == _row_schema(f.name, str(f.type)), f.name
    assert row["required"] == [f.name for f in fields(Row) if f.default is MISSING]


def test_there_are_committed_results_to_check():
    assert len([p for p in COMMITTED if os.sep + "examples" + os.sep in p]) >= 5


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_committed_results_json_meets_the_schema(path):
    with open(path) as f:
        payload = json.load(f)
    if not (isinstance(payload, dict) and "rows" in payload and payload.get("schema_version") == 1):
        pytest.skip("not a results.json of schema version 1 (a deliberately malformed fixture)")
    errors = sorted(_validator().iter_errors(payload), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5])


@pytest.mark.parametrize("bad", [
    {"status": "great"}, {"mode": "turbo"}, {"check": "maybe"}, {"m": 0}, {"p90_us": "fast"},
    {"samples_us": [1.0, "x"]}, {"n_samples": -1}, {"gated": "yes"},
])
def test_the_schema_and_the_validator_refuse_the_same_bad_rows(bad):
    row = {"case_id": "c", "kind": "gemm", "name": "g", "modules": "", "layers": 1, "m": 1, "dtype": "bf16",
           "backend": "torch", "routine": "torch.linear", "variant": "", "with_quant": False, **bad}
    payload = {"schema_version": 1, "rows": [row]}
    assert list(_validator().iter_errors(payload))
    with pytest.raises(ValueError):
        validate_results(payload)


def test_a_run_id_must_be_a_non_empty_string():
    assert list(_validator().iter_errors({"schema_version": 1, "run_id": "", "rows": []}))
    assert not list(_validator().iter_errors({"schema_version": 1, "run_id": "20261130T210500Z-3f2a9c1e",
                                              "rows": []}))


def test_a_results_json_the_runner_writes_meets_the_schema(tmp_path):
    from benchmark_model_kernels.cases.build import with_modes
    from helpers_runner import gemm_case, run_cases

    cases = with_modes([gemm_case(4096), gemm_case(4096, backend="cublaslt")], ["graph", "eager"])
    rc, _, _, workdir = run_cases(tmp_path, cases, modes=("graph", "eager"))
    results = load_results(workdir)
    assert rc == 0 and len(results["rows"]) == 4 and results["run_id"]
    errors = list(_validator().iter_errors(results))
    assert not errors, errors[0].message


def test_a_row_leaves_out_its_null_fields_and_reads_back_as_written(tmp_path):
    from helpers_runner import CUPTI_FALLBACK, gemm_case, run_cases

    rc, _, _, workdir = run_cases(tmp_path, [gemm_case(4096), gemm_case(CUPTI_FALLBACK)])
    with open(os.path.join(workdir, "results.json")) as f:
        text = f.read()
    results = json.loads(text)
    ok, failed = results["rows"]
    assert ok["status"] == "ok" and failed["status"] == "failed"
    # A GEMM row has no attention sizes, a failed one no times: neither is written.
    assert "kv_len" not in ok and "median_us" in ok and "median_us" not in failed and "samples_us" not in failed
    assert all(v is not None for row in (ok, failed) for k, v in row.items() if k != "gated")
    assert "gated" in ok and ok["gated"] is None
    rows = rows_of(results)
    assert rows[1].median_us is None and rows[0].kv_len is None and rows[0].median_us == ok["median_us"]
    # Read back and written again, the file is the same text.
    assert results_text({**results, "rows": row_records(results)}) == text


def test_an_moe_row_keeps_gated_false_which_its_activation_would_not_say():
    from benchmark_model_kernels.core.results_schema import row_text

    row = Row(case_id="moe.experts.m8.bf16.cutlass", kind="moe", name="experts", modules="mlp.experts",
              layers=48, m=8, dtype="bf16", backend="cutlass", routine="cutlass_fused_moe", variant="",
              with_quant=False, activation="silu", gated=False, status="unsupported", reason="test")
    back = row_from_dict(json.loads(row_text(asdict(row))))
    assert back == row and back.gated is False
    assert row_from_dict(json.loads(row_text(asdict(replace(row, gated=True))))).gated is True
