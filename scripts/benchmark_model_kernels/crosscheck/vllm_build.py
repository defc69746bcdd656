"""Build vLLM's model class for a config on the meta device, as one rank of a TP/DP/EP layout.

vLLM's layers read their parallel sizes from the process groups of
vllm/distributed/parallel_state.py (`get_tp_group().world_size`, `get_dp_group()`, `get_ep_group()`)
and from `ParallelConfig` (tensor_parallel_size, data_parallel_size, enable_expert_parallel, which
decide `use_sequence_parallel_moe`). Both are set here for rank 0 of the layout without starting any
process group: the group objects only answer their size and rank, which is all a model's
`__init__` asks. The model is built by vLLM's own `initialize_model`
(vllm/model_executor/model_loader/utils.py) inside `torch.device("meta")`, so no weight is
allocated, from a copy of config.json without `quantization_config` (the plan's shapes are the
logical BF16 ones). Remote code runs only when the caller asks for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

from ..core.errors import UsageError
from .vllm_platform import TargetGpu, class_for_target, cuda_construction

#: The vLLM release the rules in vllm_rules/ follow and the fidelity table was made with.
VLLM_VERSION_FOLLOWED = "0.33.0"

INSTALL_HINT = (f"install vLLM in its own venv: python3 -m venv venv-vllm && venv-vllm/bin/pip install "
                f"vllm=={VLLM_VERSION_FOLLOWED} (CPU is enough; about 6 GB), then run this command with "
                "venv-vllm/bin/python and PYTHONPATH=scripts (or pip install -e . into that venv)")

#: The parallel-state globals a model's __init__ reads, with the size each gets (see `_fake_groups`).
_GROUPS = ("_WORLD", "_TP", "_PP", "_DP", "_EP", "_EPLB", "_PCP", "_DCP")


class VllmRefused(Exception):
    """vLLM will not build this model at this layout; the message says why in one line."""


class VllmBuildProblem(Exception):
    """vLLM's class could not be built on this machine (an import or a constructor that needs what
    a CPU lacks): no verdict on the plan. The message says why in one line."""


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def require_vllm() -> str:
    """The installed vLLM version, or a one-line UsageError saying how to install it."""
    if not vllm_available():
        raise UsageError("--cross_check", "vllm", f"vLLM is not importable in this Python; {INSTALL_HINT}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        import vllm

        return str(getattr(vllm, "__version__", "unknown"))


class _ProcessGroup:
    """What model code asks of `group.device_group` / `cpu_group`: its size and this rank."""

    def __init__(self, size: int):
        self._size = size

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return 0


class _Group:
    """Rank 0 of a vLLM GroupCoordinator of `size` ranks, without communication."""

    def __init__(self, size: int):
        self.world_size = size
        self.rank_in_group = self.rank = self.local_rank = 0
        self.ranks = list(range(size))
        self.is_first_rank = self.is_last_rank = True
        self.device_group = self.cpu_group = _ProcessGroup(size)


@contextlib.contextmanager
def _fake_groups(tp: int, dp: int, ep: int) -> Iterator[None]:
    """vLLM's parallel-state globals set to rank 0 of TP x DP (EP = DP x TP with expert parallelism,
    else the TP group: vllm/distributed/parallel_state.py: initialize_model_parallel), restored after."""
    import vllm.distributed.parallel_state as ps

    sizes = {"_WORLD": tp * dp, "_TP": tp, "_PP": 1, "_DP": dp, "_EP": ep if ep > 1 else tp, "_EPLB": 1,
             "_PCP": 1, "_DCP": 1}
    saved = {name: getattr(ps, name, None) for name in _GROUPS}
    try:
        for name in _GROUPS:
            setattr(ps, name, _Group(sizes[name]))
        yield
    finally:
        for name, value in saved.items():
            setattr(ps, name, value)


@contextlib.contextmanager
def _gpu_kernel_checks() -> Iterator[None]:
    """vLLM's CPU platform refuses what a GPU runs where it lacks CPU kernels, not for the shapes:
    non-gated fused MoE (vllm/model_executor/layers/fused_moe/config.py:
    FusedMoEConfig.__post_init__, `is_act_and_mul=False is supported only for CUDA`, and
    vllm/model_executor/layers/fused_moe/oracle/unquantized.py: select_unquantized_moe_backend,
    which finds no CPU kernel for it) and sparse attention (vllm/platforms/cpu.py:
    CpuPlatform.get_attn_backend_cls). While building on meta the first check sees a CUDA-like
    platform, the expert kernel is left to be chosen later (vLLM's out-of-tree answer; the weights
    `create_weights` allocates do not depend on it), and sparse attention gets the CPU's MLA
    backend (an attention backend holds no GEMM weight). Nothing else changes."""
    import vllm.model_executor.layers.fused_moe.config as moe_config
    import vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method as moe_method
    from vllm.model_executor.layers.fused_moe.oracle.unquantized import UnquantizedMoeBackend
    from vllm.platforms.cpu import CpuPlatform

    real_platform = moe_config.current_platform
    real_backend = CpuPlatform.__dict__["get_attn_backend_cls"]
    real_select = moe_method.select_unquantized_moe_backend

    class _CudaLike:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_platform, name)

        def is_cuda_alike(self) -> bool:
            return True

    def dense_backend(cls: Any, selected_backend: Any, attn_selector_config: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(attn_selector_config, "use_sparse", False):
            attn_selector_config = attn_selector_config._replace(use_sparse=False)
        return real_backend.__func__(cls, selected_backend, attn_selector_config, *args, **kwargs)

    def any_expert_kernel(*args: Any, **kwargs: Any) -> Any:
        try:
            return real_select(*args, **kwargs)
        except NotImplementedError:
            return UnquantizedMoeBackend.OOT, None

    moe_config.current_platform = _CudaLike()
    CpuPlatform.get_attn_backend_cls = classmethod(dense_backend)  # type: ignore[method-assign]
    moe_method.select_unquantized_moe_backend = any_expert_kernel
    try:
        yield
    finally:
        moe_config.current_platform = real_platform
        moe_method.select_unquantized_moe_backend = real_select
        CpuPlatform.get_attn_backend_cls = real_backend  # type: ignore[method-assign]


@contextlib.contextmanager
def _scalar_activations_on_cpu() -> Iterator[None]:
    """vLLM's xIELU activation reads its two init scalars back with `.item()` in `__init__`
    (vllm/model_executor/layers/activation.py: XIELU.__init__, `_beta_scalar`), which a meta tensor
    cannot answer (Apertus). Its four one-element parameters and buffers are made on the CPU
    instead; they are no GEMM weight and stay far under OFF_META_LIMIT."""
    import torch
    from vllm.model_executor.layers import activation

    real_init = activation.XIELU.__init__

    def init_on_cpu(self: Any, *args: Any, **kwargs: Any) -> None:
        with torch.device("cpu"):
            real_init(self, *args, **kwargs)

    activation.XIELU.__init__ = init_on_cpu  # type: ignore[method-assign]
    try:
        yield
    finally:
        activation.XIELU.__init__ = real_init  # type: ignore[method-assign]


@contextlib.contextmanager
def _transformers_classes_restored(raw: dict[str, Any]) -> Iterator[None]:
    """vLLM's generic Transformers backend decorates the transformers model class it wraps for
    torch.compile in place (vllm/model_executor/models/transformers/base.py:
    _decorate_cls_for_torch_compile -> vllm/compilation/decorators.py: _support_torch_compile adds a
    base class and replaces `__init__` and `__call__`), so a transformers build of that class later
    in the same process asks for vLLM's current config and fails. The classes of the config's
    transformers modeling module are put back as they were when the build ends."""
    import torch
    import transformers

    modules = []
    for arch in raw.get("architectures") or []:
        try:
            cls = getattr(transformers, str(arch), None)
        except Exception:  # noqa: BLE001  (a lazy import that fails: nothing of it to restore)
            cls = None
        module = sys.modules.get(getattr(cls, "__module__", "")) if isinstance(cls, type) else None
        if module is not None and module not in modules:
            modules.append(module)
    saved = [(c, c.__bases__, dict(c.__dict__)) for module in modules for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, torch.nn.Module) and c.__module__ == module.__name__]
    try:
        yield
    finally:
        for c, bases, attrs in saved:
            if c.__bases__ != bases:
                c.__bases__ = bases
            for key in [k for k in c.__dict__ if k not in attrs]:
                delattr(c, key)
            for key, value in attrs.items():
                if c.__dict__.get(key) is not value and key not in ("__dict__", "__weakref__", "__doc__"):
                    setattr(c, key, value)


@contextlib.contextmanager
def _transformers_registry_restored() -> Iterator[None]:
    """vLLM registers its own config classes with transformers while it parses a config
    (vllm/transformers_utils/config.py: _register_config_class: `AutoConfig.register(model_type,
    cls, exist_ok=True)` and `cls.model_type = model_type`; e.g. deepseek_v32 -> DeepseekV3Config).
    A plan made in the same process afterwards would build another transformers class, so both
    changes are undone when the build ends."""
    import vllm.transformers_utils.config as vllm_hf_config
    from transformers import CONFIG_MAPPING

    extra = CONFIG_MAPPING._extra_content  # noqa: SLF001  (the registry AutoConfig.register fills)
    saved = dict(extra)
    real_register = vllm_hf_config._register_config_class  # noqa: SLF001
    classes: list[tuple[type, object]] = []
    missing = object()

    def register(model_type: str, config_class: type) -> None:
        classes.append((config_class, config_class.__dict__.get("model_type", missing)))
        real_register(model_type, config_class)

    vllm_hf_config._register_config_class = register  # noqa: SLF001
    try:
        yield
    finally:
        vllm_hf_config._register_config_class = real_register  # noqa: SLF001
        for cls, old in reversed(classes):
            if old is missing:
                with contextlib.suppress(AttributeError):
                    delattr(cls, "model_type")
            else:
                cls.model_type = old
        extra.clear()
        extra.update(saved)


def _quiet_imports() -> None:
    """vLLM and torch log platform chatter (no CUDA, no Triton) at import; the diff is the output."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    for name in ("torch", "vllm"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _unquantized(raw: dict[str, Any]) -> dict[str, Any]:
    """config.json without quantization_config (also inside text_config): vLLM then builds the
    unquantized layers whose weights have the logical shapes the plan lists."""
    out = {k: v for k, v in raw.items() if k != "quantization_config"}
    for key in ("text_config", "language_config", "llm_config"):
        if isinstance(out.get(key), dict):
            out[key] = {k: v for k, v in out[key].items() if k != "quantization_config"}
    return out


