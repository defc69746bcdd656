"""Which backend runs on which GPU, as the installed FlashInfer says it at run time.

`Capabilities` holds FlashInfer's own answers (pure data, so a test can stand one in): for each
(routine, backend) the compute capabilities it admits, per source:
  - the library's support checks: `flashinfer.<routine>.is_backend_supported(backend, cc)` of the
    `@backend_requirement` GEMM APIs (mm_bf16, bmm_fp8, mm_fp4, gemm_fp8_nt_groupwise, and mm_fp8
    from 0.7), over every backend name the driver's `--backends` accepts;
  - the driver's own table, `routine_cc_to_supported_backends` in the checkout's
    benchmarks/routines/flashinfer_benchmark_utils.py, which the driver filters with before it
    launches (the MoE routines, gemm_fp8_nt_groupwise).
`capability_probe.py` gathers them in a child process (importing FlashInfer creates no CUDA context
in the run's own process, and a broken install only costs the probe). `backends.capability_reason`
asks these answers first; the hand table in `backends.py` answers only what FlashInfer does not
(torch and Triton rows, mm_fp8 before 0.7, measured toolchain limits), and without FlashInfer
(a CPU preview) everything, with `origin` saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from ..core.files import digest_files, json_digest, python_files, write_text_atomic

#: Compute capabilities the probe asks about (FlashInfer's driver table keys and every family its
#: support checks name); a GPU outside them gets no verdict from FlashInfer.
PROBED_CCS: tuple[tuple[int, int], ...] = (
    (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0), (12, 0),
    (12, 1))

#: Where the hand table's answers come from, for the rows and the run's notes.
HAND_ORIGIN = "the hand table in cases/backends.py (FlashInfer v0.6.17 source, cited per row)"

#: The folder holding this package, for the child's PYTHONPATH.
SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Seconds the probe may take (importing torch and FlashInfer: about 3 s on a CPU).
PROBE_TIMEOUT_S = 180


@dataclass(frozen=True)
class Support:
    """One FlashInfer answer: the GPUs one source admits for one (routine, backend)."""

    routine: str
    backend: str
    ccs: tuple[tuple[int, int], ...]
    """Compute capabilities it admits, among `probed`."""
    probed: tuple[tuple[int, int], ...]
    """Compute capabilities this source was asked about (no verdict outside them)."""
    source: str
    """The check that answered, e.g. "flashinfer 0.6.18.post1: mm_bf16.is_backend_supported"."""
    via: str = "library"
    """"library" (a support check of the API) or "driver" (the driver's routine table)."""

    def refuses(self, cc: tuple[int, int]) -> bool:
        return tuple(cc) in self.probed and tuple(cc) not in self.ccs

    def cc_text(self) -> str:
        return "sm_" + "/".join(f"{a}{b}" for a, b in self.ccs) if self.ccs else "no GPU"


@dataclass(frozen=True)
class Capabilities:
    """FlashInfer's answers (empty: the hand table answers everything) and where they came from."""

    origin: str = HAND_ORIGIN
    """One line: which FlashInfer answered, or why the hand table does."""
    supports: tuple[Support, ...] = ()
    flashinfer: str = ""
    """The FlashInfer wheel version that answered ("" for the hand table)."""
    jit_cache: str = ""
    """The flashinfer-jit-cache version installed beside it ("" when none)."""
    routines: tuple[str, ...] = field(default=())
    """Routines FlashInfer answered for (a backend it lists there joins the plan)."""

    def facts(self, routine: str, backend: str) -> tuple[Support, ...]:
        return tuple(s for s in self.supports if (s.routine, s.backend) == (routine, backend))

    def driver_table(self, routine: str) -> tuple[Support, ...]:
        """The driver table's rows for `routine` (empty when the table does not list it)."""
        return tuple(s for s in self.supports if s.routine == routine and s.via == "driver")

    def backends_of(self, routine: str) -> tuple[str, ...]:
        """Backends FlashInfer knows for `routine`, in the order it listed them."""
        return tuple(dict.fromkeys(s.backend for s in self.supports if s.routine == routine))

    def to_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "flashinfer": self.flashinfer, "jit_cache": self.jit_cache,
                "routines": list(self.routines),
                "supports": [{"routine": s.routine, "backend": s.backend,
                              "ccs": [f"{a}.{b}" for a, b in s.ccs],
                              "probed": [f"{a}.{b}" for a, b in s.probed], "source": s.source,
                              "via": s.via}
                             for s in self.supports]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Capabilities":
        def ccs(values: list[str]) -> tuple[tuple[int, int], ...]:
            return tuple((int(v.split(".")[0]), int(v.split(".")[1])) for v in values)

        return cls(origin=d["origin"], flashinfer=d.get("flashinfer") or "",
                   jit_cache=d.get("jit_cache") or "", routines=tuple(d.get("routines") or ()),
                   supports=tuple(Support(s["routine"], s["backend"], ccs(s["ccs"]),
                                          ccs(s["probed"]), s["source"], s.get("via", "library"))
                                  for s in d.get("supports") or ()))


#: No FlashInfer answers: every verdict from the hand table.
HAND = Capabilities()


#: The folder of the probe and the tables it asks about: its code, with FlashInfer's build and the
#: driver checkout's code, decides the probe's answer.
_CASES_DIR = os.path.dirname(os.path.abspath(__file__))


def _flashinfer_install() -> dict[str, Any] | None:
    """Where the importable FlashInfer lives and which build it is, found without importing it
    (importing is what the probe costs); None when it is not installed."""
    import importlib.util

    from ..env.versions import dist_version

    try:
        spec = importlib.util.find_spec("flashinfer")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        st = os.stat(spec.origin)
    except OSError:
        return None
    found: dict[str, Any] = {"origin": spec.origin, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    for dist in ("flashinfer-python", "flashinfer", "flashinfer-cubin", "flashinfer-jit-cache"):
        found[dist] = dist_version(dist)
    return found


def probe_key(bench: str, python: str) -> str | None:
    """The key of the probe's answer: the FlashInfer build the child would import, the driver
    checkout's code (its routine tables and `--backends` choices), the probe's own code and the
    interpreter. None when the answer cannot be keyed (another interpreter, FlashInfer not found)."""
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return None  # find_spec here says nothing about what another interpreter imports
    install = _flashinfer_install()
    if install is None:
        return None
    driver = ""
    if bench:
        files = [os.path.join(bench, "flashinfer_benchmark.py"), os.path.join(os.path.dirname(bench), "version.txt")]
        routines = os.path.join(bench, "routines")
        if os.path.isdir(routines):
            files += [os.path.join(routines, f) for f in os.listdir(routines) if f.endswith(".py")]
        driver = digest_files(sorted(files), os.path.dirname(bench))
    record = {"format": 1, "python": os.path.realpath(python), "flashinfer": install,
              "driver": driver, "bench": os.path.abspath(bench) if bench else "",
              "probe": digest_files(python_files(_CASES_DIR, ["."]), _CASES_DIR)}
    return json_digest(record)


def _read_answer(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            answer = json.load(f)
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) and answer.get("origin") and not answer.get("error") else None


def default_answer_dir() -> str:
    """$XDG_CACHE_HOME/benchmark-model-kernels/capabilities, or under ~/.cache: beside the result
    cache, and like it one folder per user shared by every workdir."""
    from ..core.files import user_cache_dir

    return user_cache_dir("capabilities")


class PendingProbe:
    """One capability probe, started: the kept answer, or a child process still running.

    `start_probe` makes it; `result()` waits for the child (at most `timeout_s` from the start)
    and returns the Capabilities, keeping a new answer in the cache folder; `close()` kills a
    child whose answer is no longer wanted. `preexec_fn` runs in the child before it starts
    (run/capability_start.py: the child dies with the run)."""

    def __init__(self, answer: Capabilities | None, proc: subprocess.Popen[str] | None = None,
                 kept: str = "", timeout_s: float = PROBE_TIMEOUT_S, error: str = "") -> None:
        self._answer, self._proc, self._kept, self._error = answer, proc, kept, error
        self._timeout_s = timeout_s

    def result(self) -> Capabilities:
        """The probe's Capabilities; never raises (the hand table, with the reason, on failure)."""
        if self._answer is not None:
            return self._answer
        if self._proc is None:
            self._answer = Capabilities(origin=f"{HAND_ORIGIN}; the FlashInfer probe did not run: {self._error}")
            return self._answer
        try:
            stdout, stderr = self._proc.communicate(timeout=self._timeout_s)
        except subprocess.TimeoutExpired as e:
            self.close()
            self._answer = Capabilities(origin=f"{HAND_ORIGIN}; the FlashInfer probe did not run: "
                                               f"{type(e).__name__}: {e}")
            return self._answer
        self._answer = _answer_from_output(stdout or "", stderr or "", self._kept)
        return self._answer

    def close(self) -> None:
        """Kill the child if it still runs (an answer no one waits for)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def start_probe(flashinfer_repo: str | None, python: str = sys.executable, timeout_s: float = PROBE_TIMEOUT_S,
                cache_dir: str | None = None, preexec_fn: Any = None) -> PendingProbe:
    """The probe of `load_capabilities`, started and not waited for: a kept answer is read at
    once; otherwise the child runs while the caller goes on (a run plans meanwhile)."""
    bench = os.path.join(os.path.abspath(os.path.expanduser(flashinfer_repo)), "benchmarks") \
        if flashinfer_repo else ""
    if bench and not os.path.isfile(os.path.join(bench, "flashinfer_benchmark.py")):
        bench = ""
    key = probe_key(bench, python) if cache_dir else None
    kept = os.path.join(cache_dir, key + ".json") if cache_dir and key else ""
    answer = _read_answer(kept) if kept else None
    if answer is not None:
        return PendingProbe(Capabilities.from_dict(answer))
    cmd = [python, "-m", "benchmark_model_kernels.cases.capability_probe"]
    if bench:
        cmd += ["--benchmarks_dir", bench]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SCRIPTS_DIR, env.get("PYTHONPATH", "")) if p)
    env.setdefault("FLASHINFER_NO_DOWNLOAD", "1")
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=bench or None, preexec_fn=preexec_fn)
    except (OSError, subprocess.SubprocessError) as e:
        return PendingProbe(None, error=f"{type(e).__name__}: {e}")
    return PendingProbe(None, proc, kept, timeout_s)


def _answer_from_output(stdout: str, stderr: str, kept: str) -> Capabilities:
    """The probe child's last JSON line as Capabilities (kept under `kept` when it is an answer)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except ValueError:
        answer = {}
    if answer.get("error") or not answer.get("origin"):
        why = answer.get("error") or (stderr.strip().splitlines() or ["no answer"])[-1]
        return Capabilities(origin=f"{HAND_ORIGIN}; FlashInfer not importable here ({why})")
    if kept:
        try:
            os.makedirs(os.path.dirname(kept), exist_ok=True)
            write_text_atomic(kept, json.dumps(answer) + "\n")
        except OSError:
            pass  # the answer is kept for speed only; this run has it either way
    return Capabilities.from_dict(answer)


def load_capabilities(flashinfer_repo: str | None, python: str = sys.executable,
                      timeout_s: float = PROBE_TIMEOUT_S, cache_dir: str | None = None) -> Capabilities:
    """FlashInfer's answers from a child process (`capability_probe.py`), with the checkout's
    driver table when `flashinfer_repo` has benchmarks/; the hand table, with the reason in
    `origin`, when FlashInfer cannot be imported here. Never raises.

    `cache_dir` (a run passes `default_answer_dir()`): an answer is kept there under `probe_key`,
    so a later run with the same FlashInfer build, driver checkout and probe code reads it instead
    of importing FlashInfer again in a child (seconds a run). The key holds everything the answer
    depends on, so a kept answer is never stale; it is not a measurement, and --no_cache (which
    re-times rows) leaves it in use."""
    probe = start_probe(flashinfer_repo, python, timeout_s, cache_dir)
    try:
        return probe.result()
    finally:
        probe.close()


__all__ = ["Capabilities", "HAND", "HAND_ORIGIN", "PROBED_CCS", "PendingProbe", "Support", "default_answer_dir",
           "load_capabilities", "start_probe",
           "probe_key"]
