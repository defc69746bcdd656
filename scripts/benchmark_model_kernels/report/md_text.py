"""Markdown text pieces every report section uses: numbers, speed-ups (a tie where the p10-p90
ranges overlap) and tables."""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def fmt_us(us: float | None) -> str:
    """Microseconds with about 3 significant digits ("19.6", "2.41", "1234")."""
    if us is None:
        return "-"
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


#: A speed-up whose two totals' p10-p90 ranges overlap: by the report's rule no gain (and no loss).
TIE_TEXT = "tie (p10-p90 overlap)"
#: Marks a speed-up over a reference total that one rank of the GPU cannot hold.
NO_FIT_MARK = "‡"


def with_speedup(total: str, ratio: float, tie: bool, ref_no_fit: bool = False) -> str:
    """"20,068 (1.85x)"; "33,647, tie (p10-p90 overlap)" where the ranges overlap (never a gain);
    NO_FIT_MARK after either when the reference does not fit one rank."""
    mark = NO_FIT_MARK if ref_no_fit else ""
    return f"{total}, {TIE_TEXT}{mark}" if tie else f"{total} ({fmt_x(ratio)}{mark})"


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return lines


__all__ = ["NO_FIT_MARK", "TIE_TEXT", "fmt_us", "fmt_x", "md_cell", "table", "with_speedup"]
