import json
import shutil
import sys
import types
import unittest
from unittest import mock

from spark_vllm.compat import compat
from tests.hf import REVISION, make_snapshot
from tests.test_kernels import BLOCK_FP8, FakeTensor as OpsTensor, fake_vllm_ops
from tests.test_weights import call
from tests import scratch_dir


def fake_vllm(version, archs, config_registry=None):
    """vllm with ModelRegistry; config_registry (model types) adds vllm.transformers_utils.config._CONFIG_REGISTRY."""
    vllm = types.ModuleType("vllm")
    vllm.__version__ = version
    vllm.ModelRegistry = types.SimpleNamespace(get_supported_archs=lambda: list(archs))
    vllm.config_registry = config_registry
    return vllm


def vllm_modules(vllm):
    """sys.modules entries for `vllm` (a package when it carries a config registry, as real vLLM is)."""
    if vllm is None or vllm.config_registry is None:
        return {"vllm": vllm}
    vllm.__path__ = []
    tu = types.ModuleType("vllm.transformers_utils")
    tu.__path__ = []
    config = types.ModuleType("vllm.transformers_utils.config")
    config._CONFIG_REGISTRY = {t: t.title().replace("_", "") + "Config" for t in vllm.config_registry}
    return {"vllm": vllm, "vllm.transformers_utils": tu, "vllm.transformers_utils.config": config}


# transformers 4.57.1's words for a model_type it does not know (models/auto/configuration_auto.py line 1364, AutoConfig.from_pretrained;
# the real library says exactly this in the sim image: tests/unit/plan/tools.test.ts)
UNKNOWN_TYPE = ("The checkpoint you are trying to load has model type `%s` but Transformers does not recognize this "
                "architecture. This could be because of an issue with the checkpoint, or because your version of "
                "Transformers is out of date.\n\nYou can update Transformers with the command `pip install --upgrade "
                "transformers`.")


def fake_transformers(version, model_types):
    """transformers with CONFIG_MAPPING_NAMES and an AutoConfig that reads config.json the way the real one decides."""
    tf = types.ModuleType("transformers")
    tf.__version__ = version
    tf.loaded = []
    names = {t: t.title().replace("_", "") + "Config" for t in model_types}

    class AutoConfig:
        @staticmethod
        def from_pretrained(path, **kwargs):
            with open(path + "/config.json") as f:
                model_type = json.load(f).get("model_type")
            if model_type not in names:
                raise ValueError(UNKNOWN_TYPE % model_type)
            tf.loaded.append((path, kwargs))
            return types.SimpleNamespace(model_type=model_type)
    tf.AutoConfig = AutoConfig
    mods = {"transformers": tf}
    for name in ("transformers.models", "transformers.models.auto"):
        mods[name] = types.ModuleType(name)
    mods["transformers.models.auto.configuration_auto"] = types.SimpleNamespace(CONFIG_MAPPING_NAMES=names)
    tf.modules = mods
    return tf


class FakeTensor:
    def __init__(self, torch):
        self.torch = torch

    def add_(self, value):
        if self.torch.kernel_error:
            raise RuntimeError(self.torch.kernel_error)
        return self


def fake_torch(arch_list=("sm_90", "sm_100", "sm_120"), capability=(12, 1), cuda="12.9", kernel_error=None, init_error=None):
    torch = types.ModuleType("torch")
    torch.__version__ = "2.9.0"
    torch.version = types.SimpleNamespace(cuda=cuda)
    torch.kernel_error = kernel_error

    def ones(n, device=None):
        if init_error:
            raise RuntimeError(init_error)
        return FakeTensor(torch)
    torch.ones = ones
    torch.cuda = types.SimpleNamespace(get_arch_list=lambda: list(arch_list), get_device_capability=lambda i=0: capability,
                                       synchronize=lambda: None)
    return torch


def fake_ray(version="2.49.0"):
    ray = types.ModuleType("ray")
    ray.__version__ = version
    return ray


