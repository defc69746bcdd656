"""The environment doctor: can this machine produce kernel times worth trusting?

Each check is a small pure function of probe results (from `environment.py`) returning a `Check`;
`ok` is True (pass), False (fail: numbers would be wrong or the run would break) or None (warning:
worth knowing, not blocking). Exit 0 only when no check fails. A CPU-only machine gets one plain
sentence and exit 1, never a traceback. A tool only some backends need (tileiras for cutile) is a
warning, and a failure when --backends names such a backend.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from ..cases.backends import BACKEND_NAMES, BACKENDS, backend_names, capability_reason
from ..cases.capabilities import load_capabilities
from ..core.errors import OneLineArgumentParser, UsageError, cli_main
from ..core.files import path_arg
from ..env import gpu as gpu_probes
from ..env import versions
from ..run.pool import no_download_state
from . import environment as envmod

#: The backend whose compiler the tileiras check looks for.
CUTILE = next(s for s in BACKENDS if s.backend == "cutile")

EXIT_READY = 0
EXIT_NOT_READY = 1

TROUBLESHOOTING = "references/troubleshooting.md"


@dataclass(frozen=True)
class Check:
    """One verdict of the doctor."""

    name: str
    """Stable identifier, e.g. "gpu", "cupti" (also the key in --json output)."""
    ok: bool | None
    """True: pass; False: fail (blocks trustworthy numbers); None: warning only."""
    detail: str
    """What was found, in one line."""
    fix: str = ""
    """What to do about it (a command where there is one); empty when ok."""


# --------------------------------------------------------------------------- the checks


def check_gpu(gpu: dict[str, Any]) -> Check:
    if gpu.get("driver_present") and "pynvml" in (gpu.get("error") or ""):
        return Check("gpu", False,
                     f"an NVIDIA driver is present but NVML cannot be used: {gpu['error']}",
                     "pip install -e '.[gpu]' (or pip install nvidia-ml-py)")
    if gpu.get("error") or not gpu.get("name"):
        return Check("gpu", False,
                     f"no NVIDIA GPU/driver found (NVML: {gpu.get('error') or 'no device'})",
                     "run on a machine with an NVIDIA GPU and driver; if this one has them, install "
                     "NVML bindings with: pip install -e '.[gpu]'. Without a GPU you can still "
                     "preview shapes: python scripts/benchmark_model.py MODEL --tp N --print_only")
    clocks = gpu.get("clocks_mhz") or {}
    parts = [gpu["name"]]
    if gpu.get("compute_capability"):
        parts.append(f"sm_{gpu['compute_capability'].replace('.', '')}")
    if gpu.get("sm_count"):
        parts.append(f"{gpu['sm_count']} SMs")
    if gpu.get("memory_gb"):
        parts.append(f"{gpu['memory_gb']} GB")
    if clocks.get("sm_max"):
        parts.append(f"SM clock {clocks.get('sm_current')}/{clocks['sm_max']} MHz")
    if gpu.get("power_limit_w"):
        parts.append(f"power limit {gpu['power_limit_w']} W")
    if gpu.get("driver"):
        parts.append(f"driver {gpu['driver']} (CUDA {gpu.get('driver_cuda')})")
    return Check("gpu", True, ", ".join(parts))


def check_idle(gpu: dict[str, Any], own_pid: int | None = None) -> Check:
    """Another process on the GPU shares SMs, HBM bandwidth and clocks with the kernel being timed."""
    own_pid = os.getpid() if own_pid is None else own_pid
    procs = gpu.get("processes")
    util = gpu.get("utilization_pct")
    index = gpu.get("index", 0)
    fix = ("wait for them to finish, or pick an idle GPU: --gpu INDEX here and "
           "CUDA_VISIBLE_DEVICES=INDEX for the run")
    others = [p for p in (procs or []) if p.get("pid") != own_pid]
    if others:
        listed = ", ".join(
            f"pid {p['pid']}" + (f" {p['name']}" if p.get("name") else "")
            + (f" ({p['used_memory_mb']} MiB)" if p.get("used_memory_mb") is not None else "")
            for p in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        return Check("gpu_idle", False,
                     f"GPU {index} is busy: {len(others)} other process(es): {listed}{more}", fix)
    if util is not None and util > gpu_probes.IDLE_UTILIZATION_PCT:
        return Check("gpu_idle", False,
                     f"GPU {index} is {util}% utilized although no process is listed (another "
                     f"container or VM?)", fix)
    if util is None and procs is None:
        return Check("gpu_idle", None,
                     f"could not read utilization or processes of GPU {index} through NVML",
                     "check with nvidia-smi that nothing else runs on it")
    used = gpu.get("memory_used_gb")
    if used is not None and used > 2 and not others:
        return Check("gpu_idle", None,
                     f"GPU {index}: {util}% utilized, no process listed, but {used} GB memory in "
                     f"use (a process NVML cannot see from here?)",
                     "check with nvidia-smi on the host that nothing else runs on it")
    return Check("gpu_idle", True,
                 f"GPU {index} idle: {util}% utilization, no other process")


def check_torch_cuda(tc: dict[str, Any], gpu: dict[str, Any]) -> Check:
    if tc.get("torch") is None:
        return Check("torch_cuda", False, f"torch is not importable ({tc.get('error')})",
                     "install a CUDA build of torch that matches the driver (see README.md)")
    if not tc.get("cuda_build"):
        return Check("torch_cuda", False, f"torch {tc['torch']} is a CPU-only build",
                     "install a CUDA build of torch, e.g. pip install torch --index-url "
                     "https://download.pytorch.org/whl/cu130 (cu12x for a CUDA 12 driver)")
    runtime, driver_cuda = tc["cuda_build"], gpu.get("driver_cuda")
    if (versions.major_minor(driver_cuda) and versions.major_minor(runtime)
            and versions.version_key(versions.major_minor(runtime))[0]
            > versions.version_key(versions.major_minor(driver_cuda))[0]):
        return Check("torch_cuda", False,
                     f"torch {tc['torch']} needs CUDA {runtime} but the driver supports CUDA "
                     f"{driver_cuda}",
                     "upgrade the NVIDIA driver, or install a torch built for the driver's CUDA")
    if not tc.get("available") or tc.get("error"):
        return Check("torch_cuda", False,
                     f"torch {tc['torch']} (CUDA {runtime}) cannot use the GPU: "
                     f"{tc.get('error') or 'torch.cuda.is_available() is False'}",
                     "check CUDA_VISIBLE_DEVICES and that the driver works (nvidia-smi)")
    return Check("torch_cuda", True,
                 f"torch {tc['torch']}, CUDA runtime {runtime}, {tc.get('device_count')} GPU(s) "
                 f"visible")


def _pinned_install() -> str:
    return f"pip install 'flashinfer-python=={versions.FLASHINFER_WHEEL}'"


def check_flashinfer_wheel(wheel: dict[str, Any]) -> Check:
    supported = versions.SUPPORTED_FLASHINFER_TEXT
    if not wheel.get("version"):
        return Check("flashinfer_wheel", False,
                     f"flashinfer-python is not installed (the release this tool documents is "
                     f"{versions.FLASHINFER_WHEEL}; it parses the drivers of {supported})",
                     _pinned_install())
    commit = f" (commit {wheel['commit'][:12]})" if wheel.get("commit") else ""
    found = f"flashinfer-python {wheel['version']}{commit}"
    if versions.supported_line(wheel["version"]) is None:
        older = (versions.release_key(wheel["version"])
                 < versions.release_key(versions.SUPPORTED_FLASHINFER_LINES[0]))
        return Check("flashinfer_wheel", False if older else None,
                     f"{found}: this tool parses the driver of {supported} only"
                     + ("" if older else "; a newer driver's output may read as failed rows"),
                     _pinned_install())
    return Check("flashinfer_wheel", True, found)


def _clone_hint(wheel: dict[str, Any], checkout: dict[str, Any]) -> str:
    """The clone of the installed wheel's driver (the documented release's when none is
    installed) at the checkout's path (~/flashinfer without one)."""
    version = wheel.get("version") or versions.FLASHINFER_WHEEL
    commit = wheel.get("commit") if wheel.get("version") else None
    return versions.fetch_driver_command(version, commit, {"path": checkout.get("path")})


