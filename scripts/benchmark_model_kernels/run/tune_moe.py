"""`scripts/tune_moe.py`: vLLM's tuned fused-MoE config files for the per-rank shapes of one layout.

For every fused-MoE layer of MODEL's plan at --tp/--ep and every --schemes, one rank's problem (its
local experts E, per-rank intermediate N, hidden size, top_k, activation, scheme and FP8 block;
run/tune_moe_shapes.py), the file vLLM looks it up in (the GPU spelled as vLLM spells it), and the
keys vLLM's tuner writes (1, 2, 4, ... 4096, or --keys; --ms gives attention tokens per rank
instead, each key then M x EP/TP, the count vLLM's MoE layer looks up). Each key's tiles are
searched with this tool's Triton fused MoE (kernels/moe_tuning.py), then the tuned, vLLM's shipped
and vLLM's default tiles are timed in the same run; the file is written into --out
(run/tune_moe_out.py) once its keys are done, with the record and the timing table.

A rerun of the same command resumes: keys in the record with the same problem, tiles of vLLM,
settings, GPU and code are kept; tiles in the tile cache are not searched again. --dry_run (a CPU
is enough) lists the shapes, the files, the keys and the time estimate, and writes nothing.

exit codes: 0 every key timed; 1 some key failed (the rest are written); 2 bad input (one line);
128 + the signal when stopped (every key finished before it is kept).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TextIO

from ..core.errors import OneLineArgumentParser, UsageError, cli_main
from ..core.files import digest_files, json_digest, path_arg, user_cache_dir
from ..core.results_schema import RunSettings
from ..env.versions import dist_version
from ..kernels import moe_tuning as mt
from ..kernels.triton_moe.problem import SCHEMES, MoeProblem
from ..vllm_rules import moe_config_files as vf
from ..vllm_rules.layout import Layout
from .tune_moe_out import KeyRow, OutFolder, tiles_text
from .tune_moe_shapes import (
    PlannedShape,
    TuneRequest,
    file_collisions,
    plan_shapes,
    shape_lines,
    shipped_source,
    vllm_tiles,
)

DEFAULT_SCHEMES = ("bf16", "fp8_per_tensor", "fp8_block128")
#: Seconds per searched config, per final timing, per key (inputs, check) and per file (first
#: compiles) that the estimate assumes on an H200 (benchmarks/tune_moe_speed.py measures them).
SECONDS_PER_CONFIG, SECONDS_PER_TIMING, SECONDS_PER_KEY, SECONDS_PER_FILE = 0.4, 0.5, 1.0, 15.0

EPILOG = """examples:
  %(prog)s qwen3-30b-a3b --tp 1 --ep 8 --dry_run --device_name "NVIDIA H200"
                                  the shapes, the files, the keys and the time estimate (CPU)
  %(prog)s qwen3-30b-a3b --tp 1 --ep 8 --out ~/moe_configs
                                  tune on this GPU, then: VLLM_TUNED_CONFIG_FOLDER=~/moe_configs vllm serve ...

