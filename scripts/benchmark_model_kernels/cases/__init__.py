"""Stage 2, cases: a `Plan` -> the measurements to make (`schema.Case`: backend, recipe, shapes).

`backends` is the table of backends per (kind, recipe), the GPUs they run on and the activation
format each takes; `kernel_limits` the known shape, activation and routing limits of the kernels
and the driver; `build` makes one Case per (entry, M, recipe, backend[, variant][, +quant]) with vLLM's
physical padding and decides up front what is known to be unsupported; `attention` makes the
attention cases (per layer type, phase, M, KV length, KV dtype and driver backend);
`capabilities` holds what the installed FlashInfer says runs on which GPU, asked in a child
process (`capability_probe`). Out: Cases, read by `run/`.
"""
