"""The attention rows of one workdir: per layer type the best FlashInfer backend per (phase, M, KV
length, KV dtype), and the attention time of one decode step that the roll-up adds to GEMM + MoE.

In: the attention Rows of one timing mode (kind "attention", `run/outcome.py` row_from_case), the
plan (its attention entries and the mixers no row times) and the GPU family. Out: `AttentionCell`s
and `AttentionTotal`s; `markdown.py` renders them. Nothing here measures.

A decode step at M: every attention layer type of the plan reads its KV cache for M sequences of
one new token each; its time per step is the cell's median x the type's layers per step. On the
vLLM-default basis only a row that times the kernel vLLM's default attention backend runs
(`vllm_default` "same") counts; where none does (Hopper: vLLM defaults to FLASH_ATTN, which no row
times) the type is counted at the fastest FlashInfer backend and `stand_ins` says so, so that
total is never read as vLLM's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core.plan_schema import Plan
from ..core.results_schema import Row
from ..vllm_rules.dispatch import vllm_attention_default
from .cells import Cell, best_cell

#: The roll-up's KV dtype of every recipe: vLLM's default kv_cache_dtype "auto" keeps the cache in
#: the model's BF16 whatever the weights' recipe; FP8 KV is its own variant.
ROLLUP_KV_DTYPES = ("bf16", "fp8")


@dataclass(frozen=True)
class AttentionType:
    """One attention layer type as the report shows it."""

    name: str
    kind: str
    """"mha" or "mla"."""
    layers: int
    shape: str
    """e.g. "32 q / 8 KV heads, head dim 128/128" or "MLA 16 heads, latent 512 + RoPE 64"."""
    sliding_window: int = 0


@dataclass(frozen=True)
class AttentionTotal:
    """Attention time of one decode step at M over every layer type, for one KV length and dtype."""

    m: int
    kv_len: int
    kv_dtype: str
    total_us: float
    missing: tuple[str, ...]
    """Layer types without a number (the total is then partial)."""
    why_missing: tuple[str, ...]
    stand_ins: tuple[str, ...] = ()
    """vLLM-default basis: types counted at the fastest FlashInfer row because no row times
    vLLM's default attention kernel, each with what vLLM runs there."""

    @property
    def complete(self) -> bool:
        return not self.missing


def _shape_text(kind: str, q: int, kv: int, dqk: int, dvo: int, latent: int, rope: int, window: int,
                chunk: int = 0) -> str:
    text = (f"MLA {q} heads, latent {latent} + RoPE {rope}" if kind == "mla"
            else f"{q} q / {kv} KV heads, head dim {dqk}/{dvo}")
    return text + (f", sliding window {window}" if window else "") + (f", chunks of {chunk}" if chunk else "")


def attention_types(plan: Plan | None, rows: Sequence[Row]) -> list[AttentionType]:
    """The plan's attention entries (so a type without rows still counts as missing), then any
    type only the rows name."""
    out: list[AttentionType] = []
    for a in plan.attention if plan is not None else ():
        out.append(AttentionType(a.name, a.kind, a.layers,
                                 _shape_text(a.kind, a.num_q_heads, a.num_kv_heads, a.head_dim_qk,
                                             a.head_dim_vo, a.kv_lora_rank, a.qk_rope_head_dim,
                                             a.sliding_window, a.attention_chunk_size), a.sliding_window))
    seen = {t.name for t in out}
    for r in rows:
        if r.name in seen:
            continue
        seen.add(r.name)
        kind = "mla" if r.kv_lora_rank else "mha"
        out.append(AttentionType(r.name, kind, r.layers,
                                 _shape_text(kind, r.num_q_heads or 0, r.num_kv_heads or 0, r.head_dim_qk or 0,
                                             r.head_dim_vo or 0, r.kv_lora_rank or 0,
                                             r.qk_rope_head_dim or 0, r.sliding_window or 0,
                                             r.attention_chunk_size or 0),
                                 r.sliding_window or 0))
    return out


class AttentionView:
    """The attention rows of one Analysis, grouped for the tables and the roll-up."""

    def __init__(self, rows: Sequence[Row], plan: Plan | None, family: str):
        self.rows = [r for r in rows if r.kind == "attention"]
        self.plan = plan
        self.family = family
        self.types = attention_types(plan, self.rows)
        self._groups: dict[tuple[str, str, int, int, str], list[Row]] = {}
        for r in self.rows:
            key = (r.name, r.phase, r.m, r.context_len or 0, r.dtype)
            self._groups.setdefault(key, []).append(r)

    def keys(self, name: str, phase: str) -> list[tuple[int, int, str]]:
        """(M, context length, KV dtype) this type has rows for in `phase`, in sweep order."""
        found = {(m, ctx, d) for (n, p, m, ctx, d) in self._groups if (n, p) == (name, phase)}
        return sorted(found, key=lambda k: (k[0], k[1], ROLLUP_KV_DTYPES.index(k[2])
                                            if k[2] in ROLLUP_KV_DTYPES else 9))

    def backends(self, name: str, phase: str) -> list[str]:
        """Backends of this type's rows in `phase`, in the order the run planned them."""
        return list(dict.fromkeys(r.backend for r in self.rows if (r.name, r.phase) == (name, phase)))

    def rows_for(self, name: str, phase: str, m: int, context_len: int, kv_dtype: str) -> list[Row]:
        return self._groups.get((name, phase, m, context_len, kv_dtype), [])

    def cell(self, name: str, phase: str, m: int, context_len: int, kv_dtype: str) -> Cell:
        """The fastest row of one (type, phase, M, KV length, KV dtype), or why none has a number."""
        return best_cell(self.rows_for(name, phase, m, context_len, kv_dtype))

    @property
    def kv_lens(self) -> list[int]:
        """Decode KV lengths the rows cover."""
        return sorted({r.context_len or 0 for r in self.rows if r.phase == "decode"})

    @property
    def kv_dtypes(self) -> list[str]:
        return [d for d in ROLLUP_KV_DTYPES if any(r.dtype == d for r in self.rows)]

    def total(self, m: int, kv_len: int, kv_dtype: str, vllm_basis: bool = False) -> AttentionTotal:
        """Attention time of one decode step at M (module docstring)."""
        total = 0.0
        missing: list[str] = []
        why: list[str] = []
        stand_ins: list[str] = []
        for t in self.types:
            rows = self.rows_for(t.name, "decode", m, kv_len, kv_dtype)
            cell = best_cell(rows)
            if vllm_basis:
                default = best_cell([r for r in rows if r.vllm_default == "same"])
                if default.us is not None:
                    cell = default
                elif cell.us is not None:
                    rule = vllm_attention_default(self.family, t.kind, "decode", kv_dtype)
                    runs = f"vLLM runs {rule.kernel}: {rule.missing}" if rule and rule.missing else \
                        "no vLLM attention rule for this GPU in this tool"
                    stand_ins.append(f"{t.name}: counted at its fastest FlashInfer row ({runs})")
            if cell.us is None:
                missing.append(t.name)
                why.append(cell.reason or cell.status)
                continue
            total += cell.us * t.layers
        return AttentionTotal(m, kv_len, kv_dtype, total, tuple(missing), tuple(why), tuple(stand_ins))

    def mixers_not_timed(self) -> list[str]:
        """The plan's token mixers no row times, each with its layers and reason."""
        if self.plan is None:
            return []
        return [f"{x.name} ({x.layers} layers: {x.reason})" for x in self.plan.mixers_not_timed]


__all__ = ["ROLLUP_KV_DTYPES", "AttentionTotal", "AttentionType", "AttentionView", "attention_types"]
