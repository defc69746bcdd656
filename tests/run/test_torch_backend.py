"""torch backend: case validation, routing, and every op checked against a plain reference.

CPU tests run the real torch ops where PyTorch has a CPU kernel (F.linear, _scaled_mm,
_grouped_mm); torch._scaled_grouped_mm is CUDA-only, so on the CPU its call is checked through
PyTorch's meta kernels (which carry the CUDA op's layout checks) and its wiring through a plain
stand-in; the real op is checked on the GPU (`@requires_gpu`).
"""

from __future__ import annotations

import importlib.util

import pytest

from benchmark_model_kernels.core.case_schema import Case
from benchmark_model_kernels.core.results_schema import RunSettings
from benchmark_model_kernels.kernels import torch_ops as tb
from benchmark_model_kernels.kernels.timing import UnsupportedCase, measurement_from_times
from builders import gemm_case, moe_case
from support import requires_gpu

torch = pytest.importorskip("torch")


def moe_reference(x, ids, weights, w1, w2, act, e_local):
    """Token by token, in float32: sum_j w_j * W2[e_j] act(W1[e_j] x) over local experts."""
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    xf, w1f, w2f = x.float(), w1.float(), w2.float()
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            if e < e_local:
                hmid = act(xf[t : t + 1] @ w1f[e].T)
                out[t] += float(weights[t, j]) * (hmid @ w2f[e].T)[0]
    return out


def rel_err(got, ref):
    return float((got.float() - ref.float()).abs().max() / ref.float().abs().max().clamp(min=1e-6))


# ---------------------------------------------------------------------------- validation


def test_check_case_rejects_wrong_dtype_and_routine():
    with pytest.raises(ValueError, match="dtype='fp8'"):
        tb.check_case(gemm_case(64, routine="torch.linear", backend="torch", dtype="fp8"))
    with pytest.raises(ValueError, match="routine='mm_bf16'"):
        tb.check_case(gemm_case(64, routine="mm_bf16", backend="torch"))
    with pytest.raises(ValueError, match="variant"):
        tb.check_case(gemm_case(64, routine="torch._scaled_mm", backend="torch", dtype="fp8"))
    with pytest.raises(ValueError, match="MoeShape"):
        tb.check_case(gemm_case(64, routine="torch._grouped_mm", backend="torch"))


def test_check_case_alignment_is_unsupported_with_reason():
    with pytest.raises(UnsupportedCase, match=r"multiples of 16 elements.*K=72"):
        tb.check_case(gemm_case(64, k=72, routine="torch._scaled_mm", backend="torch", dtype="fp8",
                                variant="per_token"))
    with pytest.raises(UnsupportedCase, match=r"I=36"):
        tb.check_case(moe_case(36, hidden=64, experts=4, top_k=2, routine="torch._grouped_mm", backend="torch"))
    tb.check_case(gemm_case(64, k=72, routine="torch.linear", backend="torch"))  # F.linear has no alignment need
    tb.check_case(moe_case(40, hidden=64, experts=4, top_k=2, routine="torch._grouped_mm",
                           backend="torch"))  # bf16: multiples of 8 suffice


def test_skip_reason_becomes_unsupported():
    case = gemm_case(64, routine="torch.linear", backend="torch")
    case = Case(**{**case.__dict__, "skip_reason": "known gap"})
    with pytest.raises(UnsupportedCase, match="known gap"):
        tb.run_case(case, RunSettings())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_run_case_without_gpu_is_unsupported():
    with pytest.raises(UnsupportedCase, match="needs a CUDA GPU"):
        tb.run_case(gemm_case(64, routine="torch.linear", backend="torch"), RunSettings())


# ---------------------------------------------------------------------------- routing


def test_uniform_routing_is_seeded_distinct_and_normalized():
    ids, w = tb.uniform_routing(256, 16, 4)
    ids2, w2 = tb.uniform_routing(256, 16, 4)
    assert torch.equal(ids, ids2) and torch.equal(w, w2)
    assert ids.shape == (256, 4) and ids.dtype == torch.int64
    assert all(len(set(r.tolist())) == 4 for r in ids)  # distinct experts per token
    assert torch.allclose(w.sum(-1), torch.ones(256))
    counts = torch.bincount(ids.reshape(-1), minlength=16).float()
    assert counts.min() > 0.6 * counts.mean() and counts.max() < 1.4 * counts.mean()


