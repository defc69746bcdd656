"""First-use JIT builds side by side: one small case per kernel family, run in parallel workers
before the timed pass, so FlashInfer and Triton build each family once, in parallel.

In: the cases a run is about to time, how the executor turns a case into a worker request, the
run's machine record and GPU pin. Out: kernels built into FlashInfer's and Triton's own caches, a
`WarmUp` summary (families, workers, seconds) and a record, in the per-user cache folder, of the
families warmed over these JIT caches, so that a later run on the same caches skips them.

Why: on a fresh machine most of a short run is FlashInfer building each kernel family the first time
a case uses it, one after another (README step 4 on an H200 before this warm-up: 122 of 182 s in 28
driver rows, in the history of examples/h200/readme_speed/), while each build keeps only a few of
the cores busy. A family's build depends on the routine, backend, dtypes, head sizes and mode, not
on M, N, K or the KV length (FlashInfer's JitSpec names: flashinfer/jit/), so one case of each
family builds what every case of it loads. The warm-up's timings are thrown away and nothing is
timed while it runs: the timed pass starts after every warm-up worker has ended. FlashInfer locks
each build across processes (flashinfer/jit/core.py: build_and_load, FileLock), so two workers never
build one module twice; Triton's cache is per kernel and file-based. Each warm-up worker gets
MAX_JOBS (FlashInfer's ninja -j, flashinfer/jit/cpp_ext.py) of its share of the cores (at least 4),
so the builds side by side do not start a compiler per core each.

A cuDNN GEMM that the autotuner profiles is the exception: its first use compiles per shape, not
per family. cuDNN builds every execution plan the heuristics offer for that shape, and the CUDA
driver JIT-compiles the kernels of the plans profiled, keeping them in its own cache
(~/.nv/ComputeCache, CUDA_CACHE_PATH). On an H200 (FlashInfer 0.6.18.post1, cuDNN 9.19) an
autotuned mm_bf16 of 8 x 6144 x 4096 took 4.3 s in a fresh process, 1.5 s in the next one and
6.6 s again with CUDA_CACHE_DISABLE=1; another N took 3.3 s; four new shapes took 4.2-6.0 s each
side by side in four processes and 0.8-1.4 s each after that, one after another
(benchmarks/cudnn_jit_probe.py, examples/h200/sweep_speed/cudnn_jit_06920bf/). So each such
shape is warmed on its own, autotuned as the timed pass will be (its buckets and tactic cap, no
autotune file: the tuning is thrown away with the worker), after the families, whose builds take
longest. A cold Llama-3.1-8B sweep's 36 cuDNN rows took 105 s in the timed pass before, 32 s after
(examples/h200/sweep_speed/README.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TextIO

from ..core.case_schema import AttentionShape, Case
from ..core.files import user_cache_dir, write_text_atomic
from ..core.results_schema import Row, RunSettings
from .argv import CUDNN_TACTIC_BACKENDS
from .gpu_fanout import run_on_every_gpu
from .outcome import Outcome, row_from_case
from .pool import WorkerPool

#: Jobs whose first use compiles: FlashInfer's driver routines (JIT modules) and this tool's Triton
#: kernels. torch rows call prebuilt cuBLAS/cuDNN.
WARMED_JOBS = ("driver", "triton")
#: At most this many warm-up workers (each holds a CUDA context and runs builds of its own).
MAX_WORKERS = 8
RECORD_FILE = "families.json"
#: Where FlashInfer and Triton keep what they built (flashinfer/jit/env.py FLASHINFER_CACHE_DIR
#: under FLASHINFER_WORKSPACE_BASE or the home folder; triton/runtime/cache.py TRITON_CACHE_DIR or
#: ~/.triton/cache): the record is valid for these folders as they are.
#: Per cache: (its variable, the folder under that variable's value or else the home folder, whether
#: the variable names the cache folder itself).
_FLASHINFER_CACHE = ("FLASHINFER_WORKSPACE_BASE", os.path.join(".cache", "flashinfer"), False)
_TRITON_CACHE = ("TRITON_CACHE_DIR", os.path.join(".triton", "cache"), True)
#: The CUDA driver's JIT cache (CUDA_CACHE_PATH, else ~/.nv/ComputeCache; CUDA_CACHE_DISABLE=1
#: keeps nothing), where the kernels of the cuDNN plans a run profiled are kept.
_CUDA_CACHE = ("CUDA_CACHE_PATH", os.path.join(".nv", "ComputeCache"), True)


def _family_parts(case: Case) -> list[Any]:
    """What a case's first-use builds depend on: its job, routine, backend, dtype, scheme,
    variant, activation and mode, and for attention the head layout (not the batch or KV length)."""
    parts: list[Any] = [case.job, case.kind, case.routine, case.backend, case.dtype, case.scheme,
                        case.variant, case.activation, case.gated, case.mode]
    shape = case.physical
    if isinstance(shape, AttentionShape):
        parts += [shape.phase, shape.num_q_heads, shape.num_kv_heads, shape.head_dim_qk, shape.head_dim_vo,
                  shape.page_size, shape.kv_lora_rank, shape.qk_rope_head_dim, shape.sliding_window > 0,
                  shape.attention_chunk_size > 0, shape.causal]
    return parts


def family_key(case: Case) -> str:
    """The kernel family of a case (_family_parts) as a record key."""
    return json.dumps(_family_parts(case))


def _cuda_cache_kept() -> bool:
    return os.environ.get("CUDA_CACHE_DISABLE", "0") in ("", "0")


def compiled_per_shape(case: Case, settings: RunSettings | None) -> bool:
    """Whether `case`'s first use compiles per shape (module docstring): a cuDNN GEMM driver case
    the autotuner profiles, on a machine whose CUDA JIT cache keeps what it compiles."""
    return (settings is not None and settings.autotune and case.job == "driver" and case.kind == "gemm"
            and case.backend in CUDNN_TACTIC_BACKENDS and _cuda_cache_kept())


def warm_key(case: Case, settings: RunSettings | None = None) -> str:
    """What a warm-up of `case` builds: its family (family_key), and for a case compiled per shape
    under `settings` that shape too, with the tactic cap and buckets that decide which plans are
    profiled."""
    if not compiled_per_shape(case, settings):
        return family_key(case)
    assert settings is not None
    return json.dumps([_family_parts(case), "shape", list(dataclasses.astuple(case.physical)),
                       settings.autotune_tactics, settings.autotune_buckets])


def _size(case: Case) -> tuple[int, int]:
    shape = case.physical
    return (case.m, shape.kv_len if isinstance(shape, AttentionShape) else 0)


#: The families whose first use builds longest, longest first: FlashInfer's attention modules
#: (CUDA templates instantiated per head layout, dtype and backend: the plumbing run's warm-up on a
#: fresh H200 lasts as long as they do: 57 s for 14 families, examples/h200/readme_speed/), then
#: its MoE modules, its GEMM modules, and this tool's Triton kernels (seconds each). Started first,
#: the long builds are not left waiting behind the short ones for a free worker.
_BUILD_ORDER = (("driver", "attention"), ("driver", "moe"), ("driver", "gemm"))


def build_rank(case: Case) -> int:
    """Where `case`'s family stands in _BUILD_ORDER (the Triton kernels and anything else last)."""
    key = (case.job, case.kind)
    return _BUILD_ORDER.index(key) if key in _BUILD_ORDER else len(_BUILD_ORDER)


