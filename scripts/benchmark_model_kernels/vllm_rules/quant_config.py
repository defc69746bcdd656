"""The FP8 scheme vLLM runs a checkpoint with, read from its `quantization_config`.

FP8 is three different kernels depending on how scales are laid out, so "FP8" in a report means
the scheme of the checkpoint being served:

- `per_tensor`: one scale per weight tensor, activations quantized with one scale per tensor
  (static from the checkpoint, or dynamic). vLLM's `--quantization fp8` on a BF16 checkpoint
  (online quantization) gives this too (vllm/model_executor/layers/quantization/fp8.py:
  Fp8Config, Fp8LinearMethod without weight_block_size).
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

_ONLINE = ("no quantization_config: vLLM's online --quantization fp8 quantizes a BF16 checkpoint "
           "per tensor (vllm/model_executor/layers/quantization/fp8.py: Fp8Config)")


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


__all__ = ["FP8_SCHEMES", "checkpoint_fp8_scheme"]
