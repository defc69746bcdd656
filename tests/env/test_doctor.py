"""The doctor: each verdict from probe results, the overall verdict, JSON shape, and the CLI on a
CPU-only machine (one plain sentence, exit 1, no traceback)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmark_model_kernels.doctor import doctor as d
from benchmark_model_kernels.env import versions
from support import ROOT, has_cuda

OWN_PID = 4242

#: Probe results as the H200 bundle produces them (driver 580.159 / CUDA 13.0, torch 2.11+cu130,
#: flashinfer 0.6.17, checkout with only benchmarks/), with cupti-python 13.0.1 working.
H200_GREEN = {
    "gpu": {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
            "memory_gb": 150.1, "memory_used_gb": 0.5,
            "clocks_mhz": {"sm_max": 1980, "mem_max": 3201, "sm_current": 345},
            "power_limit_w": 700, "utilization_pct": 0, "processes": [],
            "driver": "580.159", "driver_cuda": "13.0", "error": None},
    "wheel": {"version": "0.6.17", "commit": "a0a6b019b9b27d49d209f85d028a1ae5a9b347d7",
              "path": "/tmp/fi-site/flashinfer"},
    "checkout": {"path": "/repo/.devbundle/flashinfer", "exists": True,
                 "driver": "/repo/.devbundle/flashinfer/benchmarks/flashinfer_benchmark.py",
                 "version": None, "commit": None},
    "nvcc": {"nvcc": "/usr/local/cuda/bin/nvcc", "nvcc_version": "13.0", "ninja": "/usr/bin/ninja",
             "error": None},
    "env": {"FLASHINFER_NO_DOWNLOAD": "1", "FLASHINFER_CUDA_ARCH_LIST": "9.0a"},
    "torch_cuda": {"torch": "2.11.0+cu130", "cuda_build": "13.0", "available": True,
                   "device_count": 1, "sm_count": 132, "error": None},
    "stack": {"cuda_runtime": "13.0", "cuda_runtime_wheel": None, "nvidia_cuda_cupti": "13.0.85",
              "cupti_python": "13.0.1"},
    "timer_probe": {"timer": "cupti", "median_us": 6.1, "warning": None, "error": None},
    # The bundle installs cuda-tile 1.7.0 but no tileiras: its cutile rows failed on the compiler.
    "tileiras": {"tileiras": None, "found_in": None, "cuda_tile": "1.7.0",
                 "cuda_tile_importable": True},
}

FALLBACK_WARNING = ("CUPTI is not installed. Try 'pip install -U cupti-python'. Falling back to "
                    "CUDA events for benchmarking.")


def with_(probes, **changes):
    """A copy of `probes` with top-level sections updated (nested dicts merged one level)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in probes.items()}
    for k, v in changes.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def by_name(checks):
    return {c.name: c for c in checks}


def checks_of(probes):
    # check_idle inside run_checks uses the real pid; the fixtures list no process, so it is moot.
    return d.run_checks(probes)


# ---------------------------------------------------------------- the worked examples


def test_h200_bundle_all_green_except_the_unknown_checkout_version():
    checks = by_name(checks_of(H200_GREEN))
    assert [n for n, c in checks.items() if c.ok is False] == []
    # The bundle's checkout has no .git and no version.txt: a warning, not a failure.
    assert checks["flashinfer_version_match"].ok is None
    assert "no .git, no version.txt" in checks["flashinfer_version_match"].detail
    assert d.ready(list(checks.values()))
    assert d.verdict_line(list(checks.values())).startswith("READY")
    assert "NVIDIA H200, sm_90, 132 SMs" in checks["gpu"].detail


