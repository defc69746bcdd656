"""Results: `results.json` is the source of truth; `combined_results.csv` is derived from it.

results.json layout (schema_version 1):

    {
      "schema_version": 1,
      "run_id": "20261130T210500Z-3f2a9c1e",                          # unique per run (new_run_id)
      "tool": {"name": "benchmark-model-kernels", "version": "..."},
      "command": ["scripts/benchmark_model.py", "llama-3.1-8b", ...],   # argv as run
      "timestamp": "2026-11-30T21:05:00+00:00",                      # UTC, ISO 8601
      "environment": {...},          # environment.collect(): GPU, versions, timer probe (free-form dict)
      "settings": {...},             # RunSettings as a dict
      "plan": {...} | null,          # plan.Plan.to_dict() when run from a plan
      "notes": {"quant_timing": "how *_with_quant rows were measured", ...},
      "rows": [Row, ...]             # one per Case, in case order; null fields left out (row_text)
    }

Every Case yields exactly one Row (`row_schema.py`: the Row dataclass, its statuses and the checks
of its fields; its names are importable from here too). This module holds the file around the
rows: the RunSettings it records, reading it back, the run facts and the CSV. The JSON Schema of
this layout is references/results.schema.json.

`validate_results(payload)` checks a results.json read back (the report's input, and the rows
--resume keeps) against this layout: a `ResultsError` (a ValueError) names the JSON path, e.g.
`rows[3].m="8": must be an integer >= 1`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, Sequence

from .case_schema import DEFAULT_KV_LENS, KV_DTYPES, VLLM_BLOCK_SIZE, AttentionSweep
from .plan_schema import PlanError, validate_plan_dict
from .row_schema import (
    CHECKS,
    MODES,
    ROW_CHOICES,
    ROW_POSITIVE,
    STATUSES,
    TIME_FIELDS,
    TIMERS,
    ResultsError,
    Row,
    check_row,
    check_row_fields,
    row_from_dict,
    row_problem,
)

RESULTS_SCHEMA_VERSION = 1
RESULTS_JSON = "results.json"
RESULTS_CSV = "combined_results.csv"


#: --autotune_buckets values (RunSettings.autotune_buckets).
AUTOTUNE_BUCKETS = ("all", "timed")


@dataclass(frozen=True)
class RunSettings:
    """How the measurements were taken (recorded in results.json)."""

    dry_run_iters: int = 5
    """Warm-up iterations per measurement (FlashInfer --dry_run_iters)."""
    num_iters: int = 30
    """Measured iterations (FlashInfer --num_iters)."""
    cuda_graph: bool = True
    """Replay the op in a CUDA graph (FlashInfer default). In the run's record: whether "graph" is
    among `modes`; for one case (run/argv.py `case_settings`): whether that case replays a graph."""
    autotune: bool = True
    """FlashInfer autotuning before timing (--no_autotune turns it off)."""
    autotune_cache: str = ""
    """Path of FlashInfer's --autotune_cache JSON (by default per user and environment, run/tuning_cache.py)."""
    autotune_buckets: str = "timed"
    """Token counts FlashInfer's autotuner profiles for a GEMM driver case (--autotune_buckets):
    "timed", only M, the one bucket the timed call reads (run/argv.py tuning_buckets); "all", its
    own buckets 1, 2, 4, ... up to the case's M. A results.json without the field was "all"
    (SETTINGS_BEFORE_RECORDED)."""
    autotune_tactics: int = 8
    """cuDNN tactics FlashInfer's autotuner profiles per GEMM shape (--autotune_tactics): the
    first N execution plans in cuDNN's own heuristic order (run/argv.py tactic_cap); 0 profiles
    every plan, as FlashInfer alone does. A results.json without the field profiled every plan
    (SETTINGS_BEFORE_RECORDED)."""
    allow_cuda_events: bool = False
    """Accept rows timed with CUDA events when CUPTI is unavailable (otherwise they are failed)."""
    case_timeout: float = 600.0
    """Seconds one case may take before its worker process is killed and the case marked failed."""
    cold_l2: bool = True
    """L2 flushed before every iteration (always true for FlashInfer's GEMM/MoE routines)."""
    modes: tuple[str, ...] = ("graph",)
    """Timing modes every case runs in (--modes): "graph" (CUDA-graph replay) and/or "eager"."""
    check: bool = True
    """Compare each case's output with a reference once, outside the timed region (--no_check)."""
    attention: bool = True
    """Attention cases planned (--no_attention turns them off)."""
    kv_lens: tuple[int, ...] = DEFAULT_KV_LENS
    """Cached tokens each attention decode sequence reads (--kv_lens)."""
    prefill_lens: tuple[int, ...] = ()
    """Prompt lengths of the attention prefill cases (--prefill_lens; none by default)."""
    kv_dtypes: tuple[str, ...] = KV_DTYPES
    """KV-cache dtypes of the attention cases (--kv_dtypes)."""
    page_size: int = VLLM_BLOCK_SIZE
    """Tokens per KV-cache page of the attention cases (--page_size; vLLM's default block size)."""
    attention_fill: str = "gpu"
    """Where the attention cases' K/V caches are drawn: "gpu", the driver's large draws made on the
    GPU (run/driver_fills.py); "cpu" (--attention_cpu_fill), on the CPU and copied, as FlashInfer's
    driver does. A results.json without the field drew on the CPU."""
    search_moe_tiles: bool = False
    """Triton fused-MoE rows also timed with tiles searched on this GPU, the `tuned` twins
    (--search_moe_tiles): what vLLM runs with a tuned config file. A results.json without the field
    planned them."""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSettings:
        """The settings `asdict` wrote (JSON turns the tuples into lists)."""
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in d.items() if k in known}
        for key in ("modes", "kv_lens", "prefill_lens", "kv_dtypes"):
            if key in kept:
                kept[key] = tuple(kept[key])
        return cls(**kept)

    @property
    def attention_sweep(self) -> AttentionSweep:
        """What the attention cases cover under these settings."""
        return AttentionSweep(kv_lens=self.kv_lens, prefill_lens=self.prefill_lens,
                              kv_dtypes=self.kv_dtypes, page_size=self.page_size,
                              enabled=self.attention)


