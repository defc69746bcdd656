"""The plan checked against vLLM itself: vLLM's own model class for the config, built on the meta
device for one rank of the plan's TP/DP/EP layout (`vllm_build`; for a platform-split family the
class vLLM builds on the target GPU's CUDA platform, `vllm_platform`), read back into per-rank GEMM
and fused-MoE shapes (`vllm_layers`), and compared with the plan entry by entry (`compare`); `check`
does the three for one plan. And which kernels vLLM selects: `vllm_dispatch` asks vLLM's own
selection code per layer kind, recipe and FP8 scheme on a target GPU (one process per GPU,
`vllm_dispatch_child`, whose vLLM platform answers as that GPU: `vllm_target_gpu`) and compares the
answers with the hand table of vllm_rules/dispatch.py. And vLLM as the planner: `vllm_planner`
reads the same build as a plan (each module's role, routing and reason from `vllm_roles`), and
`planner_choice` decides which planner plans (vLLM's class where vLLM is importable, the rules
otherwise).

In: a `plan.schema.Plan` and the config it was planned from. Out: a `compare.CrossCheckResult`
(match, the differences one per line, vLLM's refusal, or why vLLM's class could not be built on this
machine) that the CLI prints and records in the plan JSON; or vLLM's own plan. vLLM is imported only
here, and only for a cross-check or where it plans.
"""