def test_h200_with_cupti_134_names_the_problem_and_the_fix():
    probes = with_(H200_GREEN, stack={"cupti_python": "13.4.0", "nvidia_cuda_cupti": "13.4.1"},
                   timer_probe={"timer": "cuda_graph", "warning": FALLBACK_WARNING})
    checks = checks_of(probes)
    cupti = by_name(checks)["cupti"]
    assert cupti.ok is False
    assert "fell back from CUPTI to CUDA events" in cupti.detail and "cupti-python 13.4.0" in cupti.detail
    # The failure says which part of the rule this stack breaks, and the rule itself.
    assert "cupti-python 13.4.0 is 13.4 but the CUDA runtime is 13.0" in cupti.detail
    assert "nvidia-cuda-cupti 13.4.1" in cupti.detail and versions.CUPTI_RULE in cupti.detail
    assert cupti.fix == "pip install 'cupti-python==13.0.*'"
    assert not d.ready(checks)
    assert d.verdict_line(checks) == ("NOT READY: 1 check(s) failed (cupti); fix them and run the "
                                      "doctor again.")
    text = d.format_checks(checks)
    assert "[FAIL] cupti:" in text and "fix: pip install 'cupti-python==13.0.*'" in text


# ---------------------------------------------------------------- single checks


def test_check_gpu_without_nvml():
    c = d.check_gpu({"error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found",
                     "name": None})
    assert c.ok is False
    assert c.detail == ("no NVIDIA GPU/driver found (NVML: NVMLError_LibraryNotFound: NVML Shared "
                        "Library Not Found)")
    assert "--print_only" in c.fix


def test_check_gpu_driver_present_but_no_pynvml():
    c = d.check_gpu({"error": "nvidia-ml-py (pynvml) is not importable (ModuleNotFoundError: x)",
                     "name": None, "driver_present": True})
    assert c.ok is False and "driver is present" in c.detail and "nvidia-ml-py" in c.fix


def test_check_idle_verdicts():
    gpu = H200_GREEN["gpu"]
    assert d.check_idle(gpu, OWN_PID).ok is True
    busy = {**gpu, "processes": [{"pid": 77, "name": "python", "used_memory_mb": 30000},
                                 {"pid": OWN_PID, "name": "me", "used_memory_mb": 500}],
            "utilization_pct": 97}
    c = d.check_idle(busy, OWN_PID)
    assert c.ok is False and "1 other process(es): pid 77 python (30000 MiB)" in c.detail
    assert "--gpu INDEX" in c.fix
    only_me = {**gpu, "processes": [{"pid": OWN_PID, "name": "me", "used_memory_mb": 500}]}
    assert d.check_idle(only_me, OWN_PID).ok is True
    invisible = {**gpu, "processes": [], "utilization_pct": 60}
    c = d.check_idle(invisible, OWN_PID)
    assert c.ok is False and "60% utilized" in c.detail
    unknown = {**gpu, "processes": None, "utilization_pct": None}
    assert d.check_idle(unknown, OWN_PID).ok is None
    hidden_memory = {**gpu, "memory_used_gb": 40.0}
    assert d.check_idle(hidden_memory, OWN_PID).ok is None


def test_check_torch_cuda():
    gpu = H200_GREEN["gpu"]
    assert d.check_torch_cuda(H200_GREEN["torch_cuda"], gpu).ok is True
    cpu = d.check_torch_cuda({"torch": "2.13.0+cpu", "cuda_build": None}, gpu)
    assert cpu.ok is False and "CPU-only build" in cpu.detail
    too_new = d.check_torch_cuda({"torch": "2.11.0+cu130", "cuda_build": "13.0",
                                  "available": False}, {**gpu, "driver_cuda": "12.4"})
    assert too_new.ok is False and "driver supports CUDA 12.4" in too_new.detail


def test_check_flashinfer_wheel_and_checkout(tmp_path):
    assert d.check_flashinfer_wheel({"version": None}).ok is False
    assert d.check_flashinfer_wheel(H200_GREEN["wheel"]).ok is True
    assert d.check_checkout({"path": None}).ok is False
    missing = d.check_checkout({"path": str(tmp_path / "x"), "exists": False})
    assert missing.ok is False and "does not exist" in missing.detail
    nodriver = d.check_checkout({"path": str(tmp_path), "exists": True, "driver": None})
    assert nodriver.ok is False and "benchmarks/flashinfer_benchmark.py" in nodriver.detail
    assert d.check_checkout(H200_GREEN["checkout"]).ok is True


