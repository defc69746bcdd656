"""Floor 1, core: what every other floor reads and nothing of theirs.

`errors` (the one-line UsageError and `cli_main`), `flag_spelling` (kebab-case twins of the
flags and vLLM's flag names answered), `gpu_specs` (GPU names -> compute capability and memory),
`files` (atomic writes, path flags, digests, the user cache folder), `shown_paths` (paths as a
committed report shows them: a workdir by its name, no machine's absolute path), `version`, and the three
schemas the floors hand to each other: `plan_schema` (Plan: per-rank GEMM, MoE and attention
entries, defined in `plan_entries`),
`case_schema` (Case: one timed measurement, and the attention sweep), `results_schema` (results.json:
its RunSettings, reading it back, run facts and the CSV, read by report/) over `row_schema` (Row:
one measurement, and the checks of its fields).
"""
