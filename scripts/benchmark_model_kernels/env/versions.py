"""Versions a number depends on: installed packages, the FlashInfer wheel and its source checkout,
and the cupti-python that matches a CUDA stack. Pure reads of package metadata and git; nothing
here imports torch or touches a GPU."""

from __future__ import annotations

import os
import re
from typing import Any

# --------------------------------------------------------------------------- small helpers


def dist_version(*names: str) -> str | None:
    """Installed version of the first distribution found among `names` (no import)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
        except Exception:  # a broken install must not break the probe
            continue
    return None


def major_minor(version: str | None) -> str | None:
    """ "13.0.85" -> "13.0"; "12" -> "12.0"; None/garbage -> None."""
    m = re.match(r"\s*(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return None
    return f"{int(m.group(1))}.{int(m.group(2) or 0)}"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:2])


def release_of(version: str | None) -> str | None:
    """The public release of a version: "0.6.17+cu130" -> "0.6.17", "v0.6.17" -> "0.6.17"."""
    if not version:
        return None
    v = version.strip().lstrip("vV").split("+", 1)[0]
    return v or None


def versions_match(wheel: str | None, checkout: str | None) -> bool | None:
    """Whether the FlashInfer wheel and the checkout are the same release (None: unknown)."""
    a, b = release_of(wheel), release_of(checkout)
    if not a or not b:
        return None
    return a == b


def commits_match(wheel: str | None, checkout: str | None) -> bool | None:
    """Whether two git commits are the same (prefixes allowed; None: either unknown)."""
    a, b = (wheel or "").strip().lower(), (checkout or "").strip().lower()
    if not a or not b or a == "unknown" or b == "unknown":
        return None
    n = min(len(a), len(b))
    return n >= 7 and a[:n] == b[:n]


# --------------------------------------------------------------------------- FlashInfer


def flashinfer_wheel() -> dict[str, str | None]:
    """The installed flashinfer-python version and commit, read without importing flashinfer
    (its import initializes CUDA and may log); the commit comes from flashinfer/_build_meta.py."""
    out: dict[str, str | None] = {"version": dist_version("flashinfer-python", "flashinfer"),
                                  "commit": None, "path": None}
    try:
        import importlib.util

        spec = importlib.util.find_spec("flashinfer")
        if spec is not None and spec.submodule_search_locations:
            pkg = list(spec.submodule_search_locations)[0]
            out["path"] = pkg
            meta = os.path.join(pkg, "_build_meta.py")
            if os.path.isfile(meta):
                text = open(meta).read()
                m = re.search(r"__git_commit__\s*=\s*['\"]([^'\"]+)", text)
                if m and m.group(1) != "unknown":
                    out["commit"] = m.group(1)
                if out["version"] is None:
                    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
                    out["version"] = m.group(1) if m else None
    except Exception:
        pass
    return out


def _git_dir(repo: str) -> str | None:
    dot_git = os.path.join(repo, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    if os.path.isfile(dot_git):  # worktree / submodule: "gitdir: <path>"
        try:
            line = open(dot_git).read().strip()
        except OSError:
            return None
        if line.startswith("gitdir:"):
            path = line[len("gitdir:"):].strip()
            return path if os.path.isabs(path) else os.path.normpath(os.path.join(repo, path))
    return None


def _resolve_ref(git_dir: str, ref: str) -> str | None:
    """Resolve "refs/heads/x" through loose refs, then packed-refs (worktrees: commondir)."""
    dirs = [git_dir]
    common = os.path.join(git_dir, "commondir")
    if os.path.isfile(common):
        c = open(common).read().strip()
        dirs.append(c if os.path.isabs(c) else os.path.normpath(os.path.join(git_dir, c)))
    for d in dirs:
        loose = os.path.join(d, ref)
        if os.path.isfile(loose):
            return open(loose).read().strip() or None
        packed = os.path.join(d, "packed-refs")
        if os.path.isfile(packed):
            for line in open(packed):
                parts = line.strip().split(" ", 1)
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    return None


def git_head_commit(repo: str) -> str | None:
    """HEAD commit of a git checkout, read from the files (no git binary, no network)."""
    try:
        git_dir = _git_dir(repo)
        if git_dir is None:
            return None
        head = open(os.path.join(git_dir, "HEAD")).read().strip()
        if head.startswith("ref:"):
            return _resolve_ref(git_dir, head[4:].strip())
        return head if re.fullmatch(r"[0-9a-f]{40,64}", head) else None
    except Exception:
        return None


def flashinfer_checkout(repo: str | None) -> dict[str, Any]:
    """Facts about a FlashInfer source checkout: its driver script, version.txt and git commit."""
    out: dict[str, Any] = {"path": None, "exists": False, "driver": None, "version": None,
                           "commit": None}
    if not repo:
        return out
    path = os.path.abspath(os.path.expanduser(repo))
    out["path"] = path
    out["exists"] = os.path.isdir(path)
    driver = os.path.join(path, "benchmarks", "flashinfer_benchmark.py")
    out["driver"] = driver if os.path.isfile(driver) else None
    try:
        vt = os.path.join(path, "version.txt")
        if os.path.isfile(vt):
            out["version"] = open(vt).read().strip() or None
    except OSError:
        pass
    out["commit"] = git_head_commit(path)
    return out


# --------------------------------------------------------------------------- CUDA / CUPTI / nvcc


def cupti_fix_command(cuda_runtime: str | None, driver_cuda: str | None = None) -> str:
    """The pip command that installs the cupti-python matching this CUDA stack.

    CUPTI must not be newer than the CUDA the driver supports, and FlashInfer needs
    cupti-python >= 13, so the target is min(runtime, driver) major.minor:
    runtime 13.0, driver 13.0 -> `pip install 'cupti-python==13.0.*'`.
    """
    versions = [v for v in (major_minor(cuda_runtime), major_minor(driver_cuda)) if v]
    if not versions:
        return "pip install 'cupti-python>=13' (match it to your CUDA runtime: torch.version.cuda)"
    target = min(versions, key=version_key)
    if version_key(target)[0] < 13:
        return (f"none with pip alone: FlashInfer's CUPTI timer needs cupti-python>=13, i.e. a CUDA 13 "
                f"stack (driver >= 580, a cu13x torch); this stack is CUDA {target}. Upgrade it, or "
                f"run with --allow_cuda_events and say in the report that rows are CUDA-event timed")
    return f"pip install 'cupti-python=={target}.*'"
