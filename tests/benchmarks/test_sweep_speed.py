"""benchmarks/sweep_speed.py end to end on a CPU: the real CLI in subprocesses, the stand-in
driver and a stand-in GPU (synthetic numbers: only the plumbing and the record are checked, the
times are not)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys

from support import ROOT, write_tiny_llama

FAKE_REPO = os.path.join(ROOT, "tests", "fixtures", "fake_flashinfer")
STAND_IN_GPU = os.path.join(ROOT, "tests", "fixtures", "stand_in_gpu")

def test_warm_then_cached_records_the_runs_and_checks_the_copies(tmp_path):
    model = write_tiny_llama(tmp_path / "tiny", num_hidden_layers=1)
    out = tmp_path / "out"
    (out / "cold").mkdir(parents=True)
    # What an earlier --runs cold leaves: FlashInfer's stamped autotune cache (the stand-in driver
    # saves none; wildcard stamps, as FlashInfer writes where it cannot tell, match any machine).
    (out / "cold" / "autotune_cache.json").write_text(
        json.dumps({"_metadata": {"flashinfer_version": "*", "gpu": "*"}}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([STAND_IN_GPU, os.path.join(ROOT, "scripts")])}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sweep_speed.py"),
                           "--flashinfer_repo", FAKE_REPO, "--model", str(model), "--ms", "8",
                           "--out", str(out), "--runs", "warm", "cached", "--budget_s", "300"],
                          capture_output=True, text=True, env=env, timeout=300)
    record = json.load(open(out / "sweep_speed_warm_cached.json"))
    warm, cached = record["runs"]
    assert [warm["label"], cached["label"]] == ["warm", "cached"], proc.stderr
    assert warm["exit_code"] == cached["exit_code"] == 0 and warm["complete"] and cached["complete"]
    assert "--cache" in cached["command"] and str(out / "result_cache") in cached["command"]
    assert cached["all_ok_rows_copied"] and cached["numbers_equal_warm"]
    assert cached["rows_copied_from_cache"] >= cached["rows"]["ok"] > 0
    assert warm["rows"] == cached["rows"]
    assert f"cached: {cached['wall_s']:.0f} s (target <= 10 s" in proc.stdout
    assert proc.returncode == (0 if warm["met"] and cached["met"] else 1)


# ------------------------------------------------------------------ README's own commands
def _sweep_speed():
    spec = importlib.util.spec_from_file_location("sweep_speed_under_test",
                                                  os.path.join(ROOT, "benchmarks", "sweep_speed.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_commands() -> list[list[str]]:
    """Every `python scripts/benchmark_model.py ...` command of README.md's bash blocks."""
    text = open(os.path.join(ROOT, "README.md")).read()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["python", "scripts/benchmark_model.py"]:
                commands.append(words[2:])
    return commands


def test_the_readme_runs_are_the_readmes_steps_4_and_5_word_for_word():
    ss = _sweep_speed()
    commands = _readme_commands()
    assert list(ss.README_PLUMBING) in commands and list(ss.README_FULL) in commands


def test_a_readme_run_swaps_only_the_checkout_and_the_workdir(tmp_path):
    ss = _sweep_speed()
    args = argparse.Namespace(flashinfer_repo="/fi", out=str(tmp_path))
    cold = ss.run_argv("readme_plumbing_cold", args)
    workdir = str(tmp_path / "readme_plumbing_cold")
    assert cold == [w.replace("~/flashinfer", "/fi").replace("workdirs/plumbing", workdir) for w in ss.README_PLUMBING]
    # Warm: every row timed again (as written, the result cache would copy them all).
    assert ss.run_argv("readme_full_warm", args)[-1] == "--no_cache"
    assert ss.run_argv("readme_full_cold", args, resume=True)[-1] == "--resume"
    assert list(ss.TARGET_S)[-4:] == ["readme_plumbing_cold", "readme_full_cold", "readme_plumbing_warm",
                                      "readme_full_warm"]  # the order they run in: README's, cold first


def test_a_stopped_readme_run_is_continued_and_a_stray_workdir_refused(tmp_path):
    ss = _sweep_speed()
    out = tmp_path / "out"
    (out / "readme_full_cold").mkdir(parents=True)
    argv = ["--flashinfer_repo", FAKE_REPO, "--out", str(out), "--runs", "readme_full_cold"]
    assert ss.main(argv) == 2  # a workdir without the record of the run that made it
    part = {"label": "readme_full_cold", "parts": [{"wall_s": 500.0, "exit_code": 143, "stopped_at_limit": True}]}
    (out / "sweep_speed_readme_full_cold.json").write_text(json.dumps({"runs": [part]}))
    assert ss.earlier_record(str(out), "readme_full_cold") == part
    assert ss.earlier_record(str(out), "readme_full_warm") is None
    (out / "user_cache").mkdir()
    assert ss.main(["--flashinfer_repo", FAKE_REPO, "--out", str(out), "--runs", "readme_plumbing_cold"]) == 2
