import json
import shutil
import sys
import tempfile
import types
import unittest
from unittest import mock

from spark_vllm.compat import compat
from tests.hf import make_snapshot
from tests.test_weights import call


def fake_vllm(version, archs):
    vllm = types.ModuleType("vllm")
    vllm.__version__ = version
    vllm.ModelRegistry = types.SimpleNamespace(get_supported_archs=lambda: list(archs))
    return vllm


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
        self.cache = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.cache)
        make_snapshot(self.cache, "Qwen/Qwen3.5-122B-A10B-FP8", files={
            "config.json": b'{"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"}'})
        self.args = {"model": "Qwen/Qwen3.5-122B-A10B-FP8", "cacheDir": self.cache, "trustRemoteCode": False}

    def compat_with(self, vllm, args, torch=None, ray="default"):
        # None makes `import x` raise ImportError, as in an image without it.
        modules = {"vllm": vllm, "transformers": None, "torch": torch or fake_torch(), "ray": fake_ray() if ray == "default" else ray}
        with mock.patch.dict(sys.modules, modules):
            return call(compat, args)

    def test_gb10_image_checks_pass_with_sm120_kernels_and_ray(self):
        code, out, err = self.compat_with(fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]), self.args)
        self.assertEqual((code, err), (0, []))
        facts = json.loads(out[-1])
        self.assertEqual((facts["capability"], facts["kernels"], facts["ray"], facts["cuda"]), ("12.1", "sm_120", "2.49.0", "12.9"))

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
        # Ray 2.52.0-2.53.0: token authentication, but not on the dashboard agent's HTTP server (components/images.ts [ray-agent])
        vllm = fake_vllm("0.17.1", ["Qwen3_5MoeForConditionalGeneration"])
        for version in ("2.52.0", "2.53.0"):
            code, out, err = self.compat_with(vllm, dict(self.args, backend="ray"), ray=fake_ray(version))
            self.assertEqual((code, err), (0, []))
            self.assertTrue(out[0].startswith("warning: the image's Ray %s checks the cluster's token everywhere but on its "
                                              "dashboard agent's HTTP server (port 52365 on every host)" % version), out)
            self.assertIn("POST /api/job_agent/jobs/; Ray checks the token there from 2.54.0", out[0])
            self.assertIn("docs/security.md (section Ray)", out[0])
            self.assertEqual(json.loads(out[-1])["warnings"], [out[0][len("warning: "):]])

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

    def test_no_vllm_and_no_weights(self):
        code, _, err = self.compat_with(None, self.args)
        self.assertEqual(code, 1)
        self.assertTrue(err[0].startswith("the image has no importable vLLM (ModuleNotFoundError: "), err)
        code, _, err = self.compat_with(None, dict(self.args, model="nobody/absent"))
        self.assertTrue(err[0].startswith("nobody/absent: config.json not found under %s/hub on the head" % self.cache), err)


if __name__ == "__main__":
    unittest.main()
