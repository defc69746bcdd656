"""`benchmark_model.py`: plan a model's per-rank GEMM / fused-MoE shapes, preview them, and (with the
runner) time them. This module owns the planning half; `run/flags.py` adds and checks the run
flags, `run/runner.py` runs the plan."""

from __future__ import annotations

import argparse
import functools
import gc
import math
import os
import sys

from .cases.attention import DEFAULT_SWEEP, AttentionSweep
from .cases.build import build_cases
from .cases.capabilities import Capabilities, PendingProbe, load_capabilities
from .core.case_schema import DTYPES, KV_DTYPES
from .core.errors import EXIT_USAGE, OneLineArgumentParser, UsageError, cli_main
from .core.files import check_writable_folder, is_disk_full, is_inside, path_arg, same_file, write_text_atomic
from .doctor import environment
from .plan import config_source, memory, plan_cache, planner, preview  # noqa: F401  (planner: plan_chosen plans through it)
from .report import report
from .run import flags, launcher, phases, runner, sweep
from .run.interrupts import is_interrupt_exit, stop_signals_exit
from .run.workdir import check_resume_plan, make_workdir
from .vllm_rules.layout import Layout

#: Flags (and any argparse-style prefix of them) that are derived from the config, never passed.
DERIVED_FLAGS = ("--nks", "--moe_")

