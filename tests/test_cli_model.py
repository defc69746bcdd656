"""benchmark_model.py (planning half): preview, --plan_json, exit codes and every bad-input path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmark_model_kernels import cli_builtin, cli_model
from benchmark_model_kernels.env import doctor
from benchmark_model_kernels.plan import planner
from benchmark_model_kernels.plan.schema import ModelInfo, Plan, Unsupported
from benchmark_model_kernels.report import report
from benchmark_model_kernels.run import flags, runner
from support import ROOT, shared_config_dir

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
    no_folder = str(tmp_path / "no" / "p.json")
    assert "--plan_json" in _err(["llama-3.1-8b", "--print_only", "--plan_json", no_folder], capsys)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "local path" in _err(["org/model", "--print_only"], capsys)


def test_tp_not_dividing_real_heads(capsys):
    err = _err([shared_config_dir("qwen2.5-7b"), "--tp", "8", "--print_only"], capsys)
    assert "num_attention_heads=28" in err


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

    def fake_run(args, plan, **kwargs):
        seen.append((plan.model.name, plan.tp, plan.ep, args.workdir))
        os.makedirs(args.workdir)
        with open(fixture) as f, open(os.path.join(args.workdir, "results.json"), "w") as g:
            g.write(f.read())
        return 0

    monkeypatch.setattr(cli_model.runner, "run_from_args", fake_run)
    monkeypatch.setattr(cli_model.flags, "validate_args", lambda *a, **k: None)  # no GPU here
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


# ------------------------------------------------------------------------------------------------
# Bad input across all four CLIs: exactly one `error: <field>=<value>: <fix>` line, exit 2, nothing
# printed on stdout (run flags are checked before the planning and preview), nothing written.

CLIS = {"model": cli_model.main, "builtin": cli_builtin.main, "doctor": doctor.main, "report": report.main}
M = ["llama-3.1-8b"]
BAD_INPUT = [
    ("model", M + ["--tp", "abc", "--print_only"], "--tp=abc: must be a whole number, e.g. --tp 8"),
    ("model", M + ["--tp", "0", "--print_only"], "--tp=0:"),
    ("model", M + ["--tp", "-2", "--print_only"], "--tp=-2:"),
    ("model", M + ["--ep", "3", "--print_only"], "--ep=3:"),
    ("model", M + ["--tp", "1", "2", "--ep", "1", "2", "4", "--print_only"], "--ep=1 2 4:"),
    ("model", M + ["--bogus"], "--bogus=(given): unrecognized"),
    ("model", M + ["--print"], "--print=(given): unrecognized: benchmark_model.py has no such flag or "
     "argument; did you mean --print_only?"),
    ("model", ["nosuchmodel", "--print_only"], "MODEL=nosuchmodel:"),
    ("model", M + ["--plan_json", "{t}", "--print_only"], "--plan_json={t}: is a directory"),
    ("model", M + ["--nks", "1,2,a", "--print_only"], "--nks=(given): GEMM/MoE shapes are derived"),
    ("model", M + ["--dry_run"], "--workdir=None: is required"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--ms", "0"], "--ms=0:"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--ms", "-1"], "--ms=-1:"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--ms", "x"], "--ms=x: must be a whole number"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--ms"], "--ms=(missing): expected at least one"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--dtypes", "fp16"], "--dtypes=fp16: choose from bf16"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--backends", "foo"], "--backends=foo: choose from"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--num_iters", "0"], "--num_iters=0:"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--dry_run_iters", "-1"], "--dry_run_iters=-1:"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--case_timeout", "0"], "--case_timeout=0.0:"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--assume_cc", "nine"], "--assume_cc=nine:"),
    ("model", M + ["--workdir", "{w}", "--assume_cc", "9.0", "--flashinfer_repo", "{repo}"],
     "--assume_cc=9.0: only applies to --dry_run"),
    ("model", M + ["--dry_run", "--workdir", "{file}"], "--workdir={file}: exists and is not a directory"),
    ("model", M + ["--dry_run", "--workdir", "{file}/sub"], "--workdir={file}/sub: {file} is a file"),
    ("model", M + ["--dry_run", "--workdir", "{done}"], "--workdir={done}: already holds results.json"),
    ("model", M + ["--dry_run", "--workdir", "{empty}", "--resume"], "--resume={empty}: there is no results.json"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--resume"], "--resume={w}: there is no results.json"),
    ("model", M + ["qwen3-8b", "--dry_run", "--workdir", "{w}", "--resume"], "--resume={w}/llama-3.1-8b_tp1_ep1:"),
    ("model", M + ["--workdir", "{w}"], "--flashinfer_repo=None: is required"),
    ("model", M + ["--workdir", "{w}", "--flashinfer_repo", "{t}"], "--flashinfer_repo={t}: has no benchmarks/"),
    ("builtin", ["--nks", "6144x4096", "--workdir", "{w}", "--dry_run"], "--nks=6144x4096: must be N,K,name"),
    ("builtin", ["--nks", "6144,4096", "--workdir", "{w}", "--dry_run"], "--nks=6144,4096: must be N,K,name"),
    ("builtin", ["--nks", "6144,4096,", "--workdir", "{w}", "--dry_run"], "--nks=6144,4096,: the name must not"),
    ("builtin", ["--nks", "1,2,a", "3,4,a", "--workdir", "{w}", "--dry_run"], "--nks=a: names must be unique"),
    ("builtin", ["--nks", "0,4096,a", "--workdir", "{w}", "--dry_run"], "--nks=0,4096,a: N='0' must be"),
    ("builtin", ["--nks", "64,64,a", "--ms", "1.5", "--workdir", "{w}", "--dry_run"], "--ms=1.5:"),
    ("builtin", ["--plan", "{badjson}", "--workdir", "{w}", "--dry_run"], "--plan={badjson}: is not a plan JSON"),
    ("builtin", ["--plan", "{t}", "--workdir", "{w}", "--dry_run"], "--plan={t}: cannot be read"),
    ("builtin", ["--plan", "{t}/nope.json", "--workdir", "{w}", "--dry_run"], "--plan={t}/nope.json: cannot"),
    ("builtin", ["--moe_hidden", "2048", "--workdir", "{w}", "--dry_run"], "--moe_intermediate=None: is required"),
    ("builtin", ["--moe_hidden", "64", "--moe_intermediate", "64", "--moe_experts", "8", "--moe_top_k", "2",
                 "--moe_routing", "deepseek_v3", "--workdir", "{w}", "--dry_run"], "--moe_routing=deepseek_v3:"),
    ("builtin", ["--moe_activation", "foo"], "--moe_activation=foo: choose from Swiglu"),
    ("builtin", ["--workdir", "{w}", "--dry_run"], "--nks=None: give shapes"),
    ("builtin", ["stray"], "stray=(given): unrecognized"),
    ("doctor", ["--gpu", "x"], "--gpu=x: must be a whole number, e.g. --gpu 1"),
    ("doctor", ["--gpu", "-1"], "--gpu=-1:"),
    ("doctor", ["--json=1"], "--json=(given):"),
    ("report", [], "WORKDIR=(missing): is required"),
    ("report", ["{t}/nope"], "WORKDIR={t}/nope:"),
    ("report", ["{empty}"], "WORKDIR={empty}: has no results.json"),
    ("report", ["{badresults}"], "WORKDIR={badresults}: results.json is not valid JSON"),
    ("report", ["{done}", "--out", "{file}"], "--out={file}: is a file"),
    ("report", ["{done}", "--out"], "--out=(missing): expected one argument, e.g. --out runs/compare"),
]


def _tree(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirnames, files in os.walk(root):
        out[dirpath] = b"<dir>"
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.join(dirpath, f)] = fh.read()
    return out


@pytest.fixture
def bad_input_dirs(tmp_path, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)  # the same on a GPU machine
    t = tmp_path / "t"
    t.mkdir()
    (t / "afile").write_text("keep me")
    (t / "empty").mkdir()
    done = t / "done"
    done.mkdir()
    with open(os.path.join(ROOT, "tests", "fixtures", "results", "tiny_mixed.json")) as f:
        (done / "results.json").write_text(f.read())
    (t / "bad.json").write_text("{not json")
    (t / "badres").mkdir()
    (t / "badres" / "results.json").write_text("{not json")
    repo = t / "repo" / "benchmarks"
    repo.mkdir(parents=True)
    (repo / "flashinfer_benchmark.py").write_text("")
    return {"{t}": str(t), "{w}": str(t / "new"), "{file}": str(t / "afile"), "{empty}": str(t / "empty"),
            "{done}": str(done), "{badjson}": str(t / "bad.json"), "{badresults}": str(t / "badres"),
            "{repo}": str(t / "repo")}


def _fill(text: str, dirs: dict[str, str]) -> str:
    for key in sorted(dirs, key=len, reverse=True):
        text = text.replace(key, dirs[key])
    return text


@pytest.mark.parametrize("cli,argv,expected", BAD_INPUT, ids=[f"{c}:{' '.join(a)}" for c, a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_nothing_printed_or_written(cli, argv, expected, bad_input_dirs, capsys):
    before = _tree(bad_input_dirs["{t}"])
    rc = CLIS[cli]([_fill(a, bad_input_dirs) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert err.startswith("error: " + _fill(expected, bad_input_dirs)), err
    assert err.count("\n") == 1 and err.endswith("\n")
    assert out == ""  # rejected before any planning or preview
    assert _tree(bad_input_dirs["{t}"]) == before  # nothing created, nothing overwritten


@pytest.mark.parametrize("script,args,expected", [
    ("benchmark_model.py", ["llama-3.1-8b", "--tp", "x"], "error: --tp=x: must be a whole number"),
    ("benchmark_via_builtin.py", ["--nks", "6144x4096", "--dry_run", "--workdir", "w"], "error: --nks=6144x4096:"),
    ("check_env.py", ["--gpu", "x"], "error: --gpu=x:"),
    ("report.py", [], "error: WORKDIR=(missing):"),
])
def test_scripts_print_one_error_line_and_no_usage_block(script, args, expected, tmp_path):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), *args], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith(expected) and r.stderr.count("\n") == 1, r.stderr
    assert "usage:" not in r.stderr and r.stdout == "" and os.listdir(tmp_path) == []


def test_resuming_a_sweep_needs_results_in_only_one_of_its_runs(tmp_path, capsys, monkeypatch):
    # A sweep interrupted during its first run has no sub-workdir for the later runs yet: --resume
    # continues the first and starts the others fresh.
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    wd = tmp_path / "sweep"
    first = wd / "llama-3.1-8b_tp1_ep1"
    first.mkdir(parents=True)
    with open(os.path.join(ROOT, "tests", "fixtures", "results", "tiny_mixed.json")) as f:
        (first / "results.json").write_text(f.read())
    seen = []
    monkeypatch.setattr(runner, "dry_run", lambda cases, settings, workdir, **k: seen.append(workdir) or 0)
    rc, _, err = run(["llama-3.1-8b", "--tp", "1", "2", "--ms", "8", "--dry_run", "--resume",
                      "--workdir", str(wd)], capsys)
    assert rc == 0, err
    assert [os.path.basename(w) for w in seen] == ["llama-3.1-8b_tp1_ep1", "llama-3.1-8b_tp2_ep1"]
