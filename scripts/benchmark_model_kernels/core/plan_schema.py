"""The shape plan: every per-rank GEMM and fused-MoE problem one GPU runs in one vLLM forward step.

Schema-first: these frozen dataclasses ARE the plan JSON (`Plan.to_json()` / `Plan.from_json()`;
the entries it holds are in `plan_entries`), written by `benchmark_model.py --plan_json` and
consumed by the runner (`--plan`). Sizes are per-rank *logical* sizes (what vLLM's layer shapes
are, before any backend padding); `layers` are per-step invocation counts on one rank.

A plan read back (`Plan.from_dict`, `from_json`, `read_plan_file`) is checked against these classes
first (`validate_plan_dict`): every field's JSON type, sizes and counts positive integers, the
enumerated values, no unknown fields, a schema version this tool reads. A mismatch is a `PlanError`
naming the JSON path, e.g. `gemms[2].n=-5: must be a positive integer`.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, Field, asdict, dataclass, fields
from typing import Any

from .errors import UsageError, shown_value
from .plan_entries import (
    ATTENTION_KINDS,
    CROSS_CHECK_STATUSES,
    PARALLEL_KINDS,
    ROUTING_METHODS,
    SCORING_FUNCS,
    AttentionEntry,
    CrossCheck,
    GemmEntry,
    MixerNotTimed,
    ModelInfo,
    MoeEntry,
    Routing,
    Unsupported,
)

PLAN_SCHEMA_VERSION = 1


def tokens_per_m_of_flags(tp: int, ep: int) -> int:
    """`MoeEntry.tokens_per_m` of a plan written before the field at `--tp TP --ep EP`:
    vllm_rules.layout.Layout.tokens_per_m (DP = EP/TP under expert parallelism, 1 without it),
    restated here because core reads no floor above it and every plan reader (report/ too) goes
    through `Plan.from_dict`; tests/plan/test_schema.py checks that the two agree. A pair vLLM
    refuses (EP not a multiple of TP; the planner never writes one) reads 1."""
    return ep // tp if ep > 1 and ep % tp == 0 else 1


@dataclass(frozen=True)
class Plan:
    """Everything one rank runs: the runner's input, the preview's content."""

    model: ModelInfo
    tp: int
    ep: int
    gemms: tuple[GemmEntry, ...] = ()
    moe: tuple[MoeEntry, ...] = ()
    attention: tuple[AttentionEntry, ...] = ()
    """Attention layer types of one rank (timed as `attention` cases at each KV length)."""
    mixers_not_timed: tuple[MixerNotTimed, ...] = ()
    """Token mixers no row times, each with its reason (never silently left out)."""
    unsupported: tuple[Unsupported, ...] = ()
    schema_version: int = PLAN_SCHEMA_VERSION
    cross_check: CrossCheck | None = None
    """Set by `--cross_check vllm`: what vLLM itself builds for this config and layout."""

    @property
    def complete(self) -> bool:
        return not self.unsupported

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Plan":
        """The plan a `to_dict()` dict describes; `PlanError` when it does not match the schema."""
        validate_plan_dict(d)

        def build(klass: Any, raw: dict[str, Any]) -> Any:
            names = {f.name for f in fields(klass)}
            kw = {k: v for k, v in raw.items() if k in names}
            for k, v in kw.items():
                if isinstance(v, list):
                    kw[k] = tuple(v)
            return klass(**kw)

        tp, ep = int(d["tp"]), int(d["ep"])
        moe = []
        for m in d.get("moe", []):
            m = dict(m)
            m["routing"] = build(Routing, m.get("routing") or {"method": "renormalize"})
            if "tokens_per_m" not in m:  # plans written before the field: the same rule
                m["tokens_per_m"] = tokens_per_m_of_flags(tp, ep)
            moe.append(build(MoeEntry, m))
        return cls(
            model=build(ModelInfo, d["model"]),
            tp=tp,
            ep=ep,
            gemms=tuple(build(GemmEntry, g) for g in d.get("gemms", [])),
            moe=tuple(moe),
            unsupported=tuple(build(Unsupported, u) for u in d.get("unsupported", [])),
            schema_version=int(d.get("schema_version", PLAN_SCHEMA_VERSION)),
            cross_check=build(CrossCheck, d["cross_check"]) if d.get("cross_check") else None,
            attention=tuple(build(AttentionEntry, a) for a in d.get("attention", [])),
            mixers_not_timed=tuple(build(MixerNotTimed, x) for x in d.get("mixers_not_timed", [])),
        )

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        return cls.from_dict(json.loads(text))


# ------------------------------------------------------------------ validation
class PlanError(ValueError):
    """A plan dict that does not match the schema: `<json path>=<value>: <fix>`."""

    def __init__(self, path: str, value: object, fix: str, *, missing: bool = False):
        self.path, self.value, self.fix, self.missing = path, value, fix, missing
        super().__init__(f"{path}: missing; {fix}" if missing else f"{path}={shown_value(value)}: {fix}")


#: Largest per-rank GEMM or expert dimension accepted (a vocabulary of 2^24 at TP=1 fits).
MAX_DIM = 1 << 26
#: Largest count (per-step invocations, experts, TP/EP sizes) accepted.
MAX_COUNT = 1 << 20

#: (class, field) -> the integers it may hold; any other int field holds 0 to MAX_DIM.
INT_RANGES: dict[tuple[type, str], tuple[int, int]] = {
    **{(GemmEntry, f): (1, MAX_DIM) for f in ("n", "k")},
    **{(GemmEntry, f): (1, MAX_COUNT) for f in ("layers", "m_divisor")},
    **{(MoeEntry, f): (1, MAX_DIM) for f in ("hidden", "intermediate")},
    **{(MoeEntry, f): (1, MAX_COUNT) for f in ("experts", "global_experts", "top_k", "layers", "tokens_per_m")},
    (MoeEntry, "ep_rank"): (0, MAX_COUNT),
    **{(Routing, f): (1, MAX_COUNT) for f in ("n_group", "topk_group")},
    **{(ModelInfo, f): (0, MAX_DIM) for f in ("num_hidden_layers", "hidden_size", "vocab_size")},
    **{(Unsupported, f): (0, MAX_DIM) for f in ("n", "k")},
    **{(Plan, f): (1, MAX_COUNT) for f in ("tp", "ep")},
    **{(AttentionEntry, f): (1, MAX_DIM) for f in ("num_q_heads", "num_kv_heads", "head_dim_qk", "head_dim_vo",
                                                    "total_q_heads", "total_kv_heads")},
    (AttentionEntry, "layers"): (1, MAX_COUNT),
    (MixerNotTimed, "layers"): (1, MAX_COUNT),
}
#: (class, field) -> the strings it may hold.
CHOICES: dict[tuple[type, str], tuple[str, ...]] = {
    (GemmEntry, "parallel"): PARALLEL_KINDS,
    (Routing, "scoring_func"): SCORING_FUNCS,
    (Routing, "method"): ROUTING_METHODS,
    (CrossCheck, "status"): CROSS_CHECK_STATUSES,
    (AttentionEntry, "kind"): ATTENTION_KINDS,
}
#: (class, field) of strings that must not be empty.
NON_EMPTY = {(GemmEntry, "name"), (MoeEntry, "name"), (MoeEntry, "activation"), (Routing, "method"),
             (ModelInfo, "name"), (CrossCheck, "against"), (AttentionEntry, "name"),
             (MixerNotTimed, "name"), (MixerNotTimed, "reason")}
#: Annotation of a nested field -> its class (a one-item tuple: a list of them).
NESTED: dict[str, Any] = {
    "ModelInfo": ModelInfo, "Routing": Routing, "tuple[GemmEntry, ...]": (GemmEntry,),
    "tuple[MoeEntry, ...]": (MoeEntry,), "tuple[Unsupported, ...]": (Unsupported,),
    "CrossCheck | None": CrossCheck, "tuple[AttentionEntry, ...]": (AttentionEntry,),
    "tuple[MixerNotTimed, ...]": (MixerNotTimed,),
}
#: (class, field) with no default that `from_dict` fills when a plan predates it (routing: renormalize).
FILLED_ON_READ = {(MoeEntry, "routing")}
#: What a plan entry is called in a message.
WHAT = {Plan: "a plan", ModelInfo: "the model info", GemmEntry: "a GEMM entry", MoeEntry: "an MoE entry",
        Routing: "a routing", Unsupported: "an unsupported module", CrossCheck: "a cross-check",
        AttentionEntry: "an attention entry", MixerNotTimed: "a mixer not timed"}




def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type_ok(base: str, value: object) -> bool:
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return {"str": isinstance(value, str), "bool": isinstance(value, bool), "int": _is_int(value)}.get(base, True)


def _check_scalar(klass: type, name: str, annotation: str, value: object, path: str) -> None:
    base, nullable = annotation.removesuffix(" | None"), annotation.endswith(" | None")
    if value is None:
        if not nullable:
            raise PlanError(path, value, f"must be {_wanted(klass, name, base)}, not null")
        return
    if not _type_ok(base, value):
        raise PlanError(path, value, f"must be {_wanted(klass, name, base)}")
    if isinstance(value, int) and base == "int":
        low, high = INT_RANGES.get((klass, name), (0, MAX_DIM))
        if not low <= value <= high:
            raise PlanError(path, value, f"must be {_wanted(klass, name, base)}")
    choices = CHOICES.get((klass, name))
    if choices and value not in choices:
        raise PlanError(path, value, f"must be one of {', '.join(choices)}")
    if (klass, name) in NON_EMPTY and not value:
        raise PlanError(path, value, "must not be empty")


def _wanted(klass: type, name: str, base: str) -> str:
    """How a field's value is described in a message: "a positive integer", "a string", ..."""
    if base == "int":
        low, high = INT_RANGES.get((klass, name), (0, MAX_DIM))
        kind = "a positive integer" if low >= 1 else "an integer >= 0"
        return kind if high >= MAX_DIM else f"{kind} up to {high}"
    return {"str": "a string", "bool": "true or false", "float": "a finite number"}.get(base, base)


