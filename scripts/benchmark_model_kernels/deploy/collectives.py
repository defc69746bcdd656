"""The collectives vLLM 0.33 issues in one decode step of a layout, each with its message size.

One `Collective` per kind of collective in the step: its op, the ranks of its group, its message
size as nccl-tests counts it for that op, how many run per step, and the vLLM function issuing it.
`collectives(plan, layout, tokens)` lists them for `tokens` attention tokens (M) per rank.

What vLLM 0.33 issues (files under vllm/):
  * TP > 1: an all-reduce after every row-parallel linear (attention `o_proj`, the dense MLP's
    `down_proj`, a mixer's `out_proj`: model_executor/layers/linear.py: RowParallelLinear.forward,
    `reduce_results and tp_size > 1`), one after every MoE layer (fused_moe/runner/moe_runner.py:
    `_maybe_reduce_final_output`; the shared experts' `down_proj` is built with
    `reduce_results=False` and summed into it), one after the input embedding
    (layers/vocab_parallel_embedding.py: VocabParallelEmbedding.forward) and an all-gather of the
    logits (layers/logits_processor.py: LogitsProcessor._gather_logits; `use_all_gather()` is True
    on CUDA, platforms/interface.py).
  * DP > 1 (MoE layers): the tokens of all DP ranks meet in every MoE layer. The default all2all
    backend is "allgather_reducescatter" (config/parallel.py: ParallelConfig.all2all_backend,
    `--all2all-backend`): dispatch is an all-gather of each rank's hidden states with its top-k ids
    and weights (fused_moe/prepare_finalize/naive_dp_ep.py: MoEPrepareAndFinalizeNaiveDPEPModular
    .prepare -> distributed/device_communicators/all2all.py: AgRsAll2AllManager.dispatch, one NCCL
    group of all_gatherv); a monolithic kernel (router fused in it) gathers the router logits
    instead (MoEPrepareAndFinalizeNaiveDPEPMonolithic, AgRsAll2AllManager.dispatch_router_logits);
    combine is a reduce-scatter (AgRsAll2AllManager.combine / combine_into_output). Without expert
    parallelism DP > 1 takes the same path (fused_moe/all2all_utils.py: maybe_make_prepare_finalize,
    "Falling back to AllGather+ReduceScatter"). Each step also all-reduces the DP ranks' token counts
    (v1/worker/dp_utils.py: _run_ar, a 4 x DP int32 tensor).
  * Sequence-parallel MoE (Layout.sequence_parallel_moe: EP, TP > 1 and DP > 1;
    config/parallel.py: use_sequence_parallel_moe): each TP rank sends ceil(M/TP) of its tokens
    through the MoE over the whole EP group (AgRsAll2AllManager._get_comm_group ->
    get_ep_group()), and a TP all-gather brings the outputs back (models/qwen3_moe.py:
    Qwen3MoeSparseMoeBlock.forward, tensor_model_parallel_all_gather). DeepSeek's decoder layer
    instead reduce-scatters the attention output over TP in place of the `o_proj` all-reduce and
    all-gathers before the next attention (models/deepseek_v2.py: DeepseekV2DecoderLayer.forward,
    DeepseekV2Model.forward).
  * Other backends (`--all2all-backend`): "deepep_high_throughput" sends each token once to every
    EP rank holding one of its experts, "deepep_low_latency" once per token-expert pair
    (fused_moe/prepare_finalize/deepep_ht.py, deepep_ll.py); both modelled here by those bytes as
    an all-to-all. "pplx" and "naive" were removed: vLLM 0.33 falls back to
    "allgather_reducescatter" (config/parallel.py: ParallelConfig.__post_init__).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.plan_schema import GemmEntry, MoeEntry, Plan
from ..vllm_rules.layout import Layout

#: nccl-tests' name of each op this module issues.
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")

#: The all2all backends modelled; the first is vLLM 0.33's default (config/parallel.py).
ALL2ALL_BACKENDS = ("allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency")
#: Backends vLLM 0.33 no longer has: it falls back to "allgather_reducescatter" with a warning.
REMOVED_BACKENDS = ("pplx", "naive")
#: Backends vLLM offers that this module does not model (their kernels move other byte counts).
UNMODELLED_BACKENDS = ("deepep_v2", "mori_high_throughput", "mori_low_latency", "moonep", "nixl_ep",
                       "flashinfer_nvlink_one_sided", "flashinfer_nvlink_two_sided", "flashinfer_all2allv")

#: Transformers classes vLLM runs with models/deepseek_v2.py's decoder layer (registry.py), whose
#: sequence-parallel MoE reduce-scatters the attention output instead of all-reducing it.
DEEPSEEK_DECODER_ARCHITECTURES = ("DeepseekForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
                                  "DeepseekV32ForCausalLM", "MistralLarge3ForCausalLM")

_ROUTING_ID_AND_WEIGHT_BYTES = 4 + 4
"""Per top-k slot of a token: its expert id (int32, router/fused_topk_router.py) and weight (fp32)."""
_DP_SYNC_INTS = 4
"""Rows of the DP token-count tensor (v1/worker/dp_utils.py: _run_ar: 4 x dp_size int32)."""


@dataclass(frozen=True)
class Collective:
    """One kind of collective in a decode step, as one rank sees it."""

    name: str
    """What it is, e.g. "attention all-reduce (o_proj)", "MoE dispatch (all-gather)"."""
    op: str
    """nccl-tests' op: "all_reduce", "all_gather", "reduce_scatter" or "all_to_all"."""
    group: int
    """Ranks in the group (its size): TP, DP or EP."""
    bytes_per_rank: int
    """Message size as nccl-tests' "size" column counts it for `op`: all_reduce the buffer,
    all_gather the gathered output, reduce_scatter the input, all_to_all one rank's send buffer."""
    per_step: int
    """How many run per decode step (layers x occurrences)."""
    source: str
    """The vLLM file and function issuing it."""
    group_kind: str = ""
    """"TP", "DP" or "EP": which process group."""
    note: str = ""
    """What the bytes are made of, when more than one tensor."""


