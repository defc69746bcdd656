"""The run side of the attention cases: the driver's attention output classified, the row's
attention shape and check note, the roofline arithmetic, and the attention flags of both CLIs.

Real driver output (H200, 0.6.18) is in tests/fixtures/driver/v0.6.18/attention/ (its README):
the captured rows and skip lines are classified, the argv of the same shapes is compared with
the one run there, and the roofline is checked against the driver's own TFLOP/s and TB/s. Skip
lines the capture did not produce are quoted from FlashInfer's benchmarks/routines/attention.py
(release-v0.6.18) with the line each comes from."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from benchmark_model_kernels.cases.attention import AttentionSweep, attention_cases
from benchmark_model_kernels.core.plan_schema import AttentionEntry, ModelInfo, Plan
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run import roofline
from benchmark_model_kernels.run.outcome import WorkerReply, classify_driver_case, read_driver_csv, row_from_case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURED = os.path.join(ROOT, "tests", "fixtures", "driver", "v0.6.18", "attention")
LLAMA = AttentionEntry(name="attn", modules=("model.layers.*.self_attn.attn",), kind="mha", layers=32,
                       num_q_heads=32, num_kv_heads=8, head_dim_qk=128, head_dim_vo=128,
                       total_q_heads=32, total_kv_heads=8)
DEEPSEEK_V3 = AttentionEntry(name="mla", modules=("model.layers.*.self_attn",), kind="mla", layers=61,
                             num_q_heads=16, num_kv_heads=1, head_dim_qk=576, head_dim_vo=512,
                             total_q_heads=128, total_kv_heads=1, kv_lora_rank=512, qk_rope_head_dim=64)
INFO = ModelInfo(name="m", source="bundled", model_type="llama", architecture="LlamaForCausalLM")


def case_of(entry: AttentionEntry, backend: str, kv_dtype: str = "bf16", m: int = 8, kv: int = 1024,
            prefill: int = 0):
    sweep = AttentionSweep(kv_lens=() if prefill else (kv,), prefill_lens=(prefill,) if prefill else (),
                           kv_dtypes=(kv_dtype,))
    cases = attention_cases(Plan(model=INFO, tp=1, ep=1, attention=(entry,)), [m], sweep,
                            compute_capability=(9, 0))
    return next(c for c in cases if c.backend == backend)


# ---------------------------------------------------------------------------------------------
# The driver's words -> outcome

#: flashinfer_benchmark_utils.py:1094 (filter_backends_by_compute_capability), attention.py:736.
NOT_ON_SM90 = ("[WARNING] trtllm-gen for routine BatchDecodeWithPagedKVCacheWrapper is not supported "
               "on compute capability 9.0. Skipping.\n[ERROR] No backends to test. Exiting.\n")
#: attention.py:1383-1384 (paged prefill, the cuDNN version gate), then :1453.
CUDNN_VERSION = ("[INFO] cuDNN FP8 prefill requires cuDNN >= 9.17.1. Current version: 90800. Skipping "
                 "cudnn backend.\n[ERROR] No backends to test. Exiting.\n")
#: attention.py:3140 and :3194 (MLA, cutlass page sizes); :2292 and :2370 (ragged, no "Skipping").
CUTLASS_PAGE = ("[INFO] Cutlass MLA backend only supports page size 32 or 64. Skipping.\n"
                "[ERROR] No backends to test. Exiting.\n")
CUTLASS_HEAD_DIM = ("[INFO] CUTLASS backend requires head dimension to be 128 or 192\n"
                    "[ERROR] No backends to test. Exiting.\n")
#: attention.py:558 and flashinfer_benchmark_utils.py:316 (print_perf_metrics).
PERF = ("[INFO] Running testBatchDecodeWithPagedKVCacheWrapper\n[PERF] fa2_tc         :: median time 0.012 ms; "
        "std 0.000 ms; achieved tflops 11.185 TFLOPs/sec; achieved tb_per_sec 2.807 TB/sec\n")


@pytest.mark.parametrize("log, quoted", [
    (NOT_ON_SM90, "not supported on compute capability 9.0"),
    (CUDNN_VERSION, "requires cuDNN >= 9.17.1"),
    (CUTLASS_PAGE, "only supports page size 32 or 64"),
    (CUTLASS_HEAD_DIM, "requires head dimension to be 128 or 192"),
])
def test_an_attention_backend_the_driver_skips_is_unsupported_quoting_it(log, quoted):
    out = classify_driver_case(log, [], WorkerReply({"bench_calls": []}), RunSettings(), "cudnn",
                               "BatchDecodeWithPagedKVCacheWrapper")
    assert out.status == "unsupported" and quoted in out.reason


def test_the_running_banner_is_no_support_statement():
    # "[INFO] Running test..." and "[INFO] FlashInfer version: ..." (attention.py:558-559) are no
    # reason: the driver skipping without one stays failed.
    log = "[INFO] Running testBatchDecodeWithPagedKVCacheWrapper\n[INFO] FlashInfer version: 0.6.18\n" \
          "[ERROR] No backends to test. Exiting.\n"
    out = classify_driver_case(log, [], WorkerReply({}), RunSettings(), "fa2", "BatchDecodeWithPagedKVCacheWrapper")
    assert out.status == "failed" and "without a reason" in out.reason


def test_an_attention_csv_row_is_ok_with_samples_and_the_no_refcheck_note():
    case = case_of(LLAMA, "fa2_tc")
    csv_row = {"routine": case.routine, "median_time": "0.012", "std_time": "0.0004", "tflops": "1.2",
               "tb_per_sec": "2.9", "backend": "fa2_tc", "resolved_backend": "fa2_tc"}
    reply = WorkerReply({"bench_calls": [{"samples_ms": [0.011, 0.012, 0.013], "cuda_graph": True}]})
    out = classify_driver_case(PERF, [csv_row], reply, RunSettings(), "fa2_tc", case.routine)
    row = row_from_case(case, out)
    assert row.status == "ok" and row.median_us == pytest.approx(12.0) and row.n_samples == 3
    assert row.check == "" and "compares the backends of one call" in row.check_note
    assert (row.kind, row.phase, row.batch_size, row.q_len, row.kv_len, row.context_len) == (
        "attention", "decode", 8, 1, 1024, 1024)
    assert (row.num_q_heads, row.num_kv_heads, row.head_dim_qk, row.page_size, row.num_tokens) == (32, 8, 128, 16, 8)


def test_a_case_note_leads_the_rows_reason():
    case = case_of(LLAMA, "fa2")
    csv_row = {"routine": case.routine, "median_time": "0.020", "std_time": "0", "backend": "fa2"}
    row = row_from_case(case, classify_driver_case("", [csv_row], WorkerReply({}), RunSettings(), "fa2",
                                                   case.routine))
    assert row.reason.startswith("the driver times fa2 without a CUDA graph")


# ---------------------------------------------------------------------------------------------
# Real driver output (H200, 0.6.18)

#: name -> (backend, KV dtype, entry, status, words of the reason)
CAPTURED_CASES = {
    "decode_bfloat16_fa2": ("fa2", "bf16", LLAMA, "ok", ""),
    "decode_bfloat16_fa2_tc": ("fa2_tc", "bf16", LLAMA, "ok", ""),
    "decode_bfloat16_cudnn": ("cudnn", "bf16", LLAMA, "ok", ""),
    "decode_bfloat16_trtllm-native": ("trtllm-native", "bf16", LLAMA, "ok", ""),
    "decode_fp8_e4m3_fa2": ("fa2", "fp8", LLAMA, "ok", ""),
    "decode_fp8_e4m3_fa2_tc": ("fa2_tc", "fp8", LLAMA, "ok", ""),
    "decode_fp8_e4m3_trtllm-native": ("trtllm-native", "fp8", LLAMA, "ok", ""),
    "decode_fp8_e4m3_cudnn": ("cudnn", "fp8", LLAMA, "unsupported",
                              "[INFO] cuDNN backend does not support FP8. Skipping."),
    "mla_decode_bfloat16_fa2": ("fa2", "bf16", DEEPSEEK_V3, "ok", ""),
    "mla_decode_bfloat16_fa3": ("fa3", "bf16", DEEPSEEK_V3, "ok", ""),
    "mla_decode_fp8_e4m3_fa2": ("fa2", "fp8", DEEPSEEK_V3, "unsupported",
                                "[INFO] FA2 backend does not support FP8. Skipping."),
    "mla_decode_fp8_e4m3_fa3": ("fa3", "fp8", DEEPSEEK_V3, "unsupported",
                                "[INFO] FA3 backend does not support FP8. Skipping."),
}


def _captured(name: str) -> tuple[str, list[dict[str, str]], list[str]]:
    with open(os.path.join(CAPTURED, f"{name}.log"), errors="replace") as f:
        log = f.read()
    with open(os.path.join(CAPTURED, f"{name}.cmd")) as f:
        argv = shlex.split(f.read())[2:]  # drop "python3 .../flashinfer_benchmark.py"
    return log, read_driver_csv(os.path.join(CAPTURED, f"{name}.csv")), argv


@pytest.mark.parametrize("name", sorted(CAPTURED_CASES))
def test_captured_driver_output_is_classified(name):
    backend, kv_dtype, entry, status, words = CAPTURED_CASES[name]
    case = case_of(entry, backend, kv_dtype=kv_dtype, m=8, kv=1024)
    log, rows, _ = _captured(name)
    out = classify_driver_case(log, rows, WorkerReply({}), RunSettings(), backend, case.routine)
    assert out.status == status and words in out.reason
    if status == "ok":
        assert out.median_us == pytest.approx(float(rows[0]["median_time"]) * 1e3) and out.timer == "cupti"


@pytest.mark.parametrize("name", sorted(CAPTURED_CASES))
def test_the_cases_argv_is_the_one_the_capture_ran(name):
    backend, kv_dtype, entry, _, _ = CAPTURED_CASES[name]
    case = case_of(entry, backend, kv_dtype=kv_dtype, m=8, kv=1024)
    _, _, ran = _captured(name)
    timing = {"--num_iters", "--dry_run_iters", "-v", "--case_tag", "--output_path"}

    def shape_flags(argv):
        out, i = {}, 0
        while i < len(argv):
            flag = argv[i]
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else ""
            if flag not in timing:
                out[flag] = value
            i += 2 if value else 1
        return out

    assert shape_flags(list(case.driver_args)) == shape_flags(ran)


@pytest.mark.parametrize("name", [n for n, c in sorted(CAPTURED_CASES.items()) if c[3] == "ok"])
def test_the_roofline_agrees_with_the_drivers_own_tflops_and_tb_per_sec(name):
    # The driver's CSV row gives its TFLOP/s and TB/s at its median (flashinfer.testing.utils
    # attention_tflops/tb_per_sec_with_actual_seq_lens); this tool's FLOPs and bytes at the same
    # median must give the same rates.
    backend, kv_dtype, entry, _, _ = CAPTURED_CASES[name]
    case = case_of(entry, backend, kv_dtype=kv_dtype, m=8, kv=1024)
    _, rows, _ = _captured(name)
    out = classify_driver_case("", rows, WorkerReply({}), RunSettings(), backend, case.routine)
    row = roofline.annotate(row_from_case(case, out), "NVIDIA H200", (9, 0))
    assert row.tb_per_sec == pytest.approx(float(rows[0]["tb_per_sec"]), rel=1e-3)
    assert row.tflops == pytest.approx(float(rows[0]["tflops"]), rel=1e-3)


# ---------------------------------------------------------------------------------------------
# Roofline, computed by hand


def test_decode_roofline_by_hand():
    # Llama-3.1-8B, M=8 sequences over 1024 BF16 tokens: KV read 8*1024*8*(128+128)*2 = 33,554,432
    # bytes; Q in and O out 8*1*32*(128+128)*2 = 131,072; FLOPs 2*32*(128+128)*8*1024 = 134,217,728.
    flops, nbytes = roofline.attention_flops_bytes(8, 1, 1024, 32, 8, 128, 128, "bf16", False)
    assert flops == 134_217_728 and nbytes == 33_554_432 + 131_072
    # FP8 KV halves the cache bytes, not the query or output.
    assert roofline.attention_flops_bytes(8, 1, 1024, 32, 8, 128, 128, "fp8", False)[1] == 16_777_216 + 131_072


def test_causal_prefill_and_mla_roofline_by_hand():
    # One causal sequence of 4 tokens: pairs 4*4 - 4*3/2 = 10 (1 + 2 + 3 + 4).
    flops, _ = roofline.attention_flops_bytes(1, 4, 4, 2, 1, 64, 64, "bf16", True)
    assert flops == 2 * 2 * 128 * 10
    # DeepSeek-V3 TP=8 MLA decode, M=1 over 2048 tokens: latent + RoPE = 576 elements a token,
    # 2048*576*2 = 2,359,296 bytes of cache; q/o 16*(576+512)*2 = 34,816; FLOPs 2*16*1088*2048.
    flops, nbytes = roofline.attention_flops_bytes(1, 1, 2048, 16, 1, 576, 512, "bf16", False, 512, 64)
    assert flops == 2 * 16 * 1088 * 2048 and nbytes == 2_359_296 + 34_816


def test_an_attention_row_gets_its_fraction_of_hbm_peak():
    case = case_of(LLAMA, "trtllm-native", m=8, kv=1024)
    csv_row = {"routine": case.routine, "median_time": "0.01", "std_time": "0", "backend": "trtllm-native"}
    row = row_from_case(case, classify_driver_case("", [csv_row], WorkerReply({}), RunSettings(),
                                                   "trtllm-native", case.routine))
    row = roofline.annotate(row, "NVIDIA H200", (9, 0))
    # 33,685,504 bytes in 10 us = 3.3686 TB/s = 70.18 % of the H200's 4.8 TB/s; BF16 peak for FLOPs.
    assert row.bytes == 33_685_504 and row.tb_per_sec == pytest.approx(3.369, rel=1e-3)
    assert row.pct_peak_bandwidth == pytest.approx(70.18, rel=1e-3)
    assert row.pct_peak_tflops == pytest.approx(100 * 13.42 / 989.5, rel=1e-2)


# ---------------------------------------------------------------------------------------------
# Flags, end to end through the CLI (dry run: no GPU)


def _cli(*argv: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "scripts"))
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark_via_builtin.py"), *argv],
                          cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("flag, value, words", [
    ("--kv_lens", ["0"], "--kv_lens=0: every length must be a positive number"),
    ("--kv_lens", ["1024", "1024"], "--kv_lens=1024 1024: lists 1024 twice"),
    ("--prefill_lens", ["-3"], "--prefill_lens=-3"),
    ("--page_size", ["24"], "--page_size=24: must be a power of two"),
])
def test_bad_attention_flags_are_one_line_exit_2(tmp_path, flag, value, words):
    r = _cli("--nks", "64,64,a", "--dry_run", "--workdir", str(tmp_path / "w"), flag, *value)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and words in r.stderr


def test_the_attention_settings_are_recorded_and_a_plan_gets_its_cases(tmp_path):
    plan = Plan(model=INFO, tp=1, ep=1, attention=(LLAMA,))
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    r = _cli("--plan", str(path), "--dry_run", "--assume_cc", "9.0", "--workdir", str(tmp_path / "w"),
             "--ms", "8", "--kv_lens", "1024", "4096", "--prefill_lens", "2048", "--kv_dtypes", "bf16",
             "--page_size", "32")
    assert r.returncode == 0, r.stderr
    listing = json.loads((tmp_path / "w" / "cases.json").read_text())
    s = listing["settings"]
    assert (s["kv_lens"], s["prefill_lens"], s["kv_dtypes"], s["page_size"], s["attention"]) == (
        [1024, 4096], [2048], ["bf16"], 32, True)
    ids = [c["case_id"] for c in listing["cases"]]
    assert "attention.attn.decode.m8.kv4096.bf16.trtllm-native" in ids
    assert "attention.attn.prefill.m2048.bf16.fa3" in ids and len(ids) == 2 * 4 + 5
    argv = next(c["driver_argv"] for c in listing["cases"] if c["case_id"].endswith("kv4096.bf16.fa2_tc"))
    assert argv[argv.index("--page_size") + 1] == "32" and "--refcheck" not in argv
    r = _cli("--plan", str(path), "--dry_run", "--workdir", str(tmp_path / "w2"), "--no_attention")
    assert r.returncode == 2 and "no cases to run" in r.stderr


def test_the_progress_line_of_an_attention_case_names_its_phase_and_kv_length():
    from benchmark_model_kernels.run.outcome import Outcome
    from benchmark_model_kernels.run.progress import progress_line

    case = case_of(LLAMA, "fa2_tc", m=8, kv=32768)
    line = progress_line(3, 40, case, row_from_case(case, Outcome("ok", "", 41.0)), 12.0, None)
    assert "attention attn decode m=8 kv=32768 bf16 fa2_tc ... ok 41.0 us" in line


# ---------------------------------------------------------------------------------------------
# Through the real worker pool, with the stand-in driver (plumbing only: its numbers are synthetic)


def test_attention_cases_run_through_the_worker_and_the_driver_protocol(tmp_path):
    from helpers_runner import by_id, run_cases

    ok = case_of(LLAMA, "fa2_tc", m=8, kv=1024)
    skip_line = case_of(LLAMA, "cudnn", kv_dtype="fp8", m=8, kv=6672)  # the stand-in's skip line
    known = case_of(DEEPSEEK_V3, "fa3", prefill=2048)  # MLA prefill: decided before launch
    rc, results, progress, _ = run_cases(tmp_path, [ok, skip_line, known])
    rows = by_id(results)
    r = rows[ok.case_id]
    assert r["status"] == "ok" and r["median_us"] > 0 and r["kind"] == "attention"
    assert (r["phase"], r["kv_len"], r["batch_size"], r["dtype"]) == ("decode", 1024, 8, "bf16")
    assert r["bytes"] == 33_685_504 and "compares the backends of one call" in r["check_note"]
    s = rows[skip_line.case_id]
    assert s["status"] == "unsupported" and "cuDNN backend does not support FP8" in s["reason"]
    k = rows[known.case_id]
    assert k["status"] == "unsupported" and "qk_nope_head_dim" in k["reason"]
    assert rc == 0 and results["settings"]["kv_lens"] == [1024, 8192, 32768]
    assert "attention attn decode m=8 kv=1024 bf16 fa2_tc ... ok" in progress.getvalue()


def test_a_run_decides_the_sequences_its_gpu_cannot_hold_before_launch(tmp_path, monkeypatch):
    """On a GPU (NVML's memory size), attention cases whose K/V cache one rank could not hold are
    unsupported in cases.json with the reason, and get no driver argv; an --assume_cc stand-in,
    whose memory nobody stated, decides nothing of the kind."""
    from benchmark_model_kernels import cli_builtin
    from benchmark_model_kernels.env import gpu as gpu_module
    from benchmark_model_kernels.run import flags

    plan = Plan(model=INFO, tp=1, ep=1, attention=(LLAMA,))
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    monkeypatch.setattr(flags, "detect_gpu", lambda: ("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(gpu_module, "nvml_memory_bytes", lambda index=0: int(140.4 * 2**30))
    common = ["--plan", str(path), "--dry_run", "--ms", "8", "64", "--kv_lens", "32768", "--kv_dtypes", "bf16",
              "--backends", "fa2"]
    assert cli_builtin.main([*common, "--workdir", str(tmp_path / "w")]) == 0
    cases = {c["case_id"]: c for c in json.loads((tmp_path / "w" / "cases.json").read_text())["cases"]}
    unfit = cases["attention.attn.decode.m64.kv32768.bf16.fa2"]
    assert unfit["skip_reason"].startswith("does not fit on one rank: 64 sequence(s) x 32768 tokens")
    assert not unfit["driver_argv"]
    assert cases["attention.attn.decode.m8.kv32768.bf16.fa2"]["skip_reason"] == ""
    assert cli_builtin.main([*common, "--assume_cc", "9.0", "--workdir", str(tmp_path / "w2")]) == 0
    assumed = json.loads((tmp_path / "w2" / "cases.json").read_text())["cases"]
    assert all(c["skip_reason"] == "" for c in assumed)