def test_activation_functions():
    h = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
    assert torch.allclose(tb.activation_fn("Swiglu", True)(h),
                          torch.nn.functional.silu(h[:, :2]) * h[:, 2:])
    assert torch.allclose(tb.activation_fn("Relu2", False)(h), torch.tensor([[1.0, 0.0, 9.0, 0.25]]))
    big = torch.tensor([[10.0, 1.0, 9.0, -9.0]])
    out = tb.activation_fn("SwigluBias", True)(big)  # gate clamped to 7, up to [-7, 7]
    g = torch.tensor([7.0, 1.0])
    assert torch.allclose(out[0], (torch.tensor([7.0, -7.0]) + 1) * g * torch.sigmoid(1.702 * g))
    with pytest.raises(UnsupportedCase, match="'Relu2' \\(gated\\)"):
        tb.activation_fn("Relu2", True)


# ---------------------------------------------------------------------------- GEMM ops on CPU



def run_cpu(op):
    """Run a torch op on the CPU, or skip when this torch has no CPU kernel for it (torch 2.11's
    CPU _scaled_mm takes per-tensor scales only; the GPU tests cover those ops there)."""
    try:
        return op.fn(*op.args)
    except (RuntimeError, NotImplementedError) as e:
        if "CPU" in str(e) or "cpu" in str(e):
            pytest.skip(f"no CPU kernel in torch {torch.__version__}: {str(e).splitlines()[0][:120]}")
        raise


def test_linear_matches_reference_cpu():
    op = tb.build(gemm_case(48, m=5, routine="torch.linear", backend="torch"), "cpu")
    out = run_cpu(op)
    ref = op.arg("x").float() @ op.arg("w").float().T
    assert out.shape == (5, 48) and rel_err(out, ref) < 1e-2


@pytest.mark.parametrize("variant", ["per_tensor", "per_token"])
def test_scaled_mm_matches_dequantized_reference_cpu(variant):
    op = tb.build(gemm_case(64, k=128, routine="torch._scaled_mm", backend="torch", dtype="fp8",
                            variant=variant), "cpu")
    out = run_cpu(op)
    xq, wq, sa, sb = (op.arg(n) for n in ("xq", "wq", "scale_a", "scale_b"))
    ref = (xq.float() * sa) @ (wq.float() * sb.reshape(-1, 1) if variant == "per_token" else wq.float() * sb).T
    assert out.dtype == torch.bfloat16 and out.shape == (8, 64)
    assert rel_err(out, ref) < 1e-2
    assert sa.shape == ((8, 1) if variant == "per_token" else ())


# ---------------------------------------------------------------------------- MoE on CPU


@pytest.mark.parametrize(
    "m, h, i, e, eg, top_k, activation, gated",
    [
        (16, 64, 32, 8, 8, 2, "Swiglu", True),  # TP-style: all experts local
        (32, 64, 48, 4, 16, 4, "Swiglu", True),  # EP: 4 of 16 experts on this rank
        (8, 32, 64, 6, 6, 3, "Relu2", False),  # non-gated (Nemotron-H style)
        (8, 32, 32, 4, 4, 2, "SwigluBias", True),  # GPT-OSS clamp
        (1, 64, 32, 8, 8, 1, "Geglu", True),
    ],
)
def test_grouped_mm_moe_matches_reference_cpu(m, h, i, e, eg, top_k, activation, gated):
    case = moe_case(i, m=m, hidden=h, experts=e, global_experts=eg, top_k=top_k, routine="torch._grouped_mm",
                    backend="torch", activation=activation, gated=gated)
    op = tb.build(case, "cpu")
    out = run_cpu(op)
    ids, w = op.arg("topk_ids"), op.arg("topk_weights")
    assert op.local_pairs == int((ids < e).sum())
    ref = moe_reference(op.arg("x"), ids, w, op.arg("w1"), op.arg("w2"),
                        tb.activation_fn(activation, gated), e)
    assert out.shape == (m, h) and out.dtype == torch.bfloat16
    assert rel_err(out, ref) < 3e-2


