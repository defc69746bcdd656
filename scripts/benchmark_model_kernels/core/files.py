"""Files and paths: writing so that a crash, an interrupt or a full disk never leaves half a file,
and reading path flags the same way in every script.

Every file this tool writes goes through `write_bytes_atomic` (text, JSON, CSV and PNG alike):
a temp file unique to the writer in the target's folder, then a rename. `disk_full_as_usage_error`
turns a full disk into the one `error:` line of a bad input, and `path_arg` is the argparse type of
every path flag (`~` and `$VAR` expanded, an unset variable refused).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import tempfile
from typing import Any, Callable, Iterator, Sequence

from .errors import UsageError

#: errno values of "no room left to write": no free blocks, or the user's quota used up.
DISK_FULL_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)

_VARIABLE = re.compile(r"\$(\w+|\{[^}]*\})")


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write `data` to `path` through a temp file unique to this writer in the same folder, then
    rename: readers see the old file or the new one, and two writers never share a temp file.
    On failure the temp file is removed and `path` is untouched; the OSError names `path`."""
    parent = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    except OSError as e:
        _name_target(e, path)
        raise
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes it 0600; a plain open() would not
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            _name_target(e, path)
        raise


def _umask() -> int:
    """The process umask (read by setting it, so set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _name_target(error: OSError, path: str) -> None:
    """Make `error` name the file being written, not its temp file (a failed write() names none)."""
    error.filename, error.filename2 = path, None


def python_files(root: str, parts: Sequence[str]) -> list[str]:
    """The .py files of `parts` under `root`, part by part: a folder's (walked, sorted), or the
    file itself."""
    files: list[str] = []
    for part in parts:
        path = os.path.join(root, part)
        if os.path.isdir(path):
            files += sorted(os.path.join(d, f) for d, _, names in os.walk(path) for f in names if f.endswith(".py"))
        else:
            files.append(path)
    return files


def digest_files(paths: Sequence[str], root: str) -> str:
    """SHA-256 over each file's path relative to `root` and its bytes, in the order given (a file
    that cannot be read counts as that)."""
    h = hashlib.sha256()
    for path in paths:
        h.update(os.path.relpath(path, root).encode())
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"(unreadable)")
    return h.hexdigest()


def json_digest(record: Any) -> str:
    """SHA-256 of `record` as sorted-key JSON: the key of a kept result, plan or answer."""
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def user_cache_dir(part: str) -> str:
    """$XDG_CACHE_HOME/benchmark-model-kernels/<part>, or ~/.cache/benchmark-model-kernels/<part>:
    the per-user folder of what the tool keeps between runs (results, plans, capabilities)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "benchmark-model-kernels", part)


def write_text_atomic(path: str, text: str) -> None:
    """`text` (UTF-8) written atomically, as write_bytes_atomic."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str, payload: Any) -> None:
    """`payload` as indented JSON (one space, trailing newline), written atomically."""
    write_text_atomic(path, json.dumps(payload, indent=1) + "\n")


def copy_file_atomic(src: str, dst: str) -> None:
    """Copy `src` to `dst` atomically (a full disk leaves no truncated `dst`)."""
    with open(src, "rb") as f:
        write_bytes_atomic(dst, f.read())


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


@contextlib.contextmanager
def disk_full_as_usage_error(field: str, value: object, fix: str) -> Iterator[None]:
    """A full disk inside the block becomes one UsageError line (`<field>=<value>: disk full
    writing <file> (...); <fix>`) instead of a traceback, and so does a folder `value` that turned
    read-only meanwhile (a read-only remount anywhere, a permission taken away inside `value`:
    `... cannot be written any more (...); make it writable, then <fix>`, the fix's "free space and"
    left out). Other errors pass through unchanged."""
    try:
        yield
    except OSError as e:
        where = f" writing {e.filename}" if e.filename else ""
        if is_disk_full(e):
            raise UsageError(field, value, f"disk full{where} ({e.strerror}); {fix}") from None
        if _turned_read_only(e, value):
            then = fix.removeprefix("free space and ")
            what = f"{e.strerror}: {e.filename}" if e.filename else e.strerror
            raise UsageError(field, value, f"cannot be written any more ({what}); make it writable, "
                             f"then {then}") from None
        raise


def _turned_read_only(error: OSError, folder: object) -> bool:
    """A read-only file system, or a permission refused on a file inside `folder`."""
    if error.errno == errno.EROFS:
        return True
    if error.errno not in (errno.EACCES, errno.EPERM) or not error.filename or not isinstance(folder, str):
        return False
    return is_inside(os.fsdecode(error.filename), folder)


def same_file(a: str, b: str) -> bool:
    """`a` and `b` name one file: the same path once symlinks are resolved, or the same inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_distinct_paths(field: str, paths: Sequence[str]) -> None:
    """Refuse (UsageError) a list of paths where two name one file or folder (`same_file`)."""
    for i, a in enumerate(paths):
        for b in paths[:i]:
            if same_file(a, b):
                shown = a if a == b else f"{b} and {a}"
                raise UsageError(field, shown, "is given twice; give each once")


def is_inside(path: str, folder: str) -> bool:
    """`path` lies in `folder` or below it (symlinks resolved)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def check_writable_folder(folder: str) -> str | None:
    """None if a file can be created in `folder` (tried for real: access() says yes to root even
    on a read-only mount), else the reason."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__


def expand_path(text: str) -> str:
    """`~` and `$VAR`/`${VAR}` expanded, as a shell would for an unquoted path; raises ValueError
    naming a variable that is not set (it would otherwise become a literal folder name)."""
    expanded = os.path.expanduser(os.path.expandvars(text))
    unset = _VARIABLE.search(expanded)
    if unset:
        raise ValueError(f"environment variable {unset.group(0)} is not set")
    return expanded


def path_arg(flag: str) -> Callable[[str], str]:
    """The argparse `type=` of path flag `flag`: expand_path, an unset variable as one UsageError
    (`--workdir=$RUNS/x: environment variable $RUNS is not set; ...`), and so an empty path."""

    def parse(text: str) -> str:
        if not text.strip():
            # Never silently the flag's default: the user named a path and gave none.
            raise UsageError(flag, repr(text), "is empty; give a path, or leave the flag out for its default")
        try:
            return expand_path(text)
        except ValueError as e:
            raise UsageError(flag, text, f"{e}; set it, or write the path out") from None

    parse.__name__ = "path"  # argparse names the type in its own messages
    return parse


__all__ = [
    "digest_files",
    "json_digest",
    "python_files",
    "user_cache_dir",
    "DISK_FULL_ERRNOS",
    "check_distinct_paths",
    "copy_file_atomic",
    "disk_full_as_usage_error",
    "check_writable_folder",
    "expand_path",
    "is_disk_full",
    "is_inside",
    "path_arg",
    "same_file",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]
