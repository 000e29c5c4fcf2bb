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


class Compat(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.cache)
        make_snapshot(self.cache, "Qwen/Qwen3.5-122B-A10B-FP8", files={
            "config.json": b'{"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"}'})
        self.args = {"model": "Qwen/Qwen3.5-122B-A10B-FP8", "cacheDir": self.cache, "trustRemoteCode": False}

    def compat_with(self, vllm, args):
        # transformers: None makes `import transformers` raise ImportError, as in an image without it.
        with mock.patch.dict(sys.modules, {"vllm": vllm, "transformers": None}):
            return call(compat, args)

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
