"""What one case produced: the worker's answer, the driver's output and CSV -> an Outcome -> a Row.

In: the text a case printed (its log), the driver's CSV rows and the worker's JSON answer
(`WorkerReply`). Out: an `Outcome` (ok / unsupported / failed, a reason, the time and what timed
it), and `row_from_case` turns Case + Outcome into the results Row.

`classify_driver_case` quotes the driver's own words (research/flashinfer_driver.md sections 1.5,
1.6 and 2):
  - a CSV row                                          -> ok (times in ms -> us; its caveats: not
    autotuned, K/V filled on the GPU, driver_fills.py)
  - "[ERROR] No backends passed validation/to test"   -> unsupported when every reason printed
    before it ("[INFO] <b> backend does not support this configuration: <Exc>: <msg>",
    "[WARNING] <b> for routine <r> is not supported on compute capability X. Skipping.") is a
    support statement; failed when a reason is a fault (CUDA error, out of memory) or a set-up
    problem (a missing compiler or optional package, `SETUP_PROBLEMS`: the reason then starts
    with "set-up: <backend> needs <what> (<fix>); driver said: ...")
  - an exception ("[ERROR] Error: <msg>"), argparse exit, crash, timeout -> failed, quoted (a
    set-up problem in it gets the same "set-up: ..." lead)
  - CUPTI fallback ("... Falling back to CUDA events ...") -> failed unless allow_cuda_events
`classify_python_case` does the same for torch-baseline and quant-timing cases.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..cases.attention import ATTENTION_ROUTINES, NO_REFCHECK
from ..core.case_schema import AttentionShape, Case, GemmShape, MoeShape
from ..core.results_schema import Row, RunSettings
from ..kernels.correctness import DRIVER_REFCHECK
from ..kernels.timing import cupti_fallback_in, cupti_fallback_reason, percentiles
from .driver_capture import driver_spread
from .driver_fills import fill_note

_NO_BACKENDS = re.compile(r"\[ERROR\] No backends (?:passed validation|to test)\. Exiting\.")
_DOES_NOT_SUPPORT = re.compile(r"\[INFO\] (\S+) backend does not support (this configuration: .*|autotune)")
_NOT_ON_CC = re.compile(r"\[WARNING\] \S+ for routine \S+ is not supported on compute capability .*")
#: The attention routines' own skip lines (benchmarks/routines/attention.py at release-v0.6.18),
#: printed before the backend is dropped: "[INFO] FA2 backend does not support FP8. Skipping.",
#: "[INFO] cuDNN decode requires BF16 output. Skipping.", "[INFO] cuDNN FP8 prefill requires
#: cuDNN >= 9.17.1. Current version: 0. Skipping cudnn backend.", "[INFO] Cutlass MLA backend only
#: supports page size 32 or 64. Skipping.", `_drop_backend`'s "[INFO] {backend} backend {reason}.
#: Skipping.", and two without the word: "[INFO] trtllm-gen backend currently requires causal =
#: True", "[INFO] CUTLASS backend requires head dimension to be 128 or 192".
_ATTENTION_SKIP = re.compile(
    r"\[INFO\] (?:.*\. Skipping(?: [\w-]+ backend)?\.|\S+ backend (?:currently )?requires .*)$")
_LOGGER_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # "2026-11-30 20:22:02,227 - INFO - ..."
_ERROR_LINE = re.compile(r"\[ERROR\] Error: (.*)")
_ARGPARSE_ERROR = re.compile(r"^\S*: error: .*$", re.MULTILINE)
#: The driver's --refcheck failure (benchmarks/routines/gemm.py: `raise AssertionError(f"[ERROR]
#: Backend {b} output mismatch with cos_sim={cos_sim}")`, or "... with {n} elements").
_REFCHECK_MISMATCH = re.compile(r"output mismatch with (?:cos_sim=\S+|\d+ elements)")
#: A probe failure with these words is a fault of the run, not a statement of (non-)support.
_FAULT = re.compile(
    r"CUDA error|out of memory|illegal memory|device-side assert|launch failure|Segmentation",
    re.IGNORECASE,
)
#: Driver statements that name a missing tool or package rather than a limit of the GPU or shape:
#: (pattern, what is missing, the fix); "{0}" in the last two is the pattern's first group. The
#: first matching row names the problem, so the specific rows come before the generic ones.
SETUP_PROBLEMS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # cuda-tile's cuda/tile/_compile.py `_find_compiler_bin` (cuda-tile 1.7.0) raises
    # "FileNotFoundError: 'tileiras' compiler not found, make sure it is available as a python
    # package via `pip install cuda-tile[tileiras]` or available in $PATH or $CUDA_HOME/bin via
    # system CTK (13.1+) installation." when neither the nvidia-cuda-tileiras wheel, PATH nor
    # $CUDA_HOME/bin has it. FlashInfer's cutile GEMM then fails its config search first
    # ("ValueError: No valid config found", the cascade flashinfer/cutile/cutile_common.py
    # `is_cuda_tile_available` describes), and the driver's mm_bf16 probe prints both
    # (benchmarks/routines/gemm.py `testMmBf16`, "[INFO] {backend} backend does not support ...").
    (re.compile(r"'tileiras' compiler not found"), "the tileiras compiler",
     "pip install cuda-tile[tileiras], or CUDA Toolkit 13.1+ on PATH"),
    # FlashInfer's cutile kernels import `cuda.tile` (requirements.txt: cuda-tile>=1.4.0).
    (re.compile(r"No module named '(cuda\.tile)\b"), "the cuda-tile package (module {0})",
     "pip install cuda-tile[tileiras]"),
    # FlashInfer's CuTe-DSL kernels import `cutlass` from the optional nvidia-cutlass-dsl
    # (pyproject.toml extras cu12/cu13); the H200 mm_bf16 "auto" probe printed
    # "ModuleNotFoundError: No module named 'cutlass'" (tests/fixtures/driver/mm_bf16.log).
    (re.compile(r"No module named '(cutlass)\b"), "the nvidia-cutlass-dsl package (module {0})",
     "pip install 'nvidia-cutlass-dsl[cu13]' (CUDA 13) or nvidia-cutlass-dsl (CUDA 12)"),
    # flashinfer/jit/cubin_loader.py `get_cubin` with FLASHINFER_NO_DOWNLOAD set and no local
    # copy: "RuntimeError: Artifact not found locally: <file> (looked at <path>).
    # FLASHINFER_NO_DOWNLOAD is set — refusing to download. This means flashinfer-cubin is
    # missing this file." (tests/fixtures/driver/mm_fp8.log, the H200).
    (re.compile(r"Artifact not found locally"), "its prebuilt cubin (flashinfer-cubin)",
     "pip install flashinfer-cubin of the wheel's release from https://flashinfer.ai/whl, or "
     "let FlashInfer download it: export FLASHINFER_NO_DOWNLOAD= (set and empty)"),
    # Any other missing module: Python's ModuleNotFoundError / ImportError text.
    (re.compile(r"No module named '([\w]+)"), "the Python module {0}",
     "pip install the package that provides it (FlashInfer's requirements.txt lists the "
     "optional ones)"),
    # Any other compiler that a JIT path looks up by name, in the same words as cuda-tile's.
    (re.compile(r"'?([\w.+-]+)'? compiler not found"), "the {0} compiler",
     "install it and put it on PATH"),
    # A native extension whose shared library is not installed (ImportError from the loader).
    (re.compile(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file"),
     "the shared library {0}", "install the package that ships it, or add its folder to "
     "LD_LIBRARY_PATH"),
)
TAIL_CHARS = 1500
#: Printed by the worker before it re-runs a case without --autotune; only what follows counts.
RETRY_MARKER = "[bmk-worker] retrying without --autotune (the driver cannot autotune this backend)"


def read_driver_csv(path: str) -> list[dict[str, str]]:
    """Rows of a driver CSV as dicts; a duplicated column name keeps its FIRST occurrence."""
    try:
        with open(path, newline="") as f:
            table = [r for r in csv.reader(f) if r]
    except OSError:
        return []
    if not table:
        return []
    header, rows = table[0], table[1:]
    first: dict[str, int] = {}
    for i, name in enumerate(header):
        first.setdefault(name, i)
    return [{name: r[i] if i < len(r) else "" for name, i in first.items()} for r in rows]


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    """The last non-empty lines of `text`, at most `limit` characters, joined with " | "."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    out: list[str] = []
    size = 0
    for ln in reversed(lines):
        if size + len(ln) > limit and out:
            break
        out.append(ln[-limit:])
        size += len(ln) + 3
    return " | ".join(reversed(out))


