# compat: the image's vLLM (and transformers) against the model's config.json, before any launch.
import json
import os
import re
import time

from spark_vllm.common import fail, say
from spark_vllm.cuda import DRIVER_TOO_OLD, NO_KERNEL, kernels_run_on, probe_gpu
from spark_vllm.data import data
from spark_vllm.kernels import quantization_check
from spark_vllm.weights import snapshot_dir


def compat(args):
    """modelIfPresent (the image proof before any container, components/plan/hostCommands.ts imageCheck): a host whose
    cache holds no config.json of the model yet (a first `up` that downloads it) gets what needs no model (the image's
    vLLM, its CUDA build on this GPU, what the backend needs); the model is checked by compat in the head's container
    once its weights are in place."""
    started = time.time()
    model = args["model"]
    snap = snapshot_dir(args["cacheDir"], model)
    config_path = snap and os.path.join(snap, "config.json")
    config = None
    if config_path and os.path.isfile(config_path):
        with open(config_path) as f:
            config = json.load(f)
    elif not args.get("modelIfPresent"):
        fail(["%s: config.json not found under %s/hub on the head: put the weights there first "
              "(huggingface-cli download %s) or set spark-vllm:model.weights" % (model, args["cacheDir"], model)])
    archs = (config or {}).get("architectures") or []
    model_type = (config or {}).get("model_type")
    try:
        import vllm
        from vllm import ModelRegistry
        version = getattr(vllm, "__version__", "unknown")
        supported = set(ModelRegistry.get_supported_archs()) if config is not None else set()
    except Exception as e:  # an image without vLLM is a configuration error, not a crash
        fail(["the image has no importable vLLM (%s: %s): use a vLLM image in spark-vllm:image" % (type(e).__name__, e)])
    declared = args.get("declaredVllmVersion")
    problems = []
    if declared and declared != version:
        problems.append("spark-vllm:vllm.version says %s but the image's vLLM is %s: correct the config" % (declared, version))
    known_by = tf_version = None
    if config is not None:
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
        known_by, tf_version, config_problem = model_type_known_by(model, snap, model_type, version, remote_code)
        if config_problem:
            problems.append(config_problem)
    image_problems, image_facts = image_checks(args.get("backend", "ray"), version, args.get("device", "cuda"))
    problems += image_problems
    quant_warnings = []
    if config is not None and image_facts.get("gpuRuns"):  # vLLM's own kernels only once PyTorch runs on this GPU at all
        quant_problem, quant_warnings, image_facts["quantization"] = quantization_check(
            model, config, version, image_facts.get("capability"), data().get("images", {}).get("kernelsForGb10", {}))
        if quant_problem:
            problems.append(quant_problem)
    if problems:
        fail(problems)
    image_facts["warnings"] = ray_auth_warnings(image_facts.get("ray")) + quant_warnings
    for w in image_facts["warnings"]:
        say("warning: " + w)
    if config is None:
        say("%s: no config.json on this host yet: the model's architecture is checked once its weights are in place" % model)
        say(json.dumps(dict(image_facts, model=model, vllmVersion=version, modelChecked=False,
                            seconds=round(time.time() - started, 2)), sort_keys=True))
        return
    if known_by == "vllm":
        say("model_type %r of %s: vLLM %s reads it with its own config class (vllm.transformers_utils.config."
            "_CONFIG_REGISTRY)%s" % (model_type, model, version, "" if tf_version is None else
                                      ", not transformers %s's AutoConfig" % tf_version))
    elif known_by == "transformers":
        say("model_type %r of %s: transformers %s's AutoConfig reads it" % (model_type, model, tf_version))
    say(json.dumps(dict(image_facts, model=model, architectures=archs, modelType=model_type, vllmVersion=version,
                        transformers=tf_version, modelTypeKnownBy=known_by, seconds=round(time.time() - started, 2)), sort_keys=True))


