import io
import json
import os
import shutil
import tarfile
import unittest
from unittest import mock

from spark_vllm import status
from spark_vllm import supervise as sv
from tests import scratch_dir


class HostStatus(unittest.TestCase):
    def setUp(self):
        self.dir = scratch_dir(self)
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


class GivenUp(unittest.TestCase):
    """The supervisor's own give_up writes the markers; they come back through a tar as `docker cp DIR -` streams it."""

    def setUp(self):
        self.root = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.root)
        self.dir = os.path.join(self.root, "launches")
        os.makedirs(self.dir)
        self.sup = sv.Supervisor(self.dir)
        self.log = os.path.join(self.root, "vllm-serve.log")
        quiet = mock.patch.object(sv, "log")
        quiet.start()
        self.addCleanup(quiet.stop)

    def record(self, name, **extra):
        rec = dict({"name": name, "argv": ["vllm", "serve", "m"], "log": self.log}, **extra)
        with open(os.path.join(self.dir, name + ".json"), "w") as f:
            f.write(json.dumps(rec) + "\n")
        return rec, sv.read_launch_record(self.dir, name)[1]

    def archive(self):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            tar.add(self.dir, arcname="launches")
        out.seek(0)
        return out

    def test_a_launch_the_supervisor_gave_up_on_with_its_diagnosis_log_and_time(self):
        with open(self.log, "w") as f:
            f.write("INFO starting\nValueError: No available memory for the cache blocks. Try increasing "
                    "`gpu_memory_utilization` when initializing the engine.\n")
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, sv.MAX_FAILURES)
        os.utime(os.path.join(self.dir, "vllm.failed"), (1764590400, 1764590400))
        self.record("ray")  # running fine: no marker
        [found] = status.given_up(status.records_from_tar(self.archive()))
        self.assertEqual((found["name"], found["failures"], found["log"], found["markedAt"]),
                         ("vllm", sv.MAX_FAILURES, self.log, "2025-12-01T12:00:00Z"))
        self.assertEqual(found["diagnosis"]["kind"], "no-cache-memory")
        self.assertIn("gpu_memory_utilization", found["diagnosis"]["line"])
        self.assertTrue(found["diagnosis"]["hint"])

    def test_the_give_up_line_points_at_the_replace_status_prints_not_at_the_launch_alone(self):
        # Replacing vLLM's launch alone would not run the memory gates (a page cache that fails the start-up check
        # comes back): the line names the memory gates, and the status command that prints their URNs.
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        said = sv.log.call_args[0][0]
        self.assertIn("`spark-vllm status` prints", said)
        self.assertIn("every host's memory gate", said)

    def test_no_diagnosis_is_reported_as_null(self):
        rec, digest = self.record("ray")
        self.sup.give_up("ray", rec, digest, 5)
        [found] = status.given_up(status.records_from_tar(self.archive()))
        self.assertEqual((found["name"], found["diagnosis"]), ("ray", None))

    def test_a_stale_marker_from_an_older_launch_is_ignored_as_the_supervisor_ignores_it(self):
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        _, new_digest = self.record("vllm", argv=["vllm", "serve", "other"])
        self.assertFalse(self.sup.marked("vllm", "failed", new_digest), "the supervisor would relaunch this record")
        self.assertEqual(status.given_up(status.records_from_tar(self.archive())), [])

    def test_a_marker_without_its_record_is_ignored(self):
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        os.remove(os.path.join(self.dir, "vllm.json"))
        self.assertEqual(status.given_up(status.records_from_tar(self.archive())), [])

    def test_no_records_directory_nothing_on_stdin_or_not_a_tar_is_nothing_given_up(self):
        self.assertEqual(status.records_from_tar(io.BytesIO(b"")), {})
        self.assertEqual(status.records_from_tar(io.BytesIO(b"Error response from daemon: Could not find the file")), {})

    def test_the_subcommand_prints_one_json_line(self):
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        stdin = mock.Mock(buffer=self.archive())
        with mock.patch.object(status.sys, "stdin", stdin), mock.patch.object(status, "say") as say:
            status.given_up_command({})
        self.assertEqual([g["name"] for g in json.loads(say.call_args[0][0])], ["vllm"])


if __name__ == "__main__":
    unittest.main()
