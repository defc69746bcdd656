"""The doctor's checks of the FlashInfer install: the wheel (a release this tool parses), which
pairing applies (alone: the documented wheel and its tag; beside vLLM: vLLM's own FlashInfer and
its tag, or --no_driver), the source checkout whose benchmark driver the runner drives, whether the
two agree, and the prebuilt kernels (flashinfer-cubin, flashinfer-jit-cache) this GPU needs. Each
returns a `Check` (see `checks`) whose fix says how to fetch or install the matching piece.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..env import versions
from ..run.pool import no_download_state
from .checks import Check


def paired_release(vllm: dict[str, Any] | None = None) -> str:
    """The flashinfer-python release to install here: vLLM's pin where vLLM is installed (another
    would downgrade or upgrade vLLM's), else the documented FLASHINFER_WHEEL."""
    return (vllm or {}).get("flashinfer") or versions.FLASHINFER_WHEEL


def _pinned_install(vllm: dict[str, Any] | None = None) -> str:
    return f"pip install 'flashinfer-python=={paired_release(vllm)}'"


def check_flashinfer_wheel(wheel: dict[str, Any], vllm: dict[str, Any] | None = None) -> Check:
    supported = versions.SUPPORTED_FLASHINFER_TEXT
    if not wheel.get("version"):
        which = (f"vLLM {vllm['vllm']} requires {paired_release(vllm)}" if (vllm or {}).get("flashinfer")
                 else f"the release this tool documents is {versions.FLASHINFER_WHEEL}")
        return Check("flashinfer_wheel", False,
                     f"flashinfer-python is not installed ({which}; this tool parses the drivers of "
                     f"{supported})", _pinned_install(vllm))
    commit = f" (commit {wheel['commit'][:12]})" if wheel.get("commit") else ""
    found = f"flashinfer-python {wheel['version']}{commit}"
    if versions.supported_line(wheel["version"]) is None:
        older = (versions.release_key(wheel["version"])
                 < versions.release_key(versions.SUPPORTED_FLASHINFER_LINES[0]))
        return Check("flashinfer_wheel", False if older else None,
                     f"{found}: this tool parses the driver of {supported} only"
                     + ("" if older else "; a newer driver's output may read as failed rows"),
                     _pinned_install(vllm))
    return Check("flashinfer_wheel", True, found)


def check_flashinfer_pairing(wheel: dict[str, Any], vllm: dict[str, Any], checkout: dict[str, Any]) -> Check:
    """Which FlashInfer pairing this Python is in, and what to do about it. Alone (no vLLM): the
    documented pair, FLASHINFER_WHEEL with its tag's driver. Beside vLLM: keep the flashinfer-python
    vLLM requires (installing the documented one would change vLLM's) and drive the checkout of
    that release's tag, or run with --no_driver. A wheel other than vLLM's pin is a warning: the
    tool's numbers are fine, vLLM's install is not."""
    wv = wheel.get("version")
    if not vllm.get("vllm"):
        tag = versions.release_tag(versions.FLASHINFER_WHEEL)
        return Check("flashinfer_pairing", True,
                     f"alone (no vLLM in this Python): the documented pair is flashinfer-python "
                     f"{versions.FLASHINFER_WHEEL} with a {tag} driver checkout"
                     + (f"; installed: {wv} (any of {versions.SUPPORTED_FLASHINFER_TEXT} works with "
                        f"its own tag's checkout)" if wv and versions.release_of(wv) != versions.FLASHINFER_WHEEL
                        else ""))
    pin = vllm.get("flashinfer")
    if not pin:
        return Check("flashinfer_pairing", None,
                     f"inside vLLM {vllm['vllm']}, which names no single flashinfer-python release "
                     f"({vllm.get('requirement') or 'no flashinfer-python requirement'}): keep the one "
                     f"installed ({wv or 'none'}) and drive its own tag's checkout, or run with --no_driver")
    tag = versions.release_tag(pin)
    clone = versions.fetch_driver_command(pin, None, checkout if checkout.get("path") else {})
    if versions.release_of(wv) != versions.release_of(pin):
        return Check("flashinfer_pairing", None,
                     f"inside vLLM {vllm['vllm']}, which requires flashinfer-python {pin}, but "
                     f"{wv or 'none'} is installed: vLLM may not run with it (the tool's rows are "
                     f"still valid with a checkout of the installed wheel's tag)",
                     f"{_pinned_install(vllm)}, then the {tag} checkout: {clone}")
    line = "" if versions.supported_line(pin) else (
        f"; this tool parses the drivers of {versions.SUPPORTED_FLASHINFER_TEXT} only, so run with --no_driver")
    return Check("flashinfer_pairing", True,
                 f"inside vLLM {vllm['vllm']}: keep its flashinfer-python {pin} (installing "
                 f"{versions.FLASHINFER_WHEEL} would downgrade vLLM's) and drive a {tag} checkout "
                 f"({clone}), or run with --no_driver{line}")


def _clone_hint(wheel: dict[str, Any], checkout: dict[str, Any],
                vllm: dict[str, Any] | None = None) -> str:
    """The clone of the installed wheel's driver (the release to install here when none is
    installed: vLLM's pin, else the documented one) at the checkout's path (~/flashinfer without
    one)."""
    version = wheel.get("version") or paired_release(vllm)
    commit = wheel.get("commit") if wheel.get("version") else None
    return versions.fetch_driver_command(version, commit, {"path": checkout.get("path")})


def check_checkout(checkout: dict[str, Any], wheel: dict[str, Any] | None = None,
                   vllm: dict[str, Any] | None = None) -> Check:
    clone = _clone_hint(wheel or {}, checkout, vllm)
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
                     f"benchmarks/); to get one: {_clone_hint(wheel or {}, {}, vllm)}")
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


__all__ = ["TRTLLM_GEN_CCS", "TRTLLM_GEN_BACKENDS", "paired_release", "check_flashinfer_wheel",
           "check_flashinfer_pairing", "check_checkout",
           "check_flashinfer_match", "cubin_install", "jit_cache_install", "check_prebuilt"]