def representatives(cases: Iterable[Case], settings: RunSettings | None = None) -> list[Case]:
    """The smallest case of each warm_key among `cases` that a worker times (no decided or
    with_quant case): the families first, longest build first (build_rank; in the order their
    keys first appear within a rank), then those compiled per shape under `settings`."""
    best: dict[str, Case] = {}
    for case in cases:
        if case.job not in WARMED_JOBS or case.with_quant or case.skip_reason:
            continue
        key = warm_key(case, settings)
        if key not in best or _size(case) < _size(best[key]):
            best[key] = case
    return sorted(best.values(), key=lambda c: (compiled_per_shape(c, settings), build_rank(c)))


def warm_settings(settings: RunSettings, case: Case | None = None) -> RunSettings:
    """The settings a warm-up case runs with: one iteration, the run's correctness check (its
    reference may build a module too), and no autotuning (the run's autotune cache is not touched);
    a case compiled per shape is autotuned as in the timed pass, with no autotune file."""
    if case is not None and compiled_per_shape(case, settings):
        return dataclasses.replace(settings, num_iters=1, dry_run_iters=1, autotune_cache="")
    return dataclasses.replace(settings, num_iters=1, dry_run_iters=1, autotune=False)


def _folder_identity(env_var: str, under_base: str, names_folder: bool) -> str:
    base = os.environ.get(env_var)
    path = base if names_folder and base else os.path.join(base or os.path.expanduser("~"), under_base)
    try:
        st = os.stat(path)
    except OSError:
        return f"{os.path.realpath(path)}:absent"
    return f"{os.path.realpath(path)}:{st.st_dev}:{st.st_ino}"


