"""Floor 6, run: Cases -> timed rows in results.json (+ CSV, testlist, driver log).

`flags` turns the run flags into a `RunRequest`; `runner` drives the loop over a workdir
(`workdir`: its files and lock; `workdir_owner`: whether a folder is the tool's to write into;
`run_start`: the machine record, results.json header and result cache a run opens;
`case_execution`: one case to one row, cached or timed by a GPU slot's worker; `jit_warmup`: one
case per kernel family not yet built on this machine, run side by side before the timed pass;
`gpu_fanout`: the cases spread over several GPUs; `results_file`: results.json and the CSV as rows come in;
`phases`: the plan-cases-run steps; `progress`: the ETA line;
`interrupts` and `lifetime`: signals and the worker's group guard); `pool` keeps `worker`
processes that run FlashInfer's own benchmark driver in-process (`argv` builds its command line,
`driver_capture` reads its timings, `driver_fills` draws an attention case's K/V cache on the
GPU, `outcome` turns what came back into a row) and the tool's own
kernels (`kernels/`); `devices` picks the GPUs, `sweep` names the sub-workdir of each run of a
sweep, `launcher` runs a sweep locally or through Slurm, `cache` is the result cache shared
across runs, `autotune_file` guards FlashInfer's autotune cache, `tuning_cache` names the per-user one a run
keeps its tuning in, `roofline` annotates each row.
Out: `results.json`, read by `report/`. Beside the runs, `tune_moe` (scripts/tune_moe.py) writes
vLLM's tuned fused-MoE config files for a layout's per-rank shapes: `tune_moe_shapes` (what it
tunes: the plan's shapes, their files, vLLM's own tiles), `tune_moe_out` (the folder it writes:
the files, the record it resumes from, the timing table).
"""
