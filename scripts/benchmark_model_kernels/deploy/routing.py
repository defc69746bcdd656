"""Expert load under routing, and the most loaded EP rank a step waits for.

`expert_loads` gives the expected token-expert pairs per expert for `tokens` tokens routed to
`top_k` distinct experts each: uniform, Zipf (expert i draws in proportion to 1/(i+1)^s) or a
file of per-expert loads (scaled to the step's pairs). No expert receives more pairs than there
are tokens (top-k picks distinct experts); what a skew would put above that goes to the other
experts in proportion to their share. Deterministic: no random draw.

Under expert parallelism each EP rank holds a contiguous block of experts (vLLM's default
"linear" placement, vllm_rules.layout.Layout.first_local_expert), so a Zipf skew, whose hottest
experts are the lowest indices, puts them on the first ranks together: the most imbalanced
placement of that distribution. The MoE layer of a step ends when its most loaded rank does
(`busiest_rank`); the imbalance is that rank's pairs over the mean rank's.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import UsageError
from ..vllm_rules.layout import Layout

FLAG = "--routing"
KINDS = ("uniform", "zipf", "file")


@dataclass(frozen=True)
class Routing:
    """How tokens spread over the experts."""

    kind: str = "uniform"
    """"uniform", "zipf" or "file"."""
    exponent: float = 0.0
    """Zipf's s (>= 0; 0 is uniform)."""
    path: str = ""
    """The file the loads came from (kind "file")."""
    loads: tuple[float, ...] = ()
    """Relative load of each expert (kind "file"), in expert order."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(FLAG, self.kind, "must be uniform, zipf:S (e.g. zipf:1.2) or file:PATH")
        if self.kind == "zipf" and not (math.isfinite(self.exponent) and self.exponent >= 0):
            raise UsageError(FLAG, f"zipf:{self.exponent}", "the Zipf exponent must be a number >= 0 "
                             "(0 is uniform; 1 to 1.5 is a strong skew)")
        if self.kind == "file":
            if not self.loads:
                raise UsageError(FLAG, f"file:{self.path}", "holds no per-expert loads")
            if any(not math.isfinite(x) or x < 0 for x in self.loads):
                raise UsageError(FLAG, f"file:{self.path}", "every per-expert load must be a number >= 0")
            if sum(self.loads) <= 0:
                raise UsageError(FLAG, f"file:{self.path}", "the per-expert loads sum to 0")

    @property
    def label(self) -> str:
        """"uniform", "zipf s=1.2", "file loads.json"."""
        if self.kind == "zipf":
            return f"zipf s={self.exponent:g}"
        return f"file {self.path}" if self.kind == "file" else "uniform"

    @classmethod
    def from_flag(cls, text: str) -> Routing:
        """`--routing` as given: "uniform", "zipf:S", or "file:PATH" (the file is read here)."""
        kind, _, arg = text.partition(":")
        if kind == "uniform" and not arg:
            return cls()
        if kind == "zipf":
            try:
                return cls("zipf", float(arg))
            except ValueError:
                raise UsageError(FLAG, text, "the Zipf exponent must be a number >= 0, e.g. zipf:1.2") from None
        if kind == "file" and arg:
            return cls("file", path=arg, loads=read_loads(arg))
        raise UsageError(FLAG, text, "must be uniform, zipf:S (e.g. zipf:1.2) or file:PATH (per-expert loads, "
                         "JSON or CSV)")


def read_loads(path: str) -> tuple[float, ...]:
    """Per-expert loads from a JSON file (a list of numbers, or {"loads": [...]}) or a CSV file (one
    number per line, or rows of expert,load with the experts 0..E-1 in any order; a header is skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(FLAG, f"file:{path}", f"cannot be read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise UsageError(FLAG, f"file:{path}", "is not UTF-8 text (JSON or CSV of per-expert loads)") from None
    if path.lower().endswith(".json") or text.lstrip().startswith(("[", "{")):
        return _json_loads(text, path)
    return _csv_loads(text, path)


def _json_loads(text: str, path: str) -> tuple[float, ...]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(FLAG, f"file:{path}", f"is not valid JSON (line {e.lineno}: {e.msg})") from None
    if isinstance(raw, dict):
        raw = raw.get("loads")
    if not isinstance(raw, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw):
        raise UsageError(FLAG, f"file:{path}", 'must hold a list of numbers, one per expert, or {"loads": [...]}')
    return tuple(float(x) for x in raw)


def _csv_loads(text: str, path: str) -> tuple[float, ...]:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    numbers: list[list[float]] = []
    for i, row in enumerate(rows):
        try:
            numbers.append([float(c) for c in row])
        except ValueError:
            if i == 0:
                continue  # a header line
            raise UsageError(FLAG, f"file:{path}", f"line {i + 1} ({','.join(row)}) is not numbers") from None
    if all(len(r) == 1 for r in numbers):
        return tuple(r[0] for r in numbers)
    if all(len(r) == 2 for r in numbers):
        by_expert = {int(e): load for e, load in numbers}
        if sorted(by_expert) != list(range(len(numbers))):
            raise UsageError(FLAG, f"file:{path}", "the expert column must list each expert 0..E-1 once")
        return tuple(by_expert[e] for e in range(len(numbers)))
    raise UsageError(FLAG, f"file:{path}", "must have one column (load) or two (expert,load) on every line")


def expert_loads(num_experts: int, top_k: int, tokens: int, skew: Routing) -> list[float]:
    """Expected token-expert pairs per expert: they sum to tokens x top_k, none above `tokens`."""
    if num_experts < 1 or not 1 <= top_k <= num_experts:
        raise UsageError("top_k", top_k, f"must be between 1 and the {num_experts} experts")
    if tokens < 0:
        raise UsageError("tokens", tokens, "must be >= 0")
    if skew.kind == "uniform" or (skew.kind == "zipf" and skew.exponent == 0):
        weights = [1.0] * num_experts
    elif skew.kind == "zipf":
        weights = [1.0 / (i + 1) ** skew.exponent for i in range(num_experts)]
    else:
        if len(skew.loads) != num_experts:
            raise UsageError(FLAG, f"file:{skew.path}", f"holds {len(skew.loads)} per-expert loads; the model "
                             f"routes over {num_experts} experts: give one load per expert")
        weights = list(skew.loads)
    return _capped(weights, float(tokens * top_k), float(tokens))


def _capped(weights: Sequence[float], total: float, cap: float) -> list[float]:
    """`total` split in proportion to `weights`, none above `cap`: the excess of a capped expert goes
    to the others in proportion (water-filling; the caps can hold the total since top_k <= E)."""
    loads = [0.0] * len(weights)
    free = [i for i, w in enumerate(weights) if w > 0]
    left = total
    while free and left > 1e-12 * max(total, 1.0):
        share = sum(weights[i] for i in free)
        over = [i for i in free if left * weights[i] / share > cap - loads[i]]
        if not over:
            for i in free:
                loads[i] += left * weights[i] / share
            break
        for i in over:
            left -= cap - loads[i]
            loads[i] = cap
        free = [i for i in free if i not in over]
    return loads


def rank_loads(loads: Sequence[float], layout: Layout) -> list[float]:
    """Token-expert pairs on each EP rank under vLLM's linear placement (all on one rank without EP)."""
    if not layout.use_ep:
        return [float(sum(loads))]
    e = len(loads)
    if e < layout.ep:
        raise UsageError("--ep", layout.ep, f"exceeds the {e} experts: some EP ranks would hold none")
    out = []
    for r in range(layout.ep):
        first = layout.first_local_expert(e, r)
        out.append(float(sum(loads[first:first + layout.local_experts(e, r)])))
    return out


def busiest_rank(loads: Sequence[float], layout: Layout) -> tuple[float, float]:
    """(pairs on the most loaded EP rank, imbalance = its pairs / the mean rank's, >= 1)."""
    per_rank = rank_loads(loads, layout)
    top = max(per_rank)
    mean = sum(per_rank) / len(per_rank)
    return top, (top / mean if mean > 0 else 1.0)


__all__ = ["KINDS", "Routing", "busiest_rank", "expert_loads", "rank_loads", "read_loads"]
