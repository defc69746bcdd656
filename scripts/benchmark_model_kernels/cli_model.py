"""`benchmark_model.py`: plan a model's per-rank GEMM / fused-MoE shapes, preview them, and (with the
runner) time them. This module owns the planning half; `runner.py` adds and handles the run flags."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile

from .errors import EXIT_USAGE, UsageError

try:  # the runner half is optional: without it only --print_only works
    from . import runner
except ImportError:
    runner = None

#: Flags (and any argparse-style prefix of them) that are derived from the config, never passed.
DERIVED_FLAGS = ("--nks", "--moe_")

EPILOG = """examples:
  %(prog)s llama-3.1-8b --print_only                 bundled config, TP=1 (works offline)
  %(prog)s deepseek-v3 --tp 8 --ep 8 --print_only    EP over 8 GPUs (experts/8, full intermediate)
  %(prog)s ./Qwen3-30B-A3B --tp 4 --print_only       a local folder holding config.json
  %(prog)s ./config.json --tp 2 --plan_json plan.json --print_only
  %(prog)s Qwen/Qwen3-8B --revision main --print_only   Hub ID (downloads config.json only)
  %(prog)s --list_models                             list the bundled configs

exit codes: 0 plan complete (and run ok); 2 bad input, or some module could not be planned."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmark_model.py", allow_abbrev=False, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Derive every per-rank GEMM and fused-MoE shape vLLM runs for MODEL at the given TP/EP "
                    "(from its config only, on meta tensors) and print them; without --print_only, time them.")
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="bundled name (e.g. llama-3.1-8b; see --list_models), a folder holding config.json, "
                        "a config.json path, or a Hub ID such as Qwen/Qwen3-8B")
    p.add_argument("--tp", type=int, default=1,
                   help="tensor-parallel size, e.g. --tp 8: heads, intermediate and vocab are split 8 ways")
    p.add_argument("--ep", type=int, default=1,
                   help="expert-parallel size, 1 or a multiple of --tp, e.g. --tp 8 --ep 8: each rank holds "
                        "experts/8 with the full intermediate size (wide EP such as --ep 64 is allowed)")
    p.add_argument("--revision", default=None,
                   help="Hub revision of MODEL's config.json, e.g. --revision main or a commit hash")
    p.add_argument("--trust-remote-code", dest="trust_remote_code", action="store_true",
                   help="allow the model author's Python code for model types transformers lacks "
                        "(off by default; e.g. nemotron-nas needs it)")
    p.add_argument("--print_only", action="store_true",
                   help="only print the plan (no GPU needed), e.g. to review shapes before a run")
    p.add_argument("--plan_json", default=None, metavar="PATH",
                   help="also write the plan as JSON to PATH (the runner's input), e.g. --plan_json plan.json")
    p.add_argument("--list_models", action="store_true", help="list the bundled model names and exit")
    if runner is not None and hasattr(runner, "add_run_arguments"):
        runner.add_run_arguments(p)
    return p


def reject_derived_flags(argv: list[str]) -> None:
    """--nks / --moe_* (or any prefix argparse might expand) are derived from the config."""
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        flag = arg.split("=", 1)[0]
        if flag.startswith("--moe") or flag.startswith("--nks") or flag == "--nk":
            raise UsageError(flag, arg.split("=", 1)[1] if "=" in arg else "(given)",
                             "GEMM/MoE shapes are derived from the model config here; to time explicit shapes "
                             "use scripts/benchmark_via_builtin.py --nks N,K,name (or its --moe_* flags)")


def check_plan_json_path(path: str) -> None:
    """Fail before any work if --plan_json cannot be written."""
    if os.path.isdir(path):
        raise UsageError("--plan_json", path, "is a directory; give a file path such as plan.json")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError("--plan_json", path, f"folder {parent} does not exist; create it first")


def write_plan_json(plan, path: str) -> None:
    """Write atomically (temp file + rename in the same folder): only PATH itself is replaced."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".json.tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(plan.to_json() + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str] | None = None) -> int:
    """CLI entry. Called as a program (argv None) for a preview, it ends the process itself."""
    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        rc = _main(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        rc = EXIT_USAGE
    if as_program and ("--print_only" in argv or "--list_models" in argv):
        # Interpreter teardown of torch + transformers costs ~0.8 s (a quarter of the 3 s preview
        # budget) and a preview holds nothing to clean up: the plan JSON is already renamed into
        # place. Flush and leave.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


def _main(argv: list[str]) -> int:
    reject_derived_flags(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    from . import config_source, planner, preview

    if args.list_models:
        for name in config_source.list_bundled():
            print(name)
        return 0
    if not args.model:
        raise UsageError("MODEL", "(missing)", "give a bundled name (--list_models), a config path or a Hub ID")
    planner.check_parallel(args.tp, args.ep)
    if args.plan_json:
        check_plan_json_path(args.plan_json)
    if not args.print_only and (runner is None or not hasattr(runner, "run_from_args")):
        raise UsageError("--print_only", "(not given)",
                         "the runner is not available in this checkout; add --print_only to preview the plan")
    # torch/transformers imports and the meta build allocate ~10^6 objects and no garbage cycles
    # worth collecting: with the cyclic GC off the preview is about 30% faster (3 s budget).
    gc.disable()
    try:
        plan = planner.plan_model(args.model, args.tp, args.ep, revision=args.revision,
                                  trust_remote_code=args.trust_remote_code)
    finally:
        gc.enable()
    sys.stdout.write(preview.format_plan(plan))
    sys.stdout.flush()
    if args.plan_json:
        write_plan_json(plan, args.plan_json)
        print(f"# plan written to {args.plan_json}")
    incomplete = EXIT_USAGE if not plan.complete else 0
    if args.print_only:
        return incomplete
    return runner.run_from_args(args, plan) or incomplete


__all__ = ["build_parser", "main", "reject_derived_flags", "write_plan_json", "DERIVED_FLAGS"]
