"""The environment doctor: can this machine produce kernel times worth trusting?

`gather` runs the probes (from `environment.py` and `env/`), `run_checks` judges them with the
checks of `checks` (the machine) and `flashinfer_checks` (the FlashInfer install), each a `Check`
whose `ok` is True (pass), False (fail: numbers would be wrong or the run would break) or None
(warning: worth knowing, not blocking). Exit 0 only when no check fails. The FlashInfer pairing
check says whether this Python is alone (the documented pair) or beside vLLM (vLLM's FlashInfer
and its tag's checkout, or --no_driver). A CPU-only machine gets
one plain sentence and exit 1, never a traceback. A tool only some backends need (tileiras for
cutile) is a warning, and a failure when --backends names such a backend.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Any, Callable, Sequence

from ..cases.backends import BACKEND_NAMES, backend_names
from ..cases.capabilities import load_capabilities
from ..core.errors import OneLineArgumentParser, UsageError, cli_main
from ..core.files import path_arg
from ..env import gpu as gpu_probes
from ..env import versions
from . import environment as envmod
from .checks import (
    Check,
    check_arch_list,
    check_cupti,
    check_gpu,
    check_idle,
    check_no_download,
    check_nvcc,
    check_tileiras,
    check_torch_cuda,
)
from .flashinfer_checks import (
    check_checkout,
    check_flashinfer_match,
    check_flashinfer_pairing,
    check_flashinfer_wheel,
    check_prebuilt,
)

EXIT_READY = 0
EXIT_NOT_READY = 1


# --------------------------------------------------------------------------- gather + verdict


def gather(flashinfer_repo: str | None, gpu_index: int,
           probe_timer: Callable[[int], dict[str, Any]] = envmod.probe_timer) -> dict[str, Any]:
    """Run every probe (NVML first, before this process creates a CUDA context)."""
    gpu = gpu_probes.gpu_info(gpu_index)
    probes: dict[str, Any] = {
        "gpu": gpu,
        "wheel": versions.flashinfer_wheel(),
        "companions": versions.flashinfer_companions(),
        "vllm": versions.vllm_flashinfer(),
        "checkout": versions.flashinfer_checkout(flashinfer_repo),
        "nvcc": gpu_probes.nvcc_info(),
        "tileiras": gpu_probes.tileiras_info(),
        "env": {k: os.environ[k] for k in envmod.RELEVANT_ENV if k in os.environ},
        "torch_cuda": None,
        "stack": None,
        "timer_probe": None,
    }
    if gpu.get("error"):
        return probes  # CPU-only: nothing below can work, and torch import costs seconds
    tc = gpu_probes.torch_cuda(gpu_index)
    probes["torch_cuda"] = tc
    gpu["sm_count"] = tc.get("sm_count")
    probes["stack"] = gpu_probes.cuda_stack()
    if tc.get("available") and not tc.get("error") and probes["wheel"].get("version"):
        probes["timer_probe"] = probe_timer(gpu_index)
    return probes


def run_checks(p: dict[str, Any], backends: Sequence[str] = ()) -> list[Check]:
    """All verdicts for gathered probes; `backends` (the run's --backends) makes the tools those
    backends need blocking. Without a GPU only the machine-independent checks follow the gpu
    failure (the rest would repeat it)."""
    checks = [check_gpu(p["gpu"])]
    gpu_ok = checks[0].ok
    if gpu_ok:
        checks.append(check_idle(p["gpu"]))
        checks.append(check_torch_cuda(p["torch_cuda"] or {}, p["gpu"]))
    vllm = p.get("vllm") or {}
    checks.append(check_flashinfer_wheel(p["wheel"], vllm))
    checks.append(check_flashinfer_pairing(p["wheel"], vllm, p["checkout"]))
    checks.append(check_checkout(p["checkout"], p["wheel"], vllm))
    checks.append(check_flashinfer_match(p["wheel"], p["checkout"]))
    if gpu_ok:
        checks.append(check_cupti(p["timer_probe"], p["stack"] or {}, p["gpu"]))
    runtime = (p.get("stack") or {}).get("cuda_runtime")
    checks.append(check_nvcc(p["nvcc"], runtime))
    checks.append(check_tileiras(p.get("tileiras") or {}, backends,
                                 (p["gpu"] or {}).get("compute_capability") if gpu_ok else None))
    checks.append(check_no_download(p["env"]))
    checks.append(check_prebuilt(p.get("companions") or {}, p["wheel"],
                                 (p["gpu"] or {}).get("compute_capability") if gpu_ok else None,
                                 runtime, p["env"], backends))
    if gpu_ok:
        checks.append(check_arch_list(p["env"], p["gpu"]))
    return checks


def ready(checks: list[Check]) -> bool:
    """Trustworthy numbers are possible only when no check failed (warnings are allowed)."""
    return all(c.ok is not False for c in checks)


def verdict_line(checks: list[Check]) -> str:
    failed = [c for c in checks if c.ok is False]
    warned = [c for c in checks if c.ok is None]
    gpu = next((c for c in checks if c.name == "gpu"), None)
    if gpu is not None and gpu.ok is False:
        if not gpu.detail.startswith("no NVIDIA GPU"):
            return f"NOT READY: {gpu.detail}; fix: {gpu.fix}"
        return (f"NOT READY: {gpu.detail}. This machine can preview shapes (--print_only) but "
                f"cannot time kernels.")
    if failed:
        return (f"NOT READY: {len(failed)} check(s) failed ({', '.join(c.name for c in failed)});"
                f" fix them and run the doctor again.")
    tail = f" ({len(warned)} warning(s): {', '.join(c.name for c in warned)})" if warned else ""
    return f"READY: this set-up can produce trustworthy kernel times{tail}."


_MARK = {True: "ok  ", False: "FAIL", None: "warn"}


def format_checks(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"[{_MARK[c.ok]}] {c.name}: {c.detail}")
        if c.fix and c.ok is not True:
            lines.append(f"       fix: {c.fix}")
    lines.append(verdict_line(checks))
    return "\n".join(lines)


def to_json(checks: list[Check], probes: dict[str, Any], gpu_index: int) -> str:
    return json.dumps({"ready": ready(checks), "gpu_index": gpu_index,
                       "verdict": verdict_line(checks),
                       "checks": [asdict(c) for c in checks], "probes": probes}, indent=1,
                      default=str)


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="check_env.py",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Check that this machine can produce trustworthy kernel times: an idle NVIDIA "
                    "GPU, torch with CUDA, the FlashInfer wheel matching the checkout, a working "
                    "CUPTI timer (probed for real), nvcc for JIT, no-download mode, and the "
                    "tools optional backends need (tileiras for cutile).",
        epilog="examples:\n"
               "  python scripts/check_env.py --flashinfer_repo ~/flashinfer\n"
               "  python scripts/check_env.py --flashinfer_repo ~/flashinfer --gpu 1 --json\n"
               "  python scripts/check_env.py --flashinfer_repo ~/flashinfer --backends cutile\n"
               "exit status: 0 ready, 1 not ready (a check failed, or no GPU), 2 bad arguments.",
    )
    p.add_argument("--flashinfer_repo", metavar="PATH", default=None, type=path_arg("--flashinfer_repo"),
                   help="FlashInfer source checkout whose benchmarks/flashinfer_benchmark.py the "
                        "runner drives, e.g. --flashinfer_repo ~/flashinfer")
    p.add_argument("--gpu", metavar="INDEX", type=int, default=0,
                   help="CUDA index of the GPU to check (as CUDA_VISIBLE_DEVICES numbers them), "
                        "e.g. --gpu 1; default 0")
    p.add_argument("--backends", nargs="+", metavar="BACKEND", default=(),
                   help="the backends the run will time (as the runner's --backends), e.g. "
                        "--backends cudnn cutile: a tool one of them needs (tileiras for cutile) "
                        "then fails the doctor instead of warning")
    p.add_argument("--json", action="store_true",
                   help="print {ready, verdict, checks: [{name, ok, detail, fix}], probes} as "
                        "JSON instead of text")
    return p


def main(argv: list[str] | None = None) -> int:
    return cli_main(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.gpu < 0:
        raise UsageError("--gpu", args.gpu, "must be a CUDA device index >= 0, e.g. --gpu 0")
    names = BACKEND_NAMES
    if any(b not in names for b in args.backends):  # maybe one the installed FlashInfer adds
        names = backend_names(load_capabilities(args.flashinfer_repo))
    for backend in args.backends:
        if backend not in names:
            raise UsageError("--backends", backend, f"choose from {', '.join(names)}")
    try:
        probes = gather(args.flashinfer_repo, args.gpu)
        checks = run_checks(probes, args.backends)
    except Exception as e:  # every probe is guarded; this is the last line of defence
        print(f"error: the doctor itself failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_NOT_READY
    if args.json:
        print(to_json(checks, probes, args.gpu))
    else:
        print(format_checks(checks))
    return EXIT_READY if ready(checks) else EXIT_NOT_READY


__all__ = ["EXIT_READY", "EXIT_NOT_READY", "Check", "check_gpu", "check_idle", "check_torch_cuda",
           "check_flashinfer_wheel", "check_flashinfer_pairing", "check_checkout", "check_flashinfer_match",
           "check_cupti", "check_nvcc",
           "check_tileiras", "check_no_download", "check_prebuilt", "check_arch_list", "gather", "run_checks",
           "ready", "verdict_line", "format_checks", "to_json", "build_parser", "main"]


if __name__ == "__main__":
    sys.exit(main())
