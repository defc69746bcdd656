"""benchmarks/sweep_speed.py end to end on a CPU: the real CLI in subprocesses, the stand-in
driver and a stand-in GPU (synthetic numbers: only the plumbing and the record are checked, the
times are not)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support import ROOT, write_tiny_llama

FAKE_REPO = os.path.join(ROOT, "tests", "fixtures", "fake_flashinfer")
STAND_IN_GPU = os.path.join(ROOT, "tests", "fixtures", "stand_in_gpu")

def test_warm_then_cached_records_the_runs_and_checks_the_copies(tmp_path):
    model = write_tiny_llama(tmp_path / "tiny", num_hidden_layers=1)
    out = tmp_path / "out"
    (out / "cold").mkdir(parents=True)
    (out / "cold" / "autotune_cache.json").write_text("")  # as an earlier --runs cold leaves it
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
