"""The layouts vLLM can serve a model with on G GPUs of one kind, each planned or refused with why.

In: MODEL (as `benchmark_model.py` takes it), the GPU kind and count (`--gpus 8xH200`), the recipes
and the memory settings. Out: one `LayoutPlan` per layout of TP x DP = G (for an MoE model each
with expert parallelism off and on), holding the planner's per-rank plan or the reason there is
none, and per recipe the memory estimate of one rank (`plan/memory.py`).

What vLLM serves on G GPUs (pipeline parallelism is not modelled):
  * `--tensor-parallel-size TP --data-parallel-size DP` with TP x DP = G; attention and dense
    layers run TP-sharded inside each DP replica on its own sequences (vllm/config/parallel.py:
    ParallelConfig, world_size = pipeline x tensor, times data_parallel_size replicas);
  * for an MoE model also `--enable-expert-parallel`: EP = TP x DP ranks each hold E/EP experts
    at full width (vllm/model_executor/layers/fused_moe/config.py: FusedMoEParallelConfig.make).
    Without it and with DP > 1 the experts are TP-sharded over all TP x DP ranks (`Layout.moe_tp`),
    which the planner does not plan: such layouts are listed as not planned, never approximated.
The planner's own refusals (a TP that does not divide the heads, the MoE intermediate size) are
caught and shown as the layout's reason; so are EP sizes that leave ranks with no expert.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..core.errors import UsageError
from ..core.gpu_specs import GPU_SPECS
from ..core.plan_schema import Plan
from ..plan import memory, plan_cache, planner
from ..vllm_rules.layout import Layout

#: GPUs in one NVLink domain of the systems the communication tables cover (HGX H100 / H200 /
#: B200 boards hold 8); a deployment over several nodes is not modelled.
MAX_GPUS = 8


@dataclass(frozen=True)
class GpuKind:
    """What the deployment view needs of one GPU model."""

    name: str
    """As `--gpus` spells it, e.g. "H200"."""
    memory_bytes: int
    """Device memory as NVML reports it (`memory.total`), the size vLLM's utilization applies to."""
    memory_source: str
    compute_capability: tuple[int, int]
    comm_system: str
    """The communication model's system key (deploy/comm_times.py)."""

    @property
    def cc_text(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"


#: The communication model's system of each GPU kind `--gpus` knows (the SXM parts of HGX boards);
#: compute capability and memory (as nvidia-smi reports it) are core/gpu_specs.py's, the one table
#: of GPU names that `--assume_cc h200` reads too.
_COMM_SYSTEMS = {"H100": "h100_nvlink", "H200": "h200_nvlink", "B200": "b200_nvlink"}
GPU_KINDS: dict[str, GpuKind] = {
    name: GpuKind(name, round(GPU_SPECS[name.lower()].memory_gib * 2**30), GPU_SPECS[name.lower()].source,
                  GPU_SPECS[name.lower()].compute_capability, system)
    for name, system in _COMM_SYSTEMS.items()
}


@dataclass(frozen=True)
class Cluster:
    """G GPUs of one kind in one NVLink domain."""

    kind: GpuKind
    count: int

    @property
    def label(self) -> str:
        return f"{self.count}x{self.kind.name}"


_GPUS = re.compile(r"^\s*(\d+)\s*[xX*]\s*([A-Za-z0-9]+)\s*$")


def parse_gpus(text: str) -> Cluster:
    """`--gpus 8xH200` -> Cluster(H200, 8); UsageError naming the value and the fix otherwise.

    >>> parse_gpus("8xH200").label
    '8xH200'
    """
    kinds = ", ".join(GPU_KINDS)
    found = _GPUS.match(text or "")
    if not found:
        raise UsageError("--gpus", text, f"give COUNTxKIND, e.g. --gpus 8xH200 (kinds: {kinds})")
    count, name = int(found.group(1)), found.group(2).upper()
    if name not in GPU_KINDS:
        raise UsageError("--gpus", text, f"unknown GPU kind {found.group(2)!r}; choose from {kinds}, "
                         "e.g. --gpus 8xH200")
    if not 1 <= count <= MAX_GPUS:
        raise UsageError("--gpus", text, f"the count must be 1 to {MAX_GPUS} (one NVLink node; "
                         "several nodes are not modelled), e.g. --gpus 8xH200")
    return Cluster(GPU_KINDS[name], count)


@dataclass(frozen=True)
class PlanOptions:
    """How MODEL is resolved and planned (the flags `benchmark_model.py` takes for it)."""

    model: str
    revision: str | None = None
    trust_remote_code: bool = False
    allow_defaults: bool = False


@dataclass(frozen=True)
class LayoutPlan:
    """One layout on the cluster: its per-rank plan, or why there is none."""

    layout: Layout
    plan: Plan | None
    refusal: str = ""
    """Why this layout gets no numbers ("" when it is planned and some recipe fits)."""
    refusal_kind: str = ""
    """"planner" (the planner refuses it, as vLLM would), "experts", "not planned" or "memory"."""
    estimates: dict[str, memory.MemoryEstimate] = field(default_factory=dict)
    """Per recipe, one rank's memory (K/V cache in the deployment's K/V dtype)."""

    @property
    def runnable(self) -> bool:
        return self.plan is not None and not self.refusal

    @property
    def name(self) -> str:
        """The layout's sub-workdir name, e.g. "tp2_dp4_ep"."""
        lay = self.layout
        return f"tp{lay.tp}" + (f"_dp{lay.dp}" if lay.dp > 1 else "") + ("_ep" if lay.use_ep else "")

    @property
    def label(self) -> str:
        return self.layout.label

    def m(self, batch: int) -> int:
        """Tokens one rank's attention and dense GEMMs run per decode step: its DP replica's share
        of the global batch, ceil(B / DP) (the busiest replica sets the step)."""
        return math.ceil(batch / self.layout.dp)

    def moe_tokens(self, batch: int) -> int:
        """Tokens one rank's MoE layer runs: M x DP (`Layout.tokens_per_m`)."""
        return self.m(batch) * self.layout.tokens_per_m

    def fits_recipe(self, recipe: str) -> bool:
        est = self.estimates.get(recipe)
        return est is not None and est.kv_fits_any


def candidate_layouts(count: int, moe: bool) -> list[Layout]:
    """Every TP x DP = `count`, TP ascending; for an MoE model each with expert parallelism off and
    (with more than one GPU) on."""
    out = []
    for tp in (t for t in range(1, count + 1) if count % t == 0):
        out.append(Layout(tp=tp, dp=count // tp))
        if moe and count > 1:
            out.append(Layout(tp=tp, dp=count // tp, enable_ep=True))
    return out


def plan_layout(options: PlanOptions, layout: Layout) -> Plan:
    """The planner's per-rank plan of `layout`, as `benchmark_model.py --tp T --ep E` makes it
    (the plan cache serves it when kept); UsageError where the planner refuses it."""
    return planner.plan_model(options.model, layout.tp, layout.ep, revision=options.revision,
                              trust_remote_code=options.trust_remote_code,
                              allow_defaults=options.allow_defaults,
                              plan_dir=plan_cache.default_plan_dir())


NOT_PLANNED_MOE_TP = ("not planned: without expert parallelism and with DP > 1 vLLM shards every expert "
                      "over all TP x DP ranks (vllm/model_executor/layers/fused_moe/config.py: "
                      "FusedMoEParallelConfig.make flattens tp_size = dp_size x tp_size); the planner "
                      "plans the MoE at the attention's TP only")


def _expert_refusal(plan: Plan, layout: Layout) -> str:
    """Why an EP size leaves ranks without an expert ("" when every rank holds one)."""
    for entry in plan.moe if layout.use_ep else ():
        if entry.global_experts < layout.ep:
            return (f"EP={layout.ep} exceeds the {entry.global_experts} routed experts of {entry.name}: "
                    f"{layout.ep - entry.global_experts} ranks would hold none "
                    "(vllm/model_executor/layers/fused_moe/expert_map_manager.py: determine_expert_map)")
    return ""


def _memory_refusal(estimates: dict[str, memory.MemoryEstimate]) -> str:
    """Why no recipe's weights fit one rank ("" when one does)."""
    if any(e.kv_fits_any for e in estimates.values()):
        return ""
    parts = [f"{r}: weights {memory.gib(e.weight_bytes)} GiB + reserve {memory.gib(e.reserve_bytes)} GiB "
             f"> {memory.gib(e.usable_bytes)} GiB usable" for r, e in estimates.items()]
    return "does not fit one rank in any recipe (" + "; ".join(parts) + ")"


@dataclass(frozen=True)
class MemorySettings:
    """What one rank's memory estimate depends on beside the plan."""

    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = memory.VLLM_GPU_MEMORY_UTILIZATION


def layout_plans(options: PlanOptions, cluster: Cluster, recipes: tuple[str, ...],
                 mem: MemorySettings = MemorySettings()) -> list[LayoutPlan]:
    """Every candidate layout on `cluster`, planned or refused. Whether the model is MoE is the
    planner's answer for the widest TP it plans without expert parallelism."""
    plans: dict[tuple[int, int], Plan | UsageError] = {}

    def plan_or_refusal(layout: Layout) -> Plan | UsageError:
        key = (layout.tp, layout.ep)
        if key not in plans:
            try:
                plans[key] = plan_layout(options, layout)
            except UsageError as e:
                plans[key] = e
        return plans[key]

    widest_first = sorted(candidate_layouts(cluster.count, moe=False), key=lambda lay: -lay.tp)
    probe = next((p for p in (plan_or_refusal(Layout(tp=lay.tp)) for lay in widest_first)
                  if isinstance(p, Plan)), None)
    moe = probe is not None and bool(probe.moe)
    out = []
    for layout in candidate_layouts(cluster.count, moe):
        if moe and layout.dp > 1 and not layout.use_ep:
            out.append(LayoutPlan(layout, None, NOT_PLANNED_MOE_TP, "not planned"))
            continue
        # A dense layout's rank is the TP plan whatever DP is: each replica is a TP group.
        found = plan_or_refusal(layout if moe else Layout(tp=layout.tp))
        if isinstance(found, UsageError):
            out.append(LayoutPlan(layout, None, f"the planner refuses it: {found}", "planner"))
            continue
        experts = _expert_refusal(found, layout)
        if experts:
            out.append(LayoutPlan(layout, found, experts, "experts"))
            continue
        estimates = {r: memory.estimate(found, r, mem.kv_dtype, cluster.kind.memory_bytes,
                                        gpu_memory_utilization=mem.gpu_memory_utilization) for r in recipes}
        why = _memory_refusal(estimates)
        out.append(LayoutPlan(layout, found, why, "memory" if why else "", estimates))
    return out


def fit(layout: LayoutPlan, recipe: str, batch: int, context: int) -> tuple[bool, str]:
    """Whether one rank holds `recipe`'s weights beside its M = ceil(B/DP) sequences of `context`
    tokens of K/V (`plan/memory.py` fits), and if not, why."""
    est = layout.estimates.get(recipe)
    if est is None or layout.plan is None:
        return False, layout.refusal or "no memory estimate"
    if not est.kv_fits_any:
        return False, (f"weights {memory.gib(est.weight_bytes)} GiB + reserve {memory.gib(est.reserve_bytes)} GiB "
                       f"exceed the {memory.gib(est.usable_bytes)} GiB vLLM uses of one GPU")
    m = layout.m(batch)
    if memory.fits(est, layout.plan, m, context):
        return True, ""
    need = memory.kv_bytes(layout.plan, est.kv_dtype, m, context)
    return False, (f"K/V of {m} sequences x {context} tokens needs {memory.gib(need)} GiB, "
                   f"{memory.gib(est.kv_budget_bytes)} GiB left beside the weights")


__all__ = ["MAX_GPUS", "GpuKind", "GPU_KINDS", "Cluster", "parse_gpus", "PlanOptions", "LayoutPlan",
           "MemorySettings", "candidate_layouts", "plan_layout", "NOT_PLANNED_MOE_TP", "layout_plans", "fit"]