@dataclass(frozen=True)
class Outcome:
    """What one case produced, before it becomes a results Row."""

    status: str
    """"ok", "unsupported", "failed" or "incorrect"."""
    reason: str = ""
    """Why there is no number, quoting the driver; or a caveat on an ok number."""
    median_us: float | None = None
    std_us: float | None = None
    timer: str = ""
    """"cupti", "cuda_graph" or "cuda_events"; "" when nothing was timed."""
    samples_us: tuple[float, ...] = ()
    """Per-iteration times (empty: `spread_note` says why)."""
    spread_note: str = ""
    launches_per_call: float | None = None
    check: dict[str, Any] = field(default_factory=dict)
    """The Row's correctness fields (correctness.CheckResult.fields), {} when there is none."""


@dataclass(frozen=True)
class WorkerReply:
    """The worker's JSON answer for a case, or why there is none."""

    answer: dict[str, Any] = field(default_factory=dict)
    lost: str = ""
    """Non-empty when the worker died or timed out before answering (the case's failure reason)."""


def fallback_timer(cuda_graph: bool) -> str:
    """What FlashInfer times with when CUPTI is missing (flashinfer_driver.md section 6.3)."""
    return "cuda_graph" if cuda_graph else "cuda_events"


def apply_timer_policy(outcome: Outcome, timer: str, evidence: str, settings: RunSettings) -> Outcome:
    """Label an ok outcome's timer; a non-CUPTI number fails unless --allow_cuda_events.

    `timer` is what actually timed it; `evidence` the output line that says why it is not CUPTI.
    """
    if outcome.status not in ("ok", "incorrect") or timer == "cupti":
        return replace(outcome, timer=timer)
    if settings.allow_cuda_events:
        note = f"timed with {timer}, not CUPTI (--allow_cuda_events)"
        reason = f"{outcome.reason}; {note}" if outcome.reason else note
        return replace(outcome, reason=reason, timer=timer)
    return Outcome(
        "failed",
        f"timed with {timer}, not CUPTI (measured {outcome.median_us:.2f} us, not comparable): "
        f"{evidence}; install cupti-python 13.0.x matching the CUDA driver, or pass "
        "--allow_cuda_events to accept such numbers",
        None,
        None,
        timer,
    )


