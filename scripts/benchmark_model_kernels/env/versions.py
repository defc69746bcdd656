"""Versions a number depends on: installed packages, the FlashInfer wheel and its source checkout,
and the cupti-python that matches a CUDA stack. Pure reads of package metadata and git; nothing
here imports torch or touches a GPU."""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

# --------------------------------------------------------------------------- the FlashInfer pair

#: The FlashInfer release this tool documents for a Python without vLLM: README.md and SKILL.md
#: install this wheel and clone its tag (`release_tag`) for the driver's benchmarks/;
#: tests/test_packaging.py checks that they and pyproject.toml's `gpu` extra agree with it. vLLM
#: pins its own (vLLM 0.33.0: 0.7.2.post1); beside vLLM the doctor names that one instead
#: (`vllm_flashinfer`), since installing this one would downgrade vLLM's.
FLASHINFER_WHEEL = "0.6.18.post1"
#: The flashinfer-python the vLLM release this tool follows requires (vLLM 0.33.0's metadata:
#: "flashinfer-python==0.7.2.post1"). README.md and SKILL.md name it for the vLLM case
#: (tests/test_packaging.py); the doctor reads the installed vLLM's own metadata instead.
VLLM_FLASHINFER_PINS = {"0.33.0": "0.7.2.post1"}
#: Release lines whose driver argv and output this tool parses, oldest first: 0.6.17, every
#: 0.6.18.x, every 0.7.x (pyproject.toml's `gpu` extra admits exactly these).
SUPPORTED_FLASHINFER_LINES = ("0.6.17", "0.6.18", "0.7")
#: The same, in words.
SUPPORTED_FLASHINFER_TEXT = "0.6.17, 0.6.18.x and 0.7.x"
#: Where the driver's source comes from.
FLASHINFER_GIT_URL = "https://github.com/flashinfer-ai/flashinfer"
#: FlashInfer's own wheel index, where flashinfer-jit-cache is published per CUDA major.minor
#: ("cu130"); flashinfer-cubin is on PyPI.
FLASHINFER_WHEEL_INDEX = "https://flashinfer.ai/whl"

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


#: A public release FlashInfer tags as v<release>: "0.6.17", "0.6.18rc7", "0.6.18.post1".
_TAGGED_RELEASE = re.compile(r"\d+\.\d+\.\d+(?:rc\d+|\.post\d+)?")


def release_tag(version: str | None) -> str | None:
    """The git tag FlashInfer gives a release ("0.6.18.post1" -> "v0.6.18.post1"); None for a
    development or unknown version, which no tag names."""
    release = release_of(version)
    return f"v{release}" if release and _TAGGED_RELEASE.fullmatch(release) else None


def base_release(version: str | None) -> str | None:
    """ "0.6.18.post1", "0.6.18rc7", "v0.6.18" -> "0.6.18" (None when it is not X.Y.Z...)."""
    m = re.match(r"(\d+\.\d+\.\d+)", release_of(version) or "")
    return m.group(1) if m else None


def release_key(version: str | None) -> tuple[int, ...]:
    """(major, minor, patch) of a version, for ordering releases ("0.6.16.post4" -> (0, 6, 16))."""
    return tuple(int(x) for x in (base_release(version) or "0.0.0").split("."))


def supported_line(version: str | None) -> str | None:
    """The SUPPORTED_FLASHINFER_LINES entry a version belongs to ("0.7.4" -> "0.7"), or None."""
    base = base_release(version)
    if not base:
        return None
    for line in SUPPORTED_FLASHINFER_LINES:
        if base == line or base.startswith(line + "."):
            return line
    return None


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


