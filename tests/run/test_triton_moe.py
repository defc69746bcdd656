"""CPU tests of kernels/triton_moe/ (and its use of kernels/triton_tuning.py): pure logic, plus the whole
pipeline under Triton's interpreter.

Self-contained (puts scripts/ on sys.path itself), so it also runs as a script. The
interpreter checks run in a subprocess of this file (TRITON_INTERPRET=1 must be set before Triton
is imported, and must not leak into other tests).

Interpreter caveats (Triton 3.9, seen on this CPU build): its tl.dot mis-reads BF16 operands (the
module upcasts them to fp32 there), its fp32->BF16 casts truncate instead of rounding to nearest,
and its fp32->FP8 casts drop the carry when rounding up crosses a power of two (1.97 -> 1.0
instead of 2.0). So the end-to-end tolerances here are looser than the GPU ones
(tests/run/test_triton_moe_gpu.py); the stage checks (GEMM 1 exact up to BF16 output rounding,
GEMM 2 against the kernel's own quantized a2) stay tight and do not depend on those casts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, SCRIPTS)

from benchmark_model_kernels.kernels import triton_tuning as tt  # noqa: E402
from benchmark_model_kernels.kernels.triton_moe import fused, tuning, wrapping  # noqa: E402
from benchmark_model_kernels.kernels.triton_moe import problem as pb  # noqa: E402


def problem(**kw):
    base = dict(num_tokens=7, hidden=256, intermediate=128, local_experts=4, global_experts=8,
                top_k=2, activation="silu_and_mul", gated=True, scheme="bf16")
    base.update(kw)
    return pb.MoeProblem(**base)


# ---------------------------------------------------------------------------- import / problem


def test_module_imports_without_triton_or_torch():
    code = ("import sys, importlib.util\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'triton'):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            f"sys.path.insert(0, {SCRIPTS!r})\n"
            "from benchmark_model_kernels.kernels.triton_moe import fused, kernels, problem, tuning\n"
            "from benchmark_model_kernels.kernels import triton_tuning\n"
            "print(len(tuning.config_space('bf16', 8)))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.strip()) > 0


@pytest.mark.parametrize("kw, field", [
    (dict(top_k=9), "top_k"),
    (dict(local_experts=9), "local_experts"),
    (dict(scheme="int4"), "scheme"),
    (dict(activation="swish"), "activation"),
    (dict(activation="relu2"), "gated"),
    (dict(activation="silu_and_mul", gated=False), "gated"),
    (dict(num_tokens=0), "num_tokens"),
    (dict(hidden=-1), "hidden"),
])
def test_problem_validation_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        problem(**kw)


def test_problem_is_frozen_and_derived_sizes():
    p = problem()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.top_k = 3  # type: ignore[misc]
    assert p.n1 == 256 and p.pairs == 14
    assert problem(activation="relu2", gated=False).n1 == 128


# ---------------------------------------------------------------------------- configs


@pytest.mark.parametrize("scheme", pb.SCHEMES)
@pytest.mark.parametrize("m", [1, 7, 8, 64, 300, 512, 2048, 8192, 65536])
def test_config_space_size_and_constraints(scheme, m):
    space = tuning.config_space(scheme, m, top_k=8, local_experts=128)
    assert 12 <= len(space) <= tuning.MAX_SEARCH_CONFIGS + 1
    assert tuning.default_config(scheme, m, top_k=8, local_experts=128) in space
    keys = [tuple(c[k] for k in tuning.CONFIG_KEYS) for c in space]
    assert len(set(keys)) == len(keys), "duplicates"
    elem = 2 if scheme == "bf16" else 1
    for c in space:
        assert tuple(c) == tuning.CONFIG_KEYS
        tuning.validate_config(c, scheme)
        assert tuning._smem_bytes(c, elem) <= tt.SMEM_BUDGET_BYTES
        if scheme == "fp8_block128":
            assert c["BLOCK_SIZE_K"] == 128 and 128 % c["BLOCK_SIZE_N"] == 0


def test_config_space_is_m_aware():
    decode = tuning.config_space("bf16", 8, top_k=8, local_experts=128)
    assert {c["BLOCK_SIZE_M"] for c in decode} == {16}
    prefill = tuning.config_space("bf16", 16384, top_k=8, local_experts=128)
    assert min(c["BLOCK_SIZE_M"] for c in prefill) >= 64
    assert {c["GROUP_SIZE_M"] for c in prefill} == {1, 16}
    # Without top_k/E it falls back to num_tokens as pairs per expert.
    assert {c["BLOCK_SIZE_M"] for c in tuning.config_space("bf16", 8)} == {16}


@pytest.mark.parametrize("scheme", pb.SCHEMES)
@pytest.mark.parametrize("m", [1, 64, 512, 4096])
def test_default_config_valid(scheme, m):
    cfg = tuning.default_config(scheme, m, top_k=8, local_experts=128)
    tuning.validate_config(cfg, scheme)
    assert tuning._smem_bytes(cfg, 2 if scheme == "bf16" else 1) <= tt.SMEM_BUDGET_BYTES


def test_default_config_decode_vs_prefill():
    assert tuning.default_config("bf16", 8, top_k=8, local_experts=128)["BLOCK_SIZE_M"] == 16
    assert tuning.default_config("bf16", 8192, top_k=8, local_experts=128)["BLOCK_SIZE_M"] == 128


def test_validate_config_block128():
    # One scale per K step: BLOCK_SIZE_K divides the block; BLOCK_SIZE_N is free (a scale is read
    # per output column), as vLLM's shipped block-FP8 tables use 256.
    cfg = tuning.default_config("fp8_block128", 64)
    with pytest.raises(ValueError, match="BLOCK_SIZE_K=256.*divide 128"):
        tuning.validate_config(dict(cfg, BLOCK_SIZE_K=256), "fp8_block128")
    with pytest.raises(ValueError, match="BLOCK_SIZE_K=128.*divide 64"):
        tuning.validate_config(cfg, "fp8_block128", block=64)
    tuning.validate_config(dict(cfg, BLOCK_SIZE_K=64, BLOCK_SIZE_N=256), "fp8_block128")


@pytest.mark.parametrize("m", [1, 64, 4096])
def test_block64_configs_keep_k_within_the_block(m):
    space = tuning.config_space("fp8_block128", m, top_k=8, local_experts=128, block=64)
    assert space and all(c["BLOCK_SIZE_K"] <= 64 for c in space)
    for c in space:
        tuning.validate_config(c, "fp8_block128", block=64)
    dflt = tuning.default_config("fp8_block128", m, top_k=8, local_experts=128, block=64)
    assert (dflt["BLOCK_SIZE_N"], dflt["BLOCK_SIZE_K"]) == (64, 64) and dflt in space


def qwen3(m, **kw):
    """Qwen3-30B-A3B's experts on one rank (hidden 2048, I 768 at TP=1, 128 experts, top_k 8)."""
    base = dict(num_tokens=m, hidden=2048, intermediate=768, local_experts=128, global_experts=128,
                top_k=8, activation="silu_and_mul", gated=True, scheme="bf16")
    base.update(kw)
    return pb.MoeProblem(**base)