#: RunSettings fields that never change a row (where the autotuner keeps its file; how long a
#: case may take before it is failed; the run's other timing modes: each case has its own).
#: The attention sweep settings and --search_moe_tiles decide which cases exist, not how one is
#: timed (its case carries its shape and variant), so they are no part of a result-cache key
#: either; nor is where the K/V cache's random values are drawn (the same distribution either
#: way, the kernel reads the same bytes).
UNTIMED_SETTINGS = ("autotune_cache", "case_timeout", "modes", "attention", "kv_lens", "prefill_lens",
                    "kv_dtypes", "page_size", "attention_fill", "search_moe_tiles")
#: What a results.json written before a setting was recorded was run with: --autotune_buckets
#: came in with "all" as its only behaviour, --autotune_tactics with 0 (every cuDNN plan).
SETTINGS_BEFORE_RECORDED: dict[str, Any] = {"autotune_buckets": "all", "autotune_tactics": 0}


def timing_settings(settings: RunSettings) -> dict[str, Any]:
    """The settings that decide a row's number (a result-cache key's `timing`; what a --resume
    must share with the rows it keeps), as JSON values."""
    timing: dict[str, Any] = json.loads(json.dumps(
        {k: v for k, v in asdict(settings).items() if k not in UNTIMED_SETTINGS}))
    return timing


def settings_differences(recorded: dict[str, Any], settings: RunSettings) -> list[str]:
    """`name='was' (now 'is')` for each timing setting where a results.json's `settings` and
    this run's differ; a setting the file does not record is compared with what runs before
    it was recorded had (SETTINGS_BEFORE_RECORDED) or else not at all."""
    out = []
    for name, now in timing_settings(settings).items():
        was = recorded.get(name, SETTINGS_BEFORE_RECORDED.get(name, now))
        if was != now:
            out.append(f"{name}={was!r} (now {now!r})")
    return out