@contextlib.contextmanager
def _config_folder(raw: dict[str, Any], code_dir: str | None) -> Iterator[str]:
    """A temporary folder holding the unquantized config.json (and, for remote code, the author's
    .py files from `code_dir`)."""
    folder = tempfile.mkdtemp(prefix="vllm-crosscheck-")
    try:
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(_unquantized(raw), f)
        if code_dir and os.path.isdir(code_dir):
            for name in os.listdir(code_dir):
                if name.endswith(".py"):
                    shutil.copy(os.path.join(code_dir, name), folder)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class VllmBuild:
    """vLLM's model for one rank, on meta, and how it was built."""

    model: Any
    """The torch module vLLM's `initialize_model` returned (every parameter on meta)."""
    architecture: str
    """The architecture vLLM resolved for the config's architectures (its registry key)."""
    model_class: str
    """The class built, module and name (for a platform-split family, its CUDA class)."""
    platform: str
    """The platform the class is vLLM's for (`vllm_platform.BuiltClass.platform`)."""
    version: str
    """The vLLM version that built it."""
    sequence_parallel_moe: bool
    """vLLM's `ParallelConfig.use_sequence_parallel_moe` at this layout."""
    text_config: Any = None
    """The language model's Hugging Face config as vLLM read it (`ModelConfig.hf_text_config`)."""


