"""The GPU-side worker: runs cases one after another inside ONE long-lived process.

Started by `pool.WorkerPool` as `python -m benchmark_model_kernels.run.worker --answer_fd N
--parent_pid P --lifeline_fd L --benchmarks_dir DIR` with cwd = DIR (FlashInfer's `benchmarks/`, so
`import flashinfer_benchmark` and `routines` resolve and the checkout root, whose `flashinfer/` would
shadow the wheel, does not), in a session of its own. It never outlives the pool, nor a case's
deadline_s (lifetime.py says how).

Protocol (one JSON object per line):
  parent -> stdin:       {"job": "driver"|"torch"|"quant", "case_id", "log_path", "csv_path",
                          "argv": [...driver argv...], "case": {...}, "settings": {...},
                          "tuning_buckets": [M] (driver cases whose autotuner tunes on M: argv.py),
                          "tactic_cap": N (cuDNN driver cases: at most N tactics profiled, argv.py),
                          "gpu_fill_min_numel": N (attention driver cases: their large K/V draws
                          made on the GPU, driver_fills.py; absent: the driver's own fill),
                          "deadline_s": seconds after which the worker ends itself (optional)}
  worker -> answer fd:   {"case_id", "elapsed_s", "exception", "systemexit", "unsupported",
                          "measurement", "warnings", "autotune_dropped", "poisoned",
                          "bench_calls" (driver cases: driver_capture.py),
                          "tactic_cap" ([[op, runner, kept, offered]] where tactics were cut),
                          "tactic_cap_missing" (a FlashInfer whose autotuner has no filter hook),
                          "gpu_fills" (the draws made on the GPU, when there were any)}
The driver prints to stdout/stderr, so both fds are redirected (os.dup2, which also catches native
output such as JIT builds and faulthandler tracebacks) into the case's log file while it runs; the
answer goes over a dedicated pipe. The worker never classifies: the parent does (outcome.py), from
the log, the CSV and this answer. After a CUDA error the context is poisoned, so the worker answers and
exits; the parent starts a fresh one for the remaining cases.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import inspect
import json
import os
import shlex
import sys
import time
import traceback
import warnings
from typing import Any

from ..core.case_schema import Case
from ..core.results_schema import RunSettings
from ..kernels import quant_timing, torch_ops, triton_ops
from ..kernels.timing import UnsupportedCase
from . import lifetime
from .driver_capture import capture_bench_calls
from .driver_fills import DeviceFill, gpu_fills
from .outcome import RETRY_MARKER

#: Exception text that means the CUDA context is unusable for every later case.
_POISON_MARKERS = (
    "CUDA error",
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "CUBLAS_STATUS_EXECUTION_FAILED",
)

_driver_modules: tuple[Any, Any] | None = None


def _import_driver() -> tuple[Any, Any]:
    """`flashinfer_benchmark` and its `routines.flashinfer_benchmark_utils`, imported once.

    Lazy, at the first driver case: they resolve from --benchmarks_dir (put on sys.path by `main`),
    and importing them imports torch and FlashInfer, whose output (and any import failure) belongs
    in that case's log, where `run_request` has redirected fds 1 and 2 by then."""
    global _driver_modules
    if _driver_modules is None:
        import flashinfer_benchmark
        from routines import flashinfer_benchmark_utils

        _driver_modules = (flashinfer_benchmark, flashinfer_benchmark_utils)
    return _driver_modules


def _csv_has_rows(path: str) -> bool:
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip()) > 1
    except OSError:
        return False


def _tuning_scope(buckets: list[int] | None) -> Any:
    """FlashInfer's autotune bucket override for one driver call (argv.tuning_buckets), or a no-op:
    an outer `flashinfer.autotune(False, tuning_buckets=...)` pushes the buckets, which the
    driver's own `autotune(True, cache=...)` inherits (it passes none), and turns no tuning on by
    itself. A FlashInfer whose autotune() takes no tuning_buckets keeps its default buckets."""
    if not buckets:
        return contextlib.nullcontext()
    try:
        from flashinfer.autotuner import autotune
    except ImportError:
        return contextlib.nullcontext()
    if "tuning_buckets" not in inspect.signature(autotune).parameters:
        print("[bmk-worker] this FlashInfer's autotune() takes no tuning_buckets: default buckets")
        return contextlib.nullcontext()
    print(f"[bmk-worker] FlashInfer autotuner buckets: {tuple(buckets)} (the timed M only; its "
          "tactic is the one the default buckets would give it)")
    return autotune(False, tuning_buckets=tuple(buckets))


