"""benchmark_via_builtin.py: flag parsing and validation (one-line errors, exit 2), --dry_run, and a
full run through the stand-in driver (plumbing only: its numbers are synthetic)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from benchmark_model_kernels import cli_builtin
from benchmark_model_kernels.cases.build import plan_from_shapes
from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.run import flags
from helpers_runner import FAKE_REPO, VALUE_ERROR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "benchmark_via_builtin.py")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_help_explains_flags_by_example():
    r = cli("--help")
    assert r.returncode == 0
    for text in ("--nks 6144,4096,qkv_proj", "--case_timeout 300", "--resume", "--dry_run", "examples:"):
        assert text in r.stdout


def test_nks_repeated_or_space_separated():
    a = cli_builtin.build_parser().parse_args(
        ["--nks", "6144,4096,qkv 4096,4096,o", "--nks", "10,20,c", "--workdir", "w"])
    assert cli_builtin.parse_nks(a.nks) == [(6144, 4096, "qkv"), (4096, 4096, "o"), (10, 20, "c")]


@pytest.mark.parametrize("item, fix", [
    ("6144,4096", "must be N,K,name"),
    ("0,4096,a", "N='0' must be a positive integer"),
    ("6144,x,a", "K='x' must be a positive integer"),
    ("6144,4096,", "the name must not be empty"),
])
def test_nks_errors_name_field_value_and_fix(item, fix):
    with pytest.raises(UsageError) as e:
        cli_builtin.parse_nks([item])
    assert str(e.value).startswith(f"--nks={item}: ") and fix in str(e.value)


def test_duplicate_nks_names_refused():
    with pytest.raises(UsageError, match="names must be unique"):
        cli_builtin.parse_nks(["1,2,a", "3,4,a"])


def _moe(*extra):
    return cli_builtin.build_parser().parse_args(list(extra) + ["--workdir", "w"])


def test_moe_flags_build_an_entry():
    e = cli_builtin.moe_from_args(_moe("--moe_hidden", "7168", "--moe_intermediate", "2048",
                                       "--moe_experts", "32", "--moe_global_experts", "256",
                                       "--moe_top_k", "8", "--moe_routing", "deepseek_v3",
                                       "--moe_n_group", "8", "--moe_topk_group", "4",
                                       "--moe_routed_scaling_factor", "2.5"))
    assert (e.hidden, e.intermediate, e.experts, e.global_experts, e.top_k) == (7168, 2048, 32, 256, 8)
    assert e.routing.method == "deepseek_v3" and e.routing.n_group == 8 and e.routing.use_routing_bias
    assert e.gated and e.activation == "Swiglu"
    relu2 = cli_builtin.moe_from_args(_moe("--moe_hidden", "8", "--moe_intermediate", "8",
                                           "--moe_experts", "4", "--moe_top_k", "2",
                                           "--moe_activation", "Relu2"))
    assert not relu2.gated and relu2.global_experts == 4
    assert cli_builtin.moe_from_args(_moe()) is None


@pytest.mark.parametrize("extra, field", [
    (["--moe_hidden", "8"], "--moe_intermediate"),
    (["--moe_hidden", "8", "--moe_intermediate", "8", "--moe_experts", "4", "--moe_top_k", "0"], "--moe_top_k"),
    (["--moe_hidden", "8", "--moe_intermediate", "8", "--moe_experts", "4", "--moe_top_k", "2",
      "--moe_global_experts", "2"], "--moe_global_experts"),
    (["--moe_hidden", "8", "--moe_intermediate", "8", "--moe_experts", "4", "--moe_top_k", "2",
      "--moe_routing", "deepseek_v3"], "--moe_routing"),
])
def test_moe_flag_errors(extra, field):
    with pytest.raises(UsageError) as e:
        cli_builtin.moe_from_args(_moe(*extra))
    assert str(e.value).startswith(field + "=")


@pytest.mark.parametrize("args, starts", [
    (["--nks", "1,2"], "error: --nks=1,2: must be N,K,name"),
    (["--nks", "64,64,a"], "error: --workdir=None: is required"),
    (["--nks", "64,64,a", "--workdir", "{w}"], "error: --flashinfer_repo=None: is required"),
    (["--nks", "64,64,a", "--workdir", "{w}", "--flashinfer_repo", "{w}"], "error: --flashinfer_repo="),
    (["--plan", "{w}/missing.json", "--workdir", "{w}"], "error: --plan="),
    (["--nks", "64,64,a", "--workdir", "{w}", "--dry_run", "--ms", "0"], "error: --ms=0:"),
    (["--nks", "64,64,a", "--workdir", "{w}", "--dry_run", "--num_iters", "0"], "error: --num_iters=0:"),
    (["--workdir", "{w}", "--dry_run"], "error: --nks=None: give shapes"),
])
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, args, starts):
    r = cli(*[a.replace("{w}", str(tmp_path)) for a in args])
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(starts) and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_torch_only_needs_no_checkout_but_a_gpu(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    rc = cli_builtin.main(["--nks", "64,64,a", "--backends", "torch", "--workdir", str(tmp_path / "w")])
    assert rc == 2 and "no CUDA GPU is visible" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "w" / "results.json")


def test_dry_run_from_nks_and_from_plan_json(tmp_path, capsys):
    w = tmp_path / "dry"
    assert cli_builtin.main(["--nks", "4096,4096,qkv", "--ms", "1", "8", "--dtypes", "bf16", "fp8",
                             "--workdir", str(w), "--dry_run"]) == 0
    assert sorted(os.listdir(w)) == [".benchmark-model-kernels", "cases.json", "run.lock", "testlist.txt"]
    assert (w / "run.lock").read_text() == ""  # released: no run holds it
    cases = json.load(open(w / "cases.json"))["cases"]
    assert {c["job"] for c in cases} == {"driver", "torch", "triton", "quant"}
    out = capsys.readouterr().out
    assert "dry run:" in out and "total" in out
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(plan_from_shapes([(4096, 4096, "qkv")]).to_json())
    w2 = tmp_path / "dry2"
    assert cli_builtin.main(["--plan", str(plan_path), "--ms", "1", "8", "--dtypes", "bf16", "fp8",
                             "--workdir", str(w2), "--dry_run"]) == 0
    strip = lambda cs: [{k: v for k, v in c.items() if k != "driver_argv"} for c in cs]  # noqa: E731
    assert strip(json.load(open(w2 / "cases.json"))["cases"]) == strip(cases)
    assert open(w2 / "testlist.txt").read() == open(w / "testlist.txt").read().replace(str(w), str(w2))


def test_full_run_guard_and_resume_through_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(cli_builtin.environment, "collect", lambda repo: {"fake": True})
    w = str(tmp_path / "run")
    argv = ["--nks", f"4096,64,good {VALUE_ERROR},64,bad", "--ms", "8", "--dtypes", "bf16",
            "--backends", "cudnn", "cutlass", "--flashinfer_repo", FAKE_REPO, "--workdir", w,
            "--num_iters", "3", "--case_timeout", "30"]
    assert cli_builtin.main(argv) == 1  # the "bad" shape's driver exception is a failed row
    res = json.load(open(os.path.join(w, "results.json")))
    status = {r["case_id"]: r["status"] for r in res["rows"]}
    assert status == {"gemm.good.m8.bf16.cudnn": "ok", "gemm.good.m8.bf16.cutlass": "unsupported",
                      "gemm.bad.m8.bf16.cudnn": "failed", "gemm.bad.m8.bf16.cutlass": "unsupported"}
    assert res["plan"]["gemms"][0]["name"] == "good"
    for f in ("testlist.txt", "driver.log", "combined_results.csv"):
        assert os.path.isfile(os.path.join(w, f))
    before = open(os.path.join(w, "results.json")).read()
    capsys.readouterr()
    assert cli_builtin.main(argv) == 2  # no --resume: refused, nothing touched
    assert "already holds results.json; pass --resume" in capsys.readouterr().err
    assert open(os.path.join(w, "results.json")).read() == before
    assert cli_builtin.main(argv + ["--resume"]) == 1
    log = open(os.path.join(w, "driver.log")).read()
    assert log.count("BEGIN gemm.good.m8.bf16.cudnn ") == 1 and log.count("BEGIN gemm.bad.m8.bf16.cudnn ") == 2


# ---------------------------------------------------------------- reliability: lock, disk, paths

SCRIPTS = os.path.join(ROOT, "scripts")
DRY = ["--nks", "64,64,a", "--ms", "8", "--dtypes", "bf16", "--dry_run"]


def one_error_line(rc, err):
    """Exit 2, and stderr exactly one `error:` line (no traceback); returns that line."""
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err
    return err.rstrip("\n")


def hold_lock_in_another_process(workdir):
    """A process holding `workdir`'s lock the way a run does, until killed."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); "
            "from benchmark_model_kernels.run.workdir import take_workdir_lock; "
            "take_workdir_lock(sys.argv[2], ['benchmark_model.py', 'llama-3.1-8b', '--workdir', sys.argv[2]]); "
            "print('locked', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code, SCRIPTS, workdir], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    return holder


