"""What `scripts/tune_moe.py` tunes: the request, the plan's fused-MoE shapes and their files, and
the tiles vLLM itself runs them with.

In: MODEL, the layout (--tp/--ep), the schemes and the keys. Out: one `PlannedShape` per fused-MoE
entry of the plan (plan/planner.py) and scheme, from the `triton.fused_moe` case that cases/build.py
makes for it at M=1 (kernels/triton_ops.py moe_problem), so the shape, the activation, the FP8
block and the limits are the ones a timed row of that layout has; each names its vLLM file
(vllm_rules/moe_triton.py config_file_name) and its keys; `vllm_tiles` gives the tiles vLLM
itself would run it with at a key (its shipped table, carried in vllm_rules/moe_triton_configs.json
so that no vLLM is needed on the GPU machine, and its default).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from ..cases.build import build_cases
from ..core.errors import UsageError
from ..core.results_schema import RunSettings
from ..kernels.triton_moe.problem import MoeProblem
from ..vllm_rules import moe_config_files as vf
from ..vllm_rules import moe_triton
from ..vllm_rules.layout import Layout


@dataclass(frozen=True)
class TuneRequest:
    """One scripts/tune_moe.py command, checked (run/tune_moe.py request_from_args)."""

    model: str
    layout: Layout
    schemes: tuple[str, ...]
    keys: tuple[int, ...] | None = None
    ms: tuple[int, ...] | None = None
    out: str | None = None
    search: str = "descent"
    tile_cache: str | None = None
    settings: RunSettings = RunSettings()
    device_name: str | None = None
    dry_run: bool = False
    command: str = ""


@dataclass(frozen=True)
class PlannedShape:
    """One fused-MoE layer of the plan under one scheme, and the file it is tuned into."""

    entry: str
    layers: int
    tokens_per_m: int
    """MoE tokens per attention token M at the layout (EP/TP under expert parallelism, else 1)."""
    scheme: str
    label: str
    problem: MoeProblem | None
    """The kernel's problem at one token; None when the shape is not tuned (`skip_reason`)."""
    skip_reason: str = ""

    def at(self, num_tokens: int) -> MoeProblem:
        assert self.problem is not None
        return dataclasses.replace(self.problem, num_tokens=num_tokens)

    def file_name(self, device_name: str) -> str:
        """The file vLLM looks this shape up in (get_config_file_name; a refined FP8 block is its block_shape)."""
        from ..kernels.triton_moe.tuning import vllm_call

        return moe_triton.config_file_name(vllm_call(self.at(1)), device_name)

    def keys(self, req: TuneRequest) -> tuple[int, ...]:
        if req.ms:
            return tuple(m * self.tokens_per_m for m in req.ms)
        return req.keys or vf.TUNER_BATCH_SIZES


def plan_shapes(req: TuneRequest) -> list[PlannedShape]:
    """Every fused-MoE entry of the plan under each scheme (the triton.fused_moe cases at M=1);
    UsageError when the model has none."""
    from ..kernels.triton_ops import moe_problem
    from ..plan.planner import plan_layout

    plan = plan_layout(req.model, req.layout)
    if not plan.moe:
        raise UsageError("MODEL", req.model, "has no fused-MoE layer to tune (its plan has no MoE entry)")
    dtypes = tuple(d for d in ("bf16", "fp8") if any(s.startswith(d) for s in req.schemes))
    cases = build_cases(dataclasses.replace(plan, gemms=(), attention=()), [1], dtypes, ["triton"])
    entries = {e.name: e for e in plan.moe}
    out: list[PlannedShape] = []
    seen: set[tuple[str, str]] = set()
    for case in cases:
        # The kernel-only row of each (entry, scheme); its with_quant and searched-tiles twins time
        # the same problem.
        scheme = "bf16" if case.dtype == "bf16" else f"fp8_{case.scheme}"
        if (case.kind != "moe" or case.routine != "triton.fused_moe" or case.with_quant
                or scheme not in req.schemes or (case.name, scheme) in seen):
            continue
        seen.add((case.name, scheme))
        entry = entries[case.name]
        p = case.physical
        label = (f"{case.name}: E={p.experts} of {p.global_experts}, N={p.intermediate}, H={p.hidden}, "
                 f"top_k={p.top_k}, {case.activation}, {scheme}")
        problem = None if case.skip_reason else moe_problem(case)
        out.append(PlannedShape(case.name, entry.layers, entry.tokens_per_m, scheme, label, problem,
                                case.skip_reason))
    return out


def file_collisions(shapes: Sequence[PlannedShape], device_name: str) -> dict[str, list[PlannedShape]]:
    """Tunable shapes by file name: two layers (or per-tensor and per-token) of one name share a file."""
    by_name: dict[str, list[PlannedShape]] = {}
    for s in shapes:
        if not s.skip_reason:
            by_name.setdefault(s.file_name(device_name), []).append(s)
    return by_name


def vllm_tiles(p: MoeProblem, device_name: str) -> tuple[dict[str, int] | None, dict[str, int]]:
    """(shipped, default): the tiles vLLM 0.33.0 takes from its shipped file for `p` at its token
    count (None when it ships none), as its launch applies them (kernels/triton_moe/tuning.py
    vllm_config), and its get_default_config tiles."""
    from ..kernels.triton_moe.tuning import vllm_call, vllm_config

    call = vllm_call(p)
    table = moe_triton.shipped_table(moe_triton.config_file_name(call, device_name))
    shipped = None
    if table is not None:
        try:
            shipped = vllm_config(p, device_name)[0]
        except ValueError:  # tiles this kernel cannot run: kept as vLLM's, the row says why
            shipped = vf.tile_config(dict(table)[vf.nearest_key([k for k, _ in table], p.num_tokens)])
    return shipped, vf.tile_config(moe_triton.default_config(call))


def shipped_source() -> str:
    return (f"vLLM {moe_triton.tables_vllm_version()}'s shipped tables (carried in "
            "vllm_rules/moe_triton_configs.json)")


def shape_lines(shapes: Sequence[PlannedShape], req: TuneRequest, device_name: str | None) -> list[str]:
    """The dry run's (and a run's first) lines: each shape, its file and whether vLLM ships one, its keys."""
    lines = [f"{req.model} {req.layout.label}: {len(shapes)} fused-MoE shape(s); the MoE layer looks up "
             f"M x {req.layout.tokens_per_m} tokens per attention token M"]
    for s in shapes:
        lines.append(f"  {s.label} ({s.layers} layers)")
        if s.skip_reason:
            lines.append(f"    not tuned: {s.skip_reason}")
            continue
        name = s.file_name(device_name or "<GPU>")
        ships = device_name is not None and moe_triton.shipped_table(name) is not None
        lines.append(f"    file {name}" + ("" if device_name is None else "  (vLLM ships one: compared)" if ships
                                          else "  (vLLM ships none: it runs its default tiles)"))
        shown = " ".join(f"{k}" + (f"(M={k // s.tokens_per_m})" if s.tokens_per_m > 1 and k % s.tokens_per_m == 0
                                   else "") for k in s.keys(req))
        lines.append(f"    keys: {shown}")
    return lines


__all__ = ["PlannedShape", "TuneRequest", "file_collisions", "plan_shapes", "shape_lines", "shipped_source",
           "vllm_tiles"]
