# Issue 41 item 4: head-then-copy of a snapshot whose names share blobs (identical content: duplicated config or
# tokenizer files, empty __init__.py files), and blobs already on the worker that are not what their name says.
# In the hub's cache two snapshot names with identical content link to one blob (huggingface_hub file_download.py:
# `blob_path = os.path.join(storage_folder, "blobs", etag)`, the etag being the content's hash), so the head's
# manifest lists one sha256 under several names.
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import socket
import unittest

from spark_vllm import weights as w
from spark_vllm import weights_source as ws
from tests import scratch_dir
from tests.hf import REVISION, make_snapshot
from tests.test_weights import TOKEN, FakeHead, call, free_port, good_manifest, sha

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A snapshot as real repositories have them: a config duplicated under another name, the same tokenizer twice,
# empty __init__.py files (git's empty blob e69de29…; sha256 e3b0c442…), besides the weights.
DUPLICATED = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
    "original/config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
    "tokenizer.json": b'{"version": "1.0"}' * 500,
    "original/tokenizer.json": b'{"version": "1.0"}' * 500,
    "__init__.py": b"",
    "sub/__init__.py": b"",
    "sub/deeper/__init__.py": b"",
    "model-00001-of-00002.safetensors": bytes(range(256)) * 64,
    "model-00002-of-00002.safetensors": bytes(range(256)) * 64,
}


