"""`benchmark_via_builtin.py`: time explicit shapes (or a saved plan) with FlashInfer's own driver.

    benchmark_via_builtin.py --flashinfer_repo ~/flashinfer --ms 1 8 64 \\
        --nks 6144,4096,qkv_proj 4096,4096,o_proj --workdir runs/shapes
    benchmark_via_builtin.py --plan plan.json --flashinfer_repo ~/flashinfer --workdir runs/plan
    benchmark_via_builtin.py --moe_hidden 2048 --moe_intermediate 768 --moe_experts 128 \\
        --moe_top_k 8 --ms 8 64 --dry_run --workdir runs/moe

Same runner as `benchmark_model.py` (run/runner.py): outputs, exit codes and --resume behave the same.
"""

from __future__ import annotations

import argparse
import sys

from .cases.build import plan_from_shapes
from .core.case_schema import NON_GATED_ACTIVATIONS, id_part
from .core.errors import OneLineArgumentParser, UsageError, cli_main
from .core.files import path_arg, same_file
from .core.plan_schema import MoeEntry, Plan, Routing, read_plan_file
from .doctor import environment
from .report import report
from .run import phases
from .run.flags import add_run_arguments
from .run.runner import run_from_args

#: FlashInfer ActivationType names accepted by --moe_activation (flashinfer/tllm_enums.py:66-78).
ACTIVATIONS = ("Swiglu", "Geglu", "SwigluBias", "Relu2", "Gelu", "Relu", "Silu", "SwigluStep",
               "GegluTanh", "Identity", "Situ")
ROUTING_METHODS = ("renormalize", "deepseek_v3", "llama4", "renormalize_naive", "topk")


def parse_nks(values: list[str]) -> list[tuple[int, int, str]]:
    """["6144,4096,qkv_proj", ...] (each item may hold several space-separated) -> (N, K, name)."""
    out: list[tuple[int, int, str]] = []
    for value in values:
        for item in value.split():
            parts = item.split(",")
            if len(parts) != 3:
                raise UsageError("--nks", item, "must be N,K,name, e.g. --nks 6144,4096,qkv_proj")
            n_s, k_s, name = (p.strip() for p in parts)
            dims = []
            for label, s in (("N", n_s), ("K", k_s)):
                try:
                    v = int(s)
                except ValueError:
                    v = 0
                if v < 1:
                    raise UsageError("--nks", item,
                                     f"{label}={s!r} must be a positive integer, e.g. 6144,4096,qkv_proj")
                dims.append(v)
            if not name:
                raise UsageError("--nks", item, "the name must not be empty, e.g. 6144,4096,qkv_proj")
            out.append((dims[0], dims[1], name))
    names = [n for _, _, n in out]
    for n in names:
        if names.count(n) > 1:
            raise UsageError("--nks", n, "names must be unique (they become case ids); rename one")
    seen: dict[str, str] = {}  # case ids keep [A-Za-z0-9._-]: "a/b" and "a-b" are one id
    for n in names:
        i = id_part(n)
        if seen.setdefault(i, n) != n:
            raise UsageError("--nks", n, f"names {seen[i]!r} and {n!r} are both {i!r} in a case id; rename one")
    return out


def _gated(activation: str) -> bool:
    return activation not in NON_GATED_ACTIVATIONS


def moe_from_args(a: argparse.Namespace) -> MoeEntry | None:
    """A MoeEntry from the --moe_* flags, or None when none of them is given."""
    given = {k: v for k, v in vars(a).items() if k.startswith("moe_") and v is not None}
    defaults = {"moe_activation", "moe_routing", "moe_name"}
    if not set(given) - defaults:
        return None
    for flag in ("moe_hidden", "moe_intermediate", "moe_experts", "moe_top_k"):
        if getattr(a, flag) is None:
            raise UsageError(f"--{flag}", None, "is required for an MoE shape; give --moe_hidden "
                             "--moe_intermediate --moe_experts --moe_top_k together")
    for flag in ("moe_hidden", "moe_intermediate", "moe_experts", "moe_top_k", "moe_global_experts"):
        v = getattr(a, flag)
        if v is not None and v < 1:
            raise UsageError(f"--{flag}", v, "must be a positive integer")
    global_experts = a.moe_global_experts or a.moe_experts
    if global_experts < a.moe_experts:
        raise UsageError("--moe_global_experts", global_experts,
                         f"must be at least --moe_experts={a.moe_experts} (experts on this rank)")
    if a.moe_top_k > global_experts:
        raise UsageError("--moe_top_k", a.moe_top_k, f"must not exceed the {global_experts} global experts")
    deepseek = a.moe_routing == "deepseek_v3"
    if deepseek and (a.moe_n_group is None or a.moe_topk_group is None):
        raise UsageError("--moe_routing", a.moe_routing, "needs --moe_n_group and --moe_topk_group, "
                         "e.g. --moe_n_group 8 --moe_topk_group 4")
    if not deepseek and (a.moe_n_group is not None or a.moe_topk_group is not None):
        raise UsageError("--moe_n_group", a.moe_n_group, "grouped routing is only for --moe_routing deepseek_v3")
    routing = Routing(
        method=a.moe_routing,
        n_group=a.moe_n_group,
        topk_group=a.moe_topk_group,
        routed_scaling_factor=a.moe_routed_scaling_factor,
        use_routing_bias=deepseek,
        scoring_func="sigmoid" if a.moe_routing in ("deepseek_v3", "llama4") else "softmax",
        renormalize=a.moe_routing not in ("topk", "llama4"),
        apply_router_weight_on_input=a.moe_routing == "llama4",
    )
    return MoeEntry(
        name=a.moe_name or "experts",
        modules=("--moe",),
        hidden=a.moe_hidden,
        intermediate=a.moe_intermediate,
        experts=a.moe_experts,
        global_experts=global_experts,
        top_k=a.moe_top_k,
        activation=a.moe_activation,
        routing=routing,
        layers=1,
        gated=_gated(a.moe_activation),
    )


