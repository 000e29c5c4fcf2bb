import types
import unittest
from unittest import mock
import sys

from spark_vllm.memory import DROP, GIB, flush_argv, memory_check, verdict
from tests.test_weights import call


class Flush(unittest.TestCase):
    def test_root_sudo_or_a_privileged_throwaway_container(self):
        self.assertEqual(flush_argv("img@sha256:x", 0, False), ["sh", "-c", DROP])
        self.assertEqual(flush_argv("img@sha256:x", 1000, True), ["sudo", "-n", "sh", "-c", DROP])
        argv = flush_argv("img@sha256:x", 1000, False)
        self.assertEqual(argv[:4], ["docker", "run", "--rm", "--privileged"])
        self.assertEqual(argv[-3:], ["img@sha256:x", "-c", DROP])

    def test_the_throw_away_container_carries_the_stacks_labels(self):
        argv = flush_argv("img@sha256:x", 1000, False, {"spark-vllm.stack": "a", "spark-vllm.project": "p"})
        self.assertEqual(argv[argv.index("--network") + 2:argv.index("--entrypoint")],
                         ["--label", "spark-vllm.project=p", "--label", "spark-vllm.stack=a"])
        self.assertEqual(argv[-3:], ["img@sha256:x", "-c", DROP])


class Verdict(unittest.TestCase):
    def test_vllms_arithmetic_utilization_times_total(self):
        facts, problem = verdict("spark-a", int(112 * GIB), int(121.69 * GIB), 0.85)
        self.assertIsNone(problem)
        self.assertEqual((facts["freeGiB"], facts["requestedGiB"]), (112.0, 103.44))

    def test_refusal_names_host_figures_and_fix(self):
        _, problem = verdict("spark-b", int(80 * GIB), int(121.69 * GIB), 0.85)
        self.assertEqual(problem,
                         "spark-b: vLLM will ask for 103.44 GiB (gpuMemoryUtilization 0.85 x 121.69 GiB total) but only "
                         "80.00 GiB is free after dropping the page cache: 41.69 GiB is held by something else. Stop what "
                         "holds it (`nvidia-smi`, `docker ps`, a leftover vLLM or Ray on spark-b), or lower "
                         "spark-vllm:vllm.gpuMemoryUtilization to 0.65 or less")

    def test_memory_check_reads_torch_mem_get_info(self):
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(mem_get_info=lambda: (int(50 * GIB), int(121.69 * GIB)))
        with mock.patch.dict(sys.modules, {"torch": torch}):
            code, out, err = call(memory_check, {"host": "spark-a", "gpuMemoryUtilization": 0.85})
        self.assertEqual(code, 1)
        self.assertIn("only 50.00 GiB is free", err[0])


if __name__ == "__main__":
    unittest.main()