class _CappedTactics:
    """FlashInfer's autotuner tactic filter (AutoTuner._blocklist: every list of tactics a runner
    offers passes through its `filter(custom_op, runner, tactics)` before profiling, in
    choose_one and in the tuning-config path; release-v0.6.17, -v0.6.18 and main), wrapped so a
    cuDNN runner's list is cut to its first `cap` entries after the blocklist has had its say.
    `capped` counts what was cut: {(op, runner): (kept, offered)}."""

    def __init__(self, inner: Any, cap: int) -> None:
        self._inner, self._cap = inner, cap
        self.capped: dict[tuple[str, str], tuple[int, int]] = {}

    def filter(self, custom_op: str, runner: Any, tactics: list[Any]) -> list[Any]:
        tactics = self._inner.filter(custom_op, runner, tactics)
        name = type(runner).__name__
        if not name.startswith("Cudnn") or len(tactics) <= self._cap:
            return tactics
        self.capped[(custom_op, name)] = (self._cap, len(tactics))
        print(f"[bmk-worker] {custom_op} {name}: profiling the first {self._cap} of {len(tactics)} "
              "cuDNN tactics (cuDNN's heuristic order; --autotune_tactics all profiles every one)")
        return tactics[:self._cap]

    def __getattr__(self, name: str) -> Any:  # load(), the blocklist's other methods
        return getattr(self._inner, name)


@contextlib.contextmanager
def _tactic_cap_scope(cap: int | None, out: dict[str, Any]) -> Any:
    """FlashInfer's autotuner with at most `cap` cuDNN tactics profiled per shape for one driver
    call (argv.tactic_cap), or unchanged. `out["tactic_cap"]` gets what was cut ([[op, runner,
    kept, offered], ...]); a FlashInfer without the filter hook gets `tactic_cap_missing` and
    profiles every tactic."""
    if not cap:
        yield
        return
    try:
        import flashinfer.autotuner as autotuner_module
    except ImportError:  # no FlashInfer here (a stand-in driver): nothing is autotuned
        yield
        return
    try:
        tuner = autotuner_module.AutoTuner.get()
        inner = tuner._blocklist
    except AttributeError:
        print("[bmk-worker] this FlashInfer's autotuner has no tactic filter: every cuDNN tactic profiled")
        out["tactic_cap_missing"] = True
        yield
        return
    wrapped = _CappedTactics(inner, cap)
    tuner._blocklist = wrapped
    try:
        yield
    finally:
        tuner._blocklist = inner
        if wrapped.capped:
            out["tactic_cap"] = [[op, runner, kept, offered] for (op, runner), (kept, offered)
                                 in sorted(wrapped.capped.items())]


def _fill_scope(min_numel: int | None) -> Any:
    """The attention routines' large K/V draws made on the GPU (driver_fills.py), or a no-op."""
    return gpu_fills(min_numel) if min_numel else contextlib.nullcontext([])


def _run_driver_once(argv: list[str], csv_path: str, buckets: list[int] | None = None,
                     gpu_fill_min_numel: int | None = None, cap: int | None = None) -> dict[str, Any]:
    fb, fbu = _import_driver()
    try:
        args = fb.parse_args(list(argv))
    except SystemExit as e:  # argparse: the message is already on stderr (the case log)
        return {"systemexit": f"the driver's argument parser exited with code {e.code}"}
    args.output_path = csv_path
    # The driver's __main__ writes the header; in-process we write it, from the same column list.
    with open(csv_path, "w") as f:
        f.write(",".join(fbu.full_output_columns) + "\n")
    fills: list[DeviceFill] = []
    capped: dict[str, Any] = {}
    try:
        with _tuning_scope(buckets), _tactic_cap_scope(cap, capped), \
                capture_bench_calls(count_eager_launches=True) as calls, _fill_scope(gpu_fill_min_numel) as fills:
            fb.run_test(args)
        out: dict[str, Any] = {"bench_calls": calls}
    except SystemExit as e:  # a routine calling sys.exit must not end the worker
        traceback.print_exc()
        out = {"exception": f"SystemExit: the driver called sys.exit({e.code!r})"}
    except Exception as e:  # noqa: BLE001  (mirror the driver's own testlist loop)
        print(f"[ERROR] Error running test: {shlex.join(argv)}")
        print(f"[ERROR] Error: {e}")
        traceback.print_exc()
        out = {"exception": f"{type(e).__name__}: {e}"}
    out.update(capped)
    if fills:
        out["gpu_fills"] = [f.to_json() for f in fills]
    return out