def vllm_config_registry():
    """The model types the image's vLLM ships its own config class for: vLLM resolves a model's config with these
    before transformers' AutoConfig (vllm/transformers_utils/config.py, HFConfigParser.parse: `if model_type in
    _CONFIG_REGISTRY:`, vLLM 0.14.0 line 153, 0.17.1 line 161, 0.20.1 line 210; a plain dict in 0.10.1.1, line 70).
    Returns (keys, None) or (None, the import error)."""
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
        return set(_CONFIG_REGISTRY), None
    except Exception as e:  # noqa: BLE001 - any failure here is reported, not raised
        return None, "%s: %s" % (type(e).__name__, e)


def model_type_known_by(model, snap, model_type, vllm_version, remote_code):
    """Who will read the model's config.json the way vLLM does: "vllm" (its own config class), "transformers"
    (AutoConfig loads it from the snapshot, offline), or None with the problem. Custom code (auto_map) is judged by
    trustRemoteCode instead. Returns (known_by, transformers version, problem or None)."""
    registry, registry_error = vllm_config_registry()
    tf_version = None
    try:
        # transformers' own warnings (e.g. "None of PyTorch ... have been found" where it cannot see torch) are not
        # problems of this check: TRANSFORMERS_VERBOSITY=error (transformers/utils/logging.py _get_default_logging_level,
        # 4.57.1 line 60)
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import transformers
        tf_version = getattr(transformers, "__version__", None)
    except ImportError:
        transformers = None
    if not model_type or remote_code:
        return None, tf_version, None
    if registry and model_type in registry:
        return "vllm", tf_version, None
    if transformers is None:
        return None, tf_version, None
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    try:
        AutoConfig.from_pretrained(snap, local_files_only=True)
        return "transformers", tf_version, None
    except Exception as e:  # noqa: BLE001 - transformers' own words go into the problem
        said = str(e).split("\n")[0]
    vllm_part = ("vLLM %s has no config of its own for it either (vllm.transformers_utils.config._CONFIG_REGISTRY)"
                 % vllm_version if registry is not None else
                 "vLLM %s's own config registry could not be read (%s)" % (vllm_version, registry_error))
    if model_type not in CONFIG_MAPPING_NAMES:
        return None, tf_version, (
            "transformers %s in this image does not recognize model_type %r of %s, and %s: use an image whose vLLM "
            "or transformers supports it (transformers said: %s)" % (tf_version, model_type, model, vllm_part, said))
    return None, tf_version, ("transformers %s in this image cannot read the config.json of %s (model_type %r): %s"
                              % (tf_version, model, model_type, said))


def version_tuple(v):
    return tuple(int(p) for p in re.findall(r"\d+", v.split("+")[0])[:3])


def use_instead():
    known = data().get("images", {}).get("gb10", [])
    return (" (known to run on a Spark: %s)" % ", ".join(known)) if known else ""


def ray_auth_warnings(ray_version):
    """A Ray before token authentication (RAY_AUTH_MODE=token, Ray >= 2.52.0; docs.ray.io ray-security/token-auth)
    ignores the token the launch gives it: say so, with the ports that are then open to anyone (Ray's "Ports
    configurations", doc/source/ray-core/configure.rst) and where the firewall recipe is."""
    first = data().get("images", {}).get("firstRayWithTokenAuth")
    agent = data().get("images", {}).get("firstRayWithAgentTokenAuth")
    if not ray_version or ray_version == "unknown" or not first:
        return []
    if version_tuple(ray_version) >= version_tuple(first):
        if not agent or version_tuple(ray_version) >= version_tuple(agent):
            return []
        # Ray 2.52-2.53: the dashboard agent's HTTP server takes no token (components/knowledge/images.ts [ray-agent])
        return ["the image's Ray %s checks the cluster's token everywhere but on its dashboard agent's HTTP server "
                "(port 52365 on every host), whose job API runs any command a peer posts to it "
                "(POST /api/job_agent/jobs/; Ray checks the token there from %s): admit only the fabric peers with "
                "the firewall recipe in docs/security.md (section Ray), or use an image with Ray >= %s"
                % (ray_version, agent, agent)]
    return ["the image's Ray %s has no token authentication (RAY_AUTH_MODE=token needs Ray >= %s), so this cluster's "
            "Ray ports are open to anyone on the network, and Ray runs any code a peer sends it: the GCS "
            "(spark-vllm:ray.port, 6379 by default), the Ray client server (10001), and on every host the node and "
            "object managers and the worker ports (10002-19999). Admit only the fabric peers with the firewall recipe "
            "in docs/security.md (section Ray), or use an image with Ray >= %s" % (ray_version, first, first)]