#: Bytes of parameters off the meta device a build may hold: vLLM allocates a few small norm weights
#: on an explicit device (vllm/model_executor/layers/layernorm.py: RMSNormGated in GatedDeltaNet).
OFF_META_LIMIT = 64 << 20


def _check_on_meta(model: Any) -> None:
    """No GEMM or expert weight materialized, and next to nothing else."""
    from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
    from vllm.model_executor.layers.linear import LinearBase

    off = 0
    for path, mod in model.named_modules():
        for name, p in mod.named_parameters(recurse=False):
            if p.device.type == "meta":
                continue
            if isinstance(mod, (LinearBase, RoutedExperts)):
                raise RuntimeError(f"vLLM materialized the weight {path}.{name} while building on meta")
            off += p.numel() * p.element_size()
    if off > OFF_META_LIMIT:
        raise RuntimeError(f"vLLM materialized {off >> 20} MiB of parameters while building on meta")


def _one_line(e: BaseException, folder: str) -> str:
    """vLLM's error as one short line, the temporary config folder named as such."""
    text = " ".join(str(e).replace(folder, "<config folder>").split()) or type(e).__name__
    first = re.split(r"(?<=[.!?]) ", re.sub(r"^\d+ validation errors? for \w+ Value error, ", "", text))[0]
    return f"{type(e).__name__}: {first[:240]}"


