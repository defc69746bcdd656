"""Fidelity of the plans to vLLM itself: every config of a folder at TP 1/2/4/8 and EP 1, =TP, 8,
32, 64 (EP > 1 only for models with routed experts, and only a multiple of TP), each planned by
this tool's rules and built by vLLM's own model class on meta, the class vLLM builds on the target
GPU (`--assume_cc`, default 9.0: H200; for a platform-split family its CUDA class), once per cell.
The build is read twice: as the cross-check of the rules' plan (`--cross_check vllm`) and as vLLM's
own plan (`--planner vllm`). Two tables:

Rules' plan against vLLM:
  match         both build, every per-rank GEMM, fused-MoE and attention shape and count agrees
  mismatch      both build and disagree (the differences are listed under the table)
  plan refuses  vLLM builds, the rules refuse (a one-line error, or `unsupported` modules)
  vLLM refuses  the plan is complete, vLLM will not build it (its reason is listed)
  both refuse   neither builds
  not checked   vLLM's class could not be built on this machine (no verdict; the reason is listed)

vLLM planner (`--planner vllm`):
  same          its plan equals the rules' plan
  plans         the rules refuse or leave modules unsupported; vLLM's plan is complete
  differs       both plan and differ (vLLM's plan is used; the differences are the cross-check's)
  incomplete    vLLM's plan has entries it cannot represent (listed)
  vLLM refuses / not checked   as above
  SELF-MISMATCH its plan disagrees with the same build read by the cross-check (a bug of the tool)

Needs vLLM importable (CPU is enough), e.g.:

  python3 -m venv /tmp/venv-vllm && /tmp/venv-vllm/bin/pip install vllm==0.33.0
  PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /tmp/venv-vllm/bin/python benchmarks/vllm_fidelity.py \\
      --configs ../shared/configs --out examples/vllm_fidelity/vllm-0.33.0.md

Each config runs in its own process (`--one`), several at once (`--jobs`). Exit 0 when no cell is
a mismatch or a self-mismatch, 1 otherwise.
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
STATUSES = ("match", "mismatch", "plan refuses", "vLLM refuses", "both refuse", "not checked")
PLANNER_STATUSES = ("same", "plans", "differs", "incomplete", "vLLM refuses", "not checked", "SELF-MISMATCH")


def layouts(moe: bool) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for tp in TPS:
        for ep in EPS:
            e = tp if ep == "tp" else int(ep)
            if (e == 1 or (moe and e % tp == 0 and e > 1)) and (tp, e) not in out:
                out.append((tp, e))
    return out


def _planned(config_dir: str, moe: bool) -> list[tuple[object, str]]:
    """(rules' plan, its refusal or "") at every layout, all before the first vLLM build: a plan
    never sees what importing vLLM changes."""
    from benchmark_model_kernels.core.errors import UsageError
    from benchmark_model_kernels.core.plan_schema import ModelInfo, Plan
    from benchmark_model_kernels.plan import planner

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
    return planned


def _cell(plan, plan_error: str, raw: dict, gpu) -> dict:
    """One layout: vLLM's build read as the cross-check of the rules' plan and as vLLM's plan."""
    from dataclasses import replace

    from benchmark_model_kernels.crosscheck import vllm_layers
    from benchmark_model_kernels.crosscheck.check import against_text
    from benchmark_model_kernels.crosscheck.compare import compare, plan_side
    from benchmark_model_kernels.crosscheck.vllm_build import VllmBuildProblem, VllmRefused, build_vllm_model
    from benchmark_model_kernels.crosscheck.vllm_planner import plan_of_build
    from benchmark_model_kernels.vllm_rules.layout import Layout

    row = {"tp": plan.tp, "ep": plan.ep, "against": ""}
    try:
        with build_vllm_model(raw, plan.tp, plan.ep, gpu=gpu) as built:
            row["against"] = against_text(built)
            vllm = vllm_layers.vllm_side(built.model, plan.tp)
            info = replace(plan.model, architecture=built.model_class.rsplit(".", 1)[-1])
            try:
                own = plan_of_build(built, Layout.from_flags(plan.tp, plan.ep), info)
                own_error = ""
            except Exception as e:  # noqa: BLE001  (the table records it)
                own, own_error = None, f"{type(e).__name__}: {e}"
    except (VllmRefused, VllmBuildProblem) as e:
        status = "vLLM refuses" if isinstance(e, VllmRefused) else "not checked"
        if status == "vLLM refuses" and plan_error:
            return {**row, "status": "both refuse", "detail": f"plan: {plan_error} | vLLM: {e}",
                    "planner": status, "planner_detail": ""}
        return {**row, "status": status, "detail": str(e), "planner": status, "planner_detail": ""}
    differences = compare(plan_side(plan), vllm) if not plan_error else []
    if plan_error:
        status, detail = "plan refuses", plan_error
    elif [d for d in differences if not d.startswith("bias: ")]:
        status, detail = "mismatch", "\n".join(differences)
    else:
        status, detail = "match", "\n".join(differences)
    if own is None:
        return {**row, "status": status, "detail": detail, "planner": "SELF-MISMATCH", "planner_detail": own_error}
    self_check = compare(plan_side(own), vllm)
    if self_check:
        planner, planner_detail = "SELF-MISMATCH", "\n".join(self_check)
    elif own.unsupported:
        planner, planner_detail = "incomplete", "; ".join(f"{u.module}: {u.reason}" for u in own.unsupported)
    elif plan_error:
        planner, planner_detail = "plans", f"rules: {plan_error[:200]}"
    else:
        planner, planner_detail = ("differs", "") if status == "mismatch" else ("same", "")
    return {**row, "status": status, "detail": detail, "planner": planner, "planner_detail": planner_detail}


def check_one(config_dir: str, assume_cc: str) -> list[dict]:
    """Every layout of one config: [{tp, ep, status, detail, against, planner, planner_detail}]."""
    from benchmark_model_kernels.core.errors import UsageError
    from benchmark_model_kernels.crosscheck.vllm_platform import target_gpu
    from benchmark_model_kernels.plan import config_source, planner

    src = config_source.resolve(config_dir, None)
    try:
        moe = bool(planner.plan_model(config_dir, 1, 1).moe)
    except UsageError:
        moe = any(k in json.dumps(src.raw) for k in ('"num_experts"', '"n_routed_experts"', '"num_local_experts"'))
    major, minor = (int(x) for x in assume_cc.split("."))
    gpu = target_gpu((major, minor))
    return [_cell(plan, plan_error, src.raw, gpu) for plan, plan_error in _planned(config_dir, moe)]


def run_child(config_dir: str, timeout: int, assume_cc: str) -> list[dict]:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", config_dir, "--assume_cc", assume_cc]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"tp": 0, "ep": 0, "status": "error", "detail": f"timed out after {timeout} s", "against": "",
                 "planner": "error", "planner_detail": ""}]
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("ROWS "):
            return json.loads(line[5:])
    tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:300]
    return [{"tp": 0, "ep": 0, "status": "error", "detail": f"exit {done.returncode}: {tail}", "against": "",
             "planner": "error", "planner_detail": ""}]