def _check_field(klass: type, f: Field[Any], value: object, path: str) -> None:
    annotation = str(f.type)
    nested = NESTED.get(annotation)
    if nested is None and annotation.startswith("tuple["):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise PlanError(path, value, "must be a list of strings")
    elif isinstance(nested, tuple):
        if not isinstance(value, (list, tuple)):  # a to_dict() dict holds tuples where JSON has lists
            raise PlanError(path, value, f"must be a list, each item {WHAT[nested[0]]}")
        for i, item in enumerate(value):
            _check_object(nested[0], item, f"{path}[{i}]")
    elif nested is not None:
        if value is None and ((klass, f.name) in FILLED_ON_READ or annotation.endswith(" | None")):
            return
        _check_object(nested, value, path)
    else:
        _check_scalar(klass, f.name, annotation, value, path)


def _check_object(klass: type, raw: object, path: str) -> None:
    """`raw` is a JSON object with the fields of `klass`, each of its annotated type and range."""
    if not isinstance(raw, dict):
        raise PlanError(path or "(top level)", raw, f"must be a JSON object ({WHAT[klass]})")
    known = [f.name for f in fields(klass)]
    for key in raw:
        if key not in known:
            raise PlanError(_at(path, key), raw[key], f"unknown field of {WHAT[klass]} (it has {', '.join(known)}); "
                            "a plan from a newer tool version?")
    for f in fields(klass):
        if f.name in raw:
            _check_field(klass, f, raw[f.name], _at(path, f.name))
        elif f.default is MISSING and f.default_factory is MISSING and (klass, f.name) not in FILLED_ON_READ:
            raise PlanError(_at(path, f.name), None, f"{WHAT[klass]} needs it; write the plan with "
                            "benchmark_model.py --plan_json", missing=True)