EPILOG = """examples:
  %(prog)s llama-3.1-8b --print_only                 bundled config, TP=1 (works offline)
  %(prog)s deepseek-v3 --tp 8 --ep 8 --print_only    EP over 8 GPUs (experts/8, full intermediate)
  %(prog)s ./Qwen3-30B-A3B --tp 4 --print_only       a local folder holding config.json
  %(prog)s ./config.json --tp 2 --plan_json plan.json --print_only
  %(prog)s Qwen/Qwen3-8B --revision main --print_only   Hub ID (downloads config.json only)
  %(prog)s --list_models                             list the bundled configs
  %(prog)s deepseek-v3 --assume_cc h200 --print_only
                                                     an H200's compute capability and memory; the
                                                     smallest TP/EP that fits it, per recipe
  %(prog)s llama-3.1-8b qwen3-30b-a3b --tp 1 --flashinfer_repo FI --workdir runs/cmp
                                                     several models: one sub-workdir each + one
                                                     comparison report in runs/cmp/report.md
  %(prog)s qwen3-30b-a3b --tp 1 4 --ep 1 4 --print_only   a TP/EP sweep: (1,1) then (4,4)
  %(prog)s llama-3.1-8b qwen3-8b --flashinfer_repo FI --workdir /shared/cmp --launcher slurm \
      --slurm_partition h200                         one Slurm job per run, then the report
  %(prog)s deepseek-v3 --tp 2 --ep 8 --cross_check vllm   compare the plan with vLLM's own model
                                                     class built on meta (needs vLLM installed)

exit codes: 0 plan complete (and run ok, or the cross-check agrees); 2 bad input, some module could
not be planned, or the cross-check found a difference (one line each) or vLLM refuses the model."""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="benchmark_model.py", allow_abbrev=False, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Derive every per-rank GEMM and fused-MoE shape vLLM runs for MODEL at the given TP/EP "
                    "(from its config only, on meta tensors) and print them; without --print_only, time them.")
    p.add_argument("model", nargs="*", metavar="MODEL",
                   help="bundled name (e.g. llama-3.1-8b; see --list_models), a folder holding config.json, "
                        "a config.json path, or a Hub ID such as Qwen/Qwen3-8B; several MODELs run one "
                        "after another, each into <workdir>/<model>_tp<T>_ep<E>, plus a comparison report")
    p.add_argument("--tp", type=int, nargs="+", action="extend", default=None, metavar="N",
                   help="tensor-parallel size, e.g. --tp 8: heads, intermediate and vocab are split 8 ways; "
                        "several values sweep, e.g. --tp 1 4 8 (default 1)")
    p.add_argument("--ep", type=int, nargs="+", action="extend", default=None, metavar="N",
                   help="expert-parallel size, 1 or a multiple of --tp, e.g. --tp 8 --ep 8: each rank holds "
                        "experts/8 with the full intermediate size (wide EP such as --ep 64 is allowed); "
                        "several values pair with --tp's in order, e.g. --tp 1 4 --ep 1 4 (default 1)")
    p.add_argument("--revision", default=None,
                   help="Hub revision of MODEL's config.json, e.g. --revision main or a commit hash")
    p.add_argument("--trust-remote-code", dest="trust_remote_code", action="store_true",
                   help="allow the model author's Python code for model types transformers lacks "
                        "(off by default; e.g. nemotron-nas needs it)")
    p.add_argument("--allow_defaults", action="store_true",
                   help="plan even when config.json lacks a key the shapes depend on (e.g. num_key_value_heads) "
                        "and transformers would fill it with its class default; the plan notes each one")
    p.add_argument("--print_only", action="store_true",
                   help="only print the plan (no GPU needed), e.g. to review shapes before a run")
    p.add_argument("--plan_json", default=None, metavar="PATH", type=path_arg("--plan_json"),
                   help="also write the plan as JSON to PATH (the runner's input), e.g. --plan_json plan.json; "
                        "an existing file is refused unless --force, and so is a path inside --workdir")
    p.add_argument("--force", action="store_true",
                   help="let --plan_json replace an existing file, e.g. --plan_json plan.json --force "
                        "(never one this command reads, such as MODEL's config.json)")
    p.add_argument("--planner", choices=["vllm", "rules"], default=None,
                   help="who derives the plan, e.g. --planner rules: vllm plans from vLLM's own model class built on "
                        "meta tensors (the CUDA class for the GPU --assume_cc or the visible GPU names), listing "
                        "where the rules differ; rules plans from vllm_rules/ alone. Default: vllm where vLLM is "
                        "importable in this Python, else rules")
    p.add_argument("--cross_check", choices=["vllm"], default=None,
                   help="e.g. --cross_check vllm: also build vLLM's own model class for the config on meta "
                        "tensors at this TP/EP (rank 0, parallel groups faked, no weights, remote code only with "
                        "--trust-remote-code), compare its per-rank linear, fused-MoE and attention layers with "
                        "the plan and print one line per difference; implies --print_only; needs vLLM importable "
                        "(CPU is enough); the plan JSON records the vLLM version compared against")
    p.add_argument("--gpu_mem_gb", type=float, nargs="+", default=None, metavar="GIB",
                   help="GPU memory in GiB (2^30 bytes) for the preview's memory table, e.g. --gpu_mem_gb 141 "
                        "for an H200 or --gpu_mem_gb 80 141 192 for three GPUs: per recipe, one rank's weights, "
                        "the K/V cache budget and the K/V tokens that fit (references/memory.md); default: the "
                        "GPU present (NVML), or 80 141 192 where there is none")
    p.add_argument("--gpu_memory_utilization", type=float, default=memory.VLLM_GPU_MEMORY_UTILIZATION,
                   metavar="FRACTION",
                   help="share of GPU memory vLLM takes for weights, activations and the K/V cache, as vLLM's "
                        f"flag of that name, e.g. --gpu_memory_utilization 0.85 (default "
                        f"{memory.VLLM_GPU_MEMORY_UTILIZATION:g}, vLLM's default)")
    p.add_argument("--list_models", action="store_true", help="list the bundled model names and exit")
    flags.add_run_arguments(p)
    launcher.add_launcher_arguments(p)
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