@dataclass(frozen=True)
class MoeDispatch:
    """What one token carries in the MoE dispatch: its hidden state and routing.

    vLLM quantizes the activations before the dispatch when the expert kernel takes quantized
    input (`FusedMoEExperts.expects_unquantized_inputs` False: Triton, and FlashInfer CUTLASS at
    per-tensor FP8), after it otherwise (FlashInfer CUTLASS at block FP8, CUTLASS, TRT-LLM BF16)."""

    act_bytes: float
    """Bytes per hidden element dispatched: 2 (BF16), 1 (FP8), 0.5 (NVFP4)."""
    scale_bytes: int = 0
    """Bytes of activation scales per token gathered with it (a static per-tensor scale: 0)."""
    router_logits: bool = False
    """A monolithic MoE kernel routes on the receiving rank: the router logits travel instead of the
    top-k ids and weights (naive_dp_ep.py: MoEPrepareAndFinalizeNaiveDPEPMonolithic)."""

    @classmethod
    def unquantized(cls, dtype_bytes: int = 2) -> MoeDispatch:
        return cls(act_bytes=float(dtype_bytes))

    @classmethod
    def fp8(cls, hidden: int, scheme: str) -> MoeDispatch:
        """FP8 activations with the scales of `scheme` ("per_tensor", "per_token", "block128")."""
        scales = {"per_tensor": 0, "per_token": 4, "block128": 4 * math.ceil(hidden / 128)}
        if scheme not in scales:
            raise UsageError("fp8 scheme", scheme, f"must be one of {', '.join(scales)}")
        return cls(act_bytes=1.0, scale_bytes=scales[scheme])