def cell(status: str) -> str:
    return {"mismatch": "**MISMATCH**", "SELF-MISMATCH": "**SELF-MISMATCH**"}.get(status, status)


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("vllm", "transformers", "torch"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def _grid(results: dict[str, list[dict]], key: str, detail: str,
          statuses: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(the table's lines with its summary first, the notes under it) of the cell field `key`."""
    cols = layouts(True)
    counts = {s: 0 for s in statuses}
    lines = ["| config | " + " | ".join(f"TP{tp} EP{ep}" for tp, ep in cols) + " |", "|---|" + "---|" * len(cols)]
    notes = []
    for name, rows in sorted(results.items()):
        by = {(r["tp"], r["ep"]): r for r in rows}
        cells = []
        for c in cols:
            r = by.get(c)
            if r is None:
                cells.append("")
                continue
            counts[r[key]] = counts.get(r[key], 0) + 1
            cells.append(cell(r[key]))
            if r.get(detail):
                notes.append(f"- `{name}` TP{r['tp']} EP{r['ep']}, {r[key]}: " + r[detail].replace("\n", "\n  - "))
        for r in rows:
            if r["tp"] == 0:
                counts[r[key]] = counts.get(r[key], 0) + 1
                notes.append(f"- `{name}`: {r[key]}: {r[detail]}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    total = sum(counts.values())
    summary = "**" + ", ".join(f"{s}: {n}" for s, n in counts.items()) + f" (of {total} cells)**"
    return [summary, ""] + lines, notes


def table(results: dict[str, list[dict]], seconds: float, assume_cc: str) -> str:
    against = next((r["against"] for rows in results.values() for r in rows if r["against"]), "?")
    version = " ".join(against.split()[:2])
    split = sorted({r["against"].split()[2] for rows in results.values() for r in rows
                    if r["against"] and "CUDA class" in r["against"]})
    rules, rule_notes = _grid(results, "status", "detail", STATUSES)
    own, own_notes = _grid(results, "planner", "planner_detail", PLANNER_STATUSES)
    lines = [f"# Plans against {version} on sm_{assume_cc.replace('.', '')}: every shared config", "",
             f"Made by `benchmarks/vllm_fidelity.py --assume_cc {assume_cc}` ({seconds:.0f} s on a CPU): each cell "
             "plans the config at that TP/EP with the rules and builds vLLM's own model class for it on meta, the "
             f"class vLLM builds on an sm_{assume_cc.replace('.', '')} GPU; the build is read as the cross-check of "
             "the rules' plan (`--cross_check vllm`) and as vLLM's own plan (`--planner vllm`). Blank: layout not "
             "tried (EP > 1 needs routed experts).", "",
             f"Versions: {versions()}; vLLM on its CPU platform (`VLLM_TARGET_DEVICE=cpu`); the CUDA class built for "
             "the platform-split families: " + (", ".join(f"`{c}`" for c in split) or "none") + ".", "",
             "## The rules' plan against vLLM", ""] + rules + [
             "", "## vLLM as the planner (`--planner vllm`)", "",
             "`same`: equal to the rules' plan; `plans`: the rules refuse, vLLM's plan is complete; `differs`: vLLM's "
             "plan is used where the rules differ; `SELF-MISMATCH`: vLLM's plan disagrees with the same build as the "
             "cross-check reads it.", ""] + own
    return "\n".join(lines + ["", "## Why (one line per difference or refusal)", ""] + rule_notes
                     + ["", "## vLLM planner notes", ""] + (own_notes or ["(none)"])) + "\n"


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
    p.add_argument("--assume_cc", default="9.0", metavar="MAJOR.MINOR",
                   help="the GPU whose CUDA class the platform-split families build, e.g. --assume_cc 10.0 (B200); "
                        "default 9.0 (H200)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.registry_tables:
        print(registry_tables(), end="")
        return 0
    if args.one:
        print("ROWS " + json.dumps(check_one(args.one, args.assume_cc)))
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
        futures = {n: pool.submit(run_child, os.path.join(args.configs, n), args.timeout, args.assume_cc)
                   for n in names}
        results = {}
        for n, f in futures.items():
            results[n] = f.result()
            print(f"{n}: " + ", ".join(f"TP{r['tp']}/EP{r['ep']} {r['status']}/{r['planner']}" for r in results[n]),
                  flush=True)
    text = table(results, time.time() - start, args.assume_cc)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"table written to {args.out}")
    else:
        print(text)
    bad = ("mismatch", "error", "SELF-MISMATCH")
    return 1 if any(r["status"] in bad or r["planner"] in bad for rows in results.values() for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
