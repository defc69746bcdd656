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
           code (for triton also vLLM's tile tables and their readers in vllm_rules/), so a
           change to it re-times them; FlashInfer's code is named by the machine's
           wheel and checkout versions
so lm_head at the same per-rank shape is timed once for every model and layout that has it.

Only "ok" and "unsupported" outcomes are stored: a failure is re-tried by the next run, and so is
an "unsupported" that says the worker saw no GPU (NO_GPU_SEEN: a fault of that run's set-up, not
a property of the case). Each entry
is one file `<dir>/<key[:2]>/<key>.json`, written atomically (temp file + rename), so two runs
sharing a cache each read a whole entry or none; when both time the same case the later write
wins, and both numbers were real measurements of the same key.

The folder may be shared by every user of a machine, so an entry is checked when it is read
(`entry_problem`: its key, and its outcome against the results row schema, e.g. an "ok" time
that is negative, NaN, null or not a number) and never read through a link or from a FIFO: a bad
entry is ignored, said once, and the case timed again (its new number then replaces the entry).
A folder that cannot be written is said once, when the run opens it; its entries are still read.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import asdict, dataclass, fields
from typing import Any, TextIO

from ..core.case_schema import Case
from ..core.files import check_writable_folder, digest_files, json_digest, python_files, write_bytes_atomic
from ..core.results_schema import UNTIMED_SETTINGS, RunSettings, row_problem, timing_settings
from ..kernels.quant_timing import quant_spec
from ..kernels.timing import UnsupportedCase
from .argv import case_settings
from .outcome import Outcome

CACHE_FORMAT = 1
#: Case fields that label a row and never change its number.
LABEL_FIELDS = ("case_id", "name", "modules", "layers", "vllm_default", "timed_as", "vllm_runs",
                "skip_reason")
#: Case fields the key's other fields decide (the activation format: routine, backend, variant,
#: recipe and physical M), so they add nothing to it.
DERIVED_FIELDS = ("activation_quant",)
#: Machine fields without which nothing is cached: a number from an unknown GPU or stack must
#: never be served for another.
REQUIRED_MACHINE = ("gpu", "compute_capability", "driver", "torch")
#: Modules (under kernels/) whose code times the jobs this tool runs itself.
TIMING_CODE = {
    "torch": ("kernels/timing.py", "kernels/torch_ops.py"),
    "quant": ("kernels/timing.py", "kernels/quant_timing.py"),
    # The Triton rows also run the tiles vLLM's tables pick (vllm_rules/), so a new table re-times them.
    "triton": ("kernels/timing.py", "kernels/triton_ops.py", "kernels/triton_tuning.py",
               "kernels/triton_fp8_gemm.py", "kernels/triton_moe", "vllm_rules/moe_triton.py",
               "vllm_rules/moe_config_files.py", "vllm_rules/moe_triton_configs.json",
               "vllm_rules/block_fp8_gemm.py", "vllm_rules/block_fp8_gemm_configs.json"),
}
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: How torch_ops, triton_ops and quant_timing end a case when torch sees no CUDA device.
NO_GPU_SEEN = "needs a CUDA GPU; none is visible"
#: Outcome fields that are results Row fields of the same name (the rest: `check`, whose keys are).
OUTCOME_ROW_FIELDS = ("status", "reason", "median_us", "std_us", "timer", "samples_us", "spread_note",
                      "launches_per_call")
#: The Row fields an outcome's `check` may hold (kernels/correctness.py CheckResult.fields).
CHECK_FIELDS = ("check", "max_abs_err", "rel_l2_err", "argmax_match", "check_note")
#: Largest entry file read (a real one is a few KB).
MAX_ENTRY_BYTES = 16 * 2**20


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
    return digest_files(python_files(_PACKAGE_DIR, TIMING_CODE[job]), _PACKAGE_DIR)


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


def entry_problem(entry: Any, key: str) -> str | None:
    """Why a stored entry (its JSON) cannot serve key `key`, or None: it names another key, its
    outcome has fields an Outcome has not, its row fields fail the results row check (`row_problem`),
    its status is one that is never stored, or its origin is not an object."""
    if not isinstance(entry, dict):
        return "it is not a JSON object"
    if entry.get("key") != key:
        return f"it holds the key {str(entry.get('key'))[:16]}..., not the one its file name says"
    outcome = entry.get("outcome")
    if not isinstance(outcome, dict):
        return "its outcome is not an object"
    unknown = sorted(set(outcome) - {f.name for f in fields(Outcome)})
    if unknown:
        return f"its outcome has fields no outcome has ({', '.join(unknown[:3])})"
    check = outcome.get("check", {})
    if not isinstance(check, dict) or set(check) - set(CHECK_FIELDS):
        return "its outcome.check is not an object of correctness fields"
    row = {**{k: outcome[k] for k in OUTCOME_ROW_FIELDS if k in outcome}, **check}
    problem = row_problem(row, "outcome", partial=True)
    if problem:
        return problem
    if outcome.get("status") not in ("ok", "unsupported") or NO_GPU_SEEN in str(outcome.get("reason")):
        return f"its status {outcome.get('status')!r} ({str(outcome.get('reason'))[:60]}) is never stored"
    if not isinstance(entry.get("origin"), dict):
        return "its origin is not an object"
    return None


def read_entry(path: str) -> Any:
    """The JSON of the entry file at `path`: never through a symbolic link, nor from a FIFO, a
    device or a folder (OSError), nor more than MAX_ENTRY_BYTES (ValueError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("it is not a regular file")
        if st.st_size > MAX_ENTRY_BYTES:
            raise ValueError(f"it is {st.st_size} bytes, more than an entry holds")
        return json.loads(f.read())


@dataclass(frozen=True)
class CachedOutcome:
    outcome: Outcome
    origin: str
    """Where the number comes from: "result cache: run <id> at <timestamp> (<workdir>, <case id>)",
    the run and case that measured it."""


class ResultCache:
    """One cache folder, for one machine fingerprint and one run (whose id and date new entries
    record)."""

    def __init__(self, folder: str, machine: dict[str, Any], run_id: str, timestamp: str, workdir: str,
                 notices: TextIO | None = None):
        self.folder, self.machine = folder, machine
        self.run_id, self.timestamp, self.workdir = run_id, timestamp, workdir
        self.notices = notices
        """Where a bad entry and an unwritable folder are said (default stderr)."""
        self._digests = {job: code_digest(job) for job in TIMING_CODE}
        self.hits = 0
        self.stored = 0
        self.ignored: list[str] = []
        """The entry files found bad (entry_problem) and ignored, each said once."""
        self.write_error = ""
        """Why the last store failed (the run goes on without storing)."""
        self.unwritable = _unwritable_reason(folder)
        """Why nothing can be stored in the folder ("" when it can): said once, here; its entries
        are still read, and no store is tried."""
        if self.unwritable:
            self._notice(f"warning: result cache {folder} cannot be written ({self.unwritable}): its "
                         "entries are read, but none of this run's rows is stored in it")

    def _notice(self, line: str) -> None:
        print(line, file=self.notices if self.notices is not None else sys.stderr, flush=True)

    def record(self, case: Case, job: str, settings: RunSettings) -> dict[str, Any]:
        return key_record(self.machine, case, job, case_settings(case, settings), self._digests.get(job, ""))

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key + ".json")

    def get(self, record: dict[str, Any]) -> CachedOutcome | None:
        """The stored outcome of the key `record` hashes, or None (absent, unreadable, or of
        another format)."""
        key = cache_key(record)
        path = self._path(key)
        try:
            entry = read_entry(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as e:
            return self._ignore(path, str(e.strerror if isinstance(e, OSError) and e.strerror else e))
        if isinstance(entry, dict) and entry.get("format") != CACHE_FORMAT:
            return None  # another tool version's entry: a miss, not a fault
        problem = entry_problem(entry, key)
        if problem:
            return self._ignore(path, problem)
        stored = dict(entry["outcome"])
        outcome = Outcome(**{**stored, "samples_us": tuple(stored.get("samples_us") or ())})
        origin = entry["origin"]
        self.hits += 1
        where = ", ".join(str(origin[k]) for k in ("workdir", "case_id") if origin.get(k))
        return CachedOutcome(outcome, f"result cache: run {origin.get('run_id')} at "
                                      f"{origin.get('timestamp')}" + (f" ({where})" if where else ""))

    def _ignore(self, path: str, problem: str) -> None:
        """A bad entry: said once (its path and why), then a miss."""
        if path not in self.ignored:
            self.ignored.append(path)
            self._notice(f"warning: result cache entry {path} ignored: {problem}; the case is timed again")
        return None

    def put(self, record: dict[str, Any], outcome: Outcome, case_id: str) -> bool:
        """Store an ok/unsupported outcome measured by this run; False when not stored (a failed
        outcome, or the folder cannot be written: `write_error` says why, for the first failure
        only, and then no store is tried again)."""
        if outcome.status not in ("ok", "unsupported") or NO_GPU_SEEN in outcome.reason or self.unwritable:
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
            self.unwritable = self.write_error
            return False
        self.stored += 1
        return True


def _unwritable_reason(folder: str) -> str:
    """Why no entry can be written under `folder` ("" when one can): the folder, or the nearest
    existing folder above it that would hold it, refuses a file."""
    probe = folder
    while not os.path.isdir(probe):
        if os.path.lexists(probe):
            return f"{probe} is not a folder"
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return check_writable_folder(probe) or ""


__all__ = [
    "CACHE_FORMAT",
    "CachedOutcome",
    "DERIVED_FIELDS",
    "LABEL_FIELDS",
    "ResultCache",
    "UNTIMED_SETTINGS",
    "cache_key",
    "code_digest",
    "entry_problem",
    "read_entry",
    "default_cache_dir",
    "key_record",
    "machine_fingerprint",
    "missing_machine_fields",
]
