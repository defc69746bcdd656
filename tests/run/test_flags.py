"""The run flags: validate_args turns a parsed Namespace into a checked RunRequest."""

from __future__ import annotations

import argparse
import dataclasses
import os

import pytest

from benchmark_model_kernels.errors import UsageError
from benchmark_model_kernels.run import flags


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    flags.add_run_arguments(p)
    return p.parse_args(list(argv))


def test_dry_run_request_holds_the_checked_flags(tmp_path):
    req = flags.validate_args(parse("--workdir", str(tmp_path / "w"), "--dry_run", "--assume_cc", "9.0",
                                    "--ms", "1", "8", "--dtypes", "fp8", "--num_iters", "7"))
    assert (req.ms, req.dtypes, req.backends) == ((1, 8), ("fp8",), None)
    assert req.workdir == os.path.abspath(tmp_path / "w") and req.dry_run and not req.resume
    assert req.gpu == ("assumed sm_90", (9, 0)) and req.flashinfer_repo is None
    assert req.settings.num_iters == 7
    assert req.settings.autotune_cache == os.path.join(req.workdir, "autotune_cache.json")
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.ms = (2,)  # type: ignore[misc]


def test_defaults_sweep_default_ms_and_every_recipe(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    req = flags.validate_args(parse("--workdir", str(tmp_path), "--dry_run", "--backends", "torch"))
    assert req.ms == flags.DEFAULT_MS and req.dtypes == ("bf16", "fp8", "nvfp4")
    assert req.backends == ("torch",) and req.gpu is None


def test_parse_cc():
    assert flags.parse_cc("10.0") == (10, 0)
    with pytest.raises(UsageError, match="--assume_cc=nine: give MAJOR.MINOR"):
        flags.parse_cc("nine")
