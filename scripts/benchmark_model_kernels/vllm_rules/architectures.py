"""Which architectures vLLM serves with a model class of its own, and which it refuses.

In: a config's `architectures`. Out: one line saying why vLLM will not run this model with a native
class, or "" when it does (or this tool cannot tell). The tables restate the registry of vLLM 0.33.0
(vllm/model_executor/models/registry.py); `benchmarks/vllm_fidelity.py` and
`--cross_check vllm` check a plan against vLLM itself, where the answer is vLLM's own.
"""

from __future__ import annotations

from collections.abc import Iterable

#: vLLM release these tables restate.
REGISTRY_VERSION = "0.33.0"

#: Architectures vLLM 0.33.0 serves only through its generic Transformers backend
#: (vllm/model_executor/models/registry.py: _TRANSFORMERS_SUPPORTED_MODELS): the layers are
#: transformers' own modules under vLLM's tensor-parallel plan, not the vLLM classes these rules
#: follow.
TRANSFORMERS_BACKEND_ONLY = frozenset({
    "ArceeForCausalLM", "CwmForCausalLM", "Emu3ForConditionalGeneration", "FlexOlmoForCausalLM",
    "GPTBigCodeForCausalLM", "GPTNeoXForCausalLM", "GlmForCausalLM", "HunYuanDenseV1ForCausalLM",
    "HunYuanMoEV1ForCausalLM", "HunYuanVLForConditionalGeneration", "Jais2ForCausalLM", "Kolibri1ForCausalLM",
    "MellumForCausalLM", "NanbeigeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM", "OlmoForCausalLM",
    "PhiForCausalLM", "SeedOssForCausalLM", "SmolLM3ForCausalLM", "Starcoder2ForCausalLM",
    "VaultGemmaForCausalLM", "VibeVoiceAsrForConditionalGeneration",
})

#: Architectures vLLM dropped -> the last release that served them
#: (vllm/model_executor/models/registry.py: _PREVIOUSLY_SUPPORTED_MODELS).
DROPPED = {
    "AquilaForCausalLM": "0.24.0", "AquilaModel": "0.24.0", "ArcticForCausalLM": "0.28.0",
    "AyaVisionForConditionalGeneration": "0.24.0", "BaiChuanForCausalLM": "0.23.0",
    "BaichuanForCausalLM": "0.23.0", "BambaForCausalLM": "0.23.0", "ChameleonForConditionalGeneration": "0.28.0",
    "DonutForConditionalGeneration": "0.10.2", "Dots1ForCausalLM": "0.23.0", "Fairseq2LlamaForCausalLM": "0.28.0",
    "FuyuForCausalLM": "0.25.0", "Grok1ForCausalLM": "0.24.0", "Grok1ModelForCausalLM": "0.24.0",
    "HCXVisionForCausalLM": "0.28.0", "InternLM2VEForCausalLM": "0.23.0", "InternLMForCausalLM": "0.23.0",
    "JAISLMHeadModel": "0.22.0", "MPTForCausalLM": "0.28.0", "MantisForConditionalGeneration": "0.24.0",
    "MiniMaxForCausalLM": "0.23.0", "MiniMaxM1ForCausalLM": "0.23.0", "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxVL01ForConditionalGeneration": "0.23.0", "MllamaForConditionalGeneration": "0.10.2",
    "MotifForCausalLM": "0.10.2", "MptForCausalLM": "0.28.0", "OuroForCausalLM": "0.26.0",
    "PersimmonForCausalLM": "0.25.0", "Phi3SmallForCausalLM": "0.9.2", "Phi4FlashForCausalLM": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0", "Plamo2ForCausalLM": "0.26.0", "QWenLMHeadModel": "0.23.0",
    "QwenVLForConditionalGeneration": "0.23.0", "RWForCausalLM": "0.28.0", "StableLMEpochForCausalLM": "0.28.0",
    "Tarsier2ForConditionalGeneration": "0.23.0", "TarsierForConditionalGeneration": "0.24.0",
    "TeleChatForCausalLM": "0.25.0", "XverseForCausalLM": "0.23.0",
}


def vllm_refusal(architectures: Iterable[str]) -> str:
    """Why vLLM will not serve these architectures with a class of its own, or ""."""
    archs = [str(a) for a in architectures]
    for arch in archs:
        if arch in DROPPED:
            return (f"vLLM {REGISTRY_VERSION} no longer serves {arch} (last in vLLM {DROPPED[arch]}); "
                    "this plan follows no vLLM class")
    for arch in archs:
        if arch in TRANSFORMERS_BACKEND_ONLY:
            return (f"vLLM {REGISTRY_VERSION} has no native class for {arch}: it serves it only through its "
                    "generic Transformers backend, so these shapes follow vLLM's rules, not a vLLM model class")
    return ""


__all__ = ["REGISTRY_VERSION", "TRANSFORMERS_BACKEND_ONLY", "DROPPED", "vllm_refusal"]
