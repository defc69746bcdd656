"""Roofline context for every row: useful FLOPs, bytes moved, achieved TFLOP/s and TB/s, % of peak.

One rule, one place (documented with worked examples in references/roofline.md):

* FLOPs are the useful work of the LOGICAL problem (backend padding is overhead, not work):
  GEMM ``2*m*n*k``; MoE ``(tokens routed to local experts) * (2*H*I_w1 + 2*I*H)`` with
  ``I_w1 = 2*I`` for gated activations, where under uniform routing the expected number of
  (token, expert) pairs landing on this rank is ``M * top_k * E_local / E_global``.
* Bytes are the minimum HBM traffic: weights actually touched + activations in + outputs out.
  GEMM: ``n*k*b_w + m*k*b_a + m*n*2``. MoE: every touched expert's weights once, the M input
  rows once, the M output rows once; intermediate activations between the two GEMMs are not
  counted (a fused kernel may keep them on chip). Under uniform routing the expected number of
  distinct local experts touched is ``E_local * (1 - (1 - 1/E_global) ** (M * top_k))`` (each of
  the M*top_k draws treated as independent; real draws are without replacement per token, so this
  undercounts at small M: about (top_k-1)/(2*E_global) at M=1, 6 % for 8 experts top-2, 2.7 % for
  128 top-8, and under 0.5 % from M=64; references/roofline.md gives more).
* Element sizes per recipe: BF16 2 bytes; FP8 1 byte; NVFP4 0.5 byte + one FP8 block scale per
  16 values (0.0625 byte), for weights and activations alike (the kernel consumes quantized
  activations). Outputs are BF16. Per-tensor / per-token scales are negligible and not counted.
* Attention (one layer, one call): FLOPs ``2 * H_q * (d_qk + d_vo) * pairs``, where ``pairs`` are
  the (query token, K/V token) pairs the mask leaves: ``batch * q_len * kv_len`` without a mask,
  ``batch * (q_len * kv_len - q_len * (q_len - 1) / 2)`` causal (bottom-right aligned, the
  driver's mask); MLA reads d_qk = kv_lora_rank + qk_rope_head_dim, d_vo = kv_lora_rank. Bytes:
  the K/V cache read once, ``batch * kv_len * kv_elements * b_kv`` (kv_elements = H_kv * (d_qk +
  d_vo) for MHA, kv_lora_rank + qk_rope_head_dim for MLA; b_kv 2 for BF16, 1 for FP8), plus the
  BF16 query in and the BF16 output out. The math runs in BF16 (the query is BF16, an FP8 cache
  is read as BF16), so the FLOP peak is the BF16 one for both KV dtypes.
* Peaks are dense (no sparsity) tensor-core TFLOP/s and HBM TB/s from vendor datasheets
  (`PEAKS`); where a datasheet quotes only sparse figures the dense figure is half of it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

#: Bytes per element of weights / activations per recipe (NVFP4: 4-bit value + 1 FP8 scale / 16).
ELEMENT_BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16.0}
#: Outputs are written in BF16 for every recipe.
OUTPUT_BYTES = 2.0


@dataclass(frozen=True)
class GpuPeak:
    """Dense peak throughput of one GPU model."""

    name: str
    """Canonical name, e.g. "H200 SXM"."""
    patterns: tuple[str, ...]
    """Regexes matched against the normalized device name (lowercase, '-'/'_' as spaces)."""
    bf16_tflops: float
    """Dense BF16 tensor-core TFLOP/s (FP32 accumulate)."""
    fp8_tflops: float | None
    """Dense FP8 tensor-core TFLOP/s; None where the GPU has no FP8 tensor cores."""
    fp4_tflops: float | None
    """Dense NVFP4 tensor-core TFLOP/s; None where the GPU has no FP4 tensor cores."""
    hbm_tb_per_sec: float
    """Memory bandwidth in TB/s (10^12 bytes/s)."""
    compute_capability: tuple[int, int]
    """SM version, used to reject a name match on a different chip."""
    source: str
    """Where the figures come from (vendor datasheet) and how dense figures were derived."""
    excludes: tuple[str, ...] = ()
    """Regexes that veto a match (e.g. Max-Q variants with lower clocks)."""


_HALF = "dense = half of the datasheet's with-sparsity figure"

#: Ordered: the first entry whose pattern matches wins, so specific names come first.
PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("GB300", (r"\bgb300\b",), 2500.0, 5000.0, 15000.0, 8.0, (10, 3),
            "NVIDIA GB300 NVL72 datasheet, per GPU = rack / 72: BF16 360 PF and FP8 720 PF "
            f"with sparsity ({_HALF}); FP4 1,080 PF dense; HBM3e 576 TB/s"),
    GpuPeak("B300", (r"\bb300\b",), 2250.0, 4500.0, 13500.0, 8.0, (10, 3),
            "NVIDIA HGX B300 datasheet, per GPU = board / 8: BF16 36 PF and FP8 72 PF with "
            f"sparsity ({_HALF}); FP4 108 PF dense; HBM3e 8 TB/s per GPU"),
    GpuPeak("GB200", (r"\bgb200\b",), 2500.0, 5000.0, 10000.0, 8.0, (10, 0),
            "NVIDIA GB200 NVL72 datasheet, per GPU = rack / 72: BF16 360 PF, FP8 720 PF, "
            f"FP4 1,440 PF with sparsity ({_HALF}); HBM3e 576 TB/s"),
    GpuPeak("B200", (r"\bb200\b",), 2250.0, 4500.0, 9000.0, 8.0, (10, 0),
            "NVIDIA HGX B200 datasheet, per GPU = board / 8: BF16 36 PF, FP8 72 PF, FP4 144 PF "
            f"with sparsity ({_HALF}); HBM3e 64 TB/s per board"),
    GpuPeak("H200 NVL", (r"\bh200\b.*\bnvl\b",), 835.5, 1670.5, None, 4.8, (9, 0),
            f"NVIDIA H200 NVL datasheet: BF16 1,671 TF, FP8 3,341 TF with sparsity ({_HALF}); "
            "HBM3e 4.8 TB/s"),
    GpuPeak("H200 SXM", (r"\bh200\b",), 989.5, 1979.0, None, 4.8, (9, 0),
            f"NVIDIA H200 SXM datasheet: BF16 1,979 TF, FP8 3,958 TF with sparsity ({_HALF}); "
            "HBM3e 4.8 TB/s"),
    GpuPeak("H100 NVL", (r"\bh100\b.*\bnvl\b",), 835.5, 1670.5, None, 3.9, (9, 0),
            f"NVIDIA H100 NVL datasheet: BF16 1,671 TF, FP8 3,341 TF with sparsity ({_HALF}); "
            "HBM3 3.9 TB/s"),
    GpuPeak("H100 PCIe", (r"\bh100\b.*\bpcie\b",), 756.5, 1513.0, None, 2.0, (9, 0),
            f"NVIDIA H100 PCIe datasheet: BF16 1,513 TF, FP8 3,026 TF with sparsity ({_HALF}); "
            "HBM2e 2 TB/s"),
    GpuPeak("H100 SXM", (r"\bh100\b",), 989.5, 1979.0, None, 3.35, (9, 0),
            f"NVIDIA H100 SXM datasheet: BF16 1,979 TF, FP8 3,958 TF with sparsity ({_HALF}); "
            "HBM3 3.35 TB/s"),
    GpuPeak("H20", (r"\bh20\b",), 148.0, 296.0, None, 4.0, (9, 0),
            "NVIDIA H20 product brief: BF16 148 TF, FP8 296 TF dense; HBM3 4.0 TB/s"),
    GpuPeak("A100 80GB PCIe", (r"\ba100\b.*\bpcie\b.*\b80gb\b", r"\ba100\b.*\b80gb\b.*\bpcie\b"),
            312.0, None, None, 1.935, (8, 0),
            "NVIDIA A100 datasheet: BF16 312 TF dense (624 with sparsity); HBM2e 1,935 GB/s"),
    GpuPeak("A100 80GB SXM", (r"\ba100\b.*\b80gb\b",), 312.0, None, None, 2.039, (8, 0),
            "NVIDIA A100 datasheet: BF16 312 TF dense (624 with sparsity); HBM2e 2,039 GB/s"),
    GpuPeak("A100 40GB", (r"\ba100\b",), 312.0, None, None, 1.555, (8, 0),
            "NVIDIA A100 datasheet: BF16 312 TF dense (624 with sparsity); HBM2 1,555 GB/s"),
    GpuPeak("L40S", (r"\bl40s\b",), 362.05, 733.0, None, 0.864, (8, 9),
            "NVIDIA L40S datasheet: BF16 362.05 TF, FP8 733 TF dense; GDDR6 864 GB/s"),
    GpuPeak("L40", (r"\bl40\b",), 181.05, 362.0, None, 0.864, (8, 9),
            "NVIDIA L40 datasheet: BF16 181.05 TF, FP8 362 TF dense; GDDR6 864 GB/s"),
    GpuPeak("RTX PRO 6000 Blackwell Server", (r"\brtx pro 6000\b.*\bserver\b",),
            500.0, 1000.0, 2000.0, 1.597, (12, 0),
            "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: FP4 4 PF with sparsity "
            f"({_HALF}); FP8 and BF16 = 1/2 and 1/4 of dense FP4 (Blackwell tensor-core rate "
            "ratios, derived); GDDR7 1,597 GB/s", excludes=(r"\bmax q\b",)),
    GpuPeak("RTX PRO 6000 Blackwell", (r"\brtx pro 6000\b",), 500.0, 1000.0, 2000.0, 1.792,
            (12, 0),
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet: FP4 4 PF with sparsity "
            f"({_HALF}); FP8 and BF16 = 1/2 and 1/4 of dense FP4 (Blackwell tensor-core rate "
            "ratios, derived); GDDR7 1,792 GB/s", excludes=(r"\bmax q\b",)),
)


def _normalize(gpu_name: str) -> str:
    return " ".join(re.sub(r"[-_/()]", " ", (gpu_name or "").lower()).split())


def find_peak(gpu_name: str, compute_capability: tuple[int, int] | None = None) -> GpuPeak | None:
    """The PEAKS entry for a device name such as "NVIDIA H200" or "NVIDIA H100 80GB HBM3".

    None when no entry matches, or when `compute_capability` is given and disagrees with the
    entry (a misleading name must not borrow another chip's peaks).
    """
    name = _normalize(gpu_name)
    for peak in PEAKS:
        if any(re.search(p, name) for p in peak.patterns) and not any(
            re.search(x, name) for x in peak.excludes
        ):
            if compute_capability is not None and tuple(compute_capability) != peak.compute_capability:
                return None
            return peak
    return None


def peak_tflops(peak: GpuPeak, dtype: str) -> float | None:
    """Dense tensor-core peak for the recipe's math dtype."""
    return {"bf16": peak.bf16_tflops, "fp8": peak.fp8_tflops, "nvfp4": peak.fp4_tflops}.get(dtype)


def _element_bytes(dtype: str) -> float:
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"dtype={dtype!r}: expected one of {sorted(ELEMENT_BYTES)}")
    return ELEMENT_BYTES[dtype]