def collectives(plan: Plan, layout: Layout, tokens: int, dtype_bytes: int = 2, *,
                all2all_backend: str = "allgather_reducescatter",
                dispatch: MoeDispatch | None = None) -> list[Collective]:
    """The collectives of one decode step on one rank of `layout`, `tokens` attention tokens (M)
    per rank, activations of `dtype_bytes`; `plan` is the per-rank plan at that layout."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise UsageError("tokens", tokens, "must be a positive integer (attention tokens M per rank)")
    backend = _backend(all2all_backend)
    step = _Step(plan, layout, tokens, dtype_bytes, backend, dispatch or MoeDispatch.unquantized(dtype_bytes))
    return [c for c in step.embedding() + step.row_linears() + step.moe_layers() + step.logits() if c.per_step > 0]


def _backend(name: str) -> str:
    if name in REMOVED_BACKENDS:
        return "allgather_reducescatter"
    if name in ALL2ALL_BACKENDS:
        return name
    if name in UNMODELLED_BACKENDS:
        raise UsageError("--all2all_backend", name, f"is a vLLM backend this tool does not model; use one of "
                         f"{', '.join(ALL2ALL_BACKENDS)}")
    raise UsageError("--all2all_backend", name, f"is not a vLLM 0.33 all2all backend; use one of "
                     f"{', '.join(ALL2ALL_BACKENDS)}")


def hidden_size(plan: Plan) -> int:
    """H: the config's hidden size, else the MoE layer's or the row-parallel output width."""
    if plan.model.hidden_size:
        return plan.model.hidden_size
    widths = [m.hidden for m in plan.moe] + [g.n for g in plan.gemms if g.parallel == "row"]
    if not widths:
        raise UsageError("plan", plan.model.name, "has no hidden size (model.hidden_size is 0 and no "
                         "row-parallel GEMM or MoE layer gives it); write the plan again")
    return widths[0]


class _Step:
    """One decode step's collectives, group by group."""

    def __init__(self, plan: Plan, layout: Layout, tokens: int, dtype_bytes: int, backend: str,
                 dispatch: MoeDispatch):
        self.plan, self.layout, self.m, self.b = plan, layout, tokens, dtype_bytes
        self.backend, self.dispatch = backend, dispatch
        self.h = hidden_size(plan)
        self.moe_layer_count = sum(m.layers for m in plan.moe)
        self.sp = layout.sequence_parallel_moe and self.moe_layer_count > 0
        self.deepseek_sp = self.sp and plan.model.architecture in DEEPSEEK_DECODER_ARCHITECTURES
        self.sp_tokens = math.ceil(tokens / layout.tp)  # models/utils.py: sequence_parallel_chunk_impl

    def _tp(self, name: str, op: str, nbytes: int, per_step: int, source: str, note: str = "") -> Collective:
        return Collective(name, op, self.layout.tp, nbytes, per_step, source, "TP", note)

    def embedding(self) -> list[Collective]:
        if self.layout.tp == 1:
            return []
        return [self._tp("embedding all-reduce", "all_reduce", self.m * self.h * self.b, 1,
                         "vllm/model_executor/layers/vocab_parallel_embedding.py: VocabParallelEmbedding.forward")]

    def row_linears(self) -> list[Collective]:
        if self.layout.tp == 1:
            return []
        out = []
        for g in self.plan.gemms:
            if g.parallel != "row" or g.name.startswith("shared_expert."):
                continue  # shared experts: reduce_results=False, summed into the MoE all-reduce
            count = g.layers
            if self.deepseek_sp and _is_attention_out(g):
                count -= self.moe_layer_count  # those layers reduce-scatter instead (below)
            out.append(self._tp(_row_name(g), "all_reduce", self.m * g.n * self.b, count,
                                "vllm/model_executor/layers/linear.py: RowParallelLinear.forward"))
        return out

    def moe_layers(self) -> list[Collective]:
        out: list[Collective] = []
        for moe in self.plan.moe:
            if self.layout.dp > 1:
                out += self._dispatch_combine(moe)
            if not self.sp and self.layout.tp > 1:
                out.append(self._tp("MoE all-reduce", "all_reduce", self.m * self.h * self.b, moe.layers,
                                    "vllm/model_executor/layers/fused_moe/runner/moe_runner.py: "
                                    "_maybe_reduce_final_output (tensor_model_parallel_all_reduce)",
                                    "routed and shared experts' outputs summed over the TP group"))
        if self.sp:
            out += self._sequence_parallel()
        # Only an MoE model's DP ranks step together; a dense model's DP ranks are independent
        # engines (vllm/v1/engine/core.py: "Non-MoE DP ranks are completely independent").
        if self.layout.dp > 1 and self.plan.moe:
            dp = self.layout.dp
            out.append(Collective("DP token-count sync", "all_reduce", dp, _DP_SYNC_INTS * 4 * dp, 1,
                                  "vllm/v1/worker/dp_utils.py: _run_ar", "DP",
                                  "4 x DP int32: each DP rank's token counts, once per step"))
        return out

    def _dispatch_combine(self, moe: MoeEntry) -> list[Collective]:
        """The dispatch and combine of one MoE layer over the DP group (EP group under SP)."""
        group = self.layout.world_size if self.sp else self.layout.dp
        kind = "EP" if self.sp else "DP"
        local = self.sp_tokens if self.sp else self.m
        d = self.dispatch
        hidden_bytes = math.ceil(self.h * d.act_bytes) + d.scale_bytes
        if self.backend == "allgather_reducescatter" or not self.layout.use_ep:
            # without expert parallelism every backend falls back to AllGather+ReduceScatter
            # (fused_moe/all2all_utils.py: maybe_make_prepare_finalize, use_all2all_kernels False)
            routing = moe.global_experts * self.b if d.router_logits else moe.top_k * _ROUTING_ID_AND_WEIGHT_BYTES
            what = "router logits" if d.router_logits else "top-k ids (int32) and weights (fp32)"
            prepare = "Monolithic" if d.router_logits else "Modular"
            src = ("vllm/model_executor/layers/fused_moe/prepare_finalize/naive_dp_ep.py: "
                   f"MoEPrepareAndFinalizeNaiveDPEP{prepare} -> "
                   "vllm/distributed/device_communicators/all2all.py: AgRsAll2AllManager")
            return [
                Collective("MoE dispatch (all-gather)", "all_gather", group, group * local * (hidden_bytes + routing),
                           moe.layers, src + ".dispatch", kind,
                           f"{group} x {local} tokens: hidden states ({hidden_bytes} B/token) + {what} "
                           f"({routing} B/token), one NCCL group of all_gatherv"),
                Collective("MoE combine (reduce-scatter)", "reduce_scatter", group, group * local * self.h * self.b,
                           moe.layers, src + ".combine", kind,
                           f"{group} x {local} tokens x H={self.h} at the activation dtype"),
            ]
        ep = self.layout.world_size
        if self.backend == "deepep_high_throughput":
            copies = expected_ranks_reached(moe, ep)
            src = "vllm/model_executor/layers/fused_moe/prepare_finalize/deepep_ht.py: DeepEPHTPrepareAndFinalize"
            how = (f"each token once to each EP rank holding one of its experts (expected {copies:.2f} ranks, "
                   "uniform routing)")
        else:
            copies = float(moe.top_k)
            src = "vllm/model_executor/layers/fused_moe/prepare_finalize/deepep_ll.py: DeepEPLLPrepareAndFinalize"
            how = f"each token once per token-expert pair (top-k={moe.top_k})"
        return [
            Collective(f"MoE dispatch ({self.backend})", "all_to_all", ep, math.ceil(local * copies * hidden_bytes),
                       moe.layers, src + ".prepare", "EP",
                       f"{local} tokens: {how}; modelled as an all-to-all of these bytes"),
            Collective(f"MoE combine ({self.backend})", "all_to_all", ep, math.ceil(local * copies * self.h * self.b),
                       moe.layers, src + ".finalize", "EP", "the same pairs back at the activation dtype"),
        ]

    def _sequence_parallel(self) -> list[Collective]:
        tp, layers = self.layout.tp, self.moe_layer_count
        chunked = tp * self.sp_tokens  # the padded token count every TP rank's chunk makes up
        if not self.deepseek_sp:
            return [self._tp("sequence-parallel MoE all-gather", "all_gather", chunked * self.h * self.b, layers,
                             "vllm/model_executor/models/qwen3_moe.py: Qwen3MoeSparseMoeBlock.forward "
                             "(tensor_model_parallel_all_gather)", f"ceil(M/TP)={self.sp_tokens} tokens per rank")]
        src = "vllm/model_executor/models/deepseek_v2.py: DeepseekV2DecoderLayer.forward"
        return [
            self._tp("sequence-parallel attention reduce-scatter", "reduce_scatter", chunked * self.h * self.b, layers,
                     src + " (tensor_model_parallel_reduce_scatter)", "in place of the o_proj all-reduce"),
            self._tp("sequence-parallel all-gather", "all_gather", chunked * self.h * self.b, layers - 1,
                     src + " (tensor_model_parallel_all_gather before attention)", "hidden states"),
            self._tp("sequence-parallel final all-gather", "all_gather", chunked * 2 * self.h * self.b, 1,
                     "vllm/model_executor/models/deepseek_v2.py: DeepseekV2Model.forward",
                     "hidden states and residual"),
        ]

    def logits(self) -> list[Collective]:
        if self.layout.tp == 1:
            return []
        heads = [g for g in self.plan.gemms if g.parallel == "vocab"]
        return [self._tp("lm_head logits all-gather", "all_gather", self.layout.tp * self.m * g.n * self.b, 1,
                         "vllm/model_executor/layers/logits_processor.py: LogitsProcessor._gather_logits",
                         f"{self.m} tokens x {g.n} vocabulary entries per rank") for g in heads]


