"""Stage 4, report: results.json -> report.md and figures (`scripts/report.py`).

Reads workdirs through the results schema (`run/results.py`) and the plan recorded in them,
analyses per module, per-step roll-ups and crossovers, and renders Markdown and PNG figures.
Nothing here measures; it never changes a results.json.
"""