def gemm_flops_bytes(m: int, n: int, k: int, dtype: str) -> tuple[float, float]:
    """(FLOPs, bytes) of Y[m,n] = X[m,k] W[n,k]^T with `dtype` weights and activations."""
    b = _element_bytes(dtype)
    flops = 2.0 * m * n * k
    nbytes = n * k * b + m * k * b + m * n * OUTPUT_BYTES
    return flops, nbytes


def expected_local_pairs(num_tokens: int, experts: int, global_experts: int, top_k: int) -> float:
    """Expected (token, expert) pairs routed to this rank's experts under uniform routing."""
    return num_tokens * top_k * experts / global_experts


def expected_experts_touched(
    num_tokens: int, experts: int, global_experts: int, top_k: int
) -> float:
    """Expected distinct local experts receiving at least one token under uniform routing."""
    draws = num_tokens * top_k
    return experts * (1.0 - (1.0 - 1.0 / global_experts) ** draws)


def moe_flops_bytes(
    num_tokens: int,
    hidden: int,
    intermediate: int,
    experts: int,
    global_experts: int,
    top_k: int,
    gated: bool,
    dtype: str,
) -> tuple[float, float]:
    """(FLOPs, bytes) of one rank's routed experts for `num_tokens` tokens, uniform routing."""
    b = _element_bytes(dtype)
    i_w1 = 2 * intermediate if gated else intermediate
    per_pair_flops = 2.0 * hidden * i_w1 + 2.0 * intermediate * hidden
    flops = expected_local_pairs(num_tokens, experts, global_experts, top_k) * per_pair_flops
    per_expert_weight_bytes = (i_w1 * hidden + hidden * intermediate) * b
    touched = expected_experts_touched(num_tokens, experts, global_experts, top_k)
    nbytes = touched * per_expert_weight_bytes + num_tokens * hidden * b
    nbytes += num_tokens * hidden * OUTPUT_BYTES
    return flops, nbytes