def _tags_at(repo: str, git_dir: str, commit: str) -> list[str]:
    """Tags naming `commit`: what `git clone --depth 1 --branch vX` or a fetch of a tag leaves.
    Asks git (a loose annotated tag names a tag object, which only git unpacks); without a git
    binary, reads refs/tags and packed-refs (annotated tags by their peeled "^<commit>" line)."""
    import shutil
    import subprocess

    if shutil.which("git"):
        try:
            out = subprocess.run(["git", "-C", repo, "tag", "--points-at", commit],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode == 0:
                return sorted(t for t in out.stdout.split() if t)
        except (OSError, subprocess.SubprocessError):
            pass
    dirs = [git_dir]
    common = os.path.join(git_dir, "commondir")
    if os.path.isfile(common):
        c = open(common).read().strip()
        dirs.append(c if os.path.isabs(c) else os.path.normpath(os.path.join(git_dir, c)))
    found: list[str] = []
    for d in dirs:
        packed = os.path.join(d, "packed-refs")
        if os.path.isfile(packed):
            last = ""
            for line in open(packed):
                line = line.strip()
                if line.startswith("^"):
                    if line[1:] == commit and last.startswith("refs/tags/"):
                        found.append(last[len("refs/tags/"):])
                    continue
                parts = line.split(" ", 1)
                last = parts[1] if len(parts) == 2 else ""
                if parts[0] == commit and last.startswith("refs/tags/"):
                    found.append(last[len("refs/tags/"):])
        tags = os.path.join(d, "refs", "tags")
        for root, _dirs, files in os.walk(tags):
            for name in files:
                path = os.path.join(root, name)
                try:
                    if open(path).read().strip() == commit:
                        found.append(os.path.relpath(path, tags))
                except OSError:
                    continue
    return sorted(set(found))


def flashinfer_checkout(repo: str | None) -> dict[str, Any]:
    """Facts about a FlashInfer source checkout: its driver script, version.txt, git commit, the
    tags at that commit and whether the clone is shallow (`--depth 1`)."""
    out: dict[str, Any] = {"path": None, "exists": False, "driver": None, "version": None,
                           "commit": None, "tags": [], "git": False, "shallow": False}
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
    git_dir = _git_dir(path)
    if git_dir is not None:
        out["git"] = True
        out["shallow"] = os.path.isfile(os.path.join(git_dir, "shallow"))
        if out["commit"]:
            out["tags"] = _tags_at(path, git_dir, out["commit"])
    if out["version"] is None:  # no version.txt: a release tag at HEAD names it
        releases = [release_of(t) for t in out["tags"] if release_tag(t)]
        out["version"] = releases[0] if releases else None
    return out


def shell_path(path: str) -> str:
    """`path` quoted for a shell, a leading "~/" left for the shell to expand."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


def fetch_driver_command(wheel_version: str | None, wheel_commit: str | None,
                         checkout: dict[str, Any]) -> str:
    """The shell command that puts the wheel's own benchmarks/ at the checkout's path, so the
    same --flashinfer_repo then passes the doctor.

    In a git checkout: fetch just that tag (or the wheel's recorded commit) and check it out,
    with --depth 1 when the clone is shallow (a `git checkout vX` of a tag the shallow clone never
    fetched cannot work). A folder that is not a git checkout (a copied benchmarks/): a --depth 1
    clone of the tag beside it, then the folder moved aside (kept as <path>.before-<tag>) and the
    clone moved in. A path that does not exist: the clone, there. No path: ~/flashinfer.
    "" when neither a tag nor a commit names the wheel."""
    tag = release_tag(wheel_version)
    path = checkout.get("path") or "~/flashinfer"
    commit = (wheel_commit or "").strip()
    q = shell_path(path)
    if checkout.get("git") and checkout.get("exists"):
        depth = " --depth 1" if checkout.get("shallow") else ""
        if tag:
            return f"git -C {q} fetch{depth} {FLASHINFER_GIT_URL} tag {tag} && git -C {q} checkout {tag}"
        if commit:
            return (f"git -C {q} fetch{depth} {FLASHINFER_GIT_URL} {commit} && "
                    f"git -C {q} checkout FETCH_HEAD")
        return ""
    label = tag or (commit[:12] if commit else "")
    if not label:
        return ""
    target = shell_path(f"{path.rstrip('/')}-{label}") if checkout.get("exists") else q
    if tag:
        clone = f"git clone --depth 1 --branch {tag} {FLASHINFER_GIT_URL} {target}"
    else:
        clone = (f"git init -q {target} && git -C {target} fetch --depth 1 {FLASHINFER_GIT_URL} "
                 f"{commit} && git -C {target} checkout -q FETCH_HEAD")
    if checkout.get("exists"):
        aside = shell_path(f"{path.rstrip('/')}.before-{label}")
        clone += f" && mv {q} {aside} && mv {target} {q}"
    return clone


def flashinfer_companions() -> dict[str, str | None]:
    """Installed versions of FlashInfer's prebuilt-kernel packages (None: not installed):
    flashinfer-cubin (trtllm-gen cubins, else downloaded on first use) and flashinfer-jit-cache
    (prebuilt JIT modules, else compiled on first use)."""
    return {"flashinfer_cubin": dist_version("flashinfer-cubin"),
            "flashinfer_jit_cache": dist_version("flashinfer-jit-cache")}


def vllm_flashinfer() -> dict[str, str | None]:
    """vLLM in this Python, and the flashinfer-python release its metadata requires (vLLM 0.33.0:
    "==0.7.2.post1"), read from package metadata without importing vLLM (seconds, and CUDA
    initialisation). {"vllm": version or None, "flashinfer": the pinned release or None,
    "requirement": the requirement as vLLM states it or None}."""
    out: dict[str, str | None] = {"vllm": dist_version("vllm"), "flashinfer": None, "requirement": None}
    if out["vllm"] is None:
        return out
    try:
        from importlib.metadata import requires

        for req in requires("vllm") or ():
            m = re.match(r"\s*flashinfer[-_]python\s*([^;]*)(;.*)?$", req, re.I)
            if m and not (m.group(2) or "").strip(" ;"):
                spec = m.group(1).strip().strip("()").strip()
                out["requirement"] = f"flashinfer-python{spec}"
                pin = re.fullmatch(r"===?\s*([\w.+]+)", spec)
                out["flashinfer"] = pin.group(1) if pin else None
                break
    except Exception:  # a broken vLLM install must not break the probe
        pass
    return out


# --------------------------------------------------------------------------- CUDA / CUPTI / nvcc


#: The rule the CUPTI timer follows, in words (the doctor's messages and the docs say it).
CUPTI_RULE = ("FlashInfer times with CUPTI only with a cupti-python >= 13 (it refuses older ones); the "
              "pin that matches is the CUDA runtime's major.minor, beside that runtime's own "
              "nvidia-cuda-cupti (cupti-python 13.0.x with torch's nvidia-cuda-cupti 13.0.85); any "
              "other can fall back to CUDA events")


def cupti_fix_command(cuda_runtime: str | None, driver_cuda: str | None = None) -> str:
    """The pip command that installs the cupti-python matching this CUDA stack.

    CUPTI must not be newer than the CUDA the driver supports, and FlashInfer needs
    cupti-python >= 13, so the target is min(runtime, driver) major.minor:
    runtime 13.0, driver 13.0 -> `pip install 'cupti-python==13.0.*'` (which also brings back the
    runtime's nvidia-cuda-cupti 13.0.x where a cupti-python of another minor replaced it).
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


def cupti_mismatch(cupti_python: str | None, cuda_runtime: str | None,
                   cupti_wheel: str | None = None) -> str:
    """Where this stack breaks CUPTI_RULE ("" where it does not, as far as the versions known
    tell): a cupti-python FlashInfer refuses (< 13), one of another major.minor than the CUDA
    runtime, or an nvidia-cuda-cupti of another major.minor (a cupti-python of another minor
    pulls its own over torch's)."""
    have, runtime, wheel = major_minor(cupti_python), major_minor(cuda_runtime), major_minor(cupti_wheel)
    if have is not None and version_key(have)[0] < 13:
        return f"cupti-python {cupti_python} is older than 13, which FlashInfer's timer refuses"
    if have is not None and runtime and have != runtime:
        return f"cupti-python {cupti_python} is {have} but the CUDA runtime is {cuda_runtime}"
    if wheel and runtime and wheel != runtime:
        return f"nvidia-cuda-cupti {cupti_wheel} is not the CUDA runtime's {runtime}"
    return ""