def test_moe_zero_local_tokens_is_handled_and_noted():
    # Seeded routing: 1 token, top-1 over 64 experts lands outside the first expert.
    ids, _ = tb.uniform_routing(1, 64, 1)
    assert int(ids[0, 0]) != 0
    op = tb.build(moe_case(32, m=1, hidden=32, experts=1, global_experts=64, top_k=1, routine="torch._grouped_mm",
                           backend="torch"), "cpu")
    assert op.local_pairs == 0 and "no (token, expert) pair" in op.note
    out = run_cpu(op)
    assert out.shape == (1, 32) and not out.any()


def test_scaled_grouped_mm_moe_layouts_pass_torch_meta_checks():
    """The CUDA op's stride/scale/offs checks (PyTorch meta kernel) accept our call."""
    op = tb.build(moe_case(32, m=16, hidden=64, experts=4, global_experts=8, top_k=2,
                           routine="torch._scaled_grouped_mm", backend="torch", dtype="fp8"), "meta")
    out = run_cpu(op)
    assert out.shape == (16, 64) and out.dtype == torch.bfloat16
    assert op.arg("w1q").dtype == torch.float8_e4m3fn and op.arg("w1s").shape == (4, 64)
    assert op.arg("w2s").shape == (4, 64)


def _stand_in_scaled_grouped_mm(a, b, scale_a, scale_b, offs=None, out_dtype=None):
    """Plain dequantize-and-matmul per group: plumbing stand-in for the CUDA-only op."""
    out, start = [], 0
    for g, end in enumerate(offs.tolist()):
        af = a[start:end].float() * scale_a[start:end, None]
        bf = b[g].float() * scale_b[g][None, :]
        out.append(af @ bf)
        start = end
    return torch.cat(out).to(out_dtype)