def test_vllm_config_is_vllms_choice_as_its_launch_applies_it():
    cfg, note = tuning.vllm_config(qwen3(512), "NVIDIA H200")
    assert "vLLM 0.33.0 shipped E=128,N=768,device_name=NVIDIA_H200.json, M key 512" in note
    assert tuple(cfg) == tuning.CONFIG_KEYS
    # FP8 per-tensor and per-token share vLLM's file name, which it does not ship for the H200.
    for scheme in ("fp8_per_tensor", "fp8_per_token"):
        cfg, note = tuning.vllm_config(qwen3(512, scheme=scheme), "NVIDIA H200")
        assert "get_default_config (vLLM ships no E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json)" in note
        assert cfg == dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=8,
                           num_stages=3)
    # TP=1 EP=8: 16 local experts, the M x EP tokens of the layer are vLLM's M key.
    _, note = tuning.vllm_config(qwen3(4096, local_experts=16), "NVIDIA H200")
    assert "ships no E=16,N=768" in note
    # TP=4 block-128: vLLM's refined 64x64 blocks; its launch keeps BLOCK_SIZE_K within the block.
    p = qwen3(8, intermediate=192, scheme="fp8_block128", block_size=64)
    cfg, note = tuning.vllm_config(p, "NVIDIA H200")
    assert "block_shape=[64,64]" in note and cfg["BLOCK_SIZE_K"] == 64 and cfg["BLOCK_SIZE_N"] == 64


