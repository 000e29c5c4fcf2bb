import json
import os
import shutil
import sys
import time
import unittest

from spark_vllm import supervise as sv
from spark_vllm.probes import process_state
from tests import scratch_dir


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class SuperviseTest(unittest.TestCase):
    def setUp(self):
        self.dir = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.dir)
        self.clock = Clock()
        self.sup = sv.Supervisor(self.dir, clock=self.clock)
        self.addCleanup(self.kill_children)

    def kill_children(self):
        for child in self.sup.children.values():
            if child.poll() is None:
                child.kill()
                child.wait()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_record(self, name, rec):
        with open(self.path(name + ".json"), "w") as f:
            json.dump(rec, f)
        return sv.read_launch_record(self.dir, name)[1]

    def detached(self, script, **extra):
        rec = {"name": "vllm", "argv": [sys.executable, "-c", script], "log": self.path("vllm.log"),
               "pidFile": self.path("vllm.pid"), "provenAfterSeconds": 0}
        rec.update(extra)
        return rec

    def read(self, path):
        with open(path, errors="replace") as f:
            return f.read()

    def wait_exit(self, name="vllm"):
        child = self.sup.children[name]
        child.wait(10)


class Relaunch(SuperviseTest):
    def test_a_proven_record_whose_process_died_is_relaunched_with_its_secret_from_the_file(self):
        with open(self.path("key"), "w") as f:
            f.write("sk-secret\n")
        out = self.path("env-seen")
        rec = self.detached("import os, time; open(%r, 'w').write(os.environ['VLLM_API_KEY']); time.sleep(30)" % out,
                            secretEnv={"VLLM_API_KEY": self.path("key")})
        digest = self.write_record("vllm", rec)
        self.sup.mark("vllm", "proven", digest)
        with open(rec["pidFile"], "w") as f:
            f.write("999999 1\n")  # what the launch started, gone (a reboot)
        self.sup.tick()
        pid, state = process_state(rec["pidFile"])
        self.assertEqual(state, "running")
        self.assertEqual(pid, self.sup.children["vllm"].pid)
        for _ in range(100):
            if os.path.exists(out) and self.read(out):
                break
            time.sleep(0.05)
        self.assertEqual(self.read(out), "sk-secret")
        # the secret is in no file the supervisor wrote, nor in the record
        for name in os.listdir(self.dir):
            if name != "key" and name != "env-seen":
                self.assertNotIn("sk-secret", self.read(self.path(name)), name)

    def test_an_unproven_record_is_left_to_pulumi_up(self):
        rec = self.detached("pass")
        self.write_record("vllm", rec)
        self.sup.tick()
        self.assertEqual(self.sup.children, {})
        self.assertFalse(os.path.exists(rec["pidFile"]))

    def test_a_running_process_is_proven_and_never_relaunched(self):
        rec = self.detached("pass")
        digest = self.write_record("vllm", rec)
        with open(rec["pidFile"], "w") as f:
            f.write("%d %s\n" % (os.getpid(), sv.start_time(os.getpid())))
        self.sup.tick()
        self.assertTrue(self.sup.marked("vllm", "proven", digest))
        self.assertEqual(self.sup.children, {})

    def test_a_removed_record_is_not_relaunched(self):
        rec = self.detached("import time; time.sleep(30)")
        digest = self.write_record("vllm", rec)
        self.sup.mark("vllm", "proven", digest)
        os.remove(self.path("vllm.json"))
        self.sup.tick()
        self.assertEqual(self.sup.children, {})

    def test_a_new_launch_is_not_proven_by_the_old_ones_marker(self):
        rec = self.detached("import time; time.sleep(30)")
        digest = self.write_record("vllm", rec)
        self.sup.mark("vllm", "proven", digest)
        self.write_record("vllm", self.detached("import time; time.sleep(31)"))
        self.sup.tick()
        self.assertEqual(self.sup.children, {})


