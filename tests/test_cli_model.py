"""benchmark_model.py (planning half): preview, --plan_json, exit codes and every bad-input path."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from benchmark_model_kernels import cli_builtin, cli_model
from benchmark_model_kernels.core.plan_schema import ModelInfo, Plan, Unsupported
from benchmark_model_kernels.doctor import doctor
from benchmark_model_kernels.plan import planner
from benchmark_model_kernels.report import report
from benchmark_model_kernels.run import flags, runner
from support import ROOT, TINY_LLAMA, shared_config_dir

TINY = TINY_LLAMA


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


def test_preview_counts_what_the_target_gpu_runs_and_the_weights_per_rank(capsys, monkeypatch):
    """--print_only --assume_cc 9.0: per recipe, the cells an H200 runs and those it will not,
    NVFP4 named as getting no number; the weight memory of one rank per recipe."""
    from benchmark_model_kernels.cases.capabilities import HAND

    monkeypatch.setattr(cli_model, "load_capabilities", lambda repo: HAND)
    rc, out, err = run(["llama-3.1-8b", "--tp", "1", "--ms", "8", "--print_only", "--assume_cc",
                        "9.0"], capsys)
    assert rc == 0, err
    memory = out.split("Memory per rank", 1)[1]
    assert "weights per recipe" in memory and "bf16 15.0, fp8 8.5, nvfp4 5.6" in memory
    summary = out.split("# on sm_90 (--assume_cc): ", 1)[1]
    assert "backend support per GPU" not in summary and HAND.origin in summary
    nvfp4 = next(ln for ln in summary.splitlines() if ln.startswith("#   nvfp4:"))
    assert nvfp4.startswith("#   nvfp4: 0 of ") and "no number on this GPU" in nvfp4
    bf16 = next(ln for ln in summary.splitlines() if ln.startswith("#   bf16:"))
    assert "no number" not in bf16 and " unsupported" in bf16
    rc, out, _ = run(["llama-3.1-8b", "--tp", "1", "--print_only"], capsys)
    assert rc == 0 and "# on sm_" not in out  # no target GPU given: no count


def test_plan_json_replaces_an_existing_file_only_with_force_and_only_its_path(tmp_path, capsys):
    target = tmp_path / "plan.json"
    target.write_text("old")
    other = tmp_path / "keep.txt"
    other.write_text("keep")
    rc, out, err = run([tiny(tmp_path), "--print_only", "--plan_json", str(target)], capsys)
    assert (rc, out) == (2, "") and target.read_text() == "old"
    assert err == f"error: --plan_json={target}: already exists; pass --force to replace it, or choose another path\n"
    rc, _, _ = run([tiny(tmp_path), "--print_only", "--plan_json", str(target), "--force"], capsys)
    assert rc == 0 and target.read_text().startswith("{") and other.read_text() == "keep"
    assert sorted(os.listdir(tmp_path)) == ["keep.txt", "m", "plan.json"]  # no temp file left


def test_incomplete_plan_exits_2_after_printing_and_writing(tmp_path, capsys, monkeypatch):
    # Stand-in plan (plumbing only): the CLI must print the unsupported line, write JSON, exit 2.
    plan = Plan(ModelInfo("x", "local", "llama", "LlamaForCausalLM"), 1, 1,
                unsupported=(Unsupported("model.layers.*.foo", 8, 4, "no role"),))
    monkeypatch.setattr(planner, "plan_layout", lambda *a, **k: plan)
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
    ("model", M + ["--workdir", "{done}", "--resume", "--flashinfer_repo", "{repo}"],
     "--resume={done}: its rows were timed with autotune_buckets='all' (now 'timed'); resume with the flags"),
    ("model", M + ["--workdir", "{w}"], "--flashinfer_repo=None: is required"),
    ("model", M + ["--workdir", "{w}", "--flashinfer_repo", "{t}"], "--flashinfer_repo={t}: has no benchmarks/"),
    ("builtin", ["--nks", "6144x4096", "--workdir", "{w}", "--dry_run"], "--nks=6144x4096: must be N,K,name"),
    ("builtin", ["--nks", "6144,4096", "--workdir", "{w}", "--dry_run"], "--nks=6144,4096: must be N,K,name"),
    ("builtin", ["--nks", "6144,4096,", "--workdir", "{w}", "--dry_run"], "--nks=6144,4096,: the name must not"),
    ("builtin", ["--nks", "1,2,a", "3,4,a", "--workdir", "{w}", "--dry_run"], "--nks=a: names must be unique"),
    ("builtin", ["--nks", "0,4096,a", "--workdir", "{w}", "--dry_run"], "--nks=0,4096,a: N='0' must be"),
    ("builtin", ["--nks", "64,64,a", "--ms", "1.5", "--workdir", "{w}", "--dry_run"], "--ms=1.5:"),
    ("builtin", ["--plan", "{badjson}", "--workdir", "{w}", "--dry_run"], "--plan={badjson}: is not valid JSON"),
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
    # Duplicate sweep values, and paths that would overwrite or read back what exists.
    ("model", M + ["--dry_run", "--workdir", "{w}", "--ms", "8", "8"], "--ms=8 8: lists 8 twice"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--dtypes", "bf16", "bf16"], "--dtypes=bf16 bf16: lists bf16"),
    ("model", M + ["--print_only", "--plan_json", "{file}"], "--plan_json={file}: already exists"),
    ("model", ["{cfg:ok}", "--print_only", "--plan_json", "{cfg:ok}/config.json", "--force"],
     "--plan_json={cfg:ok}/config.json: is the config.json"),
    ("model", M + ["--print_only", "--plan_json", "/proc/nope/plan.json"], "--plan_json=/proc/nope/plan.json:"),
    ("model", M + ["--dry_run", "--workdir", "{foreign}"], "--workdir={foreign}: holds other files"),
    ("model", M + ["--dry_run", "--workdir", "$NO_SUCH_VAR_BMK/x"], "--workdir=$NO_SUCH_VAR_BMK/x: environment"),
    # Config files the planner would read wrong: missing keys, wrong types and ranges, bad bytes.
    ("model", ["{cfg:no_kv_heads}", "--print_only"], "config.json: num_key_value_heads missing"),
    ("model", ["{cfg:heads_str}", "--print_only"], 'config.json: num_attention_heads="32": must be a positive integer'),
    ("model", ["{cfg:heads_float}", "--print_only"], "config.json: num_attention_heads=32.5:"),
    ("model", ["{cfg:heads_null}", "--print_only"], "config.json: num_attention_heads=null: must be a positive"),
    ("model", ["{cfg:heads_bool}", "--print_only"], "config.json: num_attention_heads=true: must be a positive"),
    ("model", ["{cfg:heads_zero}", "--print_only"], "config.json: num_attention_heads=0:"),
    ("model", ["{cfg:layers_huge}", "--print_only"], "config.json: num_hidden_layers=10000000:"),
    ("model", ["{cfg:hidden_neg}", "--print_only"], "config.json: hidden_size=-4096:"),
    ("model", ["{cfg:top_k_zero}", "--print_only"], "config.json: num_experts_per_tok=0:"),
    ("model", ["{cfg:top_k_big}", "--print_only"], "config.json: num_experts_per_tok=200:"),
    ("model", ["{cfg:not_utf8}", "--print_only"], "MODEL={cfg:not_utf8}/config.json: config.json is not UTF-8"),
    ("model", ["{cfg:list}", "--print_only"], "MODEL={cfg:list}/config.json: config.json must hold a JSON object"),
    ("model", ["{cfg:not_json}", "--print_only"], "MODEL={cfg:not_json}/config.json: config.json is not valid JSON"),
    # Plan and results files whose content is not what they claim.
    ("builtin", ["--plan", "{plan:neg}", "--workdir", "{w}", "--dry_run"], "--plan={plan:neg}: gemms[0].n=-5:"),
    ("builtin", ["--plan", "{plan:frac}", "--workdir", "{w}", "--dry_run"], "--plan={plan:frac}: gemms[0].k=4.5:"),
    ("builtin", ["--plan", "{plan:list}", "--workdir", "{w}", "--dry_run"], "--plan={plan:list}:"),
    ("builtin", ["--plan", "{plan:newer}", "--workdir", "{w}", "--dry_run"], "--plan={plan:newer}: schema_version=99:"),
    ("report", ["{res:list}"], "WORKDIR={res:list}:"),
    ("report", ["{res:badrow}"], "WORKDIR={res:badrow}:"),
    ("report", ["{done}", "--out", "{foreign}"], "--out={foreign}: holds a report.md"),
]

#: config.json variants of the bundled Llama-3.1-8B (and Qwen3-30B-A3B for the MoE keys) that
#: must each be one error line; "{cfg:<name>}" in a row names the folder holding it.
_LLAMA_EDITS = {
    "ok": {},
    "no_kv_heads": {"num_key_value_heads": None, "num_key_valeu_heads": 8},  # misspelled key
    "heads_str": {"num_attention_heads": "32"},
    "heads_float": {"num_attention_heads": 32.5},
    "heads_null": {"num_attention_heads": "<null>"},
    "heads_bool": {"num_attention_heads": True},
    "heads_zero": {"num_attention_heads": 0},
    "layers_huge": {"num_hidden_layers": 10_000_000},
    "hidden_neg": {"hidden_size": -4096},
}
_QWEN_EDITS = {"top_k_zero": {"num_experts_per_tok": 0}, "top_k_big": {"num_experts_per_tok": 200}}


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
    foreign = t / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a workdir")
    (foreign / "report.md").write_text("someone else's report")
    dirs = {"{t}": str(t), "{w}": str(t / "new"), "{file}": str(t / "afile"), "{empty}": str(t / "empty"),
            "{done}": str(done), "{badjson}": str(t / "bad.json"), "{badresults}": str(t / "badres"),
            "{repo}": str(t / "repo"), "{foreign}": str(foreign)}
    dirs.update(_bad_configs(t))
    dirs.update(_bad_plans_and_results(t, done))
    return dirs


def _bundled_config(name: str) -> dict:
    with open(os.path.join(ROOT, "scripts", "benchmark_model_kernels", "plan", "models", f"{name}.json")) as f:
        return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


def _write_config(folder, raw) -> str:
    folder.mkdir()
    (folder / "config.json").write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return str(folder)


def _bad_configs(t) -> dict[str, str]:
    out = {}
    for base, edits in (("llama-3.1-8b", _LLAMA_EDITS), ("qwen3-30b-a3b", _QWEN_EDITS)):
        for name, edit in edits.items():
            raw = _bundled_config(base)
            for key, value in edit.items():
                if value is None:
                    raw.pop(key, None)
                else:
                    raw[key] = None if value == "<null>" else value
            out[f"{{cfg:{name}}}"] = _write_config(t / f"cfg_{name}", raw)
    folder = t / "cfg_not_utf8"
    folder.mkdir()
    (folder / "config.json").write_bytes(b'{"model_type": "llama", "name": "\xff\xfe"}')
    out["{cfg:not_utf8}"] = str(folder)
    out["{cfg:list}"] = _write_config(t / "cfg_list", "[1, 2]")
    out["{cfg:not_json}"] = _write_config(t / "cfg_not_json", "{model_type: llama")
    return out


def _bad_plans_and_results(t, done) -> dict[str, str]:
    gemm = {"name": "a", "modules": [], "n": 64, "k": 64, "layers": 1, "parallel": "replicated"}
    plan = {"model": {"name": "x", "source": "shapes", "model_type": "", "architecture": ""},
            "tp": 1, "ep": 1, "gemms": [gemm], "moe": [], "unsupported": [], "schema_version": 1}
    variants = {"neg": {"gemms": [dict(gemm, n=-5)]}, "frac": {"gemms": [dict(gemm, k=4.5)]},
                "newer": {"schema_version": 99}}
    out = {}
    for name, change in variants.items():
        (t / f"plan_{name}.json").write_text(json.dumps({**plan, **change}))
        out[f"{{plan:{name}}}"] = str(t / f"plan_{name}.json")
    (t / "plan_list.json").write_text("[]")
    out["{plan:list}"] = str(t / "plan_list.json")
    for name, text in (("list", "[]"), ("badrow", None)):
        folder = t / f"res_{name}"
        folder.mkdir()
        if text is None:
            payload = json.loads((done / "results.json").read_text())
            payload["rows"][0]["m"] = "eight"
            text = json.dumps(payload)
        (folder / "results.json").write_text(text)
        out[f"{{res:{name}}}"] = str(folder)
    return out


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


# ------------------------------------------------------------------------------------------------
# Never overwrite, and one way to read paths: --plan_json against inputs, the workdir, an
# unwritable folder or a full disk; `~` and `$VAR` in every path flag of every script.


def one_error_line(rc, err):
    """Exit 2, and stderr exactly one `error:` line (no traceback); returns that line."""
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err
    return err.rstrip("\n")


def test_plan_json_never_replaces_the_config_it_reads_even_with_force(tmp_path, capsys):
    model = tiny(tmp_path)
    config = os.path.join(model, "config.json")
    before = open(config, "rb").read()
    os.symlink(config, tmp_path / "link.json")
    for given_model, target in ((model, config), (config, config), (model, str(tmp_path / "link.json"))):
        rc, out, err = run([given_model, "--print_only", "--plan_json", target, "--force"], capsys)
        assert one_error_line(rc, err) == (
            f"error: --plan_json={target}: is the config.json of MODEL={given_model}, which this command "
            "reads; choose another path, e.g. --plan_json plan.json (--force never replaces an input)")
        assert out == "" and open(config, "rb").read() == before


def test_plan_json_never_replaces_the_autotune_cache(tmp_path, capsys):
    cache = tmp_path / "tuned.json"
    cache.write_text("{}")
    rc, _, err = run([tiny(tmp_path), "--dry_run", "--workdir", str(tmp_path / "w"), "--autotune_cache",
                      str(cache), "--plan_json", str(cache), "--force"], capsys)
    assert "is the --autotune_cache, which this command reads" in one_error_line(rc, err)
    assert cache.read_text() == "{}" and not os.path.exists(tmp_path / "w")


def test_plan_json_inside_the_workdir_is_refused(tmp_path, capsys):
    w = tmp_path / "w"
    target = w / "plan.json"
    rc, _, err = run([tiny(tmp_path), "--dry_run", "--workdir", str(w), "--plan_json", str(target)], capsys)
    assert one_error_line(rc, err) == (
        f"error: --plan_json={target}: is inside --workdir={w}, which holds only the run's own files "
        "(results.json records the plan); write it elsewhere, e.g. --plan_json plan.json")
    assert not os.path.exists(w)


def test_plan_json_into_an_unwritable_folder_is_one_line(tmp_path, capsys, monkeypatch):
    rc, out, err = run([tiny(tmp_path), "--print_only", "--plan_json", "/proc/plan.json"], capsys)
    line = one_error_line(rc, err)
    assert line.startswith("error: --plan_json=/proc/plan.json: folder /proc is not writable (")
    assert line.endswith("); choose a writable path, e.g. --plan_json plan.json") and out == ""
    # A folder that passes the check but refuses the write (a permission change meanwhile).
    monkeypatch.setattr(cli_model, "check_writable_folder", lambda folder: None)
    rc, out, err = run([tiny(tmp_path), "--print_only", "--plan_json", "/proc/plan.json"], capsys)
    assert one_error_line(rc, err).startswith("error: --plan_json=/proc/plan.json: cannot be written (")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), "llama-3.1-8b",
                        "--print_only", "--plan_json", "/proc/plan.json"], capture_output=True, text=True)
    assert one_error_line(r.returncode, r.stderr).startswith("error: --plan_json=/proc/plan.json: folder /proc")


def test_plan_json_on_a_full_disk_is_one_line_and_the_old_file_stays(tmp_path, capsys, monkeypatch):
    target = tmp_path / "plan.json"
    target.write_bytes(b"old plan")

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    rc, _, err = run([tiny(tmp_path), "--print_only", "--plan_json", str(target), "--force"], capsys)
    assert one_error_line(rc, err) == (f"error: --plan_json={target}: disk full (No space left on device); "
                                       "free space and run the same command again")
    assert target.read_bytes() == b"old plan" and sorted(os.listdir(tmp_path)) == ["m", "plan.json"]


#: (CLI, arguments before the flag, flag, argparse dest, how the value is read back).
PATH_FLAGS = [
    (cli_model, ["x"], "--plan_json", "plan_json"),
    (cli_model, ["x"], "--workdir", "workdir"),
    (cli_model, ["x"], "--flashinfer_repo", "flashinfer_repo"),
    (cli_model, ["x"], "--autotune_cache", "autotune_cache"),
    (cli_builtin, [], "--plan", "plan"),
    (cli_builtin, [], "--workdir", "workdir"),
    (cli_builtin, [], "--flashinfer_repo", "flashinfer_repo"),
    (cli_builtin, [], "--autotune_cache", "autotune_cache"),
    (report, ["w"], "--out", "out"),
    (doctor, [], "--flashinfer_repo", "flashinfer_repo"),
]


@pytest.mark.parametrize("cli,before,flag,dest", PATH_FLAGS, ids=[f"{c.__name__}:{f}" for c, _, f, _ in PATH_FLAGS])
def test_every_path_flag_expands_home_and_variables(cli, before, flag, dest, monkeypatch, capsys):
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("RUNS", "/data/runs")
    parser = cli.build_parser()
    for given, expected in (("~/x", "/home/someone/x"), ("$RUNS/x", "/data/runs/x"),
                            ("${RUNS}/x", "/data/runs/x"), ("rel/x", "rel/x")):
        assert getattr(parser.parse_args([*before, f"{flag}={given}"]), dest) == expected
        assert getattr(parser.parse_args([*before, flag, given]), dest) == expected
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    rc = cli.main([*before, f"{flag}=$NOPE_NOT_SET/x"])
    assert one_error_line(rc, capsys.readouterr().err) == (
        f"error: {flag}=$NOPE_NOT_SET/x: environment variable $NOPE_NOT_SET is not set; set it, or "
        "write the path out")


def test_report_workdirs_expand_home_and_variables(monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("RUNS", "/data/runs")
    assert report.build_parser().parse_args(["~/a", "$RUNS/b"]).workdirs == ["/home/someone/a", "/data/runs/b"]


def test_workdir_with_a_tilde_creates_no_literal_tilde_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(["llama-3.1-8b", "--ms", "8", "--dry_run", "--workdir=~/runs/x",
                      "--plan_json=~/plan.json"], capsys)
    assert rc == 0, err
    assert os.path.isfile(tmp_path / "home" / "runs" / "x" / "cases.json")
    assert os.path.isfile(tmp_path / "home" / "plan.json")
    assert os.listdir(tmp_path) == ["home"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_while_planning_is_one_line_and_128_plus_signal(signum, tmp_path):
    """Planning writes nothing: a stop signal ends it at once, never with a traceback, and never
    lost in one of the meta build's `__del__`s (Python swallows a KeyboardInterrupt raised there)."""
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no kept plan: it really plans
    r = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "benchmark_model.py"), "deepseek-v3",
                          "--tp", "8", "--print_only", "--plan_json", str(work / "plan.json")],
                         cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(0.5)
    r.send_signal(signum)
    out, err = r.communicate(timeout=60)
    assert r.returncode == 128 + signum, (out, err)
    assert err == f"interrupted by {signal.Signals(signum).name} while planning deepseek-v3; nothing was written\n"
    assert out == "" and os.listdir(work) == []