def test_check_flashinfer_match_verdicts():
    wheel, co = H200_GREEN["wheel"], H200_GREEN["checkout"]
    other = d.check_flashinfer_match(wheel, {**co, "version": "0.6.16"})
    assert other.ok is False and "wheel 0.6.17 != checkout 0.6.16 (version.txt)" in other.detail
    # A copied benchmarks/ folder (no .git): a fresh --depth 1 clone of the wheel's tag moved
    # into its place, the folder kept aside; the same --flashinfer_repo then passes.
    assert other.fix == ("git clone --depth 1 --branch v0.6.17 https://github.com/flashinfer-ai/flashinfer "
                         "/repo/.devbundle/flashinfer-v0.6.17 && mv /repo/.devbundle/flashinfer "
                         "/repo/.devbundle/flashinfer.before-v0.6.17 && mv "
                         "/repo/.devbundle/flashinfer-v0.6.17 /repo/.devbundle/flashinfer")
    assert "install the checkout's release instead: pip install 'flashinfer-python==0.6.16'" in other.detail
    # A shallow clone of another tag: fetch only the wheel's tag, with --depth 1.
    shallow = d.check_flashinfer_match({"version": "0.6.18.post1", "commit": None},
                                       {**co, "version": "0.6.17", "git": True, "shallow": True,
                                        "tags": ["v0.6.17"]})
    assert shallow.ok is False and "checkout 0.6.17 (tag v0.6.17)" in shallow.detail
    assert shallow.fix == (
        "git -C /repo/.devbundle/flashinfer fetch --depth 1 https://github.com/flashinfer-ai/flashinfer "
        "tag v0.6.18.post1 && git -C /repo/.devbundle/flashinfer checkout v0.6.18.post1")
    # The same release line (a release branch's rc against its post release) only warns.
    line = d.check_flashinfer_match({"version": "0.6.18.post1"}, {**co, "version": "0.6.18rc7"})
    assert line.ok is None and "same release line" in line.detail
    same = d.check_flashinfer_match(wheel, {**co, "version": "0.6.17", "commit": wheel["commit"]})
    assert same.ok is True and "version and commit" in same.detail
    dev = d.check_flashinfer_match(wheel, {**co, "version": "0.6.17", "commit": "1" * 40})
    assert dev.ok is None and "development checkout" in dev.detail
    assert d.check_flashinfer_match({"version": None}, co).ok is None


def test_check_cupti_verdicts():
    gpu, stack = H200_GREEN["gpu"], H200_GREEN["stack"]
    assert d.check_cupti(H200_GREEN["timer_probe"], stack, gpu).ok is True
    assert d.check_cupti(None, stack, gpu).ok is False
    crashed = d.check_cupti({"error": "ValueError: No kernel activities recorded for iteration 0"},
                            stack, gpu)
    assert crashed.ok is False and "No kernel activities" in crashed.detail
    missing = d.check_cupti({"timer": "cuda_events", "warning": FALLBACK_WARNING},
                            {**stack, "cupti_python": None}, gpu)
    assert missing.ok is False and "cupti-python not installed" in missing.detail
    assert missing.fix == "pip install 'cupti-python==13.0.*'"
    # cupti-python of the runtime's minor, but its nvidia-cuda-cupti was replaced by another minor's.
    swapped = d.check_cupti({"timer": "cuda_events", "warning": FALLBACK_WARNING},
                            {**stack, "nvidia_cuda_cupti": "13.5.25"}, gpu)
    assert "nvidia-cuda-cupti 13.5.25 is not the CUDA runtime's 13.0" in swapped.detail
    assert swapped.fix == "pip install 'cupti-python==13.0.*'"


def test_cupti_on_a_cuda_12_stack_has_no_pip_fix():
    """FlashInfer's timer refuses cupti-python < 13, and PyPI has none >= 13 for CUDA 12: the fix is a
    CUDA 13 stack or an explicit --allow_cuda_events, never a cupti-python 12.x pin."""
    gpu = {**H200_GREEN["gpu"], "driver_cuda": "12.8"}
    stack = {"cuda_runtime": "12.8", "nvidia_cuda_cupti": "12.8.90", "cupti_python": "12.8.0"}
    check = d.check_cupti({"timer": "cuda_events", "warning": "CUPTI needs to be >= 13.0.0."}, stack, gpu)
    assert check.ok is False
    assert "cupti-python 12.8.0 is older than 13, which FlashInfer's timer refuses" in check.detail
    assert check.fix.startswith("none with pip alone") and "--allow_cuda_events" in check.fix
    assert versions.cupti_mismatch("13.0.1", "13.0", "13.0.85") == ""