def check_checkout(checkout: dict[str, Any], wheel: dict[str, Any] | None = None) -> Check:
    clone = _clone_hint(wheel or {}, checkout)
    if not checkout.get("path"):
        return Check("flashinfer_checkout", False,
                     "no FlashInfer checkout given (the runner drives its "
                     "benchmarks/flashinfer_benchmark.py; clone one, then pass "
                     "--flashinfer_repo ~/flashinfer)", clone)
    if not checkout.get("exists"):
        return Check("flashinfer_checkout", False, f"{checkout['path']} does not exist", clone)
    if not checkout.get("driver"):
        return Check("flashinfer_checkout", False,
                     f"{checkout['path']} has no benchmarks/flashinfer_benchmark.py",
                     "pass the root of a FlashInfer source checkout (the folder that contains "
                     f"benchmarks/); to get one: {_clone_hint(wheel or {}, {})}")
    return Check("flashinfer_checkout", True, f"driver found: {checkout['driver']}")


def _checkout_label(checkout: dict[str, Any]) -> str:
    """Where the checkout's version came from: "0.6.18rc7 (version.txt)", "tag v0.6.17"."""
    tags = [t for t in checkout.get("tags") or () if versions.release_tag(t)]
    if checkout.get("version") and not tags:
        return f"{checkout['version']} (version.txt)"
    if tags:
        return f"{checkout.get('version')} (tag {tags[0]})"
    return "unknown"


