"""vllm.transformers_utils.config, stand-in: only `_CONFIG_REGISTRY`, the model types for which vLLM ships its own config
class and so does not ask transformers' AutoConfig (vLLM's HFConfigParser.parse: `if model_type in _CONFIG_REGISTRY:`
registers vLLM's class with AutoConfig first). Keys and class names copied per vLLM release, from each release's
source distribution on PyPI (vllm-<version>.tar.gz, vllm/transformers_utils/config.py):
  0.10.2  line 64, `_CONFIG_REGISTRY: dict[str, type[PretrainedConfig]] = LazyConfigDict(` (parse: line 125)
  0.11.0  line 66, the same (parse: line 125)
  0.14.0  line 74, the same (parse: line 153)
  0.17.1  line 73, the same (parse: line 161); it has qwen3_5 and qwen3_5_moe, 0.14.0 has not
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
}

_version = _sc.release().get("version", "0.0.0")
if _version not in _REGISTRIES:
    raise ImportError("the stand-in vLLM has no copy of vLLM %s's _CONFIG_REGISTRY: add it to %s from that release's "
                      "vllm/transformers_utils/config.py" % (_version, __file__))
_CONFIG_REGISTRY = dict(_REGISTRIES[_version])
