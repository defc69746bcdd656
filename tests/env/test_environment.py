"""environment.py: version rules, the cupti-python fix, checkout facts read from real files, and a
collect() that never raises (GPU parts run only on a GPU machine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmark_model_kernels.doctor import environment as env
from benchmark_model_kernels.env import gpu, versions
from support import has_cuda, requires_gpu

SPEC_VERSION_KEYS = {"python", "torch", "cuda_runtime", "driver", "flashinfer_wheel",
                     "flashinfer_checkout", "flashinfer_checkout_commit", "cupti_python",
                     "transformers", "tool"}
SPEC_GPU_KEYS = {"name", "compute_capability", "sm_count", "memory_gb", "clocks_mhz",
                 "power_limit_w", "utilization_pct", "processes"}


# ---------------------------------------------------------------- version rules


@pytest.mark.parametrize("raw, want", [("13.0.85", "13.0"), ("13", "13.0"), ("12.8", "12.8"),
                                       (" 13.4.0rc1", "13.4"), ("", None), (None, None),
                                       ("cu130", None)])
def test_major_minor(raw, want):
    assert versions.major_minor(raw) == want


@pytest.mark.parametrize("wheel, checkout, want", [
    ("0.6.17", "0.6.17", True),
    ("0.6.17+cu130", "v0.6.17", True),
    ("0.6.17", "0.6.16", False),
    ("0.6.17", "0.6.17rc1", False),
    ("0.6.17", None, None),
    (None, "0.6.17", None),
])
def test_versions_match(wheel, checkout, want):
    assert versions.versions_match(wheel, checkout) is want


@pytest.mark.parametrize("a, b, want", [
    ("a0a6b019b9b27d49d209f85d028a1ae5a9b347d7", "a0a6b019b9b27d49d209f85d028a1ae5a9b347d7", True),
    ("a0a6b019b9b27d49d209f85d028a1ae5a9b347d7", "a0a6b019", True),
    ("a0a6b019b9b27d49d209f85d028a1ae5a9b347d7", "b0a6b019", False),
    ("a0a6b01", "a0a6b01", True),
    ("a0a6", "a0a6", False),  # too short to call equal
    ("unknown", "a0a6b019", None),
    (None, "a0a6b019", None),
])
def test_commits_match(a, b, want):
    assert versions.commits_match(a, b) is want


# ---------------------------------------------------------------- the cupti-python fix


@pytest.mark.parametrize("runtime, driver, want", [
    # The H200: torch cu130, driver 580.159 (CUDA 13.0); 13.4 fails there, 13.0.x works.
    ("13.0", "13.0", "pip install 'cupti-python==13.0.*'"),
    # A newer runtime than the driver: CUPTI must not be newer than the driver's CUDA.
    ("13.4", "13.0", "pip install 'cupti-python==13.0.*'"),
    ("13.2", "13.4", "pip install 'cupti-python==13.2.*'"),
    ("13.0.85", None, "pip install 'cupti-python==13.0.*'"),
    (None, "13.1", "pip install 'cupti-python==13.1.*'"),
])
def test_cupti_fix_command(runtime, driver, want):
    assert versions.cupti_fix_command(runtime, driver) == want


def test_cupti_fix_on_cuda12_says_no_pip_fix_exists():
    fix = versions.cupti_fix_command("12.8", "12.9")
    assert "cupti-python>=13" in fix and "12.8" in fix and "--allow_cuda_events" in fix
    assert not fix.startswith("pip install")


def test_cupti_fix_unknown_stack_is_still_a_command():
    assert versions.cupti_fix_command(None, None).startswith("pip install 'cupti-python>=13'")


# ---------------------------------------------------------------- FlashInfer checkout facts


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, "GIT_AUTHOR_NAME": "t",
                                          "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                          "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    """A real git checkout shaped like FlashInfer's: benchmarks/flashinfer_benchmark.py, version.txt."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "flashinfer"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "flashinfer_benchmark.py").write_text("print('driver')\n")
    (repo / "version.txt").write_text("0.6.17\n")
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