def _check_moe_relations(moe: list[dict[str, Any]], ep: int = 1) -> None:
    """Expert counts that contradict each other: more local than global experts, top-k above them,
    an EP size above them (each EP rank holds global_experts // EP of them, so a rank beyond the
    experts holds none: vllm/model_executor/layers/fused_moe/expert_map_manager.py
    determine_expert_map)."""
    for i, m in enumerate(moe):
        e, total, top_k = m["experts"], m["global_experts"], m["top_k"]
        if ep > total:
            raise PlanError("ep", ep, f"exceeds global_experts={total} of moe[{i}]; an EP size above the "
                            "routed experts leaves ranks with no expert")
        if e > total:
            raise PlanError(f"moe[{i}].experts", e, f"exceeds global_experts={total}; the experts on one rank "
                            "are a share of all routed experts")
        if top_k > total:
            raise PlanError(f"moe[{i}].top_k", top_k, f"exceeds global_experts={total}; top-k must be between "
                            f"1 and {total}")
        routing = m.get("routing") or {}
        n_group, topk_group = routing.get("n_group"), routing.get("topk_group")
        if n_group is not None and topk_group is not None and topk_group > n_group:
            raise PlanError(f"moe[{i}].routing.topk_group", topk_group, f"exceeds n_group={n_group}")