def check_flashinfer_match(wheel: dict[str, Any], checkout: dict[str, Any]) -> Check:
    """The driver in the checkout calls the installed library; from another release it may pass
    arguments the wheel does not know, or miss backends the wheel has. The fix fetches the wheel's
    own driver (its tag, else its recorded commit) in a way that works in the checkout at hand,
    a --depth 1 clone included."""
    wv, cv = wheel.get("version"), checkout.get("version")
    wc, cc = wheel.get("commit"), checkout.get("commit")
    if not wv or not checkout.get("driver"):
        return Check("flashinfer_version_match", None, "not compared (wheel or checkout missing)")
    fetch = versions.fetch_driver_command(wv, wc, checkout)
    install = f"pip install 'flashinfer-python=={versions.release_of(cv)}'" if cv else ""
    fix = fetch or install
    match = versions.versions_match(wv, cv)
    label = _checkout_label(checkout)
    if match is False:
        same_line = versions.base_release(wv) == versions.base_release(cv)
        other = f"; or install the checkout's release instead: {install}" if fetch and install else ""
        return Check("flashinfer_version_match", None if same_line else False,
                     f"wheel {wv} != checkout {label} ({checkout['path']})"
                     + ("; same release line, the driver may still differ" if same_line else "")
                     + other, fix)
    cmatch = versions.commits_match(wc, cc)
    if cmatch is False:
        return Check("flashinfer_version_match", None,
                     f"same release {versions.release_of(wv)}, but wheel commit {wc[:12]} != checkout "
                     f"commit {cc[:12]} (a development checkout?)",
                     versions.fetch_driver_command(None, wc, checkout) or fix)
    if match is None:
        known = f"commit {cc[:12]}, no release tag or version.txt" if cc else "no .git, no version.txt"
        return Check("flashinfer_version_match", None,
                     f"checkout version unknown ({known}); wheel is {wv}", fix)
    how = "version and commit" if cmatch else "version"
    return Check("flashinfer_version_match", True, f"wheel and checkout agree ({how}: {wv}; checkout {label})")


_FALLBACK_TEXT = {"cuda_events": "CUDA events",
                  "cuda_graph": "CUDA events around CUDA-graph replays"}


def check_cupti(probe: dict[str, Any] | None, stack: dict[str, Any],
                gpu: dict[str, Any]) -> Check:
    """A CUDA-events time includes launch overhead and is not comparable with a CUPTI time, so a
    silent fallback is a failure (the runner's --allow_cuda_events exists for an explicit choice)."""
    fix = versions.cupti_fix_command(stack.get("cuda_runtime"), gpu.get("driver_cuda"))
    installed = stack.get("cupti_python")
    have = f"cupti-python {installed}" if installed else "cupti-python not installed"
    if probe is None:
        return Check("cupti", False, f"not probed (needs a GPU, torch CUDA and flashinfer); {have}",
                     "fix the checks above, then run the doctor again")
    if probe.get("error"):
        return Check("cupti", False, f"timer probe failed: {probe['error']} ({have})",
                     f"{fix}; see {TROUBLESHOOTING}")
    if probe.get("timer") != "cupti":
        return Check("cupti", False,
                     f"FlashInfer fell back from CUPTI to "
                     f"{_FALLBACK_TEXT.get(probe.get('timer'), probe.get('timer'))} ({have}, CUDA runtime "
                     f"{stack.get('cuda_runtime')}, driver CUDA {gpu.get('driver_cuda')}): "
                     f"{probe.get('warning')}", fix)
    return Check("cupti", True,
                 f"CUPTI timed a 256x256x256 BF16 matmul: {probe.get('median_us')} us ({have})")