def test_vllm_config_clamps_an_8_row_tile_and_clips_k_to_the_block():
    # vLLM's shipped H200 block-FP8 table for E=128, N=512 uses BLOCK_SIZE_M 8 at M key 2.
    p = qwen3(2, intermediate=512, scheme="fp8_block128")
    cfg, note = tuning.vllm_config(p, "NVIDIA H200")
    assert "block_shape=[128,128].json, M key 2" in note and "BLOCK_SIZE_M 8" in note
    assert cfg["BLOCK_SIZE_M"] == tuning.MIN_BLOCK_M and cfg["BLOCK_SIZE_K"] <= 128
    tuning.validate_config(cfg, "fp8_block128")


def test_validate_config_errors():
    cfg = tuning.default_config("bf16", 8)
    with pytest.raises(ValueError, match="num_stages"):
        tuning.validate_config({k: v for k, v in cfg.items() if k != "num_stages"}, "bf16")
    with pytest.raises(ValueError, match="BLOCK_SIZE_N"):
        tuning.validate_config(dict(cfg, BLOCK_SIZE_N=48), "bf16")
    with pytest.raises(ValueError, match="BLOCK_SIZE_M"):
        tuning.validate_config(dict(cfg, BLOCK_SIZE_M=8), "bf16")


def test_search_config_picks_fastest_and_skips_failures():
    space = tuning.config_space("bf16", 8)
    target = space[5]

    def build(cfg):
        if cfg is space[2]:
            raise RuntimeError("out of resources")
        return (lambda c: None), (cfg,)

    def timer(fn, args):
        fn(*args)
        cfg = args[0]
        return 1.0 if cfg == target else 2.0 + cfg["num_stages"]

    results = []
    best = tt.search_config(build, space, timer, compile_workers=4, results=results)
    assert best == target
    assert len(results) == len(space) - 1


def test_search_config_all_fail():
    with pytest.raises(RuntimeError, match="no candidate"):
        tt.search_config(lambda c: (_ for _ in ()).throw(ValueError("x")),
                         tuning.config_space("bf16", 1), lambda f, a: 0.0)


# ---------------------------------------------------------------------------- cache


def test_config_key_stable_and_distinct():
    p = problem()
    k1 = tuning.config_key(p, "NVIDIA H200", "3.6.0")
    assert k1 == tuning.config_key(problem(), "NVIDIA H200", "3.6.0")
    assert k1 == ("gpu=NVIDIA_H200|scheme=bf16|E_local=4|E_global=8|H=256|I=128|top_k=2"
                  "|tokens=8|act=silu_and_mul|bias=0|triton=3.6.0")
    # Same bucket: 5..8 tokens share a key; 9 does not.
    assert tuning.config_key(problem(num_tokens=5), "NVIDIA H200", "3.6.0") == k1
    assert tuning.config_key(problem(num_tokens=9), "NVIDIA H200", "3.6.0") != k1
    others = {tuning.config_key(problem(**kw), "NVIDIA H200", "3.6.0") for kw in (
        dict(scheme="fp8_per_token"), dict(local_experts=2), dict(global_experts=16),
        dict(hidden=512), dict(intermediate=256), dict(top_k=1), dict(activation="swigluoai"),
        dict(has_bias=True), dict(scheme="fp8_block128", block_size=64),
        dict(scheme="fp8_per_tensor", dynamic_scale=True))}
    assert k1 not in others and len(others) == 10
    assert "|block=64|" in tuning.config_key(problem(scheme="fp8_block128", block_size=64), "H200", "3")
    assert "|block=" not in tuning.config_key(problem(scheme="fp8_block128"), "H200", "3")
    assert tuning.config_key(p, "NVIDIA H100", "3.6.0") != k1
    assert tuning.config_key(p, "NVIDIA H200", "3.5.1") != k1


