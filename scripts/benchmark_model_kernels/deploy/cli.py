"""`deploy.py` / `benchmark-deploy`: which layout and recipe serves MODEL best on G GPUs at a load.

Plans every layout vLLM can serve MODEL with on the GPUs (layouts.py), prints them with their
per-rank shapes, fit and cases (summary.py), and, without --dry_run, times each layout's per-rank
cases through the runner into <workdir>/<layout>/ (the result cache makes a repeat cheap), then
assembles one decode step per layout, recipe, B and context (view.py) into deployment.json
(output.py) and report.md with its Pareto figure (report.py).

exit codes: 0 done (or dry run); 1 some timed row failed (everything is still written); 2 bad
input (one `error:` line); 128 + the signal when stopped (the layouts timed so far keep their rows).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from dataclasses import replace
from typing import Any, Sequence

from ..cases.capabilities import HAND, Capabilities
from ..core.case_schema import Case
from ..core.errors import OneLineArgumentParser, UsageError, cli_main
from ..core.files import path_arg
from ..core.results_schema import RESULTS_JSON, load_results
from ..plan import memory
from ..run import flags, runner
from ..run.interrupts import is_interrupt_exit, stop_signals_exit
from ..run.workdir import check_workdir, make_workdir
from .collectives import ALL2ALL_BACKENDS
from .comm_times import CommModel
from .layouts import Cluster, LayoutPlan, MemorySettings, PlanOptions, layout_plans, parse_gpus
from .output import DEPLOYMENT_JSON, Deployment, write_deployment
from .report import REPORT_MD, write_report
from .routing import Routing
from .summary import summary_lines
from .view import BASES, Communication, LayoutRun, Target, Workload, assemble, recipe_key, step_collectives

RECIPES = ("bf16", "fp8", "nvfp4")

EPILOG = """examples:
  %(prog)s qwen3-30b-a3b --gpus 8xH200 --batch 8 64 256 1024 --context 4096 --dry_run
                                             the layouts, their per-rank shapes, fit and cases (CPU)
  %(prog)s qwen3-30b-a3b --gpus 8xH200 --batch 8 64 256 1024 --context 4096 --recipes bf16 fp8 \\
      --routing zipf:1.2 --flashinfer_repo ~/flashinfer --workdir runs/qwen3-8xh200
                                             time every layout here, then deployment.json + report.md
  %(prog)s llama-3.1-70b --gpus 8xH200 --batch 64 --context 8192 --nccl_tests ar.txt ag.txt ...
                                             communication from your nccl-tests output