def test_scaled_grouped_mm_moe_wiring_with_stand_in(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_grouped_mm", _stand_in_scaled_grouped_mm, raising=False)
    case = moe_case(32, m=24, hidden=64, experts=4, global_experts=8, top_k=2, routine="torch._scaled_grouped_mm",
                    backend="torch", dtype="fp8")
    op = tb.build(case, "cpu")
    out = run_cpu(op)
    w1 = op.arg("w1q").float() * op.arg("w1s")[:, :, None]
    w2 = op.arg("w2q").float() * op.arg("w2s")[:, :, None]
    x = op.arg("xq").float() * op.arg("xscale")[:, None]
    assert op.arg("xq").dtype == torch.float8_e4m3fn and op.arg("xscale").shape == (24,)
    ref = moe_reference(x, op.arg("topk_ids"), op.arg("topk_weights"), w1, w2,
                        tb.activation_fn("Swiglu", True), 4)
    assert rel_err(out, ref) < 8e-2  # two FP8 activation quantizations


# ---------------------------------------------------------------------------- errors and timing


def test_unsupported_error_classification():
    err = RuntimeError("torch._scaled_grouped_mm is only supported on CUDA devices with sm90+\nmore")
    u = tb.unsupported_from_error("torch._scaled_grouped_mm", err, (8, 0))
    assert isinstance(u, UnsupportedCase) and "sm_80" in str(u) and "more" not in str(u)
    assert tb.unsupported_from_error("torch._grouped_mm", RuntimeError("CUDA out of memory. sm_90"), (9, 0)) is None
    assert tb.unsupported_from_error("torch.linear", RuntimeError("illegal memory access"), (9, 0)) is None


def test_measurement_from_times_detects_cupti_fallback():
    m = measurement_from_times([0.010, 0.012, 0.011], "", cuda_graph=True)
    assert m.timer == "cupti" and m.median_us == pytest.approx(11.0) and m.note == ""
    warn = "CUPTI is not installed. Try 'pip install -U cupti-python'. Falling back to CUDA events for benchmarking."
    m = measurement_from_times([0.010], warn, cuda_graph=True)
    assert m.timer == "cuda_graph" and "Falling back" in m.note
    assert measurement_from_times([0.010], warn, cuda_graph=False).timer == "cuda_events"
    with pytest.raises(ValueError):
        measurement_from_times([], "", cuda_graph=True)


# ---------------------------------------------------------------------------- GPU


def _cuda_reference_check(case, tol):
    op = tb.build(case, "cuda")
    out = run_cpu(op)
    torch.cuda.synchronize()
    names = set(op.names)
    if "w1" in names:
        ref = moe_reference(op.arg("x"), op.arg("topk_ids").cpu(), op.arg("topk_weights").cpu(),
                            op.arg("w1"), op.arg("w2"), tb.activation_fn(case.activation, case.gated),
                            case.physical.experts)
    elif "w1q" in names:
        w1 = op.arg("w1q").float() * op.arg("w1s")[:, :, None]
        w2 = op.arg("w2q").float() * op.arg("w2s")[:, :, None]
        x = op.arg("xq").float() * op.arg("xscale")[:, None]
        ref = moe_reference(x, op.arg("topk_ids").cpu(), op.arg("topk_weights").cpu(),
                            w1, w2, tb.activation_fn(case.activation, case.gated), case.physical.experts)
    elif "wq" in names:
        sb = op.arg("scale_b")
        wf = op.arg("wq").float() * (sb.reshape(-1, 1) if sb.dim() else sb)
        ref = (op.arg("xq").float() * op.arg("scale_a")) @ wf.T
    else:
        ref = op.arg("x").float() @ op.arg("w").float().T
    assert rel_err(out, ref) < tol, case.case_id
    return op, out


@requires_gpu
@pytest.mark.parametrize(
    "case, tol",
    [
        (gemm_case(256, k=512, routine="torch.linear", backend="torch"), 1e-2),
        (gemm_case(256, k=512, routine="torch._scaled_mm", backend="torch", dtype="fp8", variant="per_tensor"), 1e-2),
        (gemm_case(256, k=512, routine="torch._scaled_mm", backend="torch", dtype="fp8", variant="per_token"), 1e-2),
        (moe_case(128, m=32, hidden=256, experts=8, top_k=2, routine="torch._grouped_mm", backend="torch"), 3e-2),
        (moe_case(128, m=64, hidden=256, experts=4, global_experts=16, top_k=4, routine="torch._grouped_mm",
                  backend="torch"), 3e-2),  # EP
        (moe_case(128, m=16, hidden=256, experts=8, top_k=2, routine="torch._grouped_mm", backend="torch",
                  activation="Relu2", gated=False), 3e-2),
        (moe_case(128, m=32, hidden=256, experts=8, top_k=2, routine="torch._scaled_grouped_mm", backend="torch",
                  dtype="fp8"), 8e-2),
        (moe_case(128, m=64, hidden=256, experts=4, global_experts=16, top_k=4, routine="torch._scaled_grouped_mm",
                  backend="torch", dtype="fp8"), 8e-2),
    ],
    ids=lambda v: v.case_id if isinstance(v, Case) else str(v),
)
def test_torch_ops_match_reference_on_gpu(case, tol):
    try:
        _cuda_reference_check(case, tol)
    except RuntimeError as err:
        u = tb.unsupported_from_error(case.routine, err, torch.cuda.get_device_capability())
        if u is None:
            raise
        pytest.skip(str(u))


@requires_gpu
def test_moe_ops_are_cuda_graph_capturable():
    for routine, dtype in (("torch._grouped_mm", "bf16"), ("torch._scaled_grouped_mm", "fp8")):
        op = tb.build(moe_case(128, m=64, hidden=256, experts=4, global_experts=16, top_k=4, routine=routine,
                               backend="torch", dtype=dtype), "cuda")
        eager = op.fn(*op.args)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            op.fn(*op.args)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = op.fn(*op.args)
        graph.replay()
        torch.cuda.synchronize()
        # index_add_ uses atomics: the summation order may differ, the values may not much.
        assert rel_err(captured, eager) < 1e-2, routine


@requires_gpu
@pytest.mark.skipif(importlib.util.find_spec("flashinfer") is None, reason="needs flashinfer")
def test_run_case_times_on_gpu():
    settings = RunSettings(dry_run_iters=2, num_iters=5)
    m = tb.run_case(gemm_case(6144, k=4096, routine="torch.linear", backend="torch"), settings)
    assert m.median_us > 0 and m.timer in ("cupti", "cuda_graph", "cuda_events")
    m = tb.run_case(moe_case(routine="torch._grouped_mm", backend="torch"), settings)
    assert m.median_us > 0
