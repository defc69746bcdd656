"""Markdown text pieces every report section uses: numbers and tables."""

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


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return lines


__all__ = ["fmt_us", "fmt_x", "md_cell", "table"]
