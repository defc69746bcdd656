"""cases/attention.py: attention cases per plan entry: ids, routines, backends per GPU, argv, the
sliding-window cap, MLA routing, page-size limits and the sweep's checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmark_model_kernels.cases.attention import (
    DECODE,
    MLA_DECODE,
    NO_ATTENTION,
    PREFILL,
    RAGGED,
    AttentionSweep,
    attention_cases,
    check_sweep,
    routine_backends,
)
from benchmark_model_kernels.cases.build import build_cases, with_modes
from benchmark_model_kernels.cases.capabilities import Capabilities, Support
from benchmark_model_kernels.core.case_schema import AttentionShape, Case
from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.plan_schema import AttentionEntry, ModelInfo, Plan
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.run import roofline
from benchmark_model_kernels.run.argv import driver_argv

SM90, SM100 = (9, 0), (10, 0)
INFO = ModelInfo(name="m", source="bundled", model_type="llama", architecture="LlamaForCausalLM")

#: Llama-3.1-8B at TP=1: 32 layers, 32 query heads, 8 KV heads, head dim 128.
LLAMA = AttentionEntry(name="attn", modules=("model.layers.*.self_attn.attn",), kind="mha", layers=32,
                       num_q_heads=32, num_kv_heads=8, head_dim_qk=128, head_dim_vo=128,
                       total_q_heads=32, total_kv_heads=8)
#: Qwen3-30B-A3B at TP=1: 48 layers, 32 query heads, 4 KV heads, head dim 128.
QWEN3_MOE = replace(LLAMA, layers=48, num_kv_heads=4, total_kv_heads=4)
#: DeepSeek-V3 at TP=8, absorbed MLA: 61 layers, 16 heads per rank, latent 512 + RoPE 64.
DEEPSEEK_V3 = AttentionEntry(name="mla", modules=("model.layers.*.self_attn",), kind="mla", layers=61,
                             num_q_heads=16, num_kv_heads=1, head_dim_qk=576, head_dim_vo=512,
                             total_q_heads=128, total_kv_heads=1, kv_lora_rank=512, qk_rope_head_dim=64)


def plan_of(*entries: AttentionEntry, tp: int = 1) -> Plan:
    return Plan(model=INFO, tp=tp, ep=1, attention=entries)


def flags(case: Case) -> dict[str, str]:
    """The argv's --flag value pairs (a flag without a value maps to "")."""
    args, out = list(case.driver_args), {}
    for i, a in enumerate(args):
        if a.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else ""
            out[a] = "" if nxt.startswith("--") else nxt
    return out


def test_llama_decode_cases_on_sm90_one_per_m_kv_length_dtype_and_backend():
    cases = attention_cases(plan_of(LLAMA), [1, 8, 64], AttentionSweep(kv_lens=(1024, 32768)),
                            compute_capability=SM90)
    # The driver's sm_90 list for the decode routine is fa2 fa2_tc auto cudnn trtllm-native; auto
    # selects among the others and is left out: 3 M x 2 KV lengths x 2 dtypes x 4 backends.
    assert len(cases) == 3 * 2 * 2 * 4
    assert [c.case_id for c in cases[:5]] == [
        "attention.attn.decode.m1.kv1024.bf16.fa2", "attention.attn.decode.m1.kv1024.bf16.fa2_tc",
        "attention.attn.decode.m1.kv1024.bf16.cudnn", "attention.attn.decode.m1.kv1024.bf16.trtllm-native",
        "attention.attn.decode.m1.kv1024.fp8.fa2"]
    assert {c.backend for c in cases} == {"fa2", "fa2_tc", "cudnn", "trtllm-native"}
    case = next(c for c in cases if c.case_id == "attention.attn.decode.m64.kv32768.fp8.cudnn")
    assert (case.kind, case.routine, case.m, case.dtype, case.layers) == ("attention", DECODE, 64, "fp8", 32)
    assert flags(case) == {
        "--routine": DECODE, "--backends": "cudnn", "--page_size": "16", "--batch_size": "64",
        "--s_qo": "1", "--s_kv": "32768", "--num_qo_heads": "32", "--num_kv_heads": "8",
        "--head_dim_qk": "128", "--head_dim_vo": "128", "--q_dtype": "bfloat16",
        "--kv_dtype": "fp8_e4m3", "--case_tag": case.case_id}
    assert case.logical == AttentionShape("decode", 64, 1, 32768, 32768, 32, 8, 128, 128, page_size=16)
    assert not any(c.skip_reason for c in cases)