def test_a_second_run_on_a_locked_workdir_is_refused_naming_the_holder(tmp_path, capsys):
    w = str(tmp_path / "w")
    assert cli_builtin.main(DRY + ["--workdir", w]) == 0
    before = {f: open(os.path.join(w, f), "rb").read() for f in ("cases.json", "testlist.txt")}
    capsys.readouterr()
    holder = hold_lock_in_another_process(w)
    try:
        line = one_error_line(cli_builtin.main(DRY + ["--workdir", w]), capsys.readouterr().err)
        assert line == (f"error: --workdir={w}: is in use by another run (pid {holder.pid}: benchmark_model.py "
                        f"llama-3.1-8b --workdir {w}); wait for it to finish, or choose another --workdir")
        r = cli("--nks", "64,64,a", "--dry_run", "--workdir", w)  # the script itself, as a user runs it
        assert one_error_line(r.returncode, r.stderr) == line
        assert {f: open(os.path.join(w, f), "rb").read() for f in before} == before
    finally:
        holder.kill()  # SIGKILL: no clean-up runs, yet the lock ends with the process
        holder.wait()
    assert cli_builtin.main(DRY + ["--workdir", w]) == 0


def test_a_run_holds_the_lock_while_it_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(cli_builtin.environment, "collect", lambda repo: {"fake": True})
    w = str(tmp_path / "run")
    seen = []

    def second_run(repo):  # called by the first run, with the lock held
        seen.append(cli_builtin.main(DRY + ["--workdir", w]))
        return {"fake": True}

    monkeypatch.setattr(cli_builtin.environment, "collect", second_run)
    argv = ["--nks", "4096,64,good", "--ms", "8", "--dtypes", "bf16", "--backends", "cudnn",
            "--flashinfer_repo", FAKE_REPO, "--workdir", w, "--num_iters", "3"]
    assert cli_builtin.main(argv) == 0
    assert seen == [2]
    assert f"is in use by another run (pid {os.getpid()}: " in capsys.readouterr().err