def _run_driver_case(req: dict[str, Any], log_offset: int) -> dict[str, Any]:
    argv = list(req["argv"])
    csv_path = req["csv_path"]
    buckets, cap = req.get("tuning_buckets"), req.get("tactic_cap")
    out = _run_driver_once(argv, csv_path, buckets, req.get("gpu_fill_min_numel"), cap)
    if "bench_calls" not in out or "--autotune" not in argv or _csv_has_rows(csv_path):
        return out
    # The driver DROPS a backend it cannot autotune ("[INFO] <b> backend does not support
    # autotune") instead of timing it untuned; retry such a case without --autotune.
    sys.stdout.flush()
    sys.stderr.flush()
    with open(req["log_path"], errors="replace") as f:
        f.seek(log_offset)
        printed = f.read()
    if "does not support autotune" not in printed:
        return out
    print(RETRY_MARKER)
    out = _run_driver_once([a for a in argv if a != "--autotune"], csv_path, buckets,
                           req.get("gpu_fill_min_numel"), cap)
    out["autotune_dropped"] = True
    return out


def _run_python_case(req: dict[str, Any]) -> dict[str, Any]:
    case = Case.from_dict(req["case"])
    settings = RunSettings.from_dict(req["settings"])
    try:
        if req["job"] == "quant":
            m = quant_timing.measure_quant(case, settings)
        elif req["job"] == "triton":
            m = triton_ops.run_case(case, settings)
        else:
            m = torch_ops.run_case(case, settings)
    except UnsupportedCase as e:
        print(f"[bmk-worker] unsupported: {e}")
        return {"unsupported": str(e)}
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return {"exception": f"{type(e).__name__}: {e}"}
    print(f"[bmk-worker] median {m.median_us:.3f} us; std {m.std_us:.3f} us; timer {m.timer}")
    return {"measurement": {"median_us": m.median_us, "std_us": m.std_us, "timer": m.timer, "note": m.note,
                            "samples_us": list(m.samples_us), "launches_per_call": m.launches_per_call,
                            "check": dict(m.check)}}


def _cuda_poisoned(answer: dict[str, Any]) -> str:
    """Non-empty when the CUDA context can no longer be trusted."""
    exc = answer.get("exception") or ""
    if any(marker in exc for marker in _POISON_MARKERS):
        return exc
    torch = sys.modules.get("torch")
    if torch is None:
        return ""
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return ""


def run_request(req: dict[str, Any]) -> dict[str, Any]:
    """Run one case with fds 1/2 redirected into its log; return the answer (never raises)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log_fd = os.open(req["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    log_offset = os.fstat(log_fd).st_size
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    t0 = time.monotonic()
    answer: dict[str, Any] = {}
    lifetime.arm_case_deadline(req.get("deadline_s"))
    try:
        # record=True + "always": FlashInfer's CUPTI-fallback warning is shown once per process
        # by default; every case must see it to label its own timer.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if req["job"] == "driver":
                    answer = _run_driver_case(req, log_offset)
                else:
                    answer = _run_python_case(req)
            except Exception as e:  # noqa: BLE001  (e.g. the driver cannot be imported)
                traceback.print_exc()
                answer = {"exception": f"{type(e).__name__}: {e}"}
        answer["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
        for w in caught:
            sys.stderr.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
        answer["poisoned"] = _cuda_poisoned(answer)
    finally:
        lifetime.disarm_case_deadline()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log_fd):
            os.close(fd)
    answer["case_id"] = req.get("case_id", "")
    answer["elapsed_s"] = round(time.monotonic() - t0, 3)
    return answer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Internal: runs benchmark cases sent as JSON lines on stdin (see pool.py).",
        allow_abbrev=False,
    )
    p.add_argument("--answer_fd", type=int, required=True, help="fd to write answers to, e.g. 5")
    p.add_argument("--parent_pid", type=int, default=0,
                   help="the pool's pid, e.g. 4242: the worker ends itself when that process is gone")
    p.add_argument("--lifeline_fd", type=int, default=-1,
                   help="read end of a pipe only the pool writes to, e.g. 6: its EOF ends the worker")
    p.add_argument("--benchmarks_dir", default="", help="FlashInfer checkout's benchmarks/ dir")
    a = p.parse_args(argv)
    lifetime.bind_to_parent(a.parent_pid, a.lifeline_fd)
    lifetime.start_group_guard()
    os.set_inheritable(a.answer_fd, False)  # JIT builds (ninja, nvcc) must not hold the pipe open
    answers = os.fdopen(a.answer_fd, "w", buffering=1)
    faulthandler.enable()  # a segfault prints the Python stack into the case log
    if a.benchmarks_dir:
        sys.path.insert(0, os.path.abspath(a.benchmarks_dir))
    os.environ.setdefault("FLASHINFER_NO_DOWNLOAD", "1")  # the pool's default (pool.no_download_state)
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = run_request(json.loads(line))
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if answer.get("poisoned"):
            os._exit(3)  # noqa: SLF001  (skip atexit: the CUDA context is broken)
    return 0


if __name__ == "__main__":
    sys.exit(main())