def attention_flops_bytes(
    batch_size: int,
    q_len: int,
    kv_len: int,
    num_q_heads: int,
    num_kv_heads: int,
    head_dim_qk: int,
    head_dim_vo: int,
    kv_dtype: str,
    causal: bool,
    kv_lora_rank: int = 0,
    qk_rope_head_dim: int = 0,
) -> tuple[float, float]:
    """(FLOPs, bytes) of one attention call: `batch_size` sequences of `q_len` queries over
    `kv_len` K/V tokens (module docstring)."""
    b_kv = _element_bytes(kv_dtype)
    pairs = q_len * kv_len - (q_len * (q_len - 1) / 2 if causal else 0)
    flops = 2.0 * num_q_heads * (head_dim_qk + head_dim_vo) * batch_size * pairs
    kv_elements = (kv_lora_rank + qk_rope_head_dim) if kv_lora_rank else num_kv_heads * (head_dim_qk + head_dim_vo)
    q_o = batch_size * q_len * num_q_heads * (head_dim_qk + head_dim_vo) * OUTPUT_BYTES
    return flops, batch_size * kv_len * kv_elements * b_kv + q_o


def row_flops_bytes(row) -> tuple[float, float] | None:
    """(FLOPs, bytes) of a results Row from its logical shape; None when the shape is missing (an
    MoE row also needs its `gated`, which decides GEMM1's width)."""
    if row.dtype not in ELEMENT_BYTES:
        return None
    if row.kind == "gemm" and row.n and row.k:
        return gemm_flops_bytes(row.num_tokens or row.m, row.n, row.k, row.dtype)
    if row.kind == "attention" and row.batch_size and row.q_len and row.kv_len and row.num_q_heads:
        return attention_flops_bytes(row.batch_size, row.q_len, row.kv_len, row.num_q_heads,
                                     row.num_kv_heads or 0, row.head_dim_qk or 0, row.head_dim_vo or 0,
                                     row.dtype, row.phase == "prefill", row.kv_lora_rank or 0,
                                     row.qk_rope_head_dim or 0)
    if row.kind == "moe" and row.hidden and row.intermediate and row.experts and row.top_k and row.gated is not None:
        return moe_flops_bytes(
            row.num_tokens or row.m,  # rows written before num_tokens ran num_tokens = M
            row.hidden,
            row.intermediate,
            row.experts,
            row.global_experts or row.experts,
            row.top_k,
            row.gated,
            row.dtype,
        )
    return None


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else float(f"{x:.{digits}g}") if x != 0 else 0.0


