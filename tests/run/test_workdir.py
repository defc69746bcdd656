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
        assert str(e.value) == (f"--workdir={w}: holds other files (report.md, testlist.txt) and is not a "
                                "workdir of this tool (it has no .benchmark-model-kernels file of its own), "
                                "so a run could replace them; choose a new or empty --workdir")
    with pytest.raises(UsageError, match="holds other files"):
        wd.make_workdir(str(w))  # the marker is never written into it
    assert _tree_bytes(w) == before


def test_a_workdir_is_the_tools_by_its_own_marker_not_by_its_subfolders(tmp_path):
    """The parent of earlier runs is not a workdir: its own testlist.txt and cases.json are the user's."""
    runs = tmp_path / "runs"
    run_cases(runs, [gemm_case(4096)])  # runs/w: an earlier run
    (runs / "w" / "cases.json").write_text("{}")
    (runs / "testlist.txt").write_text("my list")
    (runs / "cases.json").write_text('{"mine": true}')
    before = _tree_bytes(runs)
    with pytest.raises(UsageError, match="holds other files .* is not a workdir of this tool"):
        wd.check_workdir(str(runs), resume=False)
    assert not wd.is_tool_workdir(str(runs)) and _tree_bytes(runs) == before


def test_new_and_empty_folders_get_the_marker_when_made_and_are_then_the_tools(tmp_path):
    for folder in (tmp_path / "new", tmp_path / "empty"):
        if folder.name == "empty":
            folder.mkdir()
        assert wd.check_workdir(str(folder), resume=False) == str(folder)
        wd.make_workdir(str(folder))
        assert os.listdir(folder) == [wd.WORKDIR_MARKER]
        text = (folder / wd.WORKDIR_MARKER).read_text()
        assert text.splitlines()[:2] == ["benchmark-model-kernels workdir", "format 1"]
        (folder / "testlist.txt").write_text("")
        assert wd.is_tool_workdir(str(folder)) and wd.check_workdir(str(folder), resume=False)


@pytest.mark.parametrize("marker", ["", "benchmark-model-kernels workdir\n", "someone else's\nformat 1\n",
                                    "benchmark-model-kernels workdir\nformat one\n"])
def test_a_marker_that_does_not_say_so_is_no_marker(tmp_path, marker):
    (tmp_path / wd.WORKDIR_MARKER).write_text(marker)
    (tmp_path / "notes.txt").write_text("mine")
    assert not wd.is_tool_workdir(str(tmp_path))
    with pytest.raises(UsageError, match="holds other files"):
        wd.check_workdir(str(tmp_path), resume=False)


def test_a_marker_that_is_a_link_is_no_marker(tmp_path):
    real = tmp_path / "real"
    wd.make_workdir(str(real))
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    os.symlink(real / wd.WORKDIR_MARKER, foreign / wd.WORKDIR_MARKER)
    assert not wd.is_tool_workdir(str(foreign))


def test_workdirs_of_an_earlier_version_are_adopted_by_their_own_files(tmp_path):
    """Before the marker: a run's workdir (its own results.json is this tool's) and a dry run's
    (its own cases.json) are adopted, and get the marker when a run makes them its workdir."""
    _, _, _, run_dir = run_cases(tmp_path, [gemm_case(4096)])
    assert not os.path.exists(os.path.join(run_dir, wd.WORKDIR_MARKER))  # made without make_workdir
    assert wd.is_tool_workdir(run_dir) and wd.check_workdir(run_dir, resume=True)
    wd.make_workdir(run_dir)
    assert os.path.isfile(os.path.join(run_dir, wd.WORKDIR_MARKER))
    dry = str(tmp_path / "dry")
    wd.dry_run([gemm_case(4096)], settings(tmp_path), dry, io.StringIO())
    assert wd.is_tool_workdir(dry) and wd.check_workdir(dry, resume=False)
    # Files of the same names that are not the tool's are not adopted.
    for name, text in (("results.json", '{"rows": []}'), ("results.json", "[]"),
                       ("results.json", json.dumps({"schema_version": 1, "rows": [], "tool": {"name": "x"}})),
                       ("cases.json", '{"cases": []}'), ("cases.json", "not json")):
        other = tmp_path / f"other_{len(os.listdir(tmp_path))}"
        other.mkdir()
        (other / name).write_text(text)
        assert not wd.is_tool_workdir(str(other)), (name, text)


@pytest.mark.parametrize("name", ["driver.log", "run.lock", "cases", "results.json", "testlist.txt",
                                  "autotune_cache.json", "combined_results.csv"])
def test_a_name_the_run_writes_that_is_a_symbolic_link_is_refused(tmp_path, name):
    w = tmp_path / "w"
    wd.make_workdir(str(w))
    victim = tmp_path / "victim"
    victim.mkdir() if name == "cases" else victim.write_text("the user's own file")
    os.symlink(victim, w / name)
    with pytest.raises(UsageError) as e:
        wd.check_workdir(str(w), resume=True)
    assert f"its {name} is a symbolic link (to {victim}), which a run never writes through" in str(e.value)
    assert victim.is_dir() or victim.read_text() == "the user's own file"


@pytest.mark.parametrize("name", ["driver.log", "run.lock", "cases/gemm.a.m8.bf16.cudnn.log",
                                  "cases/worker.log"])
def test_a_file_written_in_place_that_is_a_hard_link_is_refused(tmp_path, name):
    w = tmp_path / "w"
    wd.make_workdir(str(w))
    (w / "cases").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file")
    os.link(victim, w / name)
    with pytest.raises(UsageError, match=f"its {name} is a hard link to another file"):
        wd.check_workdir(str(w), resume=False)
    assert victim.read_text() == "the user's own file"


def test_a_sweep_folder_is_the_tools_by_its_own_marker(tmp_path):
    sweep = tmp_path / "sweep"
    wd.make_workdir(str(sweep))
    wd.make_workdir(str(sweep / "llama_tp1_ep1"))
    (sweep / "report.md").write_text("")
    assert wd.check_workdir(str(sweep), resume=True)
    legacy = tmp_path / "legacy"  # a sweep's folder from before the marker: not adopted
    (legacy / "llama_tp1_ep1").mkdir(parents=True)
    (legacy / "llama_tp1_ep1" / "results.json").write_text("{}")
    (legacy / "report.md").write_text("")
    with pytest.raises(UsageError, match="holds other files"):
        wd.check_workdir(str(legacy), resume=True)


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


def test_a_lock_file_that_is_a_link_is_never_followed_nor_truncated(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file")
    w = tmp_path / "w"
    w.mkdir()
    os.symlink(victim, w / wd.LOCK_FILE)
    with pytest.raises(UsageError) as e:
        wd.take_workdir_lock(str(w))
    assert str(e.value) == (f"--workdir={w}: its run.lock is a symbolic link, which a run never follows; "
                            f"remove the link (rm {w / 'run.lock'}) or choose a new --workdir")
    os.unlink(w / wd.LOCK_FILE)
    os.link(victim, w / wd.LOCK_FILE)
    with pytest.raises(UsageError, match="its run.lock is a hard link to another file, which the lock would"):
        wd.take_workdir_lock(str(w))
    os.unlink(w / wd.LOCK_FILE)
    os.mkfifo(w / wd.LOCK_FILE)
    with pytest.raises(UsageError, match="its run.lock is not a regular file"):
        wd.take_workdir_lock(str(w))
    assert victim.read_text() == "the user's own file"


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
