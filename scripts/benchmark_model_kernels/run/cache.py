"""The result cache: timed outcomes shared across workdirs and runs, keyed by what determines them.

In: a case, the job that times it ("driver", "torch", "triton", "quant"), the RunSettings, and the
machine (GPU name and compute capability, driver, CUDA, torch, FlashInfer wheel and checkout,
FlashInfer's prebuilt-kernel packages, cupti-python and triton versions). Out: the Outcome an
earlier run measured for exactly that key, with its origin (run id, date, workdir, case), or a
miss.

The key is the SHA-256 of a JSON record of:
  machine  the fingerprint above (`machine_fingerprint`); unknown GPU or versions: no cache at all
  case     every Case field except its labels (id, plan name, modules, layer count, vLLM-default
           tag, skip reason) and the activation format, which routine, backend, variant, recipe
           and physical M decide: routine, backend, variant, recipe and scheme, logical and
           physical shape, M, tokens, routing, the driver's argv. A "quant" job times only the activation
           quantization `quant_timing.quant_spec` names (method, rows, columns, scale layout), so
           its key is that spec: the with_quant rows of every backend that quantizes the same
           activation the same way share one measurement
  timing   the case's RunSettings (argv.case_settings: CUDA graph off for an eager case) that
           change a row (iterations, CUDA graph, autotune, cold L2, the CUDA-events policy, the
           correctness check); not the autotune cache's path, the case timeout, nor which
           other modes the run has
  code     for the jobs this tool times itself (torch, triton, quant) a digest of that timing
           code, so a change to it re-times them; FlashInfer's code is named by the machine's
           wheel and checkout versions
so lm_head at the same per-rank shape is timed once for every model and layout that has it.

Only "ok" and "unsupported" outcomes are stored: a failure is re-tried by the next run, and so is
an "unsupported" that says the worker saw no GPU (NO_GPU_SEEN: a fault of that run's set-up, not
a property of the case). Each entry
is one file `<dir>/<key[:2]>/<key>.json`, written atomically (temp file + rename), so two runs
sharing a cache each read a whole entry or none; when both time the same case the later write
wins, and both numbers were real measurements of the same key.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from ..core.case_schema import Case
from ..core.files import digest_files, json_digest, python_files, write_bytes_atomic
from ..core.results_schema import UNTIMED_SETTINGS, RunSettings, timing_settings
from ..kernels.quant_timing import quant_spec
from ..kernels.timing import UnsupportedCase
from .argv import case_settings
from .outcome import Outcome

CACHE_FORMAT = 1
#: Case fields that label a row and never change its number.
LABEL_FIELDS = ("case_id", "name", "modules", "layers", "vllm_default", "skip_reason")
#: Case fields the key's other fields decide (the activation format: routine, backend, variant,
#: recipe and physical M), so they add nothing to it.
DERIVED_FIELDS = ("activation_quant",)
#: Machine fields without which nothing is cached: a number from an unknown GPU or stack must
#: never be served for another.
REQUIRED_MACHINE = ("gpu", "compute_capability", "driver", "torch")
#: Modules (under kernels/) whose code times the jobs this tool runs itself.
TIMING_CODE = {
    "torch": ("timing.py", "torch_ops.py"),
    "quant": ("timing.py", "quant_timing.py"),
    "triton": ("timing.py", "triton_ops.py", "triton_tuning.py", "triton_fp8_gemm.py", "triton_moe"),
}
_KERNELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")
#: How torch_ops, triton_ops and quant_timing end a case when torch sees no CUDA device.
NO_GPU_SEEN = "needs a CUDA GPU; none is visible"


def default_cache_dir() -> str:
    """$XDG_CACHE_HOME/benchmark-model-kernels/results, or ~/.cache/benchmark-model-kernels/results."""
    from ..core.files import user_cache_dir

    return user_cache_dir("results")


def machine_fingerprint(gpu: tuple[str, tuple[int, int]] | None, environment: dict[str, Any]
                        ) -> dict[str, Any]:
    """What of the machine a number depends on, from the run's GPU and its environment record."""
    from ..env.versions import dist_version

    v = environment.get("versions") or {}
    return {
        "gpu": gpu[0] if gpu else None,
        "compute_capability": f"{gpu[1][0]}.{gpu[1][1]}" if gpu else None,
        "driver": v.get("driver"),
        "cuda_runtime": v.get("cuda_runtime"),
        "torch": v.get("torch"),
        "triton": dist_version("triton"),
        "flashinfer_wheel": v.get("flashinfer_wheel"),
        "flashinfer_wheel_commit": v.get("flashinfer_wheel_commit"),
        "flashinfer_checkout": v.get("flashinfer_checkout"),
        "flashinfer_checkout_commit": v.get("flashinfer_checkout_commit"),
        "flashinfer_cubin": v.get("flashinfer_cubin"),
        "flashinfer_jit_cache": v.get("flashinfer_jit_cache"),
        "cupti_python": v.get("cupti_python"),
    }