# ---------------------------------------------------------------- the FlashInfer pairing

VLLM_033 = {"vllm": "0.33.0", "flashinfer": "0.7.2.post1", "requirement": "flashinfer-python==0.7.2.post1"}


def test_pairing_alone_names_the_documented_pair():
    check = d.check_flashinfer_pairing({"version": "0.6.18.post1"}, {"vllm": None}, {})
    assert check.ok is True and check.detail.startswith("alone (no vLLM in this Python)")
    assert "flashinfer-python 0.6.18.post1 with a v0.6.18.post1 driver checkout" in check.detail
    other = d.check_flashinfer_pairing({"version": "0.6.17"}, {"vllm": None}, {})
    assert other.ok is True and "installed: 0.6.17" in other.detail


def test_pairing_inside_vllm_keeps_vllms_flashinfer_and_names_its_tag():
    check = d.check_flashinfer_pairing({"version": "0.7.2.post1"}, VLLM_033, {"path": None})
    assert check.ok is True and check.detail.startswith("inside vLLM 0.33.0: keep its flashinfer-python "
                                                        "0.7.2.post1")
    assert "git clone --depth 1 --branch v0.7.2.post1" in check.detail and "--no_driver" in check.detail
    # The documented wheel installed over vLLM's pin: a warning whose fix restores vLLM's.
    downgraded = d.check_flashinfer_pairing({"version": "0.6.18.post1"}, VLLM_033, {"path": None})
    assert downgraded.ok is None and "requires flashinfer-python 0.7.2.post1, but 0.6.18.post1" in downgraded.detail
    assert downgraded.fix.startswith("pip install 'flashinfer-python==0.7.2.post1', then the v0.7.2.post1 checkout")
    # No FlashInfer yet beside vLLM: install vLLM's, clone its tag.
    missing = d.check_flashinfer_wheel({"version": None}, VLLM_033)
    assert missing.ok is False and "vLLM 0.33.0 requires 0.7.2.post1" in missing.detail
    assert missing.fix == "pip install 'flashinfer-python==0.7.2.post1'"
    assert "--branch v0.7.2.post1" in d.check_checkout({"path": None}, {"version": None}, VLLM_033).fix
    checks = by_name(d.run_checks({**H200_GREEN, "vllm": VLLM_033}))
    assert checks["flashinfer_pairing"].ok is None  # the bundle's 0.6.17 is not vLLM's pin


def test_vllm_flashinfer_reads_the_pin_from_vllms_metadata(monkeypatch):
    import importlib.metadata as md

    monkeypatch.setattr(versions, "dist_version", lambda *names: "0.33.0" if names == ("vllm",) else None)
    monkeypatch.setattr(md, "requires", lambda name: [
        "torch==2.14.0", "flashinfer-python==0.7.2.post1", "zentorch==2.14.0.1; extra == \"zen\""])
    assert versions.vllm_flashinfer() == VLLM_033
    monkeypatch.setattr(md, "requires", lambda name: ["flashinfer-python>=0.7"])
    assert versions.vllm_flashinfer() == {"vllm": "0.33.0", "flashinfer": None,
                                          "requirement": "flashinfer-python>=0.7"}
    monkeypatch.setattr(versions, "dist_version", lambda *names: None)
    assert versions.vllm_flashinfer() == {"vllm": None, "flashinfer": None, "requirement": None}


def test_check_nvcc_verdicts():
    assert d.check_nvcc(H200_GREEN["nvcc"], "13.0").ok is True
    assert d.check_nvcc({"nvcc": None}, "13.0").ok is False
    assert d.check_nvcc({**H200_GREEN["nvcc"], "ninja": None}, "13.0").fix == "pip install ninja"
    wrong = d.check_nvcc({**H200_GREEN["nvcc"], "nvcc_version": "12.4"}, "13.0")
    assert wrong.ok is False and "CUDA 13.x" in wrong.fix