def start_server(test, head, workers=("spark-b",), idle=20, extra=None):
    """The head's real server in its own process, as on the head; (process, url)."""
    port = free_port()
    args = dict({"host": "spark-a", "model": "org/m", "cacheDir": head, "bind": "127.0.0.1", "port": port,
                 "workers": list(workers), "idleSeconds": idle}, **(extra or {}))
    server = subprocess.Popen(
        [sys.executable, "-c", "import json, sys; from spark_vllm.weights_source import serve_weights; serve_weights(json.loads(sys.argv[1]))",
         json.dumps(args)], cwd=TOOLS, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server.stdin.write(TOKEN + "\n")
    server.stdin.close()
    server.stdin = None

    def stop():
        if server.poll() is None:
            server.kill()
        server.communicate()
    test.addCleanup(stop)
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    return server, "http://127.0.0.1:%d" % port


def copy_args(cache, url, host="spark-b", **more):
    return dict({"host": host, "model": "org/m", "cacheDir": cache, "strategy": "copy", "source": url,
                 "tokenOnStdin": True, "waitSeconds": 10}, **more)


def blob_problems(repo):
    """Each blob whose content's sha256 is not its name, and each partial file left; [] when every blob is sound."""
    blobs = os.path.join(repo, "blobs")
    problems = []
    for name in sorted(os.listdir(blobs)):
        with open(os.path.join(blobs, name), "rb") as f:
            data = f.read()
        if sha(data) != name:
            problems.append("%s holds %d bytes hashing to %s" % (name, len(data), sha(data)))
    return problems


class DuplicateContent(unittest.TestCase):
    """The real server and the real copy over loopback."""

    def setUp(self):
        self.head = scratch_dir(self)
        make_snapshot(self.head, "org/m", files=DUPLICATED)

    def test_names_sharing_a_blob_are_fetched_once_and_every_name_links_to_it(self):
        # Several rounds: two threads meeting on one blob was a race (3 of 3 with a duplicated config, 1 of 6 with
        # two empty files in the runs); every round must copy cleanly.
        for round_ in range(4):
            worker = scratch_dir(self)
            server, url = start_server(self, self.head)
            code, out, err = call(w.weights, copy_args(worker, url), stdin=ws.worker_token(TOKEN, "spark-b") + "\n")
            self.assertEqual(code, 0, "round %d: %s" % (round_, err))
            repo = w.repo_dir(worker, "org/m")
            self.assertEqual(blob_problems(repo), [], "round %d" % round_)
            distinct = {sha(c) for c in DUPLICATED.values()}
            self.assertEqual(sorted(os.listdir(os.path.join(repo, "blobs"))), sorted(distinct), "one blob per distinct content, no partial file")
            snap = os.path.join(repo, "snapshots", REVISION)
            for name, content in DUPLICATED.items():
                link = os.path.join(snap, name)
                self.assertEqual(os.path.basename(os.readlink(link)), sha(content), name)
                with open(link, "rb") as f:
                    self.assertEqual(f.read(), content, name)
            self.assertEqual(json.loads(out[-1])["files"], {n: len(c) for n, c in DUPLICATED.items()})
            server.communicate(timeout=10)
            self.assertEqual(server.returncode, 0)

    def test_each_distinct_blob_is_requested_once(self):
        requests = []
        m = good_manifest(**DUPLICATED)
        head = FakeHead(self, m, DUPLICATED)
        handler = head.server.RequestHandlerClass
        get = handler.do_GET

        def counting(self_):
            requests.append(self_.path)
            get(self_)
        handler.do_GET = counting
        worker = scratch_dir(self)
        code, _, err = call(w.weights, copy_args(worker, head.url), stdin=TOKEN + "\n")
        self.assertEqual(code, 0, err)
        files = [r for r in requests if r.startswith("/files/")]
        # Empty content needs no request at all; every other distinct content exactly one.
        self.assertEqual(len(files), len({sha(c) for c in DUPLICATED.values() if c}), files)
        self.assertEqual(blob_problems(w.repo_dir(worker, "org/m")), [])


class ManifestSharingABlob(unittest.TestCase):
    def test_one_sha256_with_two_sizes_is_refused(self):
        m = good_manifest(**{"a.json": b"{}", "b.json": b"{}"})
        m["files"]["b.json"]["size"] = 3
        self.assertEqual(w.manifest_problems(m), ['files "a.json" and "b.json" have the same sha256 but sizes 2 and 3'])


class PresentBlobs(unittest.TestCase):
    """A blob already in the worker's cache under a sha256 name is kept only when its content hashes to that name."""

    def setUp(self):
        self.head = scratch_dir(self)
        self.worker = scratch_dir(self)
        self.files = {"config.json": b"{}", "model.safetensors": b"the real weights"}
        make_snapshot(self.head, "org/m", files=self.files)
        self.blobs = os.path.join(w.repo_dir(self.worker, "org/m"), "blobs")
        os.makedirs(self.blobs)

    def plant(self, content, data):
        with open(os.path.join(self.blobs, sha(content)), "wb") as f:
            f.write(data)

    def copy(self):
        server, url = start_server(self, self.head)
        code, out, err = call(w.weights, copy_args(self.worker, url), stdin=ws.worker_token(TOKEN, "spark-b") + "\n")
        self.assertEqual(code, 0, err)
        return out

    def test_a_blob_of_the_right_size_but_other_content_is_fetched_again(self):
        self.plant(b"the real weights", b"the EVIL weights")  # same length, other bytes
        out = self.copy()
        self.assertEqual(blob_problems(os.path.dirname(self.blobs)), [])
        with open(os.path.join(w.repo_dir(self.worker, "org/m"), "snapshots", REVISION, "model.safetensors"), "rb") as f:
            self.assertEqual(f.read(), b"the real weights")
        self.assertIn("spark-b: blobs/%s did not hash to its name: fetched again" % sha(b"the real weights"), out)

    def test_a_doubled_blob_left_by_an_earlier_copy_is_replaced(self):
        self.plant(b"{}", b"{}{}")  # what two threads appending to one partial file left
        self.copy()
        self.assertEqual(blob_problems(os.path.dirname(self.blobs)), [])

    def test_a_sound_blob_is_kept_and_not_fetched(self):
        self.plant(b"the real weights", b"the real weights")
        before = os.stat(os.path.join(self.blobs, sha(b"the real weights")))
        out = self.copy()
        after = os.stat(os.path.join(self.blobs, sha(b"the real weights")))
        self.assertEqual((before.st_ino, before.st_mtime_ns), (after.st_ino, after.st_mtime_ns), "kept as it was")
        self.assertTrue(out[0].startswith("spark-b: copying org/m from "), out)
        self.assertIn("GB already here", out[0])


class TwoCopiesOfOneBlob(unittest.TestCase):
    """Two copies writing one blob at once (a copy left running by an interrupted `up` beside the next one's): each
    waits for the other's partial file, and the blob is whole either way."""

    def test_concurrent_fetches_of_one_blob_leave_it_whole(self):
        content = bytes(range(256)) * 4096  # 1 MiB
        entry = {"size": len(content), "sha256": sha(content)}
        head = FakeHead(self, good_manifest(x=content), {"x": content})
        for _ in range(3):
            cache = scratch_dir(self)
            blob = os.path.join(cache, entry["sha256"])
            errors, barrier = [], threading.Barrier(4)

            def one():
                barrier.wait()
                try:
                    w.fetch_blob(head.url, TOKEN, "x", entry, blob)
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    errors.append(repr(e))
            threads = [threading.Thread(target=one) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            self.assertEqual(errors, [])
            with open(blob, "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), entry["sha256"])
            self.assertEqual(os.listdir(cache), [entry["sha256"]], "no partial file left")


if __name__ == "__main__":
    unittest.main()
