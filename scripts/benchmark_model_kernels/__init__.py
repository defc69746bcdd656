"""benchmark-model-kernels: per-rank GEMM and fused-MoE shapes vLLM runs for a Hugging Face LLM,
timed with FlashInfer's own benchmark driver (and PyTorch and Triton baselines).

Data flows one way, one folder per stage; a module imports only from earlier ones:
  errors, plan/schema, cases/schema            the floor: errors and the two schemas
  vllm_rules/                                  vLLM's sharding, padding and layer rules
  plan/    config -> Plan (per-rank shapes)
  cases/   Plan -> Cases (backend, recipe, physical shape)
  run/     Cases -> results.json (rows, timing, roofline)
  env/     the machine: environment record and the doctor
  report/  results.json -> report.md and figures
  cli_model, cli_builtin                       the CLIs that wire the stages together
"""

__version__ = "0.1.0"