exit codes: 0 done; 1 some timed row failed (everything is still written); 2 bad input (one line)."""


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="deploy.py", allow_abbrev=False, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Which vLLM layout (TP, DP, EP) and recipe serves MODEL best on G GPUs at a load: one decode "
                    "step per layout, recipe, batch and context, from the per-rank kernels timed here plus the "
                    "collectives of the layout, in tokens/s per GPU and per sequence.")
    p.add_argument("model", metavar="MODEL", help="bundled name (see benchmark_model.py --list_models), a folder "
                   "holding config.json, a config.json path, or a Hub ID, e.g. qwen3-30b-a3b")
    p.add_argument("--gpus", required=True, metavar="COUNTxKIND", help="GPUs of one NVLink node, e.g. --gpus "
                   "8xH200 (kinds: H100, H200, B200; 1 to 8 of them)")
    p.add_argument("--batch", type=int, nargs="+", required=True, metavar="B",
                   help="global concurrent sequences in one decode step, e.g. --batch 8 64 256 1024")
    p.add_argument("--context", type=int, nargs="+", required=True, metavar="TOKENS",
                   help="tokens of K/V each sequence reads, e.g. --context 4096 (several: --context 4096 32768)")
    p.add_argument("--recipes", nargs="+", choices=RECIPES, default=["bf16", "fp8"], metavar="RECIPE",
                   help="weight recipes, e.g. --recipes bf16 fp8 (default); fp8 is the checkpoint's FP8 scheme, "
                        "per-tensor for a BF16 checkpoint (vLLM's --quantization fp8)")
    p.add_argument("--routing", default="uniform", metavar="uniform|zipf:S|file:PATH",
                   help="how tokens spread over the experts under expert parallelism, e.g. --routing zipf:1.2 "
                        "or --routing file:loads.json (per-expert loads); default uniform")
    p.add_argument("--nccl_tests", nargs="+", default=[], metavar="FILE", type=path_arg("--nccl_tests"),
                   help="nccl-tests output files (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                        "alltoall_perf), e.g. --nccl_tests ar.txt ag.txt rs.txt: used before the bundled table")
    p.add_argument("--no_measure_comm", action="store_true",
                   help="do not time the collectives on this machine's GPUs even where it has 2 or more")
    p.add_argument("--all2all_backend", choices=ALL2ALL_BACKENDS, default=ALL2ALL_BACKENDS[0],
                   help=f"vLLM's --all2all-backend for the MoE dispatch and combine, e.g. --all2all_backend "
                        f"deepep_low_latency (default {ALL2ALL_BACKENDS[0]}, vLLM's)")
    p.add_argument("--kv_dtype", choices=("bf16", "fp8"), default="bf16",
                   help="K/V cache dtype, e.g. --kv_dtype fp8 (vLLM's --kv-cache-dtype fp8); default bf16, "
                        "vLLM's auto for a BF16 model")
    p.add_argument("--basis", choices=tuple(BASES), default="best",
                   help="per module, the fastest measured backend (best, default) or only the kernel vLLM "
                        "dispatches (vllm_default: no number where this tool cannot time it)")
    p.add_argument("--gpu_memory_utilization", type=float, default=memory.VLLM_GPU_MEMORY_UTILIZATION,
                   metavar="FRACTION", help=f"vLLM's flag of that name, e.g. --gpu_memory_utilization 0.85 "
                   f"(default {memory.VLLM_GPU_MEMORY_UTILIZATION:g})")
    p.add_argument("--revision", default=None, help="Hub revision of MODEL's config.json, e.g. --revision main")
    p.add_argument("--trust-remote-code", dest="trust_remote_code", action="store_true",
                   help="allow the model author's Python code for model types transformers lacks")
    p.add_argument("--allow_defaults", action="store_true",
                   help="plan even where config.json leaves a key the shapes depend on to transformers' default")
    p.add_argument("--dry_run", action="store_true",
                   help="print the layouts, their per-rank shapes, fit and the cases they would time; time "
                        "nothing (no GPU needed)")
    p.add_argument("--workdir", metavar="DIR", type=path_arg("--workdir"),
                   help="where each layout's run (<workdir>/<layout>/), deployment.json and report.md go, e.g. "
                        "--workdir runs/qwen3-8xh200")
    p.add_argument("--assemble_only", action="store_true",
                   help="time nothing (no GPU needed): write deployment.json and report.md from the layouts' "
                        "results.json already in --workdir, e.g. with another --routing or --nccl_tests")
    p.add_argument("--out", metavar="DIR", type=path_arg("--out"), default=None,
                   help="where deployment.json, report.md and the figure go, e.g. --out runs/qwen3-8xh200/zipf "
                        "(default --workdir); the numbers' sources are paths relative to it")
    r = p.add_argument_group("timing each layout (the run flags of benchmark_model.py)")
    r.add_argument("--flashinfer_repo", metavar="PATH", type=path_arg("--flashinfer_repo"),
                   help="FlashInfer checkout whose benchmarks/ driver times the cases, e.g. --flashinfer_repo "
                        "~/flashinfer")
    r.add_argument("--no_driver", action="store_true", help="time only the rows that need no FlashInfer checkout")
    r.add_argument("--backends", nargs="+", default=None, metavar="BACKEND",
                   help="only these backends, e.g. --backends cudnn cutlass fa2 torch (default: all)")
    r.add_argument("--num_iters", type=int, default=30, help="measured iterations per case, e.g. --num_iters 30")
    r.add_argument("--dry_run_iters", type=int, default=5, help="warm-up iterations per case, e.g. --dry_run_iters 5")
    r.add_argument("--case_timeout", type=float, default=600.0, metavar="SECONDS",
                   help="kill a case after this many seconds, e.g. --case_timeout 300")
    r.add_argument("--no_autotune", action="store_true", help="skip FlashInfer's autotuner")
    r.add_argument("--autotune_cache", metavar="PATH", type=path_arg("--autotune_cache"),
                   help="FlashInfer autotuner cache shared by the layouts, e.g. --autotune_cache tuned.json "
                        "(default <workdir>/autotune_cache.json)")
    r.add_argument("--cache", metavar="DIR", type=path_arg("--cache"), default=None,
                   help="result cache to read and extend, e.g. --cache /shared/bmk-cache (default: the user's)")
    r.add_argument("--no_cache", action="store_true", help="time every case again")
    r.add_argument("--resume", action="store_true",
                   help="continue the layouts' runs in an existing --workdir (keep their rows, run the rest)")
    return p


#: The run flags passed through to each layout's run, under the runner's own names.
PASSED_THROUGH = ("flashinfer_repo", "no_driver", "backends", "num_iters", "dry_run_iters", "case_timeout",
                  "no_autotune", "cache", "no_cache", "resume")


def _positive_distinct(flag: str, values: Sequence[int], example: str) -> tuple[int, ...]:
    for v in values:
        if v < 1:
            raise UsageError(flag, v, f"must be a positive whole number, e.g. {flag} {example}")
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise UsageError(flag, " ".join(map(str, values)), f"lists {twice[0]} twice; give each value once")
    return tuple(values)


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The checked --batch, --context, --recipes, --routing, --kv_dtype and --basis."""
    batches = _positive_distinct("--batch", args.batch, "8 64 256")
    contexts = _positive_distinct("--context", args.context, "4096")
    if len(set(args.recipes)) != len(args.recipes):
        raise UsageError("--recipes", " ".join(args.recipes), "lists a recipe twice; give each once")
    util = args.gpu_memory_utilization
    if not 0 < util <= 1:
        raise UsageError("--gpu_memory_utilization", f"{util:g}", "must be a fraction above 0 and at most 1, "
                         f"e.g. --gpu_memory_utilization {memory.VLLM_GPU_MEMORY_UTILIZATION:g}")
    routing = Routing.from_flag(args.routing)
    return Workload(batches, contexts, tuple(args.recipes), args.kv_dtype, BASES[args.basis], routing)


