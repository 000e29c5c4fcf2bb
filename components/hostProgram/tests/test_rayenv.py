import json
import os
import stat
import unittest

from spark_vllm.rayenv import ray_env, vllm_config_root
from tests import scratch_dir


class RayEnv(unittest.TestCase):
    def setUp(self):
        self.dir = scratch_dir(self)

    def test_config_root_resolves_as_vllm_envs(self):
        home = os.path.expanduser("~")
        self.assertEqual(vllm_config_root({}), os.path.join(home, ".config", "vllm"))
        self.assertEqual(vllm_config_root({"XDG_CONFIG_HOME": "/x"}), "/x/vllm")
        self.assertEqual(vllm_config_root({"XDG_CONFIG_HOME": "/x", "VLLM_CONFIG_ROOT": "/c"}), "/c")
        self.assertEqual(vllm_config_root({"VLLM_CONFIG_ROOT": "~/c"}), os.path.join(home, "c"))

    def test_writes_the_names_and_keeps_the_files_own(self):
        root = os.path.join(self.dir, "vllm")
        env = {"VLLM_CONFIG_ROOT": root}
        ray_env({"nonCarryOver": ["VLLM_API_KEY"]}, env)
        path = os.path.join(root, "ray_non_carry_over_env_vars.json")
        with open(path) as f:
            self.assertEqual(json.load(f), ["VLLM_API_KEY"])
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o644)
        with open(path, "w") as f:
            json.dump(["VLLM_OTHER"], f)
        ray_env({"nonCarryOver": ["VLLM_API_KEY"]}, env)
        with open(path) as f:
            self.assertEqual(json.load(f), ["VLLM_API_KEY", "VLLM_OTHER"])
        self.assertEqual(os.listdir(root), ["ray_non_carry_over_env_vars.json"])

    def test_a_malformed_file_is_replaced_as_vllm_would_ignore_it(self):
        root = os.path.join(self.dir, "vllm")
        os.makedirs(root)
        with open(os.path.join(root, "ray_non_carry_over_env_vars.json"), "w") as f:
            f.write("{not json")
        ray_env({"nonCarryOver": ["VLLM_API_KEY"]}, {"VLLM_CONFIG_ROOT": root})
        with open(os.path.join(root, "ray_non_carry_over_env_vars.json")) as f:
            self.assertEqual(json.load(f), ["VLLM_API_KEY"])


if __name__ == "__main__":
    unittest.main()