def check_nvcc(nvcc: dict[str, Any], cuda_runtime: str | None) -> Check:
    """FlashInfer JIT-compiles most kernels on first use (nvcc through ninja), even cuBLAS paths."""
    if not nvcc.get("nvcc"):
        return Check("nvcc", False, "nvcc not found (FLASHINFER_NVCC, CUDA_HOME, PATH)",
                     "install the CUDA toolkit matching torch's CUDA and set CUDA_HOME (cuDNN "
                     "backends work without it; cuBLAS/CUTLASS ones do not)")
    if not nvcc.get("ninja"):
        return Check("nvcc", False, f"nvcc {nvcc.get('nvcc_version')} found but no ninja binary",
                     "pip install ninja")
    nv, rt = versions.major_minor(nvcc.get("nvcc_version")), versions.major_minor(cuda_runtime)
    if nv and rt and versions.version_key(nv)[0] != versions.version_key(rt)[0]:
        return Check("nvcc", False,
                     f"nvcc {nv} ({nvcc['nvcc']}) but torch uses CUDA {rt}: JIT modules would "
                     f"not load", f"point CUDA_HOME at a CUDA {rt.split('.')[0]}.x toolkit")
    return Check("nvcc", True, f"nvcc {nvcc.get('nvcc_version')} at {nvcc['nvcc']}, ninja at "
                               f"{nvcc['ninja']}")


TILEIRAS_FIX = ("pip install cuda-tile[tileiras] (or a CUDA Toolkit 13.1+ with tileiras on PATH or in "
                "$CUDA_HOME/bin)")


def _cutile_cannot_run(compute_capability: str | None) -> str:
    """Why no cutile row can run on this GPU, whatever is installed: the backend table's own
    capability and toolchain rule ("" when it can, or the GPU is unknown)."""
    cc = gpu_probes.parse_compute_capability(compute_capability)
    return capability_reason(CUTILE, cc) if cc is not None else ""


def check_tileiras(probe: dict[str, Any], backends: Sequence[str] = (),
                   compute_capability: str | None = None) -> Check:
    """FlashInfer's cutile backend (mm_bf16) JIT-compiles with the tileiras compiler through the
    cuda-tile package; without either, every cutile row fails as a set-up problem. Only cutile
    needs them, so a gap is a warning unless --backends asks for cutile. On a GPU tileiras cannot
    target (sm_90), the rows are unsupported whatever is installed: nothing to install."""
    limit = _cutile_cannot_run(compute_capability)
    if limit:
        return Check("tileiras", True, f"not needed on this GPU: cutile rows are unsupported here "
                                       f"({limit})")
    path, module = probe.get("tileiras"), probe.get("cuda_tile_importable")
    if path and module:
        return Check("tileiras", True, f"tileiras at {path} (from {probe.get('found_in')}), "
                                       f"cuda-tile {probe.get('cuda_tile')}: cutile can compile")
    missing = []
    if not path:
        missing.append("tileiras compiler not found (nvidia-cuda-tileiras wheel, PATH, "
                       "$CUDA_HOME/bin, /usr/local/cuda*/bin)")
    if not module:
        missing.append("cuda-tile package not importable (module cuda.tile)")
    blocking = "cutile" in backends
    backend = "the requested cutile backend" if blocking else "the cutile backend"
    them = "them" if len(missing) > 1 else "it"
    return Check("tileiras", False if blocking else None,
                 f"{' and '.join(missing)}: {backend} (mm_bf16) needs {them}, so its rows fail as "
                 f"set-up", TILEIRAS_FIX)


