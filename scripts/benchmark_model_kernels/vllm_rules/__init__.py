"""vLLM's behaviour, in one place: the rules the plan and the cases follow, each citing its vLLM source.

`layout` (one TP/DP/EP layout, shaped like vLLM's FusedMoEParallelConfig), `sharding` (each plan
role's linear kind, how TP and EP split it and the experts, where an EP rank's experts start),
`moe` (which layers are MoE, the experts' activation, the routing), `padding` (the physical shape
vLLM gives each backend's kernel, and vLLM's own limits), `layers` (which layers keep BF16 under
every recipe), `dispatch` (which kernel vLLM runs by default per GPU, recipe and FP8 scheme),
`config` (one config field under its several spellings), `architectures` (which architectures
vLLM serves with a class of its own, which it refuses), `attention` (each attention layer's
per-rank heads, head sizes and window), `quant_config` (the FP8 scheme of a checkpoint's
`quantization_config`), `required_keys` (the config keys a plan depends on, per architecture
family), `moe_triton` (the tiles vLLM's Triton fused MoE picks, from its shipped tables carried in
`moe_triton_configs.json`, and the FP8 block shape it refines a checkpoint's blocks to for a TP
shard), `moe_config_files` (vLLM's tuned fused-MoE files: their names with the GPU as vLLM spells
it, their layout, the nearest-key lookup, get_default_config, its tuner's keys and space),
`block_fp8_gemm` (the tiles vLLM's Triton block-FP8 dense GEMM picks, from its shipped tables
carried in `block_fp8_gemm_configs.json`, else its default config). They read only the schemas
(`core/plan_schema.py`, `core/case_schema.py`) and are documented in references/sharding.md and
references/padding.md.
"""