def test_checkout_facts_from_a_real_git_repo(checkout):
    facts = versions.flashinfer_checkout(str(checkout))
    assert facts["exists"] is True
    assert facts["driver"] == str(checkout / "benchmarks" / "flashinfer_benchmark.py")
    assert facts["version"] == "0.6.17"
    assert facts["commit"] == _git(checkout, "rev-parse", "HEAD")


def test_commit_read_from_packed_refs_and_detached_head(checkout):
    first = _git(checkout, "rev-parse", "HEAD")
    (checkout / "x.txt").write_text("x")
    _git(checkout, "add", ".")
    _git(checkout, "commit", "-q", "-m", "two")
    second = _git(checkout, "rev-parse", "HEAD")
    _git(checkout, "pack-refs", "--all")
    assert not (checkout / ".git" / "refs" / "heads" / "main").exists()
    assert versions.git_head_commit(str(checkout)) == second
    _git(checkout, "checkout", "-q", first)
    assert versions.git_head_commit(str(checkout)) == first


def test_checkout_without_git_or_version_txt(tmp_path):
    """The H200 bundle's checkout: only benchmarks/, so version and commit are unknown (None)."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "flashinfer_benchmark.py").write_text("")
    facts = versions.flashinfer_checkout(str(tmp_path))
    assert facts["driver"] and facts["version"] is None and facts["commit"] is None


def test_checkout_missing_and_not_given(tmp_path):
    missing = versions.flashinfer_checkout(str(tmp_path / "nope"))
    assert missing["exists"] is False and missing["driver"] is None
    assert versions.flashinfer_checkout(None)["path"] is None


def test_wheel_commit_read_without_importing(tmp_path, monkeypatch):
    if versions.dist_version("flashinfer-python", "flashinfer"):
        pytest.skip("a real flashinfer is installed; this test plants a stand-in package")
    pkg = tmp_path / "flashinfer"
    pkg.mkdir()
    # Importing this package would fail loudly: the probe must only read files.
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "_build_meta.py").write_text('__version__ = "0.6.17"\n'
                                        '__git_commit__ = "a0a6b019b9b27d49d209f85d028a1ae5a9b347d7"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    wheel = versions.flashinfer_wheel()
    assert wheel == {"version": "0.6.17", "commit": "a0a6b019b9b27d49d209f85d028a1ae5a9b347d7",
                     "path": str(pkg)}
    assert "flashinfer" not in sys.modules


# ---------------------------------------------------------------- warnings and other probes


def test_version_warnings_name_the_mismatch():
    v = {"flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.6.16",
         "cupti_python": "13.4.0", "cuda_runtime": "13.0", "driver_cuda": "13.0"}
    out = env.version_warnings(v, "/x/flashinfer")
    assert any("0.6.17 != checkout 0.6.16" in w for w in out)
    assert any("cupti-python 13.4.0" in w and "pip install 'cupti-python==13.0.*'" in w for w in out)


def test_version_warnings_unknown_checkout_and_clean_set_up():
    unknown = env.version_warnings({"flashinfer_wheel": "0.6.17", "flashinfer_checkout": None},
                                   "/x/fi")
    assert len(unknown) == 1 and "unknown" in unknown[0]
    clean = {"flashinfer_wheel": "0.6.17", "flashinfer_checkout": "0.6.17",
             "flashinfer_wheel_commit": "a0a6b019b9", "flashinfer_checkout_commit": "a0a6b019b9",
             "cupti_python": "13.0.1", "cuda_runtime": "13.0"}
    assert env.version_warnings(clean, "/x/fi") == []


@pytest.mark.parametrize("visible, index, want", [
    (None, 1, 1), ("", 0, 0), ("2,3", 1, 3), ("GPU-abc,GPU-def", 0, "GPU-abc"),
])
def test_nvml_index_follows_cuda_visible_devices(monkeypatch, visible, index, want):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert gpu._nvml_index(index) == want


def test_nvml_index_out_of_range(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(IndexError):
        gpu._nvml_index(1)


def test_sm_count_from_driver_needs_no_torch():
    count = gpu.sm_count_from_driver(0)
    if has_cuda():
        import torch

        assert count == torch.cuda.get_device_properties(0).multi_processor_count
    else:
        assert count is None


def test_nvcc_info_runs_the_nvcc_it_finds(tmp_path, monkeypatch):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("FLASHINFER_NVCC", str(nvcc))
    info = gpu.nvcc_info()
    assert info["nvcc"] == str(nvcc) and info["nvcc_version"] == "12.4"


def test_collect_never_raises_and_has_the_documented_keys(tmp_path):
    record = env.collect(str(tmp_path / "no-such-checkout"))
    assert {"gpu", "versions", "warnings"} <= set(record)
    assert SPEC_VERSION_KEYS <= set(record["versions"])
    assert SPEC_GPU_KEYS <= set(record["gpu"])
    assert set(record["gpu"]["clocks_mhz"]) == {"sm_max", "mem_max", "sm_current"}
    assert record["versions"]["python"].count(".") == 2
    assert isinstance(record["warnings"], list)
    json.dumps(record)  # goes into results.json as is
    if not has_cuda():
        assert record["gpu"]["error"] and record["gpu"]["name"] is None


def test_probe_timer_without_gpu_reports_instead_of_raising():
    if has_cuda():
        pytest.skip("CPU-only behaviour")
    out = env.probe_timer(0)
    assert out["timer"] is None and out["error"]


@requires_gpu
def test_probe_timer_on_gpu_names_the_timer():
    pytest.importorskip("flashinfer")
    out = env.probe_timer(0)
    assert out["error"] is None, out
    assert out["timer"] in ("cupti", "cuda_graph", "cuda_events")
    assert out["median_us"] and out["median_us"] > 0
    if out["timer"] != "cupti":
        assert "Falling back to CUDA events" in out["warning"]


@requires_gpu
def test_collect_on_gpu_fills_the_gpu():
    record = env.collect(probe=True)
    gpu = record["gpu"]
    assert gpu["error"] is None and gpu["name"]
    assert gpu["compute_capability"].count(".") == 1 and gpu["sm_count"] > 0
    assert record["versions"]["driver"] and record["versions"]["cuda_runtime"]
    assert "timer_probe" in record


@pytest.mark.parametrize("version, tag, line", [
    ("0.6.17", "v0.6.17", "0.6.17"),
    ("0.6.18.post1", "v0.6.18.post1", "0.6.18"),
    ("0.6.18rc7", "v0.6.18rc7", "0.6.18"),
    ("0.7.4+cu130", "v0.7.4", "0.7"),
    ("0.7.0.dev20260901", None, "0.7"),
    ("0.6.16.post4", "v0.6.16.post4", None),
    ("0.8.0", "v0.8.0", None),
])
def test_release_tags_and_supported_lines(version, tag, line):
    assert versions.release_tag(version) == tag
    assert versions.supported_line(version) == line


def test_companions_and_the_download_setting_are_recorded(monkeypatch):
    monkeypatch.delenv("FLASHINFER_NO_DOWNLOAD", raising=False)
    record = env.collect(None)
    assert record["no_download"] == {"value": "1", "defaulted": True}
    v = record["versions"]
    assert {"flashinfer_cubin", "flashinfer_jit_cache", "flashinfer_checkout_tags"} <= set(v)
    assert v["flashinfer_cubin"] == versions.dist_version("flashinfer-cubin")
    monkeypatch.setenv("FLASHINFER_NO_DOWNLOAD", "")
    assert env.collect(None)["no_download"] == {"value": "", "defaulted": False}
