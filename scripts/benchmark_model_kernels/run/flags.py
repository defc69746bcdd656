"""The run flags: what both CLIs add to their parser, and their checks before any planning.

In: the parsed argparse Namespace (the flags of `add_run_arguments`). Out: a `RunRequest`, every
run flag checked (UsageError otherwise), holding what the run stage needs: the M sweep, recipe and
backend filters, the absolute workdir, --resume/--dry_run, the GPU the cases are planned for, the
FlashInfer checkout and the RunSettings.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass

from ..cases.attention import DEFAULT_KV_LENS, VLLM_BLOCK_SIZE, AttentionSweep, check_sweep
from ..cases.backends import TORCH, TRITON, backend_names
from ..cases.build import check_filters
from ..cases.capabilities import HAND, load_capabilities
from ..core.case_schema import DTYPES, KV_DTYPES, MODES
from ..core.errors import UsageError
from ..core.files import path_arg
from ..core.gpu_specs import gpu_spec, known_names, looks_like_cc
from ..core.results_schema import AUTOTUNE_BUCKETS, RESULTS_JSON, RunSettings
from ..env.versions import flashinfer_wheel
from . import devices
from .cache import default_cache_dir
from .driver_fills import GPU_FILL_MIN_NUMEL
from .pool import has_driver
from .tuning_cache import check_autotune_cache_is_flashinfers, settle_autotune_cache
from .workdir import DEFAULT_AUTOTUNE_CACHE, check_resume_settings, check_workdir

#: M values (tokens per rank per step) swept when --ms is not given: the SKILL.md "balanced"
#: sweep, decode (1, 8) to prefill-sized (512) steps.
DEFAULT_MS = (1, 8, 64, 512)

#: A GPU the cases are planned for: (name, (major, minor) compute capability).
Gpu = tuple[str, tuple[int, int]]


@dataclass(frozen=True)
class RunRequest:
    """One run's checked flags (made by `validate_args`)."""

    ms: tuple[int, ...]
    dtypes: tuple[str, ...]
    backends: tuple[str, ...] | None
    """None: every backend planned for each recipe."""
    workdir: str
    """Absolute path."""
    resume: bool
    dry_run: bool
    gpu: Gpu | None
    """The visible GPU, the --assume_cc stand-in of a dry run, or None (dry run, no GPU)."""
    flashinfer_repo: str | None
    settings: RunSettings
    no_driver: bool = False
    """--no_driver: time only the rows that need no FlashInfer checkout; driver rows fail with
    what is missing."""
    cache_dir: str | None = None
    """The result cache to read and extend; None: --no_cache (time every case)."""
    devices: tuple[str, ...] | None = None
    """--gpus: the CUDA_VISIBLE_DEVICES value of each worker; None: one worker, not pinned."""
    gpu_memory_bytes: int | None = None
    """The visible GPU's memory (NVML); None without one, for an --assume_cc stand-in (whose
    memory nobody stated) or where NVML cannot say."""
    jit_warmup: bool = True
    """Run one case per unbuilt kernel family side by side before the timed pass (jit_warmup.py);
    False: --no_jit_warmup."""


