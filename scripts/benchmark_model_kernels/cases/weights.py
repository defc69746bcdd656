"""Weight memory one rank holds for a plan, per recipe: the GEMM and expert weights the plan
lists (per-rank shapes, each entry's layers), in the recipe's storage, with what vLLM keeps in
BF16 whatever the recipe (`vllm_rules.layers.kept_in_bf16`: router, shared-expert gate, lm_head).
Embeddings, norms, biases and the KV cache are not GEMM weights and are not counted."""

from __future__ import annotations

from ..plan.schema import Plan
from ..vllm_rules.layers import kept_in_bf16
from .schema import DTYPES

#: Bytes per weight element: BF16; FP8 e4m3 (one scale per tensor, channel or 128x128 block:
#: negligible); NVFP4 (4 bits, plus one FP8 scale per 16 elements).
BYTES_PER_ELEMENT = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16}


def weight_bytes(plan: Plan, dtype: str) -> float:
    """Bytes of GEMM and expert weights one rank of `plan` holds in recipe `dtype`."""
    total = 0.0
    for g in plan.gemms:
        per = BYTES_PER_ELEMENT["bf16" if kept_in_bf16(g.name) else dtype]
        total += g.n * g.k * g.layers * per
    for m in plan.moe:
        gemm1 = (2 if m.gated else 1) * m.intermediate * m.hidden
        gemm2 = m.hidden * m.intermediate
        total += m.experts * (gemm1 + gemm2) * m.layers * BYTES_PER_ELEMENT[dtype]
    return total


def weight_memory_line(plan: Plan) -> str:
    """The preview's line: GiB per rank for every recipe."""
    parts = ", ".join(f"{d} {weight_bytes(plan, d) / 2**30:.1f} GiB" for d in DTYPES)
    return (f"# weights per rank (GEMM and expert weights of this plan; embeddings, norms and KV "
            f"cache not counted): {parts}")


__all__ = ["BYTES_PER_ELEMENT", "weight_bytes", "weight_memory_line"]
