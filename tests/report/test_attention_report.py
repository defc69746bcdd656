"""The report's attention table and the roll-up with attention, from a synthetic results.json.

The numbers here are made up (plumbing only, never measurements): rows come from the real case
builder and row_from_case, each ok row timed at a value that depends on its position, so the
fastest backend differs from cell to cell and the totals can be computed by hand."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

from benchmark_model_kernels.cases.attention import AttentionSweep
from benchmark_model_kernels.cases.build import build_cases
from benchmark_model_kernels.core.plan_schema import AttentionEntry, GemmEntry, MixerNotTimed, ModelInfo, Plan
from benchmark_model_kernels.core.results_schema import validate_results
from benchmark_model_kernels.report import markdown
from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.report import write_report
from benchmark_model_kernels.run import roofline
from benchmark_model_kernels.run.outcome import Outcome, row_from_case

INFO = ModelInfo(name="synthetic", source="test", model_type="llama", architecture="LlamaForCausalLM")
ATTN = AttentionEntry(name="attn", modules=("model.layers.*.self_attn.attn",), kind="mha", layers=32,
                      num_q_heads=32, num_kv_heads=8, head_dim_qk=128, head_dim_vo=128,
                      total_q_heads=32, total_kv_heads=8)
QKV = GemmEntry(name="qkv_proj", modules=("model.layers.*.self_attn.qkv_proj",), n=6144, k=4096, layers=32,
                parallel="column")
MAMBA = MixerNotTimed(name="mamba", modules=("model.layers.*.mixer",), layers=4,
                      reason="Mamba2 selective scan: the driver has no routine for it")


def synthetic_results(plan: Plan, backends=("torch", "fa2", "fa2_tc", "cudnn", "trtllm-native")) -> dict:
    cases = build_cases(plan, [1, 8], dtypes=("bf16",), backends=list(backends), compute_capability=(9, 0),
                        attention=AttentionSweep(kv_lens=(1024, 32768), prefill_lens=(2048,)))
    rows = []
    for i, c in enumerate(cases):
        out = Outcome("unsupported", c.skip_reason) if c.skip_reason else Outcome("ok", "", 5.0 + i % 7, 0.1, "cupti")
        rows.append(asdict(roofline.annotate(row_from_case(c, out), "NVIDIA H200", (9, 0))))
    return {"schema_version": 1, "rows": rows, "plan": plan.to_dict(), "settings": {},
            "environment": {"gpu": {"name": "NVIDIA H200", "compute_capability": "9.0"}}}


def by_hand(results: dict, m: int, kv: int, kv_dtype: str) -> float:
    times = [r["median_us"] for r in results["rows"] if r["kind"] == "attention" and r["phase"] == "decode"
             and (r["m"], r["context_len"], r["dtype"]) == (m, kv, kv_dtype) and r["status"] == "ok"]
    return min(times) * ATTN.layers


def test_attention_rows_stay_out_of_the_gemm_moe_tables_and_totals():
    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,))
    results = synthetic_results(plan)
    validate_results(json.loads(json.dumps(results)))
    a = Analysis(results, "/w")
    without = Analysis({**results, "rows": [r for r in results["rows"] if r["kind"] != "attention"]}, "/w")
    assert [e.name for e in a.entries] == ["qkv_proj"] and a.ms == [1, 8]
    assert a.rollup("bf16", 8).total_us == without.rollup("bf16", 8).total_us
    assert {r.kind for r in a.attention.rows} == {"attention"} and a.attention.kv_lens == [1024, 32768]


def test_the_attention_total_is_the_fastest_row_times_layers_per_kv_length_and_dtype():
    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,))
    results = synthetic_results(plan)
    a = Analysis(results, "/w")
    for m in (1, 8):
        for kv in (1024, 32768):
            for d in ("bf16", "fp8"):
                t = a.attention.total(m, kv, d)
                assert t.complete and t.total_us == by_hand(results, m, kv, d)


def test_the_rollup_with_attention_adds_gemm_moe_and_attention_and_names_what_is_left_out():
    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,), mixers_not_timed=(MAMBA,))
    results = synthetic_results(plan)
    a = Analysis(results, "/w")
    text = "\n".join(markdown.workdir_section(a, []))
    section = text.split("# Per-step roll-up with attention", 1)[1].split("\n## ", 1)[0]
    gemm = a.rollup("bf16", 8).total_us
    att_bf16, att_fp8 = by_hand(results, 8, 1024, "bf16"), by_hand(results, 8, 1024, "fp8")
    line = next(ln for ln in section.splitlines() if ln.startswith("| BF16 best | 8 | 1024 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3:] == [markdown.fmt_us(gemm), markdown.fmt_us(att_bf16), markdown.fmt_us(gemm + att_bf16),
                         markdown.fmt_us(att_fp8), markdown.fmt_us(gemm + att_fp8)]
    for words in ("communication", "norms", "sampling", "launch gaps",
                  "mamba (4 layers: Mamba2 selective scan: the driver has no routine for it)",
                  "Prefill rows are not in these totals"):
        assert words in section
    # Hopper: vLLM's default attention (FLASH_ATTN) has no row, so its line is a marked stand-in.
    vllm_line = next(ln for ln in section.splitlines() if ln.startswith("| BF16 vLLM default | 8 | 1024 |"))
    assert "†" in vllm_line and "vllm-flash-attn" in section.split("Stand-ins", 1)[1]


def test_the_attention_table_lists_every_backend_and_the_fastest_with_vllm_marks():
    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,))
    a = Analysis(synthetic_results(plan), "/w")
    text = "\n".join(markdown.attention_lines(a))
    assert "### attn decode: 32 layers per step, 32 q / 8 KV heads, head dim 128/128" in text
    assert "| M | KV tokens | KV dtype | fastest | fa2 | fa2_tc | cudnn | trtllm-native |" in text
    assert "### attn prefill" in text and "[vLLM FLASHINFER]" in text
    assert "FLASH_ATTN" in text  # what vLLM runs by default on this GPU, said above the tables


def test_a_windowed_decode_says_what_it_reads_and_a_missing_type_makes_the_total_partial():
    sliding = replace(ATTN, name="attn.sliding", layers=16, sliding_window=4096)
    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN, sliding))
    results = synthetic_results(plan)
    results["rows"] = [r for r in results["rows"] if not (r["name"] == "attn.sliding" and r["m"] == 1)]
    a = Analysis(results, "/w")
    assert "32768 (reads 4096)" in "\n".join(markdown.attention_lines(a))
    t = a.attention.total(1, 1024, "bf16")
    assert t.missing == ("attn.sliding",) and t.total_us == by_hand(results, 1, 1024, "bf16")
    assert a.attention.total(8, 1024, "bf16").complete


def test_an_attention_only_run_gets_a_report(tmp_path):
    plan = Plan(model=INFO, tp=1, ep=1, attention=(ATTN,))
    results = synthetic_results(plan, backends=("fa2_tc", "trtllm-native"))
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "results.json").write_text(json.dumps(results))
    path = write_report([str(tmp_path / "w")], str(tmp_path / "out"))
    text = open(path).read()
    assert "Per-step roll-up with attention" in text and "| attention only | 8 | 32768 |" in text


def test_a_report_over_two_workdirs_with_attention_has_each_ones_rollup(tmp_path):
    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,))
    dirs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(synthetic_results(plan)))
        dirs.append(str(tmp_path / name))
    text = open(write_report(dirs, str(tmp_path / "out"))).read()
    assert text.count("Per-step roll-up with attention") == 2


def test_the_comparison_adds_each_runs_attention_per_kv_length(tmp_path):
    """Two runs, one with attention rows (plumbing numbers): the comparison's GEMM + MoE +
    attention cell is that run's GEMM + MoE total plus its fastest BF16-cache decode row x layers;
    the run without attention rows is left out of that table."""
    with_attention = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,))
    gemm_only = Plan(model=INFO, tp=2, ep=1, gemms=(QKV,))
    results = {"a": synthetic_results(with_attention), "b": synthetic_results(gemm_only)}
    for name, res in results.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(res))
    text = open(write_report([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))).read()
    section = text.split("## Comparison: per-step GEMM + MoE + attention", 1)[1].split("\n## ", 1)[0]
    expected = Analysis(results["a"], "/a").rollup("bf16", 8).total_us + by_hand(results["a"], 8, 32768, "bf16")
    line = next(ln for ln in section.splitlines() if "| 32768 | best measured |" in ln)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0].startswith("#1 ") and cells[1] == "1 (TP=1)" and cells[5] == markdown.fmt_us(expected)
    assert "#2 " not in section  # no attention rows: not in this table


def test_a_rollup_cell_one_rank_cannot_hold_reads_does_not_fit():
    """A GPU whose K/V budget holds 8 x 32768 tokens in FP8 but not in BF16 (computed with the
    memory section's own arithmetic): that cell's BF16-cache total says so, the FP8 one and every
    smaller cell keep their sums, in the run's roll-up and in the comparison."""
    from benchmark_model_kernels.plan import memory

    plan = Plan(model=INFO, tp=1, ep=1, gemms=(QKV,), attention=(ATTN,))
    results = synthetic_results(plan)
    results["environment"]["gpu"]["memory_gb"] = 30.0
    est = {d: memory.estimate(plan, "bf16", d, 30_000_000_000) for d in ("bf16", "fp8")}
    assert not memory.fits(est["bf16"], plan, 8, 32768) and memory.fits(est["fp8"], plan, 8, 32768)
    assert memory.fits(est["bf16"], plan, 8, 1024)
    a = Analysis(results, "/w")
    section = "\n".join(markdown.workdir_section(a, [])).split("# Per-step roll-up with attention", 1)[1]
    cells = [c.strip() for c in next(ln for ln in section.splitlines()
                                     if ln.startswith("| BF16 best | 8 | 32768 |")).strip("|").split("|")]
    gemm = a.rollup("bf16", 8).total_us
    att_bf16, att_fp8 = by_hand(results, 8, 32768, "bf16"), by_hand(results, 8, 32768, "fp8")
    # what the cell needs: the weights, the reserve and 8 x 32768 tokens of BF16 K/V, against the
    # 0.92 of the GPU vLLM takes (the memory section's numbers)
    e = est["bf16"]
    needs = e.weight_bytes + e.reserve_bytes + memory.kv_bytes(plan, "bf16", 8, 32768)
    no_fit = f"does not fit (needs {memory.gib(needs)} GiB, GPU has {memory.gib(e.usable_bytes)} GiB)"
    assert cells[3:] == [markdown.fmt_us(gemm), markdown.fmt_us(att_bf16), no_fit,
                         markdown.fmt_us(att_fp8), markdown.fmt_us(gemm + att_fp8)]
    small = next(ln for ln in section.splitlines() if ln.startswith("| BF16 best | 8 | 1024 |"))
    assert "does not fit" not in small
    compare = "\n".join(markdown._attention_comparison_lines([a], ["synthetic"], [1, 8], ["bf16"]))
    line = next(ln for ln in compare.splitlines()
                if ln.startswith("| #1 synthetic | 1 (TP=1) | 32768 | best measured |"))
    assert line.rstrip(" |").endswith(no_fit) and "does not fit" not in line.split("|")[5]
