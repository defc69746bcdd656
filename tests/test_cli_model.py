"""benchmark_model.py (planning half): preview, --plan_json, exit codes and every bad-input path."""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from benchmark_model_kernels import cli_builtin, cli_model
from benchmark_model_kernels.core.plan_schema import ModelInfo, Plan, Unsupported
from benchmark_model_kernels.doctor import doctor
from benchmark_model_kernels.plan import planner
from benchmark_model_kernels.report import report
from benchmark_model_kernels.run import flags, runner, sweep, workdir
from support import ROOT, TINY_LLAMA, shared_config_dir, write_tiny_llama

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
    written = Plan.from_json((tmp_path / "p.json").read_text())
    assert written.model.planner.startswith("rules (") and replace(written, model=replace(written.model, planner="")) \
        == plan


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


def test_sweep_sub_workdirs_are_distinct_by_construction(tmp_path, capsys, monkeypatch):
    """Two configs that share a folder name each get a digest of what they read; a model whose
    name no other MODEL shares keeps its plain name (so a sweep resumes into the folders it wrote)."""
    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    a = str(write_tiny_llama(tmp_path / "a" / "model"))
    b = str(write_tiny_llama(tmp_path / "b" / "model", hidden_size=128))
    names = sweep.model_names([a, b, "llama-3.1-8b"])
    assert names["llama-3.1-8b"] == "llama-3.1-8b"
    assert names[a] != names[b] and all(re.fullmatch(r"model-[0-9a-f]{8}", names[m]) for m in (a, b))
    assert sweep.model_names([a, b]) == {a: names[a], b: names[b]}  # the same names however often asked
    bundled_folder = tmp_path / "llama-3.1-8b"  # a folder named like a bundled config
    write_tiny_llama(bundled_folder)
    twins = sweep.model_names(["llama-3.1-8b", str(bundled_folder)])
    assert len(set(twins.values())) == 2 and all(v.startswith("llama-3.1-8b-") for v in twins.values())
    wd = tmp_path / "sweep"
    rc, out, err = run([a, b, "--ms", "8", "--dtypes", "bf16", "--dry_run", "--workdir", str(wd)], capsys)
    assert rc == 0, err
    subs = sorted(n for n in os.listdir(wd) if not n.startswith("."))
    assert subs == sorted(f"{names[m]}_tp1_ep1" for m in (a, b))
    hidden = {n: json.load(open(wd / n / "cases.json"))["cases"][0]["logical"] for n in subs}
    assert len({json.dumps(h, sort_keys=True) for h in hidden.values()}) == 2  # each model its own cases
    assert workdir.is_tool_workdir(str(wd)) and os.path.isfile(wd / workdir.WORKDIR_MARKER)


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


