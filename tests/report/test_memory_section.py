"""The report's memory section: the plan and GPU memory results.json records, the budget per
recipe and K/V dtype, and the M x K/V-length cells that do not fit."""

from __future__ import annotations

import copy
import json

from helpers_report import H200_QWEN

from benchmark_model_kernels.plan import memory
from benchmark_model_kernels.plan.planner import plan_model
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.markdown import workdir_section
from benchmark_model_kernels.report.memory import DEFAULT_KV_LENS, gpu_memory_bytes, kv_lens_of, memory_section


def _h200_results() -> dict:
    with open(H200_QWEN, encoding="utf-8") as f:
        return json.load(f)


def test_section_reads_the_gpu_and_the_plan():
    results = _h200_results()
    # the H200's NVML total as environment.gpu.memory_gb records it, in 10^9 bytes
    assert results["environment"]["gpu"]["memory_gb"] == 150.8
    assert gpu_memory_bytes(results) == 150_800_000_000
    assert kv_lens_of(results) == DEFAULT_KV_LENS  # this run's settings record no kv_lens
    results["plan"] = plan_model("qwen3-30b-a3b", 1).to_dict()  # a plan with its attention entries
    lines = memory_section(results, [1, 64, 1024])
    text = "\n".join(lines)
    assert lines[0] == "## Memory per rank"
    assert "| bf16 | bf16 |" in text and "| nvfp4 | fp8 |" in text
    # qwen3-30b-a3b TP=1: 48 layers x 4 KV heads x (128 + 128) x 2 bytes per token
    assert "| 98,304 |" in text
    plan = plan_model("qwen3-30b-a3b", 1)
    est = memory.estimate(plan, "bf16", "bf16", 150_800_000_000)
    assert f"{est.kv_tokens_fit:,}" in text
    # 1024 sequences of 32768 tokens need 1024 x 32768 x 98304 B = 3 TiB: no pair fits; one of 1024 does
    assert "| 1024 | " in text
    row_1024 = next(line for line in lines if line.startswith("| 1024 |"))
    assert row_1024.split(" | ")[-1].startswith("bf16/bf16, bf16/fp8, fp8/bf16, fp8/fp8, nvfp4/bf16, nvfp4/fp8")
    row_1 = next(line for line in lines if line.startswith("| 1 |"))
    assert row_1 == "| 1 | all fit | all fit | all fit |"


def test_section_reads_the_runs_kv_lens_and_says_why_it_has_none():
    results = _h200_results()
    results["plan"] = plan_model("llama-3.1-8b", 1).to_dict()
    results["settings"]["kv_lens"] = [2048, 4096]
    lines = memory_section(results, [1])
    assert "| M (sequences) | K/V length 2048 | K/V length 4096 |" in lines
    no_gpu = copy.deepcopy(results)
    no_gpu["environment"]["gpu"]["memory_gb"] = None
    assert "No memory table: results.json records no GPU memory size" in "\n".join(memory_section(no_gpu, [1]))
    no_plan = dict(results, plan=None)
    assert "No memory table: results.json records no plan." in memory_section(no_plan, [1])


def test_weights_that_do_not_fit_are_a_line_not_a_crash():
    results = _h200_results()
    results["plan"] = plan_model("deepseek-v3", 1).to_dict()  # 1.2 TiB of BF16 weights on one GPU
    text = "\n".join(memory_section(results, [1]))
    est = memory.estimate(plan_model("deepseek-v3", 1), "bf16", "bf16", 150_800_000_000)
    needs, has = memory.gib(est.weight_bytes + est.reserve_bytes), memory.gib(est.usable_bytes)
    assert f"| bf16 | bf16 | {memory.gib(est.weight_bytes)} | {memory.gib(est.reserve_bytes)} | does not fit " \
           f"(needs {needs} GiB, GPU has {has} GiB) | " in text


def test_report_carries_the_section():
    a = Analysis(_h200_results(), H200_QWEN)
    assert "## Memory per rank" in workdir_section(a, [])
