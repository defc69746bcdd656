"""The `torch` backend: PyTorch/cuBLAS baselines timed in-process with FlashInfer's own timer.

Each torch Case becomes one timed op, built once per case, timed by `timing.bench` (FlashInfer's
`bench_gpu_time`: CUPTI, cold L2, CUDA graphs, same warm-up and iteration counts as the driver),
so a torch row is comparable with a FlashInfer row of the same shape. No FlashInfer checkout and
no vLLM are needed; only the `flashinfer` wheel for the timer.

Routines (Case.routine):

* "torch.linear" (bf16): `torch.nn.functional.linear` = cuBLAS, vLLM's unquantized default.
* "torch._scaled_mm" (fp8): pre-quantized FP8 activations and weights, BF16 output; variant
  "per_tensor" (scalar scales, static W8A8) or "per_token" (activation scale per row, weight
  scale per output channel: vLLM's dynamic per-token path). Activation quantization is NOT in
  this row; the `.q` (with_quant) row adds it (quant_timing.py).
* "torch._grouped_mm" (bf16) and "torch._scaled_grouped_mm" (fp8): one MoE layer's routed experts,
  see `MOE_ROW_NOTE`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..core.case_schema import Case, GemmShape, MoeShape
from . import correctness
from .timing import Measurement, UnsupportedCase, bench

ROUTINES = ("torch.linear", "torch._scaled_mm", "torch._grouped_mm", "torch._scaled_grouped_mm")
#: Recipe each routine times.
ROUTINE_DTYPE = {
    "torch.linear": "bf16",
    "torch._scaled_mm": "fp8",
    "torch._grouped_mm": "bf16",
    "torch._scaled_grouped_mm": "fp8",
}
SCALED_MM_VARIANTS = ("per_tensor", "per_token")
#: Seed of the uniform routing (and of the random weights/activations); fixed so rows repeat.
ROUTING_SEED = 0
#: Largest finite float8_e4m3fn value.
FP8_MAX = 448.0
#: Minimum row/byte alignment of a GEMM dimension for these torch kernels (bytes).
_ALIGN_BYTES = 16

MOE_ROW_NOTE = (
    "torch MoE rows (torch._grouped_mm BF16, torch._scaled_grouped_mm FP8) time what a fused-MoE "
    "kernel does for one layer on one rank: sort the (token, expert) pairs by expert and keep "
    "those routed to this rank's experts [0, E_local), gather the token rows, grouped GEMM1 "
    "(H -> 2I gated, I otherwise), the activation, grouped GEMM2 (I -> H), and the routing-weight "
    "combine back to M tokens (index_add). Routing is a seeded uniform top-k over all E_global "
    "experts (seed 0, same for every routing method), computed once outside the timed region: "
    "routing selection and the router GEMM are separate rows. FP8 rows use weights pre-quantized "
    "with one scale per expert and output channel and per-token dynamic activation scales: like "
    "every FP8 kernel-only row, the MoE input arrives already quantized (per token; its "
    "quantization is what the row's with_quant twin adds), while the per-token quantization of "
    "the activation output before GEMM2 is inside the timed region, as in a dynamic FP8 MoE."
)


@dataclass(frozen=True)
class TimedOp:
    """A built torch op ready for `timing.bench`: call `fn(*args)`."""

    fn: Callable[..., Any]
    args: tuple
    """Every tensor the op reads (passed as input_args so a cold-L2 fallback can rotate them)."""
    names: tuple[str, ...]
    """Names of `args`, in order (tests and the GPU check use them)."""
    note: str = ""
    """Caveat for this row (e.g. no token reached this rank's experts)."""
    local_pairs: int = 0
    """MoE: (token, expert) pairs routed to this rank's experts under the seeded routing."""

    def arg(self, name: str):
        return self.args[self.names.index(name)]


# ---------------------------------------------------------------------------- validation


def check_case(case: Case) -> None:
    """Raise ValueError for a Case this backend cannot represent (a cases-builder bug), or
    UnsupportedCase for a known limit of the torch kernels (alignment)."""
    if case.routine not in ROUTINES:
        raise ValueError(f"routine={case.routine!r}: torch backend runs one of {ROUTINES}")
    want = ROUTINE_DTYPE[case.routine]
    if case.dtype != want:
        raise ValueError(f"dtype={case.dtype!r}: {case.routine} times the {want} recipe")
    gemm = case.routine in ("torch.linear", "torch._scaled_mm")
    shape_type = GemmShape if gemm else MoeShape
    if not isinstance(case.physical, shape_type):
        raise ValueError(f"{case.routine} needs a {shape_type.__name__}, got {case.physical!r}")
    if case.routine == "torch._scaled_mm" and case.variant not in SCALED_MM_VARIANTS:
        raise ValueError(
            f"variant={case.variant!r}: torch._scaled_mm needs one of {SCALED_MM_VARIANTS}"
        )
    elem = 1 if want == "fp8" else 2
    align = _ALIGN_BYTES // elem
    p = case.physical
    if gemm:
        dims = {"N": p.n, "K": p.k} if want == "fp8" else {}
    else:
        i_w1 = 2 * p.intermediate if case.gated else p.intermediate
        dims = {"H": p.hidden, "I": p.intermediate, "GEMM1 N": i_w1}
    bad = {k: v for k, v in dims.items() if v % align}
    if bad:
        what = ", ".join(f"{k}={v}" for k, v in bad.items())
        raise UnsupportedCase(
            f"{case.routine} ({want}) needs dimensions that are multiples of {align} elements "
            f"(16 bytes); {what} is not"
        )


# ---------------------------------------------------------------------------- building blocks


def uniform_routing(num_tokens: int, global_experts: int, top_k: int, seed: int = ROUTING_SEED):
    """Seeded uniform top-k routing on the CPU: (ids int64 [M, top_k], weights fp32 [M, top_k]).

    Each token picks `top_k` distinct experts uniformly at random (top-k of uniform scores); the
    weights are the softmax of the picked scores (renormalized, like "renormalize" routing).
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(num_tokens, global_experts, generator=g)
    picked, ids = scores.topk(top_k, dim=-1)
    return ids, torch.softmax(picked, dim=-1)


def activation_fn(name: str, gated: bool) -> Callable:
    """The MoE activation on GEMM1's output [rows, 2I] (gated: gate half first) or [rows, I].

    Names are FlashInfer ActivationType names. SwigluBias is GPT-OSS's clamped SwiGLU
    (alpha=1.702, limit=7, `(up + 1) * gate * sigmoid(alpha * gate)`); the experts' biases are not
    modelled (cost: one broadcast add per GEMM). Gate/up are halves, not interleaved (same cost).
    """
    import torch
    import torch.nn.functional as F

    def halves(h):
        i = h.shape[-1] // 2
        return h[..., :i], h[..., i:]

    def swiglu(h):
        g, u = halves(h)
        return F.silu(g) * u

    def geglu(h):
        g, u = halves(h)
        return F.gelu(g) * u

    def geglu_tanh(h):
        g, u = halves(h)
        return F.gelu(g, approximate="tanh") * u

    def swiglu_bias(h, alpha=1.702, limit=7.0):
        g, u = halves(h)
        g = g.clamp(max=limit)
        u = u.clamp(min=-limit, max=limit)
        return (u + 1) * (g * torch.sigmoid(alpha * g))

    gated_fns = {
        "Swiglu": swiglu, "Geglu": geglu, "GegluTanh": geglu_tanh, "SwigluBias": swiglu_bias,
    }
    plain_fns = {
        "Relu2": lambda h: F.relu(h).square(),
        "Relu": F.relu,
        "Gelu": F.gelu,
        "Silu": F.silu,
        "Identity": lambda h: h,
    }
    name = name or ("Swiglu" if gated else "Relu2")
    table = gated_fns if gated else plain_fns
    if name not in table:
        kind = "gated" if gated else "non-gated"
        raise UnsupportedCase(
            f"activation {name!r} ({kind}) has no torch implementation here; "
            f"supported {kind}: {sorted(table)}"
        )
    return table[name]


def per_token_fp8(t):
    """(fp8 [rows, cols], fp32 scale [rows]) with scale = row amax / 448 (torch ops)."""
    import torch

    amax = t.abs().amax(dim=-1).float().clamp(min=1e-12)
    scale = amax / FP8_MAX
    q = (t.float() / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def per_channel_fp8_weights(w):
    """Quantize [E, N, K] weights per expert and output channel, one expert at a time (memory).

    Returns (fp8 [E, N, K] contiguous, fp32 scales [E, N])."""
    import torch

    q = torch.empty(w.shape, dtype=torch.float8_e4m3fn, device=w.device)
    s = torch.empty(w.shape[:-1], dtype=torch.float32, device=w.device)
    for e in range(w.shape[0]):
        q[e], s[e] = per_token_fp8(w[e])
    return q, s


def _randn(shape, device, scale: float, generator, dtype=None):
    import torch

    dtype = dtype or torch.bfloat16
    # Random bf16 straight from the generator (no fp32 copy of multi-GB expert weights).
    t = torch.randn(shape, generator=generator, device=device, dtype=dtype)
    return t.mul_(scale).to(dtype)


def _generator(device: str):
    import torch

    if device == "meta":
        return None
    g = torch.Generator(device=device)
    g.manual_seed(ROUTING_SEED)
    return g


# ---------------------------------------------------------------------------- GEMM ops


def build_gemm(case: Case, device: str) -> TimedOp:
    """torch.linear (bf16) or torch._scaled_mm (fp8, pre-quantized) for case.physical."""
    import torch
    import torch.nn.functional as F

    p: GemmShape = case.physical
    g = _generator(device)
    x = _randn((p.m, p.k), device, 1.0, g)
    w = _randn((p.n, p.k), device, p.k**-0.5, g)
    if case.routine == "torch.linear":
        return TimedOp(lambda x, w: F.linear(x, w), (x, w), ("x", "w"))

    if case.variant == "per_tensor":
        sa = (x.abs().amax().float() / FP8_MAX).clamp(min=1e-12)
        sb = (w.abs().amax().float() / FP8_MAX).clamp(min=1e-12)
        xq = (x.float() / sa).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        wq = (w.float() / sb).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        sa, sb = sa.reshape(()), sb.reshape(())
    else:  # per_token activations, per output channel weights
        xq, sa = per_token_fp8(x)
        wq, sb = per_token_fp8(w)
        sa, sb = sa.reshape(p.m, 1), sb.reshape(1, p.n)

    def scaled_mm(xq, wq, sa, sb):
        # b must be column-major: wq is [N, K] row-major, so wq.t() is [K, N] column-major.
        return torch._scaled_mm(xq, wq.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    return TimedOp(scaled_mm, (xq, wq, sa, sb), ("xq", "wq", "scale_a", "scale_b"))


# ---------------------------------------------------------------------------- MoE ops


def build_moe(case: Case, device: str) -> TimedOp:
    """One rank's routed experts for case.physical (see MOE_ROW_NOTE)."""
    import torch

    p: MoeShape = case.physical
    m, h, i, e_local, e_global, top_k = (
        p.num_tokens, p.hidden, p.intermediate, p.experts, p.global_experts, p.top_k,
    )
    if e_local > e_global:
        raise ValueError(f"experts={e_local} > global_experts={e_global}")
    i_w1 = 2 * i if case.gated else i
    act = activation_fn(case.activation, case.gated)

    ids_cpu, weights_cpu = uniform_routing(m, e_global, top_k)
    # The routing is fixed per case, so the number of pairs this rank gets is known up front;
    # slicing to it keeps every shape static (CUDA-graph capturable) inside the timed function.
    n_local = int((ids_cpu < e_local).sum())
    note = ""
    if n_local == 0:
        note = (
            f"no (token, expert) pair of the seeded routing reached this rank's {e_local} of "
            f"{e_global} experts at M={m}, top_k={top_k}: "
            "timed the permutation and zeroed output only"
        )

    g = _generator(device)
    x = _randn((m, h), device, 1.0, g)
    w1 = _randn((e_local, i_w1, h), device, h**-0.5, g)
    w2 = _randn((e_local, h, i), device, i**-0.5, g)
    ids = ids_cpu.to(device)
    weights = weights_cpu.to(device)
    bounds = torch.arange(e_local, dtype=ids.dtype, device=device)

    def permute(topk_ids, bounds):
        sorted_ids, order = torch.sort(topk_ids.reshape(-1), stable=True)
        # Pairs for experts >= e_local (other EP ranks) sort to the end and are dropped.
        sorted_ids, order = sorted_ids[:n_local], order[:n_local]
        token = torch.div(order, top_k, rounding_mode="floor")
        # offs[e] = end row of expert e's group = #pairs with expert id <= e (int32, cumulative).
        offs = torch.searchsorted(sorted_ids, bounds, right=True, out_int32=True)
        return order, token, offs

    def combine(y, topk_weights, order, token):
        out = torch.zeros((m, h), dtype=torch.bfloat16, device=y.device)
        wts = topk_weights.reshape(-1).index_select(0, order).to(y.dtype)
        return out.index_add_(0, token, y * wts[:, None])

    if case.routine == "torch._grouped_mm":

        def moe_bf16(x, topk_ids, topk_weights, w1, w2, bounds):
            order, token, offs = permute(topk_ids, bounds)
            if n_local == 0:
                return torch.zeros_like(x)
            xs = x.index_select(0, token)
            hmid = torch._grouped_mm(xs, w1.transpose(-2, -1), offs=offs)
            y = torch._grouped_mm(act(hmid), w2.transpose(-2, -1), offs=offs)
            return combine(y, topk_weights, order, token)

        args = (x, ids, weights, w1, w2, bounds)
        names = ("x", "topk_ids", "topk_weights", "w1", "w2", "bounds")
        return TimedOp(moe_bf16, args, names, note, n_local)

    w1q, w1s = per_channel_fp8_weights(w1)
    w2q, w2s = per_channel_fp8_weights(w2)
    xq, xscale = per_token_fp8(x)  # input quantization: the with_quant twin's part
    del w1, w2, x

    def moe_fp8(xq, xscale, topk_ids, topk_weights, w1q, w1s, w2q, w2s, bounds):
        order, token, offs = permute(topk_ids, bounds)
        if n_local == 0:
            return torch.zeros((m, h), dtype=torch.bfloat16, device=xq.device)
        # Gather FP8 rows through a uint8 view (index_select support for float8 varies by build).
        xs = xq.view(torch.uint8).index_select(0, token).view(torch.float8_e4m3fn)
        hmid = torch._scaled_grouped_mm(
            xs, w1q.transpose(-2, -1), xscale.index_select(0, token), w1s,
            offs=offs, out_dtype=torch.bfloat16,
        )
        aq, ascale = per_token_fp8(act(hmid))
        y = torch._scaled_grouped_mm(
            aq, w2q.transpose(-2, -1), ascale, w2s, offs=offs, out_dtype=torch.bfloat16
        )
        return combine(y, topk_weights, order, token)

    args = (xq, xscale, ids, weights, w1q, w1s, w2q, w2s, bounds)
    names = ("xq", "xscale", "topk_ids", "topk_weights", "w1q", "w1s", "w2q", "w2s", "bounds")
    return TimedOp(moe_fp8, args, names, note, n_local)


def build(case: Case, device: str = "cuda") -> TimedOp:
    """Validate the case and build its op on `device` ("cuda"; "cpu"/"meta" for tests)."""
    check_case(case)
    import torch

    op_name = case.routine.split(".", 1)[1]
    if case.routine != "torch.linear" and not hasattr(torch, op_name):
        raise UnsupportedCase(f"torch {torch.__version__} has no {case.routine}")
    if isinstance(case.physical, GemmShape):
        return build_gemm(case, device)
    return build_moe(case, device)


# ---------------------------------------------------------------------------- FP32 references

#: What each routine's output is checked against (the row's check_note names it).
REFERENCE_TEXT = {
    "torch.linear": "FP32 x @ w.T of the same BF16 inputs",
    "torch._scaled_mm": "FP32 product of the same FP8 inputs times their scales",
    "torch._grouped_mm": "FP32 per-expert loop over the same routing and BF16 weights",
    "torch._scaled_grouped_mm": "FP32 per-expert loop over the same routing and dequantized FP8 "
                                "input and weights (no re-quantization between the GEMMs)",
}


def reference(case: Case, op: TimedOp):
    """The op's output computed in FP32 from the same (dequantized) inputs, [M, N] or [M, H]."""
    if case.routine == "torch.linear":
        return op.arg("x").float() @ op.arg("w").float().T
    if case.routine == "torch._scaled_mm":
        sa, sb = op.arg("scale_a").float(), op.arg("scale_b").float()
        x = op.arg("xq").float() * (sa if sa.dim() == 0 else sa.reshape(-1, 1))
        w = op.arg("wq").float() * (sb if sb.dim() == 0 else sb.reshape(-1, 1))
        return x @ w.T
    return _reference_moe(case, op)


def _reference_moe(case: Case, op: TimedOp):
    import torch

    p: MoeShape = case.physical
    act = activation_fn(case.activation, case.gated)
    fp8 = case.routine == "torch._scaled_grouped_mm"
    x = op.arg("xq").float() * op.arg("xscale")[:, None] if fp8 else op.arg("x").float()
    ids, wts = op.arg("topk_ids"), op.arg("topk_weights").float()
    out = torch.zeros((p.num_tokens, p.hidden), dtype=torch.float32, device=x.device)
    for e in range(p.experts):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        if fp8:  # one expert at a time: an FP32 copy of every expert's weights may not fit
            w1 = op.arg("w1q")[e].float() * op.arg("w1s")[e][:, None]
            w2 = op.arg("w2q")[e].float() * op.arg("w2s")[e][:, None]
        else:
            w1, w2 = op.arg("w1")[e].float(), op.arg("w2")[e].float()
        y = act(x[tok] @ w1.T) @ w2.T
        out.index_add_(0, tok, y * wts[tok, slot][:, None])
    return out


# ---------------------------------------------------------------------------- running

#: Error texts that mean "this GPU / build lacks the kernel", not a bug (-> status unsupported).
_UNSUPPORTED_ERROR = re.compile(
    r"not supported|only supported|unsupported|is only available|compute capability|"
    r"architecture|no kernel image|requires (a )?(cuda|sm|gpu)|sm_?\d\d",
    re.IGNORECASE,
)


def unsupported_from_error(routine: str, err: BaseException, capability: tuple[int, int] | None):
    """UnsupportedCase for an op error that says the GPU/build lacks it, else None."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if "out of memory" in text.lower() or not _UNSUPPORTED_ERROR.search(text):
        return None
    cc = f"sm_{capability[0]}{capability[1]}" if capability else "this GPU"
    return UnsupportedCase(f"{routine} is not available on {cc}: {text[:300]}")


def run_case(case: Case, settings) -> Measurement:
    """Time one torch Case on the current CUDA device.

    Raises UnsupportedCase for known gaps (missing op, GPU without the kernel, alignment) and
    lets anything else propagate (the runner marks the row failed with the message).
    """
    if case.skip_reason:
        raise UnsupportedCase(case.skip_reason)
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedCase("the torch backend needs a CUDA GPU; none is visible")
    capability = tuple(torch.cuda.get_device_capability())
    try:
        op = build(case, "cuda")
        op.fn(*op.args)  # first call: JIT/heuristics warm-up and a clean unsupported check
        torch.cuda.synchronize()
    except (RuntimeError, NotImplementedError) as err:
        unsupported = unsupported_from_error(case.routine, err, capability)
        if unsupported is not None:
            raise unsupported from err
        raise
    measurement = bench(op.fn, settings, input_args=op.args)
    note = "; ".join(n for n in (op.note, measurement.note) if n)
    check = {}
    if settings.check:
        check = correctness.verify(op.fn, op.args, lambda: reference(case, op), case.kind, case.dtype,
                                   REFERENCE_TEXT[case.routine]).fields()
    return dataclasses.replace(measurement, note=note, check=check)


__all__ = [
    "ROUTINES",
    "ROUTINE_DTYPE",
    "ROUTING_SEED",
    "MOE_ROW_NOTE",
    "TimedOp",
    "check_case",
    "uniform_routing",
    "activation_fn",
    "per_token_fp8",
    "build",
    "build_gemm",
    "build_moe",
    "REFERENCE_TEXT",
    "reference",
    "unsupported_from_error",
    "run_case",
]
