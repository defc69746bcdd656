"""benchmarks/gpus_speed.py: the row comparison it judges a multi-GPU run by, and the whole script on
a CPU (the real CLI in subprocesses, the stand-in driver and stand-in GPUs: plumbing only)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from support import ROOT, write_tiny_llama

FAKE_REPO = os.path.join(ROOT, "tests", "fixtures", "fake_flashinfer")
STAND_IN_GPU = os.path.join(ROOT, "tests", "fixtures", "stand_in_gpu")
SCRIPT = os.path.join(ROOT, "benchmarks", "gpus_speed.py")
_spec = importlib.util.spec_from_file_location("gpus_speed", SCRIPT)
gpus_speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpus_speed)


def test_ok_rows_agree_within_5_percent_or_inside_the_others_p10_p90():
    row = {"median_us": 100.0, "p10_us": 90.0, "p90_us": 130.0}
    assert gpus_speed.same_number({"median_us": 104.9}, row)
    assert gpus_speed.same_number({"median_us": 125.0}, row)  # inside row's p10-p90
    assert not gpus_speed.same_number({"median_us": 131.0, "p10_us": 120.0, "p90_us": 140.0},
                                      {"median_us": 100.0, "p10_us": 95.0, "p90_us": 110.0})
    assert gpus_speed.same_number(row, {"median_us": 120.0, "p10_us": 99.0, "p90_us": 121.0})


def test_the_script_compares_a_two_gpu_run_with_a_one_gpu_run(tmp_path):
    model = write_tiny_llama(tmp_path / "tiny", num_hidden_layers=1)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([STAND_IN_GPU, os.path.join(ROOT, "scripts")])}
    proc = subprocess.run([sys.executable, SCRIPT, "--flashinfer_repo", FAKE_REPO, "--models", str(model),
                           "--ms", "8", "--out", str(out), "--warmup"],
                          capture_output=True, text=True, env=env, timeout=300)
    record = json.load(open(out / "gpus_speed.json"))
    two, one = record["runs"]
    assert (two["gpus"], one["gpus"]) == ("0,1", "0") and two["exit_code"] == one["exit_code"] == 0, proc.stderr
    assert two["comparison"]["same"] and two["comparison"]["ok_rows"] > 0
    assert "rows the same" in proc.stdout
    assert record["warmup"]["exit_code"] == 0 and "--no_autotune" in record["warmup"]["command"]
    assert proc.returncode == (0 if two["met"] else 1)