def check_memory_args(args: argparse.Namespace) -> None:
    """--gpu_mem_gb sizes are positive finite numbers, --gpu_memory_utilization a fraction in (0, 1]."""
    for size in args.gpu_mem_gb or []:
        if not math.isfinite(size) or size <= 0:
            raise UsageError("--gpu_mem_gb", f"{size:g}", "must be a positive number of GiB, e.g. --gpu_mem_gb 141 "
                             "for an H200")
    util = args.gpu_memory_utilization
    if not math.isfinite(util) or not 0 < util <= 1:
        raise UsageError("--gpu_memory_utilization", f"{util:g}", "must be a fraction above 0 and at most 1, "
                         f"e.g. --gpu_memory_utilization {memory.VLLM_GPU_MEMORY_UTILIZATION:g} (vLLM's default)")


def memory_sizes(args: argparse.Namespace) -> tuple[tuple[float, ...], str]:
    """The GPU sizes (GiB) of the memory table and where they come from: --gpu_mem_gb, else the
    GPU --assume_cc names (core/gpu_specs.py), else the GPU present (NVML's total, as results.json
    records it), else the H100/H200/B200 sizes (`preview.DEFAULT_GPU_MEM_GIB`)."""
    if args.gpu_mem_gb:
        return tuple(args.gpu_mem_gb), "--gpu_mem_gb"
    named = flags.assumed_memory_bytes(getattr(args, "assume_cc", None))
    if named:
        return (round(named / 2**30, 1),), f"--assume_cc {args.assume_cc}"
    from .env import gpu

    if gpu.driver_present():
        info = gpu.gpu_info(0, samples=1)
        if info.get("memory_gb"):
            return (round(info["memory_gb"] * 1e9 / 2**30, 1),), f"the GPU present: {info.get('name')}"
    return preview.DEFAULT_GPU_MEM_GIB, "no GPU here and no --gpu_mem_gb: H100, H200 and B200 sizes"


def check_plan_json_path(path: str, *, inputs: dict[str, str] | None = None,
                         workdir: str | None = None, force: bool = False) -> None:
    """Fail before any work if --plan_json cannot be written or would replace a file it must not:
    one of `inputs` (what -> path; refused even with --force), anything inside the run's
    `workdir` (its files are the run's own), or, without `force`, any existing file."""
    if os.path.isdir(path):
        raise UsageError("--plan_json", path, "is a directory; give a file path such as plan.json")
    for what, source in (inputs or {}).items():
        if same_file(path, source):
            raise UsageError("--plan_json", path, f"is {what}, which this command reads; choose another "
                             "path, e.g. --plan_json plan.json (--force never replaces an input)")
    if workdir and is_inside(path, workdir):
        raise UsageError("--plan_json", path, f"is inside --workdir={workdir}, which holds only the "
                         "run's own files (results.json records the plan); write it elsewhere, "
                         "e.g. --plan_json plan.json")
    if os.path.lexists(path) and not force:
        raise UsageError("--plan_json", path, "already exists; pass --force to replace it, or choose "
                         "another path")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError("--plan_json", path, f"folder {parent} does not exist; create it first")
    unwritable = check_writable_folder(parent)
    if unwritable:
        raise UsageError("--plan_json", path, f"folder {parent} is not writable ({unwritable}); "
                         "choose a writable path, e.g. --plan_json plan.json")


def plan_inputs(args: argparse.Namespace) -> dict[str, str]:
    """The files this command reads that --plan_json must never replace: each MODEL's config.json
    (where it is a local or bundled file) and the --autotune_cache."""
    inputs = {}
    for model in args.model:
        for path in _model_config_paths(model):
            inputs[f"the config.json of MODEL={model}"] = path
    if getattr(args, "autotune_cache", None):
        inputs["the --autotune_cache"] = args.autotune_cache
    return inputs


def _model_config_paths(model: str) -> list[str]:
    """Where MODEL's config.json is read from, as config_source.resolve looks for it locally."""
    expanded = os.path.expanduser(model)
    if os.path.isdir(expanded):
        return [os.path.join(expanded, "config.json")]
    bundled = os.path.join(config_source.MODELS_DIR, f"{model}.json")
    return [p for p in (expanded, bundled) if os.path.isfile(p)]


