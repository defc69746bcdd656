"""`deploy.py` end to end: the dry run's lines, bad input as one line, and a whole run through the
runner with the stand-in driver on a stand-in H200 (plumbing only: its numbers are synthetic)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from benchmark_model_kernels.core.errors import EXIT_USAGE
from benchmark_model_kernels.deploy import cli
from benchmark_model_kernels.doctor import environment
from benchmark_model_kernels.run import flags
from helpers_runner import FAKE_REPO
from support import ROOT, write_tiny_llama

DEPLOY = os.path.join(ROOT, "scripts", "deploy.py")


def test_dry_run_prints_layouts_shapes_fit_and_cases(capsys, tmp_path):
    rc = cli.main(["qwen3-30b-a3b", "--gpus", "8xH200", "--batch", "8", "64", "256", "1024", "--context", "4096",
                   "--routing", "zipf:1.2", "--dry_run"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0] == ("# qwen3-30b-a3b on 8xH200 (140.4 GiB each, sm_90, communication table h200_nvlink): "
                      "8 layouts, 5 to time")
    assert out[1].startswith("# B = 8 64 256 1024; context 4096; recipes bf16 fp8; routing zipf s=1.2;")
    assert out[2].startswith("TP=1 DP=8: not planned: without expert parallelism and with DP > 1")
    assert out[3].startswith("TP=1 DP=8 EP: per rank 32 q / 4 KV heads; 16 of 128 experts at I=768, top-8;")
    assert out[4].startswith("  B=8: M=1, MoE 8 tokens, imbalance ") and "context 4096: bf16 fits, fp8 fits" in out[4]
    assert out[7].startswith("  B=1024: M=128, MoE 1024 tokens, ")
    assert out[8].startswith("  cases: ") and "attention" in out[8] and "before launch on sm_90" in out[8]
    tp8 = out.index(next(line for line in out if line.startswith("TP=8: ")))
    assert "128 of 128 experts at I=96" in out[tp8] and "imbalance 1.00x" in out[tp8 + 1]
    assert os.listdir(tmp_path) == []  # a dry run writes nothing


def test_dry_run_of_the_script_on_a_dense_model(tmp_path):
    model = write_tiny_llama(tmp_path / "tiny")
    proc = subprocess.run([sys.executable, DEPLOY, str(model), "--gpus", "2xB200", "--batch", "4", "--context",
                           "512", "--dry_run"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("communication table b200_nvlink): 2 layouts, 2 to time")
    assert [line.split(":")[0] for line in lines if line.startswith("TP=")] == ["TP=1 DP=2", "TP=2"]
    assert "  B=4: M=2; context 512: bf16 fits, fp8 fits" in lines  # dense: no MoE tokens, no imbalance


GOOD = {"--gpus": ["8xH200"], "--batch": ["8"], "--context": ["4096"]}


@pytest.mark.parametrize("flag, values, line", [
    ("--gpus", ["8xA100"], "error: --gpus=8xA100: unknown GPU kind 'A100'; choose from H100, H200, B200, "
                           "e.g. --gpus 8xH200"),
    ("--gpus", ["0xH200"], "error: --gpus=0xH200: the count must be 1 to 8 (one NVLink node; several nodes are "
                           "not modelled), e.g. --gpus 8xH200"),
    ("--batch", ["0"], "error: --batch=0: must be a positive whole number, e.g. --batch 8 64 256"),
    ("--batch", ["8", "8"], "error: --batch=8 8: lists 8 twice; give each value once"),
    ("--context", ["0"], "error: --context=0: must be a positive whole number, e.g. --context 4096"),
    ("--routing", ["zipf:x"], "error: --routing=zipf:x: the Zipf exponent must be a number >= 0, e.g. zipf:1.2"),
    ("--no_such", [], None),
])
def test_bad_input_is_one_line_and_exit_2(flag, values, line, capsys):
    argv = ["qwen3-30b-a3b", "--dry_run"]
    for name, good in {**GOOD, flag: values}.items():
        argv += [name, *good]
    rc = cli.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == EXIT_USAGE and len(err) == 1 and err[0].startswith("error: ")
    if line:
        assert err[0] == line


def test_a_real_run_needs_a_workdir_and_the_gpu_kind_asked_for(capsys, monkeypatch, tmp_path):
    base = ["qwen3-30b-a3b", "--gpus", "8xH200", "--batch", "8", "--context", "4096"]
    assert cli.main(base) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("error: --workdir=None: is required to time the layouts")
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H100 80GB HBM3", (9, 0)))
    assert cli.main(base + ["--workdir", str(tmp_path / "w")]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == (
        "error: --gpus=8xH200: the kernels are timed on this machine's GPU, NVIDIA H100 80GB HBM3; run on a H200, "
        "or ask for this GPU's kind (e.g. --gpus 8x...)")


def test_a_run_times_each_layout_and_writes_the_deployment(monkeypatch, tmp_path, capsys):
    """Plumbing: a stand-in H200 and the stand-in FlashInfer driver (synthetic numbers)."""
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(environment, "collect", lambda repo=None, **kw: {"versions": {"driver": "570.1",
                                                                                      "torch": "2.11.0"}})
    model = write_tiny_llama(tmp_path / "tiny")
    workdir = tmp_path / "deploy"
    rc = cli.main([str(model), "--gpus", "2xH200", "--batch", "4", "16", "--context", "256", "--recipes", "bf16",
                   "--workdir", str(workdir), "--flashinfer_repo", FAKE_REPO, "--backends", "cudnn", "fa2",
                   "--num_iters", "3", "--dry_run_iters", "1", "--no_autotune"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert sorted(n for n in os.listdir(workdir) if not n.startswith(".")) == [
        "deployment.json", "fig_pareto_ctx256.png", "report.md", "tp1_dp2", "tp2"]
    doc = json.load(open(workdir / "deployment.json"))
    jsonschema.validate(doc, json.load(open(os.path.join(ROOT, "references", "deployment.schema.json"))))
    assert [(x["label"], x["status"], x["workdir"]) for x in doc["layouts"]] == [
        ("TP=1 DP=2", "planned", "tp1_dp2"), ("TP=2", "planned", "tp2")]
    by = {(c["layout"], c["batch"]): c for c in doc["cells"]}
    dp2, tp2 = by[("tp1_dp2", 16)], by[("tp2", 16)]
    assert (dp2["m"], tp2["m"]) == (8, 16)
    assert all(x["group"].startswith("DP") for x in dp2["communication"])  # DP replicas: no TP collective
    assert [x["name"] for x in tp2["communication"]][:2] == ["embedding all-reduce", "attention all-reduce (o_proj)"]
    assert tp2["communication_us"]["label"] == "modelled"
    assert tp2["communication_us"]["source"].startswith("typical, not measured here")
    for c in (dp2, tp2):
        assert c["step_us"]["value"] > 0 and c["gemm_us"]["label"] == "measured"
        assert c["gemm_us"]["source"].startswith(f"{c['layout']}/results.json: ")  # relative to deployment.json
    report = open(workdir / "report.md").read()
    best = doc["answers"][0]["best"]
    assert f"- **B=4, context 256**: **{best['label']}, BF16**: " in report
    assert "## Communication per step (recipe bf16, context 256)" in report and "### TP=2" in report
    assert "deployment: " in out and "##### layout 2/2: TP=2 -> " in out


def test_assemble_only_rereads_the_runs_without_a_gpu(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(environment, "collect", lambda repo=None, **kw: {"versions": {"driver": "570.1",
                                                                                      "torch": "2.11.0"}})
    model = write_tiny_llama(tmp_path / "tiny")
    workdir = tmp_path / "deploy"
    base = [str(model), "--gpus", "2xH200", "--batch", "4", "--context", "256", "--recipes", "bf16"]
    assert cli.main([*base, "--workdir", str(workdir), "--flashinfer_repo", FAKE_REPO, "--backends", "cudnn",
                     "fa2", "--num_iters", "3", "--dry_run_iters", "1", "--no_autotune"]) == 0
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)  # no GPU from here on
    rows_before = {p: os.path.getmtime(workdir / p / "results.json") for p in ("tp1_dp2", "tp2")}
    capsys.readouterr()
    assert cli.main([*base, "--workdir", str(workdir), "--assemble_only", "--routing", "zipf:1.2",
                     "--out", str(workdir / "zipf")]) == 0
    doc = json.load(open(workdir / "zipf" / "deployment.json"))
    assert doc["workload"]["routing"] == "zipf s=1.2"
    assert {x["workdir"] for x in doc["layouts"]} == {"../tp1_dp2", "../tp2"}
    assert all(c["gemm_us"]["source"].startswith(f"../{c['layout']}/results.json: ") for c in doc["cells"])
    assert json.load(open(workdir / "deployment.json"))["workload"]["routing"] == "uniform"  # left alone
    assert rows_before == {p: os.path.getmtime(workdir / p / "results.json") for p in rows_before}
    assert "##### layout" not in capsys.readouterr().out  # nothing timed
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    again = [*base, "--workdir", str(workdir), "--assemble_only", "--out"]
    assert cli.main([*again, str(tmp_path / "mine")]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith(f"error: --out={tmp_path / 'mine'}: holds other files (notes.txt)")
    assert cli.main([*again, str(workdir / "zipf")]) == 0  # a deployment's own folder: written again
    capsys.readouterr()
    assert cli.main([*base, "--workdir", str(tmp_path / "empty"), "--assemble_only"]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith(f"error: --workdir={tmp_path / 'empty'}: holds no layout's results.json")


def test_a_quantized_recipe_times_bf16_too_for_the_modules_vllm_keeps_in_bf16():
    from benchmark_model_kernels.deploy.layouts import PlanOptions, layout_plans, parse_gpus
    from benchmark_model_kernels.deploy.view import Workload

    work = Workload((8,), (4096,), ("bf16", "fp8"))
    plans = {lp.label: lp for lp in layout_plans(PlanOptions("llama-3.1-70b"), parse_gpus("8xH200"), work.recipes)}
    assert cli.timed_recipes(plans["TP=1 DP=8"], work) == ("bf16", "fp8")  # BF16 weights do not fit, lm_head is BF16
    assert cli.timed_recipes(plans["TP=8"], work) == ("bf16", "fp8")
    assert cli.timed_recipes(plans["TP=8"], Workload((8,), (4096,), ("fp8",))) == ("bf16", "fp8")