def test_tuned_moe_rows_only_with_search_moe_tiles(tmp_path, capsys):
    # By default the Triton fused-MoE rows run vLLM's own tiles; --search_moe_tiles adds each
    # one's searched-tiles twin (and its +quant twin) and nothing else.
    rows = {}
    for name, extra in (("plain", []), ("searched", ["--search_moe_tiles"])):
        wd = tmp_path / name
        rc, _, err = run(["qwen3-30b-a3b", "--ms", "8", "--no_attention", "--dry_run", "--assume_cc", "9.0",
                          "--backends", "triton", "--workdir", str(wd)] + extra, capsys)
        assert rc == 0, err
        rows[name] = {c["case_id"] for c in json.load(open(wd / "cases.json"))["cases"]}
    tuned = rows["searched"] - rows["plain"]
    assert rows["plain"] < rows["searched"]
    assert tuned == {"moe.experts.m8.bf16.triton.tuned", "moe.experts.m8.fp8.triton.per_tensor-tuned",
                     "moe.experts.m8.fp8.triton.per_tensor-tuned.q", "moe.experts.m8.fp8.triton.per_token-tuned",
                     "moe.experts.m8.fp8.triton.per_token-tuned.q", "moe.experts.m8.fp8.triton.block128-tuned",
                     "moe.experts.m8.fp8.triton.block128-tuned.q"}, tuned
    assert "moe.experts.m8.fp8.triton.per_token" in rows["plain"]


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
     "--resume={done}: its rows were timed with autotune_buckets='all' (now 'timed'), autotune_tactics=0 "
     "(now 8); resume with the flags"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_tactics", "0"],
     "--autotune_tactics=0: must be a whole number of at least 1 or 'all'"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_tactics", "few"],
     "--autotune_tactics=few: must be a whole number of at least 1 or 'all'"),
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
    # Nothing the user owns is ever written: the autotune cache is FlashInfer's own file or new.
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{cfg:ok}/config.json"],
     "--autotune_cache={cfg:ok}/config.json: is a JSON file without FlashInfer's _metadata stamp"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{done}/results.json"],
     "--autotune_cache={done}/results.json: is a JSON file without FlashInfer's _metadata stamp"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{bytes}"],
     "--autotune_cache={bytes}: is not JSON"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{empty}"],
     "--autotune_cache={empty}: is a directory"),
    ("builtin", ["--nks", "64,64,a", "--workdir", "{w}", "--dry_run", "--autotune_cache", "{afile}"],
     "--autotune_cache={afile}: is not JSON"),
    # ... and a workdir is the tool's by its own marker, not by what its subfolders hold.
    ("model", M + ["--dry_run", "--workdir", "{runs}"], "--workdir={runs}: holds other files (cases.json, "
     "combined_results.csv, old_run, ...) and is not a workdir of this tool"),
    ("model", M + ["--dry_run", "--workdir", "{ln:run.lock}"],
     "--workdir={ln:run.lock}: its run.lock is a symbolic link"),
    # Runs whose sub-workdirs would be one: refused before any planning.
    ("model", M + M + ["--dry_run", "--workdir", "{w}"], "MODEL=llama-3.1-8b: names one config twice"),
    ("model", M + ["--tp", "1", "1", "--dry_run", "--workdir", "{w}"], "--tp=1 1: gives the setting TP=1 EP=1 twice"),
    # --resume of another model or layout, or of a results.json that is not an object where it must be.
    ("model", ["qwen3-8b", "--dry_run", "--workdir", "{llama}", "--resume"],
     "--resume={llama}: its results.json is of llama-3.1-8b TP=1 EP=1 and this run plans qwen3-8b TP=1 EP=1"),
    ("model", M + ["--workdir", "{res:list_marked}", "--resume", "--flashinfer_repo", "{repo}"],
     "--resume={res:list_marked}: its results.json is not one of this tool's (its top level is not a JSON object)"),
    ("model", M + ["--workdir", "{res:settings_str}", "--resume", "--flashinfer_repo", "{repo}"],
     '--resume={res:settings_str}: its results.json is not one of this tool\'s (its "settings" is not a JSON object)'),
    # An EP the model's experts cannot fill; a routing the plan cannot name.
    ("model", ["qwen3-30b-a3b", "--ep", "1000000000", "--dry_run", "--workdir", "{w}"],
     "--ep=1000000000: exceeds the 128 routed experts of qwen3-30b-a3b"),
    ("builtin", ["--plan", "{plan:routing}", "--workdir", "{w}", "--dry_run"],
     '--plan={plan:routing}: moe[0].routing.method="softmax_topk_v9": must be one of renormalize'),
    # What gave a traceback: Slurm flags without Slurm, quantization_config values of the wrong type,
    # duplicate GEMM names, a config nested too deep.
    ("model", M + ["--launcher", "slurm", "--workdir", "{w}", "--flashinfer_repo", "{repo}"], "--launcher=slurm:"),
    ("model", ["{cfg:block_int}", "--print_only"], "config.json: quantization_config.weight_block_size=128:"),
    ("model", ["{cfg:ct_list}", "--print_only"], 'config.json: quantization_config.config_groups.group_0=["weights"]:'),
    ("builtin", ["--plan", "{plan:dupnames}", "--workdir", "{w}", "--dry_run"],
     '--plan={plan:dupnames}: gemms[1].name="a-b": and \'a/b\' are both \'a-b\' in a case id'),
    ("builtin", ["--nks", "6144,4096,a/b", "4096,4096,a-b", "--workdir", "{w}", "--dry_run"],
     "--nks=a-b: names 'a/b' and 'a-b' are both 'a-b' in a case id"),
    ("model", ["{cfg:deep}", "--print_only"], "MODEL={cfg:deep}/config.json: config.json nests too deep"),
    # The smaller ones: an empty path is never the default, --gpus is a list, W W, a poisoned
    # results.json, a message quoting another tool on one line, --revision on a bundled name.
    ("model", M + ["--dry_run", "--workdir", "{w}", "--cache", ""], "--cache='': is empty"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--gpus", "0,,1"], "--gpus=0,,1: give CUDA device numbers"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--gpus", "0,0"], "--gpus=0,0: names a GPU twice"),
    ("report", ["{done}", "{done}"], "WORKDIR={done}: is given twice"),
    ("report", ["{res:neg}"], "WORKDIR={res:neg}: results.json has a malformed row (rows[0].median_us=-5.0:"),
    ("report", ["{res:nan}"], "WORKDIR={res:nan}: results.json has a malformed row (rows[0].median_us=NaN:"),
    ("model", ["{cfg:clip}", "--print_only"], "model_type=clip: transformers could not build it on meta"),
    ("model", M + ["--revision", "main", "--print_only"], "--revision=main: applies to a Hub ID only; "
     "MODEL=llama-3.1-8b is a bundled config"),
    # Hostile inputs of the same kinds: the result cache, locks, links, sweeps and resume.
    ("model", M + ["--dry_run", "--workdir", "{w}", "--cache", "{afile}"], "--cache={afile}: is a file, not a folder"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", ""], "--autotune_cache='': is empty"),
    ("model", M + ["--dry_run", "--workdir", ""], "--workdir='': is empty"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{ln:fi_cache}"],
     "--autotune_cache={ln:fi_cache}: is a symbolic link"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{w}/results.json"],
     "--autotune_cache={w}/results.json: is the name of a file the run writes in its --workdir"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{afile}/tuned.json"],
     "--autotune_cache={afile}/tuned.json: cannot be created: {afile} is not a folder"),
    ("model", M + ["--dry_run", "--workdir", "{w}", "--autotune_cache", "{empty_file}"],
     "--autotune_cache={empty_file}: is an empty file"),
    ("model", M + ["--dry_run", "--workdir", "{ln:driver.log}"],
     "--workdir={ln:driver.log}: its driver.log is a symbolic link"),
    ("model", M + ["--dry_run", "--workdir", "{ln:cases}"], "--workdir={ln:cases}: its cases is a symbolic link"),
    ("model", M + ["--dry_run", "--workdir", "{ln:testlist.txt}"],
     "--workdir={ln:testlist.txt}: its testlist.txt is a"),
    ("model", M + ["--dry_run", "--workdir", "{ln:results.json}", "--resume"],
     "--workdir={ln:results.json}: its results.json is a symbolic link"),
    ("model", M + ["--dry_run", "--workdir", "{hard:driver.log}"],
     "--workdir={hard:driver.log}: its driver.log is a hard link"),
    ("model", M + ["--dry_run", "--workdir", "{hard:run.lock}"],
     "--workdir={hard:run.lock}: its run.lock is a hard link"),
    ("model", M + ["--dry_run", "--workdir", "{hard:cases/worker.log}"],
     "--workdir={hard:cases/worker.log}: its cases/worker.log is a hard link"),
    ("model", M + ["--dry_run", "--workdir", "{fifo:run.lock}"],
     "--workdir={fifo:run.lock}: its run.lock is not a regular"),
    ("model", M + ["--dry_run", "--workdir", "{fifo:driver.log}"],
     "--workdir={fifo:driver.log}: its driver.log is not a"),
    ("model", M + ["--dry_run", "--workdir", "{marker:link}"], "--workdir={marker:link}: holds other files"),
    ("model", M + ["--dry_run", "--workdir", "{marker:forged}"], "--workdir={marker:forged}: holds other files"),
    ("model", M + ["--dry_run", "--workdir", "{legacy_sweep}", "--tp", "1", "2", "--resume"],
     "--workdir={legacy_sweep}: holds other files"),
    ("model", ["{cfg:ok}", "{cfg:ok}/config.json", "--dry_run", "--workdir", "{w}"],
     "MODEL={cfg:ok} and {cfg:ok}/config.json: names one config twice"),
    ("model", M + ["--ep", "1", "1", "--dry_run", "--workdir", "{w}"], "--ep=1 1: gives the setting TP=1 EP=1 twice"),
    ("model", M + ["--tp", "1", "2", "1", "--dry_run", "--workdir", "{w}"], "--tp=1 2 1: gives the setting TP=1 EP=1"),
    ("model", M + ["--tp", "2", "--dry_run", "--workdir", "{llama}", "--resume"],
     "--resume={llama}: its results.json is of llama-3.1-8b TP=1 EP=1 and this run plans llama-3.1-8b TP=2 EP=1 "
     "(tp was 1 (now 2)"),
    ("model", ["{cfg:llama_deeper}", "--dry_run", "--workdir", "{llama}", "--resume"],
     "--resume={llama}: its results.json is of llama-3.1-8b TP=1 EP=1 and this run plans {cfg:llama_deeper} TP=1 "
     "EP=1 (num_hidden_layers was 32 (now 40)"),
    ("model", ["qwen3-30b-a3b", "--ep", "256", "--tp", "2", "--dry_run", "--workdir", "{w}"],
     "--ep=256: exceeds the 128 routed experts"),
    ("builtin", ["--plan", "{plan:bigep}", "--workdir", "{w}", "--dry_run"],
     "--plan={plan:bigep}: ep=16: exceeds global_experts=8 of moe[0]"),
    ("builtin", ["--plan", "{plan:dupgemm}", "--workdir", "{w}", "--dry_run"],
     '--plan={plan:dupgemm}: gemms[1].name="a": is given twice'),
    ("model", ["{cfg:ok}", "--revision", "main", "--print_only"], "--revision=main: applies to a Hub ID only; "
     "MODEL={cfg:ok} is a local path"),
    ("report", ["{res:deep}"], "WORKDIR={res:deep}: results.json is not valid JSON"),
    ("report", ["{res:null_ok}"], 'WORKDIR={res:null_ok}: results.json has a malformed row (rows[0].median_us=null: '
     'an "ok" row is a measurement'),
    ("report", ["{done}", "{done}/."], "WORKDIR={done} and {done}/.: is given twice"),
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
_LLAMA_EDITS.update({
    "block_int": {"quantization_config": {"quant_method": "fp8", "weight_block_size": 128}},
    "ct_list": {"quantization_config": {"quant_method": "compressed-tensors",
                                        "config_groups": {"group_0": ["weights"]}}},
    "llama_deeper": {"num_hidden_layers": 40},
})


def _tree(root) -> dict[str, bytes]:
    """Every path under `root` and what it is: a file's bytes, a link's target, a folder, a FIFO
    (never opened: it would block)."""
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        out[dirpath] = b"<dir>"
        for f in files + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, f)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[path] = b"<link> " + os.readlink(path).encode()
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as fh:
                    out[path] = fh.read() + f"<{st.st_nlink} names>".encode()
            else:
                out[path] = b"<special>"
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
    dirs.update(_hostile_workdirs(t))
    return dirs


