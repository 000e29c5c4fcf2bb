#!/usr/bin/env python3
"""Tests for the vllm stand-in (Ray and transformers are real: tests/sim/image-wheels.ts; their paths run end to end). No root, no Docker: local processes on 127.0.0.x.

Run:  python3 tests/sim/image/test_standins.py      (about 60-80 s)
"""
import json
import os
import re
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

    def py(self, code, extra=None):
        return subprocess.run([sys.executable, "-c", code], env=dict(self.env, **(extra or {})), capture_output=True,
                              text=True, timeout=20)


def http(url, data=None, key=None, timeout=5, scheme="Bearer"):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = scheme + " " + key
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
        # a model whose config vLLM 0.10.2-0.17.1 read with their own class (_CONFIG_REGISTRY qwen3_next): the stand-in
        # vLLM asks transformers (real, absent on this host) only for types outside that registry
        nxt = os.path.join(hf, "hub", "models--Qwen--Qwen3-Next-80B-A3B-Instruct")
        os.makedirs(os.path.join(nxt, "snapshots", "c0ffee"))
        os.makedirs(os.path.join(nxt, "refs"))
        with open(os.path.join(nxt, "refs", "main"), "w") as f:
            f.write("c0ffee")
        with open(os.path.join(nxt, "snapshots", "c0ffee", "config.json"), "w") as f:
            json.dump({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
                       "num_attention_heads": 16, "max_position_embeddings": 262144}, f)
        cls.release = os.path.join(cls.root, "release.json")
        with open(cls.release, "w") as f:
            json.dump({"version": "0.17.1", "architectures": ["Qwen3_5MoeForConditionalGeneration",
                                                              "Qwen3MoeForCausalLM"],
                       "transformers": "4.57.1", "load_seconds": 2}, f)
        cls.faults = os.path.join(hf, "sim-faults.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "VLLM_"))}
        env.update(HF_HOME=hf, VLLM_SIM_LOCK_DIR=os.path.join(cls.root, "locks"), VLLM_SIM_RELEASE=cls.release, PYTHONPATH=PYDIR,
                   VLLM_CACHE_ROOT=os.path.join(cls.root, "vllm-cache"))
        cls.env = env
        cls.head = Host(cls.root, "a", "127.0.0.1", env)
        cls.worker = Host(cls.root, "b", "127.0.0.2", env)

    @classmethod
    def tearDownClass(cls):
        for h in (cls.head, cls.worker):
            for p in h.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
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

    def serve(self, name, port, *extra, key=None, env=None):
        args = ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--served-model-name", "qwen3.5-122b",
                "--tensor-parallel-size", "1",
                "--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.85",
                "--max-model-len", "32768"] + list(extra)
        extra_env = {"VLLM_CONFIG_ROOT": os.path.join(self.root, "vllm-config")}
        extra_env.update({"VLLM_API_KEY": key} if key else {})
        extra_env.update(env or {})
        return self.head.spawn(*args, log=self.log(name), extra=extra_env)

    def read(self, name):
        with open(self.log(name)) as f:
            return f.read()

    def plain(self, name):
        """The log without vLLM's per-process prefixes, e.g. '(APIServer pid=12) '."""
        return re.sub(r"^\([A-Za-z0-9_]+ pid=\d+\) ", "", self.read(name), flags=re.M)

    def assert_cause_before_wrapper(self, text, cause):
        self.assertIn(cause, text)
        wrapper = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
        self.assertIn(wrapper, text)
        self.assertLess(text.index(cause), text.rindex(wrapper))

    # ------------------------------------------------------------------ tests (run in name order)
    def test_1_versions_and_imports(self):
        r = self.head.run("vllm", "--version")
        self.assertEqual(r.stdout.strip(), "0.17.1")
        r = self.head.py("import vllm\n"
                         "from vllm import ModelRegistry\n"
                         "from vllm.transformers_utils.config import _CONFIG_REGISTRY\n"
                         "print(vllm.__version__)\n"
                         "print(ModelRegistry.get_supported_archs())\n"
                         "print('qwen3_5_moe' in _CONFIG_REGISTRY, _CONFIG_REGISTRY['qwen3_5_moe'])")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "0.17.1")
        self.assertIn("Qwen3_5MoeForConditionalGeneration", lines[1])
        self.assertEqual(lines[2], "True Qwen3_5MoeConfig")
        # a release the stand-in has no copy of vLLM's registry for says so, naming the file to add it to
        with open(os.path.join(self.root, "release-9.9.9.json"), "w") as f:
            json.dump({"version": "9.9.9", "architectures": []}, f)
        r = self.head.py("import vllm.transformers_utils.config", extra={"VLLM_SIM_RELEASE": os.path.join(self.root, "release-9.9.9.json")})
        self.assertIn("ImportError: the stand-in vLLM has no copy of vLLM 9.9.9's _CONFIG_REGISTRY", r.stderr)

    def test_3_serve(self):
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
        self.assertIn("GPU KV cache size:", text)
        code, body = http("http://127.0.0.1:%d/v1/models" % port, key=key)
        self.assertEqual(code, 200)
        self.assertEqual(json.loads(body)["data"][0]["id"], "qwen3.5-122b")
        self.assertEqual(http("http://127.0.0.1:%d/v1/models" % port)[0], 401)
        # vLLM's verify_token takes the scheme in any case, the key exactly (tests VerifyToken below).
        self.assertEqual(http("http://127.0.0.1:%d/v1/models" % port, key=key, scheme="bEARER")[0], 200)
        self.assertEqual(http("http://127.0.0.1:%d/v1/models" % port, key=key.swapcase(), scheme="bearer")[0], 401)
        self.assertEqual(http("http://127.0.0.1:%d/version" % port)[1], '{"version": "0.17.1"}')
        chat = {"model": "qwen3.5-122b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, chat, key=key)
        self.assertEqual(code, 200, body)
        self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 4)
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, chat)
        self.assertEqual((code, json.loads(body)), (401, {"error": "Unauthorized"}))
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, dict(chat, model="nope"), key=key)
        self.assertEqual(code, 404)
        t0 = time.monotonic()
        code, body = http("http://127.0.0.1:%d/v1/chat/completions" % port, dict(chat, stream=True), key=key)
        self.assertEqual(code, 200)
        self.assertTrue(body.rstrip().endswith("data: [DONE]"), body)
        self.assertGreaterEqual(time.monotonic() - t0, 0.04 + 3 * 0.01, "ttft_ms 40, then 100 tokens/s")
        self.set_faults(ttft_ms=0, tokens_per_second=10)
        t0 = time.monotonic()
        self.assertEqual(http("http://127.0.0.1:%d/v1/chat/completions" % port, dict(chat, stream=True), key=key)[0], 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3, "4 tokens at 10 tokens/s")
        self.set_faults()
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
            # each reads the faults file at start: wait for its first line before writing the next one
            wait_for(lambda: os.path.getsize(self.log(name)) > 0, 15, 0.05)
        for name, cause, p in procs:
            self.assertEqual(p.wait(20), 1, self.read(name))
            self.assert_cause_before_wrapper(self.read(name), cause)
        text = self.read("crash")
        line = [l for l in text.splitlines() if l.startswith("SIM_CRASH_AT ")][0]
        self.assertLess(abs(float(line.split()[1]) - time.time()), 30)
        self.assertLess(text.index("SIM_CRASH_AT"), text.index("illegal memory access"))

    # ------------------------------------------------------------------ second round: mp launch, GB10 memory, images
    def release_file(self, name, **fields):
        with open(self.release) as f:
            data = json.load(f)
        data.update(fields)
        path = os.path.join(self.root, "release-%s.json" % name)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def image_copy(self, name, release):
        """The stand-in tree as tests/sim/image.ts stages it for a tag (no ray package or CLI when release.ray is null)."""
        dest = os.path.join(self.root, "image-" + name)
        no_ray = release.get("ray", "x") is None
        ignore = lambda d, names: [n for n in names if n == "__pycache__" or (no_ray and n == "ray")]
        shutil.copytree(BIN, os.path.join(dest, "bin"), ignore=ignore)
        shutil.copytree(PYDIR, os.path.join(dest, "python"), ignore=ignore)
        return dest

    def serve1(self, name, *extra, env=None, port=None, host=None, binary=None, model="Qwen/Qwen3.5-122B-A10B-FP8"):
        """Single-host launch (TP=1): plain `vllm serve`, no Ray, no executor-backend flag."""
        port = port or free_port()
        args = ["vllm", "serve", model, "--served-model-name", "qwen3.5-122b",
                "--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.85",
                "--max-model-len", "32768"] + list(extra)
        h = host or self.head
        if binary:
            f = open(self.log(name), "w")
            p = subprocess.Popen([binary] + args[1:], env=dict(h.env, **(env or {})), stdout=f,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            f.close()
            h.procs.append(p)
        else:
            p = h.spawn(*args, log=self.log(name), extra=env)
        return p, port

    def wait_healthy(self, port, p, name, timeout=30):
        ok = wait_for(lambda: (p.poll() is not None and "dead") or
                      (self._listening(port) and http("http://127.0.0.1:%d/health" % port)[0] == 200), timeout)
        self.assertEqual(ok, True, self.read(name))

    def stop(self, p):
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(15), 0)

    def test_7_mp_two_nodes(self):
        # vLLM's own multi-node launch (vllm-project/vllm#23691): no Ray, one `vllm serve` per host
        mport, port = free_port(), free_port()
        common = ["--tensor-parallel-size", "2", "--nnodes", "2", "--master-addr", "127.0.0.1",
                  "--master-port", str(mport)]
        head, _ = self.serve1("mp-head", "--node-rank", "0", *common, port=port)
        time.sleep(1.0)
        self.assertIsNone(head.poll(), self.read("mp-head"))
        self.assertNotIn("Application startup complete.", self.read("mp-head"), "the head waits for every node")
        worker = self.worker.spawn("vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--max-model-len", "32768",
                                   "--gpu-memory-utilization", "0.85", "--node-rank", "1", "--headless", *common,
                                   log=self.log("mp-worker"))
        self.wait_healthy(port, head, "mp-head")
        head_log, worker_log = self.read("mp-head"), self.read("mp-worker")
        self.assertIn("Application startup complete.", head_log)
        self.assertNotIn("RayWorkerWrapper", head_log)
        self.assertIn("(Worker_TP0 pid=", head_log)
        self.assertIn("world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:%d backend=nccl"
                      % mport, head_log)
        self.assertIn("Launching vLLM (v0.17.1) headless multiproc executor, with head node address 127.0.0.1:%d for "
                      "torch.distributed process group." % mport, worker_log)
        self.assertIn("(Worker_TP1 pid=", worker_log)
        self.assertIn("world_size=2 rank=1 local_rank=0", worker_log)
        self.assertNotIn("Uvicorn", worker_log + head_log)
        code, body = http("http://127.0.0.1:%d/v1/completions" % port, {"model": "qwen3.5-122b", "prompt": "hi",
                                                                         "max_tokens": 3})
        self.assertEqual(code, 200, body)
        self.stop(head)
        self.stop(worker)

    def test_8_mp_missing_node_and_misuse(self):
        # head alone: torch's TCPStore timeout on the head, after the real interval + 1
        self.set_faults(mp_join_timeout_seconds=2)
        head, _ = self.serve1("mp-alone", "-tp", "2", "--nnodes", "2", "--node-rank", "0",
                              "--master-addr", "127.0.0.1", "--master-port", str(free_port()))
        self.assertEqual(head.wait(20), 1, self.read("mp-alone"))
        self.assert_cause_before_wrapper(self.read("mp-alone"), "torch.distributed.DistStoreError: Timed out after 3 "
                                                                "seconds waiting for clients. 1/2 clients joined.")
        # headless node without a head: torch's client socket timeout, then the executor's exception
        self.set_faults(mp_connect_timeout_seconds=1)
        mport = free_port()
        w = self.worker.spawn("vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--max-model-len", "32768", "-tp", "2",
                              "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
                              str(mport), "--headless", log=self.log("mp-nohead"))
        self.assertEqual(w.wait(20), 1, self.read("mp-nohead"))
        text = self.read("mp-nohead")
        self.assertIn("[c10d] The client socket has timed out after 1000ms while trying to connect to (127.0.0.1, %d)."
                      % mport, text)
        self.assertIn("torch.distributed.DistNetworkError: The client socket has timed out after 1000ms", text)
        self.assertIn("WorkerProc failed to start.", text)
        self.assertLess(text.index("DistNetworkError"), text.rindex(
            "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace "
            "for root cause."))
        os.remove(self.faults)
        # --nnodes with the Ray backend; TP 2 on one host without --nnodes or Ray (vllm/config/parallel.py)
        p, _ = self.serve1("mp-ray", "-tp", "2", "--nnodes", "2", "--node-rank", "0", "--distributed-executor-backend",
                           "ray")
        self.assertEqual(p.wait(15), 1)
        self.assertIn("Value error, nnodes > 1 can only be set when distributed executor backend is mp, uni or "
                      "external_launcher.", self.read("mp-ray"))
        p, _ = self.serve1("tp2-alone", "-tp", "2")
        self.assertEqual(p.wait(15), 1)
        self.assertIn("World size (2) is larger than the number of available GPUs (1) in this node. If this is "
                      "intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n"
                      "- multiprocessing, set '--nnodes' appropriately.", self.plain("tp2-alone"))
        # vLLM before 0.11 has no multi-node flags at all: argparse refuses them
        old = self.release_file("old", version="0.10.2")
        p, _ = self.serve1("mp-old", "-tp", "2", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                           env={"VLLM_SIM_RELEASE": old})
        self.assertEqual(p.wait(15), 2)
        self.assertIn("vllm serve: error: unrecognized arguments: --nnodes 2 --node-rank 0 --master-addr 127.0.0.1",
                      self.read("mp-old"))

    def test_9_page_cache_flush_and_held_memory(self):
        # the page cache eats CUDA's free figure: vLLM before 0.11.1 takes that one and refuses (vllm/v1/worker/utils.py
        # request_memory); from 0.11.1 a GB10's free figure is MemAvailable, where the page cache counts (components/knowledge/images.ts [uma-free])
        self.set_faults(page_cache_gib=20)
        r = self.head.py("import simcommon as sc, json, psutil; print(json.dumps(sc.gpu_memory())); print(sc.mem_get_info()); "
                         "print(round(psutil.virtual_memory().available / 2**30, 2))")
        self.assertEqual(r.returncode, 0, r.stderr)
        mem = json.loads(r.stdout.splitlines()[0])
        self.assertEqual((mem["total_gib"], mem["free_gib"], mem["page_cache_gib"]), (121.69, 92.0, 20.0))
        self.assertEqual(r.stdout.splitlines()[2], "112.0")
        p, port = self.serve1("pagecache-new")
        self.wait_healthy(port, p, "pagecache-new")
        self.stop(p)
        # vLLM 0.11.0 knows no Qwen3.5 (neither does its transformers): a model it serves, Qwen3-Next
        old = self.release_file("mem-0110", version="0.11.0", architectures=["Qwen3NextForCausalLM"])
        p, _ = self.serve1("pagecache", env={"VLLM_SIM_RELEASE": old}, model="Qwen/Qwen3-Next-80B-A3B-Instruct")
        self.assertEqual(p.wait(20), 1)
        self.assert_cause_before_wrapper(self.read("pagecache"), (
            "ValueError: Free memory on device cuda:0 (92.00/121.69 GiB) on startup is less than desired GPU memory "
            "utilization (0.85, 103.44 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
            "processes."))
        # the sim's stand-in for `sync; echo 3 > /proc/sys/vm/drop_caches`
        time.sleep(0.05)
        r = subprocess.run([sys.executable, os.path.join(PYDIR, "simcommon.py"), "drop-caches"], env=self.head.env,
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([sys.executable, os.path.join(PYDIR, "simcommon.py"), "gpu"], env=self.head.env,
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(json.loads(r.stdout)["free_gib"], 112.0)
        p, port = self.serve1("flushed")
        self.wait_healthy(port, p, "flushed")
        self.stop(p)
        # new faults written after the flush count again; memory held by another process is not flushable
        time.sleep(0.05)
        self.set_faults(memory_held_gib=15)
        subprocess.run([sys.executable, os.path.join(PYDIR, "simcommon.py"), "drop-caches"], env=self.head.env,
                       timeout=10)
        p, _ = self.serve1("held")
        self.assertEqual(p.wait(20), 1)
        self.assertIn("Free memory on device cuda:0 (97.00/121.69 GiB) on startup", self.read("held"))
        self.set_faults(page_cache_gib=30)
        self.assertEqual(json.loads(subprocess.run(
            [sys.executable, os.path.join(PYDIR, "simcommon.py"), "gpu"], env=self.head.env, capture_output=True,
            text=True, timeout=10).stdout)["page_cache_gib"], 30.0, "a flush before the faults were set does not count")

    def test_93_torch_sees_the_same_gb10(self):
        # torch/_sim_gb10.py: what torch.cuda should report, from the same model as vllm serve's start-up check
        self.set_faults(page_cache_gib=10, memory_held_gib=2.5)
        code = ("import torch._sim_gb10 as g\n"
                "f, t = g.mem_get_info(); print(round(f / 2**30, 2), round(t / 2**30, 2))\n"
                "print(g.get_arch_list(), g.cuda_version(), g.torch_version(), g.get_device_capability())\n"
                "try:\n    g.check_kernels(); print('ok')\nexcept RuntimeError as e:\n    print(type(e).__name__, e)")
        r = self.head.py(code)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "99.5 121.69")
        self.assertIn("'sm_120'", lines[1])
        self.assertEqual(lines[2], "ok")
        new = self.release_file("too-new-torch", cuda="13.2", torch="2.12.0", cuda_arch_list=["sm_90", "compute_120"])
        r = subprocess.run([sys.executable, "-c", code], env=dict(self.head.env, VLLM_SIM_RELEASE=new),
                           capture_output=True, text=True, timeout=20)
        self.assertIn("AcceleratorError CUDA error: the provided PTX was compiled with an unsupported toolchain.",
                      r.stdout)

    def test_91_compile_cache(self):
        self.set_faults(compile_seconds=3)
        root = os.path.join(self.root, "compile-cache")
        t = time.time()
        p, port = self.serve1("cold", env={"VLLM_CACHE_ROOT": root})
        self.wait_healthy(port, p, "cold")
        cold = time.time() - t
        self.stop(p)
        t = time.time()
        p, port = self.serve1("warm", env={"VLLM_CACHE_ROOT": root})
        self.wait_healthy(port, p, "warm")
        warm = time.time() - t
        self.stop(p)
        self.assertRegex(self.read("cold"), r"Using cache directory: %s/torch_compile_cache/[0-9a-f]{10}/rank_0_0/"
                                             r"backbone for vLLM's torch.compile" % root)
        self.assertRegex(self.read("cold"), r"Compiling a graph for compile range \(1, 8192\) takes 3\.\d\d s")
        self.assertRegex(self.read("warm"), r"Directly load the compiled graph\(s\) for compile range \(1, 8192\) from "
                                            r"the cache, took 0\.\d+ s")
        self.assertGreater(cold - warm, 2.0, (cold, warm))
        # other flags: another graph; --enforce-eager: no torch.compile at all
        p, port = self.serve1("other-len", "--kv-cache-dtype", "fp8", env={"VLLM_CACHE_ROOT": root})
        self.wait_healthy(port, p, "other-len")
        self.stop(p)
        self.assertIn("Compiling a graph", self.read("other-len"))
        p, port = self.serve1("eager", "--enforce-eager", env={"VLLM_CACHE_ROOT": root})
        self.wait_healthy(port, p, "eager")
        self.stop(p)
        self.assertNotIn("torch.compile", self.read("eager"))

    def test_92_bad_images(self):
        # no-ray: the image has neither the ray package nor the CLI; vLLM's own error for the Ray backend
        rel = {"ray": None}
        img = self.image_copy("no-ray", rel)
        norel = self.release_file("no-ray", **rel)
        env = {"VLLM_SIM_RELEASE": norel, "PYTHONPATH": os.path.join(img, "python")}
        self.assertFalse(os.path.exists(os.path.join(img, "bin", "ray")))
        r = subprocess.run([sys.executable, "-c", "import ray"], env=dict(self.head.env, **env), capture_output=True,
                           text=True, timeout=10)
        self.assertIn("ModuleNotFoundError: No module named 'ray'", r.stderr)
        p, _ = self.serve1("no-ray", "-tp", "2", "--distributed-executor-backend", "ray", env=env,
                           binary=os.path.join(img, "bin", "vllm"))
        self.assertEqual(p.wait(15), 1)
        self.assertIn("pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
                      "  Value error, Failed to import Ray: No module named 'ray'.Please install Ray with "
                      "`pip install ray`.", self.plain("no-ray"))
        # ... while the Ray-free multi-node launch needs no Ray
        p, _ = self.serve1("no-ray-mp", "-tp", "2", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                           "127.0.0.1", "--master-port", str(free_port()), env=dict(env, VLLM_SIM_FAULTS=os.devnull),
                           binary=os.path.join(img, "bin", "vllm"))
        time.sleep(1.5)
        self.assertIsNone(p.poll(), self.read("no-ray-mp"))
        p.kill()
        p.wait()
        # no-sm12x: torch's device warning, then CUDA's error at the first kernel
        nosm = self.release_file("no-sm12x", cuda="12.6",
                                 cuda_arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])
        p, _ = self.serve1("no-sm12x", env={"VLLM_SIM_RELEASE": nosm})
        self.assertEqual(p.wait(20), 1)
        text = self.read("no-sm12x")
        self.assertIn("NVIDIA GB10 with CUDA capability sm_121 is not compatible with the current PyTorch installation.\n"
                      "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
                      self.plain("no-sm12x"))
        self.assert_cause_before_wrapper(text, "torch.AcceleratorError: CUDA error: no kernel image is available for "
                                               "execution on the device")
        self.assertIn("Search for `cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
                      "group__CUDART__TYPES.html for more information.", text)
        # cuda-too-new: CUDA 13.2 with PTX only for Blackwell on the 580 (CUDA 13.0) driver
        new = self.release_file("cuda-too-new", cuda="13.2", cuda_arch_list=["sm_80", "sm_90", "sm_100", "compute_120"])
        p, _ = self.serve1("cuda-too-new", env={"VLLM_SIM_RELEASE": new})
        self.assertEqual(p.wait(20), 1)
        self.assert_cause_before_wrapper(self.read("cuda-too-new"), "torch.AcceleratorError: CUDA error: the provided "
                                                                    "PTX was compiled with an unsupported toolchain.")
        # the same image on a driver that is new enough (fault driver_version) serves
        self.set_faults(driver_version="595.45.04")
        r = subprocess.run([sys.executable, os.path.join(PYDIR, "simcommon.py"), "gpu"],
                           env=dict(self.head.env, VLLM_SIM_RELEASE=new), capture_output=True, text=True, timeout=10)
        self.assertEqual(json.loads(r.stdout)["kernels"], "ptx")
        # a runtime of a newer major than the driver: PyTorch's "driver too old"
        major = self.release_file("cuda-major", cuda="13.0", cuda_arch_list=["sm_120"])
        self.set_faults(driver_version="575.57.08")
        p, _ = self.serve1("cuda-major", env={"VLLM_SIM_RELEASE": major})
        self.assertEqual(p.wait(20), 1)
        self.assertIn("RuntimeError: The NVIDIA driver on your system is too old (found version 12090).",
                      self.read("cuda-major"))

