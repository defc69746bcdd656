"""Hand-made Cases for tests: `gemm_case` and `moe_case`, every field a keyword with a default.

The ids follow cases/build.py (`kind.name.mM.dtype.backend[.variant][.q]`). Cases of a FlashInfer
routine carry the driver argv of their shape (what the stand-in driver reads); torch and triton
cases have none, as the case builder makes them.
"""

from __future__ import annotations

from benchmark_model_kernels.core.case_schema import Case, GemmShape, MoeShape
from benchmark_model_kernels.core.plan_schema import Routing

__all__ = ["gemm_case", "moe_case"]

#: Backends the tool times itself (no FlashInfer driver argv).
_OWN_BACKENDS = ("torch", "triton")


def _case_id(kind: str, name: str, m: int, dtype: str, backend: str, variant: str, with_quant: bool) -> str:
    return f"{kind}.{name}.m{m}.{dtype}.{backend}" + (f".{variant}" if variant else "") + (".q" if with_quant else "")


def gemm_case(n: int = 4096, *, m: int = 8, k: int = 64, routine: str = "mm_bf16", backend: str = "cudnn",
              dtype: str = "bf16", variant: str = "", physical_k: int | None = None, with_quant: bool = False,
              activation_quant: str = "", name: str | None = None, layers: int = 32, skip: str = "",
              extra: tuple[str, ...] = ()) -> Case:
    """A GEMM [m, k] x [k, n]; `physical_k` the backend's padded K (default k); `extra` more
    driver flags; `skip` the skip reason."""
    name = name or f"g{n}"
    args = ("--routine", routine, "--m", str(m), "--n", str(n), "--k", str(k), "--backends", backend) + extra
    return Case(case_id=_case_id("gemm", name, m, dtype, backend, variant, with_quant), kind="gemm", name=name,
                modules=(f"model.layers.*.{name}",), layers=layers, m=m, dtype=dtype, backend=backend,
                routine=routine, logical=GemmShape(m, n, k), physical=GemmShape(m, n, physical_k or k),
                variant=variant, with_quant=with_quant, activation_quant=activation_quant,
                driver_args=() if backend in _OWN_BACKENDS else args, skip_reason=skip)


def moe_case(intermediate: int = 768, *, m: int = 8, hidden: int = 2048, experts: int = 128,
             global_experts: int | None = None, top_k: int = 8, routine: str = "cutlass_fused_moe",
             backend: str = "cutlass", dtype: str = "bf16", variant: str = "", physical_hidden: int | None = None,
             activation: str = "Swiglu", gated: bool = True, routing: Routing | None = None,
             with_quant: bool = False, activation_quant: str = "", layers: int = 48) -> Case:
    """The routed experts of one rank: `experts` local of `global_experts` (default: all local),
    `physical_hidden` the backend's padded hidden (default hidden); renormalize routing unless given."""
    routing = routing or Routing(method="renormalize")
    logical = MoeShape(num_tokens=m, hidden=hidden, intermediate=intermediate, experts=experts,
                       global_experts=global_experts or experts, top_k=top_k)
    physical = MoeShape(num_tokens=m, hidden=physical_hidden or hidden, intermediate=intermediate,
                        experts=experts, global_experts=global_experts or experts, top_k=top_k)
    args = ("--routine", routine, "--num_tokens", str(m), "--hidden_size", str(hidden),
            "--intermediate_size", str(intermediate), "--num_experts", str(global_experts or experts),
            "--top_k", str(top_k), "--routing_method", routing.method)
    if routine == "cutlass_fused_moe":
        args += ("--cutlass_variant", variant or "base")
    return Case(case_id=_case_id("moe", "experts", m, dtype, backend, variant, with_quant), kind="moe",
                name="experts", modules=("model.layers.*.mlp.experts",), layers=layers, m=m, dtype=dtype,
                backend=backend, routine=routine, logical=logical, physical=physical, variant=variant,
                with_quant=with_quant, activation_quant=activation_quant, activation=activation, gated=gated,
                routing=routing, driver_args=() if backend in _OWN_BACKENDS else args)
