"""The FP8 scheme vLLM runs a checkpoint with, read from its `quantization_config`.

FP8 is three different kernels depending on how scales are laid out, so "FP8" in a report means
the scheme of the checkpoint being served:

- `per_tensor`: one scale per weight tensor, activations quantized with one scale per tensor,
  static from the checkpoint or computed on every call (`per_tensor_activation_scales`). vLLM
  0.33's online `--quantization fp8_per_tensor` of a BF16 checkpoint gives this with dynamic
  activation scales (vllm/model_executor/layers/quantization/online/fp8.py:
  Fp8PerTensorOnlineLinearMethod, Fp8PerTensorOnlineMoEMethod); `--quantization fp8` no longer
  quantizes online (quantization/fp8.py: Fp8Config refuses a checkpoint that is not FP8).
- `per_token`: one scale per weight output channel, activations quantized per token on the fly
  (compressed-tensors "channel"/"token" checkpoints such as the FP8-dynamic ones, fbgemm_fp8;
  vllm/model_executor/layers/quantization/compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py,
  .../quantization/fbgemm_fp8.py).
- `block128`: 128x128 weight blocks, activations quantized per 1x128 group (DeepSeek-V3, Kimi-K2,
  Qwen3-FP8: `quant_method: fp8` with `weight_block_size: [128, 128]`; Fp8LinearMethod with
  block_quant, vllm/model_executor/layers/quantization/utils/fp8_utils.py).
"""

from __future__ import annotations

from typing import Any

from ..core.errors import UsageError, shown_value

#: FP8 schemes, in report order.
FP8_SCHEMES = ("per_tensor", "per_token", "block128")

_ONLINE = ("no quantization_config: vLLM's online --quantization fp8_per_tensor quantizes a BF16 "
           "checkpoint per tensor, activations dynamically (vllm/model_executor/layers/quantization/"
           "online/fp8.py)")


def _as_dict(qc: Any) -> dict[str, Any] | None:
    if qc is None:
        return None
    if isinstance(qc, dict):
        return qc
    to_dict = getattr(qc, "to_dict", None)
    return to_dict() if callable(to_dict) else None


def _bad(key: str, value: object, fix: str) -> UsageError:
    """A quantization_config value vLLM would not read: one line naming its key."""
    return UsageError(f"config.json: quantization_config.{key}", shown_value(value), fix)


def _compressed_tensors(qc: dict[str, Any]) -> tuple[str, str]:
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict):
        raise _bad("config_groups", groups, "must be an object of named quantization groups")
    for name, group in groups.items():
        if not isinstance(group or {}, dict):
            raise _bad(f"config_groups.{name}", group, "must be an object (a compressed-tensors scheme "
                       "with weights and input_activations)")
        weights = (group or {}).get("weights") or {}
        acts = (group or {}).get("input_activations") or {}
        for part, value in (("weights", weights), ("input_activations", acts)):
            if not isinstance(value, dict):
                raise _bad(f"config_groups.{name}.{part}", value, "must be an object (type, num_bits, strategy)")
        if weights.get("type") != "float" or weights.get("num_bits") != 8:
            continue
        strategy = weights.get("strategy")
        where = f"compressed-tensors config_groups.{name}.weights.strategy={strategy!r}"
        if strategy == "tensor":
            return "per_tensor", where
        if strategy == "channel":
            act = acts.get("strategy")
            if act == "token" or acts.get("dynamic"):
                return "per_token", f"{where}, input_activations.strategy={act!r}"
            return "per_tensor", f"{where} with per-tensor activations"
        block = weights.get("block_structure") or []
        if not isinstance(block, list):
            raise _bad(f"config_groups.{name}.weights.block_structure", block, "must be a list of two "
                       "integers, e.g. [128, 128]")
        if strategy == "block" and block == [128, 128]:
            return "block128", f"{where}, block_structure=[128, 128]"
        return "", f"{where}: not an FP8 scheme this tool times"
    return "", "compressed-tensors checkpoint without an 8-bit float weight group: not FP8"