def caches_identity(environment: dict[str, Any]) -> str:
    """Which JIT caches, FlashInfer build and GPU a warm-up record speaks for: the cache folders
    (FlashInfer's, Triton's and the CUDA driver's) by path and inode (a removed and re-made folder
    is another), the wheel and the GPU."""
    versions = environment.get("versions") or {}
    gpu = environment.get("gpu") or {}
    parts = [_folder_identity(*_FLASHINFER_CACHE), _folder_identity(*_TRITON_CACHE), _folder_identity(*_CUDA_CACHE),
             str(versions.get("flashinfer_wheel")), str(versions.get("flashinfer_wheel_commit")),
             str(versions.get("torch")), str(gpu.get("name")), str(gpu.get("compute_capability"))]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


class WarmRecord:
    """The families already warmed over one set of JIT caches (RECORD_FILE in the per-user cache
    folder `jit_warmup`). An unreadable or foreign file counts as empty and is replaced."""

    def __init__(self, identity: str, folder: str | None = None):
        self.identity = identity
        self.path = os.path.join(folder or user_cache_dir("jit_warmup"), RECORD_FILE)

    def _load(self) -> dict[str, list[str]]:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: [x for x in v if isinstance(x, str)] for k, v in data.items()
                if isinstance(k, str) and isinstance(v, list)}

    def warmed(self) -> set[str]:
        return set(self._load().get(self.identity, []))

    def add(self, keys: Iterable[str]) -> None:
        data = self._load()
        data[self.identity] = sorted(set(data.get(self.identity, [])) | set(keys))
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_text_atomic(self.path, json.dumps(data, indent=1) + "\n")


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up did."""

    families: int
    """Warm-up cases run: one per kernel family, one per shape of the families compiled per shape."""
    workers: int
    seconds: float
    failed: tuple[str, ...] = ()
    """Case ids whose warm-up case did not finish ok (the timed pass runs and reports them)."""
    case_seconds: tuple[tuple[str, float], ...] = ()
    """(case id, seconds from a worker taking it to its answer; a worker's first case includes that
    worker's start) of each warm-up case, in the order they ended: what each family's build cost on
    this machine, beside the others."""


def worker_count(families: int, cpus: int | None = None) -> int:
    """Warm-up workers: one per family, at most MAX_WORKERS and half the cores (each build
    process runs compilers of its own)."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 2)
    return max(1, min(families, MAX_WORKERS, cpus // 2))


def _max_jobs(workers: int, cpus: int | None = None) -> str:
    """Compile jobs per warm-up worker: its share of the cores, at least 4 (most families are one to
    a few compile units; a large one should not crawl on one core)."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 2)
    return str(max(4, cpus // workers))


def _finished_ok(answer: dict[str, Any] | None, lost: str) -> bool:
    """Whether a warm-up case ran to its end: answered, no exception, no non-zero exit, no CUDA
    fault (a family whose case did not stays unrecorded, so the next run warms it again)."""
    if lost or answer is None:
        return False
    return not (answer.get("exception") or answer.get("poisoned") or answer.get("systemexit") not in (None, 0))


#: Turns a case into its worker request under the given settings (the executor's).
RequestMaker = Callable[[Case, RunSettings], dict[str, Any]]


class _WarmLoop:
    """The warm-up as gpu_fanout's CaseLoop: `slots` workers on one GPU, each made by the thread
    that runs its cases (its parent-death signal is that thread's), a case's outcome recorded as
    the family warmed or the case id that did not finish."""

    def __init__(self, slots: int, make_pool: Callable[[int], WorkerPool],
                 request_of: Callable[[Case], dict[str, Any]], timeout: float, key_of: Callable[[Case], str]):
        self.slots, self.lock = slots, threading.RLock()
        self._make_pool, self._request_of, self._timeout = make_pool, request_of, timeout
        self._key_of = key_of
        self.pools: dict[int, WorkerPool] = {}
        self.ok: list[str] = []
        self.failed: list[str] = []
        self.seconds: list[tuple[str, float]] = []

    def row_of(self, case: Case, slot: int) -> Row:
        with self.lock:
            pool = self.pools.get(slot)
            if pool is None:
                pool = self.pools[slot] = self._make_pool(slot)
        reply = pool.run(self._request_of(case), self._timeout)
        done = _finished_ok(reply.answer, reply.lost)
        return row_from_case(case, Outcome("ok" if done else "failed", reply.lost))

    def record(self, case: Case, row: Row, started: float) -> None:
        self.seconds.append((case.case_id, time.monotonic() - started))
        if row.status == "ok":
            self.ok.append(self._key_of(case))
        else:
            self.failed.append(case.case_id)

    def stop_worker(self, slot: int) -> None:
        pool = self.pools.get(slot)
        if pool is not None:
            pool.stop(kill=True)

    def kill_workers(self) -> None:
        with self.lock:
            live = list(self.pools.values())
        for pool in live:
            pool.kill()


def warm_up(cases: list[Case], make_request: RequestMaker, settings: RunSettings, record: WarmRecord,
            *, flashinfer_repo: str | None, log_dir: str, device: str | None = None,
            progress: TextIO | None = None, pool_factory: Callable[..., WorkerPool] = WorkerPool) -> WarmUp | None:
    """Run one case of each family of `cases` that `record` has not seen, side by side in
    worker_count() workers (gpu_fanout.run_on_every_gpu, with every slot on the one GPU), and add
    the families that finished ok to `record`. None when every family is warm already (nothing
    runs). A stop signal reaching this (main) thread kills every warm-up worker and is raised
    again."""
    warmed = record.warmed()
    todo = [c for c in representatives(cases, settings) if warm_key(c, settings) not in warmed]
    if not todo:
        return None
    workers = worker_count(len(todo))
    shapes = sum(compiled_per_shape(c, settings) for c in todo)
    os.makedirs(log_dir, exist_ok=True)
    if progress is not None:
        families = len(todo) - shapes
        what = f"{families} kernel {'family' if families == 1 else 'families'}"
        if shapes:
            what += f" and {shapes} autotuned cuDNN GEMM shapes (compiled per shape)"
        print(f"JIT warm-up: {what} not built on this machine yet; one small case of each in {workers} "
              "processes side by side (their times are not kept)", file=progress, flush=True)
    started = time.monotonic()
    env_jobs = _max_jobs(workers)

    def make_pool(slot: int) -> WorkerPool:
        return pool_factory(flashinfer_repo, os.path.join(log_dir, f"worker{slot}.log"), device=device,
                            extra_env={"MAX_JOBS": env_jobs})

    def request_of(case: Case) -> dict[str, Any]:
        return {**make_request(case, warm_settings(settings, case)),
                "log_path": os.path.join(log_dir, case.case_id + ".log"),
                "csv_path": os.path.join(log_dir, case.case_id + ".csv")}

    loop = _WarmLoop(workers, make_pool, request_of, settings.case_timeout, lambda c: warm_key(c, settings))
    run_on_every_gpu(loop, todo)
    if loop.ok:
        try:
            record.add(loop.ok)
        except OSError:
            pass  # a record not written only costs the next run this warm-up again
    result = WarmUp(len(todo), workers, time.monotonic() - started, tuple(loop.failed), tuple(loop.seconds))
    if progress is not None:
        tail = f"; {len(loop.failed)} did not finish ok (timed and reported below)" if loop.failed else ""
        print(f"JIT warm-up: {len(todo)} cases in {result.seconds:.0f} s{tail}", file=progress, flush=True)
    return result


__all__ = ["MAX_WORKERS", "WARMED_JOBS", "WarmRecord", "WarmUp", "build_rank", "caches_identity", "compiled_per_shape",
           "family_key", "representatives", "warm_key", "warm_settings", "warm_up", "worker_count"]
