"""benchmark_model.py (planning half): preview, --plan_json, exit codes and every bad-input path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, shared_config_dir

from benchmark_model_kernels import cli_model, planner
from benchmark_model_kernels.plan import ModelInfo, Plan, Unsupported

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100}


def run(argv, capsys):
    rc = cli_model.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def tiny(tmp_path, **over):
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({**TINY, **over}))
    return str(d)


def test_preview_and_plan_json(tmp_path, capsys):
    out_json = tmp_path / "plan.json"
    rc, out, err = run([tiny(tmp_path), "--tp", "2", "--print_only", "--plan_json", str(out_json)], capsys)
    assert rc == 0, err
    assert "LlamaForCausalLM" in out and "TP=2 EP=1" in out and "# plan complete" in out
    assert "model.layers.*.self_attn.q_proj" in out
    plan = Plan.from_json(out_json.read_text())
    g = {e.name: (e.n, e.k, e.layers) for e in plan.gemms}
    # d = 64/4 = 16: (4/2 + 2*2/2)*16 = 64; gate_up 2*128/2; vocab round_up(100,64)=128 /2
    assert g == {"qkv_proj": (64, 64, 2), "o_proj": (64, 32, 2), "gate_up_proj": (128, 64, 2),
                 "down_proj": (64, 64, 2), "lm_head": (64, 64, 1)}
    assert set(json.loads(out_json.read_text())) >= {"model", "tp", "ep", "gemms", "moe", "unsupported"}


def test_plan_json_overwrites_only_its_path(tmp_path, capsys):
    target = tmp_path / "plan.json"
    target.write_text("old")
    other = tmp_path / "keep.txt"
    other.write_text("keep")
    rc, _, _ = run([tiny(tmp_path), "--print_only", "--plan_json", str(target)], capsys)
    assert rc == 0 and target.read_text().startswith("{") and other.read_text() == "keep"
    assert sorted(os.listdir(tmp_path)) == ["keep.txt", "m", "plan.json"]  # no temp file left


def test_incomplete_plan_exits_2_after_printing_and_writing(tmp_path, capsys, monkeypatch):
    # Stand-in plan (plumbing only): the CLI must print the unsupported line, write JSON, exit 2.
    plan = Plan(ModelInfo("x", "local", "llama", "LlamaForCausalLM"), 1, 1,
                unsupported=(Unsupported("model.layers.*.foo", 8, 4, "no role"),))
    monkeypatch.setattr(planner, "plan_model", lambda *a, **k: plan)
    rc, out, _ = run(["x", "--print_only", "--plan_json", str(tmp_path / "p.json")], capsys)
    assert rc == 2
    assert "# unsupported: model.layers.*.foo (8 x 4): no role" in out and "INCOMPLETE" in out
    assert Plan.from_json((tmp_path / "p.json").read_text()) == plan


def test_list_models(capsys):
    rc, out, _ = run(["--list_models"], capsys)
    assert rc == 0 and "deepseek-v3" in out.split()


@pytest.mark.parametrize("flag", ["--nks", "--nk", "--nks=4096,4096,x", "--moe", "--moe_hidden", "--moe_top_k=2"])
def test_derived_flags_rejected(flag, capsys):
    rc, out, err = run(["llama-3.1-8b", flag, "--print_only"], capsys)
    assert rc == 2 and out == ""
    assert err.startswith("error: --") and "benchmark_via_builtin.py --nks" in err and err.count("\n") == 1


def _err(argv, capsys, tmp_path=None):
    rc, out, err = run(argv, capsys)
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, (rc, err)
    return err


def test_bad_inputs(tmp_path, capsys, monkeypatch):
    assert "no such file" in _err([str(tmp_path / "missing"), "--print_only"], capsys)
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert "not valid JSON" in _err([str(bad), "--print_only"], capsys)
    bert = tmp_path / "bert.json"
    bert.write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]}))
    assert "causal LM" in _err([str(bert), "--print_only"], capsys)
    assert "num_attention_heads=4" in _err([tiny(tmp_path), "--tp", "8", "--print_only"], capsys)
    assert "intermediate_size" in _err([tiny(tmp_path, intermediate_size=130), "--tp", "4", "--print_only"], capsys)
    assert "no routed experts" in _err([tiny(tmp_path), "--ep", "2", "--print_only"], capsys)
    assert "multiple of --tp=4" in _err(["mixtral-8x7b", "--tp", "4", "--ep", "6", "--print_only"], capsys)
    assert "routed experts=8" in _err(["mixtral-8x7b", "--tp", "4", "--ep", "16", "--print_only"], capsys)
    assert "--tp=0" in _err(["llama-3.1-8b", "--tp", "0", "--print_only"], capsys)
    assert "--plan_json" in _err(["llama-3.1-8b", "--print_only", "--plan_json", str(tmp_path / "no" / "p.json")], capsys)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "local path" in _err(["org/model", "--print_only"], capsys)


def test_tp_not_dividing_real_heads(capsys):
    err = _err([shared_config_dir("qwen2.5-7b"), "--tp", "8", "--print_only"], capsys)
    assert "num_attention_heads=28" in err


def test_no_runner_requires_print_only(monkeypatch, capsys):
    monkeypatch.setattr(cli_model, "runner", None)
    assert "--print_only" in _err(["llama-3.1-8b"], capsys)


def test_script_runs_as_subprocess_no_traceback(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    ok = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), "qwen3-30b-a3b",
                         "--tp", "8", "--ep", "8", "--print_only"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "16/128" in ok.stdout  # 128/8 experts local under EP8
    bad = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), "org/x",
                          "--print_only"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.startswith("error: MODEL=org/x")


# ------------------------------------------------------------------ several models / TP-EP sweeps


def test_parallel_settings_pair_in_order_and_broadcast_single_values():
    assert cli_model.parallel_settings(None, None) == [(1, 1)]
    assert cli_model.parallel_settings([1, 4], [1, 4]) == [(1, 1), (4, 4)]
    assert cli_model.parallel_settings([1, 2, 4], None) == [(1, 1), (2, 1), (4, 1)]
    assert cli_model.parallel_settings([8], [8, 16, 64]) == [(8, 8), (8, 16), (8, 64)]
    with pytest.raises(cli_model.UsageError, match="--ep"):
        cli_model.parallel_settings([1, 4], [1, 2, 4])


def test_run_label_is_filename_safe():
    assert cli_model.run_label("llama-3.1-8b", 1, 1) == "llama-3.1-8b_tp1_ep1"
    assert cli_model.run_label("Qwen/Qwen3-30B-A3B", 4, 4) == "Qwen3-30B-A3B_tp4_ep4"
    assert cli_model.run_label("/x/deepseek-v3/config.json", 8, 64) == "deepseek-v3_tp8_ep64"


def test_sweep_runs_each_setting_into_its_own_workdir_and_writes_one_comparison_report(
        tmp_path, capsys, monkeypatch):
    # The GPU run is replaced by a plumbing stand-in that drops a hand-made results.json (fixture,
    # not a measurement) into the sub-workdir the CLI chose; what is tested is the sweep around it.
    fixture = os.path.join(ROOT, "tests", "fixtures", "results", "llama8b_like_tp1.json")
    seen = []

    def fake_run(args, plan):
        seen.append((plan.model.name, plan.tp, plan.ep, args.workdir))
        os.makedirs(args.workdir)
        with open(fixture) as f, open(os.path.join(args.workdir, "results.json"), "w") as g:
            g.write(f.read())
        return 0

    monkeypatch.setattr(cli_model.runner, "run_from_args", fake_run)
    wd = tmp_path / "cmp"
    rc, out, err = run(["llama-3.1-8b", "qwen3-30b-a3b", "--tp", "1", "2", "--workdir", str(wd),
                        "--ms", "8"], capsys)
    assert rc == 0, err
    assert [(m, tp, ep) for m, tp, ep, _ in seen] == [
        ("llama-3.1-8b", 1, 1), ("llama-3.1-8b", 2, 1), ("qwen3-30b-a3b", 1, 1), ("qwen3-30b-a3b", 2, 1)]
    assert [os.path.basename(w) for *_, w in seen] == [
        "llama-3.1-8b_tp1_ep1", "llama-3.1-8b_tp2_ep1", "qwen3-30b-a3b_tp1_ep1", "qwen3-30b-a3b_tp2_ep1"]
    assert os.path.isfile(wd / "report.md")
    assert "comparison report" in out


def test_sweep_needs_a_workdir_and_refuses_plan_json(tmp_path, capsys):
    rc, _, err = run(["llama-3.1-8b", "qwen3-8b", "--ms", "8", "--dry_run"], capsys)
    assert rc == 2 and "--workdir" in err
    rc, _, err = run(["llama-3.1-8b", "--tp", "1", "2", "--plan_json", str(tmp_path / "p.json"),
                      "--print_only"], capsys)
    assert rc == 2 and "--plan_json" in err and not os.path.exists(tmp_path / "p.json")


def test_dry_run_can_assume_a_target_gpu(tmp_path, capsys):
    # On a CPU machine a dry run can still show which cells an H200 (sm_90) will not run.
    wd = tmp_path / "wd"
    rc, out, err = run(["llama-3.1-8b", "--ms", "8", "--dry_run", "--assume_cc", "9.0",
                        "--workdir", str(wd)], capsys)
    assert rc == 0, err
    cases = {c["case_id"]: c for c in json.load(open(wd / "cases.json"))["cases"]}
    assert "sm_90" in cases["gemm.qkv_proj.m8.nvfp4.cutlass"]["skip_reason"]
    assert cases["gemm.qkv_proj.m8.bf16.torch"]["skip_reason"] == ""
    rc, _, err = run(["llama-3.1-8b", "--ms", "8", "--dry_run", "--assume_cc", "nine",
                      "--workdir", str(tmp_path / "wd2")], capsys)
    assert rc == 2 and "--assume_cc" in err