def test_gpus_of_two_models_is_one_line_exit_2_before_planning(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(flags.devices, "nvml_names", lambda numbers: ["NVIDIA H200", "NVIDIA H100"][:len(numbers)])
    rc, out, err = run(["llama-3.1-8b", "--backends", "torch", "--gpus", "0,1",
                        "--workdir", str(tmp_path / "w")], capsys)
    assert rc == 2 and err.startswith("error: --gpus=0,1: GPU 1 is a NVIDIA H100") and err.count("\n") == 1
    assert out == "" and not (tmp_path / "w").exists()


def test_cross_check_without_vllm_is_one_line_saying_how_to_install(capsys, monkeypatch):
    from benchmark_model_kernels.crosscheck import vllm_build

    monkeypatch.setattr(vllm_build.importlib.util, "find_spec", lambda name: None)
    err = _err(["llama-3.1-8b", "--cross_check", "vllm"], capsys)
    assert "vLLM is not importable" in err and "pip install vllm==0.33.0" in err


def test_cross_check_lines_in_the_preview():
    from benchmark_model_kernels.core.plan_schema import CrossCheck
    from benchmark_model_kernels.plan import preview

    plan = Plan(ModelInfo(name="m", source="local", model_type="t", architecture="A"), 1, 1)
    text = preview.format_plan(replace(plan, cross_check=CrossCheck("vllm 0.33.0 (A)", "mismatch", ("missing: x",))))
    assert "# cross-check against vllm 0.33.0 (A): 1 difference(s)\n# cross-check missing: x\n" in text
    text = preview.format_plan(replace(plan, cross_check=CrossCheck("vllm 0.33.0", "vllm refuses", refused="no")))
    assert "# cross-check against vllm 0.33.0: vLLM refuses: no" in text
    assert Plan.from_json(replace(plan, cross_check=CrossCheck("vllm 0.33.0", "match")).to_json()).cross_check \
        == CrossCheck("vllm 0.33.0", "match")


def test_preview_memory_table_on_a_cpu(capsys, monkeypatch):
    """No GPU and no --gpu_mem_gb: the table for the H100, H200 and B200 sizes; the attention
    section with heads per rank and K/V bytes."""
    from benchmark_model_kernels.env import gpu

    monkeypatch.setattr(gpu, "driver_present", lambda: False)
    rc, out, _ = run(["llama-3.1-70b", "--tp", "4", "--print_only"], capsys)
    assert rc == 0
    assert "Attention (1):" in out and "16/64" in out and "2/8" in out and "1024 / 512" in out
    assert "Memory per rank (GiB; no GPU here and no --gpu_mem_gb: H100, H200 and B200 sizes; vLLM takes " \
           "gpu_memory_utilization=0.92" in out
    assert "K/V cache per token on this rank: bf16 81920 B, fp8 40960 B" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("80 ", "141 ", "192 "))]
    assert [(r[0], r[1]) for r in rows] == [(s, d) for s in ("80", "141", "192") for d in ("bf16", "fp8", "nvfp4")]
    assert rows[3][2:5] == ["32.9", "129.7", "94.9"]  # 141 GiB bf16: weights, usable, K/V budget (GiB)
    assert rows[3][5] == "1,243,984"  # tests/plan/test_memory.py works this number out


