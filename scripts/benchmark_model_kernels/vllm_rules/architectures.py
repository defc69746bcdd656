"""Which architectures vLLM serves with a model class of its own, and which it refuses.

In: a config's `architectures`. Out: one line saying why vLLM will not run this model with a native
class, or "" when it does (or this tool cannot tell). The tables restate the registry of vLLM 0.33.0
(vllm/model_executor/models/registry.py); `benchmarks/vllm_fidelity.py` and
`--cross_check vllm` check a plan against vLLM itself, where the answer is vLLM's own.
"""

from __future__ import annotations

from collections.abc import Iterable

#: vLLM release these tables restate; `benchmarks/vllm_fidelity.py --registry_tables` prints them from
#: the installed vLLM (paste them here after an upgrade).
REGISTRY_VERSION = "0.33.0"

#: Causal-LM and multimodal architectures vLLM serves with a model class of its own
#: (vllm/model_executor/models/registry.py: _TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS).
NATIVE = frozenset({
    "AXK1ForCausalLM", "AfmoeForCausalLM", "AliceAIForCausalLM", "Alpamayo2Super", "ApertusForCausalLM",
    "AriaForConditionalGeneration", "AudioFlamingo3ForConditionalGeneration", "BagelForConditionalGeneration",
    "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "BeamForCausalLM", "BeeForConditionalGeneration",
    "Blip2ForConditionalGeneration", "BloomForCausalLM", "ChatGLMForConditionalGeneration", "ChatGLMModel",
    "Cohere2ForCausalLM", "Cohere2MoeForCausalLM", "Cohere2VisionForConditionalGeneration",
    "CohereAsrForConditionalGeneration", "CohereCompassForConditionalGeneration", "CohereForCausalLM",
    "Cosmos3EdgeForConditionalGeneration", "Cosmos3ForConditionalGeneration", "DbrxForCausalLM",
    "DeciLMForCausalLM", "DeepseekForCausalLM", "DeepseekOCR2ForCausalLM", "DeepseekOCRForCausalLM",
    "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV41ForCausalLM",
    "DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration", "DeepseekVLV2ForCausalLM",
    "DiffusionGemmaForBlockDiffusion", "DomynEdgeForCausalLM", "DoryForCausalLM", "Dots3NoteForCausalLM",
    "DotsOCRForCausalLM", "Eagle2_5_VLForConditionalGeneration", "Ernie4_5ForCausalLM", "Ernie4_5_MoeForCausalLM",
    "Ernie4_5_VLMoeForConditionalGeneration", "Exaone4ForCausalLM", "Exaone4_5_ForConditionalGeneration",
    "ExaoneForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "FalconForCausalLM", "FalconH1ForCausalLM",
    "FalconMambaForCausalLM", "FireRedASR2ForConditionalGeneration", "FlintForCausalLM",
    "FunASRForConditionalGeneration", "FunAudioChatForConditionalGeneration", "GLM4VForCausalLM", "GPT2LMHeadModel",
    "GPTJForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
    "Gemma4UnifiedForConditionalGeneration", "GemmaForCausalLM", "Glm4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
    "Glm5NextForCausalLM", "Glm5NextForConditionalGeneration", "GlmAsrForConditionalGeneration",
    "GlmMoeDsaForCausalLM", "GlmOcrForConditionalGeneration", "GptOssForCausalLM",
    "Granite4VisionForConditionalGeneration", "GraniteForCausalLM", "GraniteMoeForCausalLM",
    "GraniteMoeHybridForCausalLM", "GraniteMoeSWAForCausalLM", "GraniteMoeSharedForCausalLM",
    "GraniteSWAForCausalLM", "GraniteSpeechForConditionalGeneration", "GraniteSpeechPlusForConditionalGeneration",
    "H2OVLChatModel", "HCXVisionV2ForCausalLM", "HYV3ForCausalLM", "HYV4ForCausalLM", "HfMoondream",
    "HrmTextForCausalLM", "HyperCLOVAXForCausalLM", "IQuestCoderForCausalLM", "IQuestLoopCoderForCausalLM",
    "Idefics3ForConditionalGeneration", "InklingForCausalLM", "InklingForConditionalGeneration",
    "InternLM2ForCausalLM", "InternLM3ForCausalLM", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternVLChatModel", "InternVLForConditionalGeneration",
    "IsaacForConditionalGeneration", "JambaForCausalLM", "K2HorizonForCausalLM", "KananaVForConditionalGeneration",
    "KeyeForConditionalGeneration", "KeyeVL1_5ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiLinearForCausalLM", "KimiVLForConditionalGeneration", "LLaMAForCausalLM",
    "LagunaForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Lfm2VlForConditionalGeneration",
    "LightOnOCRForConditionalGeneration", "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "LlamaForCausalLM",
    "Llama_Nemotron_Nano_VL", "LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration",
    "LlavaNextVideoForConditionalGeneration", "LlavaOnevision2ForConditionalGeneration",
    "LlavaOnevisionForConditionalGeneration", "LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM",
    "Mamba2ForCausalLM", "MambaForCausalLM", "MiDashengLMModel", "MiMoForCausalLM", "MiMoV2FlashForCausalLM",
    "MiMoV2ForCausalLM", "MiMoV2OmniForCausalLM", "MiniCPM3ForCausalLM", "MiniCPMForCausalLM", "MiniCPMO",
    "MiniCPMOcrForConditionalGeneration", "MiniCPMV", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "MiniMaxM2ForCausalLM", "MiniMaxM3SparseForCausalLM",
    "MiniMaxM3SparseForConditionalGeneration", "Ministral3ForCausalLM", "Mistral3ForConditionalGeneration",
    "MistralForCausalLM", "MistralLarge3ForCausalLM", "MixtralForCausalLM", "Molmo2ForConditionalGeneration",
    "MolmoForCausalLM", "Moondream3ForCausalLM", "MoonshotKimiaForCausalLM", "MossAudioModel",
    "MossTranscribeDiarizeForConditionalGeneration", "MuseGlimmerForCausalLM",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration", "NVLM_D", "NemotronForCausalLM",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3",
    "NemotronParseForConditionalGeneration", "OPTForCausalLM", "OlmoHybridForCausalLM", "OlmoeForCausalLM",
    "OpenCUAForConditionalGeneration", "OpenPanguVLForConditionalGeneration", "OpenVLAForActionPrediction",
    "OrionForCausalLM", "Ovis", "Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM",
    "PaddleOCRVLForConditionalGeneration", "PaliGemmaForConditionalGeneration", "PanguEmbeddedForCausalLM",
    "PanguProMoEV2ForCausalLM", "PanguUltraMoEForCausalLM", "Param2MoEForCausalLM", "Phi3ForCausalLM",
    "Phi3VForCausalLM", "Phi4ForCausalLMV", "Phi4MMForCausalLM", "PhiMoEForCausalLM",
    "PixtralForConditionalGeneration", "Plamo3ForCausalLM", "QianfanOCRForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM",
    "Qwen2VLForConditionalGeneration", "Qwen2_5OmniForConditionalGeneration", "Qwen2_5OmniModel",
    "Qwen2_5_VLForConditionalGeneration", "Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration",
    "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen3OmniMoeForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForCausalLM",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForCausalLM", "Qwen4ExpForConditionalGeneration", "RForConditionalGeneration",
    "RadioMBartPrefixForCausalLM", "Rnj1ForCausalLM", "SarvamMLAForCausalLM", "SarvamMoEForCausalLM",
    "SkyworkR1VChatModel", "SmolVLMForConditionalGeneration", "SolarForCausalLM", "StableLmForCausalLM",
    "Step1ForCausalLM", "Step3TextForCausalLM", "Step3VLForConditionalGeneration", "Step3p5ForCausalLM",
    "Step3p7ForConditionalGeneration", "Step5ForCausalLM", "Step5ForConditionalGeneration",
    "StepVLForConditionalGeneration", "TeleChat2ForCausalLM", "TeleChat3ForCausalLM", "TeleFLMForCausalLM",
    "UltravoxModel", "UnlimitedOCRForCausalLM", "VoxtralForConditionalGeneration", "VoxtralRealtimeGeneration",
    "WhisperForConditionalGeneration", "Zamba2ForCausalLM",
})

