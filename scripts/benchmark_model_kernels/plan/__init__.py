"""Stage 1, plan: a model's config -> the per-rank GEMM and fused-MoE shapes vLLM runs (a `Plan`).

In: a bundled name, a folder or config.json, or a Hub ID (`config_source`), built on the meta
device (`meta_model`, no weights). `planner` walks the decoder layers and places every module by
the rules in `vllm_rules/`; `preview` prints the plan. Out: `schema.Plan` (also written as JSON by
`--plan_json`), read by `cases/`.
"""
