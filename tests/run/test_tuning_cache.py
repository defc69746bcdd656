"""run/tuning_cache.py and its use by the run flags: without --autotune_cache a run on a known GPU
keeps its tuning per user and environment (so a new workdir reuses it); elsewhere in its workdir."""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run import flags, tuning_cache

H200 = "NVIDIA H200"


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "benchmark-model-kernels" / "autotune"


def test_the_file_is_named_by_what_decides_a_tuning(user_cache, monkeypatch):
    monkeypatch.setattr(tuning_cache, "dist_version", lambda name: "2.13.0")
    path = tuning_cache.default_autotune_cache(H200, "0.6.18.post1", RunSettings())
    assert path == str(user_cache / "NVIDIA_H200" / "flashinfer-0.6.18.post1_torch-2.13.0_tactics-8_buckets-timed.json")
    others = {tuning_cache.default_autotune_cache(gpu, version, settings) for gpu, version, settings in (
        ("NVIDIA H100 80GB HBM3", "0.6.18.post1", RunSettings()),
        (H200, "0.7.2.post1", RunSettings()),
        (H200, "0.6.18.post1", RunSettings(autotune_tactics=0)),
        (H200, "0.6.18.post1", RunSettings(autotune_buckets="all")))}
    assert len(others) == 4 and path not in others
    assert "tactics-all" in tuning_cache.default_autotune_cache(H200, "x", RunSettings(autotune_tactics=0))


def _args(tmp_path, *extra):
    from benchmark_model_kernels.cli_builtin import build_parser

    return build_parser().parse_args(["--workdir", str(tmp_path / "w"), "--ms", "8", "--nks", "128,128,x",
                                      "--backends", "torch", *extra])


def test_a_run_on_a_known_gpu_tunes_into_the_per_user_file(tmp_path, user_cache, monkeypatch):
    monkeypatch.setattr(flags, "_target_gpu", lambda args: (H200, (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    one = flags.validate_args(_args(tmp_path))
    assert os.path.dirname(one.settings.autotune_cache) == str(user_cache / "NVIDIA_H200")
    other = flags.validate_args(_args(tmp_path / "second"))  # a new workdir: the same file
    assert other.settings.autotune_cache == one.settings.autotune_cache
    capped = flags.validate_args(_args(tmp_path / "third", "--autotune_tactics", "all"))
    assert capped.settings.autotune_cache != one.settings.autotune_cache
    given = str(tmp_path / "mine.json")
    assert flags.validate_args(_args(tmp_path / "fourth", "--autotune_cache", given)).settings.autotune_cache == given


def test_without_a_known_gpu_the_cache_stays_in_the_workdir(tmp_path, user_cache, monkeypatch):
    monkeypatch.setattr(flags, "_target_gpu", lambda args: None)
    request = flags.validate_args(_args(tmp_path))
    assert request.settings.autotune_cache == os.path.join(str(tmp_path / "w"), "autotune_cache.json")
    assert not user_cache.exists()


def test_a_per_user_file_another_flashinfer_stamped_is_refused_before_the_run(tmp_path, user_cache, monkeypatch):
    monkeypatch.setattr(flags, "_target_gpu", lambda args: (H200, (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    path = flags.validate_args(_args(tmp_path)).settings.autotune_cache
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:  # e.g. written by hand: FlashInfer would ignore it and never save
        f.write('{"_metadata": {"flashinfer_version": "0.6.17", "gpu": "NVIDIA H200"}}')
    with pytest.raises(flags.UsageError, match="flashinfer_version 0.6.17"):
        flags.validate_args(_args(tmp_path / "again"))


def test_a_resumed_workdir_that_kept_its_own_file_goes_on_with_it(tmp_path, user_cache, monkeypatch):
    monkeypatch.setattr(flags, "_target_gpu", lambda args: (H200, (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / "results.json").write_text('{"schema_version": 1, "rows": []}')
    (wd / "autotune_cache.json").write_text('{"_metadata": {"flashinfer_version": "0.6.18.post1"}}')
    request = flags.validate_args(_args(tmp_path, "--resume"))
    assert request.settings.autotune_cache == str(wd / "autotune_cache.json")


def test_a_per_user_path_that_is_not_flashinfers_file_is_refused(tmp_path, user_cache, monkeypatch):
    monkeypatch.setattr(flags, "_target_gpu", lambda args: (H200, (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    path = tuning_cache.default_autotune_cache(H200, "0.6.18.post1", RunSettings())
    os.makedirs(os.path.dirname(path))
    os.symlink(str(tmp_path / "elsewhere.json"), path)
    with pytest.raises(flags.UsageError, match="per-user default.*symbolic link"):
        flags.validate_args(_args(tmp_path))
