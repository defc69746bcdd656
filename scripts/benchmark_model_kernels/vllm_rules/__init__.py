"""vLLM's behaviour, in one place: the rules the plan and the cases follow, each citing its vLLM source.

`sharding` (how TP and EP split each linear kind and the experts), `padding` (the physical shape
vLLM gives each backend's kernel, and vLLM's own limits), `layers` (which layers keep BF16 under
every recipe). They read only the schemas (`plan/schema.py`, `cases/schema.py`) and are
documented in references/sharding.md and references/padding.md.
"""
