"""The runs of a sweep (several MODELs, several --tp/--ep settings): each one's sub-workdir name,
distinct by construction, and a run given twice refused before any planning.

In: the MODEL arguments, the (TP, EP) settings and --revision. Out: one sub-workdir name per run,
`<model>_tp<T>_ep<E>`, where <model> is the last part of MODEL's path made filename-safe; two
different configs that would share it (`a/model` and `b/model`, a bundled name and a folder of
that name) each get a short digest of what they read (`model-1f2e3d4c_tp1_ep1`). A name stays
the same as long as no other MODEL of the sweep shares it, so a sweep resumes into the folders
it wrote.
"""

from __future__ import annotations

import hashlib
import os

from ..core.errors import UsageError
from ..plan import config_source

#: Hex digits of the source digest that tells two same-named models apart.
DIGEST_CHARS = 8


def model_source(model: str, revision: str | None = None) -> str:
    """What MODEL reads, found as config_source.resolve finds it (a folder, a file, a bundled name,
    a Hub ID, in that order): the real path of a local config.json, a bundled config's file, or
    the Hub ID at its revision."""
    kind, where = source_of(model)
    if kind == "hub":
        return f"hub:{where}" + (f"@{revision}" if revision else "")
    return f"{kind}:{os.path.realpath(where)}"


def source_of(model: str) -> tuple[str, str]:
    """("local", the config.json path), ("bundled", its file) or ("hub", the ID)."""
    expanded = os.path.expanduser(model)
    if os.path.isdir(expanded):
        return "local", os.path.join(expanded, "config.json")
    if os.path.isfile(expanded):
        return "local", expanded
    bundled = os.path.join(config_source.MODELS_DIR, f"{model}.json")
    if os.path.isfile(bundled):
        return "bundled", bundled
    return "hub", model


def check_revision(models: list[str], revision: str | None) -> None:
    """--revision names a Hub revision: refused (UsageError) for a MODEL read from a bundled
    config or a local path, which has none (results.json would record it as provenance)."""
    if revision is None:
        return
    for model in models:
        kind, _ = source_of(model)
        if kind != "hub":
            what = "a bundled config" if kind == "bundled" else "a local path"
            raise UsageError("--revision", revision, f"applies to a Hub ID only; MODEL={model} is {what}, which "
                             "has no revisions; drop --revision")


def base_name(model: str) -> str:
    """The model's part of a sub-workdir name: MODEL's last path part (its folder's for a
    config.json), made filename-safe."""
    name = os.path.basename(os.path.normpath(model)) or "model"
    if name == "config.json":
        name = os.path.basename(os.path.dirname(os.path.abspath(model))) or "model"
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in name)


def check_distinct_settings(settings: list[tuple[int, int]], tps: list[int] | None, eps: list[int] | None) -> None:
    """Refuse (UsageError) a (TP, EP) setting the --tp/--ep lists give twice (`--tp 1 1`): its
    second run would time the first one's workdir again."""
    seen: set[tuple[int, int]] = set()
    for tp, ep in settings:
        if (tp, ep) in seen:
            flag, values = ("--tp", tps) if tps and len(tps) > 1 else ("--ep", eps)
            raise UsageError(flag, " ".join(map(str, values or [])), f"gives the setting TP={tp} EP={ep} "
                             "twice (--tp and --ep pair up in order); give each setting once")
        seen.add((tp, ep))


def model_names(models: list[str], revision: str | None = None) -> dict[str, str]:
    """MODEL -> its part of the sub-workdir names: base_name, with a digest of model_source where
    two different configs share a base name. Refuses (UsageError) two MODELs that read one config
    (the same MODEL twice, a folder and its config.json): the second would be the first again."""
    sources: dict[str, str] = {}
    for model in models:
        source = model_source(model, revision)
        twin = next((m for m, s in sources.items() if s == source), None)
        if twin is not None:
            shown = model if model == twin else f"{twin} and {model}"
            raise UsageError("MODEL", shown, f"names one config twice ({source.split(':', 1)[1]}); give each "
                             "model once")
        sources[model] = source
    bases = {model: base_name(model) for model in models}
    names = {}
    for model in models:
        shared = [m for m in models if bases[m] == bases[model]]
        digest = hashlib.sha256(sources[model].encode()).hexdigest()[:DIGEST_CHARS]
        names[model] = bases[model] if len(shared) == 1 else f"{bases[model]}-{digest}"
    return names


def run_name(model_name: str, tp: int, ep: int) -> str:
    """The sub-workdir name of one run: `<model name>_tp<T>_ep<E>`."""
    return f"{model_name}_tp{tp}_ep{ep}"


__all__ = ["DIGEST_CHARS", "base_name", "check_distinct_settings", "check_revision", "model_names",
           "model_source", "run_name", "source_of"]