def test_check_env_settings():
    assert d.check_no_download({"FLASHINFER_NO_DOWNLOAD": "1"}).ok is True
    unset = d.check_no_download({})
    assert unset.ok is True and "the run sets it to 1" in unset.detail
    zero = d.check_no_download({"FLASHINFER_NO_DOWNLOAD": "0"})
    assert zero.ok is True and "0 included" in zero.detail  # FlashInfer: any non-empty value
    empty = d.check_no_download({"FLASHINFER_NO_DOWNLOAD": ""})
    assert empty.ok is None and "download it on first use" in empty.detail
    gpu = H200_GREEN["gpu"]
    assert d.check_arch_list({}, gpu).ok is True
    assert d.check_arch_list({"FLASHINFER_CUDA_ARCH_LIST": "8.0 9.0a"}, gpu).ok is True
    bad = d.check_arch_list({"FLASHINFER_CUDA_ARCH_LIST": "10.0a"}, gpu)
    assert bad.ok is False and bad.fix == ("export FLASHINFER_CUDA_ARCH_LIST=9.0a (space-separated "
                                           "major.minor)")


TILEIRAS_MISSING = ("tileiras compiler not found (nvidia-cuda-tileiras wheel, PATH, $CUDA_HOME/bin, "
                    "/usr/local/cuda*/bin)")
TILEIRAS_FIX = ("pip install cuda-tile[tileiras] (or a CUDA Toolkit 13.1+ with tileiras on PATH or in "
                "$CUDA_HOME/bin)")


def _blackwell(probes: dict) -> dict:
    """The same machine with a B200 (sm_100), where tileiras does have a target."""
    return {**probes, "gpu": {**probes["gpu"], "name": "NVIDIA B200", "compute_capability": "10.0"},
            "env": {**probes["env"], "FLASHINFER_CUDA_ARCH_LIST": "10.0a"}}


def test_h200_asks_for_no_tileiras_cutile_cannot_target_sm90():
    tileiras = by_name(checks_of(H200_GREEN))["tileiras"]
    assert tileiras.ok is True and "not needed on this GPU" in tileiras.detail and "sm_90" in tileiras.detail
    assert by_name(d.run_checks(H200_GREEN, backends=["cutile"]))["tileiras"].ok is True


def test_without_tileiras_warns_naming_cutile_and_the_install():
    checks = checks_of(_blackwell(H200_GREEN))
    tileiras = by_name(checks)["tileiras"]
    assert tileiras == d.Check("tileiras", None, f"{TILEIRAS_MISSING}: the cutile backend (mm_bf16) "
                               "needs it, so its rows fail as set-up", TILEIRAS_FIX)
    assert ("[warn] tileiras: tileiras compiler not found" in d.format_checks(checks)
            and f"fix: {TILEIRAS_FIX}" in d.format_checks(checks))


def test_without_tileiras_a_cutile_run_is_not_ready():
    checks = d.run_checks(_blackwell(H200_GREEN), backends=["cudnn", "cutile"])
    tileiras = by_name(checks)["tileiras"]
    assert tileiras.ok is False and "the requested cutile backend (mm_bf16) needs it" in tileiras.detail
    assert d.verdict_line(checks) == ("NOT READY: 1 check(s) failed (tileiras); fix them and run "
                                      "the doctor again.")
    assert by_name(d.run_checks(_blackwell(H200_GREEN), backends=["cudnn"]))["tileiras"].ok is None


def test_check_tileiras_verdicts():
    found = {"tileiras": "/opt/cu13/bin/tileiras", "found_in": "the nvidia-cuda-tileiras wheel",
             "cuda_tile": "1.7.0", "cuda_tile_importable": True}
    ok = d.check_tileiras(found, ["cutile"])
    assert ok == d.Check("tileiras", True, "tileiras at /opt/cu13/bin/tileiras (from the "
                         "nvidia-cuda-tileiras wheel), cuda-tile 1.7.0: cutile can compile")
    no_module = d.check_tileiras({**found, "cuda_tile": None, "cuda_tile_importable": False})
    assert no_module.ok is None and no_module.detail.startswith(
        "cuda-tile package not importable (module cuda.tile): the cutile backend")
    neither = d.check_tileiras({}, ["cutile"])
    assert neither.ok is False and neither.detail.startswith(
        f"{TILEIRAS_MISSING} and cuda-tile package not importable") and "needs them" in neither.detail


