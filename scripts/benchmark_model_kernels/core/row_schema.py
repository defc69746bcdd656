"""One row of results.json: the `Row` dataclass (one measurement, or the reason there is none)
and the checks of its fields.

Every Case yields exactly one Row; a Row's `status` is "ok" (a measured number), "unsupported"
(GPU capability or a known shape limit rules it out; `reason` says which), "failed" (unexpected
error, crash or timeout; `reason` quotes the driver's own message) or "incorrect" (timed, but its
output missed the reference beyond the recipe's tolerance; `reason` has the numbers).

`check_row_fields(row, path)` and `row_problem(row)` check a row read back: a `ResultsError`
(a ValueError) names the JSON path, e.g. `rows[3].m="8": must be an integer >= 1`.
`results_schema.py` holds the file around the rows.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import Any

from .case_schema import NON_GATED_ACTIVATIONS, TIMED_LABELS
from .errors import shown_value

#: "incorrect": timed, but the output missed its reference beyond the recipe's tolerance
#: (kernels/correctness.py); it counts as failed for the exit code and has no number in the report.
STATUSES = ("ok", "unsupported", "failed", "incorrect")
TIMERS = ("cupti", "cuda_events", "cuda_graph", "")
#: How a row was timed: replaying a CUDA graph, or plain launches ("" = written before modes were
#: recorded; the run's settings.cuda_graph says which).
MODES = ("graph", "eager")
#: A row's correctness check: "passed", "failed" (the row is then status "incorrect"), "" = none.
CHECKS = ("passed", "failed", "")


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


#: Row field -> the strings it may hold.
ROW_CHOICES: dict[str, tuple[str, ...]] = {"kind": ("gemm", "moe", "attention"), "status": STATUSES,
                                           "timer": TIMERS, "mode": (*MODES, ""), "check": CHECKS,
                                           "phase": ("decode", "prefill", ""), "timed_as": (*TIMED_LABELS, "")}
#: Row int fields that count something (at least 1); the other int fields are sizes >= 0.
ROW_POSITIVE = ("layers", "m")


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


def check_row(row: object, path: str) -> None:
    """Raise `ResultsError` unless `row` is a whole Row object: every field without a default
    present, each field of its type and range (`check_row_fields`)."""
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
            check_row(row, path)
    except ResultsError as e:
        return str(e)
    return None


def row_from_dict(d: dict[str, Any]) -> Row:
    """The Row a results.json row holds: unknown keys dropped, fields it predates at their
    defaults, an MoE row without `gated` gated unless its activation is element-wise."""
    names = {f.name for f in fields(Row)}
    kw = {k: v for k, v in d.items() if k in names}
    if kw.get("kind") == "moe" and "gated" not in kw:
        kw["gated"] = kw.get("activation", "") not in NON_GATED_ACTIVATIONS
    return Row(**kw)


__all__ = ["STATUSES", "TIMERS", "MODES", "CHECKS", "Row", "ROW_CHOICES", "ROW_POSITIVE", "ResultsError",
           "TIME_FIELDS", "check_row", "check_row_fields", "row_problem", "row_from_dict"]
