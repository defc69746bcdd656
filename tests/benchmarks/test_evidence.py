"""benchmarks/evidence.py on a CPU: recipes of `python -c` steps run through the real CLI (a step
over its limit is stopped, a spent budget skips the rest, files are collected and summarised),
and every committed recipe of benchmarks/evidence/ parses, is valid bash and names files that
exist. No assertion depends on how long anything took."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile

import pytest

from support import ROOT

pytest.importorskip("tomllib")  # benchmarks/evidence.py needs Python 3.11

SCRIPT = os.path.join(ROOT, "benchmarks", "evidence.py")
_spec = importlib.util.spec_from_file_location("evidence_under_test", SCRIPT)
evidence = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = evidence  # dataclasses look their module up
_spec.loader.exec_module(evidence)

PY = shlex.quote(sys.executable)
#: Blocks for ever: reads a pipe whose write end it holds itself.
BLOCKS = f"{PY} -c 'import os; r, w = os.pipe(); os.read(r, 1)'"


def _toml_string(text: str) -> str:
    return "'''\n" + text + "\n'''"


def _write_recipe(path, steps, **top) -> str:
    lines = ['description = "a test recipe"']
    top.setdefault("budget_s", 300)
    for key, value in top.items():
        lines.append(f"{key} = {_toml_string(value) if key == 'prelude' else json.dumps(value)}")
    for step in steps:
        lines.append("[[steps]]")
        for key, value in step.items():
            lines.append(f"{key} = {_toml_string(value) if key in ('run', 'when') else json.dumps(value)}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _run(recipe: str, out, *flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, recipe, str(out), *flags], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, cwd=ROOT)


def _summary(out) -> dict:
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def test_a_recipe_of_python_commands_runs_collects_and_summarises(tmp_path):
    stand_in_bin = tmp_path / "bin"  # a stand-in nvidia-smi: only that the runner asks it is checked
    stand_in_bin.mkdir()
    (stand_in_bin / "nvidia-smi").write_text('#!/bin/sh\necho "asked: $*"\n')
    (stand_in_bin / "nvidia-smi").chmod(0o755)
    write = ("import os; d = os.path.join(os.environ['WORK'], 'run1'); os.makedirs(d); "
             "open(os.path.join(d, 'results.json'), 'w').write('{}'); open(os.path.join(d, 'skip.bin'), 'w')")
    recipe = _write_recipe(tmp_path / "r.toml", [
        {"name": "hello", "limit_s": 60, "run": f"{PY} -c \"import sys; print('out', sys.argv[1]); "
                                                 f"print('err', file=sys.stderr)\" \"$GREETING\""},
        {"name": "write", "limit_s": 60, "run": f'{PY} -c "{write}"'},
        {"name": "budget", "limit_s": 50, "run": f"{PY} -c \"import os; print(os.environ['STEP_LIMIT_S'], "
                                                  "int(os.environ['BUDGET_LEFT_S']) <= 300)\""},
        {"name": "exit3", "limit_s": 60, "ok_rc": [3], "run": f"{PY} -c 'raise SystemExit(3)'"},
        {"name": "never", "limit_s": 60, "when": "false", "run": f"{PY} -c 'open(\"never_ran\", \"w\")'"},
    ], prelude="GREETING=hi-from-prelude", workdir=str(tmp_path / "work"), collect=["**/results.json"])
    out, tar = tmp_path / "out", tmp_path / "out.tar.gz"
    proc = _run(recipe, out, "--tar", str(tar), env={"PATH": f"{stand_in_bin}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "hello.stdout.txt").read_text() == "out hi-from-prelude\n"
    assert (out / "hello.stderr.txt").read_text() == "err\n"
    assert (out / "budget.stdout.txt").read_text() == "50 True\n"
    assert (out / "run1" / "results.json").read_text() == "{}" and not (out / "run1" / "skip.bin").exists()
    assert (out / "gpu_after.txt").read_text() == "asked: --query-compute-apps=pid,name,used_memory --format=csv\n"
    summary = _summary(out)
    steps = {s["step"]: s for s in summary["steps"]}
    assert [s["step"] for s in summary["steps"]] == ["hello", "write", "budget", "exit3", "never"]
    assert steps["hello"]["rc"] == 0 and steps["hello"]["timed_out"] is False
    assert "$GREETING" in steps["hello"]["command"]
    assert steps["exit3"]["rc"] == 3 and steps["exit3"]["as_expected"]
    assert steps["never"]["rc"] is None and steps["never"]["skipped"] == "when: exit 1"
    assert not os.path.exists(os.path.join(ROOT, "never_ran"))
    assert summary["collected"] == ["run1/results.json"] and summary["gpu_after"] == "gpu_after.txt"
    assert all(isinstance(s["wall_s"], float) for s in summary["steps"])
    with tarfile.open(tar) as archive:
        names = set(archive.getnames())
    assert {"out/summary.json", "out/hello.stdout.txt", "out/run1/results.json", "out/gpu_after.txt"} <= names
    assert "hello: rc=0" in proc.stdout and "    out hi-from-prelude" in proc.stdout
    assert "5 of 5 steps as expected" in proc.stdout


def test_a_step_over_its_limit_is_stopped_and_recorded_as_timed_out(tmp_path):
    recipe = _write_recipe(tmp_path / "r.toml", [
        {"name": "blocks", "limit_s": 1, "grace_s": 1, "run": BLOCKS},
        {"name": "after", "limit_s": 60, "run": f"{PY} -c 'print(\"after ran\")'"},
    ], min_step_s=1)
    out = tmp_path / "out"
    proc = _run(recipe, out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    blocks, after = _summary(out)["steps"]
    assert blocks["timed_out"] is True and blocks["rc"] == 128 + 15 and not blocks["as_expected"]
    assert after["rc"] == 0 and (out / "after.stdout.txt").read_text() == "after ran\n"
    assert "blocks: rc=143 TIMED OUT" in proc.stdout and "(not: blocks)" in proc.stdout


def test_a_spent_budget_skips_the_later_steps(tmp_path):
    marker = tmp_path / "later_ran"
    recipe = _write_recipe(tmp_path / "r.toml", [
        {"name": "takes_all", "limit_s": 1000, "grace_s": 1, "run": BLOCKS},
        {"name": "later", "limit_s": 60, "run": f"{PY} -c 'open({str(marker)!r}, \"w\")'"},
    ], budget_s=2, min_step_s=1)
    out = tmp_path / "out"
    proc = _run(recipe, out)
    assert proc.returncode == 1
    takes_all, later = _summary(out)["steps"]
    assert takes_all["timed_out"] is True and takes_all["limit_s"] <= 2
    assert later["skipped"] == "budget spent" and later["rc"] is None and not marker.exists()
    assert "later: skipped, budget spent" in proc.stdout


def test_a_failed_required_step_skips_the_rest(tmp_path):
    recipe = _write_recipe(tmp_path / "r.toml", [
        {"name": "bundle", "limit_s": 60, "required": True, "run": "echo 'bundle missing: carry it'; exit 1"},
        {"name": "sweep", "limit_s": 60, "run": "echo ran"},
    ])
    out = tmp_path / "out"
    assert _run(recipe, out).returncode == 1
    bundle, sweep = _summary(out)["steps"]
    assert bundle["rc"] == 1 and sweep["skipped"] == "required step bundle did not succeed"


def test_a_reserve_is_kept_for_the_steps_after(tmp_path):
    recipe = _write_recipe(tmp_path / "r.toml", [
        {"name": "sweep", "limit_s": 1000, "reserve_s": 100, "run": 'echo "$STEP_LIMIT_S"'},
    ], budget_s=150)
    out = tmp_path / "out"
    assert _run(recipe, out).returncode == 0
    assert int((out / "sweep.stdout.txt").read_text()) <= 50


@pytest.mark.parametrize("change, field", [
    ({"steps": [{"name": "a", "limit_s": 10, "run": "true", "timeout": 3}]}, "steps[0].timeout"),
    ({"steps": [{"name": "a", "run": "true"}]}, "steps[0]"),
    ({"steps": [{"name": "a", "limit_s": 10, "run": "true", "signal": "HUP"}]}, "steps[0].signal"),
    ({"steps": [{"name": "a", "limit_s": 10, "run": "true"}, {"name": "a", "limit_s": 10, "run": "true"}]},
     "steps[1].name"),
    ({"budget_s": "long"}, "budget_s"),
    ({"min_step_s": 5, "steps": [{"name": "a", "limit_s": 2, "run": "true"}]}, "steps[0].limit_s"),
])
def test_a_bad_recipe_is_one_error_line_naming_the_key(tmp_path, change, field):
    table = {"description": "d", "budget_s": 10, "steps": [{"name": "a", "limit_s": 10, "run": "true"}], **change}
    with pytest.raises(evidence.UsageError) as e:
        evidence.parse_recipe("r", table, "r.toml")
    assert f"r.toml: {field}" in str(e.value) or f"r.toml.{field}" in str(e.value)


def test_an_earlier_runs_folder_and_a_tar_inside_the_folder_are_refused(tmp_path):
    recipe = _write_recipe(tmp_path / "r.toml", [{"name": "a", "limit_s": 60, "run": "true"}])
    out = tmp_path / "out"
    assert _run(recipe, out).returncode == 0
    again = _run(recipe, out)
    assert again.returncode == 2 and again.stderr.startswith("error: FOLDER=") and "summary.json" in again.stderr
    inside = _run(recipe, tmp_path / "new", "--tar", str(tmp_path / "new" / "x.tar.gz"))
    assert inside.returncode == 2 and inside.stderr.startswith("error: --tar=")
    assert not (tmp_path / "new").exists()


# Paths of this project a recipe's commands name: preceded by neither a word, a path nor a
# variable (`$FI/benchmarks/flashinfer_benchmark.py` is FlashInfer's).
_PROJECT_PATH = re.compile(r"(?<![\w/$.])((?:scripts|benchmarks|tests|examples)/[\w./-]*\w)")
_MODULE = re.compile(r"\bbenchmark_model_kernels(?:\.\w+)+")


@pytest.mark.parametrize("name", evidence.recipe_names())
def test_every_committed_recipe_parses_is_bash_and_names_what_exists(name):
    recipe = evidence.load_recipe(name)
    assert recipe.description.strip() and recipe.steps
    assert f"evidence.py {name} " in recipe.description, "the description shows how to run it"
    for step in recipe.steps:
        for body in filter(None, (step.run, step.when)):
            script = "set -uo pipefail\n" + recipe.prelude + "\n" + body
            check = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
            assert check.returncode == 0, f"{name}/{step.name}: {check.stderr}"
            for path in _PROJECT_PATH.findall(recipe.prelude + "\n" + body):
                assert os.path.exists(os.path.join(ROOT, path)), f"{name}/{step.name} names {path}"
            for module in _MODULE.findall(recipe.prelude + "\n" + body):
                assert importlib.util.find_spec(module) is not None, f"{name}/{step.name} imports {module}"


@pytest.mark.parametrize("name", [n for n in evidence.recipe_names()
                                  if "bytecode.sh" in evidence.load_recipe(n).prelude])
def test_a_machine_that_writes_no_bytecode_gets_it_under_the_workdir(name, tmp_path):
    # a container image's PYTHONDONTWRITEBYTECODE=1 would have every process compile torch's and
    # FlashInfer's sources again; a pip install keeps bytecode, so the recipe does too
    recipe = evidence.load_recipe(name)
    script = ("set -uo pipefail\n" + recipe.prelude + '\necho "${PYTHONDONTWRITEBYTECODE:-unset}|'
              '${PYTHONPYCACHEPREFIX:-unset}|$bytecode_env"')
    env = {**os.environ, "WORK": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"unset|{tmp_path}/pycache|PYTHONDONTWRITEBYTECODE=1"