exit codes: 0 done; 1 some key failed (the others are written); 2 bad input (one line)."""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="tune_moe.py", allow_abbrev=False, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Tune vLLM's fused-MoE tile configs for MODEL's per-rank shapes at one layout on this GPU, and "
                    "write them as the files vLLM loads from VLLM_TUNED_CONFIG_FOLDER, with the time of the tuned, "
                    "vLLM's shipped and vLLM's default tiles per key.")
    p.add_argument("model", metavar="MODEL", help="bundled name, a folder holding config.json, a config.json path, "
                   "or a Hub ID, e.g. qwen3-30b-a3b")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size, e.g. --tp 1 (default)")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel size (DP x TP ranks; 1 = none), e.g. --ep 8")
    p.add_argument("--schemes", nargs="+", default=list(DEFAULT_SCHEMES), metavar="SCHEME",
                   help=f"MoE schemes to tune, of {', '.join(SCHEMES)}, e.g. --schemes bf16 fp8_block128 "
                        f"(default: {' '.join(DEFAULT_SCHEMES)}, one per file kind vLLM looks up)")
    keys = p.add_mutually_exclusive_group()
    keys.add_argument("--keys", type=int, nargs="+", metavar="N", help="the MoE token counts the file holds, "
                      "e.g. --keys 1 8 64 512 (default: vLLM's tuner's 1 2 4 ... 4096)")
    keys.add_argument("--ms", type=int, nargs="+", metavar="M", help="attention tokens per rank instead: each key "
                      "is M x EP/TP, what the MoE layer looks up, e.g. --ms 1 8 64")
    p.add_argument("--out", type=path_arg("--out"), metavar="DIR", help="folder of the files, the one "
                   "VLLM_TUNED_CONFIG_FOLDER points at, e.g. --out ~/moe_configs (needed unless --dry_run)")
    p.add_argument("--search", choices=mt.SEARCHES, default="descent", help="descent (default: one tile key at a "
                   f"time from vLLM's own tiles, <= {mt.DESCENT_MAX_CONFIGS} configs per key) or full (every config "
                   "of vLLM's tuner space this kernel runs, as vLLM's tuner; hours)")
    p.add_argument("--tile_cache", type=path_arg("--tile_cache"), metavar="DIR",
                   help="where searched tiles are kept between runs, e.g. --tile_cache ~/tiles (default: "
                        "~/.cache/benchmark-model-kernels/vllm_moe_tiles)")
    p.add_argument("--num_iters", type=int, default=RunSettings.num_iters,
                   help=f"iterations of each final timing, e.g. --num_iters 50 (default {RunSettings.num_iters})")
    p.add_argument("--no_check", action="store_true", help="skip the tuned tiles' correctness check")
    p.add_argument("--device_name", metavar="NAME", help="with --dry_run on a machine without the GPU: the GPU "
                   "the files are for, as NVML names it, e.g. --device_name \"NVIDIA H200\"")
    p.add_argument("--dry_run", action="store_true", help="list the shapes, files, keys and the estimate; no GPU")
    return p


def request_from_args(args: argparse.Namespace, argv: Sequence[str]) -> TuneRequest:
    """The checked request; UsageError naming the first bad flag."""
    layout = Layout.from_flags(args.tp, args.ep)
    for scheme in args.schemes:
        if scheme not in SCHEMES:
            raise UsageError("--schemes", scheme, f"choose from {', '.join(SCHEMES)}")
    if len(set(args.schemes)) != len(args.schemes):
        raise UsageError("--schemes", " ".join(args.schemes), "lists a scheme twice; give each once")
    if {"fp8_per_tensor", "fp8_per_token"} <= set(args.schemes):
        raise UsageError("--schemes", " ".join(args.schemes), "fp8_per_tensor and fp8_per_token share vLLM's "
                         "dtype=fp8_w8a8 file; tune the one your checkpoint uses")
    for flag, values in (("--keys", args.keys), ("--ms", args.ms)):
        for v in values or ():
            if v < 1:
                raise UsageError(flag, v, "every token count must be a positive integer, e.g. 1 8 64")
        if values and len(set(values)) != len(values):
            raise UsageError(flag, " ".join(map(str, values)), "lists a value twice; give each once")
    if args.num_iters < 1:
        raise UsageError("--num_iters", args.num_iters, "must be a positive integer, e.g. 30")
    if not args.dry_run and not args.out:
        raise UsageError("--out", "(missing)", "name the folder the files go into, e.g. --out ~/moe_configs "
                         "(or list them first with --dry_run)")
    if args.device_name is not None and not args.dry_run:
        raise UsageError("--device_name", args.device_name, "is for --dry_run only; a run names the files for "
                         "the GPU it tunes on")
    settings = dataclasses.replace(RunSettings(), num_iters=args.num_iters, check=not args.no_check)
    return TuneRequest(model=args.model, layout=layout, schemes=tuple(args.schemes),
                       keys=tuple(sorted(args.keys)) if args.keys else None,
                       ms=tuple(sorted(args.ms)) if args.ms else None, out=args.out, search=args.search,
                       tile_cache=args.tile_cache, settings=settings, device_name=args.device_name,
                       dry_run=args.dry_run, command=shlex.join(["python", "scripts/tune_moe.py", *argv]))


# ---------------------------------------------------------------------------- estimate


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def estimate_seconds(search: str, searched: Sequence[MoeProblem], timed: int, files: int) -> float:
    """Seconds to search `searched` keys, time `timed` keys (three configs each) over `files` files."""
    configs = sum(mt.configs_per_key(search, p) for p in searched)
    return configs * SECONDS_PER_CONFIG + timed * (3 * SECONDS_PER_TIMING + SECONDS_PER_KEY) + files * SECONDS_PER_FILE


# ---------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Gpu:
    """What the files and the cache depend on, and how a key is timed (the stand-in's in tests)."""

    name: str
    triton_version: str
    bench: Callable[[MoeProblem, RunSettings], mt.KeyBench]


@dataclass(frozen=True)
class WorkItem:
    """One key of one file: what vLLM runs there without the file, and the row's identity."""

    file: str
    planned: PlannedShape
    problem: MoeProblem
    """The shape at the key's token count."""
    shipped: dict[str, int] | None
    default: dict[str, int]
    row_id: str

    @property
    def key(self) -> int:
        return self.problem.num_tokens


def code_digest() -> str:
    """The timing code a row depends on: the Triton kernels' (as the result cache digests them) and the tuner's."""
    from .cache import code_digest as kernels_digest

    return kernels_digest("triton") + digest_files([mt.__file__], os.path.dirname(mt.__file__))


def work_items(tunable: dict[str, list[PlannedShape]], req: TuneRequest, gpu: Gpu, err: TextIO) -> list[WorkItem]:
    """Every (file, key) in file order, then key order, with vLLM's shipped and default tiles for it."""
    code = code_digest()
    work = []
    for name, group in tunable.items():
        s = group[0]  # one file per name: the first layer (or scheme) of that name is tuned
        if len(group) > 1:
            print(f"note: {name} serves {'; '.join(g.label for g in group)}; tuned for the first", file=err)
        for key in s.keys(req):
            p = s.at(key)
            shipped, default = vllm_tiles(p, gpu.name)
            rid = json_digest({"file": name, "problem": dataclasses.asdict(p), "search": req.search,
                               "num_iters": req.settings.num_iters, "check": req.settings.check, "gpu": gpu.name,
                               "triton": gpu.triton_version, "code": code, "shipped": shipped, "default": default})
            work.append(WorkItem(name, s, p, shipped, default, rid))
    return work


class TileCache:
    """The searched tiles per problem and key (kernels/triton_tuning.py's JSON cache)."""

    def __init__(self, folder: str, search: str, gpu: Gpu):
        self.folder, self.search, self.gpu = folder, search, gpu

    def _check(self, p: MoeProblem) -> Callable[[dict[str, Any]], dict[str, int]]:
        from ..kernels.triton_moe.tuning import validate_config

        return lambda c: validate_config(c, p.scheme, p.block_size)

    def load(self, p: MoeProblem) -> dict[str, int] | None:
        from ..kernels.triton_tuning import load_cached_config

        return load_cached_config(self.folder, mt.cache_key(p, self.search, self.gpu.name, self.gpu.triton_version),
                                  self._check(p))

    def store(self, p: MoeProblem, tiles: dict[str, int]) -> None:
        from ..kernels.triton_tuning import store_config

        store_config(self.folder, mt.cache_key(p, self.search, self.gpu.name, self.gpu.triton_version), tiles,
                     self._check(p))


@contextlib.contextmanager
def _out_locked(req: TuneRequest) -> Iterator[None]:
    """--out's run.lock for the block (run/workdir.py), its refusals naming --out."""
    from .workdir import release_workdir_lock, take_workdir_lock

    assert req.out is not None
    try:
        fd = take_workdir_lock(req.out, [req.command])
    except UsageError as e:
        raise UsageError("--out", req.out, e.fix.replace("--workdir", "--out")) from None
    try:
        yield
    finally:
        release_workdir_lock(fd)


def run_tune(req: TuneRequest, gpu: Gpu, err: TextIO | None = None, out: TextIO | None = None) -> int:
    """Tune every shape's keys into req.out, the progress on `err` (stderr), the last line on `out`
    (stdout); 0 when every key was timed, 1 when some failed."""
    err, out = err or sys.stderr, out or sys.stdout
    assert req.out is not None
    shapes = plan_shapes(req)
    for line in shape_lines(shapes, req, gpu.name):
        print(line, file=err)
    tunable = file_collisions(shapes, gpu.name)
    if not tunable:
        raise UsageError("--schemes", " ".join(req.schemes), "leave no shape this kernel can tune (see above)")
    try:
        os.makedirs(req.out, exist_ok=True)
    except OSError as e:
        raise UsageError("--out", req.out, f"cannot be created ({e.strerror}); choose a writable folder") from None
    cache = TileCache(req.tile_cache or user_cache_dir("vllm_moe_tiles"), req.search, gpu)
    with _out_locked(req):
        folder = OutFolder(req.out)
        folder.check_replaceable(list(tunable))
        for name, group in tunable.items():
            before = folder.record["files"].get(name, {})
            if before and (before.get("shape"), before.get("model")) != (group[0].label, req.model):
                print(f"note: {name} was written for {before.get('model')} {before.get('layout')} "
                      f"({before.get('shape')}); this run replaces it (vLLM reads one file per name)", file=err)
        work = work_items(tunable, req, gpu, err)
        todo = [w for w in work if _kept(folder, w) is None]
        searched = [w.problem for w in todo if cache.load(w.problem) is None]
        seconds = estimate_seconds(req.search, searched, len(todo), len({w.file for w in todo}))
        print(f"{len(work)} keys in {len(tunable)} file(s): {len(work) - len(todo)} kept from {req.out}, "
              f"{len(todo) - len(searched)} with cached tiles, {len(searched)} to search ({req.search}); "
              f"estimate ~{clock(seconds)} on an H200", file=err, flush=True)
        folder.add_run({"command": req.command, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "gpu": gpu.name,
                        "triton": gpu.triton_version, "shipped_from": shipped_source(), "search": req.search})
        try:
            failed, written = _run_work(work, folder, cache, req, gpu, err)
        finally:  # also when stopped: the table shows every key timed so far
            folder.write_tables()
    print(f"wrote {written} of {len(tunable)} file(s) and tune_moe.md into {req.out}" + (
        f"; {failed} key(s) failed (see tune_moe.md; a rerun tries them again)" if failed else "")
        + f"; load them with VLLM_TUNED_CONFIG_FOLDER={shlex.quote(req.out)} vllm serve {req.model} ...", file=out)
    return 1 if failed else 0


def _kept(folder: OutFolder, w: WorkItem) -> KeyRow | None:
    """The record's row of `w` when it has a tuned time (a failed key is tried again)."""
    row = folder.row(w.row_id)
    return row if row is not None and row.tuned.get("median_us") is not None else None


def _run_work(work: list[WorkItem], folder: OutFolder, cache: TileCache, req: TuneRequest, gpu: Gpu,
              err: TextIO) -> tuple[int, int]:
    """Time every item the record does not keep, a progress line each; each file written after its
    last key. Returns (keys without a tuned time, files written)."""
    start, spent, failed, written = time.monotonic(), [], 0, 0
    previous: dict[str, dict[str, int]] = {}
    done: dict[str, list[str]] = {}
    for i, w in enumerate(work, 1):
        kept = _kept(folder, w)
        row = kept
        if row is None:
            t0 = time.monotonic()
            row = _tune_one(w, previous.get(w.file), req, gpu, cache)
            folder.put_row(row)
            spent.append(time.monotonic() - t0)
        done.setdefault(w.file, []).append(w.row_id)
        if row.tuned.get("config") and row.tuned.get("median_us") is not None:
            previous[w.file] = row.tuned["config"]
        else:
            failed += 1
        left = sum(1 for x in work[i:] if _kept(folder, x) is None)
        eta = sum(spent) / len(spent) * left if spent else None
        print(progress_line(i, len(work), row, kept is not None, time.monotonic() - start, eta), file=err, flush=True)
        if (i == len(work) or work[i].file != w.file) and _write_file(folder, w, done[w.file], req, gpu):
            written += 1
    return failed, written


def _timed(t: mt.Timed) -> dict[str, Any]:
    return {"config": t.config, "median_us": t.median_us, "reason": t.reason}


def _tune_one(w: WorkItem, previous: dict[str, int] | None, req: TuneRequest, gpu: Gpu, cache: TileCache) -> KeyRow:
    p, scheme, per_m = w.problem, w.problem.scheme, w.planned.tokens_per_m
    cached = cache.load(p)
    try:
        bench = gpu.bench(p, req.settings)
        timing, tiles = mt.tune_key(mt.KeyRequest(p, w.default, w.shipped, previous, req.search, cached), bench)
    except Exception as e:  # noqa: BLE001 - one key's failure is its row; the others go on
        failure = {"config": None, "median_us": None, "reason": f"{type(e).__name__}: {str(e)[:300]}"}
        return KeyRow(w.row_id, w.file, scheme, w.key, per_m, failure, {"config": w.shipped, "median_us": None,
                      "reason": ""}, {"config": w.default, "median_us": None, "reason": ""}, 0)
    if cached is None:
        cache.store(p, tiles)
    return KeyRow(w.row_id, w.file, scheme, w.key, per_m, _timed(timing.tuned), _timed(timing.shipped),
                  _timed(timing.default), timing.searched, timing.timer, timing.check)


def _write_file(folder: OutFolder, w: WorkItem, row_ids: list[str], req: TuneRequest, gpu: Gpu) -> bool:
    """The vLLM file of `w.file` from this run's rows that have tuned tiles (the record lists the
    failed ones with it); False when none has."""
    rows = [r for r in (folder.row(rid) for rid in row_ids) if r is not None]
    configs = {r.num_tokens: r.tuned["config"] for r in rows if r.tuned.get("median_us") is not None}
    if not configs:
        return False
    text = vf.config_file_text(vf.config_file_doc(configs, gpu.triton_version))
    about = {"model": req.model, "layout": req.layout.label, "scheme": w.problem.scheme, "shape": w.planned.label,
             "keys": sorted(configs), "command": req.command}
    folder.write_file(w.file, text, about, row_ids)
    return True


def progress_line(i: int, total: int, row: KeyRow, kept: bool, elapsed: float, eta: float | None) -> str:
    width = len(str(total))
    base, tuned = row.baseline, row.tuned
    what = "shipped" if row.shipped.get("config") is not None else "default"
    if tuned.get("median_us") and base.get("median_us"):
        result = (f"tuned {tiles_text(tuned['config'])} {tuned['median_us']:.1f} us, {what} "
                  f"{tiles_text(base['config'])} {base['median_us']:.1f} us "
                  f"({base['median_us'] / tuned['median_us']:.2f}x)")
    else:
        result = f"tuned {tiles_text(tuned.get('config'))}: {tuned.get('reason') or base.get('reason')}"
    how = ("kept from the record" if kept else "failed" if tuned.get("median_us") is None else
           f"searched {row.searched} configs" if row.searched else "tiles from the cache")
    eta_s = f"~{clock(eta)}" if eta is not None else "after the first key"
    return (f"[{i:>{width}}/{total}] {row.file} key={row.num_tokens}: {result}; {how}  "
            f"(elapsed {clock(elapsed)}, ETA {eta_s})")


def dry_run(req: TuneRequest, out: TextIO | None = None) -> int:
    """The shapes, their files and keys, and the estimate (on stdout); nothing written."""
    from .flags import detect_gpu

    err = out or sys.stdout
    found = detect_gpu() if req.device_name is None else None
    device = req.device_name or (found[0] if found else None)
    shapes = plan_shapes(req)
    for line in shape_lines(shapes, req, device):
        print(line, file=err)
    tunable = [s for s in shapes if not s.skip_reason]
    problems = [s.at(k) for s in tunable for k in s.keys(req)]
    print(f"{len(problems)} keys in {len(tunable)} file(s), search {req.search}; estimate "
          f"~{clock(estimate_seconds(req.search, problems, len(problems), len(tunable)))} on an H200 (less for "
          f"keys a rerun keeps or whose tiles are cached); shipped tiles: {shipped_source()}", file=err)
    if device is None:
        print("device_name=<GPU>: no GPU here; pass --device_name \"NVIDIA H200\" to name the files for it", file=err)
    elif req.out:
        names = [s.file_name(device) for s in tunable]
        if os.path.isdir(req.out):
            OutFolder(req.out).check_replaceable(names)
        print(f"would write into {req.out}: {', '.join(names)}", file=err)
    return 0


def real_gpu() -> Gpu:
    """The visible GPU (NVML's name, as vLLM reads it) and the Triton kernels' KeyBench."""
    from .flags import detect_gpu

    found = detect_gpu()
    if found is None:
        raise UsageError("GPU", "(none visible)", "tuning times kernels on a CUDA GPU; list the shapes and files "
                         "on this machine with --dry_run")
    version = dist_version("triton")
    if version is None:
        raise UsageError("triton", "(not installed)", "pip install triton (the kernels are Triton's)")
    return Gpu(found[0], version, lambda p, settings: mt.TritonKeyBench(p, settings))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        req = request_from_args(build_parser().parse_args(args), args)
        return dry_run(req) if req.dry_run else run_tune(req, real_gpu())

    return cli_main(run)


__all__ = ["DEFAULT_SCHEMES", "Gpu", "TileCache", "WorkItem", "build_parser", "dry_run", "estimate_seconds", "main",
           "request_from_args", "run_tune", "work_items"]
