"""The process that asks vLLM which kernels it dispatches on one target GPU (run by `vllm_dispatch`).

`python -m benchmark_model_kernels.crosscheck.vllm_dispatch_child sm90` reads a request from stdin
(a config.json, the layouts and the quantizations to ask about, `vllm_dispatch.DispatchRequest`),
makes vLLM's platform answer as that GPU (`vllm_target_gpu.install_target_gpu`, before any of vLLM's
model code is imported), builds vLLM's model class on the meta device for each (quantization,
layout) as vLLM's loader does (the config's dtype as torch's default while it constructs: the
kernels' output dtype is read from it), and writes one JSON answer per layer kind to stdout: what
each layer's quantization method selected (its linear kernel, its MoE backend and experts class),
the activation quantization the kernel was set up for, and the vLLM function that chose. The
selection functions are wrapped to record their arguments and results, never to change them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Iterator

from .vllm_target_gpu import TARGET_GPUS, install_target_gpu

#: vLLM's kernel selection functions, by module: their calls are recorded (`_Recorder`).
SELECTION_FUNCTIONS = {
    "vllm.model_executor.kernels.linear": ("init_fp8_linear_kernel", "init_nvfp4_linear_kernel"),
    "vllm.model_executor.layers.fused_moe.oracle.fp8": ("select_fp8_moe_backend",),
    "vllm.model_executor.layers.fused_moe.oracle.nvfp4": ("select_nvfp4_moe_backend",),
    "vllm.model_executor.layers.fused_moe.oracle.unquantized": ("select_unquantized_moe_backend",),
}
#: Where each lives, as the answers cite it.
_SOURCE_FILE = {
    "init_fp8_linear_kernel": "vllm/model_executor/kernels/linear/__init__.py",
    "init_nvfp4_linear_kernel": "vllm/model_executor/kernels/linear/__init__.py",
    "select_fp8_moe_backend": "vllm/model_executor/layers/fused_moe/oracle/fp8.py",
    "select_nvfp4_moe_backend": "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
    "select_unquantized_moe_backend": "vllm/model_executor/layers/fused_moe/oracle/unquantized.py",
}
#: The quantization modules whose imports of the selection functions are wrapped.
_QUANT_MODULES = (
    "vllm.model_executor.layers.quantization.fp8",
    "vllm.model_executor.layers.quantization.modelopt",
    "vllm.model_executor.layers.quantization.online.base",
    "vllm.model_executor.layers.quantization.online.fp8",
    "vllm.model_executor.layers.quantization.online.nvfp4",
    "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors",
    "vllm.model_executor.layers.quantization.compressed_tensors.schemes.compressed_tensors_w8a8_fp8",
    "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe."
    "compressed_tensors_moe_w8a8_fp8",
    "vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method",
)


class _Recorder:
    """What the selection functions were asked and answered during one build."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget the previous build's calls (an experts class is the same object in every build)."""
        self.by_result: dict[int, str] = {}
        """id of a returned kernel object or experts class -> the function that chose it."""
        self.moe_keys: dict[int, tuple[Any, Any]] = {}
        """id of a chosen experts class -> the (weight, activation) QuantKeys it was chosen for."""
        self.kept: list[Any] = []
        """What was chosen, held so no id is reused within the build."""

    def wrap(self, name: str, fn: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            chosen = result[1] if isinstance(result, tuple) else result
            self.kept.append(chosen)
            self.by_result[id(chosen)] = name
            if "weight_key" in kwargs or len(args) >= 3:
                weight = kwargs.get("weight_key", args[1] if len(args) > 1 else None)
                act = kwargs.get("activation_key", args[2] if len(args) > 2 else None)
                self.moe_keys[id(chosen)] = (weight, act)
            return result

        recorded.__wrapped__ = fn  # type: ignore[attr-defined]
        return recorded


_RECORDER = _Recorder()


def _install_recorder() -> None:
    """Wrap each selection function wherever a quantization module imported it by name."""
    import importlib

    originals = {}
    for module_name, names in SELECTION_FUNCTIONS.items():
        module = importlib.import_module(module_name)
        for name in names:
            originals[id(getattr(module, name))] = (name, getattr(module, name))
    for module_name in _QUANT_MODULES:
        importlib.import_module(module_name)
    for module in list(sys.modules.values()):
        if not (getattr(module, "__name__", "") or "").startswith("vllm."):
            continue
        for attr, value in list(vars(module).items()):
            if id(value) in originals:
                name, fn = originals[id(value)]
                setattr(module, attr, _RECORDER.wrap(name, fn))


def _key_name(key: Any) -> str:
    """A QuantKey in vLLM's own words (vllm/config/quantization.py: QUANT_KEY_NAMES)."""
    if key is None:
        return ""
    from vllm.config.quantization import QUANT_KEY_NAMES

    return next((name for name, known in QUANT_KEY_NAMES.items() if known == key), str(key))


def _source(chosen: Any) -> str:
    name = _RECORDER.by_result.get(id(chosen), "")
    return f"{_SOURCE_FILE[name]}: {name}" if name else ""


def _linear_answer(mod: Any) -> dict[str, Any]:
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.utils import dispatch_unquantized_gemm

    qm = mod.quant_method
    holder = getattr(mod, "scheme", None) or qm
    kernel = getattr(holder, "fp8_linear", None) or getattr(holder, "kernel", None)
    if isinstance(qm, UnquantizedLinearMethod) or kernel is None:
        from vllm.config import get_current_vllm_config

        backend = get_current_vllm_config().kernel_config.linear_backend
        gemm = dispatch_unquantized_gemm(backend)
        tiers = [flag for flag in ("allow_specialized_router_gemm", "allow_fp32_router_gemm",
                                   "allow_bf16x3_router_gemm") if getattr(mod, flag, False)]
        detail = f"{type(mod).__name__} tiers: {', '.join(tiers)}" if tiers else ""
        return {"method": type(qm).__name__, "kernel": gemm.__name__, "detail": detail,
                "source": "vllm/model_executor/layers/utils.py: dispatch_unquantized_gemm"}
    config = getattr(kernel, "config", None)
    act = _key_name(getattr(config, "activation_quant_key", None))
    weight = _key_name(getattr(config, "weight_quant_key", None))
    return {"method": type(holder).__name__, "kernel": type(kernel).__name__,
            "activation_quant": act, "weight_quant": weight, "source": _source(kernel)}


def _moe_answer(mod: Any) -> dict[str, Any]:
    from enum import Enum

    qm = mod.quant_method
    backend = next((value for name, value in vars(qm).items() if name.endswith("_backend")
                    and isinstance(value, Enum)), None)
    experts = getattr(qm, "experts_cls", None)
    weight, act = _RECORDER.moe_keys.get(id(experts), (None, None))
    block = getattr(qm, "moe_block_shape", None) or getattr(qm, "weight_block_size", None)
    moe = mod.moe_config
    return {"method": type(qm).__name__, "kernel": str(backend) if backend is not None else type(qm).__name__,
            "detail": experts.__name__ if experts is not None else "",
            "activation_quant": _key_name(act), "weight_quant": _key_name(weight),
            "block": list(block) if block else [], "source": _source(experts),
            "intermediate_per_rank": int(moe.intermediate_size_per_partition), "hidden": int(moe.hidden_dim)}


def _kind(path: str, mod: Any) -> str:
    """"moe", "router", "lm_head", "gemm" or "" (not a GEMM layer) of one module."""
    from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
    from vllm.model_executor.layers.fused_moe.router.gate_linear import GateLinear
    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    if isinstance(mod, RoutedExperts):
        return "moe"
    if isinstance(mod, ParallelLMHead):
        return "lm_head"
    if isinstance(mod, GateLinear) or (isinstance(mod, LinearBase) and path.rsplit(".", 1)[-1] in ("gate", "router")):
        return "router"
    return "gemm" if isinstance(mod, LinearBase) else ""


def read_answers(model: Any) -> list[dict[str, Any]]:
    """One answer per (layer kind, distinct selection) of a built model, naming its layers."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for path, mod in model.named_modules():
        kind = _kind(path, mod)
        if not kind or getattr(mod, "quant_method", None) is None:
            continue
        if kind == "moe":
            answer = _moe_answer(mod)
        elif kind == "lm_head":
            answer = {"method": type(mod.quant_method).__name__, "kernel": type(mod.quant_method).__name__}
        else:
            answer = _linear_answer(mod)
        answer["kind"] = kind
        key = (kind, json.dumps(answer, sort_keys=True))
        layer = ".".join(p for p in path.split(".") if not p.isdigit()).removeprefix("model.")
        entry = merged.setdefault(key, {**answer, "layers": []})
        if layer not in entry["layers"]:
            entry["layers"].append(layer)
    return list(merged.values())


@contextlib.contextmanager
def _config_folder(raw: dict[str, Any]) -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="vllm-dispatch-")
    try:
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(raw, f)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _build_and_read(raw: dict[str, Any], shorthand: str, tp: int, ep: int) -> list[dict[str, Any]]:
    """vLLM's model for `raw` at TP=`tp`, DP=`ep`/`tp` (EP on when `ep` > 1), built on meta as
    vLLM's loader builds it (vllm/model_executor/model_loader/base_loader.py: load_model, under
    set_default_torch_dtype), and its answers."""
    import torch
    from vllm.config import (
        CacheConfig,
        CompilationConfig,
        LoadConfig,
        ModelConfig,
        ParallelConfig,
        PassConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.model_executor.model_loader.utils import get_model_architecture, initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    from .vllm_build import (
        _fake_groups,
        _model_level_window,
        _scalar_activations_on_cpu,
        _transformers_registry_restored,
    )

    dp = ep // tp if ep > 1 else 1
    _RECORDER.clear()
    with _config_folder(raw) as folder, _transformers_registry_restored():
        model_config = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True, dtype="bfloat16",
                                   enforce_eager=True, quantization=shorthand or None)
        parallel = ParallelConfig(tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep > 1)
        # The all-reduce fusion pass sizes itself from compiled ops at config time; it selects no kernel.
        compilation = CompilationConfig(pass_config=PassConfig(fuse_allreduce_rms=False))
        vllm_config = VllmConfig(model_config=model_config, parallel_config=parallel,
                                 cache_config=CacheConfig(sliding_window=_model_level_window(model_config)),
                                 load_config=LoadConfig(load_format="dummy"), compilation_config=compilation)
        with _fake_groups(tp, dp, ep), _scalar_activations_on_cpu(), set_current_vllm_config(vllm_config):
            model_class, _ = get_model_architecture(model_config)
            with set_default_torch_dtype(model_config.dtype), torch.device("meta"):
                model = initialize_model(vllm_config=vllm_config, model_class=model_class)
            return read_answers(model)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {text[:300]}"


def answer_request(gpu: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every answer for one target GPU: per quantization and layout, per layer kind."""
    out: list[dict[str, Any]] = []
    for question in request["questions"]:
        raw = dict(request["config"])
        raw.pop("quantization_config", None)
        if question.get("config"):
            raw["quantization_config"] = question["config"]
        if request.get("max_layers"):
            raw["num_hidden_layers"] = min(int(raw.get("num_hidden_layers") or 1), int(request["max_layers"]))
        for tp, ep in request["layouts"]:
            where = {"gpu": gpu, "quantization": question["name"], "tp": tp, "ep": ep,
                     "architecture": (raw.get("architectures") or [""])[0]}
            try:
                answers = _build_and_read(raw, question.get("shorthand", ""), tp, ep)
            except Exception as e:  # vLLM refuses this quantization or layout on this GPU
                out.append({**where, "kind": "", "refused": _one_line(e)})
                continue
            out.extend({**where, **answer} for answer in answers)
    return out


def main(argv: list[str]) -> int:
    """`vllm_dispatch_child <gpu>`: request JSON on stdin, answers JSON on stdout."""
    if len(argv) != 1 or argv[0] not in TARGET_GPUS:
        print(f"usage: vllm_dispatch_child {{{','.join(TARGET_GPUS)}}} < request.json", file=sys.stderr)
        return 2
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    request = json.load(sys.stdin)
    answers_out, sys.stdout = sys.stdout, sys.stderr  # what vLLM prints goes to stderr
    try:
        install_target_gpu(TARGET_GPUS[argv[0]])
        _install_recorder()
        answers = answer_request(argv[0], request)
    finally:
        sys.stdout = answers_out
    json.dump({"vllm": _vllm_version(), "answers": answers}, sys.stdout)
    return 0


def _vllm_version() -> str:
    from importlib.metadata import version

    return version("vllm")


__all__ = ["SELECTION_FUNCTIONS", "answer_request", "read_answers", "main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