def test_qwen3_moe_decode_reads_its_four_kv_heads():
    case = attention_cases(plan_of(QWEN3_MOE), [8], AttentionSweep(kv_lens=(1024,), kv_dtypes=("bf16",)),
                           compute_capability=SM90)[0]
    assert flags(case)["--num_kv_heads"] == "4" and flags(case)["--num_qo_heads"] == "32"
    assert case.layers == 48


def test_prefill_is_one_causal_sequence_on_the_paged_prefill_routine():
    cases = attention_cases(plan_of(LLAMA), [1], AttentionSweep(kv_lens=(), prefill_lens=(4096,)),
                            compute_capability=SM90)
    assert {c.backend for c in cases} == {"fa2", "fa3", "cudnn", "cudnn-native", "trtllm-fmha-v2"}
    case = next(c for c in cases if c.backend == "fa3" and c.dtype == "bf16")
    assert case.case_id == "attention.attn.prefill.m4096.bf16.fa3" and case.routine == PREFILL
    f = flags(case)
    assert (f["--batch_size"], f["--s_qo"], f["--s_kv"], f["--causal"]) == ("1", "4096", "4096", "")
    assert case.m == 4096 and case.logical.tokens == 4096


def test_deepseek_v3_mla_decode_runs_the_mla_routine_with_latent_and_rope_widths():
    cases = attention_cases(plan_of(DEEPSEEK_V3, tp=8), [8], AttentionSweep(kv_lens=(8192,)),
                            compute_capability=SM90)
    assert {c.backend for c in cases} == {"fa2", "fa3"} and {c.routine for c in cases} == {MLA_DECODE}
    f = flags(cases[0])
    assert (f["--head_dim_ckv"], f["--head_dim_kpe"], f["--num_kv_heads"], f["--num_qo_heads"]) == (
        "512", "64", "1", "16")
    assert "--head_dim_qk" not in f and cases[0].layers == 61


def test_mla_prefill_is_mha_over_the_up_projected_k_and_v_on_the_ragged_routine():
    """DeepSeek-V3 at TP=8: 16 heads, each with its own K of 128 + 64 and V of 128 (vLLM's MLA
    prefill backends plan head_dim_qk = qk_nope + qk_rope, head_dim_vo = v_head_dim); the cache
    dtype does not reach prefill, so FP8 is not a second call."""
    entry = replace(DEEPSEEK_V3, qk_nope_head_dim=128, v_head_dim=128)
    cases = attention_cases(plan_of(entry, tp=8), [1], AttentionSweep(kv_lens=(), prefill_lens=(2048,)),
                            compute_capability=SM90)
    assert {c.backend for c in cases} == {"fa2", "fa3", "cudnn", "cudnn-native", "trtllm-fmha-v2"}
    bf16 = [c for c in cases if c.dtype == "bf16"]
    assert bf16 and all(c.routine == RAGGED and not c.skip_reason for c in bf16)
    f = flags(bf16[0])
    assert (f["--num_qo_heads"], f["--num_kv_heads"], f["--head_dim_qk"], f["--head_dim_vo"]) == (
        "16", "16", "192", "128")
    assert (f["--s_qo"], f["--s_kv"], f["--batch_size"], f["--kv_dtype"]) == ("2048", "2048", "1", "bfloat16")
    assert "--causal" in f and "--page_size" not in f
    # It reads the up-projected K and V, not the latent: 2048 tokens x 16 heads x (192 + 128) x 2 B,
    # plus Q and O (2048 x 16 x 320 x 2 B); causal pairs 2048 * 2049 / 2 at 2 * 16 * 320 FLOPs each.
    shape = bf16[0].logical
    assert (shape.kv_lora_rank, shape.qk_rope_head_dim) == (0, 0)
    flops, moved = roofline.attention_flops_bytes(shape.batch_size, shape.q_len, shape.kv_len, shape.num_q_heads,
                                                  shape.num_kv_heads, shape.head_dim_qk, shape.head_dim_vo,
                                                  "bf16", True, shape.kv_lora_rank, shape.qk_rope_head_dim)
    assert moved == 2048 * 16 * 320 * 2 * 2 and flops == 2 * 16 * 320 * (2048 * 2049 / 2)
    for case in (c for c in cases if c.dtype == "fp8"):
        assert not case.driver_args and "the same call as the bf16 row" in case.skip_reason


def test_mla_prefill_is_unsupported_naming_the_dims_the_plan_lacks():
    cases = attention_cases(plan_of(DEEPSEEK_V3, tp=8), [1], AttentionSweep(kv_lens=(), prefill_lens=(2048,)),
                            compute_capability=SM90)
    assert cases and {c.routine for c in cases} == {RAGGED}
    for case in cases:
        assert not case.driver_args
        assert "qk_nope_head_dim" in case.skip_reason and "v_head_dim" in case.skip_reason
        assert "mla/prefill/flash_attn.py" in case.skip_reason


