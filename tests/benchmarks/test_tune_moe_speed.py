"""benchmarks/tune_moe_speed.py on a CPU with the stand-in kernel timings (tests/helpers_tune_moe.py):
the phases it adds up and the record it writes; the seconds themselves are not checked."""

from __future__ import annotations

import importlib.util
import json
import os

from benchmark_model_kernels.kernels import moe_tuning as mt
from benchmark_model_kernels.run import tune_moe as tm
from helpers_tune_moe import H200, StandIn
from support import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("tune_moe_speed", os.path.join(ROOT, "benchmarks",
                                                                                 "tune_moe_speed.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_shape_at_its_keys_is_timed_by_phase_and_recorded(tmp_path, monkeypatch, capsys):
    StandIn.made, StandIn.measured, StandIn.fail_at = [], [], set()
    monkeypatch.setattr(tm, "real_gpu", lambda: tm.Gpu(H200, "3.5.0", StandIn))
    monkeypatch.setattr(mt, "TritonKeyBench", StandIn)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "kept"))
    rc = _script().main(["--keys", "1", "8", "64", "--out", str(tmp_path / "out"), "--target_s", "600"])
    assert rc == 0, capsys.readouterr()
    record = json.loads((tmp_path / "out" / "speed.json").read_text())
    assert record["keys"] == [1, 8, 64] and record["gpu"] == H200 and record["within_target"]
    assert record["configs_searched"] == len(StandIn.measured) > 0 and record["final_timings"] >= 3
    assert set(record["seconds_by_phase"]) == {"inputs", "search", "final", "check"}
    assert os.environ["TRITON_CACHE_DIR"] != str(tmp_path / "kept")  # a cold run: a fresh Triton cache
    assert (tmp_path / "out" / "E=128,N=768,device_name=NVIDIA_H200.json").exists()
    assert "within the 600 s target" in capsys.readouterr().out