def timed_ms(lp: LayoutPlan, work: Workload) -> tuple[int, ...]:
    """The per-rank M values of the B that fit in some recipe at some context."""
    from .layouts import fit

    return tuple(sorted({lp.m(b) for b in work.batches
                         if any(fit(lp, r, b, c)[0] for r in work.recipes for c in work.contexts)}))


def timed_recipes(lp: LayoutPlan, work: Workload) -> tuple[str, ...]:
    """The recipes whose weights fit one rank, and BF16 with any of them: a quantized step counts the
    modules vLLM keeps in BF16 (router, lm_head: vllm_rules/layers.py) at their BF16 rows."""
    fitting = tuple(r for r in work.recipes if lp.fits_recipe(r))
    return fitting if not fitting or "bf16" in fitting else ("bf16", *fitting)


def layout_cases(lp: LayoutPlan, work: Workload, args: argparse.Namespace, cluster: Cluster,
                 caps: Capabilities = HAND) -> list[Case]:
    """The cases a run of `lp` would time on the cluster's GPU kind (the runner's own planning);
    `caps`: what the installed FlashInfer says about its backends."""
    ms, recipes = timed_ms(lp, work), timed_recipes(lp, work)
    if lp.plan is None or not ms or not recipes:
        return []
    sweep = flags.sweep_from_args(argparse.Namespace(kv_lens=list(work.contexts), kv_dtypes=[work.kv_dtype]))
    return runner.plan_cases(lp.plan, ms, recipes, args.backends, cluster.kind.compute_capability, ("graph",),
                             caps, sweep)


def run_args(args: argparse.Namespace, lp: LayoutPlan, work: Workload) -> argparse.Namespace:
    """The run flags of one layout, as benchmark_model.py would parse them for its workdir."""
    parser = argparse.ArgumentParser(add_help=False)
    flags.add_run_arguments(parser)
    ns = parser.parse_args(["--workdir", os.path.join(args.workdir, lp.name),
                            "--ms", *map(str, timed_ms(lp, work)), "--dtypes", *timed_recipes(lp, work),
                            "--kv_lens", *map(str, work.contexts), "--kv_dtypes", work.kv_dtype])
    for dest in PASSED_THROUGH:
        setattr(ns, dest, getattr(args, dest))
    ns.autotune_cache = args.autotune_cache or os.path.join(os.path.abspath(args.workdir), "autotune_cache.json")
    return ns


