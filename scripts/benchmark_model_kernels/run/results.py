"""Results: `results.json` is the source of truth; `combined_results.csv` is derived from it.

results.json layout (schema_version 1):

    {
      "schema_version": 1,
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
(GPU capability or a known shape limit rules it out; `reason` says which) or "failed" (unexpected
error, crash or timeout; `reason` quotes the driver's own message).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable

RESULTS_SCHEMA_VERSION = 1
RESULTS_JSON = "results.json"
RESULTS_CSV = "combined_results.csv"
STATUSES = ("ok", "unsupported", "failed")
TIMERS = ("cupti", "cuda_events", "cuda_graph", "")


@dataclass(frozen=True)
class RunSettings:
    """How the measurements were taken (recorded in results.json)."""

    dry_run_iters: int = 5
    """Warm-up iterations per measurement (FlashInfer --dry_run_iters)."""
    num_iters: int = 30
    """Measured iterations (FlashInfer --num_iters)."""
    cuda_graph: bool = True
    """Replay the op in a CUDA graph (FlashInfer default; --no_cuda_graph turns it off)."""
    autotune: bool = True
    """FlashInfer autotuning before timing (--no_autotune turns it off)."""
    autotune_cache: str = ""
    """Path of FlashInfer's --autotune_cache JSON (kept in the workdir by default)."""
    allow_cuda_events: bool = False
    """Accept rows timed with CUDA events when CUPTI is unavailable (otherwise they are failed)."""
    case_timeout: float = 600.0
    """Seconds one case may take before its worker process is killed and the case marked failed."""
    cold_l2: bool = True
    """L2 flushed before every iteration (always true for FlashInfer's GEMM/MoE routines)."""


@dataclass(frozen=True)
class Row:
    """One measurement (or the reason there is none). Times in microseconds."""

    case_id: str
    kind: str
    """"gemm" or "moe"."""
    name: str
    """Plan entry name."""
    modules: str
    """Module paths joined with "|"."""
    layers: int
    """Per-step invocation count on one rank."""
    m: int
    """Tokens M of one step in this rank's attention (the sweep value)."""
    dtype: str
    """"bf16", "fp8", "nvfp4"."""
    backend: str
    routine: str
    variant: str
    with_quant: bool
    scheme: str = ""
    """FP8 rows: "per_tensor", "per_token" or "block128" (how the kernel takes its scales)."""
    vllm_default: str = ""
    """"same": the kernel vLLM dispatches by default for this layer kind, recipe and scheme on
    this GPU; "design": vLLM's algorithm in this tool's code; "": a comparison row."""
    # --- GEMM shape (None for MoE rows)
    n: int | None = None
    k: int | None = None
    phys_n: int | None = None
    phys_k: int | None = None
    # --- MoE shape (None for GEMM rows)
    num_tokens: int | None = None
    """Tokens the MoE layer runs: M * EP/TP under expert parallelism (M without it)."""
    hidden: int | None = None
    intermediate: int | None = None
    experts: int | None = None
    global_experts: int | None = None
    top_k: int | None = None
    phys_hidden: int | None = None
    phys_intermediate: int | None = None
    activation: str = ""
    routing_method: str = ""
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
    """"ok", "unsupported" or "failed"."""
    reason: str = ""
    """Why there is no number (unsupported/failed), or a caveat for ok rows."""
    timer: str = ""
    """"cupti", "cuda_events" or "cuda_graph": what actually timed the row ("" when not run)."""


CSV_COLUMNS = tuple(f.name for f in fields(Row))


def row_from_dict(d: dict[str, Any]) -> Row:
    names = set(CSV_COLUMNS)
    return Row(**{k: v for k, v in d.items() if k in names})


def load_results(path: str) -> dict[str, Any]:
    """Read a results.json (a path to the file or to its workdir)."""
    if os.path.isdir(path):
        path = os.path.join(path, RESULTS_JSON)
    with open(path) as f:
        payload: dict[str, Any] = json.load(f)
    return payload


def rows_of(results: dict[str, Any]) -> list[Row]:
    return [row_from_dict(r) for r in results.get("rows", [])]


def csv_text(rows: Iterable[Row]) -> str:
    """The long-form CSV: one row per measurement, CSV_COLUMNS, empty cells for None."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in rows:
        d = asdict(r)
        w.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
    return buf.getvalue()