def check_no_download(env: dict[str, str]) -> Check:
    value, defaulted = no_download_state(env)
    if defaulted:
        return Check("no_download", True,
                     "FLASHINFER_NO_DOWNLOAD unset: the run sets it to 1 for its worker, so a "
                     "kernel whose cubin is not installed fails at once instead of downloading "
                     "(export FLASHINFER_NO_DOWNLOAD= , set and empty, lets FlashInfer download)")
    if value:
        return Check("no_download", True,
                     f"FLASHINFER_NO_DOWNLOAD={value!r} (yours, kept): missing cubins fail at once "
                     "(FlashInfer reads any non-empty value, 0 included, as no-download)")
    return Check("no_download", None,
                 "FLASHINFER_NO_DOWNLOAD set and empty (yours, kept): kernels whose cubin is not "
                 "installed download it on first use; without network each such case stalls "
                 "(about 45 s for mm_fp8) before it fails",
                 "unset FLASHINFER_NO_DOWNLOAD on a machine without network (the run then "
                 "defaults it to 1)")


#: GPUs whose trtllm-gen kernels load cubins (flashinfer-cubin, else downloaded on first use):
#: the families the trtllm-gen rows of the backend table run on.
TRTLLM_GEN_CCS = ("10.0", "10.3", "10.7")
#: The backends that run trtllm-gen cubins.
TRTLLM_GEN_BACKENDS = ("trtllm", "trtllm_low_latency")


def cubin_install(version: str) -> str:
    return (f"pip install 'flashinfer-cubin=={versions.release_of(version)}' --extra-index-url "
            f"{versions.FLASHINFER_WHEEL_INDEX}")


def jit_cache_install(version: str, cuda: str | None) -> str:
    tag = "cu" + (versions.major_minor(cuda) or "13.0").replace(".", "")
    return (f"pip install 'flashinfer-jit-cache=={versions.release_of(version)}' --extra-index-url "
            f"{versions.FLASHINFER_WHEEL_INDEX}/{tag}")


def check_prebuilt(companions: dict[str, str | None], wheel: dict[str, Any],
                   compute_capability: str | None, cuda: str | None,
                   env: dict[str, str], backends: Sequence[str] = ()) -> Check:
    """flashinfer-cubin and flashinfer-jit-cache: which are installed, whether they match the
    wheel (FlashInfer refuses a mismatched one at import), and whether this GPU needs them:
    trtllm-gen rows on sm_100/103/107 load cubins (downloaded on first use unless
    FLASHINFER_NO_DOWNLOAD), and SM90 CUTLASS fused-MoE kernels are about an hour of JIT without
    the jit-cache. A missing cubin package on Blackwell with downloads off is a warning, and a
    failure when --backends asks for a trtllm-gen backend."""
    wv = wheel.get("version")
    cubin, jit = companions.get("flashinfer_cubin"), companions.get("flashinfer_jit_cache")
    have = (f"flashinfer-cubin {cubin or 'not installed'}, "
            f"flashinfer-jit-cache {jit or 'not installed'}")
    if not wv:
        return Check("prebuilt_kernels", None, f"{have}; not judged (flashinfer-python missing)")
    mismatched = [f"{name} {v} != flashinfer-python {wv}" for name, v in
                  (("flashinfer-cubin", cubin), ("flashinfer-jit-cache", jit))
                  if v and versions.release_of(v) != versions.release_of(wv)]
    if mismatched:
        fixes = [cubin_install(wv) if "cubin" in m else jit_cache_install(wv, cuda) for m in mismatched]
        return Check("prebuilt_kernels", False,
                     f"{'; '.join(mismatched)}: FlashInfer refuses a mismatched companion at import",
                     " && ".join(fixes))
    notes = []
    if compute_capability in TRTLLM_GEN_CCS and not cubin:
        downloads_off = bool(no_download_state(env)[0])
        if downloads_off:
            blocking = any(b in TRTLLM_GEN_BACKENDS for b in backends)
            return Check("prebuilt_kernels", False if blocking else None,
                         f"{have}: on sm_{compute_capability.replace('.', '')} every trtllm-gen row "
                         f"(backends {', '.join(TRTLLM_GEN_BACKENDS)}) needs its cubins, and with "
                         f"FLASHINFER_NO_DOWNLOAD on they fail as set-up (install them, about 1 GB; "
                         f"or, with network, allow downloads: export FLASHINFER_NO_DOWNLOAD=)",
                         cubin_install(wv))
        notes.append("trtllm-gen cubins download on first use (FLASHINFER_NO_DOWNLOAD empty)")
    if compute_capability == "9.0" and not jit:
        notes.append("FlashInfer's SM90 CUTLASS fused MoE needs the jit-cache or about an hour of "
                     "JIT, which this tool never starts, so its rows are unsupported here; to time "
                     f"them with a driver that admits sm_90: {jit_cache_install(wv, cuda)}")
    return Check("prebuilt_kernels", True, have + (f"; {'; '.join(notes)}" if notes else ""))


