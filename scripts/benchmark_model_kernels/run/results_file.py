"""results.json of a run in progress: its fixed header, the rows so far, the CSV beside it.

In: the run's Cases (their order is the order of the rows), the header (schema version, run id,
command, environment, settings, plan, notes) and the rows a --resume kept. Out: results.json,
rewritten whole (atomically) every time it is saved, and results.csv. A run that has not every row
yet says so in notes["incomplete"].
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict
from typing import Any

from ..core.case_schema import Case
from ..core.files import write_text_atomic
from ..core.results_schema import (
    RESULTS_CSV,
    RESULTS_JSON,
    Row,
    assemble_results_text,
    csv_text,
    member_text,
    row_text,
    run_facts,
)


class ResultsFile:
    """The rows of `cases` recorded so far (`rows`, by case id; `kept`: those a --resume kept) and
    the `header` they are written under, into `workdir`'s results.json. `lock` guards the rows and
    the file: worker threads (one per GPU) record rows while another may save."""

    def __init__(self, workdir: str, cases: list[Case], header: dict[str, Any],
                 kept: dict[str, Row] | None = None):
        self.workdir, self.cases, self.header = workdir, cases, header
        self.rows: dict[str, Row] = dict(kept or {})
        self.lock = threading.RLock()
        self._row_texts: dict[str, tuple[Row, str]] = {}
        self._header_texts: dict[str, str] = {}

    def ordered(self) -> list[Row]:
        """The rows so far, in case order."""
        return [self.rows[c.case_id] for c in self.cases if c.case_id in self.rows]

    def _head(self, ordered: list[Row]) -> dict[str, Any]:
        """The payload without its rows (they come last)."""
        payload = dict(self.header)
        notes = dict(payload.get("notes") or {})
        if len(ordered) < len(self.cases):
            notes["incomplete"] = (f"{len(ordered)} of {len(self.cases)} cases have rows "
                                   "(run in progress or interrupted)")
        payload["notes"] = notes
        return payload

    def payload(self) -> dict[str, Any]:
        ordered = self.ordered()
        return {**self._head(ordered), "rows": [asdict(r) for r in ordered]}

    def save(self) -> None:
        with self.lock:
            write_text_atomic(os.path.join(self.workdir, RESULTS_JSON), self.payload_text())

    def write_csv(self) -> None:
        """results.csv of the rows so far, with the run facts of results.json."""
        write_text_atomic(os.path.join(self.workdir, RESULTS_CSV), csv_text(self.ordered(), run_facts(self.payload())))

    def payload_text(self) -> str:
        """results_text(self.payload()) (core/results_schema.py), made from each row's text cached
        when the row is recorded: results.json is rewritten after every case, and re-encoding every
        row and the plan each time cost seconds per hundred cases (quadratic in the cases) on a
        sweep of several hundred rows."""
        ordered = self.ordered()
        members = [(key, self._header_text(key) if key in self.header and key != "notes" else member_text(value))
                   for key, value in self._head(ordered).items()]
        return assemble_results_text(members, [self._row_text(r) for r in ordered])

    def _row_text(self, row: Row) -> str:
        cached = self._row_texts.get(row.case_id)
        if cached is None or cached[0] is not row:
            cached = (row, row_text(asdict(row)))
            self._row_texts[row.case_id] = cached
        return cached[1]

    def _header_text(self, key: str) -> str:
        """A header member's JSON (the header is fixed once the run starts; notes are not)."""
        if key not in self._header_texts:
            self._header_texts[key] = member_text(self.header[key])
        return self._header_texts[key]


__all__ = ["ResultsFile"]
