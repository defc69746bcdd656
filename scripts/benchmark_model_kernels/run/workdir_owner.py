"""Whether a folder is this tool's to write into: its marker file, the workdirs of earlier versions
it adopts, and the links a run never writes through.

In: a folder path. Out: whether it is a workdir of this tool (`is_tool_workdir`), the marker that
makes it one (`claim_folder`, when the tool creates or adopts it), and a UsageError for a file of
the tool's own names that is a symbolic link or a hard link (`check_no_links`).

A folder is a workdir of this tool only by its own marker file, WORKDIR_MARKER, written when the
tool creates the folder (a run, a dry run, a sweep's folder); what its subfolders hold never
counts. A folder made by a version before the marker is adopted (and then gets one) when it is
plainly a run's or a dry run's workdir of this tool: its own results.json is a results file of
this tool, or its own cases.json is a dry run's listing. A sweep's folder of such a version holds
neither and is not adopted (README: add the marker by hand, or resume each run's own workdir).
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any

from ..core.errors import UsageError
from ..core.files import write_text_atomic
from ..core.results_schema import RESULTS_CSV, RESULTS_JSON, validate_results

#: The marker file: the folder is a workdir of this tool, so a run may replace the files it names.
WORKDIR_MARKER = ".benchmark-model-kernels"
MARKER_TITLE = "benchmark-model-kernels workdir"
MARKER_FORMAT = 1
MARKER_TEXT = (f"{MARKER_TITLE}\nformat {MARKER_FORMAT}\n"
               "# Written by benchmark-model-kernels when it made this folder its workdir: the files\n"
               "# here are its own, and its runs replace them. Delete the folder, not this file.\n")
#: The tool's name in a results.json it wrote ("tool": {"name": ...}).
TOOL_NAME = "benchmark-model-kernels"
#: Largest marker read back (a real one is a few lines).
_MARKER_MAX_BYTES = 4096
#: Largest results.json or cases.json read to decide an adoption (a sweep's is a few MB).
_ADOPT_MAX_BYTES = 512 * 2**20

#: Names a run writes inside its workdir (run/workdir.py lists what each is). None may be a
#: symbolic link: a run would write, append or create files where it points.
OWN_NAMES = ("testlist.txt", "cases.json", "driver.log", "cases", RESULTS_JSON, RESULTS_CSV,
             "results.prev.json", "run.lock", "slurm_logs", "autotune_cache.json", WORKDIR_MARKER,
             "report.md")
#: Of OWN_NAMES, the files a run writes in place (appends to, truncates) rather than replaces by a
#: rename: a hard link there would write into the other name's file too.
IN_PLACE = ("driver.log", "run.lock")
#: The folder of per-case logs and CSVs, written in place by the worker.
CASE_FOLDER = "cases"


def has_marker(folder: str) -> bool:
    """The folder holds its own marker: a regular file (not a link) that says so."""
    path = os.path.join(folder, WORKDIR_MARKER)
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MARKER_MAX_BYTES:
            return False
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(_MARKER_MAX_BYTES).splitlines()
    except OSError:
        return False
    return (len(lines) >= 2 and lines[0] == MARKER_TITLE
            and re.fullmatch(r"format [1-9][0-9]*", lines[1]) is not None)


def is_tool_workdir(folder: str) -> bool:
    """A workdir of this tool: its marker, or a run's or dry run's workdir of an earlier version
    (`adoptable`)."""
    return has_marker(folder) or adoptable(folder)


def adoptable(folder: str) -> bool:
    """A folder without the marker that a version before it plainly made: its own results.json is
    a results file of this tool, or its own cases.json is a dry run's listing."""
    results = _read_json(os.path.join(folder, RESULTS_JSON))
    if results is not None and _is_tool_results(results):
        return True
    cases = _read_json(os.path.join(folder, "cases.json"))
    return cases is not None and _is_dry_run_listing(cases)


