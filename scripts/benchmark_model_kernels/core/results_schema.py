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
      "rows": [Row, ...]             # one per Case, in case order
    }

Every Case yields exactly one Row; a Row's `status` is "ok" (a measured number), "unsupported"
(GPU capability or a known shape limit rules it out; `reason` says which), "failed" (unexpected
error, crash or timeout; `reason` quotes the driver's own message) or "incorrect" (timed, but its
output missed the reference beyond the recipe's tolerance; `reason` has the numbers). The JSON
Schema of this layout is references/results.schema.json.

`validate_results(payload)` checks a results.json read back (the report's input, and the rows
--resume keeps) against this layout: a `ResultsError` (a ValueError) names the JSON path, e.g.
`rows[3].m="8": must be an integer >= 1`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import secrets
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Iterable

from .case_schema import (
    DEFAULT_KV_LENS,
    KV_DTYPES,
    NON_GATED_ACTIVATIONS,
    TIMED_LABELS,
    VLLM_BLOCK_SIZE,
    AttentionSweep,
)
from .errors import shown_value
from .plan_schema import PlanError, validate_plan_dict

RESULTS_SCHEMA_VERSION = 1
RESULTS_JSON = "results.json"
RESULTS_CSV = "combined_results.csv"
#: "incorrect": timed, but the output missed its reference beyond the recipe's tolerance
#: (kernels/correctness.py); it counts as failed for the exit code and has no number in the report.
STATUSES = ("ok", "unsupported", "failed", "incorrect")
TIMERS = ("cupti", "cuda_events", "cuda_graph", "")
#: How a row was timed: replaying a CUDA graph, or plain launches ("" = written before modes were
#: recorded; the run's settings.cuda_graph says which).
MODES = ("graph", "eager")
#: A row's correctness check: "passed", "failed" (the row is then status "incorrect"), "" = none.
CHECKS = ("passed", "failed", "")


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
    """Path of FlashInfer's --autotune_cache JSON (kept in the workdir by default)."""
    autotune_buckets: str = "timed"
    """Token counts FlashInfer's autotuner profiles for a GEMM driver case (--autotune_buckets):
    "timed", only M, the one bucket the timed call reads (run/argv.py tuning_buckets); "all", its
    own buckets 1, 2, 4, ... up to the case's M. A results.json without the field was "all"
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
#: The attention sweep settings decide which cases exist, not how one is timed (its case carries
#: its shape), so they are no part of a result-cache key either; nor is where the K/V cache's
#: random values are drawn (the same distribution either way, the kernel reads the same bytes).
UNTIMED_SETTINGS = ("autotune_cache", "case_timeout", "modes", "attention", "kv_lens", "prefill_lens",
                    "kv_dtypes", "page_size", "attention_fill")
#: What a results.json written before a setting was recorded was run with: --autotune_buckets
#: came in with "all" as its only behaviour.
SETTINGS_BEFORE_RECORDED: dict[str, Any] = {"autotune_buckets": "all"}


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


@dataclass(frozen=True)
class Row:
    """One measurement (or the reason there is none). Times in microseconds."""

    case_id: str
    kind: str
    """"gemm", "moe" or "attention"."""
    name: str
    """Plan entry name."""
    modules: str
    """Module paths joined with "|"."""
    layers: int
    """Per-step invocation count on one rank."""
    m: int
    """Tokens M of one step in this rank's attention (the sweep value)."""
    dtype: str
    """"bf16", "fp8", "nvfp4"; attention rows: the KV-cache dtype ("bf16" or "fp8")."""
    backend: str
    routine: str
    variant: str
    with_quant: bool
    scheme: str = ""
    """FP8 rows: "per_tensor", "per_token" or "block128" (how the kernel takes its scales)."""
    vllm_default: str = ""
    """"same": the kernel vLLM dispatches by default for this layer kind, recipe and scheme on
    this GPU; "design": vLLM's algorithm in this tool's code; "": a comparison row."""
    timed_as: str = ""
    """What the row times relative to vLLM's default kernel (case_schema.Case.timed_as); "" in
    rows written before it, which the report derives (report/row_facts.py)."""
    vllm_runs: str = ""
    """What vLLM runs for this layer instead, when the row is not vLLM's kernel or design."""
    # --- GEMM shape (None for MoE rows)
    n: int | None = None
    k: int | None = None
    phys_n: int | None = None
    phys_k: int | None = None
    # --- MoE shape (None for GEMM rows)
    num_tokens: int | None = None
    """Tokens (rows) the kernel runs. MoE: M * EP/TP under expert parallelism, M without it.
    GEMM: M, or ceil(M/TP) for shared experts under sequence-parallel MoE."""
    hidden: int | None = None
    intermediate: int | None = None
    experts: int | None = None
    global_experts: int | None = None
    top_k: int | None = None
    phys_hidden: int | None = None
    phys_intermediate: int | None = None
    activation: str = ""
    gated: bool | None = None
    """MoE: gated activation, GEMM1 holding gate and up (2*I), as the case records it; None for GEMM
    and attention rows. An MoE row of a results.json without the field is gated unless its
    activation is element-wise (`row_from_dict`, case_schema.NON_GATED_ACTIVATIONS)."""
    routing_method: str = ""
    # --- attention shape (None for GEMM and MoE rows; num_tokens = batch_size * q_len)
    phase: str = ""
    """"decode" (batch_size sequences, one new token each) or "prefill" (one causal sequence)."""
    batch_size: int | None = None
    """Sequences in the call: M for decode, 1 for prefill."""
    q_len: int | None = None
    """New tokens per sequence: 1 for decode, the prompt length for prefill."""
    kv_len: int | None = None
    """K/V tokens each sequence reads (min(context_len, sliding_window) for a windowed decode)."""
    context_len: int | None = None
    """Tokens in each sequence's context: the --kv_lens (decode) or --prefill_lens value."""
    num_q_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim_qk: int | None = None
    head_dim_vo: int | None = None
    kv_lora_rank: int | None = None
    """MLA: the latent width (0 for MHA)."""
    qk_rope_head_dim: int | None = None
    """MLA: the RoPE key width beside the latent (0 for MHA)."""
    page_size: int | None = None
    """Tokens per KV page (0: the ragged prefill routine, no pages)."""
    sliding_window: int | None = None
    """The layer's window (0: full attention)."""
    attention_chunk_size: int | None = None
    """Llama 4's chunked local attention: the chunk a query attends within (0: none)."""
    # --- measurement
    median_us: float | None = None
    """Median time; for with_quant rows kernel + activation quantization."""
    std_us: float | None = None
    quant_us: float | None = None
    """with_quant rows: the activation-quantization part of median_us."""
    tflops: float | None = None
    """Achieved TFLOP/s from `flops` and median_us."""
    tb_per_sec: float | None = None
    """Achieved TB/s from `bytes` and median_us."""
    flops: float | None = None
    """Useful FLOPs of the logical problem."""
    bytes: float | None = None
    """Bytes moved: weights actually touched, activations in, outputs out."""
    pct_peak_tflops: float | None = None
    """100 * tflops / the GPU's dense peak for this dtype."""
    pct_peak_bandwidth: float | None = None
    """100 * tb_per_sec / the GPU's HBM peak."""
    status: str = "failed"
    """"ok", "unsupported", "failed" or "incorrect" (timed, output beyond tolerance)."""
    reason: str = ""
    """Why there is no number (unsupported/failed), or a caveat for ok rows."""
    timer: str = ""
    """"cupti", "cuda_events" or "cuda_graph": what actually timed the row ("" when not run)."""
    # --- how it was timed, and the spread of its samples
    mode: str = ""
    """"graph" (CUDA-graph replay) or "eager" (plain launches); "" in rows written before modes."""
    p10_us: float | None = None
    """10th percentile of the per-iteration times (for with_quant rows: of kernel + quant sums)."""
    p50_us: float | None = None
    p90_us: float | None = None
    p99_us: float | None = None
    n_samples: int | None = None
    """Timed iterations the percentiles come from."""
    spread_note: str = ""
    """Why a timed row has no percentiles, or how they were formed (with_quant rows)."""
    launches_per_call: float | None = None
    """Eager rows: GPU kernels (plus memsets/memcpys) one call launches, counted with CUPTI
    activity records."""
    # --- correctness against a reference (one extra call outside the timed region)
    check: str = ""
    """"passed", "failed" (then status is "incorrect") or "" (not checked: check_note says why)."""
    max_abs_err: float | None = None
    """max |out - ref| over the output (same units as the output)."""
    rel_l2_err: float | None = None
    """||out - ref||_2 / ||ref||_2."""
    argmax_match: float | None = None
    """GEMMs: fraction of output rows whose argmax equals the reference's."""
    check_note: str = ""
    """What the check compared against and its tolerance, or why there is no check."""
    samples_us: list[float] | None = None
    """Per-iteration times (results.json only; the CSV carries the percentiles)."""
    origin: str = ""
    """"" when this run (or the run --resume continued) measured the row; otherwise where its
    number was copied from, e.g. "result cache: run 3f9c0a1b2d4e at 2026-12-01T11:02:07+00:00
    (/runs/llama, gemm.lm_head.m8.bf16.cudnn)": the run and case that measured it (see --cache)."""


#: Row fields results.json holds but the long-form CSV leaves out (lists, not one value).
JSON_ONLY_FIELDS = ("samples_us",)
#: Run facts every CSV line starts with, so CSVs of many runs concatenate into one table.
RUN_COLUMNS = ("run_id", "gpu", "compute_capability", "model", "tp", "ep", "tool_version",
               "flashinfer_version")
ROW_COLUMNS = tuple(f.name for f in fields(Row) if f.name not in JSON_ONLY_FIELDS)


CSV_COLUMNS = RUN_COLUMNS + ROW_COLUMNS


#: Row field -> the strings it may hold.
ROW_CHOICES: dict[str, tuple[str, ...]] = {"kind": ("gemm", "moe", "attention"), "status": STATUSES,
                                           "timer": TIMERS, "mode": (*MODES, ""), "check": CHECKS,
                                           "phase": ("decode", "prefill", ""), "timed_as": (*TIMED_LABELS, "")}
#: Row int fields that count something (at least 1); the other int fields are sizes >= 0.
ROW_POSITIVE = ("layers", "m")
#: Top-level results.json keys besides schema_version and rows -> the JSON type they hold.
TOP_LEVEL_TYPES: dict[str, tuple[type, ...]] = {
    "tool": (dict,), "command": (list,), "timestamp": (str,), "environment": (dict,), "settings": (dict,),
    "plan": (dict, type(None)), "notes": (dict,), "run_id": (str,),
}
_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", type(None): "null"}


class ResultsError(ValueError):
    """A results.json that does not match the layout: `<json path>=<value>: <fix>`."""

    def __init__(self, path: str, value: object, fix: str, *, missing: bool = False):
        self.path, self.value, self.fix = path, value, fix
        super().__init__(f"{path}: missing; {fix}" if missing else f"{path}={shown_value(value)}: {fix}")




def _row_value_fix(name: str, annotation: str, value: object) -> str | None:
    """Why `value` cannot be Row field `name` (annotated `annotation`), or None when it can."""
    base, nullable = annotation.removesuffix(" | None"), annotation.endswith(" | None")
    if value is None:
        return None if nullable else f"must be {_row_wanted(name, base)}, not null"
    if base == "str":
        if not isinstance(value, str):
            return "must be a string"
        choices = ROW_CHOICES.get(name)
        return f"must be one of {', '.join(repr(c) for c in choices)}" if choices and value not in choices else None
    if base == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if base == "int":
        low = 1 if name in ROW_POSITIVE else 0
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
        return None if ok else f"must be {_row_wanted(name, base)}"
    if base == "float":
        return None if _is_number(value) else "must be a number (or null)"
    if base == "list[float]":
        ok = isinstance(value, list) and all(_is_number(v) for v in value)
        return None if ok else "must be a list of numbers (or null)"
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isinf(value)


def _row_wanted(name: str, base: str) -> str:
    if base == "int":
        return "an integer >= 1" if name in ROW_POSITIVE else "an integer >= 0"
    return {"str": "a string", "bool": "true or false", "float": "a number"}.get(base, base)


def _check_row(row: object, path: str) -> None:
    if not isinstance(row, dict):
        raise ResultsError(path, row, "must be an object (one measurement)")
    for f in fields(Row):
        if f.name not in row and f.default is MISSING:
            raise ResultsError(f"{path}.{f.name}", None, "every row records it; restore results.json or rerun",
                               missing=True)
    check_row_fields(row, path)


#: Row fields that hold a time in microseconds: finite and never negative where present.
TIME_FIELDS = ("median_us", "std_us", "quant_us", "p10_us", "p50_us", "p90_us", "p99_us")


def check_row_fields(row: dict[str, Any], path: str) -> None:
    """Raise `ResultsError` unless each Row field `row` holds has its type and range: the Row
    annotation's type, a time (TIME_FIELDS, samples_us) finite and at least 0, and an "ok" row's
    median_us a number above 0 (an ok row is a measurement). Fields `row` lacks are not checked:
    this is also the check of the part of a row a result-cache entry stores."""
    types = {f.name: str(f.type) for f in fields(Row)}
    for name, value in row.items():
        if name not in types:
            continue
        fix = _row_value_fix(name, types[name], value)
        if fix:
            raise ResultsError(f"{path}.{name}", value, fix)
    for name in TIME_FIELDS:
        value = row.get(name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ResultsError(f"{path}.{name}", value, "must be a time in microseconds, 0 or more (or null)")
    samples = row.get("samples_us") or []
    bad = next((i for i, v in enumerate(samples) if not (math.isfinite(v) and v >= 0)), None)
    if bad is not None:
        raise ResultsError(f"{path}.samples_us[{bad}]", samples[bad], "must be a time in microseconds, 0 or more")
    if row.get("status") == "ok":
        median = row.get("median_us")
        if median is None or not median > 0:
            raise ResultsError(f"{path}.median_us", median, 'an "ok" row is a measurement: its median_us '
                               "must be a time above 0")


def row_problem(row: object, path: str = "row", *, partial: bool = False) -> str | None:
    """Why `row` cannot be a Row of results.json, or None: every field a row records present and
    each of its type and range (`check_row_fields`). `partial`: only the fields `row` holds (the
    part of a row a result-cache entry stores)."""
    try:
        if partial and isinstance(row, dict):
            check_row_fields(row, path)
        else:
            _check_row(row, path)
    except ResultsError as e:
        return str(e)
    return None


def validate_results(payload: object, *, check_rows: bool = True) -> None:
    """Raise `ResultsError` (a ValueError) unless `payload` is a results.json this tool reads: an
    object of RESULTS_SCHEMA_VERSION whose `rows` are Row objects (each field of its type and
    range, `check_row_fields`; fields a row predates may be absent, unknown ones are ignored, as
    `row_from_dict` does) and whose `plan`, when there is one, is a valid plan. `check_rows` False:
    the rows must be a list, but each is left to the caller (`row_problem`)."""
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
        _check_row(row, f"rows[{i}]")
    if payload.get("plan") is not None:
        try:
            validate_plan_dict(payload["plan"])
        except PlanError as e:
            raise ResultsError(f"plan.{e.path}", e.value, e.fix, missing=e.missing) from None


def row_from_dict(d: dict[str, Any]) -> Row:
    names = {f.name for f in fields(Row)}
    kw = {k: v for k, v in d.items() if k in names}
    if kw.get("kind") == "moe" and "gated" not in kw:
        kw["gated"] = kw.get("activation", "") not in NON_GATED_ACTIVATIONS
    return Row(**kw)


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


def rows_of(results: dict[str, Any]) -> list[Row]:
    return [row_from_dict(r) for r in results.get("rows", [])]


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


__all__ = ["AUTOTUNE_BUCKETS", "UNTIMED_SETTINGS", "SETTINGS_BEFORE_RECORDED", "timing_settings",
           "settings_differences", "RESULTS_SCHEMA_VERSION", "RESULTS_JSON", "RESULTS_CSV", "STATUSES", "TIMERS",
           "MODES", "CHECKS",
           "RunSettings", "Row", "JSON_ONLY_FIELDS", "RUN_COLUMNS", "ROW_COLUMNS", "CSV_COLUMNS", "ResultsError",
           "validate_results", "check_row_fields", "row_problem", "TIME_FIELDS",
           "row_from_dict", "load_results", "rows_of", "new_run_id", "derived_run_id",
           "run_facts", "csv_text"]
