"""benchmarks/triton_moe_roofline.py on a CPU: its flags, the PASS/MISS/exit-code rule on given
(time, floor) numbers, the floor, the shapes it reads from the plan, and a whole run with the GPU
timing faked (no kernel runs here; the real numbers come from a GPU machine)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.kernels.timing import Measurement, UnsupportedCase
from benchmark_model_kernels.kernels.triton_moe import problem as pb
from benchmark_model_kernels.kernels.triton_tuning import store_config
from support import ROOT

SCRIPT = os.path.join(ROOT, "benchmarks", "triton_moe_roofline.py")


def _load():
    spec = importlib.util.spec_from_file_location("triton_moe_roofline_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


R = _load()
H200 = R.Device("NVIDIA H200", (9, 0), 0, "3.9.0", "2.11.0")


@pytest.fixture(scope="module")
def plan():
    from benchmark_model_kernels.plan.planner import plan_model

    return plan_model(R.MODEL, R.TP, R.EP)


# ---------------------------------------------------------------------------- flags


def test_help_works_without_importing_torch_or_a_gpu_stack():
    code = ("import runpy, sys\n"
            f"sys.argv = [{SCRIPT!r}, '--help']\n"
            "try:\n"
            f"    runpy.run_path({SCRIPT!r}, run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\n"
            "print('LOADED', sorted(m for m in ('torch', 'triton', 'flashinfer', 'transformers') "
            "if m in sys.modules))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout
    for flag in ("--ms", "--schemes", "--target", "--target_min_m", "--target_schemes",
                 "--autotune_cache", "--num_iters", "--dry_run_iters", "--allow_cuda_events",
                 "--hbm_tb_s", "--out"):
        assert flag in done.stdout, flag
    assert "needs a CUDA GPU" in done.stdout and "PYTHONPATH=$PWD/scripts" in done.stdout


def test_every_flag_help_gives_an_example():
    for action in R.build_parser()._actions:
        if action.option_strings and action.dest not in ("help", "allow_cuda_events"):
            assert "e.g. " + action.option_strings[0] in (action.help or ""), action.dest


@pytest.mark.parametrize("argv, words", [
    (["--ms", "0"], "--ms=0"),
    (["--ms", "x"], "--ms=x"),
    (["--ms"], "--ms=(missing)"),
    (["--schemes", "fp9"], "--schemes=fp9: choose from bf16"),
    (["--target_schemes", "int4"], "--target_schemes=int4"),
    (["--target", "-1"], "--target=-1.0"),
    (["--target", "nan"], "--target=nan"),
    (["--target_min_m", "-1"], "--target_min_m=-1"),
    (["--num_iters", "0"], "--num_iters=0"),
    (["--dry_run_iters", "-1"], "--dry_run_iters=-1"),
    (["--hbm_tb_s", "0"], "--hbm_tb_s=0.0"),
    (["--out", "nowhere/at/all/r.json"], "does not exist"),
    (["--out", "r.txt"], "must be a .json file path"),
    (["--bogus"], "--bogus=(given): unrecognized"),
    (["--target_min"], "did you mean --target_min_m"),
])
def test_bad_flags_exit_2_with_one_line(argv, words, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(R, "probe_device", lambda: pytest.fail("probed the GPU before the flags"))
    assert R.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err


def test_bad_flag_is_exit_status_2_as_a_program():
    done = subprocess.run([sys.executable, SCRIPT, "--ms", "-3"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: --ms=-3: every M must be a positive number of tokens, e.g. --ms 1 8 64"]


def test_without_a_gpu_it_exits_2_saying_it_needs_one(capsys, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert R.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("error: ") and "needs a CUDA GPU" in err


def test_an_unlisted_gpu_needs_its_bandwidth():
    unknown = replace(H200, name="NVIDIA Mystery 9000")
    with pytest.raises(R.UsageError, match="--hbm_tb_s 4.8"):
        R.hbm_peak(unknown, None)
    assert R.hbm_peak(unknown, 3.0) == (3.0, "--hbm_tb_s")
    tb_s, source = R.hbm_peak(H200, None)
    assert tb_s == 4.8 and source.startswith("H200 SXM")


# ---------------------------------------------------------------------------- PASS / MISS


T = R.Target()


@pytest.mark.parametrize("scheme, m, time_us, floor_us, ratio, verdict", [
    ("bf16", 8, 120.0, 100.0, 1.2, "PASS"),
    ("bf16", 8, 135.0, 100.0, 1.35, "PASS"),      # the bound itself passes
    ("bf16", 64, 135.01, 100.0, 1.3501, "MISS"),
    ("bf16", 512, 300.0, 100.0, 3.0, "MISS"),
    ("bf16", 1, 300.0, 100.0, 3.0, "-"),          # M < --target_min_m: reported only
    ("fp8_per_tensor", 64, 300.0, 100.0, 3.0, "-"),  # not a --target_schemes scheme
    ("bf16", 8, None, 100.0, None, "MISS"),       # no time: a targeted row cannot pass
    ("bf16", 8, 120.0, None, None, "MISS"),
    ("bf16", 8, 120.0, 0.0, None, "MISS"),
    ("bf16", 8, float("nan"), 100.0, None, "MISS"),
    ("bf16", 1, None, 100.0, None, "-"),
])
def test_judge(scheme, m, time_us, floor_us, ratio, verdict):
    got_ratio, got = R.judge(scheme, m, time_us, floor_us, T)
    assert got == verdict
    assert got_ratio == (pytest.approx(ratio) if ratio is not None else None)


def test_the_target_flags_move_the_bound():
    loose = R.Target(ratio=2.0, min_m=1, schemes=("bf16", "fp8_per_token"))
    assert R.judge("bf16", 1, 190.0, 100.0, loose)[1] == "PASS"
    assert R.judge("fp8_per_token", 8, 210.0, 100.0, loose)[1] == "MISS"
    assert R.judge("fp8_block128", 8, 210.0, 100.0, loose)[1] == "-"


@pytest.mark.parametrize("verdicts, code", [
    ([], 0), (["-", "-"], 0), (["-", "PASS", "PASS"], 0), (["PASS", "MISS"], 1), (["MISS"], 1)])
def test_exit_code(verdicts, code):
    assert R.exit_code(verdicts) == code


# ---------------------------------------------------------------------------- floor


def _problem(scheme="bf16", m=8, local=128):
    return pb.MoeProblem(m, 2048, 768, local, 128, 8, "silu_and_mul", True, scheme)


@pytest.mark.parametrize("scheme", pb.SCHEMES)
@pytest.mark.parametrize("m", [1, 8, 512])
def test_floor_is_problem_py_rule_at_the_touched_count(scheme, m):
    p = _problem(scheme, m)
    assert R.floor_bytes(p, pb.expected_touched_experts(p)) == pytest.approx(pb.hbm_floor_bytes(p))


def test_floor_of_qwen3_bf16_by_hand():
    # 50 experts x (1536 x 2048 + 2048 x 768) x 2 bytes + 8 x 2048 x 2 (in) + 8 x 2048 x 2 (out)
    assert R.floor_bytes(_problem(), 50) == 50 * (1536 * 2048 + 2048 * 768) * 2 + 2 * 8 * 2048 * 2


def test_touched_experts_count_the_seeded_routing():
    pytest.importorskip("torch")
    assert R.touched_experts(_problem(m=1)) == 8  # one token: top_k distinct experts
    ids, _ = pb.uniform_routing(8, 128, 8, R.ROUTING_SEED)
    assert R.touched_experts(_problem(m=8)) == len(set(ids.flatten().tolist()))
    assert R.touched_experts(_problem(m=512)) == 128
    # EP: only ids below local_experts are this rank's
    assert R.touched_experts(_problem(m=8, local=16)) == len({e for e in ids.flatten().tolist() if e < 16})


# ---------------------------------------------------------------------------- shapes from the plan


def test_shapes_come_from_the_plan(plan):
    (entry,) = plan.moe
    assert plan.model.source == "bundled"
    assert (entry.hidden, entry.intermediate, entry.experts, entry.global_experts, entry.top_k,
            entry.activation, entry.gated) == (2048, 768, 128, 128, 8, "Swiglu", True)
    cases = R.moe_cases(plan, [1, 8, 64, 512], ["bf16"], (9, 0))
    assert [(s, c.m, c.routine, c.backend, c.variant, c.with_quant) for s, c in cases] == [
        ("bf16", m, "triton.fused_moe", "triton", "tuned", False) for m in (1, 8, 64, 512)]
    from benchmark_model_kernels.kernels.triton_ops import moe_problem

    for _, case in cases:
        p = moe_problem(case)
        assert (p.num_tokens, p.hidden, p.intermediate, p.local_experts, p.global_experts, p.top_k,
                p.activation, p.gated, p.scheme) == (case.m, 2048, 768, 128, 128, 8, "silu_and_mul",
                                                     True, "bf16")


def test_only_the_tuned_twin_of_each_scheme_is_timed(plan):
    from benchmark_model_kernels.cases.build import build_cases

    # with --search_moe_tiles the plan has both rows per scheme and M: vLLM's tiles (unlabelled)
    # and the searched twin
    variants = sorted(c.variant for c in build_cases(plan, [8], ["bf16", "fp8"], ["triton"], (9, 0),
                                                     search_moe_tiles=True)
                      if c.routine == "triton.fused_moe" and not c.with_quant)
    assert variants == ["", "block128", "block128-tuned", "per_tensor", "per_tensor-tuned",
                        "per_token", "per_token-tuned", "tuned"]
    picked = R.moe_cases(plan, [8], ["bf16", "fp8_per_tensor", "fp8_per_token", "fp8_block128"],
                         (9, 0))
    assert [(s, c.variant) for s, c in picked] == [
        ("bf16", "tuned"), ("fp8_per_tensor", "per_tensor-tuned"),
        ("fp8_per_token", "per_token-tuned"), ("fp8_block128", "block128-tuned")]


def test_scheme_order_and_fp8_cases(plan):
    want = ["fp8_block128", "bf16", "fp8_per_token", "fp8_per_tensor"]
    cases = R.moe_cases(plan, [64, 8], want, (9, 0))
    assert [(s, c.m) for s, c in cases] == [(s, m) for s in want for m in (64, 8)]
    assert all(not c.skip_reason for _, c in cases)
    # an SM 8.0 GPU has no FP8 tensor cores: those rows arrive unsupported, BF16 stays
    on_a100 = {s: c.skip_reason for s, c in R.moe_cases(plan, [8], want, (8, 0))}
    assert on_a100["bf16"] == "" and all(on_a100[s] for s in want if s != "bf16")


# ---------------------------------------------------------------------------- a whole run, faked


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path, plan):
    """The script's GPU parts replaced: an H200 that 'times' each M as the test says."""
    from benchmark_model_kernels.kernels import triton_ops
    from benchmark_model_kernels.plan import planner

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(R, "probe_device", lambda: H200)
    broken: list = []
    monkeypatch.setattr(R, "synchronize_and_free", lambda: broken.pop(0) if broken else "")
    monkeypatch.setattr(planner, "plan_model", lambda model, tp, ep: plan if (model, tp, ep) == (
        R.MODEL, R.TP, R.EP) else pytest.fail(f"planned {model} {tp} {ep}"))
    ratios: dict = {}
    cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
           "num_warps": 4, "num_stages": 3}

    def key_of(case, settings):
        from benchmark_model_kernels.kernels.triton_moe import tuning

        p = triton_ops.moe_problem(case)
        return p, triton_ops.cache_dir(settings), tuning.config_key(p, H200.name, H200.triton_version)

    def timer(case, settings):
        what = ratios[case.m]
        if isinstance(what, BaseException):
            raise what
        p, tiles, key = key_of(case, settings)
        store_config(tiles, key, cfg)  # what the backend's search leaves behind
        ratio, clock = what if isinstance(what, tuple) else (what, "cupti")
        floor_us = R.floor_bytes(p, R.touched_experts(p)) / 4.8e12 * 1e6
        note = "tiles searched over 3 configs: 16,64,128,1,4,3"
        if clock != "cupti":
            note += "; CUPTI is not installed. Falling back to CUDA events for benchmarking."
        return Measurement(ratio * floor_us, 0.1, clock, note)

    monkeypatch.setattr(R, "time_case", timer)

    def precache(m):
        (_, case), = R.moe_cases(plan, [m], ["bf16"], (9, 0))
        _, tiles, key = key_of(case, RunSettings(autotune_cache=str(tmp_path / "autotune_cache.json")))
        store_config(tiles, key, dict(cfg, BLOCK_SIZE_N=128))

    return ratios, precache, broken