def _read_json(path: str) -> Any:
    """The JSON of a regular file (never through a link), or None."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _ADOPT_MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError):
        return None


def _is_tool_results(payload: Any) -> bool:
    """A results.json of this tool: the layout validate_results reads (its rows are each checked
    where they are used), written by this tool when it says who wrote it."""
    try:
        validate_results(payload, check_rows=False)
    except ValueError:
        return False
    tool = payload.get("tool")
    return tool is None or tool.get("name") == TOOL_NAME


def _is_dry_run_listing(payload: Any) -> bool:
    """A cases.json of --dry_run: {"settings": {...}, "cases": [{"case_id": ..., "job": ...}, ...]}."""
    if not isinstance(payload, dict) or set(payload) != {"settings", "cases"}:
        return False
    cases = payload["cases"]
    return (isinstance(payload["settings"], dict) and isinstance(cases, list)
            and all(isinstance(c, dict) and isinstance(c.get("case_id"), str) and "job" in c for c in cases))


def claim_folder(folder: str, flag: str = "--workdir") -> None:
    """Make `folder` (which exists) a workdir of this tool: write its marker when it is empty or
    adoptable; one that already holds the marker is left as it is. Raises UsageError for a folder
    holding files of another kind (nothing is written then)."""
    if has_marker(folder):
        return
    names = sorted(n for n in os.listdir(folder) if n != WORKDIR_MARKER)
    if names and not adoptable(folder):
        raise foreign_folder(flag, folder, names)
    write_text_atomic(os.path.join(folder, WORKDIR_MARKER), MARKER_TEXT)


def foreign_folder(flag: str, folder: str, names: list[str]) -> UsageError:
    """The refusal of a folder that holds files and is no workdir of this tool."""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return UsageError(flag, folder, f"holds other files ({shown}) and is not a workdir of this tool "
                      f"(it has no {WORKDIR_MARKER} file of its own), so a run could replace them; "
                      f"choose a new or empty {flag}")


def check_no_links(folder: str, flag: str = "--workdir") -> None:
    """Refuse (UsageError) a workdir where a name the run writes is a symbolic link (it would write
    where the link points), where a file it writes in place is a hard link to another name (that
    file would change too), or whose cases/ folder holds either."""
    for name in OWN_NAMES:
        _check_entry(folder, name, flag, in_place=name in IN_PLACE)
    cases = os.path.join(folder, CASE_FOLDER)
    if os.path.isdir(cases) and not os.path.islink(cases):
        try:
            names = sorted(os.listdir(cases))
        except OSError as e:
            raise UsageError(flag, folder, f"its {CASE_FOLDER}/ cannot be read ({e.strerror}); choose a "
                             "new --workdir") from None
        for name in names:
            _check_entry(folder, os.path.join(CASE_FOLDER, name), flag, in_place=True)


def _check_entry(folder: str, name: str, flag: str, *, in_place: bool) -> None:
    path = os.path.join(folder, name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(flag, folder, f"its {name} cannot be read ({e.strerror}); choose a new {flag}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(flag, folder, f"its {name} is a symbolic link (to {os.readlink(path)}), which a "
                         f"run never writes through; remove the link (rm {path}) or choose a new {flag}")
    if in_place and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise UsageError(flag, folder, f"its {name} is a hard link to another file ({st.st_nlink} names), "
                         f"which a run would write into; remove it (rm {path}) or choose a new {flag}")
    if in_place and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        # A FIFO would block the run's first write, a device would take it.
        raise UsageError(flag, folder, f"its {name} is not a regular file, which a run would write into; "
                         f"remove it (rm {path}) or choose a new {flag}")


__all__ = [
    "IN_PLACE",
    "MARKER_TEXT",
    "OWN_NAMES",
    "WORKDIR_MARKER",
    "adoptable",
    "check_no_links",
    "claim_folder",
    "foreign_folder",
    "has_marker",
    "is_tool_workdir",
]
