"""Deployment view: which layout and recipe serves a model best on G GPUs at a load, per GPU.

Built on the per-rank runs below it (plans, memory, timed rows); nothing here times a kernel.
Module by module:
  layouts.py      the layouts vLLM can serve a model with on G GPUs, each planned or refused with why
  collectives.py  the collectives vLLM 0.33 issues per decode step for a layout, with message sizes
  comm_times.py   the time of one collective: measured here, from nccl-tests files, or a bundled table
  nccl_tests.py   nccl-tests output (all_reduce_perf, all_gather_perf, ...) -> sizes and times
  measure.py      collectives timed here through torch.distributed worker processes (NCCL or gloo)
  routing.py      expert loads under uniform, Zipf or file routing; the most loaded EP rank
  view.py         one layout's decode steps per recipe, batch and context, measured or modelled parts
  summary.py      what deploy.py prints before it times anything (all a --dry_run prints)
  output.py       deployment.json: the deployment view as data
  report.py       report.md of a deployment and its Pareto figure
  cli.py          `deploy.py` / `benchmark-deploy`: the CLI
  data/comm_<system>.json  bundled nccl-tests tables per system (typical, not measured here)
"""
