"""Stage 2, cases: a `Plan` -> the measurements to make (`schema.Case`: backend, recipe, shapes).

`backends` is the table of backends per (kind, recipe), the GPUs they run on and their known shape
limits; `build` makes one Case per (entry, M, recipe, backend[, variant][, +quant]) with vLLM's
physical padding and decides up front what is known to be unsupported. Out: Cases, read by `run/`.
"""
