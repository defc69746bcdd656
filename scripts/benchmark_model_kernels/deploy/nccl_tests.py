"""nccl-tests output (`all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`, `alltoall_perf`)
read into sizes and times.

The format is what nccl-tests prints (github.com/NVIDIA/nccl-tests, src/util.cu): comment lines
starting with "#" (the version, "# Collective test starting: all_reduce_perf", one
"#  Rank  0 Group  0 Pid ... device  0 [0x..] NVIDIA H200" line per rank, the column header
"size count type redop root time algbw busbw #wrong time algbw busbw #wrong" under
"out-of-place" and "in-place"), then one row per size. Older releases print no "root" column and
"error" for "#wrong"; the header says which. The size column is the larger of one rank's send and
receive buffers (src/common.cu: max(sendBytes, expectedBytes)), the unit `Collective.bytes_per_rank`
uses; the time taken is the out-of-place one, in microseconds.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..core.errors import UsageError

#: nccl-tests binary -> this tool's op name.
BINARIES = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather",
            "reduce_scatter_perf": "reduce_scatter", "alltoall_perf": "all_to_all"}
FLAG = "--nccl_tests"

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")


@dataclass(frozen=True)
class NcclTestsResult:
    """One nccl-tests run: its op, its ranks and (size, out-of-place time) per row."""

    op: str
    """"all_reduce", "all_gather", "reduce_scatter" or "all_to_all"."""
    nranks: int
    """Ranks in the run (its "#  Rank" lines)."""
    points: tuple[tuple[int, float], ...]
    """(size in bytes as nccl-tests counts it, out-of-place time in us), by size."""
    name: str
    """The file's base name, as a time's source names it."""
    devices: tuple[str, ...] = ()
    """The GPU name of each rank, e.g. "NVIDIA H200"."""
    dtype: str = ""
    """The rows' data type ("float", "bfloat16", ...)."""


def read_nccl_tests(path: str, op: str | None = None) -> NcclTestsResult:
    """The nccl-tests output at `path`; `op` when the output does not name its binary (releases
    before "# Collective test starting") and the file name does not either."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(FLAG, path, f"cannot be read ({e.strerror}); pass the saved output of an nccl-tests "
                         "binary, e.g. all_reduce_perf -b 8 -e 1G -f 2 -g 8 > all_reduce.txt") from None
    return parse_nccl_tests(text, os.path.basename(path), op)


def parse_nccl_tests(text: str, name: str, op: str | None = None) -> NcclTestsResult:
    """nccl-tests output `text` (from a file called `name`)."""
    found_op = _op_of(text, name, op)
    ranks: dict[int, str] = {}
    time_col = -1
    dtype = ""
    points: dict[int, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _RANK.match(line)
            if m:
                ranks[len(ranks)] = m.group(4).strip()  # "-g 8" repeats rank 0 per GPU: count lines
            header = line.lstrip("#").split()
            if header[:2] == ["size", "count"] and "time" in header:
                time_col = header.index("time")
            continue
        cells = line.split()
        if time_col < 0 or len(cells) <= time_col or not cells[0].isdigit():
            continue
        if dtype and cells[2] != dtype:
            continue  # a run over several data types (-d all): the first type's rows
        dtype = cells[2]
        size = int(cells[0])
        try:
            us = float(cells[time_col])
        except ValueError:
            raise UsageError(FLAG, name, f"row for size {size}: out-of-place time {cells[time_col]!r} is not a "
                             "number; pass nccl-tests' output unchanged") from None
        if size > 0 and us > 0:
            points.setdefault(size, us)
    if time_col < 0:
        raise UsageError(FLAG, name, "has no nccl-tests column header (# size count type redop ... time algbw "
                         "busbw); pass the whole output of an nccl-tests binary")
    if not ranks:
        raise UsageError(FLAG, name, "has no '#  Rank N Group ... device' lines, so its rank count is unknown; "
                         "keep nccl-tests' whole output, header included")
    if not points:
        raise UsageError(FLAG, name, "has no result rows with a size above 0; run the test with -b at least 8")
    return NcclTestsResult(op=found_op, nranks=len(ranks), points=tuple(sorted(points.items())), name=name,
                           devices=tuple(ranks[i] for i in sorted(ranks)), dtype=dtype)


def _op_of(text: str, name: str, op: str | None) -> str:
    ops = sorted(set(BINARIES.values()))
    if op is not None:
        if op not in ops:
            raise UsageError(FLAG, f"{op}={name}", f"op must be one of {', '.join(ops)}")
        return op
    for line in text.splitlines():
        m = _STARTING.match(line.strip())
        if m:
            binary = os.path.basename(m.group(1)).removesuffix("_mpi")
            if binary not in BINARIES:
                raise UsageError(FLAG, name, f"is the output of {binary}; the deployment view reads "
                                 f"{', '.join(BINARIES)}")
            return BINARIES[binary]
    lowered = name.lower().replace("-", "_")
    for binary, found in BINARIES.items():
        if binary.removesuffix("_perf") in lowered:
            return found
    raise UsageError(FLAG, name, f"does not say which test it is (no '# Collective test starting' line, no "
                     f"test name in the file name); name it as OP=PATH with OP one of {', '.join(ops)}")


__all__ = ["BINARIES", "NcclTestsResult", "parse_nccl_tests", "read_nccl_tests"]