REAL_REPLACE = os.replace


def _disk_full_on(predicate):
    """os.replace failing with ENOSPC for the destinations `predicate` picks."""
    def replace(src, dst, *args, **kwargs):
        if predicate(str(dst)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return REAL_REPLACE(src, dst, *args, **kwargs)

    return replace


def test_a_full_disk_is_one_line_and_results_json_stays_as_it_was(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(cli_builtin.environment, "collect", lambda repo: {"fake": True})
    w = str(tmp_path / "run")
    argv = ["--nks", "4096,64,good", "--ms", "8", "--dtypes", "bf16", "--backends", "cudnn",
            "--flashinfer_repo", FAKE_REPO, "--workdir", w, "--num_iters", "3"]
    assert cli_builtin.main(argv) == 0
    results = os.path.join(w, "results.json")
    before = open(results, "rb").read()
    capsys.readouterr()
    fix = "free space and rerun with --resume (results.json holds every row written so far)"
    # Every write fails: the first one, the backup of results.json, stops the run.
    monkeypatch.setattr(os, "replace", _disk_full_on(lambda dst: True))
    line = one_error_line(cli_builtin.main(argv + ["--resume"]), capsys.readouterr().err)
    assert line == (f"error: --workdir={w}: disk full writing {w}/results.prev.json "
                    f"(No space left on device); {fix}")
    assert open(results, "rb").read() == before
    # Only results.json fails: the run stops at its first save, after its "resume:" line.
    monkeypatch.setattr(os, "replace", _disk_full_on(lambda dst: dst.endswith("/results.json")))
    rc = cli_builtin.main(argv + ["--resume", "--nks", "2048,64,more"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and [x for x in err.splitlines() if x.startswith("error")] == [
        f"error: --workdir={w}: disk full writing {results} (No space left on device); {fix}"]
    assert err.splitlines()[-1].startswith("error: ")
    assert open(results, "rb").read() == before
    assert json.loads(before)["rows"]  # still the valid results of the first run
    assert not [f for f in os.listdir(w) if f.endswith(".tmp")]
    monkeypatch.undo()
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(cli_builtin.environment, "collect", lambda repo: {"fake": True})
    assert cli_builtin.main(argv + ["--resume", "--nks", "2048,64,more"]) == 0  # lock released


def test_a_dry_run_on_a_full_disk_says_to_run_again(tmp_path, monkeypatch, capsys):
    w = str(tmp_path / "w")
    monkeypatch.setattr(os, "replace", _disk_full_on(lambda dst: True))
    line = one_error_line(cli_builtin.main(DRY + ["--workdir", w]), capsys.readouterr().err)
    assert line == (f"error: --workdir={w}: disk full writing {w}/.benchmark-model-kernels (No space left on "
                    "device); free space and run the same command again")


def test_a_workdir_holding_other_files_is_refused_and_left_as_it_was(tmp_path, capsys):
    w = tmp_path / "mine"
    w.mkdir()
    (w / "notes.txt").write_bytes(b"keep")
    line = one_error_line(cli_builtin.main(DRY + ["--workdir", str(w)]), capsys.readouterr().err)
    assert line == (f"error: --workdir={w}: holds other files (notes.txt) and is not a workdir of this tool "
                    "(it has no .benchmark-model-kernels file of its own), so a run could replace them; choose "
                    "a new or empty --workdir")
    assert os.listdir(w) == ["notes.txt"] and (w / "notes.txt").read_bytes() == b"keep"


def test_path_flags_expand_home_and_variables(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / "plans").mkdir(parents=True)
    (home / "plans" / "p.json").write_text(plan_from_shapes([(64, 64, "a")]).to_json())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    assert cli_builtin.main(["--plan=~/plans/p.json", "--ms", "8", "--dtypes", "bf16", "--dry_run",
                             "--workdir=$RUNS/a", "--autotune_cache=~/tuned.json",
                             "--flashinfer_repo=${RUNS}/fi"]) == 0
    settings = json.load(open(tmp_path / "runs" / "a" / "cases.json"))["settings"]
    assert settings["autotune_cache"] == str(home / "tuned.json")
    assert cli_builtin.main(["--nks", "64,64,a", "--dry_run", "--workdir=~/w"]) == 0
    assert os.path.isfile(home / "w" / "cases.json") and not os.path.exists(tmp_path / "~")
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    line = one_error_line(cli_builtin.main(DRY + ["--workdir=$NOPE_NOT_SET/x"]), capsys.readouterr().err)
    assert line == ("error: --workdir=$NOPE_NOT_SET/x: environment variable $NOPE_NOT_SET is not set; "
                    "set it, or write the path out")
    assert sorted(os.listdir(tmp_path)) == ["home", "runs"]


def test_autotune_cache_must_not_be_the_plan_read(tmp_path, capsys):
    plan = tmp_path / "p.json"
    plan.write_text(plan_from_shapes([(64, 64, "a")]).to_json())
    before = plan.read_bytes()
    rc = cli_builtin.main(["--plan", str(plan), "--autotune_cache", str(plan), "--dry_run",
                           "--workdir", str(tmp_path / "w")])
    line = one_error_line(rc, capsys.readouterr().err)
    assert line == (f"error: --autotune_cache={plan}: is the --plan file; choose another path, e.g. "
                    "--autotune_cache runs/tuned.json")
    assert plan.read_bytes() == before
