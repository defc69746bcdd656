"""Stage 4, report: results.json -> report.md and figures (`scripts/report.py`).

Reads workdirs through the results schema (`core/results_schema.py`) and the plan recorded in them,
analyses per module, per-step roll-ups and crossovers, and renders Markdown and PNG figures.
Nothing here measures; it never changes a results.json. One way, module by module:
  cells.py     rows -> the best cell of one (module, M, recipe, basis); the vocabulary (each
               FP8 scheme its own recipe; the vLLM-default basis)
  row_facts.py results dict -> Rows with scheme / vllm_default / timed_as / num_tokens (derived
               for rows written before them) and the checkpoint's FP8 scheme
  attention.py attention rows -> per layer type the best backend per (phase, M, KV length, KV
               dtype) and the attention time of a decode step
  plan_entries.py  plan + rows -> Entry per module (logical shape, padding, MoE tokens per M)
  analysis.py  results dict -> Analysis (entries, cells, roll-ups, crossovers, warnings, labels)
  recipe_totals.py  Analysis -> the roll-up rows per recipe and basis, speed-ups (a tie where the
               p10-p90 ranges overlap) and the summary's ranking
  roofline_peaks.py  Analysis -> the roofline's ceilings (the run's own peaks, else roofline.PEAKS)
  memory.py    results dict -> the memory section (one rank's weights and K/V cache) and the one fit
               decision every total, speed-up and verdict reads ("does not fit (needs X, has Y)")
  quality.py   Analysis -> the measurement-quality section
  md_text.py   numbers and tables in Markdown
  run_scale.py  Analysis -> a run's GPUs (TP x DP) and the global batch of its per-rank M
  md_summary.py  Analysis -> the summary (totals per recipe, fastest recipe per M)
  md_rollup.py  Analysis -> the per-step roll-ups, GEMM + MoE and with attention
  md_attention.py  Analysis -> the attention section per layer type and phase
  md_module_tables.py  Analysis -> per-module tables, crossovers, cells without a number
  markdown.py  Analysis -> report.md lines (one workdir's section, the comparison of several)
  figures.py   Analysis -> fig_*.png
  side_by_side.py  figure jobs -> drawn side by side in forked processes (the same files)
  report.py    the CLI: workdirs in, report.md and figures out
"""
