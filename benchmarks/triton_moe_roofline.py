#!/usr/bin/env python3
"""Performance target of the Triton fused MoE: Qwen3-30B-A3B's experts against their HBM floor.

What it times: the runner's own `triton.fused_moe` cases of the real plan,
`plan_model("qwen3-30b-a3b", tp=1, ep=1)` (hidden, per-rank intermediate, local/global experts,
top_k and activation come from the bundled config, not from this file), through the triton
backend's `run_case`: the tiles are searched once per shape and cached beside --autotune_cache
(`<autotune_cache>.triton/`, the runner's cache), and the call is timed with FlashInfer's
`bench_gpu_time` (CUPTI, cold L2, CUDA graph; kernels/timing.py), exactly as a benchmark run times
the row. Of each scheme's two Triton MoE rows it times the `tuned` one (variant `tuned` /
`<scheme>-tuned`, cases/backends.py TUNED): its tiles are the best of a search that has vLLM's
own tiles among the candidates, so the ratio measures the kernel, not a tile table; the
unlabelled row (vLLM's tiles) is what `benchmark-model-kernels` reports beside it.

What it compares against: the HBM floor, the bytes a perfect kernel must move (the weights of the
local experts the seeded routing actually touches, the input rows and the BF16 output rows,
kernels/triton_moe/problem.py's rule) divided by the GPU's HBM peak (run/roofline.py PEAKS).
The target (a performance target lives here, never in a timed unit test): time / floor <=
--target (1.35) for BF16 at M >= --target_min_m (8).

Exit status: 0 every targeted row passes; 1 a targeted row misses (or has no time); 2 bad input,
or no CUDA GPU / Triton / FlashInfer here (one `error:` line).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

# Light imports only (no torch, Triton or FlashInfer): --help must work on any CPU machine.
from benchmark_model_kernels.core.errors import OneLineArgumentParser, UsageError, cli_main  # noqa: E402
from benchmark_model_kernels.core.results_schema import RunSettings  # noqa: E402
from benchmark_model_kernels.kernels.triton_moe.problem import SCHEMES  # noqa: E402

#: The model, layout and sweep the target is defined for.
MODEL = "qwen3-30b-a3b"
TP = 1
EP = 1
DEFAULT_MS = (1, 8, 64, 512)
DEFAULT_TARGET = 1.35
DEFAULT_TARGET_MIN_M = 8
DEFAULT_TARGET_SCHEMES = ("bf16",)
DEFAULT_AUTOTUNE_CACHE = "autotune_cache.json"
#: build_inputs' default seed, the one the triton backend's run_case builds its routing with.
ROUTING_SEED = 0
#: Verdicts of one row: within the target, over it (or no time), not targeted.
PASS, MISS, UNTARGETED = "PASS", "MISS", "-"


# ---------------------------------------------------------------------------- pure logic


@dataclass(frozen=True)
class Target:
    """time / floor <= ratio, for the rows of `schemes` at M >= min_m."""

    ratio: float = DEFAULT_TARGET
    min_m: int = DEFAULT_TARGET_MIN_M
    schemes: tuple[str, ...] = DEFAULT_TARGET_SCHEMES

    def applies(self, scheme: str, m: int) -> bool:
        return scheme in self.schemes and m >= self.min_m


def judge(scheme: str, m: int, time_us: float | None, floor_us: float | None,
          target: Target) -> tuple[float | None, str]:
    """(time / floor, verdict) of one row. The ratio is None without a time or a positive floor;
    a targeted row then MISSes (no number cannot meet a target); an untargeted row gets "-"."""
    ratio = None
    if time_us is not None and floor_us is not None and floor_us > 0 and math.isfinite(time_us):
        ratio = time_us / floor_us
    if not target.applies(scheme, m):
        return ratio, UNTARGETED
    return ratio, PASS if ratio is not None and ratio <= target.ratio else MISS


def exit_code(verdicts: Iterable[str]) -> int:
    """0 when no row MISSes (every targeted row passed, or none was targeted), else 1."""
    return 1 if any(v == MISS for v in verdicts) else 0


def floor_bytes(p: Any, touched_experts: float) -> float:
    """HBM floor of a MoeProblem whose routing touches `touched_experts` local experts: their
    weights once, the input rows once, the BF16 output rows once (kernels/triton_moe/problem.py
    `hbm_floor_bytes` with the actual count)."""
    from benchmark_model_kernels.kernels.triton_moe.problem import hbm_floor_bytes

    return float(hbm_floor_bytes(p, touched_experts))


def touched_experts(p: Any, seed: int = ROUTING_SEED) -> int:
    """Local experts the seeded uniform routing of `build_inputs(p, device, seed)` sends a pair to
    (ids >= local_experts belong to other ranks). CPU, needs torch."""
    from benchmark_model_kernels.kernels.triton_moe.problem import uniform_routing

    ids, _ = uniform_routing(p.num_tokens, p.global_experts, p.top_k, seed)
    return len({int(e) for e in ids.flatten().tolist() if int(e) < p.local_experts})


def dtype_of(scheme: str) -> str:
    """The plan recipe a Triton MoE scheme belongs to ("bf16" or "fp8")."""
    return "bf16" if scheme == "bf16" else "fp8"


def moe_cases(plan: Any, ms: Sequence[int], schemes: Sequence[str],
              compute_capability: tuple[int, int] | None) -> list[tuple[str, Any]]:
    """(scheme, Case) of the runner's kernel-only triton.fused_moe cases of `plan` (cases/build.py
    `build_cases`, backend triton) whose tiles are searched (the `tuned` variants; the rows with
    vLLM's tiles are left out), in `schemes` order, then `ms` order (plan order within an M)."""
    from benchmark_model_kernels.cases.backends import tuned_tiles
    from benchmark_model_kernels.cases.build import build_cases
    from benchmark_model_kernels.kernels.triton_ops import scheme_of

    dtypes = sorted({dtype_of(s) for s in schemes}, key=("bf16", "fp8").index)
    cases = [c for c in build_cases(plan, list(ms), dtypes, ["triton"], compute_capability,
                                     search_moe_tiles=True)
             if c.kind == "moe" and c.routine == "triton.fused_moe" and not c.with_quant
             and tuned_tiles(c.variant)]
    out = []
    for scheme in schemes:
        picked = [c for c in cases if scheme_of(c) == scheme]
        picked.sort(key=lambda c: list(ms).index(c.m))
        out += [(scheme, c) for c in picked]
    return out


# ---------------------------------------------------------------------------- GPU probe


@dataclass(frozen=True)
class Device:
    name: str
    compute_capability: tuple[int, int]
    index: int
    triton_version: str
    torch_version: str


def probe_device() -> Device:
    """The visible CUDA GPU and the versions that key the tile cache; UsageError (exit 2) when
    there is no GPU, or Triton or FlashInfer (the timer) does not import."""
    try:
        import torch
    except ImportError as exc:
        raise UsageError("torch", "not importable", f"this benchmark needs a CUDA GPU and PyTorch "
                         f"with CUDA ({exc}); run it on a GPU machine") from None
    if not torch.cuda.is_available():
        raise UsageError("torch.cuda.is_available()", False,
                         f"this benchmark needs a CUDA GPU and sees none (torch {torch.__version__}); "
                         "run it on a GPU machine, see --help")
    try:
        import triton
    except ImportError as exc:
        raise UsageError("triton", "not importable", f"the fused MoE is Triton code ({exc}); "
                         "install the triton that matches torch") from None
    try:
        import flashinfer.testing  # noqa: F401  (the timer: bench_gpu_time)
    except Exception as exc:  # noqa: BLE001 - any import failure means "no timer"
        raise UsageError("flashinfer", "not importable",
                         f"the timer is flashinfer.testing.bench_gpu_time ({type(exc).__name__}: "
                         f"{exc}); pip install -e '.[gpu]', or source .devbundle/setup.sh") from None
    index = torch.cuda.current_device()
    cc = torch.cuda.get_device_capability(index)
    return Device(torch.cuda.get_device_name(index), (int(cc[0]), int(cc[1])), index,
                  triton.__version__, torch.__version__)


def hbm_peak(device: Device, override_tb_s: float | None) -> tuple[float, str]:
    """(HBM TB/s, where it comes from): --hbm_tb_s, else the GPU's run/roofline.py PEAKS entry."""
    if override_tb_s is not None:
        return override_tb_s, "--hbm_tb_s"
    from benchmark_model_kernels.run.roofline import find_peak

    peak = find_peak(device.name, device.compute_capability)
    if peak is None:
        raise UsageError("GPU", f"{device.name!r} (sm_{device.compute_capability[0]}"
                         f"{device.compute_capability[1]})",
                         "not in run/roofline.py PEAKS (or its compute capability disagrees); "
                         "give its HBM bandwidth, e.g. --hbm_tb_s 4.8")
    return peak.hbm_tb_per_sec, f"{peak.name}: {peak.source}"


def synchronize_and_free() -> str:
    """Between rows: drop the row's tensors and give the cached blocks back. Returns why the CUDA
    context can no longer be trusted (a sticky error such as an illegal memory access), or ""."""
    gc.collect()
    try:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001 - reported as the reason the remaining rows did not run
        return _one_line(exc)
    return ""


# ---------------------------------------------------------------------------- one row


@dataclass
class RowResult:
    name: str
    """The plan's MoE entry ("experts")."""
    scheme: str
    m: int
    num_tokens: int
    status: str = "failed"
    """"ok", "unsupported" or "failed" (as a results Row)."""
    reason: str = ""
    time_us: float | None = None
    std_us: float | None = None
    timer: str = ""
    touched_experts: int | None = None
    local_experts: int | None = None
    expected_touched_experts: float | None = None
    floor_bytes: float | None = None
    expected_floor_bytes: float | None = None
    """problem.hbm_floor_bytes: the floor at the expected touched count of uniform routing."""
    floor_us: float | None = None
    ratio: float | None = None
    targeted: bool = False
    verdict: str = UNTARGETED
    tiles: dict[str, int] | None = None
    tiles_from: str = ""
    """"cache" (found before the row ran), "search" (searched and stored by this row) or ""."""
    note: str = ""
    """The backend's note: which tiles, from the cache or searched over how many configs."""
    seconds: float = 0.0
    """Wall time of the row, the tile search included."""


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def time_case(case: Any, settings: RunSettings) -> Any:
    """The runner's timing of one triton case (a Measurement): tiles from the cache or searched
    and stored, then bench_gpu_time."""
    from benchmark_model_kernels.kernels.triton_ops import run_case

    return run_case(case, settings)


def measure(scheme: str, case: Any, settings: RunSettings, device: Device, hbm_tb_s: float,
            target: Target, timer: Callable[[Any, RunSettings], Any] | None = None) -> RowResult:
    """One row: the floor, then the time (`timer`, default `time_case`), classified ok /
    unsupported / failed by the runner's own rule (outcome.classify_python_case: a non-CUPTI time
    fails unless --allow_cuda_events). Any failure is the row's, never the whole run's."""
    from benchmark_model_kernels.kernels import triton_ops
    from benchmark_model_kernels.kernels.timing import UnsupportedCase
    from benchmark_model_kernels.kernels.triton_moe import problem, tuning
    from benchmark_model_kernels.kernels.triton_tuning import load_cached_config
    from benchmark_model_kernels.run.outcome import WorkerReply, classify_python_case

    row = RowResult(case.name, scheme, case.m, case.logical.num_tokens)
    row.targeted = target.applies(scheme, case.m)
    start = time.monotonic()
    tile_dir = triton_ops.cache_dir(settings)
    key = check = None
    answer: dict[str, Any]
    try:
        p = triton_ops.moe_problem(case)
        row.local_experts = p.local_experts
        row.touched_experts = touched_experts(p)
        row.expected_touched_experts = problem.expected_touched_experts(p)
        row.floor_bytes = floor_bytes(p, row.touched_experts)
        row.expected_floor_bytes = problem.hbm_floor_bytes(p)
        row.floor_us = row.floor_bytes / (hbm_tb_s * 1e12) * 1e6
        key = tuning.config_key(p, device.name, device.triton_version)

        def check(c: dict[str, Any], scheme: str = p.scheme, block: int = p.block_size) -> dict[str, int]:
            return dict(tuning.validate_config(c, scheme, block))

        cached = load_cached_config(tile_dir, key, check)
        if cached is not None:
            row.tiles, row.tiles_from = cached, "cache"
        m = (timer or time_case)(case, settings)
        row.note = m.note
        answer = {"measurement": {"median_us": m.median_us, "std_us": m.std_us, "timer": m.timer,
                                  "note": m.note}}
    except UnsupportedCase as exc:
        answer = {"unsupported": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported in the row; the next M still runs
        answer = {"exception": _one_line(exc)}
        print(f"--- {scheme} M={case.m} failed:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
    outcome = classify_python_case("", WorkerReply(answer), settings)
    row.status, row.timer = outcome.status, outcome.timer
    row.time_us = outcome.median_us if outcome.status == "ok" else None
    row.std_us = outcome.std_us if outcome.status == "ok" else None
    row.reason = "" if outcome.status == "ok" else outcome.reason
    if key is not None and check is not None and row.tiles is None:
        stored = load_cached_config(tile_dir, key, check)
        if stored is not None:
            row.tiles, row.tiles_from = stored, "search"
    row.ratio, row.verdict = judge(scheme, case.m, row.time_us, row.floor_us, target)
    row.seconds = time.monotonic() - start
    return row


def not_run(scheme: str, case: Any, target: Target, why: str) -> RowResult:
    """A row skipped because the CUDA context broke on an earlier one."""
    row = RowResult(case.name, scheme, case.m, case.logical.num_tokens, reason=why)
    row.targeted = target.applies(scheme, case.m)
    row.ratio, row.verdict = judge(scheme, case.m, None, None, target)
    return row


# ---------------------------------------------------------------------------- output


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def tiles_text(tiles: dict[str, int] | None) -> str:
    from benchmark_model_kernels.kernels.triton_tuning import CONFIG_KEYS

    return "-" if not tiles else ",".join(str(tiles[k]) for k in CONFIG_KEYS)


def table(rows: Sequence[RowResult]) -> str:
    head = (f"{'scheme':<15} {'M':>5} {'time us':>9} {'floor us':>9} {'floor MB':>9} {'ratio':>6} "
            f"{'target':>6}  {'touched':>8}  {'tiles BM,BN,BK,G,warps,stages':<30} {'from':<6} "
            f"{'timer':<6}")
    lines = [head]
    for r in rows:
        touched = "-" if r.touched_experts is None else f"{r.touched_experts}/{r.local_experts}"
        floor_mb = None if r.floor_bytes is None else r.floor_bytes / 1e6
        line = (f"{r.scheme:<15} {r.m:>5} {_num(r.time_us, '9.1f'):>9} {_num(r.floor_us, '9.1f'):>9} "
                f"{_num(floor_mb, '9.1f'):>9} {_num(r.ratio, '6.3f'):>6} {r.verdict:>6}  {touched:>8}  "
                f"{tiles_text(r.tiles):<30} {r.tiles_from or '-':<6} {r.timer or '-':<6}")
        if r.status != "ok":
            line += f"  {r.status}: {r.reason}"
        lines.append(line)
    return "\n".join(lines)


def summary(rows: Sequence[RowResult], target: Target) -> str:
    targeted = [r for r in rows if r.targeted]
    if not targeted:
        return (f"result: no row is targeted (target: {', '.join(target.schemes)} at M >= "
                f"{target.min_m}); nothing to miss")
    missed = [r for r in targeted if r.verdict == MISS]
    if not missed:
        return f"result: PASS, all {len(targeted)} targeted rows within time/floor <= {target.ratio:g}"
    why = []
    for r in missed:
        why.append(f"{r.scheme} M={r.m} " + (f"ratio {r.ratio:.3f}" if r.ratio is not None
                                             else f"{r.status}: {r.reason}"))
    return (f"result: MISS, {len(missed)} of {len(targeted)} targeted rows over time/floor <= "
            f"{target.ratio:g}: " + "; ".join(why))


def write_out(path: str | None, doc: dict[str, Any]) -> None:
    if path:
        from benchmark_model_kernels.core.files import write_json_atomic

        write_json_atomic(path, doc)


# ---------------------------------------------------------------------------- CLI


EPILOG = f"""\
examples:
  # on the GPU machine, from the repository root (the default sweep, BF16, the 1.35 target):
  export PYTHONPATH=$PWD/scripts:$PYTHONPATH
  python3 benchmarks/triton_moe_roofline.py --out runs/triton_moe_roofline.json
  # FP8 schemes too (only BF16 is targeted unless --target_schemes says otherwise):
  python3 benchmarks/triton_moe_roofline.py --schemes bf16 fp8_per_tensor fp8_per_token fp8_block128
  # reuse the tiles a benchmark run searched (its --autotune_cache):
  python3 benchmarks/triton_moe_roofline.py --autotune_cache runs/tuned.json --ms 8 64

output: one row per (scheme, M), the scheme's tuned Triton MoE row (searched tiles): time (us,
median of bench_gpu_time), floor (us and MB: bytes of the touched experts' weights + input +
output over the GPU's HBM peak), ratio = time / floor, the verdict (PASS / MISS for targeted rows,
- otherwise), the touched local experts, the tile config and whether it came from the cache or
was searched now, and the timer (cupti).

exit status: 0 every targeted row passes; 1 a targeted row misses or failed; 2 bad input, or no
CUDA GPU / Triton / FlashInfer on this machine ("error: ... needs a CUDA GPU ...").
Shapes come from plan_model("{MODEL}", tp={TP}, ep={EP}) (the bundled config).
"""


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineArgumentParser(
        prog="triton_moe_roofline.py", allow_abbrev=False,
        description="\n\n".join((__doc__ or "").split("\n\n")[:3]),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--ms", type=int, nargs="+", metavar="M", default=list(DEFAULT_MS),
        help="Tokens M per step to time, e.g. --ms 1 8 64 512 (default "
        f"{' '.join(map(str, DEFAULT_MS))}).")
    ap.add_argument(
        "--schemes", nargs="+", metavar="SCHEME", choices=SCHEMES, default=["bf16"],
        help="Triton MoE schemes to time, e.g. --schemes bf16 fp8_per_tensor (choose from "
        f"{' '.join(SCHEMES)}; default bf16). FP8 rows take already-quantized activations and "
        "their floor counts 1-byte weights and input.")
    ap.add_argument(
        "--target", type=float, default=DEFAULT_TARGET, metavar="RATIO",
        help=f"Largest time / floor a targeted row may have, e.g. --target 1.35 (default "
        f"{DEFAULT_TARGET:g}).")
    ap.add_argument(
        "--target_min_m", type=int, default=DEFAULT_TARGET_MIN_M, metavar="M",
        help=f"Only rows with M at least this are targeted, e.g. --target_min_m 8 (default "
        f"{DEFAULT_TARGET_MIN_M}; decode at M=1 is launch-bound and reported only).")
    ap.add_argument(
        "--target_schemes", nargs="+", metavar="SCHEME", choices=SCHEMES,
        default=list(DEFAULT_TARGET_SCHEMES),
        help="Schemes the target applies to, e.g. --target_schemes bf16 fp8_per_token (default "
        "bf16); the other --schemes rows are reported with verdict -.")
    ap.add_argument(
        "--autotune_cache", metavar="PATH", default=DEFAULT_AUTOTUNE_CACHE,
        help="The runner's autotuner cache path, e.g. --autotune_cache runs/tuned.json; the "
        "searched tiles live beside it in PATH.triton/ (one JSON per shape), reused when present, "
        f"searched and stored when not (default ./{DEFAULT_AUTOTUNE_CACHE}). A fresh path forces "
        "a new search.")
    ap.add_argument(
        "--num_iters", type=int, default=RunSettings.num_iters, metavar="N",
        help=f"Measured iterations per row, e.g. --num_iters 100 (default {RunSettings.num_iters}).")
    ap.add_argument(
        "--dry_run_iters", type=int, default=RunSettings.dry_run_iters, metavar="N",
        help=f"Warm-up iterations per row, e.g. --dry_run_iters 10 (default "
        f"{RunSettings.dry_run_iters}).")
    ap.add_argument(
        "--allow_cuda_events", action="store_true",
        help="Accept times FlashInfer took with CUDA events/graphs because CUPTI was unavailable "
        "(otherwise such a row is failed, as in a benchmark run).")
    ap.add_argument(
        "--hbm_tb_s", type=float, default=None, metavar="TB_PER_S",
        help="HBM bandwidth to divide the floor bytes by, e.g. --hbm_tb_s 4.8 (default: the "
        "detected GPU's entry in run/roofline.py PEAKS; needed for a GPU not listed there).")
    ap.add_argument(
        "--out", metavar="PATH.json", default=None,
        help="Also write the numbers as JSON, e.g. --out runs/triton_moe_roofline.json (written "
        "atomically after every row, so an interrupted run keeps what it measured).")
    return ap


def check_args(args: argparse.Namespace) -> None:
    """Every flag's value; UsageError naming the first bad one (before any GPU work)."""
    from benchmark_model_kernels.cases.build import check_filters

    check_filters(args.ms, [], None)
    if not (math.isfinite(args.target) and args.target > 0):
        raise UsageError("--target", args.target, "must be a positive ratio, e.g. --target 1.35")
    if args.target_min_m < 0:
        raise UsageError("--target_min_m", args.target_min_m, "must be 0 or more, e.g. --target_min_m 8")
    if args.num_iters < 1:
        raise UsageError("--num_iters", args.num_iters, "must be at least 1, e.g. --num_iters 30")
    if args.dry_run_iters < 0:
        raise UsageError("--dry_run_iters", args.dry_run_iters, "must be 0 or more, e.g. --dry_run_iters 5")
    if args.hbm_tb_s is not None and not (math.isfinite(args.hbm_tb_s) and args.hbm_tb_s > 0):
        raise UsageError("--hbm_tb_s", args.hbm_tb_s, "must be a positive TB/s, e.g. --hbm_tb_s 4.8")
    if not args.autotune_cache or os.path.isdir(args.autotune_cache):
        raise UsageError("--autotune_cache", args.autotune_cache or "''",
                         "must be a file path (its tiles go in PATH.triton/), e.g. --autotune_cache "
                         "runs/tuned.json")
    if args.out is not None:
        parent = os.path.dirname(os.path.abspath(args.out))
        if not args.out.endswith(".json") or os.path.isdir(args.out):
            raise UsageError("--out", args.out, "must be a .json file path, e.g. --out runs/roofline.json")
        if not os.path.isdir(parent):
            raise UsageError("--out", args.out, f"its folder {parent} does not exist; create it first")


def unique(values: Iterable[Any]) -> list[Any]:
    """`values` in order, repeats dropped."""
    return list(dict.fromkeys(values))


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    ms, schemes = unique(args.ms), unique(args.schemes)
    target = Target(args.target, args.target_min_m, tuple(unique(args.target_schemes)))
    settings = RunSettings(dry_run_iters=args.dry_run_iters, num_iters=args.num_iters,
                           cuda_graph=True, autotune_cache=os.path.abspath(args.autotune_cache),
                           allow_cuda_events=args.allow_cuda_events)

    device = probe_device()
    hbm_tb_s, hbm_source = hbm_peak(device, args.hbm_tb_s)

    from benchmark_model_kernels.kernels.triton_ops import cache_dir
    from benchmark_model_kernels.plan.planner import plan_model

    plan = plan_model(MODEL, TP, EP)
    if not plan.moe:
        raise RuntimeError(f"plan_model({MODEL!r}, {TP}, {EP}) has no MoE entry")
    cases = moe_cases(plan, ms, schemes, device.compute_capability)

    print(f"Triton fused MoE roofline: {MODEL} TP={TP} EP={EP}, shapes from the plan "
          f"({plan.model.source} config):")
    for e in plan.moe:
        print(f"  {e.name}: hidden {e.hidden}, intermediate {e.intermediate} per rank, "
              f"{e.experts} local of {e.global_experts} experts, top_k {e.top_k}, {e.activation} "
              f"({'gated' if e.gated else 'not gated'}), {e.layers} layers, uniform seeded routing")
    print(f"GPU {device.index}: {device.name} (sm_{device.compute_capability[0]}"
          f"{device.compute_capability[1]}), HBM {hbm_tb_s:g} TB/s ({hbm_source})")
    print(f"torch {device.torch_version}, triton {device.triton_version}; timer: FlashInfer "
          f"bench_gpu_time (CUPTI, cold L2, CUDA graph), median of {settings.num_iters} after "
          f"{settings.dry_run_iters} warm-up")
    print(f"tiles: {cache_dir(settings)}")
    print(f"target: time / floor <= {target.ratio:g} for {', '.join(target.schemes)} at M >= "
          f"{target.min_m}\n", flush=True)

    doc: dict[str, Any] = {
        "benchmark": "triton_moe_roofline", "finished": False, "exit_code": None,
        "model": MODEL, "tp": TP, "ep": EP, "plan_source": plan.model.source,
        "moe": [dataclasses.asdict(e) for e in plan.moe],
        "gpu": dataclasses.asdict(device), "hbm_tb_per_sec": hbm_tb_s, "hbm_source": hbm_source,
        "target": dataclasses.asdict(target), "settings": dataclasses.asdict(settings),
        "tile_cache": cache_dir(settings), "rows": [],
    }
    write_out(args.out, doc)
    rows: list[RowResult] = []
    broken = ""
    for i, (scheme, case) in enumerate(cases, 1):
        if broken:
            rows.append(not_run(scheme, case, target, broken))
            continue
        row = measure(scheme, case, settings, device, hbm_tb_s, target)
        rows.append(row)
        error = synchronize_and_free()
        if error:
            left = unique(c.m for _, c in cases[i:])
            broken = (f"not run: the CUDA context broke after {scheme} M={row.m} ({error})"
                      + (f"; time the rest in a new process, e.g. --ms {' '.join(map(str, left))}"
                         if left else ""))
        got = (f"{row.time_us:.1f} us, ratio {row.ratio:.3f} {row.verdict}"
               if row.time_us is not None and row.ratio is not None else f"{row.status}: {row.reason}")
        print(f"[{i}/{len(cases)}] {scheme} M={row.m}: {got}; tiles {tiles_text(row.tiles)} "
              f"({row.tiles_from or 'none'}); {row.seconds:.1f} s", flush=True)
        doc["rows"] = [dataclasses.asdict(r) for r in rows]
        write_out(args.out, doc)
    if broken:
        print(broken, file=sys.stderr)
        doc["rows"] = [dataclasses.asdict(r) for r in rows]

    code = exit_code(r.verdict for r in rows)
    print()
    print(table(rows))
    print("floor = touched local experts' weights + input rows + BF16 output rows, at the HBM peak; "
          "from = tiles read from the cache or searched by this run")
    print(summary(rows, target))
    doc.update(finished=True, exit_code=code)
    write_out(args.out, doc)
    if args.out:
        print(f"wrote {args.out}")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
