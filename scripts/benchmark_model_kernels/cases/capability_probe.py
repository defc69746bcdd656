"""The child process behind `capabilities.load_capabilities`: imports the installed FlashInfer (and
the checkout's driver tables, given --benchmarks_dir) and prints its answers as one JSON line.

    python -m benchmark_model_kernels.cases.capability_probe [--benchmarks_dir DIR]

Routines asked about: every driver routine of the hand table (`backends.BACKENDS`) and the attention
routines (`attention.ATTENTION_ROUTINES`, answered by the driver's table only). Backend names
asked about: the driver's `--backends` choices (read from the parser the driver builds) and the
hand table's names. On failure it prints {"error": "<what>"}; it never touches a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .attention import ATTENTION_ROUTINES
from .backends import BACKENDS
from .capabilities import PROBED_CCS, Support

_DRIVER_UTILS = "benchmarks/routines/flashinfer_benchmark_utils.py"


def driver_backend_choices(flashinfer_benchmark: Any, routine: str) -> tuple[str, ...]:
    """The `--backends` choices of the parser the driver builds for `routine` (its own argparse,
    run on a harmless line and recorded, not a copy of its list)."""
    used: list[argparse.ArgumentParser] = []
    original = argparse.ArgumentParser.parse_args

    def recording(self: argparse.ArgumentParser, *a: Any, **k: Any) -> Any:
        used.append(self)
        return original(self, *a, **k)

    argparse.ArgumentParser.parse_args = recording  # type: ignore[method-assign]
    try:
        flashinfer_benchmark.parse_args(["--routine", routine, "--m", "8", "--n", "128", "--k", "128"])
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    for parser in used:
        for action in parser._actions:  # noqa: SLF001  (argparse keeps the choices only here)
            if "--backends" in action.option_strings and action.choices:
                return tuple(str(c) for c in action.choices)
    return ()


def library_function(flashinfer: Any, routine: str) -> Any:
    """The `@backend_requirement` API of a GEMM routine, or None when it has no backend checks."""
    fn = getattr(flashinfer, routine, None)
    if fn is None:
        fn = getattr(getattr(flashinfer, "gemm", None), routine, None)
    if fn is None or not hasattr(fn, "is_backend_supported") or not hasattr(fn, "has_backend"):
        return None
    try:
        return fn if fn.has_backend_choices() else None
    except Exception:  # noqa: BLE001  (an API without choices raises on the question)
        return None


def probe(benchmarks_dir: str) -> dict[str, Any]:
    import flashinfer

    version = str(getattr(flashinfer, "__version__", "") or "")
    routines = tuple(dict.fromkeys([*(s.routine for s in BACKENDS if s.driver), *ATTENTION_ROUTINES]))
    names = list(dict.fromkeys(s.backend for s in BACKENDS if s.driver))
    table: dict[str, Any] = {}
    origin = f"flashinfer {version}: the library's support checks"
    checkout = ""
    if benchmarks_dir:
        sys.path.insert(0, benchmarks_dir)
        import flashinfer_benchmark
        from routines import flashinfer_benchmark_utils as fbu

        table = dict(getattr(fbu, "routine_cc_to_supported_backends", {}) or {})
        gemm = [s.routine for s in BACKENDS if s.driver and s.kind == "gemm"]
        choices = driver_backend_choices(flashinfer_benchmark, gemm[0]) if gemm else ()
        names = list(dict.fromkeys([*choices, *names]))
        version_txt = os.path.join(os.path.dirname(benchmarks_dir), "version.txt")
        checkout = open(version_txt).read().strip() if os.path.isfile(version_txt) else "unknown"
        origin += f" and the driver's table ({_DRIVER_UTILS} of checkout {checkout})"
    supports: list[Support] = []
    for routine in routines:
        fn = library_function(flashinfer, routine)
        if fn is not None:
            for backend in names:
                if backend == "auto" or not fn.has_backend(backend):
                    continue
                ccs = tuple(cc for cc in PROBED_CCS
                            if fn.is_backend_supported(backend, cc[0] * 10 + cc[1]))
                supports.append(Support(routine, backend, ccs, PROBED_CCS,
                                        f"flashinfer {version}: {routine}.is_backend_supported"))
        by_cc = table.get(routine)
        if isinstance(by_cc, dict):
            probed = tuple(sorted((int(k.split(".")[0]), int(k.split(".")[1])) for k in by_cc))
            listed = dict.fromkeys(b for v in by_cc.values() for b in v)
            for backend in listed:
                ccs = tuple(cc for cc in probed if backend in by_cc[f"{cc[0]}.{cc[1]}"])
                supports.append(Support(routine, backend, ccs, probed,
                                        f"driver table routine_cc_to_supported_backends"
                                        f"[{routine!r}] ({_DRIVER_UTILS}, checkout {checkout})",
                                        "driver"))
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        jit_cache = dist_version("flashinfer-jit-cache")
    except PackageNotFoundError:
        jit_cache = ""
    from .capabilities import Capabilities

    answered = tuple(dict.fromkeys(s.routine for s in supports))
    return Capabilities(origin=origin, supports=tuple(supports), flashinfer=version,
                        jit_cache=jit_cache, routines=answered).to_dict()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Internal: print the installed FlashInfer's backend "
                                            "support as one JSON line (see capabilities.py).")
    p.add_argument("--benchmarks_dir", default="",
                   help="a FlashInfer checkout's benchmarks/ folder, e.g. ~/flashinfer/benchmarks")
    a = p.parse_args(argv)
    try:
        answer = probe(os.path.abspath(a.benchmarks_dir) if a.benchmarks_dir else "")
    except Exception as e:  # noqa: BLE001  (any failure means: the hand table answers)
        answer = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.flush()
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
