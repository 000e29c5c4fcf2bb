"""Stand-in for vllm.model_executor.layers.quantization: get_quantization_config(method).get_min_capability(), the gate
vLLM applies at load (VllmConfig._get_quantization_config: "The quantization method {q} is not supported for the current
GPU. Minimum capability: {min}. Current capability: {cap}."). Minimum capabilities as vLLM 0.17.1 returns them
(vllm/model_executor/layers/quantization/: fp8.py 75, modelopt.py ModelOptFp8Config 89 and ModelOptNvFp4Config 75,
compressed_tensors.py 70, mxfp4.py 80, gptq.py 60, gptq_marlin.py 75, awq.py 75, awq_marlin.py 75, inc.py 60 for
"auto-round" and "inc"); a name vLLM does not know raises ValueError, as get_quantization_config does."""

_MIN_CAPABILITY = {"fp8": 75, "modelopt": 89, "modelopt_fp4": 75, "compressed-tensors": 70, "mxfp4": 80, "gptq": 60,
                   "gptq_marlin": 75, "awq": 75, "awq_marlin": 75, "auto-round": 60, "inc": 60}


def get_quantization_config(quantization):
    if quantization not in _MIN_CAPABILITY:
        raise ValueError("Invalid quantization method: %s" % quantization)
    cap = _MIN_CAPABILITY[quantization]

    class QuantizationConfig:
        @classmethod
        def get_min_capability(cls):
            return cap
    return QuantizationConfig


__all__ = ["get_quantization_config"]
