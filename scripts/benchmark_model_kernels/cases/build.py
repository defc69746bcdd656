"""Plan -> cases: every measurement to make for a plan, with vLLM's physical padding per backend.

`build_cases` turns a Plan into Cases (`core/case_schema.py`), applying vLLM's padding per backend
(`vllm_rules/padding.py`) and deciding `skip_reason` up front for what the GPU or a known shape
limit rules out (`cases/backends.py`, `cases/kernel_limits.py`), so no GPU time is spent on a cell
whose answer is known. Each Case records the activation format its kernel consumes
(`backends.activation_quant`), which its driver argv and its with_quant twin follow.
"""

from __future__ import annotations

from dataclasses import replace as _replace
from typing import Sequence

from ..core.case_schema import DTYPES, MODES, Case, GemmShape, MoeShape
from ..core.case_schema import id_part as _id_part
from ..core.errors import UsageError
from ..core.plan_schema import GemmEntry, ModelInfo, MoeEntry, Plan, Routing
from ..vllm_rules.dispatch import LayerCell, gpu_family, is_vllm_default, refined_fp8_block, table_row, timed_label
from ..vllm_rules.layers import kept_in_bf16
from ..vllm_rules.layout import Layout
from ..vllm_rules.padding import physical_gemm, physical_moe
from . import backends as bk
from .attention import DEFAULT_SWEEP, AttentionSweep, attention_cases
from .capabilities import HAND, Capabilities
from .kernel_limits import DRIVER_ROUTING_METHODS, shape_limit

#: FlashInfer `ActivationType` names at v0.6.17 (flashinfer/tllm_enums.py), InvalidType excluded.
FLASHINFER_ACTIVATIONS = ("Gelu", "Relu", "Silu", "Swiglu", "Geglu", "SwigluBias", "Relu2",
                          "SwigluStep", "GegluTanh", "Identity", "Situ")

#: `--cutlass_variant` of cutlass_fused_moe per recipe (driver moe.py:286-292).
_CUTLASS_VARIANT = {"bf16": "base", "fp8": "fp8", "nvfp4": "nvfp4"}


def _case_id(kind: str, name: str, m: int, dtype: str, backend: str, variant: str) -> str:
    parts = [kind, _id_part(name), f"m{m}", dtype, _id_part(backend)]
    if variant:
        parts.append(_id_part(variant))
    return ".".join(parts)


def _gemm_driver_args(case_id: str, routine: str, backend: str, shape: GemmShape,
                      activation_quant: str) -> tuple[str, ...]:
    args = ["--routine", routine, "--m", str(shape.m), "--n", str(shape.n), "--k", str(shape.k)]
    if routine == "bmm_fp8":
        args += ["--batch_size", "1", "--input_dtype", "fp8_e4m3", "--mat2_dtype", "fp8_e4m3"]
    elif routine == "mm_fp8":
        args += ["--input_dtype", "fp8_e4m3", "--mat2_dtype", "fp8_e4m3"]
    elif routine == "gemm_fp8_nt_groupwise":
        # 128x128 weight blocks and 1x128 activation groups: the block-128 checkpoint layout.
        args += ["--tile_size", "128", "--scale_major_mode", "K", "--input_dtype", "fp8_e4m3",
                 "--mat2_dtype", "fp8_e4m3"]
    elif routine == "mm_fp4":
        args.append("--use_nvfp4")
        # The activation-scale layout the case records: only trtllm takes 8x4, and vLLM uses it
        # for small M only (backends.activation_quant).
        if activation_quant == "nvfp4_128x4":
            args.append("--use_128x4_sf_layout")
    args += ["--out_dtype", "bfloat16", "--backends", backend, "--case_tag", case_id]
    return tuple(args)


def _routing_args(routing: Routing) -> list[str]:
    """`--routing_method` (always explicit: the driver defaults to deepseek_v3) and its parameters.
    Methods the driver has no name for are passed as renormalize: only routines that ignore the
    flag (cutlass, cute-dsl) are ever launched with them (backends.shape_limit skips the rest)."""
    method = routing.method if routing.method in DRIVER_ROUTING_METHODS else "renormalize"
    scale = routing.routed_scaling_factor if routing.routed_scaling_factor is not None else 1.0
    args = ["--routing_method", method, "--routed_scaling_factor", repr(float(scale))]
    if method == "deepseek_v3":
        # Groups only with deepseek_v3: the kernel rejects n_group/topk_group otherwise.
        args += ["--n_group", str(routing.n_group or 1), "--topk_group", str(routing.topk_group or 1)]
        if routing.use_routing_bias:
            args.append("--use_routing_bias")
    if method == "llama4" and routing.apply_router_weight_on_input:
        args.append("--use_routing_scales_on_input")
    return args


