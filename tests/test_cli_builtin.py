"""benchmark_via_builtin.py: flag parsing and validation (one-line errors, exit 2), --dry_run, and a
full run through the stand-in driver (plumbing only: its numbers are synthetic)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmark_model_kernels import cli_builtin
from benchmark_model_kernels.cases.build import plan_from_shapes
from benchmark_model_kernels.errors import UsageError
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
    assert sorted(os.listdir(w)) == ["cases.json", "testlist.txt"]
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