def check_gpu_here(cluster: Cluster) -> None:
    """A real run times the kernels on this machine's GPU: it must be the kind asked for."""
    gpu = flags.detect_gpu()
    if gpu is None:
        raise UsageError("--dry_run", "(not given)", "no CUDA GPU is visible here; run on a "
                         f"{cluster.kind.name}, or add --dry_run to print the layouts only")
    if cluster.kind.name not in gpu[0].upper():
        raise UsageError("--gpus", cluster.label, f"the kernels are timed on this machine's GPU, {gpu[0]}; run "
                         f"on a {cluster.kind.name}, or ask for this GPU's kind (e.g. --gpus {cluster.count}x...)")


def comm_model(args: argparse.Namespace, layouts: Sequence[LayoutPlan], work: Workload) -> CommModel:
    """The collectives' times: measured here (2 or more GPUs, not --no_measure_comm, not a dry run) at
    the exact sizes of every planned cell, then --nccl_tests files, then the bundled table."""
    from .measure import gpus_here, measure_collectives, sizes_needed
    from .nccl_tests import read_nccl_tests

    files = [read_nccl_tests(p) for p in args.nccl_tests]
    measured: dict[int, Any] = {}
    here = 0 if args.dry_run or args.assemble_only or args.no_measure_comm else gpus_here()
    if here >= 2:
        wanted = [c for lp in layouts if lp.runnable and lp.plan is not None for b in work.batches
                  for r in work.recipes
                  for c in step_collectives(lp.plan, lp.layout, lp.m(b), recipe_key(lp.plan, r), args.all2all_backend)]
        for ranks, requests in sizes_needed(wanted).items():
            if ranks <= here:
                print(f"timing {sum(map(len, requests.values()))} collective sizes over {ranks} GPUs here",
                      flush=True)
                measured[ranks] = measure_collectives(requests, ranks)
    return CommModel(nccl_tests=files, extra_measured=measured)


def comm_sources(args: argparse.Namespace, cluster: Cluster, model: CommModel) -> tuple[str, ...]:
    out = []
    if model.measured:
        out.append("measured here (NCCL through torch.distributed worker processes, at the exact sizes)")
    out += [f"nccl-tests file {os.path.basename(p)}" for p in args.nccl_tests]
    out.append(f"the bundled table {cluster.kind.comm_system} (typical, not measured here)")
    return tuple(out)


def _run_layouts(args: argparse.Namespace, layouts: Sequence[LayoutPlan], work: Workload) -> int:
    """Time each runnable layout into <workdir>/<layout>/; the exit code. A stop signal ends the sweep
    with its exit code (the layouts timed so far keep their rows)."""
    from ..doctor import environment

    todo = [(lp, lp.plan) for lp in layouts if lp.runnable and lp.plan is not None and timed_ms(lp, work)]
    requests = [(lp, plan, flags.validate_args(run_args(args, lp, work))) for lp, plan in todo]  # every flag first
    make_workdir(args.workdir)  # the folder of the layouts' workdirs: the tool's, marked as such
    rc = 0
    for i, (lp, plan, request) in enumerate(requests, 1):
        print(f"\n##### layout {i}/{len(requests)}: {lp.label} -> {request.workdir}", flush=True)
        code = cli_main(functools.partial(runner.run_from_request, request, plan,
                                          environment=environment.collect, report=None))
        if is_interrupt_exit(code):
            return code
        rc = max(rc, code)
    return rc


def deployment_of(args: argparse.Namespace, layouts: Sequence[LayoutPlan], work: Workload, target: Target,
                  out: str) -> Deployment:
    """Every layout's cells, from the results.json its run wrote into <workdir>/<layout>/; the paths
    deployment.json names are relative to `out`, the folder it is written to."""
    cells, subs = [], {}
    for lp in layouts:
        path = os.path.join(args.workdir, lp.name, RESULTS_JSON)
        results = load_results(path) if lp.runnable and os.path.isfile(path) else None
        if results is not None:
            subs[lp.name] = os.path.relpath(os.path.dirname(path), out)
        source = os.path.relpath(path, out) if results is not None else f"{lp.name} (not timed)"
        cells += assemble(LayoutRun(lp, results, source), work, target)
    return Deployment(args.model, target.cluster, work, tuple(layouts), tuple(cells), tuple(sys.argv),
                      subs, args.all2all_backend)