def with_check(outcome: Outcome, check: dict[str, Any]) -> Outcome:
    """An ok outcome with its correctness fields; status "incorrect" (reason: the numbers) when
    the check failed."""
    if outcome.status != "ok" or not check:
        return replace(outcome, check=dict(check))
    if check.get("check") == "failed":
        reason = "; ".join(x for x in (f"output incorrect: {check.get('check_note', '')}", outcome.reason) if x)
        return replace(outcome, status="incorrect", reason=reason, check=dict(check))
    return replace(outcome, check=dict(check))


def driver_check(routine: str, settings: RunSettings) -> dict[str, Any]:
    """The check fields of a driver row that wrote its CSV row: the driver's --refcheck passed
    (it raises on a mismatch), or why there was none."""
    if not settings.check:
        return {"check": "", "check_note": "not checked (--no_check)"}
    if routine in DRIVER_REFCHECK:
        return {"check": "passed", "check_note": f"FlashInfer driver --refcheck: {DRIVER_REFCHECK[routine]}"}
    if routine in ATTENTION_ROUTINES:
        return {"check": "", "check_note": NO_REFCHECK}
    return {"check": "", "check_note": f"not checked: FlashInfer's driver has no reference check for "
            f"{routine} (v0.6.17 benchmarks/routines/moe.py)"}


def timer_from_output(text: str, settings: RunSettings) -> tuple[str, str]:
    """(timer, evidence) for a driver case from its output and warnings."""
    if cupti_fallback_in(text):
        return fallback_timer(settings.cuda_graph), cupti_fallback_reason(text)
    return "cupti", ""


def support_statements(log_text: str) -> list[str]:
    """The driver's per-backend rejections, in order, each with its continuation lines.

    A probe exception's message can span lines (cutile: "ValueError: No valid config ...",
    "Config: ...", "FileNotFoundError: 'tileiras' compiler not found ..."); the lines up to the
    next "[TAG]" line or logger line belong to it (at most 4, joined with " ").
    """
    lines = log_text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if _NOT_ON_CC.match(line.strip()) or _ATTENTION_SKIP.match(line.strip()):
            out.append(line.strip())
        elif _DOES_NOT_SUPPORT.match(line.strip()):
            parts = [line.strip()]
            for nxt in lines[i + 1 : i + 5]:
                if not nxt.strip() or nxt.startswith("[") or _LOGGER_LINE.match(nxt):
                    break
                parts.append(nxt.strip())
            out.append(" ".join(parts))
    return list(dict.fromkeys(out))


