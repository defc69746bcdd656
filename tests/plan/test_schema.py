"""A plan JSON read back is checked against the schema: each bad plan is one row naming the JSON
path, the value and the fix; every plan this tool writes (and every one recorded in a results.json
here) reads back unchanged."""

from __future__ import annotations

import copy
import glob
import json
import os
import subprocess
import sys

import pytest
from plan_helpers import plan_of

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.plan_schema import Plan, PlanError, read_plan_file, validate_plan_dict
from benchmark_model_kernels.plan import config_source
from support import ROOT


@pytest.fixture(scope="module")
def plan_dict() -> dict:
    """qwen3-30b-a3b at TP=2 EP=2, as its plan JSON holds it (GEMMs, one MoE entry with routing)."""
    return json.loads(plan_of("qwen3-30b-a3b", 2, 2).to_json())


def _set(d: dict, path: str, value: object) -> None:
    """Set `value` at a dotted path such as "gemms.2.n" (a value of DROP removes the key)."""
    *parents, last = path.split(".")
    for part in parents:
        d = d[int(part)] if part.isdigit() else d[part]
    if value is DROP:
        del d[int(last) if last.isdigit() else last]
    elif last.isdigit():
        d[int(last)] = value
    else:
        d[last] = value


class _Drop:
    """The key is removed, not set."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()

BAD_PLANS = [
    # (where, value, the message: "<json path>=<value>: <fix>")
    ("gemms.2.n", -5, "gemms[2].n=-5: must be a positive integer"),
    ("gemms.2.n", 0, "gemms[2].n=0: must be a positive integer"),
    ("gemms.2.n", 2.5, "gemms[2].n=2.5: must be a positive integer"),
    ("gemms.2.n", "64", 'gemms[2].n="64": must be a positive integer'),
    ("gemms.2.n", True, "gemms[2].n=true: must be a positive integer"),
    ("gemms.2.n", None, "gemms[2].n=null: must be a positive integer, not null"),
    ("gemms.0.k", 1 << 30, "gemms[0].k=1073741824: must be a positive integer"),
    ("gemms.0.layers", -1, "gemms[0].layers=-1: must be a positive integer up to 1048576"),
    ("gemms.0.parallel", "colum", 'gemms[0].parallel="colum": must be one of column, row, replicated, vocab'),
    ("gemms.0.bias", "no", 'gemms[0].bias="no": must be true or false'),
    ("gemms.0.modules", "model.layers.*.q_proj", 'gemms[0].modules="model.layers.*.q_proj": must be a list of'),
    ("gemms.0.name", "", 'gemms[0].name="": must not be empty'),
    ("gemms.0.n", DROP, "gemms[0].n: missing; a GEMM entry needs it"),
    ("gemms.0.bais", True, "gemms[0].bais=true: unknown field of a GEMM entry (it has name, modules, n, k"),
    ("gemms.0", 7, "gemms[0]=7: must be a JSON object (a GEMM entry)"),
    ("gemms", {}, "gemms={}: must be a list, each item a GEMM entry"),
    ("moe.0.experts", 0, "moe[0].experts=0: must be a positive integer"),
    ("moe.0.top_k", 129, "moe[0].top_k=129: exceeds global_experts=128; top-k must be between 1 and 128"),
    ("moe.0.experts", 200, "moe[0].experts=200: exceeds global_experts=128"),
    ("moe.0.intermediate", -384, "moe[0].intermediate=-384: must be a positive integer"),
    ("moe.0.ep_rank", -1, "moe[0].ep_rank=-1: must be an integer >= 0"),
    ("moe.0.activation", 3, "moe[0].activation=3: must be a string"),
    ("moe.0.routing.scoring_func", "tanh", 'moe[0].routing.scoring_func="tanh": must be one of softmax, sigmoid'),
    ("moe.0.routing.routed_scaling_factor", "2.5", 'moe[0].routing.routed_scaling_factor="2.5": must be a finite'),
    ("moe.0.routing.n_group", 0, "moe[0].routing.n_group=0: must be a positive integer"),
    ("moe.0.routing", [], "moe[0].routing=[]: must be a JSON object (a routing)"),
    ("model.name", DROP, "model.name: missing; the model info needs it"),
    ("model.notes", [1], "model.notes=[1]: must be a list of strings"),
    ("model.hidden_size", -1, "model.hidden_size=-1: must be an integer >= 0"),
    ("tp", 0, "tp=0: must be a positive integer"),
    ("ep", "2", 'ep="2": must be a positive integer'),
    ("schema_version", 2, "schema_version=2: this tool reads plan schema version 1; the plan comes from a newer"),
    ("schema_version", 0, "schema_version=0: must be a plan schema version (this tool reads 1)"),
    ("gemm", [], "gemm=[]: unknown field of a plan (it has model, tp, ep, gemms, moe, attention, "
                 "mixers_not_timed, unsupported, schema_version, cross_check)"),
    ("unsupported.0", {"module": "m", "n": -1, "k": 2, "reason": "r"}, "unsupported[0].n=-1: must be an integer >= 0"),
]


@pytest.mark.parametrize("where,value,message", BAD_PLANS, ids=[f"{r[0]}={r[1]!r}" for r in BAD_PLANS])
def test_bad_plan_names_path_value_and_fix(plan_dict, where, value, message):
    d = copy.deepcopy(plan_dict)
    if where.startswith("unsupported"):
        d["unsupported"] = [None]
    _set(d, where, value)
    with pytest.raises(PlanError) as e:
        Plan.from_dict(d)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_routing_relation_topk_group_within_n_group(plan_dict):
    d = copy.deepcopy(plan_dict)
    d["moe"][0]["routing"].update(n_group=4, topk_group=8)
    with pytest.raises(PlanError, match=r"^moe\[0\]\.routing\.topk_group=8: exceeds n_group=4"):
        validate_plan_dict(d)


def test_top_level_must_be_an_object():
    with pytest.raises(PlanError, match=r"^\(top level\)=\[1\]: must be a JSON object \(a plan\)"):
        Plan.from_dict([1])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", config_source.list_bundled())
def test_every_written_plan_reads_back(name):
    for tp, ep in ((1, 1), (8, 1), (8, 8)):
        try:
            plan = plan_of(name, tp, ep)
        except UsageError:  # a TP or EP the model does not take
            continue
        assert Plan.from_json(plan.to_json()) == plan
        assert Plan.from_dict(plan.to_dict()) == plan  # to_dict holds tuples where JSON has lists


def test_plans_recorded_in_results_read_back():
    paths = glob.glob(os.path.join(ROOT, "examples", "**", "results.json"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "tests", "fixtures", "results", "*.json"))
    plans = [p for p in (json.load(open(path)).get("plan") for path in paths) if p]
    assert plans
    for plan in plans:
        validate_plan_dict(plan)


def test_older_plans_without_optional_fields_read_back(plan_dict):
    d = copy.deepcopy(plan_dict)
    for m in d["moe"]:
        del m["tokens_per_m"], m["routing"]  # written before the fields existed
    del d["schema_version"], d["model"]["fp8_scheme"]
    plan = Plan.from_dict(d)
    assert plan.moe[0].routing.method == "renormalize" and plan.moe[0].tokens_per_m == 1


def test_the_token_factor_of_older_plans_is_the_layouts():
    """core restates Layout.tokens_per_m for plans written before the field; the two must agree."""
    from benchmark_model_kernels.core.plan_schema import tokens_per_m_of_flags
    from benchmark_model_kernels.vllm_rules.layout import Layout

    for tp in (1, 2, 4, 8, 16):
        for ep in (1, 2, 4, 8, 16, 32, 64, 128):
            if ep == 1 or ep % tp == 0:
                assert tokens_per_m_of_flags(tp, ep) == Layout.from_flags(tp, ep).tokens_per_m, (tp, ep)
            else:
                assert tokens_per_m_of_flags(tp, ep) == 1, (tp, ep)  # a pair vLLM refuses


# ------------------------------------------------------------------ the file and the CLI
def test_read_plan_file_is_one_usage_line(tmp_path, plan_dict):
    p = tmp_path / "p.json"
    d = copy.deepcopy(plan_dict)
    d["gemms"][2]["n"] = -5
    p.write_text(json.dumps(d))
    with pytest.raises(UsageError) as e:
        read_plan_file(str(p))
    assert str(e.value) == f"--plan={p}: gemms[2].n=-5: must be a positive integer"
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        read_plan_file(str(p))
    p.write_text("{nope")
    with pytest.raises(UsageError, match=r"is not valid JSON \(line 1"):
        read_plan_file(str(p))
    with pytest.raises(UsageError, match="cannot be read"):
        read_plan_file(str(tmp_path / "missing.json"))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(plan_dict))
    assert read_plan_file(str(good)).to_dict() == Plan.from_dict(plan_dict).to_dict()


@pytest.mark.parametrize("where,value,message", [
    ("gemms.2.n", -5, "gemms[2].n=-5: must be a positive integer"),
    ("schema_version", 9, "schema_version=9: this tool reads plan schema version 1"),
    ("moe.0.top_k", 500, "moe[0].top_k=500: exceeds global_experts=128"),
])
def test_builtin_cli_refuses_a_bad_plan_in_one_line(tmp_path, plan_dict, where, value, message):
    d = copy.deepcopy(plan_dict)
    _set(d, where, value)
    p = tmp_path / "p.json"
    p.write_text(json.dumps(d))
    before = p.read_bytes()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_via_builtin.py"), "--plan", str(p),
                        "--workdir", str(tmp_path / "w"), "--dry_run"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --plan={p}: ") and message in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert p.read_bytes() == before


def test_every_schema_field_has_a_check():
    """A field whose annotation the validator does not know would pass unchecked."""
    from dataclasses import fields

    from benchmark_model_kernels.core import plan_schema as schema

    scalars = {"str", "int", "bool", "bool | None", "str | None", "int | None", "float | None", "tuple[str, ...]"}
    for klass in (schema.Plan, schema.ModelInfo, schema.GemmEntry, schema.MoeEntry, schema.Routing,
                  schema.Unsupported, schema.AttentionEntry, schema.MixerNotTimed):
        for f in fields(klass):
            assert str(f.type) in scalars or str(f.type) in schema.NESTED, f"{klass.__name__}.{f.name}: {f.type}"
