"""Outcome classification: driver CSV parsing, ok / unsupported / failed with the driver's own words,
the timer policy, and Case + Outcome -> Row.

Classification is checked against the driver's own message formats (research/flashinfer_driver.md
sections 1.5, 1.6, 2) and, when present, against output captured from the real driver on the H200
(tests/fixtures/driver/*.log|csv).
"""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.run import outcome
from benchmark_model_kernels.run.outcome import (
    RETRY_MARKER,
    Outcome,
    WorkerReply,
    classify_driver_case,
    classify_python_case,
    read_driver_csv,
    row_from_case,
)
from benchmark_model_kernels.run.results import RunSettings
from helpers_runner import gemm_case, moe_case

S = RunSettings()
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "driver")


# ----------------------------------------------------------------------------------------- CSV
def test_read_driver_csv_keeps_first_of_duplicate_columns(tmp_path):
    p = tmp_path / "out.csv"
    p.write_text("routine,median_time,top_k,num_tokens,top_k,case_tag\n"
                 "mm_bf16,0.0196,8,16,99,t1\n")
    rows = read_driver_csv(str(p))
    assert rows == [{"routine": "mm_bf16", "median_time": "0.0196", "top_k": "8",
                     "num_tokens": "16", "case_tag": "t1"}]


def test_read_driver_csv_missing_or_header_only(tmp_path):
    assert read_driver_csv(str(tmp_path / "nope.csv")) == []
    (tmp_path / "h.csv").write_text("routine,median_time\n")
    assert read_driver_csv(str(tmp_path / "h.csv")) == []


# ------------------------------------------------------------------------------ classification
ROW = {"routine": "mm_bf16", "median_time": "0.0196", "std_time": "0.0004", "backend": "cudnn_autotune"}


def test_row_is_ok_in_microseconds_timed_with_cupti():
    out = classify_driver_case("[PERF] cudnn ...", [ROW], WorkerReply({}), S)
    assert out.status == "ok" and out.timer == "cupti"
    assert out.median_us == pytest.approx(19.6) and out.std_us == pytest.approx(0.4)