def setup_problem(text: str, who: str) -> str:
    """"set-up: <who> needs <what> (<fix>)" when `text` names a missing compiler, tool or package
    (the first matching `SETUP_PROBLEMS` row); "" when it names none."""
    for pattern, what, fix in SETUP_PROBLEMS:
        found = pattern.search(text)
        if found:
            groups = found.groups()
            return f"set-up: {who} needs {what.format(*groups)} ({fix.format(*groups)})"
    return ""


def _led_by_setup_problem(reason: str, who: str, quoted_as: str) -> str:
    """`reason` behind the set-up problem it names, so the fix is the first thing a reader sees."""
    problem = setup_problem(reason, who)
    return f"{problem}; {quoted_as}: {reason}" if problem else reason


def _statement_backend(statement: str) -> str:
    found = _DOES_NOT_SUPPORT.match(statement)
    return found.group(1) if found else ""


def no_backends_outcome(statements: list[str], backend: str) -> Outcome:
    """The driver skipped every backend: unsupported when each statement is a limit of the GPU or
    shape; failed, led by the set-up problems, when one names a missing tool or package; failed
    when one is a fault of the run."""
    quoted = "; ".join(statements)
    problems = [setup_problem(s, _statement_backend(s) or backend or "the case") for s in statements]
    problems = list(dict.fromkeys(p for p in problems if p))
    if problems:
        return Outcome("failed", f"{'; '.join(problems)}; driver said: {quoted}")
    status = "failed" if any(_FAULT.search(s) for s in statements) else "unsupported"
    return Outcome(status, quoted)


def _lost_reason(reply: WorkerReply, log_text: str) -> str:
    last = tail(log_text)
    return f"{reply.lost}; last output: {last}" if last else reply.lost


def tactic_cap_note(answer: dict[str, Any]) -> str:
    """The row's note on a capped cuDNN tactic search (worker.py _tactic_cap_scope), or ""."""
    if answer.get("tactic_cap_missing"):
        return "every cuDNN tactic profiled: this FlashInfer's autotuner has no tactic filter for --autotune_tactics"
    cut = answer.get("tactic_cap") or []
    if not cut:
        return ""
    parts = ", ".join(f"{kept} of {offered}" for _op, _runner, kept, offered in cut)
    return f"autotuned over the first {parts} cuDNN tactics (cuDNN's heuristic order; --autotune_tactics)"


def pick_row(csv_rows: list[dict[str, str]], backend: str) -> dict[str, str]:
    """The CSV row of `backend` (the driver suffixes "_autotune"); the first row otherwise."""
    for row in csv_rows:
        if row.get("backend", "").removesuffix("_autotune") == backend:
            return row
    return csv_rows[0]


def classify_driver_case(
    log_text: str, csv_rows: list[dict[str, str]], reply: WorkerReply, settings: RunSettings,
    backend: str = "", routine: str = "",
) -> Outcome:
    """ok / unsupported / failed / incorrect for one driver case (see the module docstring)."""
    ans = reply.answer
    text = log_text + "\n" + "\n".join(ans.get("warnings") or [])
    if reply.lost:
        return Outcome("failed", _lost_reason(reply, log_text))
    if RETRY_MARKER in log_text:  # the untuned re-run decides; the first attempt only dropped it
        log_text = log_text.rsplit(RETRY_MARKER, 1)[1]
    caveat = "; ".join(x for x in (
        "not autotuned: the driver cannot autotune this backend" if ans.get("autotune_dropped") else "",
        tactic_cap_note(ans), fill_note(ans.get("gpu_fills") or [])) if x)
    if csv_rows:
        row = pick_row(csv_rows, backend)
        try:
            median_us = float(row["median_time"]) * 1e3
            std_us = float(row.get("std_time") or "nan") * 1e3
        except (KeyError, ValueError):
            return Outcome("failed", f"driver CSV row has no numeric median_time: {row.get('median_time')!r}")
        if ans.get("poisoned"):
            caveat = "; ".join(x for x in (caveat, f"CUDA error after timing: {ans['poisoned']}") if x)
        spread = driver_spread(ans.get("bench_calls"), median_us)
        out = Outcome("ok", caveat, median_us, std_us, samples_us=spread.samples_us,
                      spread_note=spread.note, launches_per_call=spread.launches_per_call,
                      check=driver_check(routine, settings) if routine else {})
        return apply_timer_policy(out, *timer_from_output(text, settings), settings)
    if ans.get("systemexit"):
        m = _ARGPARSE_ERROR.findall(log_text)
        msg = m[-1].strip() if m else tail(log_text, 400)
        return Outcome("failed", f"driver rejected its arguments: {msg}")
    if ans.get("exception"):
        errs = _ERROR_LINE.findall(log_text)
        error = (f"[ERROR] Error: {errs[-1].strip()} ({ans['exception'].split(':', 1)[0]})" if errs
                 else ans["exception"])
        if ans["exception"].startswith("AssertionError") and _REFCHECK_MISMATCH.search(ans["exception"]):
            rule = DRIVER_REFCHECK.get(routine, "the driver's reference check")
            note = f"FlashInfer driver --refcheck failed ({rule}): {ans['exception']}"
            return Outcome("incorrect", f"output incorrect: {note}", timer=timer_from_output(text, settings)[0],
                           check={"check": "failed", "check_note": note})
        return Outcome("failed", _led_by_setup_problem(error, backend or "the case", "driver said"))
    verdict = _NO_BACKENDS.search(log_text)
    if verdict:
        statements = support_statements(log_text)
        if not statements:
            return Outcome("failed", f"driver skipped the case without a reason: {verdict.group(0)}")
        return no_backends_outcome(statements, backend)
    if ans.get("poisoned"):
        return Outcome("failed", f"CUDA error: {ans['poisoned']}")
    last = tail(log_text)
    return Outcome("failed", "driver wrote no result row and no error" + (f"; last output: {last}" if last else ""))