def _arch_entries(value: str) -> list[str]:
    return [a for a in value.replace(",", " ").split() if a]


def check_arch_list(env: dict[str, str], gpu: dict[str, Any]) -> Check:
    value = env.get("FLASHINFER_CUDA_ARCH_LIST", "")
    cc = gpu.get("compute_capability")
    if not value:
        return Check("cuda_arch_list", True,
                     "FLASHINFER_CUDA_ARCH_LIST unset: JIT targets the visible GPUs")
    archs = {a.rstrip("afAF") for a in _arch_entries(value)}
    if cc and cc not in archs:
        return Check("cuda_arch_list", False,
                     f"FLASHINFER_CUDA_ARCH_LIST={value!r} does not include this GPU's {cc}",
                     f"export FLASHINFER_CUDA_ARCH_LIST={cc}{'a' if cc.startswith('9.') else ''} "
                     f"(space-separated major.minor)")
    return Check("cuda_arch_list", True, f"FLASHINFER_CUDA_ARCH_LIST={value!r}")


# --------------------------------------------------------------------------- gather + verdict


def gather(flashinfer_repo: str | None, gpu_index: int,
           probe_timer: Callable[[int], dict[str, Any]] = envmod.probe_timer) -> dict[str, Any]:
    """Run every probe (NVML first, before this process creates a CUDA context)."""
    gpu = gpu_probes.gpu_info(gpu_index)
    probes: dict[str, Any] = {
        "gpu": gpu,
        "wheel": versions.flashinfer_wheel(),
        "companions": versions.flashinfer_companions(),
        "checkout": versions.flashinfer_checkout(flashinfer_repo),
        "nvcc": gpu_probes.nvcc_info(),
        "tileiras": gpu_probes.tileiras_info(),
        "env": {k: os.environ[k] for k in envmod.RELEVANT_ENV if k in os.environ},
        "torch_cuda": None,
        "stack": None,
        "timer_probe": None,
    }
    if gpu.get("error"):
        return probes  # CPU-only: nothing below can work, and torch import costs seconds
    tc = gpu_probes.torch_cuda(gpu_index)
    probes["torch_cuda"] = tc
    gpu["sm_count"] = tc.get("sm_count")
    probes["stack"] = gpu_probes.cuda_stack()
    if tc.get("available") and not tc.get("error") and probes["wheel"].get("version"):
        probes["timer_probe"] = probe_timer(gpu_index)
    return probes


def run_checks(p: dict[str, Any], backends: Sequence[str] = ()) -> list[Check]:
    """All verdicts for gathered probes; `backends` (the run's --backends) makes the tools those
    backends need blocking. Without a GPU only the machine-independent checks follow the gpu
    failure (the rest would repeat it)."""
    checks = [check_gpu(p["gpu"])]
    gpu_ok = checks[0].ok
    if gpu_ok:
        checks.append(check_idle(p["gpu"]))
        checks.append(check_torch_cuda(p["torch_cuda"] or {}, p["gpu"]))
    checks.append(check_flashinfer_wheel(p["wheel"]))
    checks.append(check_checkout(p["checkout"], p["wheel"]))
    checks.append(check_flashinfer_match(p["wheel"], p["checkout"]))
    if gpu_ok:
        checks.append(check_cupti(p["timer_probe"], p["stack"] or {}, p["gpu"]))
    runtime = (p.get("stack") or {}).get("cuda_runtime")
    checks.append(check_nvcc(p["nvcc"], runtime))
    checks.append(check_tileiras(p.get("tileiras") or {}, backends,
                                 (p["gpu"] or {}).get("compute_capability") if gpu_ok else None))
    checks.append(check_no_download(p["env"]))
    checks.append(check_prebuilt(p.get("companions") or {}, p["wheel"],
                                 (p["gpu"] or {}).get("compute_capability") if gpu_ok else None,
                                 runtime, p["env"], backends))
    if gpu_ok:
        checks.append(check_arch_list(p["env"], p["gpu"]))
    return checks


def ready(checks: list[Check]) -> bool:
    """Trustworthy numbers are possible only when no check failed (warnings are allowed)."""
    return all(c.ok is not False for c in checks)


