# compat: the image's vLLM (and transformers) against the model's config.json, before any launch.
import json
import os
import time

from spark_vllm.common import fail, say
from spark_vllm.data import data
from spark_vllm.weights import snapshot_dir


def compat(args):
    started = time.time()
    model = args["model"]
    snap = snapshot_dir(args["cacheDir"], model)
    config_path = snap and os.path.join(snap, "config.json")
    if not config_path or not os.path.isfile(config_path):
        fail(["%s: config.json not found under %s/hub on the head: put the weights there first "
              "(huggingface-cli download %s) or set spark-vllm:model.weights" % (model, args["cacheDir"], model)])
    with open(config_path) as f:
        config = json.load(f)
    archs = config.get("architectures") or []
    model_type = config.get("model_type")
    try:
        import vllm
        from vllm import ModelRegistry
        version = getattr(vllm, "__version__", "unknown")
        supported = set(ModelRegistry.get_supported_archs())
    except Exception as e:  # an image without vLLM is a configuration error, not a crash
        fail(["the image has no importable vLLM (%s: %s): use a vLLM image in spark-vllm:image" % (type(e).__name__, e)])
    declared = args.get("declaredVllmVersion")
    problems = []
    if declared and declared != version:
        problems.append("spark-vllm:vllm.version says %s but the image's vLLM is %s: correct the config" % (declared, version))
    missing = [a for a in archs if a not in supported]
    if missing:
        first = data()["firstVllm"].get(missing[0])
        problems.append(
            "%s needs architecture %s, which vLLM %s in this image does not support%s. "
            "Use an image whose vLLM supports it. Copying model files between vLLM versions does not work: "
            "the model's code lives in vLLM itself."
            % (model, ", ".join(missing), version,
               ("; it is supported from vLLM %s" % first) if first else ""))
    remote_code = "auto_map" in config
    if remote_code and not args.get("trustRemoteCode"):
        problems.append("%s ships custom code (config.json auto_map) and needs trust_remote_code: "
                        "set spark-vllm:model.trustRemoteCode: true after reading that code" % model)
    tf_version = None
    try:
        import transformers
        tf_version = getattr(transformers, "__version__", None)
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        if model_type and model_type not in CONFIG_MAPPING_NAMES and not remote_code:
            problems.append("transformers %s in this image does not recognize model_type %r of %s: "
                            "use an image with a newer transformers" % (tf_version, model_type, model))
    except ImportError:
        pass
    if problems:
        fail(problems)
    say(json.dumps({"model": model, "architectures": archs, "modelType": model_type, "vllmVersion": version,
                    "transformers": tf_version, "seconds": round(time.time() - started, 2)}, sort_keys=True))