def test_a_passing_run_exits_0_and_writes_its_numbers(fake_gpu, capsys, tmp_path):
    pytest.importorskip("torch")
    ratios, precache, _ = fake_gpu
    ratios.update({1: 3.0, 8: 1.2, 64: 1.3, 512: 1.1})
    precache(8)
    assert R.main(["--out", "r.json"]) == 0
    out = capsys.readouterr().out
    assert "result: PASS, all 3 targeted rows" in out
    assert "hidden 2048, intermediate 768 per rank, 128 local of 128 experts, top_k 8, Swiglu" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["finished"] and doc["exit_code"] == 0 and doc["hbm_tb_per_sec"] == 4.8
    rows = {r["m"]: r for r in doc["rows"]}
    assert [r["verdict"] for r in doc["rows"]] == ["-", "PASS", "PASS", "PASS"]
    assert rows[1]["ratio"] == pytest.approx(3.0) and rows[1]["touched_experts"] == 8
    assert rows[8]["tiles_from"] == "cache" and rows[8]["tiles"]["BLOCK_SIZE_N"] == 128
    assert rows[64]["tiles_from"] == "search" and rows[64]["tiles"]["BLOCK_SIZE_N"] == 64
    assert rows[512]["floor_bytes"] == pytest.approx(rows[512]["expected_floor_bytes"], rel=0.01)
    assert all(r["timer"] == "cupti" and r["status"] == "ok" for r in doc["rows"])
    assert "16,128,128,1,4,3" in out and "cache" in out and "search" in out


