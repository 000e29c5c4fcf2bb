import json
import types
import unittest
from unittest import mock
import sys

from spark_vllm.memory import DROP, GIB, LOW_AFTER_LOAD_GIB, flush_argv, memory_after_load, memory_check, startup_free_source, verdict
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

    def _check(self, cuda_free_gib, available_gib, version, capability=(12, 1), integrated=True, command=None, args=None):
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(mem_get_info=lambda: (int(cuda_free_gib * GIB), int(121.69 * GIB)),
                                           get_device_capability=lambda: capability,
                                           get_device_properties=lambda i: types.SimpleNamespace(is_integrated=integrated))
        psutil = types.ModuleType("psutil")
        psutil.virtual_memory = lambda: types.SimpleNamespace(available=int(available_gib * GIB))
        with mock.patch.dict(sys.modules, {"torch": torch, "psutil": psutil}), \
                mock.patch("spark_vllm.memory.image_vllm_version", lambda: version):
            return call(command or memory_check, args or {"host": "spark-a", "gpuMemoryUtilization": 0.85})

    def test_a_torch_without_device_properties_falls_back_to_the_capability_list(self):
        # The e2e bed's torch stand-in lacked get_device_properties and every memory gate failed (AttributeError).
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(mem_get_info=lambda: (int(90 * GIB), int(121.69 * GIB)), get_device_capability=lambda: (12, 1))
        psutil = types.ModuleType("psutil")
        psutil.virtual_memory = lambda: types.SimpleNamespace(available=int(110 * GIB))
        with mock.patch.dict(sys.modules, {"torch": torch, "psutil": psutil}), \
                mock.patch("spark_vllm.memory.image_vllm_version", lambda: "0.17.1"):
            code, out, err = call(memory_check, {"host": "spark-a", "gpuMemoryUtilization": 0.85})
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out[-1])["freeSource"], "mem-available")

    def test_after_the_load_both_figures_and_a_warning_below_4_gib(self):
        self.assertEqual(LOW_AFTER_LOAD_GIB, 4.0)
        # Two Sparks at 0.85 after the load: about the 18.25 GiB headroom less the OS: no warning.
        code, out, err = self._check(8.2, 16.5, "0.17.1", command=memory_after_load, args={"host": "spark-b"})
        self.assertEqual(code, 0, err)
        facts = json.loads(out[-1])
        self.assertEqual((facts["freeGiB"], facts["cudaFreeGiB"], facts["memAvailableGiB"], facts["totalGiB"], facts["warnings"]),
                         (16.5, 8.2, 16.5, 121.69, []))
        self.assertEqual(out[0], "spark-b: after the weights loaded, 16.50 GiB free (mem-available; CUDA free 8.20 GiB of 121.69)")
        # 3.1 GiB left: warned, naming the host and both figures; the command still succeeds (vLLM is serving).
        code, out, err = self._check(1.0, 3.1, "0.17.1", command=memory_after_load, args={"host": "spark-b"})
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out[-1])["warnings"], [
            "spark-b: 3.10 GiB free after the weights loaded (CUDA free 1.00 GiB, MemAvailable 3.10 GiB), below 4 GiB: the OS, "
            "Docker and Ray are short of memory and the kernel may kill vLLM; lower spark-vllm:vllm.gpuMemoryUtilization, "
            "or stop what else runs on spark-b (docs/memory.md)"])
        # An old vLLM's rule (CUDA's free figure) and a configured threshold.
        code, out, _ = self._check(5.0, 30.0, "0.11.0", command=memory_after_load, args={"host": "spark-a", "lowGiB": 6})
        facts = json.loads(out[-1])
        self.assertEqual((facts["freeGiB"], facts["freeSource"], facts["lowGiB"], len(facts["warnings"])), (5.0, "cuda-free", 6.0, 1))

    def test_old_vllm_takes_cudas_free_figure(self):
        # vllm-0.11.0 MemorySnapshot: torch.cuda.mem_get_info() only; 20 GiB of page cache makes it refuse.
        code, out, err = self._check(90, 110, "0.11.0")
        self.assertEqual(code, 1)
        self.assertIn("only 90.00 GiB is free", err[0])

    def test_newer_vllm_on_a_gb10_takes_memavailable_and_reports_both(self):
        # vllm-0.11.1..0.19: capability (12, 1) is in its unified-memory list; psutil's available is the free figure.
        code, out, err = self._check(90, 110, "0.17.1")
        self.assertEqual(code, 0, err)
        facts = json.loads(out[-1])
        self.assertEqual((facts["freeGiB"], facts["cudaFreeGiB"], facts["memAvailableGiB"], facts["freeSource"]),
                         (110.0, 90.0, 110.0, "mem-available"))
        self.assertIn("CUDA free 90.00 GiB, MemAvailable 110.00 GiB", out[0])
        # ... and MemAvailable short of the request refuses even with CUDA's figure higher.
        code, _, err = self._check(110, 90, "0.33.0")
        self.assertEqual(code, 1)
        self.assertIn("only 90.00 GiB is free", err[0])


class StartupFreeSource(unittest.TestCase):
    def test_the_rule_per_vllm_version(self):
        gb10 = (12, 1)
        self.assertEqual(startup_free_source("0.10.2", gb10), "cuda-free")
        self.assertEqual(startup_free_source("0.11.0", gb10), "cuda-free")
        self.assertEqual(startup_free_source("0.11.1", gb10), "mem-available")
        self.assertEqual(startup_free_source("0.19.0", gb10, integrated=False), "mem-available", "0.19 reads only the capability list")
        self.assertEqual(startup_free_source("0.19.0", (9, 0), integrated=True), "cuda-free", "GH200 is not in 0.19's list")
        self.assertEqual(startup_free_source("0.20.0", (9, 0), integrated=True), "mem-available")
        self.assertEqual(startup_free_source("0.20.0", gb10, integrated=False), "cuda-free")
        self.assertEqual(startup_free_source("0.33.0", gb10), "mem-available", "is_integrated unknown: the capability list")
        self.assertEqual(startup_free_source(None, gb10), "cuda-free")
        self.assertEqual(startup_free_source("0.17.1+cu129", gb10), "mem-available")


if __name__ == "__main__":
    unittest.main()