def test_probe_rejection_is_unsupported_quoting_the_driver():
    log = ("[INFO] cutlass backend does not support this configuration: BackendSupportedError: "
           "bmm_fp8 does not support backend 'cutlass' with capability 90\n"
           "[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S)
    assert out.status == "unsupported"
    assert out.reason == ("[INFO] cutlass backend does not support this configuration: "
                          "BackendSupportedError: bmm_fp8 does not support backend 'cutlass' with capability 90")


def test_capability_table_skip_is_unsupported():
    log = ("[WARNING] cutlass for routine cutlass_fused_moe is not supported on compute capability 9.0. "
           "Skipping.\n[ERROR] No backends to test. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S)
    assert out.status == "unsupported" and "compute capability 9.0" in out.reason


def test_probe_fault_is_failed_not_unsupported():
    log = ("[INFO] cudnn backend does not support this configuration: OutOfMemoryError: CUDA out of "
           "memory. Tried to allocate 2.00 GiB\n[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S)
    assert out.status == "failed" and "out of memory" in out.reason


def test_no_backends_without_reason_is_failed():
    out = classify_driver_case("[ERROR] No backends to test. Exiting.\n", [], WorkerReply({}), S)
    assert out.status == "failed" and "without a reason" in out.reason


def test_exception_quotes_the_error_line():
    log = ("[ERROR] Error running test: --routine mm_bf16 ...\n"
           "[ERROR] Error: Unsupported output dtype: float64.\nTraceback ...\n")
    out = classify_driver_case(log, [], WorkerReply({"exception": "ValueError: Unsupported output dtype: float64."}), S)
    assert out.status == "failed"
    assert out.reason == "[ERROR] Error: Unsupported output dtype: float64. (ValueError)"


def test_argparse_exit_quotes_the_usage_error():
    log = ("usage: flashinfer_benchmark.py [-h] ...\n"
           "flashinfer_benchmark.py: error: argument --m: invalid int value: 'x'\n")
    out = classify_driver_case(log, [], WorkerReply({"systemexit": "exit code 2"}), S)
    assert out.status == "failed"
    assert out.reason == ("driver rejected its arguments: "
                          "flashinfer_benchmark.py: error: argument --m: invalid int value: 'x'")


def test_lost_worker_reason_has_the_last_output():
    out = classify_driver_case("[INFO] Running testMmBf16\nFatal Python error: Segmentation fault\n", [],
                               WorkerReply(lost="worker exited with signal 11 (SIGSEGV)"), S)
    assert out.status == "failed"
    assert out.reason.startswith("worker exited with signal 11 (SIGSEGV); last output: ")
    assert "Segmentation fault" in out.reason


def test_silence_is_failed_with_the_tail():
    out = classify_driver_case("[INFO] args = Namespace()\n", [], WorkerReply({}), S)
    assert out.status == "failed" and "no result row" in out.reason and "Namespace" in out.reason


FALLBACK = ("UserWarning: CUPTI is not installed. Try 'pip install -U cupti-python'. "
            "Falling back to CUDA events for benchmarking.")


def test_cupti_fallback_fails_the_row_unless_allowed():
    reply = WorkerReply({"warnings": [FALLBACK]})
    out = classify_driver_case("", [ROW], reply, S)
    assert out.status == "failed" and out.median_us is None and out.timer == "cuda_graph"
    assert "CUPTI is not installed" in out.reason and "--allow_cuda_events" in out.reason
    ok = classify_driver_case("", [ROW], reply, RunSettings(allow_cuda_events=True, cuda_graph=False))
    assert ok.status == "ok" and ok.timer == "cuda_events" and ok.median_us == pytest.approx(19.6)


def test_autotune_dropped_is_a_caveat_on_an_ok_row():
    out = classify_driver_case("", [ROW], WorkerReply({"autotune_dropped": True}), S)
    assert out.status == "ok" and "not autotuned" in out.reason


def test_python_case_outcomes():
    m = {"median_us": 12.0, "std_us": 0.5, "timer": "cupti", "note": ""}
    assert classify_python_case("", WorkerReply({"measurement": m}), S) == Outcome("ok", "", 12.0, 0.5, "cupti")
    u = classify_python_case("", WorkerReply({"unsupported": "torch._scaled_mm needs SM89+"}), S)
    assert u == Outcome("unsupported", "torch._scaled_mm needs SM89+")
    ev = dict(m, timer="cuda_events", note="CUPTI is not installed ... Falling back to CUDA events")
    f = classify_python_case("", WorkerReply({"measurement": ev}), S)
    assert f.status == "failed" and "CUPTI is not installed" in f.reason


# ---------------------------------------------------- real driver output captured on the H200
#: fixture -> (backend of the case, expected status, text the reason or number must show).
#: Files come from tests/fixtures/driver/capture.sh (see its README); skipped until captured.
CAPTURED = {
    "mm_bf16": ("cublaslt", "ok", 19.0),
    "bmm_fp8": ("cublas", "ok", 11.0),
    "mm_fp4": ("cutlass", "unsupported",
               "[INFO] cutlass backend does not support this configuration: BackendSupportedError: "
               "mm_fp4 does not support backend 'cutlass' with capability 90"),
    "mm_fp8": ("trtllm_low_latency", "unsupported", "RuntimeError: Artifact not found locally"),
    "moe_cutlass": ("cutlass", "unsupported",
                    "[WARNING] cutlass for routine cutlass_fused_moe is not supported on compute "
                    "capability 9.0. Skipping."),
    "moe_trtllm_fp8": ("trtllm", "unsupported", "not supported on compute capability 9.0"),
    "moe_trtllm_fp4": ("trtllm", "unsupported", "not supported on compute capability 9.0"),
    # single-case mode: the exception propagates (the worker would answer with its text)
    "moe_cutedsl": ("cute-dsl", "failed", "ImportError: cannot import name 'CuteDslMoEWrapper'"),
}


def _captured(name):
    log = os.path.join(FIXTURES, f"{name}.log")
    if not os.path.isfile(log):
        pytest.skip(f"tests/fixtures/driver/{name}.log not captured yet")
    with open(log, errors="replace") as f:
        return f.read(), read_driver_csv(os.path.join(FIXTURES, f"{name}.csv"))


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_classify_output_captured_from_the_real_driver(name):
    backend, status, expect = CAPTURED[name]
    text, rows = _captured(name)
    answer = {}
    if not rows and "Traceback" in text:  # what the worker answers for a propagated exception
        answer["exception"] = text.strip().splitlines()[-1]
    out = classify_driver_case(text, rows, WorkerReply(answer), S, backend)
    assert out.status == status, out.reason
    if status == "ok":
        assert out.timer == "cupti" and out.median_us == pytest.approx(expect, rel=0.15)
    else:
        assert expect in out.reason


def test_captured_probe_message_spanning_lines_is_quoted_whole():
    text, rows = _captured("mm_bf16")
    statements = outcome.support_statements(text)
    cutile = next(s for s in statements if s.startswith("[INFO] cutile"))
    assert "No valid config found" in cutile and "'tileiras' compiler not found" in cutile
    assert any("No module named 'cutlass'" in s for s in statements)
    # the row for the case's own backend is picked, not the first row
    assert outcome.pick_row(rows, "tinygemm")["backend"] == "tinygemm"


def test_captured_testlist_csv_rows_and_the_bad_shape_message():
    text, rows = _captured("testlist")
    assert [(r["case_tag"], r["backend"]) for r in rows] == [
        ("tl_1", "cudnn_autotune"), ("tl_1", "cublaslt_autotune"),
        ("tl_2", "cublas_autotune"), ("tl_2", "cudnn_autotune")]
    assert all(float(r["median_time"]) > 0 for r in rows)
    assert any(s.startswith("[INFO] tinygemm backend does not support this configuration: RuntimeError")
               for s in outcome.support_statements(text))


def test_only_the_untuned_retry_decides_the_outcome():
    log = ("[INFO] cutile backend does not support autotune\n[ERROR] No backends passed validation. Exiting.\n"
           f"{RETRY_MARKER}\n"
           "[INFO] cutile backend does not support this configuration: "
           "ValueError: No valid config found in search space.\n"
           "FileNotFoundError: 'tileiras' compiler not found\n"
           "[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({"autotune_dropped": True}), S, "cutile")
    assert out == Outcome("unsupported", "[INFO] cutile backend does not support this configuration: "
                          "ValueError: No valid config found in search space. "
                          "FileNotFoundError: 'tileiras' compiler not found")


# --------------------------------------------------------------------------------- Case -> Row
def test_row_from_case_carries_logical_and_physical_shapes():
    g = row_from_case(gemm_case(4096, k=128), Outcome("ok", "", 12.0, 0.5, "cupti"))
    assert (g.n, g.k, g.phys_n, g.phys_k) == (4096, 128, 4096, 128)
    assert (g.status, g.median_us, g.std_us, g.timer, g.quant_us) == ("ok", 12.0, 0.5, "cupti", None)
    m = row_from_case(moe_case(), Outcome("failed", "x"), quant_us=1.5)
    assert (m.intermediate, m.top_k, m.routing_method, m.activation) == (768, 8, "renormalize", "Swiglu")
    assert m.status == "failed" and m.reason == "x" and m.median_us is None and m.quant_us == 1.5