def verdict_line(checks: list[Check]) -> str:
    failed = [c for c in checks if c.ok is False]
    warned = [c for c in checks if c.ok is None]
    gpu = next((c for c in checks if c.name == "gpu"), None)
    if gpu is not None and gpu.ok is False:
        if not gpu.detail.startswith("no NVIDIA GPU"):
            return f"NOT READY: {gpu.detail}; fix: {gpu.fix}"
        return (f"NOT READY: {gpu.detail}. This machine can preview shapes (--print_only) but "
                f"cannot time kernels.")
    if failed:
        return (f"NOT READY: {len(failed)} check(s) failed ({', '.join(c.name for c in failed)});"
                f" fix them and run the doctor again.")
    tail = f" ({len(warned)} warning(s): {', '.join(c.name for c in warned)})" if warned else ""
    return f"READY: this set-up can produce trustworthy kernel times{tail}."


_MARK = {True: "ok  ", False: "FAIL", None: "warn"}


def format_checks(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"[{_MARK[c.ok]}] {c.name}: {c.detail}")
        if c.fix and c.ok is not True:
            lines.append(f"       fix: {c.fix}")
    lines.append(verdict_line(checks))
    return "\n".join(lines)


def to_json(checks: list[Check], probes: dict[str, Any], gpu_index: int) -> str:
    return json.dumps({"ready": ready(checks), "gpu_index": gpu_index,
                       "verdict": verdict_line(checks),
                       "checks": [asdict(c) for c in checks], "probes": probes}, indent=1,
                      default=str)


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="check_env.py",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Check that this machine can produce trustworthy kernel times: an idle NVIDIA "
                    "GPU, torch with CUDA, the FlashInfer wheel matching the checkout, a working "
                    "CUPTI timer (probed for real), nvcc for JIT, no-download mode, and the "
                    "tools optional backends need (tileiras for cutile).",
        epilog="examples:\n"
               "  python scripts/check_env.py --flashinfer_repo ~/flashinfer\n"
               "  python scripts/check_env.py --flashinfer_repo ~/flashinfer --gpu 1 --json\n"
               "  python scripts/check_env.py --flashinfer_repo ~/flashinfer --backends cutile\n"
               "exit status: 0 ready, 1 not ready (a check failed, or no GPU), 2 bad arguments.",
    )
    p.add_argument("--flashinfer_repo", metavar="PATH", default=None, type=path_arg("--flashinfer_repo"),
                   help="FlashInfer source checkout whose benchmarks/flashinfer_benchmark.py the "
                        "runner drives, e.g. --flashinfer_repo ~/flashinfer")
    p.add_argument("--gpu", metavar="INDEX", type=int, default=0,
                   help="CUDA index of the GPU to check (as CUDA_VISIBLE_DEVICES numbers them), "
                        "e.g. --gpu 1; default 0")
    p.add_argument("--backends", nargs="+", metavar="BACKEND", default=(),
                   help="the backends the run will time (as the runner's --backends), e.g. "
                        "--backends cudnn cutile: a tool one of them needs (tileiras for cutile) "
                        "then fails the doctor instead of warning")
    p.add_argument("--json", action="store_true",
                   help="print {ready, verdict, checks: [{name, ok, detail, fix}], probes} as "
                        "JSON instead of text")
    return p


def main(argv: list[str] | None = None) -> int:
    return cli_main(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.gpu < 0:
        raise UsageError("--gpu", args.gpu, "must be a CUDA device index >= 0, e.g. --gpu 0")
    names = BACKEND_NAMES
    if any(b not in names for b in args.backends):  # maybe one the installed FlashInfer adds
        names = backend_names(load_capabilities(args.flashinfer_repo))
    for backend in args.backends:
        if backend not in names:
            raise UsageError("--backends", backend, f"choose from {', '.join(names)}")
    try:
        probes = gather(args.flashinfer_repo, args.gpu)
        checks = run_checks(probes, args.backends)
    except Exception as e:  # every probe is guarded; this is the last line of defence
        print(f"error: the doctor itself failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_NOT_READY
    if args.json:
        print(to_json(checks, probes, args.gpu))
    else:
        print(format_checks(checks))
    return EXIT_READY if ready(checks) else EXIT_NOT_READY


if __name__ == "__main__":
    sys.exit(main())
