#!/usr/bin/env python3
"""A few lines per results.json for an evidence run's console: what its rows came to.

    python3 benchmarks/results_summary.py RESULTS_JSON...

Per file: rows per status; per (kind, backend, mode) and status; the versions the run recorded;
notes.downloads and notes.capabilities; the failed and incorrect rows grouped by reason (count
and a first case id); ok rows whose check did not pass, ok eager rows without a launch count and
ok rows without percentiles (count and the first 8); and the first 12 ok attention rows with
their time, share of peak HBM bandwidth and sample count. A path that does not exist is named and
skipped (a sweep the budget cut may have written no results.json yet). Exit status 0.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import Any

VERSIONS = ("flashinfer_wheel", "flashinfer_checkout", "flashinfer_cubin", "flashinfer_jit_cache",
            "cupti_python", "torch")


def _short(text: object, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ids(rows: list[dict[str, Any]]) -> str:
    return f"{len(rows)} {[r['case_id'] for r in rows[:8]]}"


def summary_lines(path: str, res: dict[str, Any]) -> list[str]:
    rows = res.get("rows", [])
    notes = res.get("notes", {})
    versions = res.get("environment", {}).get("versions", {})
    lines = [f"{path} ({res.get('run_id')}): {len(rows)} rows {dict(Counter(r['status'] for r in rows))}"]
    by = Counter((r.get("kind"), r.get("backend"), r.get("mode", ""), r["status"]) for r in rows)
    lines.append("  by kind/backend/mode: " + ", ".join(f"{'/'.join(map(str, k[:3]))} {k[3]} {n}"
                                                        for k, n in sorted(by.items(), key=str)))
    lines.append(f"  versions: { {k: versions.get(k) for k in VERSIONS} }")
    lines.append(f"  notes.downloads: {_short(notes.get('downloads'))}")
    lines.append(f"  notes.capabilities: {_short(notes.get('capabilities'))}")
    bad = [r for r in rows if r["status"] in ("failed", "incorrect")]
    for (status, reason), n in Counter((r["status"], _short(r.get("reason"), 300)) for r in bad).most_common():
        first = next(r["case_id"] for r in bad if r["status"] == status and _short(r.get("reason"), 300) == reason)
        lines.append(f"  {status} x{n} (e.g. {first}): {reason}")
    ok = [r for r in rows if r["status"] == "ok"]
    lines.append(f"  ok rows whose check did not pass: {_ids([r for r in ok if r.get('check') != 'passed'])}")
    eager = [r for r in ok if r.get("mode") == "eager" and r.get("launches_per_call") is None]
    lines.append(f"  ok eager rows without a launch count: {_ids(eager)}")
    lines.append(f"  ok rows without percentiles: {_ids([r for r in ok if not r.get('n_samples')])}")
    attention = sorted((r for r in ok if r.get("kind") == "attention"), key=lambda r: r["case_id"])
    for r in attention[:12]:
        lines.append(f"  ok {r['case_id']} {r['median_us']:.2f} us, {r.get('pct_peak_bandwidth')} % HBM, "
                     f"samples {r.get('n_samples')}")
    return lines


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    for path in paths:
        if not os.path.isfile(path):
            print(f"{path}: no such file")
            continue
        with open(path) as f:
            print("\n".join(summary_lines(path, json.load(f))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