def _marked(folder) -> str:
    """A workdir of this tool, as the tool makes one."""
    workdir.make_workdir(str(folder))
    return str(folder)


def _hostile_workdirs(t) -> dict[str, str]:
    """Workdirs and files that try to make a run write where it must not: links and hard links
    on the names a run writes, forged or linked markers, the parent of earlier runs, a sweep's
    folder from before the marker, results.json files that are no results, an autotune cache
    behind a link."""
    out = {"{bytes}": str(t / "bytes.bin"), "{afile}": str(t / "afile"), "{empty_file}": str(t / "empty.json")}
    (t / "bytes.bin").write_bytes(bytes(range(256)) * 4)
    (t / "empty.json").write_bytes(b"")
    victim = t / "victim.txt"
    victim.write_text("the user's own file")
    (t / "victim_dir").mkdir()
    for name in ("run.lock", "driver.log", "cases", "testlist.txt", "results.json"):
        folder = _marked(t / f"ln_{name}")
        os.symlink(t / "victim_dir" if name == "cases" else victim, os.path.join(folder, name))
        out[f"{{ln:{name}}}"] = folder
    for name in ("driver.log", "run.lock", "cases/worker.log"):
        folder = _marked(t / f"hard_{name.replace('/', '_')}")
        os.makedirs(os.path.join(folder, "cases"), exist_ok=True)
        os.link(victim, os.path.join(folder, name))
        out[f"{{hard:{name}}}"] = folder
    for name in ("run.lock", "driver.log"):
        folder = _marked(t / f"fifo_{name}")
        os.mkfifo(os.path.join(folder, name))
        out[f"{{fifo:{name}}}"] = folder
    marked = _marked(t / "marked")
    for kind in ("link", "forged"):
        folder = t / f"marker_{kind}"
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
        if kind == "link":
            os.symlink(os.path.join(marked, workdir.WORKDIR_MARKER), folder / workdir.WORKDIR_MARKER)
        else:
            (folder / workdir.WORKDIR_MARKER).write_text("benchmark-model-kernels workdir\n")
        out[f"{{marker:{kind}}}"] = str(folder)
    runs = t / "runs"  # the parent of an earlier run, holding the user's own files of the run's names
    (runs / "old_run").mkdir(parents=True)
    for name, text in (("testlist.txt", "my list"), ("combined_results.csv", "a,b"), ("cases.json", "{}")):
        (runs / name).write_text(text)
    _marked(runs / "old_run")
    out["{runs}"] = str(runs)
    legacy = t / "legacy_sweep" / "llama-3.1-8b_tp1_ep1"  # a sweep's folder from before the marker
    legacy.mkdir(parents=True)
    with open(os.path.join(ROOT, "tests", "fixtures", "results", "llama8b_like_tp1.json")) as f:
        text = f.read()
    (legacy / "results.json").write_text(text)
    out["{legacy_sweep}"] = str(t / "legacy_sweep")
    llama = _marked(t / "llama")
    with open(os.path.join(llama, "results.json"), "w") as f:
        f.write(text)
    out["{llama}"] = llama
    for name, payload in (("list_marked", []), ("settings_str", {**json.loads(text), "settings": "fast"})):
        folder = _marked(t / f"res_{name}")
        with open(os.path.join(folder, "results.json"), "w") as f:
            json.dump(payload, f)
        out[f"{{res:{name}}}"] = folder
    os.symlink(os.path.join(ROOT, "tests", "fixtures", "autotune", "flashinfer-0.6.17_h200.json"),
               t / "fi_cache_link.json")
    out["{ln:fi_cache}"] = str(t / "fi_cache_link.json")
    return out


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
    out["{cfg:clip}"] = _write_config(t / "cfg_clip", {"model_type": "clip"})
    deep = '{"model_type": "llama", "x": ' + "[" * 200000 + "]" * 200000 + "}"
    out["{cfg:deep}"] = _write_config(t / "cfg_deep", deep)
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
    moe = {"name": "experts", "modules": [], "hidden": 64, "intermediate": 64, "experts": 8, "global_experts": 8,
           "top_k": 2, "activation": "Swiglu", "routing": {"method": "renormalize"}, "layers": 1}
    variants = {"neg": {"gemms": [dict(gemm, n=-5)]}, "frac": {"gemms": [dict(gemm, k=4.5)]},
                "newer": {"schema_version": 99},
                "routing": {"moe": [dict(moe, routing={"method": "softmax_topk_v9"})]},
                "dupnames": {"gemms": [dict(gemm, name="a/b"), dict(gemm, name="a-b")]},
                "dupgemm": {"gemms": [gemm, gemm]},
                "bigep": {"ep": 16, "moe": [dict(moe, experts=1)]}}
    out = {}
    for name, change in variants.items():
        (t / f"plan_{name}.json").write_text(json.dumps({**plan, **change}))
        out[f"{{plan:{name}}}"] = str(t / f"plan_{name}.json")
    (t / "plan_list.json").write_text("[]")
    out["{plan:list}"] = str(t / "plan_list.json")
    row_edits = {"badrow": {"m": "eight"}, "neg": {"median_us": -5.0, "status": "ok"},
                 "nan": {"median_us": float("nan"), "status": "ok"}, "null_ok": {"median_us": None, "status": "ok"}}
    for name, text in (("list", "[]"), ("deep", "[" * 200000 + "]" * 200000), *((n, None) for n in row_edits)):
        folder = t / f"res_{name}"
        folder.mkdir()
        if text is None:
            payload = json.loads((done / "results.json").read_text())
            payload["rows"][0].update(row_edits[name])
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
    workdir.make_workdir(str(wd))  # the sweep's folder, as the interrupted sweep made it
    first = wd / "llama-3.1-8b_tp1_ep1"
    first.mkdir(parents=True)
    with open(os.path.join(ROOT, "tests", "fixtures", "results", "llama8b_like_tp1.json")) as f:
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