#: The worker's "measurement" answer for a torch, Triton or quant-timing case: run/worker.py
#: `_run_python_case` copies these fields of the backend's `timing.Measurement`.
#:   median_us, std_us  float, microseconds
#:   timer              "cupti", "cuda_events" or "cuda_graph": what produced the numbers
#:   note               remarks joined with "; ", for the row's reason: what the timed op did
#:                      (kernels/triton_ops.py: "vLLM's tiles, <their source>: <tiles>", or for a
#:                      tuned row "tiles from the cache: <tiles>" or "tiles searched over N
#:                      configs: <tiles>"; kernels/torch_ops.py MoE: "no
#:                      (token, expert) pair of the seeded routing reached this rank's ..."), and
#:                      last, from `timing.bench`, FlashInfer's CUPTI-fallback warning, which is
#:                      evidence for the timer, not a remark (`split_measurement_note`)
#:   samples_us         per-iteration times, microseconds
#:   launches_per_call  eager cases: launches of one call (kernels/launches.py), else null
#:   check              correctness.CheckResult.fields of the extra checked call, {} when none
MEASUREMENT_KEYS = ("median_us", "std_us", "timer", "note", "samples_us", "launches_per_call", "check")


def split_measurement_note(note: str) -> tuple[str, str]:
    """(remarks, CUPTI-fallback warning) of a measurement's note.

    The backends join their remarks and `timing.bench`'s fallback warning with "; "; the parts
    that quote the warning say why the timer is not CUPTI, the others belong on the row."""
    parts = [p.strip() for p in (note or "").split("; ") if p.strip()]
    remarks = [p for p in parts if not cupti_fallback_in(p)]
    fallback = [p for p in parts if cupti_fallback_in(p)]
    return "; ".join(remarks), "; ".join(fallback)


def classify_python_case(log_text: str, reply: WorkerReply, settings: RunSettings) -> Outcome:
    """ok / unsupported / failed for a torch-baseline, Triton or quant-timing case.

    An ok row's reason is the caveat (a CUDA error after timing), then the measurement's remarks
    (`MEASUREMENT_KEYS` "note"), then the timer label `apply_timer_policy` adds."""
    ans = reply.answer
    if reply.lost:
        return Outcome("failed", _lost_reason(reply, log_text))
    if ans.get("unsupported"):
        return Outcome("unsupported", ans["unsupported"])
    if ans.get("exception"):
        return Outcome("failed", _led_by_setup_problem(ans["exception"], "the case", "error"))
    m = ans.get("measurement")
    if not m:
        return Outcome("failed", "no measurement returned" + (f"; last output: {tail(log_text)}" if log_text else ""))
    remarks, fallback_warning = split_measurement_note(m.get("note") or "")
    caveat = f"CUDA error after timing: {ans['poisoned']}" if ans.get("poisoned") else ""
    samples = tuple(float(x) for x in m.get("samples_us") or ())
    out = Outcome("ok", "; ".join(x for x in (caveat, remarks) if x), m["median_us"], m["std_us"],
                  samples_us=samples, spread_note="" if samples else "no per-iteration times returned",
                  launches_per_call=m.get("launches_per_call"))
    out = with_check(out, m.get("check") or {})
    text = log_text + "\n" + "\n".join(ans.get("warnings") or [])
    timer = m.get("timer") or "cupti"
    if timer == "cupti" and (fallback_warning or cupti_fallback_in(text)):
        timer = fallback_timer(settings.cuda_graph)  # the warning wins over a claimed "cupti"
    evidence = fallback_warning or cupti_fallback_reason(text) or f"the backend reported timer {timer!r}"
    return apply_timer_policy(out, timer, evidence, settings)


