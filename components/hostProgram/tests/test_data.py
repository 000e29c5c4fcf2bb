import json
import os
import tempfile
import unittest
from unittest import mock

from spark_vllm import data as data_module


class Data(unittest.TestCase):
    def setUp(self):
        saved = list(data_module._loaded)
        self.addCleanup(lambda: data_module._loaded.__setitem__(slice(None), saved))
        del data_module._loaded[:]

    def test_the_catalogs_arrive_from_typescript(self):
        d = data_module.data()
        kinds = [e["kind"] for e in d["diagnosis"]["catalog"]]
        self.assertIn("arch-inspect-failed", kinds)
        self.assertEqual(kinds[-1], "unknown-engine-failure")
        self.assertEqual(set(d["diagnosis"]["syntax"]), {"ansi", "prefix", "repeated", "header", "frame", "exception"})
        self.assertEqual(d["firstVllm"]["Qwen3_5MoeForConditionalGeneration"], "0.17.0")

    def test_the_shipped_line_wins_over_the_file(self):
        with mock.patch.object(data_module, "SPARK_VLLM_DATA", {"shipped": True}, create=True):
            self.assertEqual(data_module.data(), {"shipped": True})

    def test_a_file_named_by_the_environment(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"from": "file"}, f)
        self.addCleanup(os.remove, f.name)
        with mock.patch.dict(os.environ, {"SPARK_VLLM_DATA_FILE": f.name}):
            self.assertEqual(data_module.data(), {"from": "file"})

    def test_without_either_it_says_what_to_set(self):
        with mock.patch.dict(os.environ, {"SPARK_VLLM_DATA_FILE": ""}):
            with self.assertRaisesRegex(RuntimeError, "SPARK_VLLM_DATA_FILE"):
                data_module.data()


if __name__ == "__main__":
    unittest.main()