def test_token_bucket():
    assert [tuning.token_bucket(m) for m in (1, 2, 3, 8, 9, 300, 512, 513)] == [
        1, 2, 4, 8, 16, 512, 512, 1024]


def test_cache_round_trip(tmp_path):
    key = tuning.config_key(problem(), "NVIDIA H200", "3.6.0")
    cfg = tuning.default_config("bf16", 7)
    assert tt.load_cached_config(str(tmp_path), key) is None
    path = tt.store_config(str(tmp_path / "sub"), key, cfg)
    assert os.path.isfile(path)
    assert tt.load_cached_config(str(tmp_path / "sub"), key) == cfg
    assert tt.load_cached_config(str(tmp_path / "sub"), key + "x") is None
    # Overwrite in place; no temporary files left behind.
    cfg2 = dict(cfg, num_stages=5)
    tt.store_config(str(tmp_path / "sub"), key, cfg2)
    assert tt.load_cached_config(str(tmp_path / "sub"), key) == cfg2
    assert [f for f in os.listdir(tmp_path / "sub") if f.endswith(".tmp")] == []


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", '{"key": 1}',
                                     '{"key": "K", "config": {"BLOCK_SIZE_M": "x"}}'])
def test_cache_tolerates_corrupt_file(tmp_path, content):
    key = "K"
    with open(tt.cache_path(str(tmp_path), key), "w") as f:
        f.write(content)
    assert tt.load_cached_config(str(tmp_path), key) is None
    tt.store_config(str(tmp_path), key, tuning.default_config("bf16", 1))
    assert tt.load_cached_config(str(tmp_path), key) == tuning.default_config("bf16", 1)


# ---------------------------------------------------------------------------- torch-only logic


try:
    import torch
except ImportError:  # pragma: no cover - the CPU venv has torch
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


@needs_torch
def test_routing_is_seeded_uniform_distinct():
    ids, w = pb.uniform_routing(64, 16, 4, seed=3)
    ids2, w2 = pb.uniform_routing(64, 16, 4, seed=3)
    assert torch.equal(ids, ids2) and torch.equal(w, w2)
    assert all(len(set(r)) == 4 for r in ids.tolist())
    assert torch.allclose(w.sum(-1), torch.ones(64))


@needs_torch
def test_build_inputs_shapes_and_ep_routing():
    p = problem(scheme="fp8_block128", num_tokens=16, has_bias=True)
    inp = pb.build_inputs(p, "cpu", seed=0)
    assert inp["x"].dtype == torch.float8_e4m3fn and inp["x_bf16"].dtype == torch.bfloat16
    assert inp["w1"].shape == (4, 256, 256) and inp["w1_scale"].shape == (4, 2, 2)
    assert inp["w2"].shape == (4, 256, 128) and inp["w2_scale"].shape == (4, 2, 1)
    assert inp["a1_scale"].shape == (16, 2)
    assert inp["b1"].shape == (4, 256) and inp["b2"].shape == (4, 256)
    assert inp["topk_ids"].dtype == torch.int32 and inp["topk_ids"].shape == (16, 2)
    # Routing is over all 8 global experts: some pairs belong to other ranks.
    assert (inp["topk_ids"] >= 4).any() and (inp["topk_ids"] < 4).any()
    pt = pb.build_inputs(problem(scheme="fp8_per_tensor"), "cpu")
    assert pt["a1_scale"].shape == (1,) and pt["w1_scale"].shape == (4,)
    assert pt["a2_scale"].shape == (1,) and float(pt["a2_scale"]) > 0
    tok = pb.build_inputs(problem(scheme="fp8_per_token"), "cpu")
    assert tok["a1_scale"].shape == (7, 1) and tok["w1_scale"].shape == (4, 256, 1)


