"""Floor 5, kernels: what the tool itself times besides FlashInfer's driver.

`timing` is the one timer (FlashInfer's `bench_gpu_time`, CUPTI, cold L2; `launches` counts kernel
launches of an eager call); `torch_ops` builds the PyTorch/cuBLAS baselines (GEMM, MoE composite);
`triton_ops` times this tool's Triton kernels of vLLM's design: `triton_moe/` (fused MoE: problem,
kernels, fused call, tile tuning) and `triton_fp8_gemm` (block-128 FP8 GEMM, its @triton.jit
kernels in `triton_fp8_gemm_kernels`), with `triton_tuning` (the tile search and its cache) and
`triton_import` (Triton, or a placeholder where it is missing, for the kernel modules);
`quant_timing` times the activation quantization a `+quant` row adds (its FP8 Triton kernels in
`fp8_quant_kernels`); `correctness` checks each result against a reference. In: a `Case`; out: a
`Measurement`. `moe_tuning` searches the fused MoE's tiles per token count over vLLM's tuner space
and times them beside vLLM's shipped and default tiles (for vLLM's tuned-config files).
"""