def load_plan(path: str) -> Plan:
    """The --plan file, validated against the plan schema (one error line naming the JSON path)."""
    return read_plan_file(path, "--plan")


def plan_from_args(a: argparse.Namespace) -> Plan:
    moe = moe_from_args(a)
    if a.plan:
        if a.nks or moe is not None:
            raise UsageError("--plan", a.plan, "cannot be combined with --nks or --moe_* flags; use one")
        if a.autotune_cache and same_file(a.autotune_cache, a.plan):
            # FlashInfer rewrites its autotune cache: it would replace the plan being read.
            raise UsageError("--autotune_cache", a.autotune_cache, "is the --plan file; choose another "
                             "path, e.g. --autotune_cache runs/tuned.json")
        return load_plan(a.plan)
    nks = parse_nks(a.nks or [])
    if not nks and moe is None:
        raise UsageError("--nks", None, "give shapes: --nks N,K,name ..., --moe_hidden ... or --plan PATH")
    return plan_from_shapes(nks, moe)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="benchmark_via_builtin.py",
        description=__doc__.split("\n\n")[0] + " Writes testlist.txt, driver.log, results.json "
        "and combined_results.csv into --workdir; exit 0 when no row failed, 1 otherwise, 2 on "
        "bad input.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n" + "\n".join(__doc__.split("\n\n")[1].splitlines()),
        allow_abbrev=False,
    )
    s = p.add_argument_group("shapes (one of --nks / --moe_* / --plan)")
    s.add_argument("--nks", nargs="+", metavar="N,K,NAME",
                   help="Dense GEMMs Y[M,N]=X[M,K]W[N,K]^T, e.g. --nks 6144,4096,qkv_proj "
                   "4096,4096,o_proj (repeatable; one quoted space-separated list also works).",
                   action="extend")
    s.add_argument("--plan", metavar="PATH", type=path_arg("--plan"),
                   help="A plan JSON from benchmark_model.py MODEL --plan_json PATH, e.g. --plan plan.json.")
    m = p.add_argument_group("fused MoE shape (per rank)")
    m.add_argument("--moe_hidden", type=int, help="Hidden size H, e.g. --moe_hidden 2048.")
    m.add_argument("--moe_intermediate", type=int,
                   help="Per-rank expert intermediate size I, e.g. --moe_intermediate 768.")
    m.add_argument("--moe_experts", type=int, help="Experts on this rank, e.g. --moe_experts 128.")
    m.add_argument("--moe_global_experts", type=int,
                   help="All routed experts (default --moe_experts), e.g. --moe_global_experts 256 under EP.")
    m.add_argument("--moe_top_k", type=int, help="Experts per token, e.g. --moe_top_k 8.")
    m.add_argument("--moe_activation", choices=ACTIVATIONS, default="Swiglu",
                   help="FlashInfer activation, e.g. --moe_activation Relu2 (default Swiglu).")
    m.add_argument("--moe_routing", choices=ROUTING_METHODS, default="renormalize",
                   help="Routing method, e.g. --moe_routing deepseek_v3 (default renormalize).")
    m.add_argument("--moe_n_group", type=int, help="DeepSeek expert groups, e.g. --moe_n_group 8.")
    m.add_argument("--moe_topk_group", type=int, help="DeepSeek groups kept per token, e.g. --moe_topk_group 4.")
    m.add_argument("--moe_routed_scaling_factor", type=float,
                   help="Scale of routed weights, e.g. --moe_routed_scaling_factor 2.5.")
    m.add_argument("--moe_name", help="Label of the MoE entry (default experts).")
    add_run_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    def run() -> int:
        args = build_parser().parse_args(argv)
        with phases.next_clock().phase("plan"):
            plan = plan_from_args(args)
        return run_from_args(args, plan, environment=environment.collect, report=report.write_report)

    return cli_main(run)


if __name__ == "__main__":
    sys.exit(main())