#: benchmark_model.py's main as the script runs it, with a readiness handshake: it writes "ready"
#: on the file descriptor argv[1] once the planning's stop handlers are installed, and its planning
#: waits at its end for the test's signal. So the signal always lands inside the planning, however
#: loaded the machine (no sleep decides where it lands); the planning itself is real.
PLANNING_WITH_HANDSHAKE = textwrap.dedent(f"""
    import contextlib, os, signal, sys
    sys.path[:0] = [{os.path.join(ROOT, "scripts")!r}]
    from benchmark_model_kernels import cli_model
    ready = int(sys.argv[1])
    handled, plan_layout = cli_model.stop_signals_exit, cli_model.planner.plan_layout

    @contextlib.contextmanager
    def announced(message):
        with handled(message):
            os.write(ready, b"ready\\n")
            yield

    def planned_then_waiting(*args, **kwargs):
        plan_layout(*args, **kwargs)
        while True:
            signal.pause()

    cli_model.stop_signals_exit, cli_model.planner.plan_layout = announced, planned_then_waiting
    sys.argv = ["benchmark_model.py", *sys.argv[2:]]
    sys.exit(cli_model.main())
""")


def _default_stop_signals():
    """In the child: the stop signals as a terminal delivers them (a test runner started in the
    background, or under nohup, passes SIGINT or SIGHUP ignored)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def _wait_ready(fd: int, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Block until the child writes its ready line on `fd` (it has a minute's worth of start-up
    under load); fail, not hang, if it dies first."""
    import select

    ready, _, _ = select.select([fd], [], [], timeout)
    line = os.read(fd, 64) if ready else b""
    if line != b"ready\n":
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no ready line from the child ({line!r}); rc={proc.returncode} {err[-2000:]}")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_while_planning_is_one_line_and_128_plus_signal(signum, tmp_path):
    """Planning writes nothing: a stop signal ends it at once, never with a traceback, and never
    lost in one of the meta build's `__del__`s (Python swallows a KeyboardInterrupt raised there)."""
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no kept plan: it really plans
    read_end, write_end = os.pipe()
    try:
        r = subprocess.Popen([sys.executable, "-c", PLANNING_WITH_HANDSHAKE, str(write_end), "deepseek-v3",
                              "--tp", "8", "--print_only", "--plan_json", str(work / "plan.json")],
                             cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             pass_fds=(write_end,), preexec_fn=_default_stop_signals)
        os.close(write_end)
        _wait_ready(read_end, r)
        r.send_signal(signum)
        out, err = r.communicate(timeout=120)
    finally:
        os.close(read_end)
    assert r.returncode == 128 + signum, (out, err)
    assert err == f"interrupted by {signal.Signals(signum).name} while planning deepseek-v3; nothing was written\n"
    assert out == "" and os.listdir(work) == []