def add_run_arguments(parser: argparse.ArgumentParser, *, with_ms: bool = True) -> None:
    """The run flags shared by both CLIs (pass with_ms=False if the caller defines --ms)."""
    g = parser.add_argument_group("running (FlashInfer driver and torch baseline)")
    g.add_argument(
        "--flashinfer_repo", metavar="PATH", type=path_arg("--flashinfer_repo"),
        help="FlashInfer source checkout whose benchmarks/flashinfer_benchmark.py times the cases, "
        "e.g. --flashinfer_repo ~/flashinfer (its tag must match the installed wheel). Not needed "
        "with --dry_run or when every --backends is torch.")
    g.add_argument(
        "--no_driver", action="store_true",
        help="Run without a FlashInfer checkout, when you cannot get one: no flashinfer-python wheel "
        "ships benchmarks/, so the driver comes only from a git clone of the wheel's tag (a machine "
        "without GitHub cannot make one). --no_driver times the torch and triton rows and writes "
        "every driver row failed with the driver it needs and the clone that fetches it.")
    g.add_argument(
        "--workdir", metavar="DIR", type=path_arg("--workdir"),
        help="Output directory, e.g. --workdir runs/llama8b-tp1 or --workdir ~/runs/x. Created if "
        "missing; it must be new, empty or a workdir of this tool, and one that already holds "
        "results.json is refused unless --resume. One run at a time: a second run (or dry run) "
        "on the same workdir is refused while the first holds its run.lock.")
    if with_ms:
        g.add_argument(
            "--ms", type=int, nargs="+", metavar="M", default=list(DEFAULT_MS),
            help="Tokens M one rank's attention processes per step, e.g. --ms 1 8 64 512 "
            f"(default {' '.join(map(str, DEFAULT_MS))}). Under expert parallelism an MoE layer "
            "runs M x EP/TP tokens (--tp 1 --ep 8 at M=64: 512).")
    g.add_argument(
        "--dtypes", nargs="+", metavar="DTYPE", choices=DTYPES, default=list(DTYPES),
        help="Recipes to time, e.g. --dtypes bf16 fp8 (default: all of bf16 fp8 nvfp4).")
    g.add_argument(
        "--backends", nargs="+", metavar="BACKEND", default=None,
        help="Only these backends, e.g. --backends cudnn cublas torch (default: every backend "
        "planned for each recipe).")
    g.add_argument(
        "--search_moe_tiles", action="store_true",
        help="Also time each Triton fused-MoE row with tiles searched on this GPU (its `tuned` "
        "twin, e.g. per_token-tuned beside per_token): what vLLM runs once a tuned config file "
        "is loaded. Off by default: the unlabelled rows run vLLM's own tiles (its shipped file or "
        "default config), and the search adds seconds to each row of a new shape. "
        "scripts/tune_moe.py writes such files for vLLM.")
    g.add_argument(
        "--num_iters", type=int, default=RunSettings.num_iters,
        help=f"Measured iterations per case, e.g. --num_iters 100 (default {RunSettings.num_iters}).")
    g.add_argument(
        "--dry_run_iters", type=int, default=RunSettings.dry_run_iters,
        help="Warm-up iterations per case (also autotune warm-up calls), e.g. --dry_run_iters 10 "
        f"(default {RunSettings.dry_run_iters}).")
    g.add_argument(
        "--modes", nargs="+", metavar="MODE", choices=MODES, default=None,
        help="Timing modes, e.g. --modes graph eager: graph replays each op in a CUDA graph (how "
        "vLLM runs decode); eager launches it plainly, so launch overhead shows, and counts the "
        "GPU launches of one call with CUPTI. Each mode is its own row (default: graph).")
    g.add_argument(
        "--no_cuda_graph", action="store_true",
        help="Same as --modes eager: time plain launches instead of replaying a CUDA graph.")
    g.add_argument(
        "--no_check", action="store_true",
        help="Skip the correctness check (one extra call per case, outside the timed region, "
        "compared with an FP32 reference; the driver's --refcheck for FlashInfer rows).")
    g.add_argument(
        "--no_autotune", action="store_true",
        help="Skip FlashInfer's autotuner (default tactics; faster, usually slower kernels).")
    g.add_argument(
        "--autotune_cache", metavar="PATH", type=path_arg("--autotune_cache"),
        help="FlashInfer autotuner cache to load and extend, e.g. --autotune_cache runs/tuned.json "
        "(default: one per user, GPU, FlashInfer and torch version, tactic cap and buckets, under "
        "~/.cache/benchmark-model-kernels/autotune/, so a new workdir reuses earlier tuning; "
        "<workdir>/autotune_cache.json where the GPU is not known here: --dry_run, --launcher slurm).")
    g.add_argument(
        "--autotune_buckets", choices=AUTOTUNE_BUCKETS, default=RunSettings.autotune_buckets,
        help="Token counts FlashInfer's autotuner profiles for a GEMM row: 'timed' (default), only "
        "the row's M, the one bucket its timed call uses (an M=512 row is tuned at 1 bucket "
        "instead of 10); 'all', FlashInfer's own buckets 1, 2, 4, ... up to M, as its driver does, "
        "e.g. --autotune_buckets all to tune as the driver alone would.")
    g.add_argument(
        "--autotune_tactics", metavar="N", default=str(RunSettings.autotune_tactics),
        help="cuDNN tactics FlashInfer's autotuner profiles per GEMM shape: the first N execution "
        f"plans in cuDNN's own heuristic order (default {RunSettings.autotune_tactics}; cuDNN offers "
        "dozens per shape, each built and profiled), e.g. --autotune_tactics all to profile every "
        "plan as FlashInfer alone does. A row tuned under a cap says so in its note. An "
        "--autotune_cache shared between settings keeps the tactic found first.")
    g.add_argument(
        "--case_timeout", type=float, default=RunSettings.case_timeout, metavar="SECONDS",
        help="Kill a case (and its worker) after this many seconds, e.g. --case_timeout 300; the "
        f"case is failed, the rest go on (default {RunSettings.case_timeout:g}; the first case of "
        "a kernel family includes its JIT build).")
    g.add_argument(
        "--dry_run", action="store_true",
        help="Write testlist.txt and cases.json and print the case summary; run nothing, no GPU.")
    g.add_argument(
        "--assume_cc", metavar="GPU|MAJOR.MINOR", default=None,
        help="With --dry_run on a machine without that GPU: mark cases unsupported as on that GPU, "
        "e.g. --assume_cc h200 (compute capability 9.0 and its memory, for the memory table and the "
        "cells that do not fit) or --assume_cc 10.0 (compute capability only). Names: "
        f"{known_names()}. With --print_only the preview also counts, per recipe, the cells that GPU "
        "can run.")
    g.add_argument(
        "--resume", action="store_true",
        help="Continue in an existing --workdir: keep its ok/unsupported rows, run the missing "
        "and failed cases.")
    g.add_argument(
        "--cache", metavar="DIR", type=path_arg("--cache"), default=None,
        help="Result cache shared by every run on this machine, e.g. --cache /shared/bmk-cache: a "
        "case timed before on the same GPU model, driver, CUDA, torch, FlashInfer and triton "
        "versions and timing flags is copied from it (its row's `origin` names the run that "
        f"measured it) instead of timed again (default {default_cache_dir().replace(os.path.expanduser('~'), '~')}).")
    g.add_argument(
        "--no_cache", action="store_true",
        help="Time every case again and leave the result cache alone, e.g. after a driver update "
        "the versions do not show.")
    g.add_argument(
        "--no_jit_warmup", action="store_true",
        help="Build FlashInfer's and Triton's kernels one after another as the timed cases first "
        "use them. By default a run on a machine whose JIT caches have not built a kernel family "
        "first runs one small case of each such family side by side in a few processes (times "
        "thrown away), so the builds overlap; a later run on the same caches skips it.")
    g.add_argument(
        "--gpus", metavar="LIST", default=None,
        help="Spread the cases over these GPUs, one worker pinned to each, e.g. --gpus 0,1,2,3 "
        "(all must be one model; rows come out in the same order as on one GPU). Default: the "
        "one GPU the run sees.")
    g.add_argument(
        "--allow_cuda_events", action="store_true",
        help="Accept rows FlashInfer timed with CUDA events/graphs because CUPTI was unavailable "
        "(otherwise those rows are failed).")
    a = parser.add_argument_group("attention (FlashInfer's attention routines, per layer type of the plan)")
    a.add_argument(
        "--kv_lens", type=int, nargs="+", metavar="TOKENS", default=list(DEFAULT_KV_LENS),
        help="Cached tokens each decode sequence reads, e.g. --kv_lens 1024 32768 (default "
        f"{' '.join(map(str, DEFAULT_KV_LENS))}). Decode at M runs M sequences of one new token "
        "each over that many tokens; a sliding-window layer reads at most its window.")
    a.add_argument(
        "--prefill_lens", type=int, nargs="+", metavar="TOKENS", default=[],
        help="Also time prefill: one sequence of this many prompt tokens, causal, e.g. "
        "--prefill_lens 2048 8192 (default: no prefill rows).")
    a.add_argument(
        "--kv_dtypes", nargs="+", metavar="DTYPE", choices=KV_DTYPES, default=list(KV_DTYPES),
        help="KV-cache dtypes, e.g. --kv_dtypes bf16 (vLLM's default kv_cache_dtype auto, the "
        "model's BF16) or --kv_dtypes bf16 fp8 (default: both; the query stays BF16).")
    a.add_argument(
        "--page_size", type=int, metavar="TOKENS", default=VLLM_BLOCK_SIZE,
        help=f"Tokens per KV-cache page (vLLM's --block-size), e.g. --page_size 64 (default "
        f"{VLLM_BLOCK_SIZE}, vLLM's default block size); a power of two. A backend that runs other "
        "page sizes only gets unsupported rows that say which it runs.")
    a.add_argument(
        "--no_attention", action="store_true",
        help="Leave attention out: time only the GEMM and MoE rows, e.g. to compare with a run "
        "made before attention rows existed.")
    a.add_argument(
        "--attention_cpu_fill", action="store_true",
        help="Fill every attention case's K/V cache on the CPU and copy it, as FlashInfer's driver "
        "does (seconds to a minute per large case), e.g. to cross-check one large cell; by default "
        f"the driver's draws of {GPU_FILL_MIN_NUMEL:,} elements or more are made on the GPU, from "
        "the same distribution.")


