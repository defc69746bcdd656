"""The project's own Triton fused-MoE layer (one EP/TP rank), following vLLM's fused_moe algorithm.

What flows through it (each module imports on a CPU machine without torch or Triton; both are
imported lazily, on first use):

* `problem`: `MoeProblem` (M tokens, hidden H, per-rank intermediate I, local/global experts,
  top_k, activation, scheme, biases, the FP8 block size, a dynamic per-tensor scale) ->
  `build_inputs` (seeded activations, weights and FP8 scales, uniform routing over the GLOBAL
  experts: ids >= local_experts belong to other ranks), `reference_moe` (fp32 PyTorch) and
  `hbm_floor_bytes` (the roofline floor).
* `tuning`: `vllm_config` (the tiles vLLM's Triton MoE runs a problem with on a named GPU:
  vllm_rules/moe_triton.py, as its launch applies them); (scheme, M, top_k, local experts) ->
  `config_space` / `default_config` of the tile search, config dicts of six ints checked by
  `validate_config`; `config_key` names a tuned shape in the JSON cache of
  `kernels/triton_tuning.py`, which also does the search (`search_config`).
* `wrapping`: `passes(p)`, the passes of vLLM's `fused_experts_impl` for a problem and the
  rows x cols each sweeps (under EP the activation, its quantization, the zero fill and the sum
  sweep every M x top_k slot).
* `fused`: (problem, inputs, config) -> `make_fused_moe` -> (fn, args); fn(*args) returns the
  [M, H] BF16 output of the whole expert computation, as vLLM's `fused_experts_impl` does:
  1. align: the M*top_k (token, expert) pairs are grouped per LOCAL expert, each group padded to
     a multiple of BLOCK_SIZE_M (sentinel M*top_k); pairs of other ranks get no slot. Up to 1024
     pairs one program does it all; up to 16384 one program the offsets and a multi-program
     scatter; beyond, a memset and three kernels (histograms, offsets, scatter). Without EP and
     when M*top_k*4 <= the experts, vLLM's naive block assignment: no align, one block per pair.
  2. grouped GEMM 1 (H -> 2I gated, or I), vLLM's `fused_moe_kernel` algorithm, FP8 scales per
     tensor / per token x per channel / per 128x128 block, optional bias.
  3. activation (silu_and_mul, gelu_and_mul, gelu_tanh_and_mul, swigluoai, silu, gelu, relu2)
     over every M x top_k slot into BF16, then (FP8) its quantization over every slot: per
     token, per 1 x block group, or one per-tensor scale (static, or computed by an amax
     reduction first).
  4. under EP, a zero fill of the whole [M x top_k, H] output cache; grouped GEMM 2 (I -> H) with
     the routing weight multiplied in.
  5. sum over every top_k slot -> [M, H] BF16.
  Static grids on preallocated buffers (no host sync, no data-dependent branches): the call can be
  captured in a CUDA graph. `quant_input_fn` -> (fn, args) is the FP8 schemes' input quantization.
* `kernels`: the @triton.jit kernels behind `fused` (`KERNELS`, by name), which imports it where it
  launches them (Triton comes through `kernels/triton_import.py`); `scale_kernels`: the amax
  reduction of a dynamic per-tensor FP8 scale.
"""