def test_preview_memory_sizes_and_utilization_flags(capsys):
    rc, out, _ = run(["llama-3.1-8b", "--print_only", "--gpu_mem_gb", "24", "48", "--gpu_memory_utilization",
                      "0.5"], capsys)
    assert rc == 0 and "(GiB; --gpu_mem_gb; vLLM takes gpu_memory_utilization=0.5" in out
    sizes = {line.split()[0] for line in out.splitlines() if line.strip().startswith(("24 ", "48 "))}
    assert sizes == {"24", "48"}
    # weights above the usable memory: a line, exit 0 (the plan is fine)
    rc, out, _ = run(["llama-3.1-70b", "--print_only", "--gpu_mem_gb", "80"], capsys)
    assert rc == 0
    assert "80 GiB bf16: does not fit: weights 131.4 GiB > 73.6 GiB usable" in out


@pytest.mark.parametrize("argv, message", [
    (["--gpu_mem_gb", "0"], "--gpu_mem_gb=0: must be a positive number of GiB"),
    (["--gpu_mem_gb", "-80"], "--gpu_mem_gb=-80: must be a positive number of GiB"),
    (["--gpu_mem_gb", "nan"], "--gpu_mem_gb=nan: must be a positive number of GiB"),
    (["--gpu_mem_gb", "inf"], "--gpu_mem_gb=inf: must be a positive number of GiB"),
    (["--gpu_mem_gb", "big"], "--gpu_mem_gb=big: must be a number"),
    (["--gpu_memory_utilization", "0"], "--gpu_memory_utilization=0: must be a fraction above 0 and at most 1"),
    (["--gpu_memory_utilization", "1.5"], "--gpu_memory_utilization=1.5: must be a fraction above 0"),
    (["--gpu_memory_utilization", "most"], "--gpu_memory_utilization=most: must be a number"),
])
def test_bad_memory_flags(argv, message, capsys):
    err = _err(["llama-3.1-8b", "--print_only", *argv], capsys)
    assert message in err and "Traceback" not in err
