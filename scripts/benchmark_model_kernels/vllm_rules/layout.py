"""One parallel layout of one vLLM deployment: tensor (TP), data (DP) and expert (EP) parallelism.

Shaped like vLLM's `FusedMoEParallelConfig` (vllm/model_executor/layers/fused_moe/config.py:
`FusedMoEParallelConfig.make(tp_size_, dp_size_, ...)`), validated once when it is made:

* attention and dense layers run TP-sharded inside each of the DP replicas, on that replica's own
  tokens;
* with expert parallelism (`--enable-expert-parallel`) the MoE layers use EP = DP x TP ranks, each
  holding E/EP experts at full width (`use_ep` -> `ep_size = dp_size * tp_size`, `tp_size = 1`);
* without it and with DP > 1, the MoE weights are TP-sharded over all DP x TP ranks (`make`
  flattens: `tp_size = dp_size * tp_size`);
* in both, a rank's MoE layer runs the tokens of all DP replicas: M x DP per attention token M
  (`FusedMoE.forward_impl`, `do_naive_dispatch_combine` when dp_size > 1, or the all-to-all kernels
  moving the same token-expert pairs).

The tool's flags speak vLLM's way for one rank: `--tp T --ep E` is TP=T with expert parallelism
over E = DP x T ranks (E=1: none), so DP = E/T. `Layout.from_flags` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UsageError


@dataclass(frozen=True)
class Layout:
    """TP x DP ranks, expert-parallel MoE or not."""

    tp: int = 1
    """GPUs per tensor-parallel group (`--tensor-parallel-size`)."""
    dp: int = 1
    """Data-parallel replicas (`--data-parallel-size`)."""
    enable_ep: bool = False
    """`--enable-expert-parallel`: the MoE layers' experts are split over all DP x TP ranks."""

    def __post_init__(self) -> None:
        for flag, value, what in (("--tp", self.tp, "GPUs per tensor-parallel group"),
                                  ("--dp", self.dp, "data-parallel replicas")):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(flag, value, f"must be a positive integer ({what})")

    @classmethod
    def from_flags(cls, tp: int, ep: int) -> Layout:
        """The layout of `--tp TP --ep EP` (EP = 1: no expert parallelism; else EP = DP x TP).

        >>> Layout.from_flags(2, 8)
        Layout(tp=2, dp=4, enable_ep=True)
        """
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise UsageError("--tp", tp, "must be a positive integer (GPUs per tensor-parallel group)")
        if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
            raise UsageError("--ep", ep, "must be a positive integer (1 = no expert parallelism)")
        if ep > 1 and ep % tp:
            raise UsageError("--ep", ep, f"must be 1 or a multiple of --tp={tp} (vLLM's EP size is dp*tp)")
        return cls(tp=tp, dp=ep // tp if ep > 1 else 1, enable_ep=ep > 1)

    @property
    def world_size(self) -> int:
        """GPUs the deployment uses (pipeline parallelism is not modelled)."""
        return self.tp * self.dp

    @property
    def use_ep(self) -> bool:
        """`FusedMoEParallelConfig.use_ep`: expert parallelism over more than one rank."""
        return self.enable_ep and self.world_size > 1

    @property
    def ep(self) -> int:
        """EP size: DP x TP with expert parallelism, else 1 (the `--ep` flag's value)."""
        return self.world_size if self.use_ep else 1

    @property
    def moe_tp(self) -> int:
        """Ranks one expert's weights are TP-split over: 1 under EP, DP x TP without it."""
        return 1 if self.use_ep else self.world_size

    @property
    def tokens_per_m(self) -> int:
        """Tokens a rank's MoE layer runs per token M of its attention: DP (= EP/TP under EP).

        >>> Layout.from_flags(1, 8).tokens_per_m, Layout.from_flags(4, 4).tokens_per_m, Layout(2, 4).tokens_per_m
        (8, 1, 4)
        """
        return self.dp

    @property
    def sequence_parallel_moe(self) -> bool:
        """vLLM's `ParallelConfig.use_sequence_parallel_moe` (vllm/config/parallel.py) at the default
        all2all backend "allgather_reducescatter": expert parallelism, TP > 1 and DP > 1."""
        return self.use_ep and self.tp > 1 and self.dp > 1

    def first_local_expert(self, num_experts: int, rank: int) -> int:
        """Global index of EP rank `rank`'s first expert under vLLM's default linear placement: a
        contiguous block from rank*(E//EP) + min(rank, E%EP), the remainder going to the first
        ranks (vllm/model_executor/layers/fused_moe/expert_map_manager.py: determine_expert_map).

        >>> [Layout.from_flags(1, 4).first_local_expert(10, r) for r in range(4)]
        [0, 3, 6, 8]
        """
        return rank * (num_experts // self.ep) + min(rank, num_experts % self.ep)

    def local_experts(self, num_experts: int, rank: int = 0) -> int:
        """Experts EP rank `rank` holds (all of them without EP)."""
        if not self.use_ep:
            return num_experts
        return num_experts // self.ep + (1 if rank < num_experts % self.ep else 0)

    @property
    def label(self) -> str:
        """vLLM's flags for it, e.g. "TP=2 DP=4 EP" or "TP=8"."""
        text = f"TP={self.tp}" + (f" DP={self.dp}" if self.dp > 1 else "")
        return text + (" EP" if self.use_ep else "")


__all__ = ["Layout"]