def _model_level_window(model_config: Any) -> int | None:
    """The model-level sliding window vLLM's engine puts in CacheConfig, which every `Attention`
    without a per-layer window takes: the config's sliding_window when it has no layer_types or
    all of them are sliding (vllm/engine/arg_utils.py: EngineArgs.create_engine_config)."""
    layer_types = getattr(model_config.hf_text_config, "layer_types", None)
    if layer_types is None or all(t == "sliding_attention" for t in layer_types):
        return model_config.get_sliding_window()
    return None


@contextlib.contextmanager
def build_vllm_model(raw: dict[str, Any], tp: int, ep: int, *, trust_remote_code: bool = False,
                     code_dir: str | None = None, gpu: TargetGpu | None = None) -> Iterator[VllmBuild]:
    """vLLM's model class for config.json `raw`, built on meta as rank 0 of TP=`tp`, DP=`ep`/`tp`
    (expert parallelism on when `ep` > 1): the class vLLM builds on CUDA for `gpu`
    (`vllm_platform.class_for_target`; an architecture vLLM serves through its generic Transformers
    backend builds that backend's class). `VllmRefused` when vLLM rejects the config or the layout
    (its config validation, or a size check of its layers: one line); `VllmBuildProblem` when the
    class cannot be imported or constructed here for another reason. The parallel state is faked
    only while the context is open."""
    version = require_vllm()
    _quiet_imports()
    import torch
    from vllm.config import CacheConfig, LoadConfig, ModelConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.model_loader.utils import get_model_architecture, initialize_model

    dp = ep // tp if ep > 1 else 1
    with _config_folder(raw, code_dir if trust_remote_code else None) as folder, _transformers_registry_restored(), \
            _transformers_classes_restored(raw):
        try:
            # max_model_len is left to vLLM (the config's max_position_embeddings): no layer's
            # shape depends on it, and a fixed value above a config's limit is refused
            # (vllm/config/model.py: _get_and_verify_max_len).
            model_config = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True,
                                       trust_remote_code=trust_remote_code, dtype="bfloat16",
                                       enforce_eager=True)
            parallel = ParallelConfig(tensor_parallel_size=tp, data_parallel_size=dp,
                                      enable_expert_parallel=ep > 1)
            vllm_config = VllmConfig(model_config=model_config, parallel_config=parallel,
                                     cache_config=CacheConfig(sliding_window=_model_level_window(model_config)),
                                     load_config=LoadConfig(load_format="dummy"))
        except Exception as e:  # vLLM's config validation: the config or layout is refused
            raise VllmRefused(f"vLLM {version} rejects the config: {_one_line(e, folder)}") from None
        with _fake_groups(tp, dp, ep), _gpu_kernel_checks(), _scalar_activations_on_cpu(), \
                set_current_vllm_config(vllm_config):
            try:
                model_class, arch = get_model_architecture(model_config)
            except Exception as e:
                raise VllmRefused(f"vLLM {version} has no model class for it: {_one_line(e, folder)}") from None
            try:
                built = class_for_target(arch, model_class, gpu)
            except Exception as e:
                raise VllmBuildProblem(f"vLLM {version} cannot import its CUDA class for {arch} on this machine: "
                                       f"{_one_line(e, folder)}") from None
            try:
                with torch.device("meta"), cuda_construction(built, gpu):
                    model = initialize_model(vllm_config=vllm_config, model_class=built.model_class)
            except (AssertionError, ValueError) as e:  # vLLM's layers check sizes this way: refused
                raise VllmRefused(f"vLLM {version} {built.model_class.__name__} refuses TP={tp} EP={ep}: "
                                  f"{_one_line(e, folder)}") from None
            except Exception as e:  # anything else is this machine's, not the layout's
                raise VllmBuildProblem(f"vLLM {version} {built.model_class.__name__} could not be constructed on "
                                       f"this machine: {_one_line(e, folder)}") from None
            try:
                _check_on_meta(model)
            except RuntimeError as e:
                raise VllmBuildProblem(f"vLLM {version} {built.model_class.__name__}: {e}") from None
            yield VllmBuild(model, arch, built.name, built.platform, version,
                            bool(parallel.use_sequence_parallel_moe), model_config.hf_text_config)


__all__ = ["VLLM_VERSION_FOLLOWED", "INSTALL_HINT", "VllmRefused", "VllmBuildProblem", "VllmBuild", "vllm_available",
           "require_vllm", "build_vllm_model"]