def test_a_sliding_window_caps_the_decode_read_and_says_so():
    windowed = replace(LLAMA, name="attn.sliding", sliding_window=4096)
    cases = attention_cases(plan_of(windowed), [1], AttentionSweep(kv_lens=(1024, 32768), kv_dtypes=("bf16",),
                                                                   prefill_lens=(2048, 8192)),
                            compute_capability=SM90)
    short = next(c for c in cases if c.case_id == "attention.attn.sliding.decode.m1.kv1024.bf16.fa2_tc")
    long = next(c for c in cases if c.case_id == "attention.attn.sliding.decode.m1.kv32768.bf16.fa2_tc")
    assert short.logical.kv_len == 1024 and not short.note
    assert long.logical.kv_len == 4096 and long.logical.context_len == 32768
    assert flags(long)["--s_kv"] == "4096" and "min(32768, 4096) = 4096" in long.note
    fits = next(c for c in cases if c.case_id == "attention.attn.sliding.prefill.m2048.bf16.fa3")
    over = next(c for c in cases if c.case_id == "attention.attn.sliding.prefill.m8192.bf16.fa3")
    assert not fits.skip_reason and "window_left=-1" in over.skip_reason and not over.driver_args


def test_backends_follow_the_gpu_and_never_include_the_auto_selector():
    sm100 = {c.backend for c in attention_cases(plan_of(LLAMA), [1], AttentionSweep(kv_lens=(1024,)),
                                                 compute_capability=SM100)}
    assert sm100 == {"fa2", "fa2_tc", "cudnn", "trtllm-gen", "trtllm-native", "prims-ts"}
    anywhere = {c.backend for c in attention_cases(plan_of(LLAMA), [1], AttentionSweep(kv_lens=(1024,)))}
    assert "auto" not in anywhere and sm100 <= anywhere  # no GPU: every backend of any GPU
    assert routine_backends(MLA_DECODE, (12, 0))[0] == ("fa2",)


def test_the_installed_drivers_table_wins_over_the_hand_table():
    caps = Capabilities(origin="stand-in", supports=(
        Support(DECODE, "fa2", ((9, 0),), ((9, 0), (10, 0)), "driver table (stand-in)", "driver"),
        Support(DECODE, "auto", ((9, 0),), ((9, 0), (10, 0)), "driver table (stand-in)", "driver"),
        Support(DECODE, "newkernel", ((9, 0),), ((9, 0), (10, 0)), "driver table (stand-in)", "driver")))
    cases = attention_cases(plan_of(LLAMA), [1], AttentionSweep(kv_lens=(1024,), kv_dtypes=("bf16",)),
                            compute_capability=SM90, caps=caps)
    assert [c.backend for c in cases] == ["fa2", "newkernel"]


def test_a_page_size_a_backend_does_not_run_makes_its_rows_unsupported():
    sweep = AttentionSweep(kv_lens=(1024,), kv_dtypes=("bf16",), page_size=8)
    cases = {c.backend: c for c in attention_cases(plan_of(LLAMA), [1], sweep, compute_capability=SM90)}
    assert "16/32/64/128" in cases["trtllm-native"].skip_reason
    assert "flashinfer/jit/xqa.py:82" in cases["trtllm-native"].skip_reason
    assert not cases["fa2"].skip_reason and flags(cases["fa2"])["--page_size"] == "8"
    mla = {c.backend: c for c in attention_cases(plan_of(DEEPSEEK_V3), [1], replace(sweep, page_size=16),
                                                  compute_capability=SM100)}
    assert "32/64" in mla["cutlass"].skip_reason and "attention.py:3138" in mla["cutlass"].skip_reason
    assert "32/64" in mla["trtllm-native"].skip_reason and not mla["fa2"].skip_reason


@pytest.mark.parametrize("sweep, field", [
    (AttentionSweep(kv_lens=(0,)), "--kv_lens"),
    (AttentionSweep(kv_lens=(1024, 1024)), "--kv_lens"),
    (AttentionSweep(prefill_lens=(-5,)), "--prefill_lens"),
    (AttentionSweep(kv_dtypes=("nvfp4",)), "--kv_dtypes"),
    (AttentionSweep(kv_dtypes=("bf16", "bf16")), "--kv_dtypes"),
    (AttentionSweep(page_size=0), "--page_size"),
    (AttentionSweep(page_size=24), "--page_size"),
])
def test_bad_sweep_values_are_one_usage_error_naming_the_flag(sweep, field):
    with pytest.raises(UsageError) as e:
        check_sweep(sweep)
    assert e.value.field == field


