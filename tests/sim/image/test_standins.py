#!/usr/bin/env python3
"""Tests for the ray / vllm stand-ins. No root, no Docker: local processes on 127.0.0.x.

Run:  python3 tests/sim/image/test_standins.py      (about 30-40 s)
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "bin")
PYDIR = os.path.join(HERE, "python")


def free_port(host="127.0.0.1"):
    s = socket.socket()
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Host:
    """One simulated host: its own ray state dir and node IP, shared HF cache."""

    def __init__(self, root, name, ip, env):
        self.ip = ip
        self.env = dict(env, RAY_SIM_DIR=os.path.join(root, name, "ray"), VLLM_HOST_IP=ip)
        self.procs = []

    def run(self, *args, timeout=30, extra=None):
        env = dict(self.env, **(extra or {}))
        return subprocess.run([os.path.join(BIN, args[0])] + list(args[1:]), env=env, capture_output=True,
                              text=True, timeout=timeout)

    def spawn(self, *args, log=None, extra=None):
        env = dict(self.env, **(extra or {}))
        f = open(log, "w")
        p = subprocess.Popen([os.path.join(BIN, args[0])] + list(args[1:]), env=env, stdout=f,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        f.close()
        self.procs.append(p)
        return p

    def py(self, code):
        return subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                              timeout=20)


def http(url, data=None, key=None, timeout=5):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(pred, timeout, step=0.2):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


class StandIns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="standins-")
        hf = os.path.join(cls.root, "hf")
        snap = os.path.join(hf, "hub", "models--Qwen--Qwen3.5-122B-A10B-FP8", "snapshots", "c0ffee")
        os.makedirs(snap)
        os.makedirs(os.path.join(hf, "hub", "models--Qwen--Qwen3.5-122B-A10B-FP8", "refs"))
        with open(os.path.join(hf, "hub", "models--Qwen--Qwen3.5-122B-A10B-FP8", "refs", "main"), "w") as f:
            f.write("c0ffee")
        with open(os.path.join(snap, "config.json"), "w") as f:
            json.dump({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                       "num_attention_heads": 32, "max_position_embeddings": 262144}, f)
        cls.release = os.path.join(cls.root, "release.json")
        with open(cls.release, "w") as f:
            json.dump({"version": "0.17.1", "architectures": ["Qwen3_5MoeForConditionalGeneration",
                                                              "Qwen3MoeForCausalLM"],
                       "transformers": "4.57.1", "load_seconds": 2}, f)
        cls.faults = os.path.join(hf, "sim-faults.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "VLLM_"))}
        env.update(HF_HOME=hf, VLLM_SIM_LOCK_DIR=os.path.join(cls.root, "locks"), VLLM_SIM_RELEASE=cls.release, PYTHONPATH=PYDIR,
                   RAY_SIM_DEAD_AFTER_SECONDS="3", RAY_SIM_CONNECT_TIMEOUT_SECONDS="2")
        cls.env = env
        cls.head = Host(cls.root, "a", "127.0.0.1", env)
        cls.worker = Host(cls.root, "b", "127.0.0.2", env)
        cls.ray_port = free_port()

    @classmethod
    def tearDownClass(cls):
        for h in (cls.head, cls.worker):
            for p in h.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            h.run("ray", "stop", "--force")
        shutil.rmtree(cls.root, ignore_errors=True)

    def set_faults(self, **f):
        with open(self.faults, "w") as fh:
            json.dump(f, fh)

    def tearDown(self):
        for p in self.head.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        try:
            os.remove(self.faults)
        except OSError:
            pass

    def log(self, name):
        return os.path.join(self.root, name + ".log")

    def serve(self, name, port, *extra, key=None):
        args = ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--served-model-name", "qwen3.5-122b",
                "--tensor-parallel-size", "2", "--distributed-executor-backend", "ray",
                "--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.85",
                "--max-model-len", "32768"] + list(extra)
        return self.head.spawn(*args, log=self.log(name), extra={"VLLM_API_KEY": key} if key else None)

    def read(self, name):
        with open(self.log(name)) as f:
            return f.read()

    def assert_cause_before_wrapper(self, text, cause):
        self.assertIn(cause, text)
        wrapper = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
        self.assertIn(wrapper, text)
        self.assertLess(text.index(cause), text.rindex(wrapper))

    # ------------------------------------------------------------------ tests (run in name order)
    def test_1_versions_and_imports(self):
        r = self.head.run("vllm", "--version")
        self.assertEqual(r.stdout.strip(), "0.17.1")
        r = self.head.py("import vllm, ray, transformers\n"
                         "from vllm import ModelRegistry\n"
                         "from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES\n"
                         "print(vllm.__version__, ray.__version__, transformers.__version__)\n"
                         "print(ModelRegistry.get_supported_archs())\n"
                         "print('qwen3_5_moe' in CONFIG_MAPPING_NAMES)")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "0.17.1 2.51.1 4.57.1")
        self.assertIn("Qwen3_5MoeForConditionalGeneration", lines[1])
        self.assertEqual(lines[2], "True")

    def test_2_cluster(self):
        port = self.ray_port
        r = self.head.run("ray", "start", "--head", "--port=%d" % port, "--node-ip-address=127.0.0.1",
                          "--num-gpus=1", "--disable-usage-stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Ray runtime started.", r.stdout)
        self.assertIn("ray start --address='127.0.0.1:%d'" % port, r.stdout)
        # second start on the same host fails like Ray
        r = self.head.run("ray", "start", "--head", "--port=%d" % port, "--node-ip-address=127.0.0.1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ConnectionError: Ray is already running at 127.0.0.1:%d" % port, r.stderr)
        # join refused by fault
        self.set_faults(ray_join_refused=True)
        t = time.time()
        r = self.worker.run("ray", "start", "--address=127.0.0.1:%d" % port, "--node-ip-address=127.0.0.2",
                            "--num-gpus=1")
        self.assertNotEqual(r.returncode, 0)
        self.assertLess(time.time() - t, 6)
        self.assertIn("Unable to connect to GCS at 127.0.0.1:%d. Check that (1) Ray GCS with matching version"
                      % port, r.stderr)
        os.remove(self.faults)
        r = self.worker.run("ray", "start", "--address=127.0.0.1:%d" % port, "--node-ip-address=127.0.0.2",
                            "--num-gpus=1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Ray runtime started.", r.stdout)
        r = self.head.run("ray", "status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(" 1 node_"), 2, r.stdout)
        self.assertIn(" 0.0/2.0 GPU", r.stdout)
        r = self.head.py("import ray; ray.init(address='auto'); n = ray.nodes();"
                         "print(sorted(x['NodeManagerAddress'] for x in n if x['Alive']));"
                         "print(ray.cluster_resources()['GPU'])")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("\n")[:2], ["['127.0.0.1', '127.0.0.2']", "2.0"])

    def test_3_serve_tp2(self):
        port = free_port()
        key = "sekret"
        p = self.serve("serve", port, key=key)
        # bound but not listening: connection refused while loading
        time.sleep(0.5)
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        # port really is taken meanwhile
        p2 = self.serve("serve-dup", port)
        self.assertEqual(p2.wait(15), 1)
        self.assertIn("OSError: [Errno 98] Address already in use", self.read("serve-dup"))
        ok = wait_for(lambda: http("http://127.0.0.1:%d/health" % port)[0] == 200
                      if self._listening(port) else None, 20)
        self.assertTrue(ok, self.read("serve"))
        text = self.read("serve")
        self.assertIn("Application startup complete.", text)
        self.assertIn("(RayWorkerWrapper pid=", text)
        self.assertIn("ip=127.0.0.2)", text)
        self.assertIn("GPU KV cache size:", text)
        code, body = http("http://127.0.0.1:%d/v1/models" % port, key=key)
        self.assertEqual(code, 200)
        self.assertEqual(json.loads(body)["data"][0]["id"], "qwen3.5-122b")
        self.assertEqual(http("http://127.0.0.1:%d/v1/models" % port)[0], 401)
        self.assertEqual(http("http://127.0.0.1:%d/version" % port)[1], '{"version": "0.17.1"}')
        chat = {"model": "qwen3.5-122b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, chat, key=key)
        self.assertEqual(code, 200, body)
        self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 4)
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, chat)
        self.assertEqual((code, json.loads(body)), (401, {"error": "Unauthorized"}))
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, dict(chat, model="nope"), key=key)
        self.assertEqual(code, 404)
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, dict(chat, stream=True), key=key)
        self.assertEqual(code, 200)
        self.assertTrue(body.rstrip().endswith("data: [DONE]"), body)
        r = self.head.run("ray", "status")
        self.assertIn(" 2.0/2.0 GPU", r.stdout)
        self.assertIn("vllm:num_requests_running", http("http://127.0.0.1:%d/metrics" % port)[1])
        # SIGTERM: clean shutdown, port freed
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(10), 0)
        self.assertIn("Shutting down", self.read("serve"))
        self.assert_port_free(port)

    def assert_port_free(self, port):
        # "free" = a new server can bind+listen (TIME_WAIT leftovers allowed, like any server restart)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(1)
        s.close()

    def _listening(self, port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def test_4_faults(self):
        cases = [
            ("arch", {"arch_unsupported": True},
             "ValueError: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported for now."),
            ("oom", {"oom_during_load": True, "load_seconds": 2},
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
            ("crash", {"crash_after_seconds": 1, "load_seconds": 5},
             "RuntimeError: CUDA error: an illegal memory access was encountered"),
        ]
        procs = []
        for name, faults, cause in cases:
            self.set_faults(**faults)
            procs.append((name, cause, self.serve(name, free_port())))
            time.sleep(0.4)  # each reads the faults file at start
        for name, cause, p in procs:
            self.assertEqual(p.wait(20), 1, self.read(name))
            self.assert_cause_before_wrapper(self.read(name), cause)
        text = self.read("crash")
        line = [l for l in text.splitlines() if l.startswith("SIM_CRASH_AT ")][0]
        self.assertLess(abs(float(line.split()[1]) - time.time()), 30)
        self.assertLess(text.index("SIM_CRASH_AT"), text.index("illegal memory access"))

    def test_5_placement_timeout_after_worker_dies(self):
        # kill the worker's heartbeat daemon: node goes dead, then TP=2 cannot be placed
        with open(os.path.join(self.worker.env["RAY_SIM_DIR"], "sim", "daemons.json")) as f:
            daemons = json.load(f)
        os.kill(daemons[0]["pid"], signal.SIGKILL)
        code = ("import ray; ray.init(address='127.0.0.1:%d');"
                "print(sorted(x['NodeManagerAddress'] for x in ray.nodes() if x['Alive']))" % self.ray_port)
        ok = wait_for(lambda: self.head.py(code).stdout.strip() == "['127.0.0.1']", 8, 0.5)
        self.assertTrue(ok)
        self.assertIn("Recent failures:\n node_", self.head.run("ray", "status").stdout)
        self.set_faults(placement_timeout_seconds=2)
        p = self.serve("pg", free_port())
        self.assertEqual(p.wait(20), 1)
        self.assert_cause_before_wrapper(self.read("pg"), "ValueError: Cannot provide a placement group requiring "
                                                          "2 GPUs")

    def test_6_stop(self):
        r = self.head.run("ray", "stop")
        self.assertEqual(r.returncode, 0)
        self.assertIn("Stopped all 1 Ray processes.", r.stdout)
        r = self.worker.run("ray", "stop")
        self.assertEqual(r.returncode, 0)
        self.assertIn("Did not find any active Ray processes.", r.stdout)
        self.assert_port_free(self.ray_port)
        r = self.head.run("ray", "status")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Could not find any running Ray instance", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