def annotate(row, gpu_name: str, compute_capability: tuple[int, int] | None = None):
    """The Row with flops, bytes, tflops, tb_per_sec and % of peak filled in.

    flops/bytes come from the logical shape (set even when the row has no time); achieved rates
    need median_us; percentages also need the GPU in PEAKS (and its peak for this dtype).
    """
    fb = row_flops_bytes(row)
    if fb is None:
        return row
    flops, nbytes = fb
    tflops = tb_per_sec = pct_flops = pct_bw = None
    if row.median_us is not None and row.median_us > 0:
        seconds = row.median_us * 1e-6
        tflops = flops / seconds / 1e12
        tb_per_sec = nbytes / seconds / 1e12
        peak = find_peak(gpu_name, compute_capability)
        if peak is not None:
            p = peak_tflops(peak, "bf16" if row.kind == "attention" else row.dtype)
            pct_flops = None if not p else 100.0 * tflops / p
            pct_bw = 100.0 * tb_per_sec / peak.hbm_tb_per_sec
    return dataclasses.replace(
        row,
        flops=flops,
        bytes=float(round(nbytes)),
        tflops=_round(tflops),
        tb_per_sec=_round(tb_per_sec),
        pct_peak_tflops=_round(pct_flops),
        pct_peak_bandwidth=_round(pct_bw),
    )


def peaks_table_markdown() -> str:
    """PEAKS as a Markdown table (for the report and references/roofline.md)."""
    lines = [
        "| GPU | BF16 TFLOP/s | FP8 TFLOP/s | FP4 TFLOP/s | HBM TB/s | SM | Source |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in PEAKS:
        f = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
        lines.append(
            f"| {p.name} | {f(p.bf16_tflops)} | {f(p.fp8_tflops)} | {f(p.fp4_tflops)} | "
            f"{p.hbm_tb_per_sec:g} | {p.compute_capability[0]}.{p.compute_capability[1]} | "
            f"{p.source} |"
        )
    return "\n".join(lines)


__all__ = [
    "ELEMENT_BYTES",
    "GpuPeak",
    "PEAKS",
    "find_peak",
    "peak_tflops",
    "gemm_flops_bytes",
    "moe_flops_bytes",
    "expected_local_pairs",
    "expected_experts_touched",
    "attention_flops_bytes",
    "row_flops_bytes",
    "annotate",
    "peaks_table_markdown",
]