#: Row fields results.json holds but the long-form CSV leaves out (lists, not one value).
JSON_ONLY_FIELDS = ("samples_us",)
#: Run facts every CSV line starts with, so CSVs of many runs concatenate into one table.
RUN_COLUMNS = ("run_id", "gpu", "compute_capability", "model", "tp", "ep", "tool_version",
               "flashinfer_version")
ROW_COLUMNS = tuple(f.name for f in fields(Row) if f.name not in JSON_ONLY_FIELDS)


CSV_COLUMNS = RUN_COLUMNS + ROW_COLUMNS


#: Top-level results.json keys besides schema_version and rows -> the JSON type they hold.
TOP_LEVEL_TYPES: dict[str, tuple[type, ...]] = {
    "tool": (dict,), "command": (list,), "timestamp": (str,), "environment": (dict,), "settings": (dict,),
    "plan": (dict, type(None)), "notes": (dict,), "run_id": (str,),
}
_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", type(None): "null"}


def validate_results(payload: object, *, check_rows: bool = True) -> None:
    """Raise `ResultsError` (a ValueError) unless `payload` is a results.json this tool reads: an
    object of RESULTS_SCHEMA_VERSION whose `rows` are Row objects (each field of its type and
    range, `check_row_fields`; null fields and fields a row predates may be absent, unknown ones
    are ignored, as `row_from_dict` does) and whose `plan`, when there is one, is a valid plan.
    `check_rows` False: the rows must be a list, but each is left to the caller (`row_problem`)."""
    if not isinstance(payload, dict):
        raise ResultsError("(top level)", payload, "must be a JSON object (a benchmark results file)")
    version = payload.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION or isinstance(version, bool):
        raise ResultsError("schema_version", version, f"this tool reads results schema version "
                           f"{RESULTS_SCHEMA_VERSION}; use the tool version that wrote it")
    if "rows" not in payload:
        raise ResultsError("rows", None, "a benchmark results file holds a list of rows", missing=True)
    rows = payload["rows"]
    if not isinstance(rows, list):
        raise ResultsError("rows", rows, "must be a list of row objects")
    for key, types in TOP_LEVEL_TYPES.items():
        if key in payload and not isinstance(payload[key], types):
            raise ResultsError(key, payload[key], f"must be {' or '.join(_JSON_TYPE[t] for t in types)}")
    for i, row in enumerate(rows if check_rows else ()):
        check_row(row, f"rows[{i}]")
    if payload.get("plan") is not None:
        try:
            validate_plan_dict(payload["plan"])
        except PlanError as e:
            raise ResultsError(f"plan.{e.path}", e.value, e.fix, missing=e.missing) from None


def load_results(path: str) -> dict[str, Any]:
    """Read a results.json (a path to the file or to its workdir). JSON nested deeper than the
    parser goes is a json.JSONDecodeError like any other text that is no results file."""
    if os.path.isdir(path):
        path = os.path.join(path, RESULTS_JSON)
    with open(path) as f:
        text = f.read()
    try:
        payload: dict[str, Any] = json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep to be a results file", text[:64], 0) from None
    return payload


def row_text(row: dict[str, Any]) -> str:
    """One row as results.json holds it: compact JSON on one line, without the fields whose value
    is null (a third of a row's text: an attention row has no GEMM sizes, a GEMM row no attention
    ones, an unsupported row no times). Every such field's default is null, so `row_from_dict`
    reads the row back as written, as JSON readers do (jq, pandas: an absent key is null). `gated`
    stays: an MoE row without it is read as gated unless its activation is element-wise."""
    kept = {k: v for k, v in row.items() if v is not None or k == "gated"}
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":"))


def member_text(value: Any) -> str:
    """A top-level member's value as results.json holds it: json.dumps(indent=1), nested one
    space deeper."""
    return json.dumps(value, indent=1).replace("\n", "\n ")


def assemble_results_text(members: Sequence[tuple[str, str]], row_texts: Sequence[str]) -> str:
    """results.json's text from its top-level members' texts (member_text), in order, and its
    rows' (row_text), which come last, one per line."""
    rows = ("[\n" + ",\n".join("  " + t for t in row_texts) + "\n ]") if row_texts else "[]"
    parts = [f" {json.dumps(key)}: {text}" for key, text in [*members, ("rows", rows)]]
    return "{\n" + ",\n".join(parts) + "\n}\n"


