import os
import shutil
import tempfile
import unittest
from unittest import mock

from spark_vllm import status


class HostStatus(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.proc = os.path.join(self.dir, "proc")
        self.pid_file = os.path.join(self.dir, "vllm-serve.pid")
        self.log = os.path.join(self.dir, "vllm-serve.log")
        self.write(os.path.join(self.proc, "meminfo"), "MemTotal:       127601240 kB\nMemFree:  1 kB\nMemAvailable:   62914560 kB\n")
        self.write(os.path.join(self.proc, "uptime"), "5000.50 100.00\n")

    def write(self, path, text, mode="w"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as f:
            f.write(text)

    def args(self, **extra):
        return dict({"host": "spark-a", "pidFile": self.pid_file, "log": self.log}, **extra)

    def vllm_process(self, pid, start_ticks, argv):
        self.write(os.path.join(self.proc, str(pid), "stat"),
                   "%d (vllm) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1 1\n" % (pid, pid, pid, start_ticks))
        self.write(os.path.join(self.proc, str(pid), "cmdline"), ("\0".join(argv) + "\0").encode(), "wb")
        self.write(self.pid_file, "%d %d\n" % (pid, start_ticks))

    def test_a_running_vllm_reports_uptime_and_served_model(self):
        ticks = os.sysconf("SC_CLK_TCK")
        self.vllm_process(42, 1000 * ticks, ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B",
                                             "--served-model-name", "qwen3-8b", "--port", "8000"])
        out = status.host_status(self.args(), self.proc)
        self.assertEqual(out["vllm"], {"state": "running", "pid": 42, "uptimeSeconds": 4000, "servedModel": "qwen3-8b"})
        self.assertEqual(out["memory"], {"availableGiB": 60.0, "totalGiB": 121.7})

    def test_the_served_model_falls_back_to_the_positional_model(self):
        self.vllm_process(42, 10, ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"])
        self.assertEqual(status.served_model(42, self.proc), "Qwen/Qwen3-8B")

    def test_a_dead_vllm_reports_the_root_cause_from_its_log(self):
        self.write(self.pid_file, "42 10\n")
        self.write(self.log, "INFO starting\nValueError: No available memory for the cache blocks. Try increasing "
                             "`gpu_memory_utilization` when initializing the engine.\n")
        out = status.host_status(self.args(), self.proc)
        self.assertEqual(out["vllm"]["state"], "exited")
        self.assertEqual(out["vllm"]["diagnosis"]["kind"], "no-cache-memory")

    def test_no_launch_yet(self):
        self.assertEqual(status.host_status(self.args(), self.proc)["vllm"], {"state": "no pid file", "pid": None})

    def test_the_ray_node_is_asked_of_the_cluster(self):
        answers = {"ok": (0, '["198.18.0.2", "198.18.0.3"]\n', ""), "down": (1, "", "ConnectionError: could not reach GCS\n")}
        with mock.patch.object(status, "run", side_effect=lambda argv, timeout: answers[self.case]):
            self.case = "ok"
            out = status.host_status(self.args(ray={"address": "198.18.0.2:6379", "node": "198.18.0.3"}), self.proc)
            self.assertEqual((out["raylet"], out.get("rayError")), (True, None))
            out = status.host_status(self.args(ray={"address": "198.18.0.2:6379", "node": "198.18.0.9"}), self.proc)
            self.assertEqual(out["raylet"], False)
            self.case = "down"
            out = status.host_status(self.args(ray={"address": "198.18.0.2:6379", "node": "198.18.0.3"}), self.proc)
            self.assertEqual((out["raylet"], out["rayError"]), (None, "ConnectionError: could not reach GCS"))

    def test_health_is_the_status_code_or_none_when_nothing_listens(self):
        out = status.host_status(self.args(healthUrl="http://127.0.0.1:9/health"), self.proc)
        self.assertIsNone(out["health"])


if __name__ == "__main__":
    unittest.main()
