"""benchmark-model-kernels: per-rank GEMM and fused-MoE shapes vLLM runs for a Hugging Face LLM,
timed with FlashInfer's own benchmark driver (and a PyTorch baseline).

Data flows one way, one module per stage:
  config_source -> meta_model -> planner (plan.Plan) -> cases (cases.Case) -> driver / torch_backend
  -> results (results.Row, results.json) -> CSV / report.
"""

__version__ = "0.1.0"