def results_text(payload: dict[str, Any]) -> str:
    """results.json's text: its top-level members indented by one space, as json.dumps(indent=1)
    writes them, then "rows", one compact row per line (a run's rows are most of the file, and a
    line per row keeps a diff of two runs a diff of rows)."""
    members = [(key, member_text(value)) for key, value in payload.items() if key != "rows"]
    return assemble_results_text(members, [row_text(r) for r in payload.get("rows", [])])


def rows_of(results: dict[str, Any]) -> list[Row]:
    return [row_from_dict(r) for r in results.get("rows", [])]


def row_records(results: dict[str, Any]) -> list[dict[str, Any]]:
    """A results.json's rows as dicts of every Row field, the null ones (which the file leaves
    out, `row_text`) and those a row predates included: for code that reads rows by key."""
    return [asdict(row) for row in rows_of(results)]


def new_run_id(timestamp: str) -> str:
    """A run id unique across machines: the UTC start time and 8 random hex digits,
    e.g. "20261130T210500Z-3f2a9c1e"."""
    compact = re.sub(r"[^0-9T]", "", timestamp.split("+", 1)[0]) + "Z"
    return f"{compact}-{secrets.token_hex(4)}"


def derived_run_id(results: dict[str, Any]) -> str:
    """The run id of a results.json; one written before run ids is named by a digest of its
    timestamp and command ("legacy-<12 hex>"), the same on every read."""
    if isinstance(results.get("run_id"), str) and results["run_id"]:
        return str(results["run_id"])
    basis = json.dumps([results.get("timestamp"), results.get("command")], sort_keys=True)
    return "legacy-" + hashlib.sha256(basis.encode()).hexdigest()[:12]


def run_facts(results: dict[str, Any]) -> dict[str, Any]:
    """RUN_COLUMNS of a results.json ("" where it did not record a fact)."""
    env, plan, tool = (_object(results, key) for key in ("environment", "plan", "tool"))
    gpu, versions, model = _object(env, "gpu"), _object(env, "versions"), _object(plan, "model")
    cc = gpu.get("compute_capability")
    if isinstance(cc, (list, tuple)):
        cc = ".".join(str(x) for x in cc)
    facts = {
        "run_id": derived_run_id(results), "gpu": gpu.get("name"), "compute_capability": cc,
        "model": model.get("name"), "tp": plan.get("tp"), "ep": plan.get("ep"),
        "tool_version": tool.get("version"), "flashinfer_version": versions.get("flashinfer_wheel"),
    }
    return {k: "" if v is None else v for k, v in facts.items()}


def _object(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key] when it is an object, else {} (facts a results.json did not record)."""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def csv_text(rows: Iterable[Row], facts: dict[str, Any] | None = None) -> str:
    """The long-form CSV: one line per measurement, CSV_COLUMNS (the run's `facts`, `run_facts`,
    then the row's fields), empty cells for None."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    run = [(facts or {}).get(c, "") for c in RUN_COLUMNS]
    for r in rows:
        d = asdict(r)
        w.writerow(run + ["" if d[c] is None else d[c] for c in ROW_COLUMNS])
    return buf.getvalue()


__all__ = ["AUTOTUNE_BUCKETS", "assemble_results_text", "member_text", "results_text", "row_records", "row_text",
           "UNTIMED_SETTINGS", "SETTINGS_BEFORE_RECORDED",
           "timing_settings",
           "settings_differences", "RESULTS_SCHEMA_VERSION", "RESULTS_JSON", "RESULTS_CSV", "STATUSES", "TIMERS",
           "MODES", "CHECKS",
           "RunSettings", "Row", "JSON_ONLY_FIELDS", "RUN_COLUMNS", "ROW_COLUMNS", "CSV_COLUMNS", "ResultsError",
           "validate_results", "check_row_fields", "row_problem", "TIME_FIELDS",
           "row_from_dict", "load_results", "rows_of", "new_run_id", "derived_run_id",
           "run_facts", "csv_text", "ROW_CHOICES", "ROW_POSITIVE"]
