"""Build the language model on the meta device from its config only (no weights, no remote code
unless asked), and check that nothing was materialized."""

from __future__ import annotations

import gc
import os
import warnings
from dataclasses import dataclass
from textwrap import shorten
from typing import Any

from ..core.errors import UsageError

#: model_type -> native model_type with the same layer layout. Applied only when transformers has
#: no native class for the type; the preview notes it.
MODEL_TYPE_ALIASES = {
    "kimi_k2": ("deepseek_v3", "Kimi-K2 uses DeepSeek-V3's layers (MLA + grouped-routing MoE)"),
}

#: Architecture suffixes that are not causal LMs (a config for these is a bad input).
_NOT_CAUSAL = ("ForMaskedLM", "ForSequenceClassification", "ForTokenClassification",
               "ForQuestionAnswering", "ForImageClassification", "ForSpeechSeq2Seq", "ForCTC",
               "ForAudioClassification", "ForMultipleChoice")


@dataclass(frozen=True)
class MetaBuild:
    """A model built on meta tensors and what was done to get it."""

    model: Any
    """The torch module (every parameter and buffer on the meta device)."""
    config: Any
    """The transformers config of the language model (the text config for multimodal wrappers)."""
    architecture: str
    """Class name of `model`."""
    notes: tuple[str, ...]
    """Aliases applied, towers dropped, ..."""