def _check_schema_version(version: object) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PlanError("schema_version", version, f"must be a plan schema version (this tool reads "
                        f"{PLAN_SCHEMA_VERSION}); write the plan with benchmark_model.py --plan_json")
    if version > PLAN_SCHEMA_VERSION:
        raise PlanError("schema_version", version, f"this tool reads plan schema version {PLAN_SCHEMA_VERSION}; "
                        "the plan comes from a newer tool version: use that version, or write the plan again "
                        "with this one (benchmark_model.py --plan_json)")


def validate_plan_dict(d: object) -> None:
    """Raise `PlanError` (a ValueError) unless `d` is a plan dict this tool reads: the schema
    version first (a newer plan may differ anywhere), then every field, then the expert counts."""
    if isinstance(d, dict) and "schema_version" in d:
        _check_schema_version(d["schema_version"])
    _check_object(Plan, d, "")
    assert isinstance(d, dict)
    _check_moe_relations(d.get("moe", []), d["ep"])
    for part in ("gemms", "moe", "attention"):
        _check_unique_names(d.get(part, []), part)


def _check_unique_names(entries: list[dict[str, Any]], part: str) -> None:
    """Entry names of one kind are its rows' case ids, as case_schema.id_part writes them
    ([A-Za-z0-9._-], others made "-"): two that read the same there ("a/b", "a-b") would be one row."""
    from .case_schema import id_part  # case_schema reads this module's Routing

    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        name = entry["name"]
        key = id_part(name)
        if key in seen:
            same = "is given twice" if seen[key] == name else f"and {seen[key]!r} are both {key!r} in a case id"
            raise PlanError(f"{part}[{i}].name", name, f"{same}; names of one kind must differ, so rename one")
        seen[key] = name


def read_plan_file(path: str, field: str = "--plan") -> Plan:
    """The plan JSON at `path`; anything wrong with it is one `UsageError` line naming `field`, the
    file and, for a schema mismatch, the JSON path: `--plan=p.json: gemms[2].n=-5: must be ...`."""
    write_one = "write one with benchmark_model.py MODEL --plan_json plan.json"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(field, path, f"cannot be read ({e.strerror}); pass a file written by "
                         "benchmark_model.py --plan_json") from None
    except UnicodeDecodeError:
        raise UsageError(field, path, f"is not UTF-8 text, so not a plan JSON; {write_one}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(field, path, f"is not valid JSON (line {e.lineno}: {e.msg}); {write_one}") from None
    try:
        return Plan.from_dict(raw)
    except PlanError as e:
        raise UsageError(field, path, str(e)) from None


__all__ = [
    "PLAN_SCHEMA_VERSION",
    "tokens_per_m_of_flags",
    "PARALLEL_KINDS",
    "SCORING_FUNCS",
    "PlanError",
    "validate_plan_dict",
    "read_plan_file",
    "ModelInfo",
    "GemmEntry",
    "Routing",
    "MoeEntry",
    "Unsupported",
    "CrossCheck",
    "CROSS_CHECK_STATUSES",
    "AttentionEntry",
    "ATTENTION_KINDS",
    "MixerNotTimed",
    "Plan",
]