#: Architectures vLLM serves only through its generic Transformers backend
#: (vllm/model_executor/models/registry.py: _TRANSFORMERS_SUPPORTED_MODELS): the layers are
#: transformers' own modules under vLLM's tensor-parallel plan, not the vLLM classes these rules
#: follow.
TRANSFORMERS_BACKEND_ONLY = frozenset({
    "ArceeForCausalLM", "CwmForCausalLM", "Emu3ForConditionalGeneration", "FlexOlmoForCausalLM",
    "GPTBigCodeForCausalLM", "GPTNeoXForCausalLM", "GlmForCausalLM", "HunYuanDenseV1ForCausalLM",
    "HunYuanMoEV1ForCausalLM", "HunYuanVLForConditionalGeneration", "Jais2ForCausalLM", "Kolibri1ForCausalLM",
    "MellumForCausalLM", "NanbeigeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM", "OlmoForCausalLM",
    "PhiForCausalLM", "SeedOssForCausalLM", "SmolLM3ForCausalLM", "Starcoder2ForCausalLM", "VaultGemmaForCausalLM",
    "VibeVoiceAsrForConditionalGeneration",
})

#: Architectures vLLM dropped -> the last release that served them
#: (vllm/model_executor/models/registry.py: _PREVIOUSLY_SUPPORTED_MODELS).
DROPPED = {
    "AquilaForCausalLM": "0.24.0", "AquilaModel": "0.24.0", "ArcticForCausalLM": "0.28.0",
    "AyaVisionForConditionalGeneration": "0.24.0", "BaiChuanForCausalLM": "0.23.0", "BaichuanForCausalLM": "0.23.0",
    "BambaForCausalLM": "0.23.0", "ChameleonForConditionalGeneration": "0.28.0", "Cheers": "0.28.0",
    "CheersForConditionalGeneration": "0.28.0", "DonutForConditionalGeneration": "0.10.2", "Dots1ForCausalLM":
    "0.23.0", "ErnieForSequenceClassification": "0.23.0", "ErnieForTokenClassification": "0.23.0", "ErnieModel":
    "0.23.0", "Fairseq2LlamaForCausalLM": "0.28.0", "FireRedLIDForConditionalGeneration": "0.28.0",
    "FuyuForCausalLM": "0.25.0", "GritLM": "0.28.0", "Grok1ForCausalLM": "0.24.0", "Grok1ModelForCausalLM":
    "0.24.0", "HCXVisionForCausalLM": "0.28.0", "InternLM2VEForCausalLM": "0.23.0", "InternLMForCausalLM": "0.23.0",
    "JAISLMHeadModel": "0.22.0", "MPTForCausalLM": "0.28.0", "MantisForConditionalGeneration": "0.24.0",
    "MiniMaxForCausalLM": "0.23.0", "MiniMaxM1ForCausalLM": "0.23.0", "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxVL01ForConditionalGeneration": "0.23.0", "MllamaForConditionalGeneration": "0.10.2", "MotifForCausalLM":
    "0.10.2", "MptForCausalLM": "0.28.0", "MusicFlamingoForConditionalGeneration": "0.24.0", "OuroForCausalLM":
    "0.26.0", "PersimmonForCausalLM": "0.25.0", "Phi3SmallForCausalLM": "0.9.2", "Phi4FlashForCausalLM": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0", "Plamo2ForCausalLM": "0.26.0", "PrithviGeoSpatialMAE": "0.28.0",
    "QWenLMHeadModel": "0.23.0", "QwenVLForConditionalGeneration": "0.23.0", "RWForCausalLM": "0.28.0",
    "StableLMEpochForCausalLM": "0.28.0", "Tarsier2ForConditionalGeneration": "0.23.0",
    "TarsierForConditionalGeneration": "0.24.0", "TeleChatForCausalLM": "0.25.0", "XverseForCausalLM": "0.23.0",
}


def vllm_refusal(architectures: Iterable[str]) -> str:
    """Why vLLM will not serve these architectures with a class of its own, or "" when it does (or
    the config names none)."""
    archs = [str(a) for a in architectures]
    if not archs or any(a in NATIVE for a in archs):
        return ""
    for arch in archs:
        if arch in DROPPED:
            return (f"vLLM {REGISTRY_VERSION} no longer serves {arch} (last in vLLM {DROPPED[arch]}); "
                    "this plan follows no vLLM class")
    how = ("serves it only through" if any(a in TRANSFORMERS_BACKEND_ONLY for a in archs)
           else "has no class for it and would serve it, if at all, through")
    return (f"vLLM {REGISTRY_VERSION} has no native class for {', '.join(archs)}: it {how} its generic "
            "Transformers backend, so these shapes follow vLLM's rules, not a vLLM model class")


__all__ = ["REGISTRY_VERSION", "NATIVE", "TRANSFORMERS_BACKEND_ONLY", "DROPPED", "vllm_refusal"]