def write_plan_json(plan, path: str) -> None:
    """Write atomically (temp file + rename in the same folder): only PATH itself is replaced. A
    failed write (a full disk, a read-only folder) is one UsageError line; an old PATH stays."""
    try:
        write_text_atomic(path, plan.to_json() + "\n")
    except OSError as e:
        if is_disk_full(e):
            raise UsageError("--plan_json", path, f"disk full ({e.strerror}); free space and run the "
                             "same command again") from None
        raise UsageError("--plan_json", path, f"cannot be written ({e.strerror}); choose a writable "
                         "path, e.g. --plan_json plan.json") from None


def main(argv: list[str] | None = None) -> int:
    """CLI entry. Called as a program (argv None) for a preview, it ends the process itself."""
    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    rc = cli_main(lambda: _main(argv))
    if as_program and any(a in ("--print_only", "--print-only", "--list_models", "--list-models")
                          or a.startswith(("--cross_check", "--cross-check")) for a in argv):
        # Interpreter teardown of torch + transformers costs ~0.8 s (a quarter of the 3 s preview
        # budget) and a preview holds nothing to clean up: the plan JSON is already renamed into
        # place. Flush and leave.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


def parallel_settings(tps: list[int] | None, eps: list[int] | None) -> list[tuple[int, int]]:
    """(TP, EP) pairs of a sweep: the lists pair up in order, a single value pairs with every value
    of the other (--tp 1 4 --ep 1 -> (1,1), (4,1))."""
    tps, eps = tps or [1], eps or [1]
    if len(tps) > 1 and len(eps) > 1 and len(tps) != len(eps):
        raise UsageError("--ep", " ".join(map(str, eps)),
                         f"give one value or as many as --tp ({len(tps)}); they pair up in order")
    n = max(len(tps), len(eps))
    return [(tps[i] if len(tps) > 1 else tps[0], eps[i] if len(eps) > 1 else eps[0]) for i in range(n)]


def run_label(model: str, tp: int, ep: int) -> str:
    """Sub-workdir name of one (MODEL, TP, EP) run when no other MODEL of the sweep shares its
    name (run/sweep.py: those get a digest of what they read): the model's last path part, made
    filename-safe."""
    return sweep.run_name(sweep.base_name(model), tp, ep)


def check_ep_within_experts(plan) -> None:
    """EP at most the model's routed experts: vLLM gives each EP rank E // EP of them (one more to
    the first E % EP ranks; vllm/model_executor/layers/fused_moe/expert_map_manager.py
    determine_expert_map), so an EP above E leaves ranks with no expert, which is no deployment."""
    for entry in plan.moe:
        if plan.ep > entry.global_experts:
            raise UsageError("--ep", plan.ep, f"exceeds the {entry.global_experts} routed experts of "
                             f"{plan.model.name} ({entry.name}), which would leave EP ranks with no expert; "
                             f"give an EP of at most {entry.global_experts}")


