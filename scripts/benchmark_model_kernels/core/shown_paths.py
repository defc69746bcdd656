"""Paths as report.md shows them: never an absolute path of the machine that ran or rendered a run.

A report is committed and read elsewhere; `/root/out/ev/qwen3_tp1` or `/tmp/...` says nothing there
and names someone's machine. In: a workdir path (as report.py was given it) and the text or argv
results.json recorded. Out: the workdir as its name; inside text, an absolute path under the run's
workdir as `<workdir name>/<rest>`, any other absolute path as `<path>/<its basename>` (the
placeholder in a code span of its own outside one); a local model directory by its name. Relative
paths (what the user typed from the repository) are kept. results.json itself is never changed.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from typing import Any

#: Stands for the directories of an absolute path the report does not show.
PATH_PLACEHOLDER = "<path>"

# An absolute POSIX path: a "/" that starts a word (not "p10/p90", "GB/s", "https://x/y"), then the
# characters a path of this tool's holds; a sentence's closing "." is not part of it.
_ABSOLUTE = re.compile(r"(?<![\w.~:/\\-])/[^\s`'\",;|()\[\]{}<>=]+")
# shlex.quote leaves these characters unquoted; the placeholder travels through it as this token.
_SAFE_TOKEN = "@@PATH@@"


def workdir_name(path: str) -> str:
    """The workdir as the report names it: its last component ("qwen3-30b-a3b_tp1"; "." is the
    directory it names)."""
    return os.path.basename(os.path.abspath(path)) if path else ""


def recorded_workdirs(results: dict[str, Any], path: str = "") -> tuple[str, ...]:
    """The absolute workdirs a run's recorded paths may sit under: the `--workdir` its command
    line gave (the machine that ran it) and `path`, where report.py read it (this machine)."""
    out = []
    cmd = results.get("command")
    args = [str(c) for c in cmd] if isinstance(cmd, list) else []
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "--workdir" and i + 1 < len(args) else (
            arg[len("--workdir="):] if arg.startswith("--workdir=") else "")
        if os.path.isabs(value):
            out.append(os.path.normpath(value))
    if path:
        out.append(os.path.normpath(os.path.abspath(path)))
    return tuple(dict.fromkeys(out))


def _shown(found: str, workdirs: Sequence[str]) -> str:
    tail = ""
    while found.endswith(".") and len(found) > 1:  # a sentence's full stop, not the path's
        found, tail = found[:-1], tail + "."
    norm = os.path.normpath(found)
    for w in workdirs:
        if norm == w or norm.startswith(w.rstrip("/") + "/"):
            rest = os.path.relpath(norm, w)
            return (workdir_name(w) if rest == "." else f"{workdir_name(w)}/{rest}") + tail
    base = os.path.basename(norm)
    return (f"{PATH_PLACEHOLDER}/{base}" if base else PATH_PLACEHOLDER) + tail


def shown_text(text: str, workdirs: Sequence[str] = (), code: bool = False) -> str:
    """`text` with every absolute path replaced (see the module docstring). Outside a code span the
    placeholder is one itself (`` `<path>` ``): Markdown would take a bare <path> for an HTML tag
    and drop it. `code`: the whole text goes inside a code span."""
    def sub(mo: re.Match[str]) -> str:
        shown = _shown(mo.group(0), workdirs)
        in_code = code or text.count("`", 0, mo.start()) % 2 == 1
        return shown if in_code else shown.replace(PATH_PLACEHOLDER, f"`{PATH_PLACEHOLDER}`", 1)

    return _ABSOLUTE.sub(sub, text)


def shown_command(command: Sequence[Any], workdirs: Sequence[str] = ()) -> str:
    """A recorded argv as one shell line for a code span, its absolute paths replaced; the
    placeholder unquoted."""
    args = [shown_text(str(c), workdirs, code=True).replace(PATH_PLACEHOLDER, _SAFE_TOKEN) for c in command]
    return shlex.join(args).replace(_SAFE_TOKEN, PATH_PLACEHOLDER)


__all__ = ["PATH_PLACEHOLDER", "recorded_workdirs", "shown_command", "shown_text", "workdir_name"]
