"""The workdir: the overwrite guard, the --dry_run files (testlist.txt, cases.json) and the case
summary."""

from __future__ import annotations

import fcntl
import io
import json
import os

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.run import workdir as wd
from helpers_runner import gemm_case, run_cases, settings


def test_overwrite_guard(tmp_path):
    run_cases(tmp_path, [gemm_case(4096)])
    with pytest.raises(UsageError, match="already holds results.json; pass --resume"):
        wd.check_workdir(str(tmp_path / "w"), resume=False)
    assert wd.check_workdir(str(tmp_path / "w"), resume=True) == str(tmp_path / "w")
    with pytest.raises(UsageError, match="--workdir"):
        wd.check_workdir(None, resume=False)


def test_summary_table():
    table = wd.summary_table([gemm_case(1), gemm_case(2, skip="no"), gemm_case(3, backend="torch")])
    assert "bf16   cudnn" in table and "total" in table.splitlines()[-1]


def test_dry_run_writes_testlist_and_cases_json_only(tmp_path):
    workdir = str(tmp_path / "d")
    out = io.StringIO()
    cases = [gemm_case(4096), gemm_case(512, skip="needs SM100"), gemm_case(4096, backend="torch")]
    assert wd.dry_run(cases, settings(tmp_path), workdir, out) == 0
    assert sorted(os.listdir(workdir)) == ["cases.json", "testlist.txt"]
    listing = json.load(open(os.path.join(workdir, "cases.json")))["cases"]
    assert [c["job"] for c in listing] == ["driver", "driver", "torch"]
    assert listing[1]["skip_reason"] == "needs SM100" and listing[2]["driver_argv"] == []
    assert "dry run: 3 cases" in out.getvalue()


# ---------------------------------------------------------------- what a workdir may be


def _tree_bytes(root):
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(root) for f in fs}


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path):
    w = tmp_path / "notes"
    w.mkdir()
    (w / "report.md").write_text("my own notes")
    (w / "testlist.txt").write_text("mine too")
    before = _tree_bytes(w)
    for resume in (False, True):
        with pytest.raises(UsageError) as e:
            wd.check_workdir(str(w), resume=resume)
        assert str(e.value) == (f"--workdir={w}: holds other files (report.md, testlist.txt) and no "
                                "results.json, so it is not a workdir of this tool; choose a new or "
                                "empty --workdir")
    assert _tree_bytes(w) == before


@pytest.mark.parametrize("marker", wd.TOOL_MARKERS)
def test_new_empty_and_tool_workdirs_are_accepted(tmp_path, marker):
    assert wd.check_workdir(str(tmp_path / "new"), resume=False) == str(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    assert wd.check_workdir(str(tmp_path / "empty"), resume=False)
    tool = tmp_path / "tool"
    tool.mkdir()
    (tool / marker).write_text("{}")
    (tool / "testlist.txt").write_text("")
    assert wd.check_workdir(str(tool), resume=True)
    sweep = tmp_path / "sweep"  # a sweep's parent: sub-workdirs and the comparison report
    (sweep / "llama_tp1_ep1").mkdir(parents=True)
    (sweep / "llama_tp1_ep1" / marker).write_text("{}")
    (sweep / "report.md").write_text("")
    assert wd.check_workdir(str(sweep), resume=True)


# ---------------------------------------------------------------- one run per workdir


def test_the_lock_names_its_holder_and_refuses_a_second_taker(tmp_path):
    fd = wd.take_workdir_lock(str(tmp_path), ["benchmark_model.py", "llama-3.1-8b", "--workdir", "my dir"])
    try:
        text = (tmp_path / wd.LOCK_FILE).read_text()
        assert text == f"pid {os.getpid()}\ncommand benchmark_model.py llama-3.1-8b --workdir 'my dir'\n"
        with pytest.raises(UsageError) as e:  # flock is per open file: this process is refused too
            wd.take_workdir_lock(str(tmp_path), ["second"])
        assert str(e.value) == (f"--workdir={tmp_path}: is in use by another run (pid {os.getpid()}: "
                                "benchmark_model.py llama-3.1-8b --workdir 'my dir'); wait for it to "
                                "finish, or choose another --workdir")
        assert (tmp_path / wd.LOCK_FILE).read_text() == text  # the refused taker wrote nothing
    finally:
        wd.release_workdir_lock(fd)
    assert (tmp_path / wd.LOCK_FILE).read_text() == ""
    with wd.workdir_lock(str(tmp_path), ["again"]):
        assert "command again" in (tmp_path / wd.LOCK_FILE).read_text()


def test_a_lock_taken_while_its_holder_starts_names_no_pid(tmp_path):
    fd = os.open(tmp_path / wd.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # locked, PID not written yet
    try:
        with pytest.raises(UsageError, match=r"in use by another run \(pid unknown: it is just starting\)"):
            wd.take_workdir_lock(str(tmp_path))
    finally:
        os.close(fd)


# ---------------------------------------------------------------- backups of results.json


def test_resume_twice_keeps_both_backups(tmp_path):
    _, _, _, w = run_cases(tmp_path, [gemm_case(4096)])
    first = open(os.path.join(w, "results.json"), "rb").read()
    run_cases(tmp_path, [gemm_case(4096), gemm_case(2048)], resume=True)
    second = open(os.path.join(w, "results.json"), "rb").read()
    run_cases(tmp_path, [gemm_case(4096), gemm_case(2048), gemm_case(1024)], resume=True)
    assert open(os.path.join(w, "results.prev.1.json"), "rb").read() == first
    assert open(os.path.join(w, "results.prev.json"), "rb").read() == second
    assert not os.path.exists(os.path.join(w, "results.prev.2.json"))


def test_backups_are_numbered_above_the_highest_there(tmp_path):
    for name, text in (("results.json", "now"), ("results.prev.json", "before"),
                       ("results.prev.1.json", "oldest"), ("results.prev.7.json", "older")):
        (tmp_path / name).write_text(text)
    assert wd.back_up_results(str(tmp_path)) == str(tmp_path / "results.prev.json")
    assert {n: (tmp_path / n).read_text() for n in os.listdir(tmp_path)} == {
        "results.json": "now", "results.prev.json": "now", "results.prev.8.json": "before",
        "results.prev.1.json": "oldest", "results.prev.7.json": "older"}
