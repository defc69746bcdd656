"""Re-rendering an old run writes no invented number, and no report names the machine's paths."""

from __future__ import annotations

import json
import os

from helpers_report import gemm_row, results_of

from benchmark_model_kernels.core.shown_paths import shown_command, shown_text
from benchmark_model_kernels.plan.planner import plan_model
from benchmark_model_kernels.report import markdown
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.memory import KV_NOT_RECORDED, memory_section
from benchmark_model_kernels.report.report import write_report


def _old_results() -> dict:
    """A run whose plan predates attention entries (no "attention" key, as results_of writes it)."""
    rows = [gemm_row("qkv_proj", 8, "bf16", "torch", "torch.linear", 10.0)]
    results = results_of(rows, gemms=("qkv_proj",), moe=False)
    results["environment"]["gpu"]["memory_gb"] = 150.8
    assert "attention" not in results["plan"]
    return results


def test_an_old_plan_memory_table_says_kv_not_recorded_instead_of_zero():
    lines = memory_section(_old_results(), [1, 8])
    table = [line for line in lines if line.startswith("| bf16 |") or line.startswith("| fp8 |")
             or line.startswith("| nvfp4 |")]
    # one row per recipe (the two K/V dtypes would be the same unknown), K/V columns not recorded
    assert len(table) == 3
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] == cells[5] == cells[6] == KV_NOT_RECORDED
        assert "0" != cells[5]
    text = "\n".join(lines)
    assert "K/V sizes not recorded: this run's plan was written before the plan held attention entries" in text
    assert "Cells whose K/V cache does not fit" not in text  # no fit cells from unknown K/V sizes
    # the weights are the plan's own: still shown (2 layers x 64 x 32 x 2 bytes, as GiB)
    assert table[0].startswith("| bf16 | not recorded | 0.0 |")


def test_an_old_plan_says_what_else_it_did_not_record():
    text = "\n".join(memory_section(_old_results(), [8]))
    assert "records no hidden_size or vocab_size" in text
    results = _old_results()
    results["plan"]["model"].update(hidden_size=32, vocab_size=128)
    results["plan"]["gemms"].append(dict(name="lm_head", modules=["lm_head"], n=128, k=32, layers=1,
                                         parallel="column"))
    text = "\n".join(memory_section(results, [8]))
    assert "records no hidden_size" not in text
    assert "does not record whether lm_head is tied to the input embedding" in text


def test_a_current_plan_keeps_its_kv_numbers():
    results = _old_results()
    results["plan"] = plan_model("llama-3.1-8b", 1).to_dict()
    text = "\n".join(memory_section(results, [1]))
    assert KV_NOT_RECORDED not in text and "| bf16 | fp8 |" in text
    assert "| 131,072 |" in text  # 32 layers x 8 KV heads x (128 + 128) x 2 bytes per token


def test_the_whole_report_of_an_old_run_has_no_zero_kv_bytes():
    text = "\n".join(markdown.workdir_section(Analysis(_old_results(), "old"), []))
    assert "| 0 | 0 |" not in text and KV_NOT_RECORDED in text


def test_text_keeps_what_is_not_an_absolute_path():
    for text in ("p10/p90 overlap", "10 GB/s", "TP / EP", "see https://docs.vllm.ai/en/x", "runs/llama8b/x.json",
                 "vllm/model_executor/layers/fp8.py", "1/2"):
        assert shown_text(text) == text


def test_absolute_paths_become_the_workdir_name_or_their_basename():
    wd = ("/root/out/ev/qwen3_tp1",)
    assert shown_text("/root/out/ev/qwen3_tp1", wd) == "qwen3_tp1"
    assert shown_text("cache=/root/out/ev/qwen3_tp1/autotune_cache.json,", wd) == "cache=qwen3_tp1/autotune_cache.json,"
    # outside a code span the placeholder is one (Markdown would drop a bare <path> as a tag)
    assert shown_text("cache=/tmp/ev/cache/autotune_cache.json", wd) == "cache=`<path>`/autotune_cache.json"
    assert shown_text("(/home/me/flashinfer has no version.txt).") == "(`<path>`/flashinfer has no version.txt)."
    assert shown_text("read `/data/x.json`.") == "read `<path>/x.json`."
    assert shown_text("['/root/a/b']", code=True) == "['<path>/b']"
    cmd = ["/work/main/scripts/benchmark_model.py", "llama", "--workdir", "/root/out/ev/qwen3_tp1",
           "--autotune_cache=/tmp/c/autotune_cache.json", "--flashinfer_repo", ".devbundle/flashinfer"]
    assert shown_command(cmd, wd) == ("<path>/benchmark_model.py llama --workdir qwen3_tp1 --autotune_cache="
                                      "<path>/autotune_cache.json --flashinfer_repo .devbundle/flashinfer")


def test_no_report_names_the_machines_paths(tmp_path):
    rows = [gemm_row("qkv_proj", 8, "bf16", "torch", "torch.linear", 10.0)]
    results = results_of(rows, gemms=("qkv_proj",), moe=False)
    ran_at = "/root/out/ev/run_a"
    results["command"] = ["/work/main/scripts/benchmark_model.py", "hand-made", "--workdir", ran_at,
                          "--autotune_cache", f"{ran_at}/autotune_cache.json", "--flashinfer_repo", "/opt/fi"]
    results["settings"] = {"autotune_cache": "/scratch/cache/autotune_cache.json", "num_iters": 30}
    results["environment"]["warnings"] = ["FlashInfer checkout version unknown (/opt/fi has no version.txt)"]
    results["plan"]["model"]["name"] = "/models/My-Model"
    workdirs = []
    for name in ("run_a", "run_b"):
        wd = tmp_path / "runs" / name
        wd.mkdir(parents=True)
        (wd / "results.json").write_text(json.dumps(results))
        workdirs.append(str(wd))
    before = open(os.path.join(workdirs[0], "results.json"), "rb").read()
    single = open(write_report(workdirs[:1])).read()
    compared = open(write_report(workdirs, str(tmp_path / "cmp"))).read()
    assert open(os.path.join(workdirs[0], "results.json"), "rb").read() == before  # results.json unchanged
    for text in (single, compared):
        for machine in (str(tmp_path), "/root/", "/work/", "/scratch/", "/opt/", "/models/"):
            assert machine not in text
    assert ("| Command | `<path>/benchmark_model.py hand-made --workdir run_a --autotune_cache "
            "run_a/autotune_cache.json --flashinfer_repo <path>/fi` |") in single
    assert "autotune_cache=`<path>`/autotune_cache.json, num_iters=30" in single
    assert "| Results | `run_a/results.json` |" in single
    assert "- FlashInfer checkout version unknown (`<path>`/fi has no version.txt)" in single
    assert "# Kernel benchmark: My-Model TP=1 EP=1" in single  # a local model by its directory's name
    assert "- #1 My-Model TP=1 EP=1 (#1): `run_a`" in compared