def checkpoint_fp8_scheme(quantization_config: Any) -> tuple[str, str]:
    """(scheme, why): the FP8 scheme vLLM runs this checkpoint with, and the config keys that say
    so. scheme is "" when the checkpoint is quantized to something that is not FP8 (why says
    what); a config without quantization_config gives vLLM's online FP8, per tensor.

    >>> checkpoint_fp8_scheme({"quant_method": "fp8", "weight_block_size": [128, 128]})[0]
    'block128'
    >>> checkpoint_fp8_scheme(None)[0]
    'per_tensor'
    """
    qc = _as_dict(quantization_config)
    if quantization_config is not None and qc is None:
        raise UsageError("config.json: quantization_config", shown_value(quantization_config),
                         'must be an object, e.g. {"quant_method": "fp8"}')
    if not qc:
        return "per_tensor", _ONLINE
    method = str(qc.get("quant_method") or "")
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block is not None and not isinstance(block, list):
            raise _bad("weight_block_size", block, "must be a list of two integers, e.g. [128, 128], or "
                       "absent (per-tensor FP8)")
        if block is None:
            act = qc.get("activation_scheme", "dynamic")
            return "per_tensor", f"quant_method=fp8 without weight_block_size (activation_scheme={act})"
        if list(block) == [128, 128]:
            return "block128", "quant_method=fp8, weight_block_size=[128, 128]"
        return "", f"quant_method=fp8 with weight_block_size={list(block)}: only [128, 128] is timed"
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method == "fbgemm_fp8":
        return "per_token", "quant_method=fbgemm_fp8 (per-channel weights, dynamic per-token activations)"
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or (qc.get("quantization") or {}).get("quant_algo") or "")
        if algo.upper() == "FP8":
            return "per_tensor", "quant_method=modelopt, quant_algo=FP8 (per-tensor scales)"
        return "", f"quant_method=modelopt, quant_algo={algo or 'unknown'}: not FP8"
    return "", f"quant_method={method or 'unknown'}: the checkpoint is not FP8"


def per_tensor_activation_scales(quantization_config: Any) -> str:
    """Where a per-tensor FP8 layer of this checkpoint gets its activation scales: "static" (the
    checkpoint's input scales: quant_method=fp8 with activation_scheme static, ModelOpt FP8,
    compressed-tensors per-tensor weights with static input activations) or "dynamic" (computed on
    every call: an FP8 checkpoint with dynamic activations, and every other checkpoint, whose
    per-tensor recipe is vLLM's online fp8_per_tensor). vllm/model_executor/layers/quantization/
    fp8.py: Fp8LinearMethod.act_q_static, modelopt.py: ModelOptFp8Config (static input_scale),
    online/fp8.py: Fp8PerTensorOnlineMoEMethod (kFp8DynamicTensorSym).

    >>> per_tensor_activation_scales({"quant_method": "fp8", "activation_scheme": "static"})
    'static'
    >>> per_tensor_activation_scales(None)
    'dynamic'
    """
    qc = _as_dict(quantization_config) or {}
    scheme, _ = checkpoint_fp8_scheme(qc) if qc else ("", "")
    if scheme != "per_tensor":
        return "dynamic"
    method = str(qc.get("quant_method") or "")
    if method == "fp8":
        return "static" if qc.get("activation_scheme", "dynamic") == "static" else "dynamic"
    if method == "modelopt":
        return "static"
    for group in (qc.get("config_groups") or {}).values():
        acts = (group or {}).get("input_activations") or {}
        if (group or {}).get("weights", {}).get("num_bits") == 8:
            return "dynamic" if acts.get("dynamic") else "static"
    return "dynamic"


__all__ = ["FP8_SCHEMES", "checkpoint_fp8_scheme", "per_tensor_activation_scales"]
