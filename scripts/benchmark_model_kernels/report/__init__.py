"""Stage 4, report: results.json -> report.md and figures (`scripts/report.py`).

Reads workdirs through the results schema (`core/results_schema.py`) and the plan recorded in them,
analyses per module, per-step roll-ups and crossovers, and renders Markdown and PNG figures.
Nothing here measures; it never changes a results.json. One way, module by module:
  cells.py     rows -> the best cell of one (module, M, recipe, basis); the vocabulary (each
               FP8 scheme its own recipe; the vLLM-default basis)
  row_facts.py results dict -> Rows with scheme / vllm_default / num_tokens (derived for rows
               written before them) and the checkpoint's FP8 scheme
  attention.py attention rows -> per layer type the best backend per (phase, M, KV length, KV
               dtype) and the attention time of a decode step
  analysis.py  results dict -> Analysis (entries, roll-ups, crossovers, verdicts, warnings, peaks)
  markdown.py  Analysis -> report.md lines          figures.py  Analysis -> fig_*.png
  report.py    the CLI: workdirs in, report.md and figures out
"""
