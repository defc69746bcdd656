"""Outcome classification: driver CSV parsing, ok / unsupported / failed with the driver's own words,
the timer policy, and Case + Outcome -> Row.

Classification is checked against the driver's own message formats (research/flashinfer_driver.md
sections 1.5, 1.6, 2) and, when present, against output captured from the real driver on the H200
(tests/fixtures/driver/*.log|csv).
"""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.core.results_schema import RunSettings
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
    m = {"median_us": 12.0, "std_us": 0.5, "timer": "cupti", "note": "", "samples_us": [11.5, 12.0, 12.5]}
    assert classify_python_case("", WorkerReply({"measurement": m}), S) == Outcome(
        "ok", "", 12.0, 0.5, "cupti", samples_us=(11.5, 12.0, 12.5))
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
    # No cubin and FLASHINFER_NO_DOWNLOAD: a set-up problem (fixable by flashinfer-cubin); on
    # sm_90 the capability table skips mm_fp8 before launch, so no such row is ever run there.
    "mm_fp8": ("trtllm_low_latency", "failed",
               "set-up: trtllm_low_latency needs its prebuilt cubin (flashinfer-cubin)"),
    "moe_cutlass": ("cutlass", "unsupported",
                    "[WARNING] cutlass for routine cutlass_fused_moe is not supported on compute "
                    "capability 9.0. Skipping."),
    "moe_trtllm_fp8": ("trtllm", "unsupported", "not supported on compute capability 9.0"),
    "moe_trtllm_fp4": ("trtllm", "unsupported", "not supported on compute capability 9.0"),
    # single-case mode: the exception propagates (the worker would answer with its text)
    "moe_cutedsl": ("cute-dsl", "failed", "ImportError: cannot import name 'CuteDslMoEWrapper'"),
}


#: Driver releases with captured output: v0.6.17 at the top of the folder, later ones in a
#: sub-folder named by their tag (capture.sh writes them; tests/fixtures/driver/README.md).
CAPTURED_RELEASES = ("", "v0.6.18")


def _captured(release, name):
    log = os.path.join(FIXTURES, release, f"{name}.log")
    if not os.path.isfile(log):
        pytest.skip(f"tests/fixtures/driver/{release + '/' if release else ''}{name}.log not "
                    "captured yet")
    with open(log, errors="replace") as f:
        return f.read(), read_driver_csv(os.path.join(FIXTURES, release, f"{name}.csv"))


@pytest.mark.parametrize("release", CAPTURED_RELEASES, ids=lambda r: r or "v0.6.17")
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_classify_output_captured_from_the_real_driver(name, release):
    backend, status, expect = CAPTURED[name]
    text, rows = _captured(release, name)
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
    text, rows = _captured("", "mm_bf16")
    statements = outcome.support_statements(text)
    cutile = next(s for s in statements if s.startswith("[INFO] cutile"))
    assert "No valid config found" in cutile and "'tileiras' compiler not found" in cutile
    assert any("No module named 'cutlass'" in s for s in statements)
    # the row for the case's own backend is picked, not the first row
    assert outcome.pick_row(rows, "tinygemm")["backend"] == "tinygemm"


def test_captured_testlist_csv_rows_and_the_bad_shape_message():
    text, rows = _captured("", "testlist")
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
    assert out == Outcome("failed", f"{CUTILE_SETUP}; driver said: [INFO] cutile backend does not "
                          "support this configuration: ValueError: No valid config found in search "
                          "space. FileNotFoundError: 'tileiras' compiler not found")


# ------------------------------------------------- a missing compiler or package is a set-up problem
CUTILE_SETUP = ("set-up: cutile needs the tileiras compiler (pip install cuda-tile[tileiras], or "
                "CUDA Toolkit 13.1+ on PATH)")
#: The cutile probe as the driver printed it on the H200 (examples/h200/qwen3-30b-a3b_tp1/driver.log of commit 22bfafb).
H200_CUTILE_LOG = (
    "[INFO] FlashInfer version: 0.6.17\n"
    "[INFO] cutile backend does not support this configuration: ValueError: No valid config found "
    "in search space.\n"
    "Config: namespace(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8, num_ctas=1, "
    "occupancy=1, EPILOGUE_SUBTILE=0)\n"
    "FileNotFoundError: 'tileiras' compiler not found, make sure it is available as a python "
    "package via `pip install cuda-tile[tileiras]` or available in $PATH or $CUDA_HOME/bin via "
    "system CTK (13.1+) installation.\n"
    "[ERROR] No backends passed validation. Exiting.\n"
)


