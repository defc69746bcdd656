"""benchmark-model-kernels: per-rank GEMM, fused-MoE and attention shapes vLLM runs for a Hugging
Face LLM, timed with FlashInfer's own benchmark driver (and PyTorch and Triton baselines).

Data flows one way, one folder per floor; a module imports only from the floors below it
(pyproject.toml [tool.importlinter] checks it in CI), from the bottom up:
  core/         errors, files, the version and the three schemas (plan, case, results)
  env/          probes of the machine: versions, GPU, NVML, CUDA (no timing)
  vllm_rules/   vLLM's behaviour as sourced tables: sharding, padding, dispatch, layouts
  plan/         config -> Plan (per-rank shapes);  crosscheck/: the Plan against vLLM's own class
  cases/        Plan -> Cases (backend, recipe, physical shape, known-unsupported)
  kernels/      what the tool itself times besides the driver: torch and Triton ops, quant timing,
                correctness, the timer, launch counting
  run/          Cases -> results.json: flags, runner, workdir, worker pool around the driver, cache
  doctor/       the environment record and the doctor (check_env.py)
  report/       results.json -> report.md, CSV and figures
  deploy/       the deployment view: the layouts of G GPUs, their collectives and decode steps
  cli_model.py, cli_builtin.py, docs_tables.py     the CLIs that wire the floors together
"""

from .core.version import __version__

__all__ = ["__version__"]