def _is_attention_out(g: GemmEntry) -> bool:
    return g.name in ("o_proj", "mla.o_proj", "attn.o_proj")


def _row_name(g: GemmEntry) -> str:
    if _is_attention_out(g):
        return f"attention all-reduce ({g.name})"
    if g.name in ("down_proj", "mlp.down_proj"):
        return f"MLP all-reduce ({g.name})"
    return f"{g.name} all-reduce"


def expected_ranks_reached(moe: MoeEntry, ep: int) -> float:
    """EP ranks one token reaches when its top-k experts are drawn uniformly without replacement,
    under vLLM's linear placement (vllm_rules.layout.Layout.first_local_expert). Grouped routing
    (n_group / topk_group) caps it at the ranks the chosen groups span."""
    e, k = moe.global_experts, moe.top_k
    base, extra = divmod(e, ep)
    sizes = [base + (1 if r < extra else 0) for r in range(ep)]
    total = math.comb(e, k)
    reached = sum(1 - math.comb(e - s, k) / total for s in sizes if s)
    n_group, topk_group = moe.routing.n_group, moe.routing.topk_group
    if n_group and topk_group and n_group > 1:
        reached = min(reached, topk_group * max(1.0, ep / n_group), float(ep))
    return reached


__all__ = ["ALL2ALL_BACKENDS", "Collective", "MoeDispatch", "OPS", "collectives", "expected_ranks_reached",
           "hidden_size"]