def _local_expert_offset(entry: MoeEntry, layout: Layout) -> int:
    """Global index of the planned rank's first expert under vLLM's linear expert placement
    (`Layout.first_local_expert`); 0 when its experts would run past the last one."""
    rank = entry.ep_rank if entry.ep_rank < layout.ep else 0
    offset = layout.first_local_expert(entry.global_experts, rank)
    return offset if offset + entry.experts <= entry.global_experts else 0


def _cutlass_ep(entry: MoeEntry, layout: Layout) -> tuple[int, int] | None:
    """(ep_size, ep_rank) for cutlass_fused_moe's EP emulation, which slices num_experts // ep_size
    experts per rank (driver moe.py:939-943): the layout's EP size, or, where the planned rank
    holds one of the E % EP remaining experts, the smallest ep_size that gives its count; None
    without expert parallelism or when no ep_size gives the planned count."""
    e, local = entry.global_experts, entry.experts
    if not layout.use_ep:
        return None
    sizes = [layout.ep] + [size for size in range(1, e + 1) if size != layout.ep]
    size = next((size for size in sizes if e // size == local), None)
    if size is None:
        return None
    return size, entry.ep_rank if entry.ep_rank < size else 0


def _moe_driver_args(case_id: str, spec, entry: MoeEntry, shape: MoeShape,
                     activation: str, layout: Layout) -> tuple[tuple[str, ...], str]:
    """(argv, reason): reason is non-empty when EP cannot be expressed for this routine."""
    args = ["--routine", spec.routine, "--num_tokens", str(shape.num_tokens),
            "--hidden_size", str(shape.hidden),
            "--intermediate_size", str(shape.intermediate), "--num_experts",
            str(entry.global_experts), "--top_k", str(entry.top_k)]
    args += _routing_args(entry.routing)
    args += ["--activation-type", activation]
    reason = ""
    if spec.routine == "cutlass_fused_moe":
        args += ["--cutlass_variant", _CUTLASS_VARIANT[spec.dtype]]
        if spec.variant == "quantized_input":
            args.append("--quantized_input")
        if entry.experts < entry.global_experts:
            ep = _cutlass_ep(entry, layout)
            if ep is None:
                reason = (f"cutlass_fused_moe EP emulation holds num_experts // ep_size experts "
                          f"per rank; no ep_size gives {entry.experts} of {entry.global_experts}")
            else:
                args += ["--ep_size", str(ep[0]), "--ep_rank", str(ep[1])]
    else:
        if spec.routine == "trtllm_fp4_block_scale_moe":
            args += ["--fp4_mode", "nvfp4"]
        if entry.experts < entry.global_experts:
            args += ["--local_num_experts", str(entry.experts),
                     "--local_expert_offset", str(_local_expert_offset(entry, layout))]
    args += ["--case_tag", case_id]
    return tuple(args), reason


def _canonical_activation(name: str) -> str:
    lower = {a.lower(): a for a in FLASHINFER_ACTIVATIONS}
    return lower.get(name.lower(), "")


def check_filters(ms: Sequence[int], dtypes: Sequence[str],
                  backends: Sequence[str] | None, caps: Capabilities = HAND) -> None:
    """The --ms, --dtypes and --backends values; raises UsageError naming the first bad one.
    `--backends` accepts the table's backends and those the installed FlashInfer adds (`caps`)."""
    names = bk.backend_names(caps)
    for m in ms:
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise UsageError("--ms", m, "every M must be a positive number of tokens, e.g. --ms 1 8 64")
    for d in dtypes:
        if d not in DTYPES:
            raise UsageError("--dtypes", d, f"choose from {', '.join(DTYPES)}")
    for b in backends or ():
        if b not in names:
            raise UsageError("--backends", b, f"choose from {', '.join(names)}")
    for flag, values in (("--ms", ms), ("--dtypes", dtypes), ("--backends", backends or ())):
        twice = [v for i, v in enumerate(values) if v in list(values)[:i]]
        if twice:
            raise UsageError(flag, " ".join(map(str, values)),
                             f"lists {twice[0]} twice; give each value once")


def _refined_block(case: Case, spec: bk.BackendSpec) -> int:
    """The block size vLLM refines a block-128 MoE case's checkpoint to (0: none): its per-rank
    intermediate size is the shard (vllm_rules.dispatch.refined_fp8_block)."""
    if case.kind != "moe" or spec.scheme != "block128" or not isinstance(case.logical, MoeShape):
        return 0
    return refined_fp8_block(case.logical.intermediate, case.logical.hidden)


def build_cases(plan: Plan, ms: Sequence[int], dtypes: Sequence[str] = DTYPES,
                backends: Sequence[str] | None = None,
                compute_capability: tuple[int, int] | None = None,
                caps: Capabilities = HAND,
                attention: AttentionSweep = DEFAULT_SWEEP, search_moe_tiles: bool = False) -> list[Case]:
    """Every measurement to make for `plan` at token counts `ms`.

    One Case per (entry, M, dtype, backend[, variant][, with_quant]), ordered by plan order (GEMMs,
    then MoE, then attention: `cases/attention.py`, swept as `attention` says), then M, dtype,
    backend (backends.BACKENDS order); a with_quant twin follows its kernel-only case.
    `backends=None` means all; `compute_capability=None` (no GPU, dry run) skips nothing for
    capability, but vLLM and shape limits still set `skip_reason`. `caps`: what the
    installed FlashInfer says about its backends (`capabilities.load_capabilities`); the hand
    table answers without it. `search_moe_tiles`: also the Triton MoE rows that search their tiles
    (the `tuned` twins, backends.tuned_tiles; --search_moe_tiles).
    """
    check_filters(ms, dtypes, backends, caps)
    wanted = set(backends) if backends else None
    cc = tuple(compute_capability) if compute_capability is not None else None
    cases: list[Case] = []

    def add(case: Case, spec: bk.BackendSpec, pre_reason: str) -> None:
        reason = bk.capability_reason(spec, cc, caps) or pre_reason or shape_limit(case)
        refined = _refined_block(case, spec)
        cell = LayerCell(case.kind, case.dtype, spec.scheme, plan.ep > 1, plan.model.fp8_activation_scales,
                         refined > 0)
        row = table_row(gpu_family(cc), cell)
        match = row.match if row is not None and is_vllm_default(row, spec.backend, spec.routine) else ""
        timed = timed_label(row, spec.backend, spec.routine, bk.tuned_tiles(spec.variant))
        note = case.note
        if refined and spec.backend == bk.TRITON:
            note = (f"vLLM refines the checkpoint's 128x128 blocks to {refined}x{refined} for this shard "
                    "(vllm/model_executor/layers/fused_moe/oracle/fp8.py: refine_fp8_moe_block_shape); "
                    "this row times 128x128 blocks")
        case = _replace(case, skip_reason=reason, scheme=spec.scheme, vllm_default=match, timed_as=timed.label,
                        vllm_runs=timed.vllm_runs, note=note)
        cases.append(case)
        if spec.quant:
            cases.append(_replace(case, case_id=case.case_id + ".q", with_quant=True))

    scales, arch = plan.model.fp8_activation_scales, plan.model.architecture
    for entry in plan.gemms:
        for m in ms:
            for dtype in dtypes:
                for spec in bk.specs_for("gemm", dtype, caps):
                    if wanted is not None and spec.backend not in wanted:
                        continue
                    if dtype != "bf16" and kept_in_bf16(entry.name, dtype, spec.scheme, scales, arch):
                        continue
                    case_id = _case_id("gemm", entry.name, m, dtype, spec.backend, spec.variant)
                    logical = GemmShape(-(-m // entry.m_divisor), entry.n, entry.k)
                    physical, vllm_reason = physical_gemm(logical, spec.routine, spec.backend,
                                                          dtype)
                    quant = bk.activation_quant(spec, physical.m)
                    argv = (_gemm_driver_args(case_id, spec.routine, spec.backend, physical, quant)
                            if spec.driver else ())
                    add(Case(case_id=case_id, kind="gemm", name=entry.name, modules=entry.modules,
                             layers=entry.layers, m=m, dtype=dtype, backend=spec.backend,
                             routine=spec.routine, logical=logical, physical=physical,
                             variant=spec.variant, activation_quant=quant, driver_args=argv),
                        spec, vllm_reason)

    layout = Layout.from_flags(plan.tp, plan.ep) if plan.moe else Layout()
    for entry in plan.moe:
        activation = _canonical_activation(entry.activation)
        for m in ms:
            for dtype in dtypes:
                for spec in bk.specs_for("moe", dtype, caps):
                    if wanted is not None and spec.backend not in wanted:
                        continue
                    if not search_moe_tiles and bk.tuned_tiles(spec.variant):
                        continue
                    case_id = _case_id("moe", entry.name, m, dtype, spec.backend, spec.variant)
                    logical = MoeShape(m * entry.tokens_per_m, entry.hidden, entry.intermediate,
                                       entry.experts, entry.global_experts, entry.top_k)
                    physical, reason = physical_moe(logical, spec.routine, spec.backend, dtype,
                                                    entry.gated)
                    argv: tuple[str, ...] = ()
                    if not activation:
                        reason = (f"activation {entry.activation!r} has no FlashInfer "
                                  f"ActivationType (choose from {', '.join(FLASHINFER_ACTIVATIONS)})")
                    elif spec.driver:
                        argv, ep_reason = _moe_driver_args(case_id, spec, entry, physical,
                                                           activation, layout)
                        reason = reason or ep_reason
                    add(Case(case_id=case_id, kind="moe", name=entry.name, modules=entry.modules,
                             layers=entry.layers, m=m, dtype=dtype, backend=spec.backend,
                             routine=spec.routine, logical=logical, physical=physical,
                             variant=spec.variant,
                             activation_quant=bk.activation_quant(spec, physical.num_tokens),
                             activation=activation or entry.activation,
                             gated=entry.gated, routing=entry.routing, driver_args=argv),
                        spec, reason)

    cases += attention_cases(plan, ms, attention, backends, compute_capability, caps)
    seen: set[str] = set()
    for case in cases:
        if case.case_id in seen:
            raise ValueError(f"duplicate case id {case.case_id!r}: plan entry names must be unique")
        seen.add(case.case_id)
    return cases


def with_modes(cases: Sequence[Case], modes: Sequence[str]) -> list[Case]:
    """Each case once per timing mode, in `modes` order after one another: graph cases keep their
    ids (a --resume of an earlier run finds them), eager ones get ".eager" before a ".q" suffix
    (so a with_quant twin still names its kernel-only case) and the driver's --case_tag follows."""
    for mode in modes:
        if mode not in MODES:
            raise UsageError("--modes", mode, f"choose from {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise UsageError("--modes", " ".join(modes), "lists a mode twice; give each once")
    out: list[Case] = []
    for case in cases:
        for mode in modes:
            if mode == "graph":
                out.append(_replace(case, mode="graph"))
                continue
            base = case.base_case_id if case.with_quant else case.case_id
            case_id = base + ".eager" + (".q" if case.with_quant else "")
            argv = list(case.driver_args)
            if "--case_tag" in argv:
                argv[argv.index("--case_tag") + 1] = case_id
            out.append(_replace(case, case_id=case_id, mode="eager", driver_args=tuple(argv)))
    return out


def plan_from_shapes(nks: Sequence[tuple[int, int, str]], moe: MoeEntry | None = None) -> Plan:
    """A Plan for explicit shapes (`benchmark_via_builtin.py --nks N,K,name ... --moe_*`):
    every entry runs once per step (layers=1)."""
    gemms: list[GemmEntry] = []
    names: set[str] = set()
    for n, k, name in nks:
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (n, k)):
            raise UsageError("--nks", f"{n},{k},{name}", "N and K must be positive integers, "
                             "e.g. --nks 4096,4096,qkv_proj")
        if not name or name in names:
            raise UsageError("--nks", f"{n},{k},{name}", "each shape needs a unique name, "
                             "e.g. --nks 4096,4096,a 4096,14336,b")
        names.add(name)
        gemms.append(GemmEntry(name=name, modules=(), n=n, k=k, layers=1, parallel="replicated"))
    moes: tuple[MoeEntry, ...] = ()
    ep = 1
    if moe is not None:
        for field, value in (("--moe_hidden", moe.hidden), ("--moe_intermediate", moe.intermediate),
                             ("--moe_global_experts", moe.global_experts),
                             ("--moe_top_k", moe.top_k)):
            if not isinstance(value, int) or value < 1:
                raise UsageError(field, value, "must be a positive integer")
        if not 1 <= moe.experts <= moe.global_experts:
            raise UsageError("--moe_experts", moe.experts,
                             f"must be between 1 and --moe_global_experts={moe.global_experts}")
        if moe.top_k > moe.global_experts:
            raise UsageError("--moe_top_k", moe.top_k,
                             f"must not exceed --moe_global_experts={moe.global_experts}")
        moes = (_replace(moe, layers=1),)
        if moe.experts < moe.global_experts:
            ep = max(1, moe.global_experts // moe.experts)
    info = ModelInfo(name="explicit shapes", source="shapes", model_type="", architecture="")
    return Plan(model=info, tp=1, ep=ep, gemms=tuple(gemms), moe=moes)