class Order(SuperviseTest):
    def test_vllm_waits_for_ray_on_this_host_and_for_its_gate(self):
        ray = {"name": "ray", "argv": ["true"], "log": self.path("ray.log"), "process": "no-such-daemon-name"}
        self.write_record("ray", ray)  # not proven: it will not be started here
        rec = self.detached("import time; time.sleep(30)", after=["ray"])
        self.sup.mark("vllm", "proven", self.write_record("vllm", rec))
        self.sup.tick()
        self.assertEqual(self.sup.children, {})
        os.remove(self.path("ray.json"))
        rec["gate"] = {"argv": [sys.executable, "-c", "import sys; print('2 of 3 nodes'); sys.exit(1)"]}
        self.sup.mark("vllm", "proven", self.write_record("vllm", rec))
        self.sup.tick()
        self.assertEqual(self.sup.children, {})
        rec["gate"] = {"argv": ["true"]}
        self.sup.mark("vllm", "proven", self.write_record("vllm", rec))
        self.sup.tick()
        self.assertIn("vllm", self.sup.children)

    def test_a_daemon_record_runs_before_then_argv_and_is_up_by_its_process_name(self):
        proc = self.path("proc")
        os.makedirs(os.path.join(proc, "42"))
        with open(os.path.join(proc, "42", "comm"), "w") as f:
            f.write("raylet\n")
        with open(os.path.join(proc, "42", "stat"), "w") as f:
            f.write("42 (raylet) S 1 42\n")
        self.assertTrue(sv.comm_running("raylet", proc))
        self.assertFalse(sv.comm_running("gcs_server", proc))
        trace = self.path("trace")
        ray = {"name": "ray", "argv": ["sh", "-c", "echo start >> %s" % trace], "log": self.path("ray.log"),
               "process": "gcs_server", "before": [["sh", "-c", "echo stop >> %s" % trace]]}
        self.sup.mark("ray", "proven", self.write_record("ray", ray))
        self.sup.proc = proc
        self.sup.tick()
        self.assertEqual(self.read(trace).split(), ["stop", "start"])


class CrashLoop(SuperviseTest):
    def test_a_crash_loop_backs_off_then_stops_with_the_diagnosis(self):
        crash = ("import sys; print('ERROR 01-01 00:00:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. "
                 "Tried to allocate 2.00 GiB'); sys.exit(1)")
        rec = self.detached(crash)
        digest = self.write_record("vllm", rec)
        self.sup.mark("vllm", "proven", digest)
        starts = 0
        for _ in range(400):
            before = self.sup.children.get("vllm")
            self.sup.tick()
            if self.sup.children.get("vllm") is not before:
                starts += 1
                self.wait_exit()
            self.clock.now += 1
        self.assertEqual(starts, sv.MAX_FAILURES)
        failed = self.read(self.path("vllm.failed")).split("\n")
        self.assertEqual(failed[0], digest)
        detail = json.loads(failed[1])
        self.assertEqual(detail["failures"], sv.MAX_FAILURES)
        self.assertEqual(detail["diagnosis"]["kind"], "cuda-oom")
        # backed off 5, 10, 20, 40 s between the tries, and stopped for good after the fifth (400 ticks of 1 s)
        self.assertEqual(sv.backoff(1), 5)
        self.assertEqual(sv.backoff(4), 40)
        self.assertEqual(sv.backoff(20), 300)

    def test_a_relaunch_that_serves_again_resets_the_count(self):
        rec = self.detached("import time; time.sleep(30)")
        digest = self.write_record("vllm", rec)
        self.sup.mark("vllm", "proven", digest)
        self.sup.state["vllm"] = {"digest": digest, "failures": 3, "next": 0.0, "relaunched": None, "up": None}
        self.sup.tick()
        self.assertEqual(self.sup.state["vllm"]["relaunched"], self.clock.now)
        self.sup.tick()
        self.assertEqual(self.sup.state["vllm"]["failures"], 0)