#: A stand-in for the package that benchmark_model.py imports after its start-up guard: it says
#: "ready" on $BMK_READY_FD and blocks, as a slow import of torch or transformers would.
SLOW_PACKAGE_IMPORT = '''import os, signal
os.write(int(os.environ["BMK_READY_FD"]), b"ready\\n")
while True:
    signal.pause()
'''


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_while_the_script_starts_is_one_line_and_128_plus_signal(signum, tmp_path):
    """Ctrl-C (or a kill) while the package is still loading: one line, no traceback. The real
    script and its real start-up guard (run/interrupts.py), with the package import made slow."""
    import shutil

    scripts = tmp_path / "scripts"
    package = scripts / "benchmark_model_kernels"
    (package / "run").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "scripts", "benchmark_model.py"), scripts)
    shutil.copy(os.path.join(ROOT, "scripts", "benchmark_model_kernels", "run", "interrupts.py"), package / "run")
    (package / "__init__.py").write_text("")
    (package / "run" / "__init__.py").write_text("")
    (package / "cli_model.py").write_text(SLOW_PACKAGE_IMPORT)
    read_end, write_end = os.pipe()
    try:
        r = subprocess.Popen([sys.executable, str(scripts / "benchmark_model.py"), "llama-3.1-8b", "--print_only"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "BMK_READY_FD": str(write_end), "PYTHONDONTWRITEBYTECODE": "1"},
                             pass_fds=(write_end,), preexec_fn=_default_stop_signals)
        os.close(write_end)
        _wait_ready(read_end, r)
        r.send_signal(signum)
        out, err = r.communicate(timeout=120)
    finally:
        os.close(read_end)
    assert r.returncode == 128 + signum, (out, err)
    assert err == f"interrupted by {signal.Signals(signum).name} while starting; nothing was written\n"
    assert out == ""


