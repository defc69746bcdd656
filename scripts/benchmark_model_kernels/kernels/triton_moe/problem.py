"""One rank's fused-MoE problem: its shape, seeded inputs, the fp32 reference and the HBM floor.

In: the shape (`MoeProblem`) and a seed; out: the kernel's inputs (`build_inputs`: activations,
FP8 weights and scales in each scheme's layout, seeded uniform routing over the GLOBAL experts,
biases), `reference_moe` (plain PyTorch fp32 from the same dequantized inputs) and the roofline's
`hbm_floor_bytes`. The torch-side FP8 quantizers here are also the references of the kernels'.

Torch is imported lazily (`_torch()`): this module imports on a CPU machine without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCHEMES = ("bf16", "fp8_per_tensor", "fp8_per_token", "fp8_block128")
FP8_SCHEMES = SCHEMES[1:]
#: Gated activations read GEMM 1's [rows, 2I] output; the others read [rows, I].
GATED_ACTIVATIONS = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul", "swigluoai")
PLAIN_ACTIVATIONS = ("silu", "gelu", "relu2")
ACTIVATIONS = GATED_ACTIVATIONS + PLAIN_ACTIVATIONS
FP8_MAX = 448.0
FP8_GROUP = 128
"""fp8_block128: weights carry one scale per 128x128 block, activations one per 1x128 group (the
checkpoint's blocks; `MoeProblem.block_size` is the block the kernel runs them at)."""
#: Square FP8 blocks the kernels run: the checkpoint's 128 and vLLM's refinements of it (>= 32,
#: a power of two dividing 128), and 16, the smallest tile tl.dot takes.
BLOCK_SIZES = (16, 32, 64, 128)
SWIGLUOAI_ALPHA = 1.702
SWIGLUOAI_LIMIT = 7.0
SCALE_EPS = 1e-10
"""Floor of a dynamic amax before it becomes a scale (all-zero rows/groups)."""


# ---------------------------------------------------------------------------- problem


@dataclass(frozen=True)
class MoeProblem:
    """One rank's fused-MoE call: M tokens through its `local_experts` of `global_experts`."""

    num_tokens: int
    hidden: int
    intermediate: int
    """Per-rank intermediate size I (GEMM 1 makes 2I columns when gated)."""
    local_experts: int
    global_experts: int
    top_k: int
    activation: str
    gated: bool
    scheme: str
    has_bias: bool = False
    """Biases on both GEMMs (b1 [E, N1], b2 [E, H]), as gpt-oss has."""
    block_size: int = FP8_GROUP
    """fp8_block128: the square block of the weight scales (and the 1 x block activation groups):
    the checkpoint's 128, or the finer block vLLM refines it to where 128 does not divide the
    rank's intermediate shard (vllm_rules/moe_triton.py: square_block_for_shard)."""
    dynamic_scale: bool = False
    """fp8_per_tensor: the activations' one scale is computed per call from their amax (vLLM's
    `fp8_per_tensor` online method, kFp8DynamicTensorSym) instead of given (a static checkpoint's
    calibrated scale)."""

    def __post_init__(self) -> None:
        for name in ("num_tokens", "hidden", "intermediate", "local_experts", "global_experts",
                     "top_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r}: expected a positive int")
        if self.local_experts > self.global_experts:
            raise ValueError(f"local_experts={self.local_experts} > global_experts="
                             f"{self.global_experts}")
        if self.top_k > self.global_experts:
            raise ValueError(f"top_k={self.top_k} > global_experts={self.global_experts}: "
                             "each token picks distinct experts")
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme={self.scheme!r}: expected one of {', '.join(SCHEMES)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r}: expected one of "
                             f"{', '.join(ACTIVATIONS)}")
        if self.gated != (self.activation in GATED_ACTIVATIONS):
            raise ValueError(f"gated={self.gated} does not fit activation={self.activation!r} "
                             f"(gated ones: {', '.join(GATED_ACTIVATIONS)})")
        if self.block_size not in BLOCK_SIZES or (self.block_size != FP8_GROUP
                                                  and self.scheme != "fp8_block128"):
            raise ValueError(f"block_size={self.block_size!r}: expected {FP8_GROUP}, or with "
                             f"fp8_block128 one of {', '.join(map(str, BLOCK_SIZES))}")
        if self.dynamic_scale and self.scheme != "fp8_per_tensor":
            raise ValueError(f"dynamic_scale=True with scheme={self.scheme!r}: only fp8_per_tensor "
                             "has a static scale to replace")

    @property
    def n1(self) -> int:
        """GEMM 1 output width: 2I gated, I otherwise."""
        return 2 * self.intermediate if self.gated else self.intermediate

    @property
    def pairs(self) -> int:
        return self.num_tokens * self.top_k


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------- torch helpers