class MemoryGuard(SuperviseTest):
    def meminfo(self, available_kb):
        with open(self.path("meminfo"), "w") as f:
            f.write("MemTotal:       127601604 kB\nMemFree:         2210000 kB\nMemAvailable:   %d kB\n" % available_kb)

    def guarded(self, floor_gib=4, **extra):
        self.stopped_ray = 0

        def stop_ray():
            self.stopped_ray += 1
        self.sup = sv.Supervisor(self.dir, clock=self.clock, floor_bytes=floor_gib * sv.GIB,
                                 meminfo=self.path("meminfo"), stop_ray=stop_ray, **extra)

    def serving(self):
        rec = self.detached("import time; time.sleep(60)")
        digest = self.write_record("vllm", rec)
        self.sup.mark("vllm", "proven", digest)
        self.sup.tick()
        self.assertEqual(process_state(rec["pidFile"])[1], "running")
        return rec, digest

    def test_below_the_floor_vllm_is_stopped_marked_with_the_figures_and_never_relaunched(self):
        self.guarded()
        self.meminfo(12 * 1024 * 1024)
        rec, digest = self.serving()
        self.sup.tick()
        self.assertEqual(process_state(rec["pidFile"])[1], "running", "12 GiB available: above a 4 GiB floor")
        self.meminfo(3 * 1024 * 1024 + 512 * 1024)
        self.sup.tick()
        self.assertEqual(process_state(rec["pidFile"])[1], "exited")
        failed = self.read(self.path("vllm.failed")).split("\n")
        self.assertEqual(failed[0], digest)
        detail = json.loads(failed[1])
        self.assertEqual(detail["guard"]["memAvailableBytes"], (3 * 1024 + 512) * 1024 * 1024)
        self.assertEqual(detail["guard"]["floorBytes"], 4 * sv.GIB)
        self.assertEqual(detail["diagnosis"]["kind"], "memory-guard")
        self.assertEqual(detail["diagnosis"]["line"], "MemAvailable 3.5 GiB < floor 4.0 GiB")
        self.assertIn("spark-vllm:memoryGuard.floorGiB", detail["diagnosis"]["hint"])
        # Memory back: the supervisor still relaunches nothing (only a new launch clears the marker).
        self.meminfo(60 * 1024 * 1024)
        child = self.sup.children.get("vllm")
        for _ in range(30):
            self.sup.tick()
            self.clock.now += 5
        self.assertIs(self.sup.children.get("vllm"), child)
        self.assertEqual(self.stopped_ray, 0)

    def test_a_ray_launch_is_stopped_with_ray_stop_and_a_stopped_record_is_not_stopped_twice(self):
        self.guarded()
        self.meminfo(1024 * 1024)
        script = "import time; time.sleep(60)"
        rec = {"name": "ray", "argv": [sys.executable, "-c", script], "log": self.path("ray.log"), "process": "ray-standin"}
        digest = self.write_record("ray", rec)
        self.sup.mark("ray", "proven", digest)
        self.sup.running = lambda r: True
        self.sup.tick()
        self.assertEqual(self.stopped_ray, 1)
        self.assertEqual(json.loads(self.read(self.path("ray.failed")).split("\n")[1])["diagnosis"]["kind"], "memory-guard")
        self.sup.tick()
        self.assertEqual(self.stopped_ray, 1)

    def test_no_floor_or_an_unreadable_meminfo_never_stops_anything(self):
        self.guarded(floor_gib=0)
        self.meminfo(1024)
        rec, _ = self.serving()
        self.sup.tick()
        self.assertEqual(process_state(rec["pidFile"])[1], "running")
        self.sup.floor, self.sup.meminfo = 4 * sv.GIB, self.path("no-such-meminfo")
        self.sup.tick()
        self.assertEqual(process_state(rec["pidFile"])[1], "running")
        self.assertFalse(os.path.exists(self.path("vllm.failed")))

    def test_mem_available_is_read_in_bytes_from_the_kernels_kB(self):
        self.meminfo(940604)
        self.assertEqual(sv.meminfo_available_bytes(self.path("meminfo")), 940604 * 1024)
        self.assertIsNone(sv.meminfo_available_bytes(self.path("absent")))


if __name__ == "__main__":
    unittest.main()
