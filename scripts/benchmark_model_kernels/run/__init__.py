"""Stage 3, run: Cases -> timed rows in results.json (+ CSV, testlist, driver log).

`runner` drives the loop over a workdir; `driver` keeps a pool of `worker` processes that run
FlashInfer's own benchmark driver in-process; `torch_backend`, `quant_timing` and the Triton
kernels time the rest with the same `timing.bench`; `roofline` annotates each row; `results` is
the results schema the report reads. Out: `results.json`, read by `report/`.
"""