# ---------------------------------------------------------------- the tileiras probe


def _executable(folder, name="tileiras"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def bare_tileiras_search(monkeypatch, tmp_path):
    """No wheel, no CUDA_HOME, no default toolkit, an empty PATH, no cuda.tile module."""
    from benchmark_model_kernels.env import gpu

    real_find_spec = gpu.importlib.util.find_spec
    modules: dict[str, object] = {}

    def find_spec(name, *args):
        if name in ("nvidia.cu13", "cuda.tile"):
            return modules.get(name)
        return real_find_spec(name, *args)

    monkeypatch.setattr(gpu.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(gpu, "default_toolkit_bins", lambda: [])
    monkeypatch.delenv("CUDA_HOME", raising=False)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return gpu, modules


def test_tileiras_probe_finds_nothing_on_a_bare_machine(bare_tileiras_search):
    gpu, _ = bare_tileiras_search
    info = gpu.tileiras_info()
    assert (info["tileiras"], info["found_in"], info["cuda_tile_importable"]) == (None, None, False)
    assert d.check_tileiras(info).ok is None


def test_tileiras_probe_on_path(bare_tileiras_search, monkeypatch, tmp_path):
    gpu, _ = bare_tileiras_search
    binary = _executable(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    info = gpu.tileiras_info()
    assert (info["tileiras"], info["found_in"]) == (binary, "PATH")


def test_tileiras_probe_in_cuda_home(bare_tileiras_search, monkeypatch, tmp_path):
    gpu, _ = bare_tileiras_search
    binary = _executable(tmp_path / "cuda-13.1" / "bin")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-13.1"))
    info = gpu.tileiras_info()
    assert (info["tileiras"], info["found_in"]) == (binary, "$CUDA_HOME/bin")


def test_tileiras_probe_from_the_cuda_tile_wheels(bare_tileiras_search, tmp_path):
    import importlib.machinery

    gpu, modules = bare_tileiras_search
    binary = _executable(tmp_path / "site" / "nvidia" / "cu13" / "bin")
    wheel = importlib.machinery.ModuleSpec("nvidia.cu13", None, is_package=True)
    wheel.submodule_search_locations = [str(tmp_path / "site" / "nvidia" / "cu13")]
    modules["nvidia.cu13"] = wheel
    modules["cuda.tile"] = importlib.machinery.ModuleSpec("cuda.tile", None)
    info = gpu.tileiras_info()
    assert (info["tileiras"], info["found_in"]) == (binary, "the nvidia-cuda-tileiras wheel")
    assert info["cuda_tile_importable"] is True
    assert d.check_tileiras(info, ["cutile"]).ok is True


def test_tileiras_probe_when_which_finds_nothing(bare_tileiras_search, monkeypatch, tmp_path):
    gpu, _ = bare_tileiras_search
    _executable(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(gpu.shutil, "which", lambda name, path=None: None)
    assert gpu.tileiras_info()["tileiras"] is None


def test_module_probe_survives_a_missing_parent_package(monkeypatch):
    from benchmark_model_kernels.env import gpu

    def no_parent(name, *args):
        raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}")

    monkeypatch.setattr(gpu.importlib.util, "find_spec", no_parent)
    assert gpu.tileiras_info()["cuda_tile_importable"] is False


def test_cpu_only_probes_give_only_machine_independent_checks():
    probes = with_(H200_GREEN, gpu={"name": None, "error": "NVMLError_DriverNotLoaded"},
                   torch_cuda=None, stack=None, timer_probe=None)
    checks = checks_of(probes)
    names = [c.name for c in checks]
    assert names == ["gpu", "flashinfer_wheel", "flashinfer_pairing", "flashinfer_checkout",
                     "flashinfer_version_match", "nvcc", "tileiras", "no_download", "prebuilt_kernels"]
    assert d.verdict_line(checks).startswith("NOT READY: no NVIDIA GPU/driver found (NVML: "
                                             "NVMLError_DriverNotLoaded)")


def test_warnings_alone_keep_ready():
    checks = [d.Check("a", True, "x"), d.Check("b", None, "y", "z")]
    assert d.ready(checks) and d.verdict_line(checks) == "READY: this set-up can produce " \
                                                        "trustworthy kernel times (1 warning(s): b)."


def test_json_shape():
    checks = checks_of(H200_GREEN)
    payload = json.loads(d.to_json(checks, H200_GREEN, 0))
    assert payload["ready"] is True and payload["gpu_index"] == 0
    assert all(set(c) == {"name", "ok", "detail", "fix"} for c in payload["checks"])
    assert [c["name"] for c in payload["checks"]] == [c.name for c in checks]
    assert payload["probes"]["gpu"]["name"] == "NVIDIA H200"


# ---------------------------------------------------------------- the CLI


def _cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_env.py"), *args],
                          capture_output=True, text=True, timeout=120)


cpu_only = pytest.mark.skipif(has_cuda(), reason="CPU-only behaviour")


@cpu_only
def test_cli_on_cpu_machine_says_so_and_exits_1():
    r = _cli()
    assert r.returncode == 1
    assert "Traceback" not in r.stderr + r.stdout
    assert "[FAIL] gpu: no NVIDIA GPU/driver found (NVML: " in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("NOT READY: no NVIDIA GPU/driver found")


@cpu_only
def test_cli_json_on_cpu_machine(tmp_path):
    r = _cli("--json", "--flashinfer_repo", str(tmp_path))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    payload = json.loads(r.stdout)
    assert payload["ready"] is False
    checks = {c["name"]: c for c in payload["checks"]}
    assert checks["gpu"]["ok"] is False
    assert checks["flashinfer_checkout"]["ok"] is False  # tmp_path has no benchmarks/


def test_cli_bad_gpu_index_is_a_usage_error(capsys):
    assert d.main(["--gpu", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: --gpu=-1: must be a CUDA device index >= 0, e.g. --gpu 0"


def test_cli_unknown_backend_is_a_usage_error(capsys):
    assert d.main(["--backends", "cutile", "cuitle"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --backends=cuitle: choose from ") and "cutile" in err


def test_cli_rejects_abbreviations_and_documents_every_flag():
    r = _cli("--flashinfer", "x")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: --flashinfer=") and "did you mean --flashinfer_repo?" in r.stderr
    help_text = _cli("--help").stdout
    for flag in ("--flashinfer_repo", "--gpu", "--backends", "--json", "exit status"):
        assert flag in help_text


def test_tileiras_is_not_asked_for_on_a_gpu_it_cannot_target():
    """tileiras has no sm_90 target (measured on the H200): the cutile rows are unsupported there
    before launch, so the doctor asks for no install, even with --backends cutile."""
    from benchmark_model_kernels.doctor.doctor import check_tileiras

    check = check_tileiras({}, ["cutile"], "9.0")
    assert check.ok is True and "sm_90" in check.detail
    assert check_tileiras({}, ["cutile"], "10.0").ok is False


# ---------------------------------------------------------------------------------------------
# FlashInfer versions and prebuilt kernels


def test_check_flashinfer_wheel_supported_lines():
    for version in ("0.6.17", "0.6.18", "0.6.18.post1", "0.7.0", "0.7.4"):
        assert d.check_flashinfer_wheel({"version": version}).ok is True, version
    old = d.check_flashinfer_wheel({"version": "0.6.16.post4"})
    assert old.ok is False and old.fix == "pip install 'flashinfer-python==0.6.18.post1'"
    new = d.check_flashinfer_wheel({"version": "0.8.0"})
    assert new.ok is None and "0.6.17, 0.6.18.x and 0.7.x" in new.detail
    missing = d.check_flashinfer_wheel({"version": None})
    assert missing.fix == "pip install 'flashinfer-python==0.6.18.post1'"


def test_check_checkout_hint_clones_the_installed_wheels_tag():
    none = d.check_checkout({"path": None}, {"version": "0.7.4"})
    assert none.fix == "git clone --depth 1 --branch v0.7.4 https://github.com/flashinfer-ai/flashinfer ~/flashinfer"
    assert "--flashinfer_repo ~/flashinfer" in none.detail
    default = d.check_checkout({"path": None})
    assert "--branch v0.6.18.post1" in default.fix
    missing = d.check_checkout({"path": "/data/fi", "exists": False}, {"version": "0.6.17"})
    assert missing.fix == "git clone --depth 1 --branch v0.6.17 https://github.com/flashinfer-ai/flashinfer /data/fi"


B200 = {"gpu": {"compute_capability": "10.0"}}


def test_check_prebuilt_kernels():
    wheel = {"version": "0.6.18.post1"}
    none = {"flashinfer_cubin": None, "flashinfer_jit_cache": None}
    # B200 without cubins and downloads off: every trtllm-gen row would fail as set-up.
    warn = d.check_prebuilt(none, wheel, "10.0", "13.0", {})
    assert warn.ok is None and "trtllm-gen" in warn.detail
    assert warn.fix == ("pip install 'flashinfer-cubin==0.6.18.post1' --extra-index-url "
                        "https://flashinfer.ai/whl")
    assert "export FLASHINFER_NO_DOWNLOAD=" in warn.detail
    assert d.check_prebuilt(none, wheel, "10.0", "13.0", {}, ["trtllm"]).ok is False
    # Downloads allowed (set and empty): FlashInfer fetches them on first use.
    assert d.check_prebuilt(none, wheel, "10.0", "13.0", {"FLASHINFER_NO_DOWNLOAD": ""}).ok is True
    good = {"flashinfer_cubin": "0.6.18.post1", "flashinfer_jit_cache": "0.6.18.post1+cu130"}
    assert d.check_prebuilt(good, wheel, "10.0", "13.0", {}).ok is True
    # A companion of another release: FlashInfer refuses it at import.
    bad = d.check_prebuilt({**good, "flashinfer_jit_cache": "0.6.17+cu130"}, wheel, "9.0", "13.0", {})
    assert bad.ok is False and bad.fix == ("pip install 'flashinfer-jit-cache==0.6.18.post1' "
                                           "--extra-index-url https://flashinfer.ai/whl/cu130")
    hopper = d.check_prebuilt(none, wheel, "9.0", "13.0", {})
    assert hopper.ok is True and "about an hour of JIT" in hopper.detail


def _git(*args, cwd=None):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.mark.parametrize("copied", [False, True], ids=["depth1-clone", "copied-benchmarks"])
def test_fix_line_executed_as_printed_makes_the_versions_agree(tmp_path, monkeypatch, copied):
    """A --depth 1 clone of tag v0.6.17 (or a copied benchmarks/ folder) with wheel 0.6.18.post1
    installed: the printed fix, run by a shell, leaves a checkout the doctor passes."""
    if not shutil.which("git"):
        pytest.skip("needs git")

    upstream = tmp_path / "upstream"
    (upstream / "benchmarks").mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=upstream)
    for release in ("0.6.17", "0.6.18.post1"):
        (upstream / "version.txt").write_text(release + "\n")
        (upstream / "benchmarks" / "flashinfer_benchmark.py").write_text(f"# {release}\n")
        _git("add", "-A", cwd=upstream)
        _git("commit", "-q", "-m", release, cwd=upstream)
        _git("tag", "-a", f"v{release}", "-m", release, cwd=upstream)
    monkeypatch.setattr(versions, "FLASHINFER_GIT_URL", f"file://{upstream}")
    repo = tmp_path / "flashinfer"
    _git("clone", "-q", "--depth", "1", "--branch", "v0.6.17", f"file://{upstream}", str(repo))
    if copied:
        shutil.rmtree(repo / ".git")
    wheel = {"version": "0.6.18.post1", "commit": None}
    before = versions.flashinfer_checkout(str(repo))
    assert before["version"] == "0.6.17" and before["shallow"] is not copied
    check = d.check_flashinfer_match(wheel, before)
    assert check.ok is False
    subprocess.run(["bash", "-c", check.fix], check=True, capture_output=True)  # as printed
    after = versions.flashinfer_checkout(str(repo))  # the same --flashinfer_repo
    assert after["version"] == "0.6.18.post1" and "v0.6.18.post1" in after["tags"]
    assert d.check_flashinfer_match(wheel, after).ok is True
    assert d.check_checkout(after, wheel).ok is True
    if copied:  # the folder it replaced is kept
        assert (tmp_path / "flashinfer.before-v0.6.18.post1" / "version.txt").read_text() == "0.6.17\n"