def spread_fields(outcome: Outcome) -> dict[str, Any]:
    """The Row's percentile fields from the outcome's samples (none for an untimed outcome)."""
    if outcome.median_us is None:
        return {}
    if not outcome.samples_us:
        return {"spread_note": outcome.spread_note or "no per-iteration times recorded"}
    return {**percentiles(outcome.samples_us), "n_samples": len(outcome.samples_us),
            "samples_us": [round(x, 4) for x in outcome.samples_us], "spread_note": outcome.spread_note}


def row_from_case(case: Case, outcome: Outcome, quant_us: float | None = None) -> Row:
    """A results Row: the case's logical/physical shape + the outcome (no roofline yet)."""
    shape: dict[str, Any] = {}
    lg, ph = case.logical, case.physical
    if isinstance(lg, GemmShape):
        shape = {"num_tokens": lg.m, "n": lg.n, "k": lg.k, "phys_n": ph.n, "phys_k": ph.k}
    elif isinstance(lg, MoeShape):
        shape = {"num_tokens": lg.num_tokens, "hidden": lg.hidden,
                 "intermediate": lg.intermediate, "experts": lg.experts,
                 "global_experts": lg.global_experts, "top_k": lg.top_k,
                 "phys_hidden": ph.hidden, "phys_intermediate": ph.intermediate,
                 "activation": case.activation, "gated": case.gated,
                 "routing_method": case.routing.method if case.routing else ""}
    elif isinstance(lg, AttentionShape):
        shape = {"num_tokens": lg.tokens, "phase": lg.phase, "batch_size": lg.batch_size,
                 "q_len": lg.q_len, "kv_len": lg.kv_len, "context_len": lg.context_len,
                 "num_q_heads": lg.num_q_heads, "num_kv_heads": lg.num_kv_heads,
                 "head_dim_qk": lg.head_dim_qk, "head_dim_vo": lg.head_dim_vo,
                 "kv_lora_rank": lg.kv_lora_rank, "qk_rope_head_dim": lg.qk_rope_head_dim,
                 "page_size": lg.page_size, "sliding_window": lg.sliding_window,
                 "attention_chunk_size": lg.attention_chunk_size}
    # The case's note says what a number is (e.g. timed over a window's tokens): timed rows only.
    note = case.note if outcome.median_us is not None else ""
    reason = "; ".join(x for x in (note, outcome.reason) if x)
    return Row(
        case_id=case.case_id, kind=case.kind, name=case.name, modules="|".join(case.modules),
        layers=case.layers, m=case.m, dtype=case.dtype, backend=case.backend, routine=case.routine,
        variant=case.variant, with_quant=case.with_quant, scheme=case.scheme,
        vllm_default=case.vllm_default, timed_as=case.timed_as, vllm_runs=case.vllm_runs, **shape,
        median_us=outcome.median_us, std_us=outcome.std_us, quant_us=quant_us,
        status=outcome.status, reason=reason, timer=outcome.timer, mode=case.mode,
        launches_per_call=outcome.launches_per_call, **spread_fields(outcome), **outcome.check,
    )


__all__ = [
    "MEASUREMENT_KEYS",
    "RETRY_MARKER",
    "SETUP_PROBLEMS",
    "Outcome",
    "WorkerReply",
    "apply_timer_policy",
    "classify_driver_case",
    "classify_python_case",
    "driver_check",
    "fallback_timer",
    "no_backends_outcome",
    "pick_row",
    "read_driver_csv",
    "row_from_case",
    "setup_problem",
    "split_measurement_note",
    "spread_fields",
    "support_statements",
    "tail",
    "timer_from_output",
    "with_check",
]