def test_a_keyboard_interrupt_that_reaches_a_cli_is_one_line_and_130(capsys, monkeypatch):
    """Past the start-up guard and before a run's own handling (parsing, checking the flags):
    Ctrl-C is one line and 130 from every CLI's main, never a traceback."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_model, "reject_derived_flags", interrupted)
    assert cli_model.main(["llama-3.1-8b", "--print_only"]) == 130
    _, err = capsys.readouterr()
    assert err == "interrupted by SIGINT; files written before it are kept\n"


def test_a_closed_stdout_is_one_line_and_exit_2():
    """`check_env.py --json | head`: the reader goes away before the output ends (more output than
    a pipe holds, so the writer surely meets the closed pipe)."""
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{os.path.join(ROOT, "scripts")!r}]
        from benchmark_model_kernels.core.errors import cli_main
        def run():
            for i in range(200000):
                print("line", i)
            return 0
        sys.exit(cli_main(run))
    """)
    r = subprocess.run(["/bin/bash", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} | head -n 1; "
                        'echo "rc=${PIPESTATUS[0]}" >&2'], capture_output=True, text=True, timeout=120)
    assert r.stdout == "line 0\n"
    assert r.stderr == ("error: stdout=(closed): its reader went away before the output ended (e.g. | head); "
                        "the rest was not printed\nrc=2\n"), r.stderr


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