def _main(argv: list[str]) -> int:
    reject_derived_flags(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_models:
        for name in config_source.list_bundled():
            print(name)
        return 0
    if not args.model:
        raise UsageError("MODEL", "(missing)", "give a bundled name (--list_models), a config path or a Hub ID")
    if args.cross_check:
        from .crosscheck.vllm_build import require_vllm

        require_vllm()  # before any planning: one line saying how to install it
        args.print_only = True
    if args.planner:
        from .crosscheck.planner_choice import check_planner

        check_planner(args.planner)  # --planner vllm without vLLM: one line before any planning
    check_memory_args(args)
    launcher.check_launcher_args(args)
    # Every setting is validated (its Layout built) before any work starts, and so is every run
    # being distinct: each gets a sub-workdir of its own.
    settings = parallel_settings(args.tp, args.ep)
    sweep.check_distinct_settings(settings, args.tp, args.ep)
    sweep.check_revision(args.model, args.revision)
    names = sweep.model_names(args.model, args.revision)
    runs = [(model, Layout.from_flags(tp, ep)) for model in args.model for tp, ep in settings]
    if args.plan_json:
        if len(runs) > 1:
            raise UsageError("--plan_json", args.plan_json, "writes one plan; give one MODEL and one "
                             "--tp/--ep setting, or leave it out of a sweep")
        check_plan_json_path(args.plan_json, inputs=plan_inputs(args),
                             workdir=None if args.print_only else args.workdir, force=args.force)
    if not args.print_only and len(runs) > 1 and not getattr(args, "workdir", None):
        raise UsageError("--workdir", None, "a sweep of several runs needs --workdir: each run writes "
                         "<workdir>/<model>_tp<T>_ep<E>/ and the comparison report goes to <workdir>/")
    if not args.print_only:
        # Bad run flags fail now, in a second, not after the planning and preview of every run.
        subs = ([args.workdir] if len(runs) == 1
                else [os.path.join(args.workdir, sweep.run_name(names[model], lay.tp, lay.ep)) for model, lay in runs])
        flags.validate_args(args, subs, resume_may_start_fresh=len(runs) > 1,
                            gpu_here=args.launcher == "here")
    if args.launcher == "slurm":
        return _run_on_slurm(args, runs, names)
    if len(runs) == 1:
        model, layout = runs[0]
        return _plan_and_run(args, model, layout, getattr(args, "workdir", None))
    rc, done = 0, []
    for i, (model, layout) in enumerate(runs, 1):
        label = sweep.run_name(names[model], layout.tp, layout.ep)
        print(f"\n##### run {i}/{len(runs)}: {model} TP={layout.tp} EP={layout.ep}"
              + ("" if args.print_only else f" -> {os.path.join(args.workdir, label)}"), flush=True)
        sub = os.path.join(args.workdir, label) if not args.print_only else None
        if sub:
            make_workdir(args.workdir)  # the sweep's folder: the tool's, marked as such
        # One bad model must not cost the others their runs: its error is printed, the sweep goes on.
        code = cli_main(functools.partial(_plan_and_run, args, model, layout, sub))
        if is_interrupt_exit(code):  # Ctrl-C, SIGTERM or SIGHUP stops the sweep, not just this run
            return code
        rc = max(rc, code)
        if sub and os.path.isfile(os.path.join(sub, "results.json")):
            done.append(sub)
    if len(done) > 1 and not getattr(args, "dry_run", False):
        _write_comparison(done, args.workdir)
    return rc


def _write_comparison(done: list[str], workdir: str) -> None:
    try:
        print(f"comparison report: {report.write_report(done, workdir)}")
    except Exception as e:  # the report is derived; the results are already written
        print(f"warning: comparison report failed: {e}", file=sys.stderr)


def run_job(args: argparse.Namespace, model: str, tp: int, ep: int, workdir: str | None) -> int:
    """One run of a sweep as a Slurm job executes it on its node: plan, run, exit code (a bad
    input is its one `error:` line in the job's log)."""
    return cli_main(lambda: _plan_and_run(args, model, Layout.from_flags(tp, ep), workdir))


def _run_on_slurm(args: argparse.Namespace, runs: list[tuple[str, Layout]], names: dict[str, str]) -> int:
    launcher.check_slurm_here()  # no Slurm here (or no submitit) is one line before the folder is made
    make_workdir(args.workdir)
    executor = launcher.make_executor(args, os.path.join(args.workdir, launcher.SLURM_LOGS))
    on_node = launcher.job_args(args)
    jobs = []
    for model, layout in runs:
        label = sweep.run_name(names[model], layout.tp, layout.ep)
        sub = args.workdir if len(runs) == 1 else os.path.join(args.workdir, label)
        jobs.append(launcher.SweepRun(label, sub, run_job, (on_node, model, layout.tp, layout.ep, sub)))
    rc, done = launcher.run_jobs(executor, jobs)
    if len(done) > 1:
        _write_comparison(done, args.workdir)
    return rc


def target_gpu_summary(plan, cc: tuple[int, int], ms, caps: Capabilities,
                       attention: AttentionSweep = DEFAULT_SWEEP, search_moe_tiles: bool = False) -> str:
    """For the preview: per recipe (and per KV dtype for the attention cells), how many cells (case
    rows) the GPU of capability `cc` can run and how many are unsupported there, and the recipes
    that get no number at all."""
    cases = build_cases(plan, list(ms), DTYPES, None, cc, caps, attention, search_moe_tiles)
    lines = [f"# on sm_{cc[0]}{cc[1]} (--assume_cc): cells per recipe, backend support from "
             f"{caps.origin}"]
    groups = [(dtype, [c for c in cases if c.dtype == dtype and c.kind != "attention"]) for dtype in DTYPES]
    groups += [(f"attention, KV {dtype}", [c for c in cases if c.dtype == dtype and c.kind == "attention"])
               for dtype in KV_DTYPES]
    for label, mine in groups:
        if not mine:
            continue
        skipped = [c for c in mine if c.skip_reason]
        line = f"#   {label}: {len(mine) - len(skipped)} of {len(mine)} cells run, {len(skipped)} unsupported"
        if len(skipped) == len(mine):
            line += f": no number on this GPU (e.g. {skipped[0].skip_reason})"
        lines.append(line)
    return "\n".join(lines)


def _plan_and_run(args: argparse.Namespace, model: str, layout: Layout, workdir: str | None) -> int:
    # torch/transformers imports and the meta build allocate ~10^6 objects and no garbage cycles
    # worth collecting: with the cyclic GC off the preview is about 30% faster (3 s budget).
    clock = phases.next_clock()
    # FlashInfer's capability answer (a child process, seconds, when this build's is not kept yet)
    # is asked for now and read after planning, which it overlaps.
    probe = None if args.print_only else runner.start_kept_capabilities(args.flashinfer_repo)
    try:
        return _plan_and_run_with(args, model, layout, workdir, clock, probe)
    finally:
        if probe is not None:
            probe.close()


def _plan_and_run_with(args: argparse.Namespace, model: str, layout: Layout, workdir: str | None,
                       clock: phases.PhaseClock, probe: PendingProbe | None) -> int:
    gc.disable()
    try:
        # Planning writes nothing: a stop signal ends it at once with one line (stop_signals_exit).
        with stop_signals_exit(f"while planning {model}; nothing was written"), clock.phase("plan"):
            plan = _planned(args, model, layout)
    finally:
        gc.enable()
    if args.cross_check:
        plan = _cross_checked(plan, model, args)
    check_ep_within_experts(plan)
    if getattr(args, "resume", False) and workdir and not args.print_only:
        check_resume_plan(workdir, plan.to_dict())  # before the preview: the run would be refused
    sys.stdout.write(preview.format_plan(plan))
    sizes, where = memory_sizes(args)
    print("\n".join(preview.memory_lines(plan, sizes, args.gpu_memory_utilization, where)))
    if (args.print_only or getattr(args, "dry_run", False)) and sizes != preview.DEFAULT_GPU_MEM_GIB:
        print("\n".join(fit_lines(args, model, plan, sizes, where)))
    if args.print_only and getattr(args, "assume_cc", None):
        print(target_gpu_summary(plan, flags.parse_cc(args.assume_cc), args.ms,
                                 load_capabilities(args.flashinfer_repo), flags.sweep_from_args(args),
                                 getattr(args, "search_moe_tiles", False)))
    sys.stdout.flush()
    if args.plan_json:
        write_plan_json(plan, args.plan_json)
        print(f"# plan written to {args.plan_json}")
    # A cross-check that vLLM could not build here says nothing of the plan: no failure for it.
    incomplete = EXIT_USAGE if not plan.complete or (
        plan.cross_check and plan.cross_check.status not in ("match", "not checked")) else 0
    if args.print_only:
        return incomplete
    run_args = argparse.Namespace(**vars(args))
    run_args.model, run_args.ep, run_args.workdir = model, layout.ep, workdir
    def kept(repo: str | None) -> Capabilities:
        return probe.result() if probe is not None and repo == args.flashinfer_repo else runner.kept_capabilities(repo)

    return runner.run_from_args(run_args, plan, environment=environment.collect,
                                report=report.write_report, capabilities=kept,
                                resume_may_start_fresh=workdir != args.workdir) or incomplete


def fit_lines(args: argparse.Namespace, model: str, plan, sizes: tuple[float, ...], where: str) -> list[str]:
    """Per GPU size the memory of one GPU is known for (not the default sizes), the fewest GPUs and
    smallest TP (EP for an MoE model) whose rank holds each recipe (plan/smallest_fit.py); the
    other layouts are planned by the rules planner, kept between runs."""
    from .plan import smallest_fit

    def plan_at(layout: Layout):
        return planner.plan_layout(model, layout, revision=args.revision, trust_remote_code=args.trust_remote_code,
                                   allow_defaults=args.allow_defaults, plan_dir=plan_cache.default_plan_dir())

    planned: dict = {}  # plans of the layouts tried, shared by the sizes
    fits = [smallest_fit.smallest_fits(plan, plan_at, size, utilization=args.gpu_memory_utilization, planned=planned)
            for size in sizes]
    return [smallest_fit.fit_line(f, where) for f in fits]


def _planned(args: argparse.Namespace, model: str, layout: Layout):
    """The plan by the planner --planner chooses (vLLM's class where vLLM is importable, else the
    rules; resolved here, where the plan is made, so a Slurm job's node decides for itself)."""
    from .crosscheck.planner_choice import check_planner, plan_chosen

    choice = check_planner(getattr(args, "planner", None))
    gpu = _target_gpu(args) if choice == "vllm" else None
    return plan_chosen(model, layout, choice, revision=args.revision, trust_remote_code=args.trust_remote_code,
                       allow_defaults=args.allow_defaults, plan_dir=plan_cache.default_plan_dir(), gpu=gpu,
                       chosen_by_flag=getattr(args, "planner", None) is not None)


def _target_gpu(args: argparse.Namespace):
    """The GPU whose CUDA class vLLM's platform-split families build: --assume_cc, else the visible one."""
    from .crosscheck.vllm_platform import target_gpu

    assume = getattr(args, "assume_cc", None)
    return target_gpu(flags.parse_cc(assume) if assume else None)


def _cross_checked(plan, model: str, args: argparse.Namespace):
    """The plan with what vLLM's own model class for the same config and layout says of it."""
    from dataclasses import replace

    from .core.plan_schema import CrossCheck
    from .crosscheck.check import cross_check

    src = config_source.resolve(model, args.revision)
    gpu = _target_gpu(args)
    result = cross_check(plan, src.raw, trust_remote_code=args.trust_remote_code, code_dir=src.directory,
                         gpu=gpu)
    status, differences = result.status, result.differences
    if status in ("match", "mismatch"):  # vLLM builds the model: ask which kernels it selects
        from .crosscheck.vllm_dispatch import check_plan_dispatch

        dispatch = check_plan_dispatch(src.raw, plan.tp, plan.ep, plan.model.fp8_activation_scales,
                                       gpu.cc if gpu is not None else None)
        status = "mismatch" if dispatch.differs else status
        differences = tuple(differences) + dispatch.lines
    return replace(plan, cross_check=CrossCheck(result.against, status, differences,
                                                result.refused or result.not_checked))


__all__ = ["build_parser", "check_memory_args", "fit_lines", "memory_sizes",
           "main", "parallel_settings", "reject_derived_flags", "run_job", "run_label",
           "write_plan_json", "DERIVED_FLAGS"]