@needs_torch
@pytest.mark.parametrize("scheme", ("bf16", *pb.FP8_SCHEMES))
def test_expert_weights_drawn_a_few_experts_at_a_time_equal_one_draw(scheme, monkeypatch):
    """DeepSeek-V3's experts at TP=1 do not fit the GPU in fp32 with the quantizer's temporaries,
    so weights are drawn and quantized in chunks of experts; the chunks put together are what
    quantizing the whole draw gives."""
    draws = torch.randn(5, 200, 300)
    taken = []

    def randn(n, rows, cols, scale):
        start = sum(taken)
        taken.append(n)
        return draws[start:start + n] * scale

    monkeypatch.setattr(pb, "WEIGHT_CHUNK_BYTES", 2 * 200 * 300 * 4)
    w, s = pb._expert_weights(scheme, 5, 200, 300, randn)
    assert taken == [2, 2, 1]
    whole = draws * 300 ** -0.5
    if scheme == "bf16":
        assert s is None and torch.equal(w, whole.to(torch.bfloat16))
        return
    q, qs = pb._quant_weight(whole, scheme)
    assert w.dtype == torch.float8_e4m3fn and torch.equal(w.view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(s, qs)


@needs_torch
@pytest.mark.parametrize("scheme", pb.FP8_SCHEMES)
def test_weight_quant_round_trip(scheme):
    w = torch.randn(3, 200, 300) * 0.05
    q, s = pb._quant_weight(w, scheme)
    d = pb._dequant_weight(q, s, scheme)
    rel = ((d - w).norm() / w.norm()).item()
    assert rel < 0.05, rel


@needs_torch
def test_reference_skips_nonlocal_and_zero_rows():
    p = problem(num_tokens=12)
    inp = pb.build_inputs(p, "cpu", seed=1)
    out = pb.reference_moe(p, inp)
    all_remote = (inp["topk_ids"] >= p.local_experts).all(dim=1)
    assert torch.all(out[all_remote] == 0)
    assert torch.all(out[~all_remote].abs().sum(-1) > 0)


@needs_torch
def test_activation_ref_swigluoai_interleaved():
    h = torch.tensor([[1.0, 2.0, 10.0, -9.0]])
    got = pb.activation_ref("swigluoai", h)
    g = torch.tensor([1.0, 7.0])
    u = torch.tensor([2.0, -7.0])
    want = (u + 1) * g * torch.sigmoid(1.702 * g)
    assert torch.allclose(got[0], want)


@needs_torch
def test_hbm_floor():
    p = pb.MoeProblem(512, 2048, 768, 128, 128, 8, "silu_and_mul", True, "bf16")
    assert pb.expected_touched_experts(p) == pytest.approx(128.0, rel=1e-6)
    per_expert = (2 * 768 * 2048 + 2048 * 768) * 2
    assert pb.hbm_floor_bytes(p) == pytest.approx(128 * per_expert + 2 * 512 * 2048 * 2, rel=1e-6)
    p1 = pb.MoeProblem(1, 2048, 768, 128, 128, 8, "silu_and_mul", True, "bf16")
    assert pb.expected_touched_experts(p1) == pytest.approx(128 * (1 - (127 / 128) ** 8))


def test_naive_block_assignment_follows_vllm_rule():
    # vLLM fused_moe.py `_prepare_expert_assignment`: no expert map and M*top_k*4 <= E.
    qwen = dict(hidden=2048, intermediate=768, local_experts=128, global_experts=128, top_k=8)
    assert wrapping.naive_block_assignment(problem(num_tokens=4, **qwen))
    assert not wrapping.naive_block_assignment(problem(num_tokens=5, **qwen))
    # expert parallel (an expert map in vLLM): never naive
    assert not wrapping.naive_block_assignment(problem(num_tokens=1, **dict(qwen, local_experts=16)))


def test_passes_of_vllms_call_under_ep_sweep_every_slot():
    # Qwen3-30B-A3B at TP=1 EP=8, M=512: the layer receives 4096 tokens (32768 slots); this rank
    # computes its 16 experts' pairs, vLLM's wrapping sweeps every slot.
    p = qwen3(4096, local_experts=16, scheme="fp8_per_token")
    got = {x.name: x for x in wrapping.passes(p)}
    assert list(got) == ["align", "gemm1", "activation", "a2_quant", "zero_fill", "gemm2", "moe_sum"]
    slots = 4096 * 8
    assert (got["activation"].rows, got["activation"].cols) == (slots, 768)
    assert got["a2_quant"].elements == slots * 768
    assert got["zero_fill"].elements == got["moe_sum"].elements == slots * 2048
    assert got["gemm1"].local_only and got["gemm2"].local_only
    assert not any(x.local_only for x in got.values() if not x.name.startswith("gemm"))


def test_passes_by_scheme_and_layout():
    names = lambda p: [x.name for x in wrapping.passes(p)]  # noqa: E731
    # No EP: no zero fill (every slot is written by GEMM 2); BF16: no quantization.
    assert names(qwen3(512)) == ["align", "gemm1", "activation", "gemm2", "moe_sum"]
    # Naive block assignment (M*top_k*4 <= experts, no EP): no align.
    assert names(qwen3(4))[0] == "gemm1"
    # Online fp8_per_tensor: the amax reduction before the quantization.
    assert names(qwen3(64, scheme="fp8_per_tensor", dynamic_scale=True))[2:5] == [
        "activation", "a2_scale", "a2_quant"]
    assert "a2_scale" not in names(qwen3(64, scheme="fp8_per_tensor"))
    block = wrapping.passes(qwen3(64, scheme="fp8_block128", block_size=64, intermediate=192))
    assert "per 1x64 group" in next(x.source for x in block if x.name == "a2_quant")


@pytest.mark.parametrize("kw, field", [
    (dict(block_size=64), "block_size"),                         # only block-FP8 refines
    (dict(scheme="fp8_block128", block_size=48), "block_size"),
    (dict(dynamic_scale=True, scheme="fp8_per_token"), "dynamic_scale"),
])
def test_block_size_and_dynamic_scale_validation(kw, field):
    with pytest.raises(ValueError, match=field):
        problem(**kw)


def test_align_paths_by_pair_count():
    assert fused._align_plan(64)[0] == "single"
    assert fused._align_plan(1024)[0] == "single"
    assert fused._align_plan(1025) == ("split", 512, 3)
    assert fused._align_plan(16384)[0] == "split"
    assert fused._align_plan(16385)[0] == "multi"


# ---------------------------------------------------------------------------- interpreter

#: Interpreter end-to-end tolerances (relative L2 vs reference_moe). BF16: the interpreter's
#: truncating casts double the rounding error of GPU round-to-nearest (~1.3% measured vs ~0.5%).
#: FP8: a2 quantization (~2.5-3% on GPU) plus the interpreter's broken round-up carry.
INTERP_TOL = {"bf16": 2.5e-2, "fp8_per_tensor": 0.15, "fp8_per_token": 0.12, "fp8_block128": 0.12}
#: Stage checks: one BF16 output rounding (interpreter truncation: <= 2^-8 relative, ~0.3% L2).
INTERP_STAGE_TOL = 8e-3


def _interp_checks(scheme: str) -> dict:
    """Runs in the subprocess (TRITON_INTERPRET=1): every activation for `scheme`."""
    import torch

    results = {}
    cases = [(act, dict()) for act in pb.ACTIVATIONS]
    cases += [("swigluoai", dict(has_bias=True)), ("silu_and_mul", dict(has_bias=True)),
              ("silu_and_mul", dict(local_experts=8, num_tokens=3)),
              ("relu2", dict(num_tokens=1, top_k=3)),
              # 2 pairs * 4 <= 8 experts, no EP: vLLM's naive block assignment (no align)
              ("silu_and_mul", dict(num_tokens=1, local_experts=8, global_experts=8)),
              ("silu_and_mul", dict(local_experts=8))]  # no EP: every slot is this rank's
    if scheme == "fp8_per_tensor":
        cases += [(act, dict(dynamic_scale=True)) for act in ("silu_and_mul", "relu2")]
    if scheme == "fp8_block128":  # vLLM's refined 64x64 blocks of a 192-wide shard
        cases += [("silu_and_mul", dict(block_size=64, intermediate=192)),
                  ("swigluoai", dict(block_size=64, intermediate=192, has_bias=True))]
    for act, extra in cases:
        p = problem(scheme=scheme, activation=act, gated=act in pb.GATED_ACTIVATIONS, **extra)
        inp = pb.build_inputs(p, "cpu", seed=11)
        cfg = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=32,
                   BLOCK_SIZE_K=p.block_size if scheme == "fp8_block128" else 64, GROUP_SIZE_M=1,
                   num_warps=4, num_stages=2)
        fn, args = fused.make_fused_moe(p, inp, cfg)
        # Workspaces: cache1 = GEMM 1 out, act_out = the BF16 activation, cache2(+scale) = a2,
        # cache3 = GEMM 2 out. NaN in cache3 first: under EP the zero fill must clear the rows of
        # other ranks' pairs, which the sum reads.
        cache1, act_out, cache2, cache2_scale, cache3 = args[16:21]
        cache3.fill_(float("nan"))
        out = fn(*args)
        ref = pb.reference_moe(p, inp)
        e2e = ((out.float() - ref).norm() / ref.norm()).item()
        x = pb._dequantized_x(p, inp)
        ids = inp["topk_ids"].flatten().long()
        wts = inp["topk_weights"].flatten()
        h_err, y_err = [], []
        for r in range(p.pairs):
            e = int(ids[r])
            if e >= p.local_experts:
                continue
            h = x[r // p.top_k] @ pb._expert_weight(p, inp, "w1", e).T
            if inp["b1"] is not None:
                h = h + inp["b1"][e]
            h_err.append(((cache1[r].float() - h).norm() / h.norm()).item())
            if scheme == "bf16":
                a2 = act_out[r].float()
            else:
                s = inp["a2_scale"] if scheme == "fp8_per_tensor" and not p.dynamic_scale else (
                    cache2_scale if scheme == "fp8_per_tensor" else cache2_scale[r:r + 1])
                a2 = pb._dequant_act(cache2[r:r + 1], s, scheme, p.block_size)[0]
            y = a2 @ pb._expert_weight(p, inp, "w2", e).T
            if inp["b2"] is not None:
                y = y + inp["b2"][e]
            y = y * wts[r]
            y_err.append(((cache3[r].float() - y).norm() / y.norm()).item())
        remote_rows = (inp["topk_ids"] >= p.local_experts).all(dim=1)
        dyn = 0.0  # the dynamic per-tensor scale: amax / 448 of the whole activation
        if p.dynamic_scale:
            want = act_out.float().abs().max() / pb.FP8_MAX
            dyn = (abs(float(cache2_scale) - float(want)) / float(want))
        results[f"{act}{sorted(extra.items())}"] = dict(
            e2e=e2e, h=max(h_err), y=max(y_err), dyn=dyn,
            remote_zero=bool(torch.all(out[remote_rows] == 0)), finite=bool(out.isfinite().all()))
    if scheme != "bf16":
        for extra in [{}] + ([dict(dynamic_scale=True)] if scheme == "fp8_per_tensor" else []) + (
                [dict(block_size=64)] if scheme == "fp8_block128" else []):
            p = problem(scheme=scheme, num_tokens=9, **extra)
            inp = pb.build_inputs(p, "cpu", seed=2)
            fn, args = fused.quant_input_fn(p, inp)
            xq, xs = fn(*args)
            static = inp["a1_scale"] if scheme == "fp8_per_tensor" and not p.dynamic_scale else None
            want_q, want_s = pb._quant_act_torch(inp["x_bf16"], scheme, static, p.block_size)
            results[f"quant_input{sorted(extra.items())}"] = dict(
                scale=((xs - want_s).abs().max() / want_s.abs().max()).item(),
                deq=((pb._dequant_act(xq, xs, scheme, p.block_size) - inp["x_bf16"].float()).norm()
                     / inp["x_bf16"].float().norm()).item())
    return results


@pytest.mark.parametrize("scheme", pb.SCHEMES)
def test_pipeline_under_interpreter(scheme):
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--interpret", scheme],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    results = json.loads(res.stdout.strip().splitlines()[-1])
    for name, r in results.items():
        if name.startswith("quant_input"):
            assert r["scale"] < 1e-5, r
            assert r["deq"] < 0.1, r  # fp8 of x; interpreter round-up bug included
            continue
        assert r["finite"] and r["remote_zero"], (name, r)
        assert r["h"] < INTERP_STAGE_TOL, (name, r)
        assert r["y"] < INTERP_STAGE_TOL, (name, r)
        assert r["e2e"] < INTERP_TOL[scheme], (name, r)
        assert r["dyn"] < 1e-6, (name, r)


def test_align_under_interpreter():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--align"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert res.stdout.strip().splitlines()[-1] == "align ok"


def _align_checks() -> None:
    """The three align paths (one program up to 1024 pairs; one program's offsets and a
    multi-program scatter up to 16384; memset + 3 kernels beyond) against the definition.

    Slots past num_tokens_post_padded are never read (the GEMM programs of those blocks exit),
    so only [0, num_tokens_post_padded) is checked: real pairs of the block's expert or the
    sentinel M*top_k.
    """
    import torch

    for m, top_k, e_local, e_global, bm in [(5, 2, 4, 8, 16), (1, 8, 16, 64, 16),
                                            (300, 8, 16, 64, 64), (600, 8, 128, 128, 32),
                                            (2100, 2, 16, 64, 16), (1100, 8, 60, 64, 128),
                                            (512, 8, 128, 128, 64), (1024, 8, 128, 128, 16),
                                            (1030, 8, 200, 256, 256), (257, 1, 3, 5, 32),
                                            (40, 1, 1, 1, 16), (2100, 8, 16, 64, 16)]:
        p = pb.MoeProblem(m, 128, 128, e_local, e_global, top_k, "silu_and_mul", True, "bf16")
        inp = pb.build_inputs(p, "cpu", seed=3)
        fn, args = fused.align_only_fn(p, inp, bm)
        sorted_ids, expert_ids, ntpp = fn(*args)
        ids = inp["topk_ids"].flatten()
        n = int(ntpp)
        counts = torch.bincount(ids[ids < e_local].long(), minlength=e_local)
        assert n == sum(-(-c // bm) * bm for c in counts.tolist()), (m, n)
        blocks = expert_ids.tolist()
        nb = n // bm
        assert all(b == -1 for b in blocks[nb:])
        assert blocks[:nb] == sorted(blocks[:nb])
        seen = []
        for b in range(nb):
            assert 0 <= blocks[b] < e_local
            for t in sorted_ids[b * bm:(b + 1) * bm].tolist():
                assert 0 <= t <= p.pairs, t
                if t != p.pairs:
                    assert int(ids[t]) == blocks[b]
                    seen.append(t)
        assert sorted(seen) == [i for i in range(p.pairs) if ids[i] < e_local]
    print("align ok")


if __name__ == "__main__":
    if sys.argv[1] == "--interpret":
        print(json.dumps(_interp_checks(sys.argv[2])))
    elif sys.argv[1] == "--align":
        _align_checks()