def test_a_failed_m_is_reported_and_the_rest_still_run(fake_gpu, capsys, tmp_path):
    pytest.importorskip("torch")
    ratios, _, _ = fake_gpu
    ratios.update({1: RuntimeError("boom at M=1"), 8: 1.2, 64: RuntimeError("CUDA error: out of memory"),
                   512: 1.5})
    assert R.main(["--out", "r.json"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" in captured.err and "boom at M=1" in captured.err
    assert "failed: RuntimeError: CUDA error: out of memory" in captured.out
    assert "result: MISS, 2 of 3 targeted rows" in captured.out
    assert "M=512 ratio 1.500" in captured.out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(r["m"], r["status"], r["verdict"]) for r in doc["rows"]] == [
        (1, "failed", "-"), (8, "ok", "PASS"), (64, "failed", "MISS"), (512, "ok", "MISS")]
    assert doc["exit_code"] == 1 and doc["rows"][0]["tiles"] is None


def test_a_cuda_event_time_fails_its_row_unless_allowed(fake_gpu, capsys):
    pytest.importorskip("torch")
    ratios, _, _ = fake_gpu
    ratios.update({8: (1.1, "cuda_graph")})
    assert R.main(["--ms", "8"]) == 1
    assert "failed: timed with cuda_graph, not CUPTI" in capsys.readouterr().out
    assert R.main(["--ms", "8", "--allow_cuda_events"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_unsupported_and_untargeted_rows_do_not_fail_the_run(fake_gpu, capsys):
    pytest.importorskip("torch")
    ratios, _, _ = fake_gpu
    ratios.update({8: UnsupportedCase("the triton backend needs a CUDA GPU; none is visible")})
    assert R.main(["--ms", "8", "--schemes", "fp8_per_token"]) == 0
    out = capsys.readouterr().out
    assert "unsupported: the triton backend needs" in out and "no row is targeted" in out
    assert R.main(["--ms", "8", "--schemes", "fp8_per_token", "--target_schemes", "fp8_per_token"]) == 1


def test_a_broken_cuda_context_stops_the_run_and_says_what_to_rerun(fake_gpu, capsys, tmp_path):
    pytest.importorskip("torch")
    ratios, _, broken = fake_gpu
    ratios.update({1: 1.0, 8: 1.0, 64: 1.0, 512: 1.0})
    broken += ["", "AcceleratorError: CUDA error: an illegal memory access was encountered"]
    assert R.main(["--out", "r.json"]) == 1
    captured = capsys.readouterr()
    assert "the CUDA context broke after bf16 M=8" in captured.err and "e.g. --ms 64 512" in captured.err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(r["m"], r["status"], r["verdict"]) for r in doc["rows"]] == [
        (1, "ok", "-"), (8, "ok", "PASS"), (64, "failed", "MISS"), (512, "failed", "MISS")]
    assert doc["rows"][2]["reason"].startswith("not run: the CUDA context broke")