def _causal_mapping() -> dict[str, str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _image_text_mapping() -> dict[str, str]:
    """model_type -> the image-text-to-text wrapper class (Qwen2-VL, Qwen2.5-VL, ...): the way to
    build a VLM whose language model has no causal-LM class of its own."""
    from transformers.models.auto import modeling_auto

    return dict(getattr(modeling_auto, "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", {}))


#: auto_map entries whose code the meta build runs: the config class and the causal-LM class.
REMOTE_CODE_CLASSES = ("AutoConfig", "AutoModelForCausalLM")


def _remote_code_files(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """(auto_map entry, Python file) of the author's code config.json names. An entry such as
    "org/repo--module.Class" lives in another Hub repository and is not a local file."""
    auto_map = raw.get("auto_map")
    if not isinstance(auto_map, dict):
        return []
    out = []
    for entry in REMOTE_CODE_CLASSES:
        ref = auto_map.get(entry)
        if isinstance(ref, str) and "--" not in ref and "." in ref:
            out.append((entry, ref.rsplit(".", 1)[0].replace(".", "/") + ".py"))
    return out


def check_remote_code_present(raw: dict[str, Any], location: str) -> None:
    """Before transformers imports the author's code from a local folder: every file auto_map names
    is there, else one line naming the missing file (transformers would raise a traceback)."""
    if not os.path.isdir(location):
        return  # a Hub ID: transformers downloads the files
    files = _remote_code_files(raw)
    if not files:
        raise UsageError("--trust-remote-code", os.path.join(location, "config.json"),
                         "config.json has no auto_map naming the author's code (AutoConfig, AutoModelForCausalLM); "
                         "pass a config of a model type transformers supports")
    for entry, name in files:
        path = os.path.join(location, name)
        if not os.path.isfile(path):
            raise UsageError("--trust-remote-code", path, f"missing: config.json's auto_map names {name} for "
                             f"{entry}; copy the model's .py files beside config.json")


def _remote_config(location: str, revision: str | None):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(location, trust_remote_code=True, revision=revision)
    except Exception as e:  # the author's code failed to import or run: a bad input, not our bug
        raise UsageError("--trust-remote-code", location, f"the author's config code failed "
                         f"({type(e).__name__}: {str(e)[:160]}); check the model's .py files") from None


def make_config(raw: dict[str, Any], *, trust_remote_code: bool = False, location: str | None = None,
                revision: str | None = None):
    """transformers config object for `raw`, plus notes. Native classes first; remote code only
    when asked (then loaded from `location`, a folder or Hub ID holding the author's code)."""
    import transformers
    from transformers import CONFIG_MAPPING

    transformers.logging.set_verbosity_error()  # config-validation chatter is not for the preview
    notes: list[str] = []
    model_type = raw["model_type"]
    archs = raw.get("architectures") or []
    if archs and all(str(a).endswith(_NOT_CAUSAL) for a in archs):
        raise UsageError("config.json architectures", ",".join(archs),
                         "is not a causal LM; pass a decoder (…ForCausalLM) model config")
    if model_type not in CONFIG_MAPPING and model_type in MODEL_TYPE_ALIASES:
        native, why = MODEL_TYPE_ALIASES[model_type]
        notes.append(f"model_type {model_type} built as native {native}: {why} (alias table)")
        raw = {k: v for k, v in raw.items() if k not in ("auto_map", "model_type")}
        return _native_config(CONFIG_MAPPING[native], raw, native), notes
    if model_type not in CONFIG_MAPPING:
        if trust_remote_code and location:
            check_remote_code_present(raw, location)
            notes.append("config and model built from the author's remote code (--trust-remote-code)")
            return _remote_config(location, revision), notes
        raise UsageError("model_type", model_type,
                         f"transformers {transformers.__version__} has no native class for it; pass "
                         "--trust-remote-code to run the author's code, or a config of a supported model")
    raw = {k: v for k, v in raw.items() if k != "model_type"}
    if raw.get("auto_map") and not trust_remote_code:
        notes.append("config has auto_map; native transformers class used (no remote code)")
    return _native_config(CONFIG_MAPPING[model_type], raw, model_type), notes


def _native_config(config_class: Any, raw: dict[str, Any], model_type: str):
    """`config_class.from_dict(raw)`; the class's own validation refusing the values (e.g. a hidden
    size that is not a multiple of the heads) is one line naming what it says, not a traceback."""
    try:
        return config_class.from_dict(raw)
    except Exception as e:  # noqa: BLE001  (transformers' validators raise their own classes)
        cause = e.__cause__ if e.__cause__ is not None else e
        why = " ".join(str(cause).split())
        raise UsageError("config.json", f"model_type {model_type}",
                         f"transformers' {config_class.__name__} refuses these values ({why[:240]}); "
                         "fix the config") from None


def _text_config(cfg):
    """The language-model config of a multimodal wrapper, or `cfg` itself."""
    try:
        text = cfg.get_text_config()
    except Exception:
        text = getattr(cfg, "text_config", None) or cfg
    return text


def build_meta_model(raw: dict[str, Any], *, trust_remote_code: bool = False,
                     location: str | None = None, revision: str | None = None) -> MetaBuild:
    """Build the causal LM on `torch.device("meta")`; multimodal wrappers -> language model only."""
    import torch
    import transformers

    cfg, notes = make_config(raw, trust_remote_code=trust_remote_code, location=location, revision=revision)
    mapping = _causal_mapping()
    text = _text_config(cfg)
    build_cfg = cfg
    auto_class = "AutoModelForCausalLM"
    if text is not cfg:
        if text.model_type in mapping:
            build_cfg = text
            notes.append(f"multimodal config: language model only ({text.model_type}); vision/audio towers not built")
        else:
            if cfg.model_type not in mapping and cfg.model_type in _image_text_mapping():
                # e.g. Qwen2-VL / Qwen2.5-VL: the text model (qwen2_vl_text) has no causal-LM class;
                # build the wrapper on meta and plan only its language model (towers are skipped).
                auto_class = "AutoModelForImageTextToText"
            notes.append("multimodal wrapper built on meta; only its language model is planned "
                         "(vision/audio towers skipped)")
    elif cfg.model_type not in mapping and not (trust_remote_code and getattr(cfg, "auto_map", None)):
        raise UsageError("model_type", cfg.model_type,
                         "is not a causal LM in transformers (no AutoModelForCausalLM class); "
                         "pass a decoder LLM config")
    # Import and construction allocate many small objects; the cyclic GC would rescan them all
    # repeatedly (about a third of the wall time). Nothing here creates garbage cycles worth it.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.device("meta"), warnings.catch_warnings():
            # A zero-width layer (e.g. Qwen2-MoE's shared expert at intermediate size 0) is no GEMM
            # and is planned as none; torch's init warning about it would only be noise here.
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
            model = getattr(transformers, auto_class).from_config(build_cfg, trust_remote_code=trust_remote_code)
    except UsageError:
        raise
    except Exception as e:
        raise UsageError("model_type", cfg.model_type,
                         f"transformers could not build it on meta ({type(e).__name__}: {shorten(str(e), 160)}); "
                         "check the config values") from None
    finally:
        if was_enabled:
            gc.enable()
    assert_on_meta(model)
    lm_cfg = _text_config(getattr(model, "config", build_cfg))
    return MetaBuild(model, lm_cfg, type(model).__name__, tuple(notes))


def assert_on_meta(model) -> None:
    """Raise if any parameter or buffer holds real memory (the build must never materialize)."""
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if t.device.type != "meta":
            raise RuntimeError(f"{name} was materialized on {t.device}; the planner must build on meta only")


__all__ = ["MODEL_TYPE_ALIASES", "REMOTE_CODE_CLASSES", "MetaBuild", "check_remote_code_present", "make_config",
           "build_meta_model", "assert_on_meta"]
