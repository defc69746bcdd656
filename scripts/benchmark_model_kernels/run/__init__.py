"""Stage 3, run: Cases -> timed rows in results.json (+ CSV, testlist, driver log).

`flags` turns the run flags into a `RunRequest`; `runner` drives the loop over a workdir
(`workdir`: its files; `progress`: the ETA line); `pool` keeps `worker` processes that run
FlashInfer's own benchmark driver in-process (`argv` builds its command line, `outcome` reads what
came back); `torch_backend` and `quant_timing` time the rest with the same `timing.bench`;
`roofline` annotates each row; `results` is the results schema the report reads.
Out: `results.json`, read by `report/`.
"""