def check_assemble_only(args: argparse.Namespace) -> None:
    """--assemble_only reads a deployment's workdir: it must hold a layout's run."""
    if args.dry_run:
        raise UsageError("--assemble_only", "(given)", "contradicts --dry_run; give one of them")
    if not args.workdir or not os.path.isdir(args.workdir) or not any(
            os.path.isfile(os.path.join(args.workdir, name, RESULTS_JSON)) for name in os.listdir(args.workdir)):
        raise UsageError("--workdir", args.workdir, "holds no layout's results.json to assemble; give the --workdir "
                         "of an earlier deploy.py run, or drop --assemble_only to time the layouts")


def check_out(args: argparse.Namespace) -> None:
    """--out (other than --workdir) is new, or holds only what a deployment writes: no file of
    another kind is replaced."""
    out = args.out
    if not out or (args.workdir and os.path.abspath(out) == os.path.abspath(args.workdir)):
        return
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError("--out", out, "exists and is not a folder; give a new folder, e.g. --out runs/deploy/zipf")
    own = {DEPLOYMENT_JSON, REPORT_MD}
    others = [n for n in sorted(os.listdir(out)) if n not in own and not re.fullmatch(r"fig_pareto_ctx\d+\.png", n)
              ] if os.path.isdir(out) else []
    if others:
        raise UsageError("--out", out, f"holds other files ({', '.join(others[:3])}); give a new folder or one "
                         "that holds only a deployment's deployment.json, report.md and figures")


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    cluster = parse_gpus(args.gpus)
    work = workload_from_args(args)
    check_out(args)
    if args.assemble_only:
        check_assemble_only(args)
    elif not args.dry_run:
        if not args.workdir:
            raise UsageError("--workdir", None, "is required to time the layouts, e.g. --workdir runs/deploy; "
                             "or add --dry_run to print them only")
        check_workdir(args.workdir, resume=True)
        check_gpu_here(cluster)
    options = PlanOptions(args.model, args.revision, args.trust_remote_code, args.allow_defaults)
    # Planning writes nothing: a stop signal ends it at once with one line.
    with stop_signals_exit(f"while planning the layouts of {args.model}; nothing was written"):
        layouts = layout_plans(options, cluster, work.recipes,
                               MemorySettings(work.kv_dtype, args.gpu_memory_utilization))
    caps = runner.kept_capabilities(args.flashinfer_repo) if args.flashinfer_repo else HAND
    cases = {lp.name: layout_cases(lp, work, args, cluster, caps) for lp in layouts if lp.runnable}
    print("\n".join(summary_lines(args.model, cluster, layouts, work, cases)), flush=True)
    if args.dry_run:
        return 0
    model = comm_model(args, layouts, work)
    comm = Communication(model, cluster.kind.comm_system, args.all2all_backend)
    rc = 0
    if not args.assemble_only:
        rc = _run_layouts(args, layouts, work)
        if is_interrupt_exit(rc):
            print("stopped: the layouts timed so far keep their rows; the same command plus --resume continues",
                  file=sys.stderr)
            return rc
    out = args.out or args.workdir
    os.makedirs(out, exist_ok=True)
    dep = replace(deployment_of(args, layouts, work, Target(cluster, comm), out),
                  comm_sources=comm_sources(args, cluster, model))
    print(f"deployment: {write_deployment(dep, out)}")
    try:
        print(f"report: {write_report(dep, out)}")
    except Exception as e:  # noqa: BLE001  (the report is derived: deployment.json holds every number)
        print(f"warning: report not written: {type(e).__name__}: {e}", file=sys.stderr)
    return rc


def main(argv: list[str] | None = None) -> int:
    return cli_main(lambda: _main(list(sys.argv[1:] if argv is None else argv)))


__all__ = ["build_parser", "workload_from_args", "timed_ms", "timed_recipes", "layout_cases", "run_args",
           "check_gpu_here", "comm_model", "deployment_of", "check_assemble_only", "check_out", "main",
           "PASSED_THROUGH"]