class RayEnvCarryOver(unittest.TestCase):
    """The stand-in's copy of vllm/ray/ray_env.py get_env_vars_to_copy, as RayDistributedExecutor calls it."""

    def setUp(self):
        sys.path.insert(0, PYDIR)
        from vllm import _sim_serve
        self.copy = _sim_serve.ray_env_vars_to_copy
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)

    def test_prefixes_extra_worker_specific_and_the_exclusion_file(self):
        env = {"NCCL_SOCKET_IFNAME": "a", "UCX_NET_DEVICES": "a", "HF_HOME": "/h", "HUGGING_FACE_HUB_TOKEN": "t",
               "LMCACHE_X": "1", "VLLM_API_KEY": "k", "VLLM_HOST_IP": "10.0.0.1", "GLOO_SOCKET_IFNAME": "a",
               "TP_SOCKET_IFNAME": "a", "PATH": "/bin", "PYTHONHASHSEED": "0"}
        names = self.copy(env, self.root)
        self.assertEqual({n for n in names if n in env},
                         {"NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "HF_HOME", "HUGGING_FACE_HUB_TOKEN", "LMCACHE_X",
                          "VLLM_API_KEY", "PYTHONHASHSEED"})
        with open(os.path.join(self.root, "ray_non_carry_over_env_vars.json"), "w") as f:
            json.dump(["VLLM_API_KEY", "NCCL_SOCKET_IFNAME"], f)
        names = self.copy(env, self.root)
        self.assertNotIn("VLLM_API_KEY", names)
        self.assertNotIn("NCCL_SOCKET_IFNAME", names)
        self.assertIn("UCX_NET_DEVICES", names)

    def test_user_extensions_and_a_broken_file(self):
        env = {"GLOO_SOCKET_IFNAME": "a", "TP_SOCKET_IFNAME": "a", "VLLM_RAY_ENV_VAR_PREFIXES_TO_COPY": "GLOO_, ",
               "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "TP_SOCKET_IFNAME"}
        with open(os.path.join(self.root, "ray_non_carry_over_env_vars.json"), "w") as f:
            f.write("[not json")
        names = self.copy(env, self.root)
        self.assertIn("GLOO_SOCKET_IFNAME", names)
        self.assertIn("TP_SOCKET_IFNAME", names)


class VerifyToken(unittest.TestCase):
    """The stand-in vLLM checks the key as vLLM's AuthenticationMiddleware.verify_token does (server_utils.py):
    the scheme before the first space in any case, then exactly the key."""

    def test_scheme_in_any_case_key_exactly(self):
        sys.path.insert(0, PYDIR)
        try:
            from vllm._sim_serve import verify_token
        finally:
            sys.path.remove(PYDIR)
        for header in ("Bearer k3Y", "bearer k3Y", "BEARER k3Y", "bEaReR k3Y"):
            self.assertTrue(verify_token("k3Y", header), header)
        for header in (None, "", "k3Y", "Bearer", "Bearer ", "Bearer k3y", "Bearer  k3Y", "Bearer k3Y ", "Basic k3Y", "Bearerk3Y", "Token k3Y"):
            self.assertFalse(verify_token("k3Y", header), repr(header))


class VllmOpsStandIn(unittest.TestCase):
    """vllm._custom_ops as the compat check asks it (components/hostProgram/spark_vllm/kernels.py): the capability queries and
    the CUTLASS FP8 GEMM / NVFP4 quantization kernels, answering as vLLM's C++ does for release.json vllm_kernels."""

    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)

    def ops(self, release, code):
        """Runs `code` (with ops, torch and run(f) → the error text or None) in the stand-in image's Python."""
        path = os.path.join(self.root, "release.json")
        with open(path, "w") as f:
            json.dump(release, f)
        prelude = ("import json, torch\nfrom vllm import _custom_ops as ops\n"
                   "def run(f):\n    try:\n        f()\n        return None\n"
                   "    except Exception as e:\n        return '%s: %s' % (type(e).__name__, e)\n"
                   "a = torch.ones(16, 128, dtype=torch.bfloat16, device='cuda').to(torch.float8_e4m3fn)\n"
                   "b = torch.ones(128, 128, dtype=torch.bfloat16, device='cuda').to(torch.float8_e4m3fn).t()\n"
                   "s = torch.ones(1, dtype=torch.float32, device='cuda')\n"
                   "x = torch.ones(16, 128, dtype=torch.bfloat16, device='cuda')\n")
        r = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=20,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": PYDIR, "PYTHONDONTWRITEBYTECODE": "1",
                                "VLLM_SIM_RELEASE": path, "HF_HOME": self.root, "NVIDIA_VISIBLE_DEVICES": "all"})
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    GEMM = "print(json.dumps([ops.cutlass_scaled_mm_supports_fp8(121), ops.cutlass_scaled_mm_supports_block_fp8(121), run(lambda: ops.cutlass_scaled_mm(a, b, s, s, torch.bfloat16))]))"
    FP4 = "print(json.dumps([ops.cutlass_scaled_mm_supports_fp4(121), run(lambda: ops.scaled_fp4_quant(x, s))]))"

    def test_the_fp8_queries_answer_by_cuda_alone_and_the_gemm_fails_where_its_sm120_target_does_not_run(self):
        # vLLM 0.17.1's arm64 image: CUDA 12.9.1, SM120 kernels for sm_120a (components/knowledge/vllmKernels.ts)
        cu129 = {"version": "0.17.1", "cuda": "12.9", "vllm_kernels": {"cuda": "12.9.1", "scaled_mm_sm120": ["sm_120a"], "nvfp4_sm120": ["sm_120a"]}}
        self.assertEqual(self.ops(cu129, self.GEMM), [True, True, "RuntimeError: Error Internal"])
        cu130 = {"version": "0.17.1", "vllm_kernels": {"cuda": "13.0.1", "scaled_mm_sm120": ["sm_120f"], "nvfp4_sm120": ["sm_120f"]}}
        self.assertEqual(self.ops(cu130, self.GEMM), [True, True, None])
        none = {"version": "0.17.1", "vllm_kernels": {"cuda": "12.6", "scaled_mm_sm120": []}}
        supports_fp8, supports_block, error = self.ops(none, self.GEMM)
        self.assertEqual((supports_fp8, supports_block), (True, False), "block FP8 needs CUDA 12.8 on capability >= 100")
        self.assertTrue(error.startswith("RuntimeError: Expected a.dtype() == torch::kInt8 to be true, but got false."), error)

    BLOCK_GEMM = ("sa = torch.ones(1, 40, dtype=torch.float32, device='cuda')\nsb = torch.ones(40, 128, dtype=torch.float32, device='cuda')\n"
                  "print(json.dumps([run(lambda: ops.cutlass_scaled_mm(a, b, s, s, torch.bfloat16)), run(lambda: ops.cutlass_scaled_mm(a, b, sa, sb, torch.bfloat16))]))")

    def test_a_build_for_12_0_only_fails_both_fp8_gemms_with_error_internal_as_on_a_real_gb10(self):
        # vllm-project/vllm#43367: the 120a build fails in run() with "Error Internal" on a GB10
        for targets in (["sm_120a"], ["sm_100a", "sm_120a"]):
            self.assertEqual(self.ops({"version": "0.20.0", "vllm_kernels": {"cuda": "12.9.1", "scaled_mm_sm120": targets}}, self.BLOCK_GEMM),
                             ["RuntimeError: Error Internal"] * 2, targets)

    def test_a_12_1_cubin_traps_the_fp8_gemm_its_release_wraps_in_enable_sm120_only(self):
        trap = "AcceleratorError: CUDA error: unspecified launch failure"
        native = {"cuda": "12.9.1", "scaled_mm_sm120": ["sm_120a", "sm_121a"]}
        per_tensor, block = self.ops({"version": "0.20.0", "vllm_kernels": native}, self.BLOCK_GEMM)
        self.assertTrue(per_tensor.startswith(trap), per_tensor)
        self.assertIsNone(block, "the block GEMM is enable_sm120_family from 0.17.1")
        self.assertEqual(self.ops({"version": "0.33.0", "vllm_kernels": native}, self.BLOCK_GEMM), [None, None], "vllm-project/vllm#41215")
        per_tensor, block = self.ops({"version": "0.14.0", "vllm_kernels": native}, self.BLOCK_GEMM)
        self.assertIsNone(per_tensor)
        self.assertTrue(block.startswith(trap), block)
        # a sm_120f cubin is compiled for 12.0: no guard traps, whatever the release
        self.assertEqual(self.ops({"version": "0.20.0", "vllm_kernels": {"cuda": "13.0.2", "scaled_mm_sm120": ["sm_120f"]}}, self.BLOCK_GEMM), [None, None])

    def test_the_fp4_query_checks_the_build_from_0_20_and_the_quantization_kernel_needs_a_target_that_runs(self):
        built_120a = {"cuda": "12.9.1", "nvfp4_sm120": ["sm_120a"], "nvfp4_sm100": ["sm_100a"]}
        supports, error = self.ops({"version": "0.17.1", "vllm_kernels": built_120a}, self.FP4)
        self.assertTrue(supports)
        self.assertTrue(error.startswith("AcceleratorError: CUDA error: no kernel image is available for execution on the device"), error)
        self.assertEqual(self.ops({"version": "0.20.0", "vllm_kernels": {"cuda": "12.9.1", "nvfp4_sm120": []}}, self.FP4),
                         [False, "NotImplementedError: No compiled nvfp4 quantization kernel"])
        self.assertEqual(self.ops({"version": "0.20.0", "vllm_kernels": {"cuda": "13.0.2", "nvfp4_sm120": ["sm_120f"]}}, self.FP4), [True, None])

    def test_without_vllm_kernels_the_build_follows_the_images_cuda_and_arch_list(self):
        self.assertEqual(self.ops({"cuda": "13.0", "cuda_arch_list": ["sm_90", "sm_120"]}, self.GEMM)[2], None)
        self.assertEqual(self.ops({"cuda": "12.9", "cuda_arch_list": ["sm_90", "sm_120"]}, self.GEMM)[2], "RuntimeError: Error Internal")

    def test_the_quantization_registry_and_flashinfer(self):
        out = self.ops({"flashinfer": True}, "from vllm.model_executor.layers.quantization import get_quantization_config as g\n"
                       "from vllm.utils.flashinfer import has_flashinfer\n"
                       "print(json.dumps([g('fp8').get_min_capability(), g('modelopt').get_min_capability(), run(lambda: g('nope')), has_flashinfer()]))")
        self.assertEqual(out, [75, 89, "ValueError: Invalid quantization method: nope", True])


if __name__ == "__main__":
    unittest.main(verbosity=2)
