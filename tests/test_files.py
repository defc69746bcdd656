"""files.py: atomic writes (a failed one leaves the old file and no temp file), a full disk as one
UsageError, and the path expansion every path flag shares."""

from __future__ import annotations

import errno
import os

import pytest

from benchmark_model_kernels.core import files
from benchmark_model_kernels.core.errors import UsageError


def _fail_with(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize("code", sorted(files.DISK_FULL_ERRNOS))
def test_a_full_disk_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch, code):
    target = tmp_path / "results.json"
    target.write_bytes(b'{"old": 1}\n')
    monkeypatch.setattr(os, "replace", _fail_with(code))
    with pytest.raises(OSError) as e:
        files.write_json_atomic(str(target), {"new": 2})
    assert e.value.errno == code and e.value.filename == str(target)  # the target, not its temp
    assert target.read_bytes() == b'{"old": 1}\n'
    assert os.listdir(tmp_path) == ["results.json"]


def test_a_failed_write_names_the_target(tmp_path, monkeypatch):
    class FullFile:
        def __init__(self, fd, mode):
            os.close(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdopen", FullFile)
    with pytest.raises(OSError) as e:
        files.write_text_atomic(str(tmp_path / "report.md"), "x")
    assert e.value.filename == str(tmp_path / "report.md") and os.listdir(tmp_path) == []


def test_disk_full_becomes_one_usage_error_and_other_errors_pass():
    with pytest.raises(UsageError) as e:
        with files.disk_full_as_usage_error("--workdir", "/w", "free space and rerun with --resume"):
            raise OSError(errno.ENOSPC, "No space left on device", "/w/results.json")
    assert str(e.value) == ("--workdir=/w: disk full writing /w/results.json (No space left on "
                            "device); free space and rerun with --resume")
    with pytest.raises(PermissionError):
        with files.disk_full_as_usage_error("--workdir", "/w", "x"):
            raise PermissionError(errno.EACCES, "Permission denied")


def test_copy_file_atomic(tmp_path):
    (tmp_path / "a").write_bytes(b"\x00abc")
    files.copy_file_atomic(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (tmp_path / "b").read_bytes() == b"\x00abc"


def test_expand_path_expands_home_and_variables(monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("RUNS", "/data/runs")
    assert files.expand_path("~/x") == "/home/someone/x"
    assert files.expand_path("$RUNS/a") == "/data/runs/a"
    assert files.expand_path("${RUNS}/a") == "/data/runs/a"
    assert files.expand_path("~") == "/home/someone"
    assert files.expand_path("plain/rel") == "plain/rel"
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ValueError, match=r"\$NOT_SET_ANYWHERE is not set"):
        files.expand_path("$NOT_SET_ANYWHERE/x")


def test_path_arg_refuses_an_unset_variable_as_one_line(monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(UsageError) as e:
        files.path_arg("--workdir")("${NOT_SET_ANYWHERE}/x")
    assert str(e.value) == ("--workdir=${NOT_SET_ANYWHERE}/x: environment variable ${NOT_SET_ANYWHERE} "
                            "is not set; set it, or write the path out")


def test_same_file_and_is_inside(tmp_path):
    (tmp_path / "a").write_text("x")
    os.symlink(tmp_path / "a", tmp_path / "link")
    os.link(tmp_path / "a", tmp_path / "hard")
    assert files.same_file(str(tmp_path / "a"), str(tmp_path / "link"))
    assert files.same_file(str(tmp_path / "a"), str(tmp_path / "hard"))
    assert files.same_file(str(tmp_path / "sub" / ".." / "a"), str(tmp_path / "a"))
    assert not files.same_file(str(tmp_path / "a"), str(tmp_path / "missing"))
    assert files.is_inside(str(tmp_path / "w" / "p.json"), str(tmp_path / "w"))
    assert not files.is_inside(str(tmp_path / "w2" / "p.json"), str(tmp_path / "w"))


def test_check_writable_folder(tmp_path):
    assert files.check_writable_folder(str(tmp_path)) is None
    assert files.check_writable_folder("/proc") is not None  # even for root
    assert os.listdir(tmp_path) == []


def test_written_files_get_the_mode_a_plain_open_gives(tmp_path):
    old = os.umask(0o027)
    try:
        files.write_text_atomic(str(tmp_path / "a.txt"), "x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a.txt").st_mode & 0o777 == 0o640


def test_a_folder_that_turns_read_only_is_one_line_and_other_errors_pass_through(tmp_path):
    fix = "free space and rerun with --resume"
    for code in (errno.EROFS, errno.EACCES, errno.EPERM):
        with pytest.raises(UsageError) as e:
            with files.disk_full_as_usage_error("--workdir", str(tmp_path), fix):
                raise OSError(code, os.strerror(code), str(tmp_path / "driver.log"))
        assert str(e.value) == (f"--workdir={tmp_path}: cannot be written any more ({os.strerror(code)}: "
                                f"{tmp_path / 'driver.log'}); make it writable, then rerun with --resume")
    # A permission refused outside the folder, or another error, is no bad input: it propagates.
    for error in (OSError(errno.EACCES, "Permission denied", "/etc/shadow"), OSError(errno.EIO, "I/O error")):
        with pytest.raises(OSError):
            with files.disk_full_as_usage_error("--workdir", str(tmp_path), fix):
                raise error


def test_an_empty_path_is_refused_never_the_default():
    with pytest.raises(UsageError) as e:
        files.path_arg("--cache")("")
    assert str(e.value) == "--cache='': is empty; give a path, or leave the flag out for its default"
    with pytest.raises(UsageError, match="--workdir=' ': is empty"):
        files.path_arg("--workdir")(" ")


def test_two_names_of_one_folder_are_refused(tmp_path):
    (tmp_path / "w").mkdir()
    os.symlink(tmp_path / "w", tmp_path / "link")
    files.check_distinct_paths("WORKDIR", [str(tmp_path / "w"), str(tmp_path / "other")])
    for twin in (str(tmp_path / "w"), str(tmp_path / "link"), str(tmp_path / "w") + "/."):
        with pytest.raises(UsageError, match="is given twice; give each once"):
            files.check_distinct_paths("WORKDIR", [str(tmp_path / "w"), twin])
