"""Fidelity of the plans to vLLM itself: every config of a folder at TP 1/2/4/8 and EP 1, =TP, 8,
32, 64 (EP > 1 only for models with routed experts, and only a multiple of TP), each planned by
this tool and built by vLLM's own model class on meta (crosscheck/), then written as a table:

  match         both build, every per-rank GEMM and fused-MoE shape and count agrees
  mismatch      both build and disagree (the differences are listed under the table)
  plan refuses  vLLM builds, the plan refuses (a one-line error, or `unsupported` modules)
  vLLM refuses  the plan is complete, vLLM will not build it (its reason is listed)
  both refuse   neither builds

Needs vLLM importable (CPU is enough), e.g.:

  python3 -m venv /tmp/venv-vllm && /tmp/venv-vllm/bin/pip install vllm==0.33.0
  PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /tmp/venv-vllm/bin/python benchmarks/vllm_fidelity.py \\
      --configs ../shared/configs --out examples/vllm_fidelity/vllm-0.33.0.md

Each config runs in its own process (`--one`), several at once (`--jobs`). Exit 0 when no cell is
a mismatch, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))

TPS = (1, 2, 4, 8)
EPS = (1, "tp", 8, 32, 64)
STATUSES = ("match", "mismatch", "plan refuses", "vLLM refuses", "both refuse")


def layouts(moe: bool) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for tp in TPS:
        for ep in EPS:
            e = tp if ep == "tp" else int(ep)
            if (e == 1 or (moe and e % tp == 0 and e > 1)) and (tp, e) not in out:
                out.append((tp, e))
    return out


def check_one(config_dir: str) -> list[dict]:
    """Every layout of one config: [{tp, ep, status, detail}]."""
    from benchmark_model_kernels.core.errors import UsageError
    from benchmark_model_kernels.core.plan_schema import ModelInfo, Plan
    from benchmark_model_kernels.crosscheck.check import cross_check
    from benchmark_model_kernels.plan import config_source, planner

    src = config_source.resolve(config_dir, None)
    try:
        moe = bool(planner.plan_model(config_dir, 1, 1).moe)
    except UsageError:
        moe = any(k in json.dumps(src.raw) for k in ('"num_experts"', '"n_routed_experts"', '"num_local_experts"'))
    # Every plan before the first vLLM build: a plan never sees what importing vLLM changes.
    planned = []
    for tp, ep in layouts(moe):
        plan, plan_error = None, ""
        try:
            plan = planner.plan_model(config_dir, tp, ep)
            if plan.unsupported:
                plan_error = "; ".join(f"unsupported {u.module}: {u.reason}" for u in plan.unsupported)
        except UsageError as e:
            plan_error = str(e)
        if plan is None:
            plan = Plan(ModelInfo(name=config_dir, source="local", model_type="", architecture=""), tp, ep)
        planned.append((plan, plan_error))
    rows = []
    for plan, plan_error in planned:
        result = cross_check(plan, src.raw)
        if result.refused:
            status, detail = ("both refuse", f"plan: {plan_error} | vLLM: {result.refused}") if plan_error \
                else ("vLLM refuses", result.refused)
        elif plan_error:
            status, detail = "plan refuses", plan_error
        elif result.differences:
            status, detail = "mismatch", "\n".join(result.differences)
        else:
            status, detail = "match", ""
        rows.append({"tp": plan.tp, "ep": plan.ep, "status": status, "detail": detail, "against": result.against})
    return rows


def run_child(config_dir: str, timeout: int) -> list[dict]:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", config_dir]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"tp": 0, "ep": 0, "status": "error", "detail": f"timed out after {timeout} s", "against": ""}]
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("ROWS "):
            return json.loads(line[5:])
    tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:300]
    return [{"tp": 0, "ep": 0, "status": "error", "detail": f"exit {done.returncode}: {tail}", "against": ""}]


def cell(status: str) -> str:
    return {"match": "match", "mismatch": "**MISMATCH**", "plan refuses": "plan refuses",
            "vLLM refuses": "vLLM refuses", "both refuse": "both refuse"}.get(status, status)


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("vllm", "transformers", "torch"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def table(results: dict[str, list[dict]], seconds: float) -> str:
    cols = layouts(True)
    against = next((r["against"].split(" (")[0] for rows in results.values() for r in rows if r["against"]), "?")
    counts = {s: 0 for s in STATUSES}
    lines = [f"# Plans against {against}: every shared config", "",
             f"Made by `benchmarks/vllm_fidelity.py` ({seconds:.0f} s on a CPU): each cell plans the config at "
             "that TP/EP and builds vLLM's own model class for it on meta (`--cross_check vllm`). "
             "Blank: layout not tried (EP > 1 needs routed experts).", "",
             f"Versions: {versions()}; vLLM on its CPU platform (`VLLM_TARGET_DEVICE=cpu`).", "",
             "| config | " + " | ".join(f"TP{tp} EP{ep}" for tp, ep in cols) + " |",
             "|---|" + "---|" * len(cols)]
    notes = []
    for name, rows in sorted(results.items()):
        by = {(r["tp"], r["ep"]): r for r in rows}
        cells = []
        for c in cols:
            r = by.get(c)
            if r is None:
                cells.append("")
                continue
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            cells.append(cell(r["status"]))
            if r["detail"]:
                notes.append(f"- `{name}` TP{r['tp']} EP{r['ep']}, {r['status']}: "
                             + r["detail"].replace("\n", "\n  - "))
        for r in rows:
            if r["tp"] == 0:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
                notes.append(f"- `{name}`: {r['status']}: {r['detail']}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    total = sum(counts.values())
    lines[3:3] = ["**" + ", ".join(f"{s}: {n}" for s, n in counts.items() if n or s in STATUSES)
                  + f" (of {total} cells)**", ""]  # the summary under the title
    return "\n".join(lines + ["", "## Why (one line per difference or refusal)", ""] + notes) + "\n"


def registry_tables() -> str:
    """vllm_rules/architectures.py's tables from the installed vLLM's registry
    (vllm/model_executor/models/registry.py), as Python, to paste after a vLLM upgrade."""
    import textwrap

    from vllm.model_executor.models import registry

    backend = set(registry._TRANSFORMERS_SUPPORTED_MODELS) | set(registry._TRANSFORMERS_BACKEND_MODELS)
    native = sorted((set(registry._TEXT_GENERATION_MODELS) | set(registry._MULTIMODAL_MODELS)) - backend)

    def names(items: list[str]) -> str:
        return textwrap.fill(", ".join(f'"{a}"' for a in items), 116, initial_indent="    ",
                             subsequent_indent="    ")

    dropped = ", ".join(f'"{a}": "{v}"' for a, v in sorted(registry._PREVIOUSLY_SUPPORTED_MODELS.items()))
    only_backend = names(sorted(registry._TRANSFORMERS_SUPPORTED_MODELS))
    return (f"NATIVE = frozenset({{\n{names(native)},\n}})\n"
            f"TRANSFORMERS_BACKEND_ONLY = frozenset({{\n{only_backend},\n}})\n"
            f"DROPPED = {{\n{textwrap.fill(dropped, 116, initial_indent='    ', subsequent_indent='    ')},\n}}\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default=os.path.join(os.path.dirname(HERE), "..", "shared", "configs"),
                   help="folder of <name>/config.json, e.g. --configs ../shared/configs")
    p.add_argument("--out", default=None, help="Markdown table to write, e.g. --out examples/vllm_fidelity/t.md")
    p.add_argument("--jobs", type=int, default=2, help="configs checked at once, e.g. --jobs 2 (about 3 GB each)")
    p.add_argument("--only", nargs="*", default=None, help="config names to check, e.g. --only llama-3.1-8b")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per config, e.g. --timeout 1800")
    p.add_argument("--registry_tables", action="store_true",
                   help="print vllm_rules/architectures.py's tables from the installed vLLM and exit")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.registry_tables:
        print(registry_tables(), end="")
        return 0
    if args.one:
        print("ROWS " + json.dumps(check_one(args.one)))
        return 0
    from benchmark_model_kernels.crosscheck.vllm_build import INSTALL_HINT, vllm_available

    if not vllm_available():
        print(f"error: vLLM is not importable in {sys.executable}; {INSTALL_HINT}", file=sys.stderr)
        return 2
    names = sorted(n for n in os.listdir(args.configs) if os.path.isfile(os.path.join(args.configs, n, "config.json")))
    if args.only:
        names = [n for n in names if n in args.only]
    start = time.time()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {n: pool.submit(run_child, os.path.join(args.configs, n), args.timeout) for n in names}
        results = {}
        for n, f in futures.items():
            results[n] = f.result()
            print(f"{n}: " + ", ".join(f"TP{r['tp']}/EP{r['ep']} {r['status']}" for r in results[n]), flush=True)
    text = table(results, time.time() - start)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"table written to {args.out}")
    else:
        print(text)
    return 1 if any(r["status"] in ("mismatch", "error") for rows in results.values() for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
