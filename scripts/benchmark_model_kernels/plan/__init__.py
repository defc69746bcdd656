"""Stage 1, plan: a model's config -> the per-rank GEMM and fused-MoE shapes vLLM runs (a `Plan`).

In: a bundled name, a folder or config.json, or a Hub ID (`config_source`), built on the meta
device (`meta_model`, no weights). `planner` walks the decoder layers, `roles` gives every module
its role and per-rank size by the rules in `vllm_rules/` (`attention_roles`: attention and MLA),
`merge` counts identical entries over the layers (`items` holds what passes between them);
`config_checks` refuses a config's bad values before the build and the keys it leaves to class
defaults after; `memory` is one rank's GPU memory (weights per recipe, K/V cache, the tokens that
fit), `smallest_fit` the fewest GPUs and smallest TP/EP whose rank holds it; `plan_cache` keeps
plans between runs; `preview` prints the plan. Out: `schema.Plan` (also written as JSON by
`--plan_json`), read by `cases/`.
"""
