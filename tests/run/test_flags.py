"""The run flags: validate_args turns a parsed Namespace into a checked RunRequest."""

from __future__ import annotations

import argparse
import dataclasses
import os

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.run import flags, workdir


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


def test_a_gpu_name_states_its_memory_for_the_dry_run(tmp_path):
    """--assume_cc h200: the cases are planned for sm_90 and a 140.4 GiB GPU (the cells whose K/V
    does not fit are marked so); --assume_cc 9.0 states no memory."""
    named = flags.validate_args(parse("--workdir", str(tmp_path / "a"), "--dry_run", "--assume_cc", "h200"))
    assert named.gpu == ("assumed sm_90", (9, 0)) and named.gpu_memory_bytes == int(143771 / 1024 * 2**30)
    numbered = flags.validate_args(parse("--workdir", str(tmp_path / "b"), "--dry_run", "--assume_cc", "9.0"))
    assert numbered.gpu_memory_bytes is None


def test_defaults_sweep_default_ms_and_every_recipe(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    req = flags.validate_args(parse("--workdir", str(tmp_path), "--dry_run", "--backends", "torch"))
    assert req.ms == flags.DEFAULT_MS and req.dtypes == ("bf16", "fp8", "nvfp4")
    assert req.backends == ("torch",) and req.gpu is None


def test_parse_cc():
    assert flags.parse_cc("10.0") == (10, 0)
    with pytest.raises(UsageError, match="--assume_cc=9: give MAJOR.MINOR or a GPU name"):
        flags.parse_cc("9")
    with pytest.raises(UsageError, match="--assume_cc=nine: unknown GPU; known: "):
        flags.parse_cc("nine")  # a word is a GPU name (core/gpu_specs.py)


def test_cache_flags_default_to_the_user_cache_and_no_cache_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    wd = str(tmp_path / "w")
    base = ("--workdir", wd, "--backends", "torch")
    assert flags.validate_args(parse(*base)).cache_dir == str(tmp_path / "xdg" / "benchmark-model-kernels" / "results")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert flags.validate_args(parse(*base)).cache_dir == os.path.expanduser(
        "~/.cache/benchmark-model-kernels/results")
    assert flags.validate_args(parse(*base, "--cache", "~/c")).cache_dir == os.path.expanduser("~/c")
    assert flags.validate_args(parse(*base, "--no_cache")).cache_dir is None
    with pytest.raises(UsageError, match="--cache"):
        flags.validate_args(parse(*base, "--cache", "c", "--no_cache"))


def test_gpus_are_checked_before_the_run_and_pin_one_worker_each(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    names = {0: "NVIDIA H200", 1: "NVIDIA H200", 2: "NVIDIA H100 80GB HBM3"}
    monkeypatch.setattr(flags.devices, "nvml_names", lambda numbers: [names[n] for n in numbers])
    base = ("--workdir", str(tmp_path / "w"), "--backends", "torch")
    assert flags.validate_args(parse(*base)).devices is None
    assert flags.validate_args(parse(*base, "--gpus", "1,0")).devices == ("1", "0")
    with pytest.raises(UsageError, match="GPU 2 is a NVIDIA H100"):
        flags.validate_args(parse(*base, "--gpus", "0,2"))
    # A dry run starts no worker: nothing to pin, nothing to check.
    assert flags.validate_args(parse(*base, "--gpus", "0,2", "--dry_run")).devices is None


def test_an_autotune_cache_flashinfer_would_ignore_is_refused_before_the_run(tmp_path, monkeypatch):
    """FlashInfer neither loads nor saves a cache tuned by another FlashInfer version or GPU
    (autotune_file.py); the run says so instead of re-tuning every row silently."""
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(flags, "nvml_memory_bytes", lambda index=0: None, raising=False)
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    stale = tmp_path / "tuned.json"
    stale.write_text('{"_metadata": {"flashinfer_version": "0.6.17", "gpu": "NVIDIA H200"}}')
    base = ("--workdir", str(tmp_path / "w"), "--backends", "torch")
    with pytest.raises(UsageError) as e:
        flags.validate_args(parse(*base, "--autotune_cache", str(stale)))
    msg = str(e.value)
    assert msg.startswith(f"--autotune_cache={stale}") and "0.6.17 (here 0.6.18.post1)" in msg
    assert f"--autotune_cache {tmp_path / 'tuned'}-0.6.18.post1.json" in msg and "\n" not in msg
    # Without autotuning the file is not used; a dry run tunes nothing; a matching file is used.
    flags.validate_args(parse(*base, "--autotune_cache", str(stale), "--no_autotune"))
    flags.validate_args(parse(*base, "--autotune_cache", str(stale), "--dry_run"))
    stale.write_text('{"_metadata": {"flashinfer_version": "0.6.18.post1", "gpu": "NVIDIA H200"}}')
    flags.validate_args(parse(*base, "--autotune_cache", str(stale)))


def test_the_workdirs_own_stale_autotune_cache_is_refused_on_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / "results.json").write_text('{"schema_version": 1, "rows": []}')
    (wd / "autotune_cache.json").write_text('{"_metadata": {"flashinfer_version": "0.6.17"}}')
    with pytest.raises(UsageError, match="delete it .* or pass --autotune_cache with a new path"):
        flags.validate_args(parse("--workdir", str(wd), "--backends", "torch", "--resume"))


def test_a_sweep_checks_each_runs_own_autotune_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    top = tmp_path / "sweep"
    subs = [top / "a_tp1_ep1", top / "b_tp1_ep1"]
    workdir.make_workdir(str(top))  # a sweep's folder, as the CLI makes it
    for sub in subs:
        sub.mkdir(parents=True)
        (sub / "results.json").write_text('{"schema_version": 1, "rows": []}')
    (subs[1] / "autotune_cache.json").write_text('{"_metadata": {"gpu": "NVIDIA A100-SXM4-80GB"}}')
    with pytest.raises(UsageError, match="b_tp1_ep1/autotune_cache.json.*gpu NVIDIA A100-SXM4-80GB"):
        flags.validate_args(parse("--workdir", str(top), "--backends", "torch", "--resume"),
                            [str(s) for s in subs], resume_may_start_fresh=True)


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_autotune_cache_that_is_not_flashinfers_is_refused_before_anything(tmp_path, monkeypatch, dry_run):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(flags, "flashinfer_wheel", lambda: {"version": "0.6.18.post1"})
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama"}')
    base = ["--workdir", str(tmp_path / "w"), "--backends", "torch"] + (["--dry_run"] if dry_run else [])
    with pytest.raises(UsageError) as e:
        flags.validate_args(parse(*base, "--autotune_cache", str(config)))
    assert str(e.value).startswith(f"--autotune_cache={config}: is a JSON file without FlashInfer's _metadata "
                                   "stamp, so not an autotune cache FlashInfer saved; FlashInfer rewrites the file")
    assert config.read_text() == '{"model_type": "llama"}' and not (tmp_path / "w").exists()
    # The name of a file the run itself writes, inside its workdir, even before it exists.
    with pytest.raises(UsageError, match="is the name of a file the run writes in its --workdir"):
        flags.validate_args(parse(*base, "--autotune_cache", str(tmp_path / "w" / "results.json")))
    # --no_autotune never touches it: nothing to refuse.
    assert flags.validate_args(parse(*base, "--no_autotune", "--autotune_cache", str(config)))
    assert flags.validate_args(parse(*base, "--autotune_cache", str(tmp_path / "w" / "autotune_cache.json")))


def test_gpus_are_checked_as_a_list_in_a_dry_run_too(tmp_path):
    base = ("--workdir", str(tmp_path / "w"), "--dry_run", "--assume_cc", "9.0")
    for text, said in (("0,,1", "give CUDA device numbers separated by commas"), ("0,0", "names a GPU twice"),
                       ("0,", "give CUDA device numbers"), ("a", "give CUDA device numbers"),
                       ("-1", "give CUDA device numbers")):
        with pytest.raises(UsageError, match=said):
            flags.validate_args(parse(*base, "--gpus", text))