def check_settings(args: argparse.Namespace) -> None:
    """The numeric run flags (iterations, timeout); raises UsageError. (--ms, --dtypes and
    --backends are checked by cases.check_filters, the rule build_cases applies.)"""
    if args.num_iters < 1:
        raise UsageError("--num_iters", args.num_iters, "must be at least 1, e.g. --num_iters 30")
    if args.dry_run_iters < 0:
        raise UsageError("--dry_run_iters", args.dry_run_iters, "must be 0 or more, e.g. --dry_run_iters 5")
    if not args.case_timeout > 0 or math.isinf(args.case_timeout):
        raise UsageError("--case_timeout", args.case_timeout,
                         "must be a positive, finite number of seconds, e.g. --case_timeout 300")
    modes_of(args)
    autotune_tactics(args)
    check_sweep(sweep_from_args(args))


def autotune_tactics(args: argparse.Namespace) -> int:
    """--autotune_tactics as RunSettings holds it: N >= 1, or 0 for "all"; raises UsageError."""
    value = str(getattr(args, "autotune_tactics", RunSettings.autotune_tactics)).strip()
    if value == "all":
        return 0
    if not value.isdigit() or int(value) < 1:
        raise UsageError("--autotune_tactics", value, "must be a whole number of at least 1 or 'all', "
                         "e.g. --autotune_tactics 8 or --autotune_tactics all")
    return int(value)


