"""What one run's per-rank M means for the whole deployment: its GPUs and its global batch.

A comparison of several runs sets them side by side at equal per-rank M, and equal per-rank M is
not equal load: a rank of `--tp 1 --ep 8` is one of 8 GPUs whose 8 data-parallel attention
replicas each decode M sequences, so M there is a global batch of 8M on 8 GPUs, while `--tp 4` is M
sequences on 4 GPUs (vllm_rules/layout.py: `Layout`; TP x DP GPUs, DP = EP/TP under expert
parallelism, else 1). `RunScale` carries those two numbers beside every M the comparison shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import UsageError
from ..vllm_rules.layout import Layout
from .analysis import Analysis

#: Under the comparison's tables: why the global batch and GPU count stand beside each M.
EQUAL_M_TEXT = ("Equal per-rank M is not equal load: each run's M is M x DP sequences in one decode "
                "step on TP x DP GPUs (the `global batch / GPUs` row); `scripts/deploy.py` "
                "(references/deployment.md) compares layouts at equal global load and GPU count.")

#: The row of each run that says what its M columns mean for the deployment.
BATCH_ROW_WORDS = "global batch / GPUs"


@dataclass(frozen=True)
class RunScale:
    """The layout of one run (None where the run has no plan, or the plan's TP/EP make no layout)."""

    layout: Layout | None

    @classmethod
    def of(cls, a: Analysis) -> RunScale:
        if a.plan is None:
            return cls(None)
        try:
            return cls(Layout.from_flags(a.plan.tp, a.plan.ep))
        except UsageError:  # a results.json edited by hand: the layout is unknown, never guessed
            return cls(None)

    @property
    def gpus(self) -> int | None:
        """GPUs of the deployment (TP x DP)."""
        return self.layout.world_size if self.layout is not None else None

    def global_batch(self, m: int) -> int | None:
        """Sequences in one decode step of the deployment at per-rank M: M x DP."""
        return m * self.layout.dp if self.layout is not None else None

    @property
    def gpus_text(self) -> str:
        """E.g. "8 (TP=1 DP=8 EP)"; "unknown (no layout recorded)" for a run without a plan."""
        if self.layout is None:
            return "unknown (no layout recorded)"
        return f"{self.layout.world_size} ({self.layout.label})"

    def batch_text(self, m: int) -> str:
        """E.g. "64 seq / 8 GPUs" at M=8 under TP=1 DP=8 EP."""
        batch, gpus = self.global_batch(m), self.gpus
        if batch is None or gpus is None:
            return "unknown"
        return f"{batch} seq / {gpus} GPU{'s' if gpus != 1 else ''}"


__all__ = ["BATCH_ROW_WORDS", "EQUAL_M_TEXT", "RunScale"]
