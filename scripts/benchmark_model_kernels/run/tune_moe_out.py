"""The folder `scripts/tune_moe.py --out` writes: vLLM's tuned fused-MoE files, the record of what
was timed, and the timing table.

The folder is the one `VLLM_TUNED_CONFIG_FOLDER` points at; vLLM reads only the file names of
vllm_rules/moe_config_files.py there, so the tool's own files sit beside them:

  E=..,N=..,device_name=..[,dtype=..][,block_shape=[..]].json  one per shape, as vLLM's tuner writes
  tune_moe.json   RECORD: every key's timings (the tuned, shipped and default tiles), the files
                  written with their SHA-256, the runs' commands; what a rerun resumes from
  tune_moe.md     TABLE: per file and key, the three times and the speed-ups, and the commands
  tune_moe.csv    the same rows as CSV
  run.lock        held while a run writes (run/workdir.py take_workdir_lock)

A vLLM file already there is replaced only when the record says this tool wrote it and its bytes
are still the ones written (`check_replaceable`); any other file of that name, a link, or a
tune_moe.json of something else is refused before anything is timed. Every write is atomic, and
the record is written after every key, so an interrupted run loses at most the key it was on.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import stat
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..core.errors import UsageError
from ..core.files import write_json_atomic, write_text_atomic
from ..core.shown_paths import shown_text

RECORD = "tune_moe.json"
TABLE_MD = "tune_moe.md"
TABLE_CSV = "tune_moe.csv"
RECORD_TOOL = "benchmark-model-kernels tune_moe"
RECORD_FORMAT = 1
#: Largest record read (one row is a few hundred bytes).
_MAX_RECORD_BYTES = 64 * 2**20

CSV_FIELDS = ("file", "scheme", "num_tokens", "m_per_rank", "tuned_tiles", "tuned_us", "shipped_tiles", "shipped_us",
              "default_tiles", "default_us", "speedup_vs_shipped", "speedup_vs_default", "gain", "searched",
              "check", "note")


@dataclass(frozen=True)
class KeyRow:
    """One key of one file, as the record keeps it."""

    row_id: str
    """Digest of everything the numbers depend on (shape, key, search, settings, GPU, code)."""
    file: str
    scheme: str
    num_tokens: int
    tokens_per_m: int
    tuned: dict[str, Any]
    """{"config": tiles, "median_us": float | None, "reason": str}; so are shipped and default."""
    shipped: dict[str, Any]
    default: dict[str, Any]
    searched: int
    timer: str = ""
    check: str = ""

    @property
    def baseline(self) -> dict[str, Any]:
        """What vLLM runs without the file: its shipped tiles when it ships a file, else its default."""
        return self.shipped if self.shipped.get("config") is not None else self.default


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _regular_or_absent(out: str, name: str) -> None:
    path = os.path.join(out, name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise UsageError("--out", out, f"its {name} is {kind}, which this tool never writes through; "
                         "remove it or choose another --out")


class OutFolder:
    """The --out folder: its record, read once, and the files written into it."""

    def __init__(self, out: str):
        self.out = out
        self.record: dict[str, Any] = {"tool": RECORD_TOOL, "format": RECORD_FORMAT, "files": {}, "rows": {},
                                       "runs": []}
        path = os.path.join(out, RECORD)
        _regular_or_absent(out, RECORD)
        if os.path.exists(path):
            self.record = _read_record(out, path)
        elif any(os.path.exists(os.path.join(out, n)) for n in (TABLE_MD, TABLE_CSV)):
            raise UsageError("--out", out, f"holds {TABLE_MD} or {TABLE_CSV} but no {RECORD}: they are not "
                             "this tool's; move them or choose another --out")
        for name in (TABLE_MD, TABLE_CSV):
            _regular_or_absent(out, name)

    def check_replaceable(self, names: Sequence[str]) -> None:
        """UsageError for the first name that exists and is not a file this tool wrote, unchanged."""
        for name in names:
            _regular_or_absent(self.out, name)
            path = os.path.join(self.out, name)
            if not os.path.exists(path):
                continue
            written = self.record["files"].get(name, {}).get("sha256")
            if written is None or written != _sha256(path):
                what = "this tool did not write" if written is None else "was changed since this tool wrote it"
                raise UsageError("--out", self.out, f"holds {name}, which {what}; it is never overwritten: move it "
                                 "away or choose another --out")

    def row(self, row_id: str) -> KeyRow | None:
        raw = self.record["rows"].get(row_id)
        try:
            return KeyRow(**raw) if isinstance(raw, dict) else None
        except TypeError:
            return None

    def put_row(self, row: KeyRow) -> None:
        self.record["rows"][row.row_id] = asdict(row)
        self._save()

    def add_run(self, run: dict[str, Any]) -> None:
        self.record["runs"].append(run)
        self._save()

    def write_file(self, name: str, text: str, about: dict[str, Any], row_ids: Sequence[str]) -> None:
        """Write one vLLM file (after check_replaceable) and record its digest and the rows it holds."""
        path = os.path.join(self.out, name)
        write_text_atomic(path, text)
        self.record["files"][name] = {**about, "rows": list(row_ids),
                                      "sha256": hashlib.sha256(text.encode()).hexdigest(),
                                      "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self._save()

    def _save(self) -> None:
        write_json_atomic(os.path.join(self.out, RECORD), self.record)

    def rows_by_file(self) -> dict[str, list[KeyRow]]:
        """Per file, ascending by key: a written file's rows (the ones it holds), else the rows the
        record has for it (the latest per key)."""
        by_file: dict[str, dict[int, KeyRow]] = {}
        for row_id in self.record["rows"]:
            row = self.row(row_id)
            if row is not None and row.file not in self.record["files"]:
                by_file.setdefault(row.file, {})[row.num_tokens] = row
        for name, about in self.record["files"].items():
            rows = [self.row(rid) for rid in about.get("rows", [])]
            by_file[name] = {r.num_tokens: r for r in rows if r is not None}
        return {f: [rows[k] for k in sorted(rows)] for f, rows in sorted(by_file.items())}

    def write_tables(self) -> None:
        """tune_moe.md and tune_moe.csv from the whole record."""
        by_file = self.rows_by_file()
        write_text_atomic(os.path.join(self.out, TABLE_MD), table_markdown(by_file, self.record))
        write_text_atomic(os.path.join(self.out, TABLE_CSV), table_csv(by_file))


def _read_record(out: str, path: str) -> dict[str, Any]:
    try:
        if os.path.getsize(path) > _MAX_RECORD_BYTES:
            raise ValueError("too large")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError("--out", out, f"its {RECORD} cannot be read ({e}); move it away or choose another "
                         "--out") from None
    if (not isinstance(doc, dict) or doc.get("tool") != RECORD_TOOL or doc.get("format") != RECORD_FORMAT
            or not all(isinstance(doc.get(k), t) for k, t in (("files", dict), ("rows", dict), ("runs", list)))):
        raise UsageError("--out", out, f"its {RECORD} is not a record of this tool (format {RECORD_FORMAT}); "
                         "move it away or choose another --out")
    return doc


# ---------------------------------------------------------------------------- tables


def tiles_text(config: dict[str, int] | None) -> str:
    """"BM,BN,BK,G,warps,stages", or "-"."""
    if not config:
        return "-"
    return ",".join(str(config[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                                              "num_warps", "num_stages"))


def speedup(base: dict[str, Any], tuned: dict[str, Any]) -> float | None:
    b, t = base.get("median_us"), tuned.get("median_us")
    return b / t if b and t else None


def _us(timed: dict[str, Any]) -> str:
    us = timed.get("median_us")
    return f"{us:.1f}" if us is not None else "-"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def m_per_rank(row: KeyRow) -> str:
    """The attention tokens per rank M whose MoE call looks this key up: key / (EP/TP)."""
    if row.tokens_per_m == 1:
        return str(row.num_tokens)
    m, rest = divmod(row.num_tokens, row.tokens_per_m)
    return "<1" if not m else str(m) if not rest else f"{row.num_tokens / row.tokens_per_m:g}"


def _note(row: KeyRow) -> str:
    """The reasons a time is missing (vLLM shipping no file is said once per file, not per key)."""
    shipped = row.shipped.get("reason") if row.shipped.get("config") is not None else ""
    return "; ".join(x for x in (row.tuned.get("reason"), shipped, row.default.get("reason")) if x)


def table_markdown(by_file: dict[str, list[KeyRow]], record: dict[str, Any]) -> str:
    lines = ["# Tuned fused-MoE configs for vLLM", "",
             "Load them with `VLLM_TUNED_CONFIG_FOLDER=<this folder> vllm serve ...`: vLLM reads a file here before "
             "its own (vllm/model_executor/layers/fused_moe/fused_moe.py: get_moe_configs).", "",
             "Per key (the MoE layer's token count M x EP/TP, which vLLM looks up as the nearest key): the time "
             "of this tool's Triton fused MoE of vLLM's design with the tuned tiles, with vLLM's shipped tiles "
             "for the shape (its nearest key) and with vLLM's default tiles (get_default_config), all timed in "
             "the same run with the same kernel. Gain: what vLLM runs without this file (shipped, else "
             "default) over the tuned time. M/rank: the attention tokens per rank whose MoE call has that many "
             "tokens (key / (EP/TP)). Tiles: BLOCK_SIZE_M,N,K,GROUP_SIZE_M,num_warps,num_stages.", ""]
    for name, rows in by_file.items():
        about = record["files"].get(name, {})
        lines += [f"## {name}", ""]
        if about:
            lines += [f"{about.get('model', '')} {about.get('layout', '')}, {about.get('scheme', '')}; "
                      f"{about.get('shape', '')}", ""]
        else:
            lines += ["(not written yet: its keys are not all timed)", ""]
        if rows and all(r.shipped.get("config") is None for r in rows):
            lines += ["vLLM ships no file for this shape: without this one it runs its default tiles.", ""]
        lines += ["| key | M/rank | tuned | us | shipped | us | default | us | x shipped | x default | gain | note |",
                  "|---:|---:|---|---:|---|---:|---|---:|---:|---:|---:|---|"]
        for r in rows:
            lines.append(f"| {r.num_tokens} | {m_per_rank(r)} | {tiles_text(r.tuned.get('config'))} | {_us(r.tuned)} "
                         f"| {tiles_text(r.shipped.get('config'))} | {_us(r.shipped)} "
                         f"| {tiles_text(r.default.get('config'))} | {_us(r.default)} "
                         f"| {_x(speedup(r.shipped, r.tuned))} | {_x(speedup(r.default, r.tuned))} "
                         f"| {_x(speedup(r.baseline, r.tuned))} | {_note(r)} |")
        lines.append("")
    if record.get("runs"):
        lines += ["## Commands", ""]
        for run in record["runs"]:
            # A committed table names no one's directories (tune_moe.json keeps the command as run).
            command = shown_text(str(run.get("command", "")), code=True)
            lines.append(f"- `{command}` ({run.get('started', '')}, {run.get('gpu', '')}, "
                         f"triton {run.get('triton', '')}, shipped files: {run.get('shipped_from', '')})")
        lines.append("")
    return "\n".join(lines)


def table_csv(by_file: dict[str, list[KeyRow]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for name, rows in by_file.items():
        for r in rows:
            w.writerow([name, r.scheme, r.num_tokens, m_per_rank(r), tiles_text(r.tuned.get("config")),
                        r.tuned.get("median_us"), tiles_text(r.shipped.get("config")), r.shipped.get("median_us"),
                        tiles_text(r.default.get("config")), r.default.get("median_us"),
                        speedup(r.shipped, r.tuned), speedup(r.default, r.tuned), speedup(r.baseline, r.tuned),
                        r.searched, r.check, _note(r)])
    return buf.getvalue()


__all__ = ["KeyRow", "OutFolder", "RECORD", "TABLE_CSV", "TABLE_MD", "m_per_rank", "speedup", "table_csv",
           "table_markdown", "tiles_text"]