def image_checks(backend, vllm_version, device="cuda"):
    """The image's CUDA build against this GPU and driver, and what the backend needs (Ray; vLLM's mp launch).
    device "cpu" (spark-vllm:testBed.cpuVllm, a CPU vLLM test bed): there is no CUDA device, so the GPU part is skipped
    and said so in the facts."""
    problems, facts = [], {"backend": backend}
    facts_data = data().get("images", {})
    try:
        import torch
    except ImportError as e:
        return ["the image has no importable PyTorch (%s): use a vLLM image in spark-vllm:image" % e], facts
    if device == "cpu":
        facts.update({"torch": getattr(torch, "__version__", None), "device": "cpu",
                      "gpuChecks": "skipped (spark-vllm:testBed.cpuVllm): no CUDA device"})
        say("the image's CUDA checks skipped (spark-vllm:testBed.cpuVllm): PyTorch %s, no CUDA device" % facts["torch"])
        return problems, facts
    gpu, error = probe_gpu(torch)
    facts.update(gpu)
    if error and DRIVER_TOO_OLD.search(error):
        problems.append("the image's CUDA %s is newer than this host's driver supports (%s): use an image built for "
                        "the Spark's driver%s, or update the driver" % (gpu.get("cuda"), error, use_instead()))
    elif gpu.get("capability") and "archList" in gpu:
        cap = tuple(int(x) for x in gpu["capability"].split("."))
        runs, target, reason = kernels_run_on(gpu["archList"], cap)
        facts["kernels"] = target
        if not runs or (error and NO_KERNEL.search(error)):
            problems.append("the image's PyTorch %s (CUDA %s) cannot run on this GPU (compute capability %s): %s%s. "
                            "Use an image built for Blackwell/GB10 (sm_120 or sm_121 kernels)%s"
                            % (gpu.get("torch"), gpu.get("cuda"), gpu["capability"], reason,
                               ("; running a kernel said: " + error) if error else "", use_instead()))
        elif error:
            problems.append("a first CUDA kernel failed in the image: %s" % error)
    elif error:
        problems.append("the image's PyTorch cannot use the GPU: %s" % error)
    facts["gpuRuns"] = not problems
    if backend == "ray":
        try:
            import ray
            facts["ray"] = getattr(ray, "__version__", "unknown")
        except ImportError:
            facts["ray"] = None
            problems.append("the image has no Ray (`import ray` fails; vLLM images dropped it from 0.18), but "
                            "spark-vllm:vllm.backend is ray: set spark-vllm:vllm.backend: mp (vLLM's own multi-node "
                            "launch, from vLLM %s) or use an image with Ray%s"
                            % (facts_data.get("firstVllmWithMultiNodeMp", "0.11.1"), use_instead()))
    first_mp = facts_data.get("firstVllmWithMultiNodeMp")
    if backend == "mp" and first_mp and vllm_version != "unknown" and version_tuple(vllm_version) < version_tuple(first_mp):
        problems.append("vLLM %s in this image has no multi-node mp launch (--nnodes/--node-rank/--headless came in "
                        "vLLM %s): use a newer image or spark-vllm:vllm.backend: ray" % (vllm_version, first_mp))
    return problems, facts