def test_h200_cutile_without_tileiras_is_a_failed_set_up_with_the_fix():
    out = classify_driver_case(H200_CUTILE_LOG, [], WorkerReply({}), S, "cutile")
    assert out.status == "failed" and out.median_us is None
    assert out.reason == (
        f"{CUTILE_SETUP}; driver said: [INFO] cutile backend does not support this configuration: "
        "ValueError: No valid config found in search space. Config: namespace(BLOCK_M=128, "
        "BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8, num_ctas=1, occupancy=1, EPILOGUE_SUBTILE=0) "
        "FileNotFoundError: 'tileiras' compiler not found, make sure it is available as a python "
        "package via `pip install cuda-tile[tileiras]` or available in $PATH or $CUDA_HOME/bin via "
        "system CTK (13.1+) installation.")


def test_missing_optional_module_is_a_failed_set_up_naming_the_package():
    log = ("[INFO] cute-dsl backend does not support this configuration: ModuleNotFoundError: "
           "No module named 'cutlass'\n[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(log, [], WorkerReply({}), S, "cute-dsl")
    assert out.status == "failed"
    assert out.reason.startswith("set-up: cute-dsl needs the nvidia-cutlass-dsl package (module "
                                 "cutlass) (pip install 'nvidia-cutlass-dsl[cu13]' (CUDA 13) or "
                                 "nvidia-cutlass-dsl (CUDA 12)); driver said: [INFO] cute-dsl")


def test_genuine_limits_stay_unsupported_beside_the_set_up_rows():
    capability = ("[INFO] cudnn backend does not support this configuration: BackendSupportedError: "
                  "mm_fp4 does not support backend 'cudnn' with capability 90\n"
                  "[ERROR] No backends passed validation. Exiting.\n")
    out = classify_driver_case(capability, [], WorkerReply({}), S, "cudnn")
    assert out == Outcome("unsupported", "[INFO] cudnn backend does not support this configuration: "
                          "BackendSupportedError: mm_fp4 does not support backend 'cudnn' with "
                          "capability 90")
    for statement in out.reason.split("; "):
        assert outcome.setup_problem(statement, "cudnn") == ""


@pytest.mark.parametrize("text, expected", [
    ("FileNotFoundError: 'tileiras' compiler not found", CUTILE_SETUP),
    ("ModuleNotFoundError: No module named 'cuda.tile'",
     "set-up: cutile needs the cuda-tile package (module cuda.tile) (pip install cuda-tile[tileiras])"),
    ("ImportError: No module named 'nvshmem.core'",
     "set-up: cutile needs the Python module nvshmem (pip install the package that provides it "
     "(FlashInfer's requirements.txt lists the optional ones))"),
    ("RuntimeError: 'ptxas' compiler not found",
     "set-up: cutile needs the ptxas compiler (install it and put it on PATH)"),
    ("ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
     "set-up: cutile needs the shared library libcudnn.so.9 (install the package that ships it, or "
     "add its folder to LD_LIBRARY_PATH)"),
    ("BackendSupportedError: mm_bf16 does not support backend 'cutile' with capability 80", ""),
])
def test_setup_problem_table(text, expected):
    assert outcome.setup_problem(text, "cutile") == expected


def test_driver_exception_naming_a_missing_module_leads_with_the_set_up_problem():
    log = ("[ERROR] Error running test: --routine mm_bf16 ...\n"
           "[ERROR] Error: No module named 'cutlass'\nTraceback ...\n")
    reply = WorkerReply({"exception": "ModuleNotFoundError: No module named 'cutlass'"})
    out = classify_driver_case(log, [], reply, S, "cute-dsl")
    assert out.status == "failed"
    assert out.reason.startswith("set-up: cute-dsl needs the nvidia-cutlass-dsl package")
    assert out.reason.endswith("; driver said: [ERROR] Error: No module named 'cutlass' "
                               "(ModuleNotFoundError)")


def test_python_case_exception_naming_a_missing_module_leads_with_the_set_up_problem():
    reply = WorkerReply({"exception": "ModuleNotFoundError: No module named 'triton'"})
    out = classify_python_case("", reply, S)
    assert out == Outcome("failed", "set-up: the case needs the Python module triton (pip install "
                          "the package that provides it (FlashInfer's requirements.txt lists the "
                          "optional ones)); error: ModuleNotFoundError: No module named 'triton'")


# ------------------------------------------------------ measurement notes reach the ok row's reason
TRITON_TILES = "tiles searched over 48 configs: 64,128,64,8,4,3"
MOE_NOTE = ("no (token, expert) pair of the seeded routing reached this rank's 32 of 128 experts "
            "at M=1, top_k=8: timed the permutation and zeroed output only")
FALLBACK_NOTE = ("CUPTI is not installed. Try 'pip install -U cupti-python'. Falling back to CUDA "
                 "events for benchmarking.")


def _measured(note, timer="cupti"):
    return {"median_us": 12.0, "std_us": 0.5, "timer": timer, "note": note, "samples_us": [12.0]}


def test_measurement_note_is_the_ok_rows_reason():
    out = classify_python_case("", WorkerReply({"measurement": _measured(TRITON_TILES)}), S)
    assert out == Outcome("ok", TRITON_TILES, 12.0, 0.5, "cupti", samples_us=(12.0,))


def test_measurement_note_follows_the_caveat():
    reply = WorkerReply({"measurement": _measured(MOE_NOTE), "poisoned": "CUDA error: x"})
    out = classify_python_case("", reply, S)
    assert out.status == "ok" and out.reason == f"CUDA error after timing: CUDA error: x; {MOE_NOTE}"


def test_fallback_warning_in_the_note_is_timer_evidence_not_a_remark():
    note = f"{TRITON_TILES}; {FALLBACK_NOTE}"
    failed = classify_python_case("", WorkerReply({"measurement": _measured(note, "cuda_graph")}), S)
    assert failed.status == "failed" and failed.timer == "cuda_graph"
    assert f"not comparable): {FALLBACK_NOTE}; install cupti-python" in failed.reason
    assert "tiles" not in failed.reason
    allowed = RunSettings(allow_cuda_events=True)
    ok = classify_python_case("", WorkerReply({"measurement": _measured(note, "cuda_graph")}), allowed)
    assert ok.status == "ok" and ok.reason == (
        f"{TRITON_TILES}; timed with cuda_graph, not CUPTI (--allow_cuda_events)")


def test_a_remark_is_never_quoted_as_timer_evidence():
    reply = WorkerReply({"measurement": _measured(TRITON_TILES, "cuda_events")})
    out = classify_python_case("", reply, S)
    assert out.status == "failed"
    assert "not comparable): the backend reported timer 'cuda_events'; install" in out.reason


def test_split_measurement_note():
    assert outcome.split_measurement_note("") == ("", "")
    assert outcome.split_measurement_note(f"{MOE_NOTE}; {FALLBACK_NOTE}") == (MOE_NOTE, FALLBACK_NOTE)
    assert outcome.split_measurement_note(FALLBACK_NOTE) == ("", FALLBACK_NOTE)


def test_worker_answers_exactly_the_measurement_keys(monkeypatch):
    from benchmark_model_kernels.kernels.timing import Measurement
    from benchmark_model_kernels.run import worker

    measured = Measurement(12.0, 0.5, "cupti", TRITON_TILES)
    monkeypatch.setattr(worker.triton_ops, "run_case", lambda case, settings: measured)
    req = {"job": "triton", "case": gemm_case(4096).to_dict(), "settings": {}}
    answer = worker._run_python_case(req)
    assert tuple(answer["measurement"]) == outcome.MEASUREMENT_KEYS
    assert classify_python_case("", WorkerReply(answer), S).reason == TRITON_TILES


# --------------------------------------------------------------------------------- Case -> Row
def test_row_from_case_carries_logical_and_physical_shapes():
    g = row_from_case(gemm_case(4096, k=128), Outcome("ok", "", 12.0, 0.5, "cupti"))
    assert (g.n, g.k, g.phys_n, g.phys_k) == (4096, 128, 4096, 128)
    assert (g.status, g.median_us, g.std_us, g.timer, g.quant_us) == ("ok", 12.0, 0.5, "cupti", None)
    m = row_from_case(moe_case(), Outcome("failed", "x"), quant_us=1.5)
    assert (m.intermediate, m.top_k, m.routing_method, m.activation) == (768, 8, "renormalize", "Swiglu")
    assert m.status == "failed" and m.reason == "x" and m.median_us is None and m.quant_us == 1.5


#: Driver checkouts this repository's bundles carry (benchmarks/make_flashinfer_bundles.sh,
#: ../shared/device/make_bundle.sh), by release; absent ones skip.
BUNDLED_DRIVERS = {"v0.6.17": ".devbundle/flashinfer", "v0.6.18": ".fi618/flashinfer"}
#: The driver's own words the classification above keys on (module docstring of outcome.py).
DRIVER_PHRASES = ("[ERROR] No backends passed validation. Exiting.", "No backends to test",
                  "backend does not support this configuration: ",
                  "is not supported on compute capability", "[ERROR] Error: ",
                  "does not support autotune", '"median_time"', '"std_time"')


@pytest.mark.parametrize("release", sorted(BUNDLED_DRIVERS))
def test_every_bundled_driver_still_prints_what_the_parser_reads(release):
    root = os.path.join(os.path.dirname(FIXTURES), "..", "..", BUNDLED_DRIVERS[release], "benchmarks")
    if not os.path.isdir(root):
        pytest.skip(f"{BUNDLED_DRIVERS[release]} not built here")
    source = ""
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), errors="replace") as f:
                    source += f.read()
    missing = [p for p in DRIVER_PHRASES if p not in source]
    assert not missing, f"{release} driver no longer prints {missing}"