def test_vllm_default_marks_on_hopper_and_blackwell():
    sweep = AttentionSweep(kv_lens=(1024,), prefill_lens=(1024,))
    sm90 = {c.case_id: c.vllm_default for c in attention_cases(plan_of(LLAMA), [1], sweep, compute_capability=SM90)}
    # Hopper: vLLM defaults to FLASH_ATTN (not timed here): no row is "same"; its FLASHINFER backend
    # decodes with XQA (trtllm-native) and prefills BF16 with fa3; FP8 prefill quantizes the query.
    assert "same" not in sm90.values()
    assert sm90["attention.attn.decode.m1.kv1024.fp8.trtllm-native"] == "vllm_flashinfer"
    assert sm90["attention.attn.prefill.m1024.bf16.fa3"] == "vllm_flashinfer"
    assert sm90["attention.attn.prefill.m1024.fp8.fa3"] == ""
    assert sm90["attention.attn.decode.m1.kv1024.bf16.fa2"] == ""
    sm100 = {c.case_id: c.vllm_default for c in attention_cases(plan_of(LLAMA), [1], sweep,
                                                                compute_capability=SM100)}
    assert sm100["attention.attn.decode.m1.kv1024.bf16.trtllm-native"] == "same"
    assert sm100["attention.attn.decode.m1.kv1024.bf16.trtllm-gen"] == ""


def test_build_cases_adds_attention_after_gemm_and_moe_and_filters_backends():
    plan = plan_of(LLAMA)
    only = build_cases(plan, [8], backends=["trtllm-native"], compute_capability=SM90)
    assert {c.backend for c in only} == {"trtllm-native"} and all(c.kind == "attention" for c in only)
    assert build_cases(plan, [8], compute_capability=SM90, attention=NO_ATTENTION) == []


def test_attention_argv_has_timing_flags_but_no_autotune_or_refcheck():
    case = attention_cases(plan_of(LLAMA), [1], AttentionSweep(kv_lens=(1024,)), compute_capability=SM90)[0]
    argv = driver_argv(case, RunSettings(check=True, autotune=True, autotune_cache="/tmp/a.json"))
    assert "--autotune" not in argv and "--refcheck" not in argv and "--autotune_cache" not in argv
    assert argv[argv.index("--num_iters") + 1] == "30" and "-v" in argv
    eager = with_modes([case], ["eager"])[0]
    tag = eager.driver_args[eager.driver_args.index("--case_tag") + 1]
    assert eager.case_id.endswith(".eager") and tag == eager.case_id
    assert "--no_cuda_graph" in driver_argv(eager, RunSettings())


def test_fa2_rows_say_the_driver_times_them_without_a_cuda_graph():
    cases = attention_cases(plan_of(LLAMA), [1], AttentionSweep(kv_lens=(1024,), kv_dtypes=("bf16",)),
                            compute_capability=SM90)
    notes = {c.backend: c.note for c in cases}
    assert "without a CUDA graph" in notes["fa2"] and "attention.py:1148" in notes["fa2"]
    assert notes["fa2_tc"] == ""


def test_an_attention_case_round_trips_through_its_json_form():
    case = attention_cases(plan_of(DEEPSEEK_V3), [8], AttentionSweep(kv_lens=(1024,)), compute_capability=SM90)[0]
    assert Case.from_dict(case.to_dict()) == case


def test_the_preview_counts_attention_cells_per_kv_dtype_apart_from_the_recipes():
    from benchmark_model_kernels.cases.capabilities import HAND
    from benchmark_model_kernels.cli_model import target_gpu_summary

    text = target_gpu_summary(plan_of(LLAMA), SM90, [1, 8], HAND)
    # Decode at 2 M x 3 default KV lengths x 4 sm_90 backends per KV dtype, none known unsupported.
    assert "#   attention, KV bf16: 24 of 24 cells run, 0 unsupported" in text
    assert "#   attention, KV fp8: 24 of 24 cells run, 0 unsupported" in text
    assert "#   bf16:" not in text  # no GEMM in this plan: no recipe line


def test_an_attention_backend_filter_on_a_plan_without_attention_names_the_backends_there_are():
    from benchmark_model_kernels.cases.build import plan_from_shapes
    from benchmark_model_kernels.run.runner import plan_cases

    with pytest.raises(UsageError) as e:
        plan_cases(plan_from_shapes([(64, 64, "a")]), [1], ["bf16"], ["fa2"], SM90)
    assert e.value.field == "--backends" and "matches no case" in e.value.fix