def test_a_workdir_that_turns_read_only_mid_run_is_one_line_and_leaves_no_process(tmp_path, capsys, monkeypatch):
    """The driver.log append meets a read-only file system (EROFS) after the first case: one line
    that says how to go on, exit 2, the rows so far kept, the worker gone."""
    from benchmark_model_kernels.run import case_execution
    from helpers_processes import wait_gone
    from helpers_runner import FAKE_REPO, GPU

    monkeypatch.setattr(flags, "detect_gpu", lambda: GPU)
    monkeypatch.setattr(cli_builtin.environment, "collect", lambda repo: {"fake": True})
    w = tmp_path / "w"
    appends = []

    def read_only_after_one(path, *args, **kwargs):
        if str(path).endswith("driver.log"):
            appends.append(path)
            if len(appends) > 1:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(case_execution, "open", read_only_after_one, raising=False)
    rc = cli_builtin.main(["--nks", "64,64,a", "128,64,b", "--ms", "8", "--dtypes", "bf16", "--backends", "cudnn",
                           "--flashinfer_repo", FAKE_REPO, "--workdir", str(w), "--num_iters", "3", "--no_cache"])
    _, err = capsys.readouterr()
    line = [ln for ln in err.splitlines() if ln.startswith(("error", "Traceback"))]
    assert rc == 2 and line == [
        f"error: --workdir={w}: cannot be written any more (Read-only file system: {w / 'driver.log'}); make it "
        "writable, then rerun with --resume (results.json holds every row written so far)"], err
    assert [r["case_id"] for r in json.load(open(w / "results.json"))["rows"]] == ["gemm.a.m8.bf16.cudnn"]
    worker = int(re.search(r"worker pid (\d+) started", (w / "cases" / "worker.log").read_text())[1])
    assert wait_gone([worker], 10) == []