def _torch():
    import torch  # lazy: the package imports on a CPU machine without torch

    return torch


def uniform_routing(num_tokens: int, global_experts: int, top_k: int, seed: int = 0):
    """Seeded uniform top-k routing on the CPU: (ids int64 [M, top_k], weights fp32 [M, top_k]).

    Same semantics as the package's torch backend: each token picks `top_k` distinct experts as
    the top-k of uniform scores; the weights are the softmax of the picked scores.
    """
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(num_tokens, global_experts, generator=g)
    picked, ids = scores.topk(top_k, dim=-1)
    return ids, torch.softmax(picked, dim=-1)


def _fp8():
    return _torch().float8_e4m3fn


def _quant_tensor(w, scale):
    """fp8 cast of w / scale (scale broadcast), clamped to the e4m3 range."""
    return (w / scale).clamp(-FP8_MAX, FP8_MAX).to(_fp8())


def _pad_to(t, dim: int, mult: int):
    torch = _torch()
    n = t.shape[dim]
    pad = _cdiv(n, mult) * mult - n
    if not pad:
        return t
    shape = list(t.shape)
    shape[dim] = pad
    return torch.cat([t, torch.zeros(shape, dtype=t.dtype, device=t.device)], dim=dim)


def _block_amax(w, block: int = FP8_GROUP):
    """[..., R, C] -> [..., cdiv(R,block), cdiv(C,block)] abs-max of each block x block block."""
    wp = _pad_to(_pad_to(w.abs(), -2, block), -1, block)
    *lead, r, c = wp.shape
    return wp.reshape(*lead, r // block, block, c // block, block).amax(dim=(-3, -1))


def _expand_blocks(s, rows: int, cols: int, block: int = FP8_GROUP):
    """[..., R/block, C/block] block scales -> [..., rows, cols] per element."""
    e = s.repeat_interleave(block, dim=-2).repeat_interleave(block, dim=-1)
    return e[..., :rows, :cols]


def _quant_weight(w, scheme: str, block: int = FP8_GROUP):
    """fp32 weights [E, N, K] -> (fp8 weights, scales) in `scheme`'s layout (fp8_block128: one
    scale per `block` x `block` block)."""
    if scheme == "fp8_per_tensor":
        s = (w.abs().amax(dim=(1, 2)).clamp_min(SCALE_EPS) / FP8_MAX).float()  # [E]
        return _quant_tensor(w, s[:, None, None]), s
    if scheme == "fp8_per_token":
        s = (w.abs().amax(dim=2, keepdim=True).clamp_min(SCALE_EPS) / FP8_MAX).float()  # [E,N,1]
        return _quant_tensor(w, s), s
    s = (_block_amax(w, block).clamp_min(SCALE_EPS) / FP8_MAX).float()  # [E, N/block, K/block]
    return _quant_tensor(w, _expand_blocks(s, w.shape[1], w.shape[2], block)), s


def _dequant_weight(q, s, scheme: str, block: int = FP8_GROUP):
    w = q.float()
    if scheme == "fp8_per_tensor":
        return w * s[:, None, None]
    if scheme == "fp8_per_token":
        return w * s
    return w * _expand_blocks(s, w.shape[1], w.shape[2], block)


def _quant_act_torch(x, scheme: str, static_scale=None, block: int = FP8_GROUP):
    """Activation [rows, K] -> (fp8, scales) like the kernels (static scale given per tensor;
    fp8_block128: one scale per 1 x `block` group)."""
    x = x.float()
    if scheme == "fp8_per_tensor":
        s = static_scale if static_scale is not None else (
            x.abs().amax().clamp_min(SCALE_EPS) / FP8_MAX).reshape(1)
        return _quant_tensor(x, s), s.float()
    if scheme == "fp8_per_token":
        s = x.abs().amax(dim=1, keepdim=True).clamp_min(SCALE_EPS) / FP8_MAX
        return _quant_tensor(x, s), s.float()
    xp = _pad_to(x.abs(), 1, block)
    s = xp.reshape(x.shape[0], -1, block).amax(dim=-1).clamp_min(SCALE_EPS) / FP8_MAX
    return _quant_tensor(x, s.repeat_interleave(block, dim=1)[:, :x.shape[1]]), s.float()


def _dequant_act(q, s, scheme: str, block: int = FP8_GROUP):
    x = q.float()
    if scheme == "fp8_per_tensor":
        return x * s
    if scheme == "fp8_per_token":
        return x * s
    return x * s.repeat_interleave(block, dim=1)[:, :x.shape[1]]


def activation_ref(name: str, h):
    """fp32 reference of the activation on GEMM 1's output [rows, N1]."""
    torch = _torch()
    F = torch.nn.functional
    if name == "swigluoai":
        g, u = h[..., 0::2], h[..., 1::2]
        g = g.clamp(max=SWIGLUOAI_LIMIT)
        u = u.clamp(-SWIGLUOAI_LIMIT, SWIGLUOAI_LIMIT)
        return (u + 1) * g * torch.sigmoid(SWIGLUOAI_ALPHA * g)
    if name in GATED_ACTIVATIONS:
        i = h.shape[-1] // 2
        g, u = h[..., :i], h[..., i:]
        if name == "silu_and_mul":
            return F.silu(g) * u
        if name == "gelu_and_mul":
            return F.gelu(g) * u
        return F.gelu(g, approximate="tanh") * u
    if name == "silu":
        return F.silu(h)
    if name == "gelu":
        return F.gelu(h)
    if name == "relu2":
        return torch.relu(h) ** 2
    raise ValueError(f"activation={name!r}: expected one of {', '.join(ACTIVATIONS)}")


def _expert_weight(p: MoeProblem, inputs: dict, name: str, e: int):
    """fp32 weights of expert `e` ("w1": [N1,H], "w2": [H,I]) the kernel's inputs stand for: one
    expert at a time, so the reference never holds an fp32 copy of every expert (DeepSeek-V3's
    256 experts at TP=1 are 45 GB in fp32)."""
    w = inputs[name][e:e + 1]
    if p.scheme == "bf16":
        return w[0].float()
    return _dequant_weight(w, inputs[f"{name}_scale"][e:e + 1], p.scheme, p.block_size)[0]


def _dequantized_x(p: MoeProblem, inputs: dict):
    """fp32 activations [M,H] the kernel's input stands for."""
    if p.scheme == "bf16":
        return inputs["x"].float()
    return _dequant_act(inputs["x"], inputs["a1_scale"], p.scheme, p.block_size)


def _reference(p: MoeProblem, inputs: dict):
    """(out [M,H] fp32, amax of the activation output over local pairs), per-expert loop."""
    torch = _torch()
    x = _dequantized_x(p, inputs)
    ids = inputs["topk_ids"].long()
    wts = inputs["topk_weights"].float()
    out = torch.zeros(p.num_tokens, p.hidden, dtype=torch.float32, device=x.device)
    amax = torch.zeros((), dtype=torch.float32, device=x.device)
    b1, b2 = inputs.get("b1"), inputs.get("b2")
    for e in range(p.local_experts):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        w1, w2 = _expert_weight(p, inputs, "w1", e), _expert_weight(p, inputs, "w2", e)
        h = x[tok] @ w1.T
        if b1 is not None:
            h = h + b1[e].float()
        a = activation_ref(p.activation, h)
        amax = torch.maximum(amax, a.abs().amax())
        y = a @ w2.T
        if b2 is not None:
            y = y + b2[e].float()
        out.index_add_(0, tok, y * wts[tok, slot][:, None])
    return out, amax


def reference_moe(p: MoeProblem, inputs: dict):
    """Plain PyTorch fp32 MoE from the same (dequantized) activations and weights, [M, H].

    The FP8 schemes' intermediate (a2) quantization is not modelled: that rounding is part of the
    error the kernel is allowed.
    """
    return _reference(p, inputs)[0]


def build_inputs(p: MoeProblem, device, seed: int = 0) -> dict:
    """Seeded inputs of one call: activations, weights (+scales), routing and biases.

    Keys: x (kernel input: bf16, or fp8 for the FP8 schemes), x_bf16 (the BF16 activation the
    FP8 input quantization starts from), a1_scale, w1 [E,N1,H], w1_scale, w2 [E,H,I], w2_scale,
    a2_scale (fp8_per_tensor with a static scale: calibrated as amax/448 of the reference
    intermediate; None with `dynamic_scale`, where the call computes it),
    b1 [E,N1] / b2 [E,H] (fp32, when has_bias), topk_ids int32 [M,top_k] (uniform over all
    GLOBAL experts: ids >= local_experts belong to other ranks), topk_weights fp32 [M,top_k].
    Absent entries are None. Weights ~ N(0, 1/K), activations ~ N(0, 1).
    """
    torch = _torch()
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(seed)
    E, H, I, N1 = p.local_experts, p.hidden, p.intermediate, p.n1  # noqa: E741

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * scale

    x = randn(p.num_tokens, H).to(torch.bfloat16)
    w1, w1_scale = _expert_weights(p.scheme, E, N1, H, randn, p.block_size)
    w2, w2_scale = _expert_weights(p.scheme, E, H, I, randn, p.block_size)
    b1 = randn(E, N1, scale=0.1) if p.has_bias else None
    b2 = randn(E, H, scale=0.1) if p.has_bias else None
    ids, wts = uniform_routing(p.num_tokens, p.global_experts, p.top_k, seed)
    inputs: dict[str, Any] = {
        "x_bf16": x, "b1": b1, "b2": b2,
        "topk_ids": ids.to(torch.int32).to(dev), "topk_weights": wts.float().to(dev),
        "a1_scale": None, "w1_scale": None, "w2_scale": None, "a2_scale": None,
    }
    inputs.update(w1=w1, w2=w2)
    if p.scheme == "bf16":
        inputs.update(x=x)
        return inputs
    inputs.update(w1_scale=w1_scale, w2_scale=w2_scale)
    inputs["x"], inputs["a1_scale"] = _quant_act_torch(x, p.scheme, block=p.block_size)
    if p.scheme == "fp8_per_tensor" and not p.dynamic_scale:
        amax = _reference(p, inputs)[1]
        inputs["a2_scale"] = (amax.clamp_min(SCALE_EPS) / FP8_MAX).reshape(1).float()
    return inputs


#: fp32 bytes of the experts drawn (and quantized) at once by `_expert_weights`.
WEIGHT_CHUNK_BYTES = 1 << 29


def _expert_weights(scheme: str, experts: int, rows: int, cols: int, randn, block: int = FP8_GROUP):
    """(weights [E, rows, cols], scales or None) ~ N(0, 1/cols): BF16, or FP8 in `scheme`'s layout
    (fp8_block128: `block` x `block` blocks).

    Drawn and quantized a few experts at a time: the fp32 draw and the quantizer's temporaries of
    all experts at once (w, |w|, per-element block scales, w/scale) are several times the weights,
    which for DeepSeek-V3's 256 experts at TP=1 (30 GB of fp32 for GEMM 1 alone) exceeds the GPU."""
    torch = _torch()
    per_expert = rows * cols * 4
    step = max(1, WEIGHT_CHUNK_BYTES // per_expert)
    dtype = torch.bfloat16 if scheme == "bf16" else _fp8()
    out = None
    scales = []
    for e0 in range(0, experts, step):
        n = min(step, experts - e0)
        w = randn(n, rows, cols, scale=cols ** -0.5)
        if scheme == "bf16":
            q = w.to(torch.bfloat16)
        else:
            q, sc = _quant_weight(w, scheme, block)
            scales.append(sc)
        del w
        if out is None:
            out = torch.empty(experts, rows, cols, dtype=dtype, device=q.device)
        out[e0:e0 + n] = q
        del q
    return out, (torch.cat(scales) if scales else None)


# ---------------------------------------------------------------------------- roofline helper


def expected_touched_experts(p: MoeProblem) -> float:
    """Expected local experts hit by M*top_k uniform picks over the global experts."""
    return p.local_experts * (1.0 - (1.0 - 1.0 / p.global_experts) ** p.pairs)


def hbm_floor_bytes(p: MoeProblem, touched_experts: float | None = None) -> float:
    """Bytes a perfect kernel must move: touched experts' weights + input + output. The touched
    count is the expected one of uniform routing unless a routing's actual count is given."""
    touched = expected_touched_experts(p) if touched_experts is None else touched_experts
    wbytes = 2 if p.scheme == "bf16" else 1
    per_expert = (p.n1 * p.hidden + p.hidden * p.intermediate) * wbytes
    xbytes = p.num_tokens * p.hidden * (2 if p.scheme == "bf16" else 1)
    return touched * per_expert + xbytes + p.num_tokens * p.hidden * 2