def test_chunked_local_attention_reads_at_most_its_chunk():
    chunked = replace(LLAMA, name="attn.chunked", attention_chunk_size=8192)
    cases = attention_cases(plan_of(chunked), [1], AttentionSweep(kv_lens=(1024, 32768), kv_dtypes=("bf16",),
                                                                  prefill_lens=(4096, 16384)),
                            compute_capability=SM90)
    long = next(c for c in cases if c.case_id == "attention.attn.chunked.decode.m1.kv32768.bf16.cudnn")
    assert long.logical.kv_len == 8192 and "at most 8192" in long.note and flags(long)["--s_kv"] == "8192"
    short = next(c for c in cases if c.case_id == "attention.attn.chunked.decode.m1.kv1024.bf16.cudnn")
    assert short.logical.kv_len == 1024 and not short.note
    over = next(c for c in cases if c.case_id == "attention.attn.chunked.prefill.m16384.bf16.fa3")
    fits = next(c for c in cases if c.case_id == "attention.attn.chunked.prefill.m4096.bf16.fa3")
    assert "chunked local attention" in over.skip_reason and not fits.skip_reason


def test_sequences_one_rank_cannot_hold_are_decided_before_launch():
    """Llama-3.1-8B at TP=1 on 140 GiB: 64 x 32768 tokens need 256 GiB of BF16 K/V cache over 32
    layers (64 * 32768 * 32 layers * 8 heads * (128 + 128) * 2 bytes), more than is left after the
    weights; 8 x 32768 (32 GiB) fits. The smallest weights of the recipes asked for decide."""
    from benchmark_model_kernels.cases.attention import attention_cases, mark_unfit
    from benchmark_model_kernels.plan import planner

    plan = planner.plan_model("llama-3.1-8b", 1, 1)
    cases = attention_cases(plan, [8, 64], AttentionSweep(kv_lens=(1024, 32768)), ["fa2"], SM90)
    gpu = int(140.4 * 2**30)
    marked = {c.case_id: c for c in mark_unfit(cases, plan, ["bf16", "fp8"], gpu)}
    unfit = marked["attention.attn.decode.m64.kv32768.bf16.fa2"]
    assert unfit.skip_reason.startswith("does not fit on one rank: 64 sequence(s) x 32768 tokens need "
                                        "256.0 GiB of BF16 K/V cache")
    assert "after the weights of fp8" in unfit.skip_reason and unfit.driver_args == ()
    assert marked["attention.attn.decode.m64.kv32768.fp8.fa2"].skip_reason.startswith("does not fit")
    for kept in ("m8.kv32768.bf16", "m64.kv1024.bf16", "m8.kv1024.fp8"):
        case = marked[f"attention.attn.decode.{kept}.fa2"]
        assert case.skip_reason == "" and case.driver_args
    # A GPU twice the size holds 64 x 32768 with an FP8 cache (128 GiB), still not with BF16.
    bigger = {c.case_id: c for c in mark_unfit(cases, plan, ["fp8"], 2 * gpu)}
    assert bigger["attention.attn.decode.m64.kv32768.fp8.fa2"].skip_reason == ""
    assert bigger["attention.attn.decode.m64.kv32768.bf16.fa2"].skip_reason.startswith("does not fit")


def test_weights_that_fill_the_rank_are_named_as_the_reason():
    """DeepSeek-V3 at TP=8 in BF16 on an H200: the rank's weights (158 GiB, as the H200 run of
    examples/h200/attention/mla_prefill printed) exceed the 129 GiB vLLM may use, so even one short
    sequence has no room; the reason says that, and how to get room, not "0.0 GiB left"."""
    from benchmark_model_kernels.cases.attention import attention_cases, mark_unfit
    from benchmark_model_kernels.plan import memory, planner

    plan = planner.plan_model("deepseek-v3", 8, 1)
    gpu = int(140.4 * 2**30)
    assert not memory.estimate(plan, "bf16", "bf16", gpu).weights_fit
    cases = attention_cases(plan, [1], AttentionSweep(kv_lens=(1024,), kv_dtypes=("bf16",)), ["fa3"], SM90)
    (case,) = mark_unfit(cases, plan, ["bf16"], gpu)
    assert case.skip_reason.startswith("does not fit on one rank: the weights of bf16 (the smallest of the "
                                       "recipes asked for) take 158.")
    assert "more than the 129.2 GiB vLLM may use" in case.skip_reason and "--dtypes fp8" in case.skip_reason
    (fp8,) = mark_unfit(cases, plan, ["fp8"], gpu)
    assert fp8.skip_reason == ""
