import contextlib
import io
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest

from spark_vllm import weights as w
from tests.hf import make_snapshot


def call(fn, *args):
    """(exit code, stdout lines, stderr lines) of one subcommand function."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            fn(*args)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue().splitlines(), err.getvalue().splitlines()


class Paths(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.cache)

    def test_repo_dir_follows_the_hub_layout(self):
        self.assertEqual(w.repo_dir("/c", "Qwen/Qwen3.5-122B-A10B-FP8"), "/c/hub/models--Qwen--Qwen3.5-122B-A10B-FP8")

    def test_snapshot_from_refs_main_else_the_first_snapshot_else_none(self):
        self.assertIsNone(w.snapshot_dir(self.cache, "org/m"))
        snap = make_snapshot(self.cache, "org/m", "rev2")
        self.assertEqual(w.snapshot_dir(self.cache, "org/m"), snap)
        os.makedirs(os.path.join(os.path.dirname(snap), "rev1"))
        os.remove(os.path.join(w.repo_dir(self.cache, "org/m"), "refs", "main"))
        self.assertEqual(w.snapshot_dir(self.cache, "org/m"), os.path.join(os.path.dirname(snap), "rev1"))

    def test_manifest_follows_links_and_marks_missing_blobs(self):
        snap = make_snapshot(self.cache, "org/m", files={"config.json": b"{}", "sub/shard.safetensors": b"12345"})
        self.assertEqual(w.manifest(snap), {"config.json": 2, os.path.join("sub", "shard.safetensors"): 5})
        os.remove(os.path.realpath(os.path.join(snap, "config.json")))
        self.assertEqual(w.manifest(snap)["config.json"], -1)

    def test_present_lists_files_or_names_the_fix(self):
        snap = make_snapshot(self.cache, "org/m")
        code, out, _ = call(w.weights, {"host": "spark-b", "model": "org/m", "cacheDir": self.cache, "strategy": "present"})
        self.assertEqual(code, 0)
        listing = json.loads(out[-1])
        self.assertEqual(listing["revision"], "abc123")
        self.assertEqual(listing["totalBytes"], sum(listing["files"].values()))
        code, _, err = call(w.weights, {"host": "spark-b", "model": "org/absent", "cacheDir": self.cache, "strategy": "present"})
        self.assertEqual(code, 1)
        self.assertEqual(err, ["spark-b: org/absent is not in %s/hub: download it there (huggingface-cli download org/absent) "
                               "or set spark-vllm:model.weights: download" % self.cache])
        os.remove(os.path.realpath(os.path.join(snap, "config.json")))
        code, _, err = call(w.weights, {"host": "spark-b", "model": "org/m", "cacheDir": self.cache, "strategy": "present"})
        self.assertEqual(err, ["spark-b: org/m has files whose data is missing (dangling links): config.json; download the model again"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Copy(unittest.TestCase):
    def test_a_worker_copies_the_heads_snapshot_and_completes_a_partial_file(self):
        head, worker = tempfile.mkdtemp(), tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, head)
        self.addCleanup(shutil.rmtree, worker)
        shard = bytes(range(256)) * 40
        make_snapshot(head, "org/m", files={"config.json": b"{}", "shard.safetensors": shard})
        partial = os.path.join(worker, "hub", "models--org--m", "snapshots", "abc123", "shard.safetensors")
        os.makedirs(os.path.dirname(partial))
        with open(partial, "wb") as f:
            f.write(shard[:1000])
        port = free_port()
        with contextlib.redirect_stdout(io.StringIO()):
            threading.Thread(target=w.serve_weights, daemon=True, args=(
                {"host": "spark-a", "model": "org/m", "cacheDir": head, "bind": "127.0.0.1", "port": port},)).start()
            for _ in range(50):
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
        args = {"host": "spark-b", "model": "org/m", "cacheDir": worker, "strategy": "copy", "source": "http://127.0.0.1:%d" % port}
        code, out, err = call(w.weights, args)
        self.assertEqual(code, 0, err)
        self.assertTrue(out[0].startswith("spark-b: copying org/m from http://127.0.0.1:%d: 0.00 of 0.00 GB already here" % port), out[0])
        with open(partial, "rb") as f:
            self.assertEqual(f.read(), shard)
        self.assertEqual(json.loads(out[-1])["files"], {"config.json": 2, "shard.safetensors": len(shard)})
        with open(os.path.join(worker, "hub", "models--org--m", "refs", "main")) as f:
            self.assertEqual(f.read(), "abc123")

    def test_an_unreachable_head_names_the_fabric(self):
        code, _, err = call(w.weights, {"host": "spark-b", "model": "org/m", "cacheDir": "/tmp", "strategy": "copy",
                                        "source": "http://127.0.0.1:1"})
        self.assertEqual(code, 1)
        self.assertTrue(err[0].startswith("spark-b: cannot reach the head's weights at http://127.0.0.1:1 ("), err)
        self.assertTrue(err[0].endswith("): check the fabric link"))


if __name__ == "__main__":
    unittest.main()