def sweep_from_args(args: argparse.Namespace) -> AttentionSweep:
    """The attention sweep the flags ask for (the CLIs' defaults where a flag is absent)."""
    return AttentionSweep(
        kv_lens=tuple(getattr(args, "kv_lens", None) or DEFAULT_KV_LENS),
        prefill_lens=tuple(getattr(args, "prefill_lens", None) or ()),
        kv_dtypes=tuple(getattr(args, "kv_dtypes", None) or KV_DTYPES),
        page_size=getattr(args, "page_size", VLLM_BLOCK_SIZE),
        enabled=not getattr(args, "no_attention", False))


def modes_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The timing modes --modes and --no_cuda_graph ask for (default graph); raises UsageError."""
    modes = getattr(args, "modes", None)
    if getattr(args, "no_cuda_graph", False):
        if modes and modes != ["eager"]:
            raise UsageError("--no_cuda_graph", "(given)", f"means --modes eager, but --modes is "
                             f"{' '.join(modes)}; drop one of the two")
        return ("eager",)
    if not modes:
        return ("graph",)
    if len(set(modes)) != len(modes):
        raise UsageError("--modes", " ".join(modes), "lists a mode twice; give each once, e.g. "
                         "--modes graph eager")
    return tuple(modes)


def settings_from_args(args: argparse.Namespace, workdir: str) -> RunSettings:
    check_settings(args)
    cache = args.autotune_cache or os.path.join(workdir, DEFAULT_AUTOTUNE_CACHE)
    sweep = sweep_from_args(args)
    return RunSettings(
        dry_run_iters=args.dry_run_iters,
        num_iters=args.num_iters,
        cuda_graph="graph" in modes_of(args),
        modes=modes_of(args),
        check=not getattr(args, "no_check", False),
        autotune=not args.no_autotune,
        autotune_cache=os.path.abspath(cache),
        autotune_buckets=getattr(args, "autotune_buckets", RunSettings.autotune_buckets),
        autotune_tactics=autotune_tactics(args),
        allow_cuda_events=args.allow_cuda_events,
        case_timeout=float(args.case_timeout),
        attention=sweep.enabled,
        kv_lens=sweep.kv_lens,
        prefill_lens=sweep.prefill_lens,
        kv_dtypes=sweep.kv_dtypes,
        page_size=sweep.page_size,
        attention_fill="cpu" if getattr(args, "attention_cpu_fill", False) else "gpu",
        search_moe_tiles=getattr(args, "search_moe_tiles", False),
    )


def validate_args(args: argparse.Namespace, workdirs: list[str] | None = None, *,
                  resume_may_start_fresh: bool = False, gpu_here: bool = True) -> RunRequest:
    """Every check of the run flags that needs no plan, so that a bad flag fails at once, before
    the (slow) planning and preview. `workdirs`: the run folders (a sweep's sub-workdirs; default
    [args.workdir]). --resume needs a results.json in every one of them, or, with
    `resume_may_start_fresh` (a sweep, where later runs may not have started), in at least one.
    Returns the checked flags as a RunRequest for args.workdir. Raises UsageError.
    `gpu_here` False: the runs execute elsewhere (--launcher slurm), so this machine's GPUs are
    not looked at (the request's gpu is None)."""
    workdirs = workdirs or [args.workdir]
    for w in dict.fromkeys([args.workdir, *workdirs]):  # a sweep's parent, then its runs
        check_workdir(w, args.resume)
    if args.resume:
        have = [w for w in workdirs if os.path.isfile(os.path.join(w, RESULTS_JSON))]
        if (not have) if resume_may_start_fresh else len(have) < len(workdirs):
            missing = next(w for w in workdirs if w not in have)
            raise UsageError("--resume", missing, "there is no results.json to resume there; drop "
                             "--resume to start a new run, or give the workdir of the interrupted run")
    settings = settings_from_args(args, os.path.abspath(args.workdir))  # checks them (check_settings)
    if args.resume and not args.dry_run:  # a dry run keeps no rows
        for w in have:
            check_resume_settings(w, settings)  # again where its rows are read (workdir.load_kept)
    backends = args.backends or None
    caps = HAND
    if backends and any(b not in backend_names() for b in backends):
        caps = load_capabilities(args.flashinfer_repo)  # maybe a backend the installed FlashInfer adds
    check_filters(getattr(args, "ms", None) or DEFAULT_MS, args.dtypes, backends, caps)
    # torch and triton rows time this tool's own code: only driver rows need the checkout.
    library_only = bool(backends) and all(b in (TORCH, TRITON) for b in backends)
    no_driver = bool(getattr(args, "no_driver", False))
    if no_driver and args.flashinfer_repo:
        raise UsageError("--no_driver", "(given)", "contradicts --flashinfer_repo; give one of them")
    if not args.dry_run and not library_only and not no_driver:
        if not args.flashinfer_repo:
            raise UsageError("--flashinfer_repo", None, "is required to run driver cases; pass a "
                             "FlashInfer checkout, or --backends torch triton, or --dry_run, or "
                             "--no_driver")
        if not has_driver(args.flashinfer_repo):
            raise UsageError("--flashinfer_repo", args.flashinfer_repo,
                             "has no benchmarks/flashinfer_benchmark.py; pass the root of a "
                             "FlashInfer source checkout whose tag matches the installed wheel")
    if getattr(args, "cache", None) and getattr(args, "no_cache", False):
        raise UsageError("--cache", args.cache, "and --no_cache contradict each other; give one")
    if getattr(args, "cache", None) and os.path.lexists(args.cache) and not os.path.isdir(args.cache):
        raise UsageError("--cache", args.cache, "is a file, not a folder; give the result cache's folder, "
                         "e.g. --cache ~/bmk-cache (created if missing)")
    gpus = getattr(args, "gpus", None)
    if gpus is not None:
        devices.parse_gpus(gpus)  # a dry run too: its cases.json must not record a list it cannot run
    gpu = _target_gpu(args) if gpu_here else None
    gpu_memory = assumed_memory_bytes(getattr(args, "assume_cc", None))
    if gpu is not None and not getattr(args, "assume_cc", None):
        from ..env.gpu import nvml_memory_bytes

        gpu_memory = nvml_memory_bytes(0)
    devices_pinned = devices.check_gpus(gpus) if gpus is not None and not args.dry_run and gpu_here else None
    workdir = os.path.abspath(args.workdir)
    if args.autotune_cache and not args.no_autotune:
        # A dry run too: its testlist.txt hands the path to the driver.
        check_autotune_cache_is_flashinfers(args.autotune_cache, [workdir, *workdirs])
    if not args.dry_run and not args.no_autotune:
        settings = settle_autotune_cache(settings, given=args.autotune_cache, resume=bool(args.resume),
                                         workdirs=[workdir, *workdirs], gpu=gpu,
                                         flashinfer_version=flashinfer_wheel()["version"])
    return RunRequest(
        ms=tuple(getattr(args, "ms", None) or DEFAULT_MS),
        dtypes=tuple(args.dtypes),
        backends=tuple(backends) if backends else None,
        workdir=workdir,
        resume=args.resume,
        dry_run=args.dry_run,
        gpu=gpu,
        flashinfer_repo=args.flashinfer_repo,
        settings=settings,
        no_driver=no_driver,
        cache_dir=None if getattr(args, "no_cache", False) else (getattr(args, "cache", None) or default_cache_dir()),
        devices=tuple(devices_pinned) if devices_pinned else None,
        gpu_memory_bytes=gpu_memory,
        jit_warmup=not getattr(args, "no_jit_warmup", False),
    )


def _target_gpu(args: argparse.Namespace) -> Gpu | None:
    """The GPU the cases are planned for: the --assume_cc stand-in for --dry_run, the visible one,
    or None (--dry_run without a GPU)."""
    assume = getattr(args, "assume_cc", None)
    if assume:
        cc = parse_cc(assume)
        if not args.dry_run:
            raise UsageError("--assume_cc", assume, "only applies to --dry_run; a real run uses "
                             "the compute capability of the GPU it runs on")
        return (f"assumed sm_{cc[0]}{cc[1]}", cc)
    gpu = detect_gpu()  # also for --dry_run when a GPU is there: skip reasons for it
    if gpu is None and not args.dry_run:
        raise UsageError("--dry_run", "(not given)", "no CUDA GPU is visible to torch; run on a GPU "
                         "machine, or add --dry_run to only plan the cases")
    return gpu


def detect_gpu() -> Gpu | None:
    """(name, compute capability) of CUDA device 0, or None without a usable GPU: NVML's answer
    where it has one (no torch import in the run's process, which otherwise needs none when its
    plan is kept), else torch's."""
    from ..env.gpu import nvml_gpu

    found = nvml_gpu(0)
    if found is not None:
        return found
    try:
        # Lazy: both CLIs import this module for their flags; --help, a bad flag or a dry run
        # with --assume_cc must not wait seconds for torch to load.
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))
    except Exception:  # noqa: BLE001
        return None


def parse_cc(text: str) -> tuple[int, int]:
    """'9.0' -> (9, 0), 'h200' -> (9, 0) (core/gpu_specs.py); the --assume_cc value."""
    if not looks_like_cc(text) and re.search(r"[A-Za-z]", text or ""):
        return gpu_spec(text, "--assume_cc").compute_capability
    try:
        major, minor = (int(x) for x in text.split("."))
    except ValueError:
        raise UsageError("--assume_cc", text, "give MAJOR.MINOR or a GPU name, e.g. 9.0 or h200") from None
    return major, minor


def assumed_memory_bytes(text: str | None) -> int | None:
    """The memory of the GPU --assume_cc names (None for MAJOR.MINOR, which states none)."""
    if not text or looks_like_cc(text) or not re.search(r"[A-Za-z]", text):
        return None
    return int(gpu_spec(text, "--assume_cc").memory_gib * 2**30)


__all__ = [
    "DEFAULT_MS",
    "Gpu",
    "RunRequest",
    "add_run_arguments",
    "assumed_memory_bytes",
    "check_settings",
    "detect_gpu",
    "modes_of",
    "parse_cc",
    "settings_from_args",
    "sweep_from_args",
    "validate_args",
]
