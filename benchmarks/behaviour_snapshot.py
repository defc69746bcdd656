#!/usr/bin/env python3
"""Snapshot what the tool prints and writes, so a refactor can be shown to change none of it.

Runs the CLIs as a user would (through `scripts/*.py`, in one process for speed) and writes, under
OUT_DIR:

* `preview/<config>_tp<T>_ep<E>.txt` and `.plan.json`: `benchmark_model.py CONFIG --tp T --ep E
  --print_only --plan_json` for every config under CONFIGS_DIR (default ../shared/configs) at the
  TP/EP layouts below; stdout, stderr and the exit code, so refusals are compared too.
* `dryrun/<model>_tp<T>_ep<E>_cc<CC>/`: testlist.txt, cases.json and the printed summary of
  `--dry_run --assume_cc CC` for the bundled models.
* `report/<example>/`: `report.py` re-rendered (report.md and figures) from each committed example
  workdir.

Compare two snapshots with `diff -r BEFORE AFTER`:

    python benchmarks/behaviour_snapshot.py /tmp/before   # on the old tree
    python benchmarks/behaviour_snapshot.py /tmp/after    # on the new tree
    diff -r /tmp/before /tmp/after && echo identical
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import runpy
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUTS = ((1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (8, 8), (1, 8), (4, 32), (8, 64))
DRY_MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b")
DRY_LAYOUTS = ((1, 1), (4, 1), (8, 8))
CCS = ("9.0", "10.0")
_MAINS: dict = {}


def run_cli(script: str, argv: list[str], cwd: Path) -> str:
    """stdout + stderr + exit code of `python scripts/<script> argv`, run in this process.

    Calls the shim's `main(argv)` (loaded once, not as __main__): run as a program, a preview ends
    the process itself to skip interpreter teardown."""
    if script not in _MAINS:
        _MAINS[script] = runpy.run_path(str(ROOT / "scripts" / script), run_name="snapshot")["main"]
    out, err = io.StringIO(), io.StringIO()
    old_cwd = os.getcwd()
    code: object = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = _MAINS[script](list(argv))
            except SystemExit as exc:
                code = exc.code
    finally:
        os.chdir(old_cwd)
    text = out.getvalue() + "\n--- stderr ---\n" + err.getvalue() + f"\n--- exit {code} ---\n"
    # Temp paths differ between runs; they are not behaviour.
    return text.replace(str(cwd), "<CWD>")


@contextlib.contextmanager
def scratch():
    """A fresh folder at a fixed path: the paths the tool records are then the same every run."""
    path = Path(tempfile.gettempdir()) / "behaviour-snapshot-scratch"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def previews(configs: Path, out: Path) -> None:
    dest = out / "preview"
    dest.mkdir(parents=True)
    for cfg in sorted(p for p in configs.iterdir() if (p / "config.json").is_file()):
        for tp, ep in LAYOUTS:
            stem = f"{cfg.name}_tp{tp}_ep{ep}"
            with scratch() as tmp:
                plan = Path(tmp) / "plan.json"
                text = run_cli("benchmark_model.py", [str(cfg), "--tp", str(tp), "--ep", str(ep),
                                                      "--print_only", "--plan_json", str(plan)],
                               Path(tmp))
                (dest / f"{stem}.txt").write_text(text.replace(str(cfg), "<CONFIG>"))
                if plan.exists():
                    shutil.copy(plan, dest / f"{stem}.plan.json")


def dry_runs(out: Path) -> None:
    for model in DRY_MODELS:
        for tp, ep in DRY_LAYOUTS:
            for cc in CCS:
                stem = f"{model}_tp{tp}_ep{ep}_cc{cc}"
                dest = out / "dryrun" / stem
                dest.mkdir(parents=True)
                with scratch() as tmp:
                    work = Path(tmp) / "w"
                    text = run_cli("benchmark_model.py",
                                   [model, "--tp", str(tp), "--ep", str(ep), "--dry_run",
                                    "--assume_cc", cc, "--ms", "1", "8", "64", "512",
                                    "--workdir", str(work)], Path(tmp))
                    (dest / "stdout.txt").write_text(text)
                    for name in ("testlist.txt", "cases.json"):
                        if (work / name).exists():
                            shutil.copy(work / name, dest / name)


def reports(examples: Path, out: Path) -> None:
    for results in sorted(examples.rglob("results.json")):
        src = results.parent
        rel = src.relative_to(examples)
        dest = out / "report" / str(rel).replace("/", "__")
        with scratch() as tmp:
            work = Path(tmp) / "w"
            shutil.copytree(src, work)
            rep = Path(tmp) / "rep"
            text = run_cli("report.py", [str(work), "--out", str(rep)], Path(tmp))
            if rep.is_dir():
                shutil.copytree(rep, dest)  # report.md and its figures
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "stdout.txt").write_text(text)


def comparison(examples: Path, out: Path) -> None:
    """One multi-workdir report (the comparison section) over every example workdir."""
    dest = out / "report" / "comparison"
    with scratch() as tmp:
        works = []
        for i, results in enumerate(sorted(examples.rglob("results.json"))):
            works.append(Path(tmp) / f"w{i}")
            shutil.copytree(results.parent, works[-1])
        rep = Path(tmp) / "rep"
        text = run_cli("report.py", [*map(str, works), "--out", str(rep)], Path(tmp))
        if rep.is_dir():
            shutil.copytree(rep, dest)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "stdout.txt").write_text(text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="new folder for the snapshot, e.g. /tmp/before")
    p.add_argument("--configs", type=Path, default=ROOT.parent / "shared" / "configs",
                   help="folder of <name>/config.json (default ../shared/configs)")
    p.add_argument("--examples", type=Path, default=None,
                   help="folder of committed example workdirs (default: examples/ or references/examples/)")
    args = p.parse_args()
    if args.out.exists():
        p.error(f"{args.out} exists; give a new folder")
    examples = args.examples or next(
        (d for d in (ROOT / "examples", ROOT / "references" / "examples") if d.is_dir()), None)
    args.out.mkdir(parents=True)
    previews(args.configs, args.out)
    dry_runs(args.out)
    if examples is not None:
        reports(examples, args.out)
        comparison(examples, args.out)
    print(f"snapshot written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