class Compat(unittest.TestCase):
    def setUp(self):
        self.cache = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.cache)
        make_snapshot(self.cache, "Qwen/Qwen3.5-122B-A10B-FP8", files={
            "config.json": b'{"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"}'})
        self.args = {"model": "Qwen/Qwen3.5-122B-A10B-FP8", "cacheDir": self.cache, "trustRemoteCode": False}

    def compat_with(self, vllm, args, torch=None, ray="default", transformers=None):
        # None makes `import x` raise ImportError, as in an image without it.
        modules = {"transformers": None, "torch": torch or fake_torch(), "ray": fake_ray() if ray == "default" else ray}
        modules.update(vllm_modules(vllm))
        if transformers is not None:
            modules.update(transformers.modules)
        with mock.patch.dict(sys.modules, modules):
            return call(compat, args)

    def test_gb10_image_checks_pass_with_sm120_kernels_and_ray(self):
        code, out, err = self.compat_with(fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]), self.args)
        self.assertEqual((code, err), (0, []))
        facts = json.loads(out[-1])
        self.assertEqual((facts["capability"], facts["kernels"], facts["ray"], facts["cuda"]), ("12.1", "sm_120", "2.49.0", "12.9"))

    def test_a_cpu_vllm_test_bed_skips_the_cuda_checks_and_says_so(self):
        # testBed.cpuVllm: a torch with no CUDA device would fail the kernel run; device "cpu" never runs it.
        no_gpu = fake_torch(init_error="Found no NVIDIA driver on your system.")
        vllm = fake_vllm("0.32.0", ["Qwen2ForCausalLM"])
        make_snapshot(self.cache, "spark-vllm-test/tiny-qwen2", files={
            "config.json": b'{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}'})
        args = dict(self.args, model="spark-vllm-test/tiny-qwen2", backend="single")
        code, _, err = self.compat_with(vllm, args, torch=no_gpu)
        self.assertEqual(code, 1, "without device cpu the kernel run fails")
        code, out, err = self.compat_with(vllm, dict(args, device="cpu"), torch=no_gpu)
        self.assertEqual((code, err), (0, []))
        self.assertIn("CUDA checks skipped (spark-vllm:testBed.cpuVllm)", out[0])
        facts = json.loads(out[-1])
        self.assertEqual((facts["device"], facts["torch"], facts["vllmVersion"]), ("cpu", "2.9.0", "0.32.0"))
        self.assertNotIn("capability", facts)

    def test_an_image_without_sm12x_kernels_is_refused_naming_its_arch_list(self):
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        code, _, err = self.compat_with(vllm, self.args, torch=fake_torch(arch_list=("sm_80", "sm_90"), kernel_error=(
            "CUDA error: no kernel image is available for execution on the device")))
        self.assertEqual(code, 1)
        self.assertIn("cannot run on this GPU (compute capability 12.1): no kernels for compute capability 12.1: the image has sm_80 sm_90", err[0])
        self.assertIn("running a kernel said: RuntimeError: CUDA error: no kernel image is available", err[0])
        # PTX for an older architecture is JIT-compiled: that runs.
        code, _, err = self.compat_with(vllm, self.args, torch=fake_torch(arch_list=("sm_90", "compute_90")))
        self.assertEqual((code, err), (0, []))

    def test_a_cuda_runtime_newer_than_the_driver_is_refused(self):
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        too_old = ("The NVIDIA driver on your system is too old (found version 13000). Please update your GPU driver "
                   "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx")
        code, _, err = self.compat_with(vllm, self.args, torch=fake_torch(cuda="13.2", init_error=too_old))
        self.assertEqual(code, 1)
        self.assertIn("the image's CUDA 13.2 is newer than this host's driver supports (RuntimeError: The NVIDIA driver on your system is too old", err[0])

    def test_ray_backend_needs_ray_and_mp_needs_vllm_0_11(self):
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        code, _, err = self.compat_with(vllm, dict(self.args, backend="ray"), ray=None)
        self.assertEqual(code, 1)
        self.assertIn("the image has no Ray (`import ray` fails", err[0])
        self.assertIn("set spark-vllm:vllm.backend: mp", err[0])
        code, out, err = self.compat_with(vllm, dict(self.args, backend="mp"), ray=None)
        self.assertEqual((code, err), (0, []))
        old = fake_vllm("0.10.2", ["Qwen3_5MoeForConditionalGeneration"])
        code, _, err = self.compat_with(old, dict(self.args, backend="mp"), ray=None)
        self.assertIn("vLLM 0.10.2 in this image has no multi-node mp launch", err[-1])

    def test_a_ray_without_token_authentication_is_a_warning_naming_the_ports_and_the_firewall_recipe(self):
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        code, out, err = self.compat_with(vllm, dict(self.args, backend="ray"), ray=fake_ray("2.51.1"))
        self.assertEqual((code, err), (0, []))
        warning = ("warning: the image's Ray 2.51.1 has no token authentication (RAY_AUTH_MODE=token needs Ray >= 2.52.0), "
                   "so this cluster's Ray ports are open to anyone on the network")
        self.assertTrue(out[0].startswith(warning), out)
        self.assertIn("the GCS (spark-vllm:ray.port, 6379 by default)", out[0])
        self.assertIn("docs/security.md (section Ray)", out[0])
        self.assertEqual(json.loads(out[-1])["warnings"], [out[0][len("warning: "):]])
        for ok in ("2.54.0", "2.60.0"):
            code, out, err = self.compat_with(vllm, dict(self.args, backend="ray"), ray=fake_ray(ok))
            self.assertEqual((code, err, json.loads(out[-1])["warnings"]), (0, [], []))
            self.assertFalse(any(line.startswith("warning:") for line in out))

    def test_a_ray_whose_dashboard_agent_takes_no_token_is_a_warning_naming_the_job_api(self):
        # Ray 2.52.0-2.53.0: token authentication, but not on the dashboard agent's HTTP server (components/knowledge/images.ts [ray-agent])
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        for version in ("2.52.0", "2.53.0"):
            code, out, err = self.compat_with(vllm, dict(self.args, backend="ray"), ray=fake_ray(version))
            self.assertEqual((code, err), (0, []))
            self.assertTrue(out[0].startswith("warning: the image's Ray %s checks the cluster's token everywhere but on its "
                                              "dashboard agent's HTTP server (port 52365 on every host)" % version), out)
            self.assertIn("POST /api/job_agent/jobs/; Ray checks the token there from 2.54.0", out[0])
            self.assertIn("docs/security.md (section Ray)", out[0])
            self.assertEqual(json.loads(out[-1])["warnings"], [out[0][len("warning: "):]])

    def block_fp8_model(self):
        config = dict({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"}, **BLOCK_FP8)
        make_snapshot(self.cache, "Qwen/Qwen3.5-122B-A10B-FP8", revision="f" * 40, files={"config.json": json.dumps(config).encode()})

    def compat_with_ops(self, gemm_error):
        """A block-FP8 checkpoint on an image whose vLLM 0.17.1 answers its queries and runs (or fails) its CUTLASS GEMM."""
        self.block_fp8_model()
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        mods, calls = fake_vllm_ops(gemm_error=gemm_error)
        vllm.__path__, vllm._custom_ops = [], mods["vllm._custom_ops"]
        mods["vllm"] = vllm
        torch = fake_torch()
        torch.bfloat16, torch.float32, torch.float8_e4m3fn = "bf16", "f32", "fp8"
        ones = torch.ones
        torch.ones = lambda *size, dtype=None, device=None: OpsTensor([]) if dtype else ones(size[0], device=device)
        with mock.patch.dict(sys.modules, mods):
            return self.compat_with(vllm, dict(self.args, backend="mp"), torch=torch, ray=None) + (calls,)

    def test_a_block_fp8_model_whose_vllm_cutlass_kernel_fails_here_is_refused_before_launch(self):
        code, _, err, calls = self.compat_with_ops("Error Internal")
        self.assertEqual(code, 1)
        self.assertIn(("cutlass_scaled_mm_supports_block_fp8", 121), calls)
        self.assertEqual(len(err), 1)
        self.assertTrue(err[0].startswith(
            "Qwen/Qwen3.5-122B-A10B-FP8 is fp8-block (quant_method fp8). vLLM 0.17.1 in this image answers "
            "cutlass_scaled_mm_supports_block_fp8(121) = True and uses its own CUTLASS block FP8 GEMM (vllm._custom_ops.cutlass_scaled_mm, block scales), "
            "which fails on this GPU (compute capability 12.1): RuntimeError: Error Internal. The model would fail at its first "
            "forward pass, after loading. Use an image whose vLLM carries the kernel for fp8-block on compute capability 12.1 "
            "(known to carry it: vllm/vllm-openai:v0.33.0"), err[0])

    def test_a_block_fp8_model_whose_kernel_runs_passes_and_the_json_says_what_was_checked(self):
        code, out, err, _ = self.compat_with_ops(None)
        self.assertEqual((code, err), (0, []))
        q = json.loads(out[-1])["quantization"]
        self.assertEqual((q["method"], q["scheme"], q["checked"], q["answers"]["supportsBlockFp8"], q["answers"]["kernelRun"]["error"]),
                         ("fp8", "fp8-block", True, True, None))

    def test_an_old_vllm_names_the_first_release_from_the_catalog_data(self):
        code, _, err = self.compat_with(fake_vllm("0.14.0", ["LlamaForCausalLM"]), self.args)
        self.assertEqual(code, 1)
        self.assertEqual(err, [
            "Qwen/Qwen3.5-122B-A10B-FP8 needs architecture Qwen3_5MoeForConditionalGeneration, which vLLM 0.14.0 in this "
            "image does not support; it is supported from vLLM 0.17.0. Use an image whose vLLM supports it. Copying model "
            "files between vLLM versions does not work: the model's code lives in vLLM itself."])

    def test_a_supporting_vllm_passes_and_a_wrong_declared_version_is_named(self):
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        code, out, err = self.compat_with(vllm, dict(self.args, declaredVllmVersion="0.17.1"))
        self.assertEqual((code, err), (0, []))
        self.assertIn('"vllmVersion": "0.17.1"', out[-1])
        code, _, err = self.compat_with(vllm, dict(self.args, declaredVllmVersion="0.18.0"))
        self.assertEqual(err, ["spark-vllm:vllm.version says 0.18.0 but the image's vLLM is 0.17.1: correct the config"])

    def test_a_model_type_only_vllms_own_config_registry_knows_passes_without_asking_transformers(self):
        # transformers 4.57.1 does not know qwen3_5_moe; vLLM 0.17.1 registers its own config class for it
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"], config_registry=["qwen3_next", "qwen3_5_moe"])
        tf = fake_transformers("4.57.1", ["qwen3_moe", "llama"])
        code, out, err = self.compat_with(vllm, self.args, transformers=tf)
        self.assertEqual((code, err), (0, []))
        self.assertEqual(out[-2], "model_type 'qwen3_5_moe' of Qwen/Qwen3.5-122B-A10B-FP8: vLLM 0.17.1 reads it with its own "
                                  "config class (vllm.transformers_utils.config._CONFIG_REGISTRY), not transformers 4.57.1's AutoConfig")
        facts = json.loads(out[-1])
        self.assertEqual((facts["modelTypeKnownBy"], facts["transformers"]), ("vllm", "4.57.1"))
        self.assertEqual(tf.loaded, [], "vLLM does not ask AutoConfig for a type in its registry, nor does the check")

    def test_a_model_type_transformers_knows_is_loaded_by_autoconfig_from_the_snapshot(self):
        make_snapshot(self.cache, "Qwen/Qwen3-30B-A3B", files={
            "config.json": b'{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}'})
        vllm = fake_vllm("0.17.1", ["Qwen3MoeForCausalLM"], config_registry=["qwen3_5_moe"])
        tf = fake_transformers("4.57.1", ["qwen3_moe"])
        code, out, err = self.compat_with(vllm, dict(self.args, model="Qwen/Qwen3-30B-A3B"), transformers=tf)
        self.assertEqual((code, err), (0, []))
        self.assertEqual(out[-2], "model_type 'qwen3_moe' of Qwen/Qwen3-30B-A3B: transformers 4.57.1's AutoConfig reads it")
        self.assertEqual(json.loads(out[-1])["modelTypeKnownBy"], "transformers")
        self.assertEqual(len(tf.loaded), 1)
        self.assertTrue(tf.loaded[0][0].endswith("/snapshots/" + REVISION), tf.loaded)
        self.assertEqual(tf.loaded[0][1], {"local_files_only": True})

    def test_a_model_type_known_to_neither_names_both_and_quotes_transformers(self):
        vllm = fake_vllm("0.14.0", ["Qwen3_5MoeForConditionalGeneration"], config_registry=["qwen3_next"])
        code, _, err = self.compat_with(vllm, self.args, transformers=fake_transformers("4.56.2", ["qwen3_moe"]))
        self.assertEqual(code, 1)
        self.assertEqual(err, [
            "transformers 4.56.2 in this image does not recognize model_type 'qwen3_5_moe' of Qwen/Qwen3.5-122B-A10B-FP8, "
            "and vLLM 0.14.0 has no config of its own for it either (vllm.transformers_utils.config._CONFIG_REGISTRY): "
            "use an image whose vLLM or transformers supports it (transformers said: The checkpoint you are trying to "
            "load has model type `qwen3_5_moe` but Transformers does not recognize this architecture. This could be "
            "because of an issue with the checkpoint, or because your version of Transformers is out of date.)"])
        # a vLLM whose registry cannot be imported is named as such, not taken as an empty registry
        code, _, err = self.compat_with(fake_vllm("0.14.0", ["Qwen3_5MoeForConditionalGeneration"]), self.args,
                                        transformers=fake_transformers("4.56.2", ["qwen3_moe"]))
        self.assertEqual(code, 1)
        self.assertIn("and vLLM 0.14.0's own config registry could not be read (ModuleNotFoundError: ", err[0])

    def test_custom_code_is_judged_by_trust_remote_code_not_by_the_model_type(self):
        make_snapshot(self.cache, "acme/custom", files={
            "config.json": b'{"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "acme9", "auto_map": {}}'})
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"], config_registry=[])
        tf = fake_transformers("4.57.1", [])
        code, out, err = self.compat_with(vllm, dict(self.args, model="acme/custom", trustRemoteCode=True), transformers=tf)
        self.assertEqual((code, err, tf.loaded), (0, [], []))
        self.assertIsNone(json.loads(out[-1])["modelTypeKnownBy"])

    def test_no_vllm_and_no_weights(self):
        code, _, err = self.compat_with(None, self.args)
        self.assertEqual(code, 1)
        self.assertTrue(err[0].startswith("the image has no importable vLLM (ModuleNotFoundError: "), err)
        code, _, err = self.compat_with(None, dict(self.args, model="nobody/absent"))
        self.assertTrue(err[0].startswith("nobody/absent: config.json not found under %s/hub on the head" % self.cache), err)

    def test_an_image_proof_before_the_weights_checks_the_image_and_says_the_model_waits(self):
        # The image proof of a first `up` (components/plan/hostCommands.ts imageCheck): no config.json on the host yet.
        args = dict(self.args, model="nobody/not-yet", modelIfPresent=True)
        code, out, err = self.compat_with(fake_vllm("0.17.1", []), args)
        self.assertEqual((code, err), (0, []))
        self.assertIn("nobody/not-yet: no config.json on this host yet: the model's architecture is checked once its weights are in place", out)
        facts = json.loads(out[-1])
        self.assertEqual((facts["modelChecked"], facts["kernels"], facts["vllmVersion"]), (False, "sm_120", "0.17.1"))

    def test_an_image_proof_before_the_weights_still_refuses_an_image_that_cannot_run_here(self):
        old = fake_torch(arch_list=["sm_80", "sm_90"])
        args = dict(self.args, model="nobody/not-yet", modelIfPresent=True)
        code, _, err = self.compat_with(fake_vllm("0.17.1", []), args, torch=old)
        self.assertEqual(code, 1)
        self.assertIn("cannot run on this GPU (compute capability 12.1)", err[0])
        code, _, err = self.compat_with(None, args)
        self.assertTrue(err[0].startswith("the image has no importable vLLM"), err)

    def test_an_image_proof_with_the_weights_present_checks_the_model_too(self):
        code, _, err = self.compat_with(fake_vllm("0.14.0", ["LlamaForCausalLM"]), dict(self.args, modelIfPresent=True))
        self.assertEqual(code, 1)
        self.assertIn("needs architecture Qwen3_5MoeForConditionalGeneration, which vLLM 0.14.0 in this image does not support", err[0])


if __name__ == "__main__":
    unittest.main()