def missing_machine_fields(machine: dict[str, Any]) -> list[str]:
    return [k for k in REQUIRED_MACHINE if not machine.get(k)]


def code_digest(job: str) -> str:
    """Digest of the code that times `job` in this tool ("" for the driver's jobs)."""
    if job not in TIMING_CODE:
        return ""
    return digest_files(python_files(_KERNELS_DIR, TIMING_CODE[job]), _KERNELS_DIR)


def key_record(machine: dict[str, Any], case: Case, job: str, settings: RunSettings, code: str
               ) -> dict[str, Any]:
    """The JSON record a cache key hashes (stored with each entry, so a key can be explained);
    `code` is code_digest(job)."""
    case_fields = _quant_fields(case) if job == "quant" else None
    if case_fields is None:
        case_fields = {k: v for k, v in case.to_dict().items()
                       if k not in LABEL_FIELDS and k not in DERIVED_FIELDS}
    timing = timing_settings(settings)
    return {"format": CACHE_FORMAT, "machine": machine, "job": job, "case": case_fields,
            "timing": timing, "code": code}


def _quant_fields(case: Case) -> dict[str, Any] | None:
    """What measure_quant times for `case` (it reads nothing else of the case), or None when
    there is no quantization to time (the case's own fields key that answer)."""
    try:
        return {"quant": asdict(quant_spec(case))}
    except (UnsupportedCase, ValueError):
        return None


def cache_key(record: dict[str, Any]) -> str:
    return json_digest(record)


@dataclass(frozen=True)
class CachedOutcome:
    outcome: Outcome
    origin: str
    """Where the number comes from: "result cache: run <id> at <timestamp> (<workdir>, <case id>)",
    the run and case that measured it."""


class ResultCache:
    """One cache folder, for one machine fingerprint and one run (whose id and date new entries
    record)."""

    def __init__(self, folder: str, machine: dict[str, Any], run_id: str, timestamp: str, workdir: str):
        self.folder, self.machine = folder, machine
        self.run_id, self.timestamp, self.workdir = run_id, timestamp, workdir
        self._digests = {job: code_digest(job) for job in TIMING_CODE}
        self.hits = 0
        self.stored = 0
        self.write_error = ""
        """Why the last store failed (the run goes on without storing)."""

    def record(self, case: Case, job: str, settings: RunSettings) -> dict[str, Any]:
        return key_record(self.machine, case, job, case_settings(case, settings), self._digests.get(job, ""))

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key + ".json")

    def get(self, record: dict[str, Any]) -> CachedOutcome | None:
        """The stored outcome of the key `record` hashes, or None (absent, unreadable, or of
        another format)."""
        key = cache_key(record)
        try:
            with open(self._path(key)) as f:
                entry = json.load(f)
            if entry.get("format") != CACHE_FORMAT or entry.get("key") != key:
                return None
            stored = dict(entry["outcome"])
            outcome = Outcome(**{**stored, "samples_us": tuple(stored.get("samples_us") or ())})
            origin = entry["origin"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        if outcome.status not in ("ok", "unsupported"):
            return None
        self.hits += 1
        where = ", ".join(str(origin[k]) for k in ("workdir", "case_id") if origin.get(k))
        return CachedOutcome(outcome, f"result cache: run {origin.get('run_id')} at "
                                      f"{origin.get('timestamp')}" + (f" ({where})" if where else ""))

    def put(self, record: dict[str, Any], outcome: Outcome, case_id: str) -> bool:
        """Store an ok/unsupported outcome measured by this run; False when not stored (a failed
        outcome, or the folder cannot be written: `write_error` says why)."""
        if outcome.status not in ("ok", "unsupported") or NO_GPU_SEEN in outcome.reason:
            return False
        key = cache_key(record)
        entry = {"format": CACHE_FORMAT, "key": key, "record": record, "outcome": asdict(outcome),
                 "origin": {"run_id": self.run_id, "timestamp": self.timestamp,
                            "workdir": self.workdir, "case_id": case_id}}
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_bytes_atomic(path, (json.dumps(entry, indent=1) + "\n").encode())
        except OSError as e:
            self.write_error = f"{path}: {e.strerror or e}"
            return False
        self.stored += 1
        return True


__all__ = [
    "CACHE_FORMAT",
    "CachedOutcome",
    "DERIVED_FIELDS",
    "LABEL_FIELDS",
    "ResultCache",
    "UNTIMED_SETTINGS",
    "cache_key",
    "code_digest",
    "default_cache_dir",
    "key_record",
    "machine_fingerprint",
    "missing_machine_fields",
]
