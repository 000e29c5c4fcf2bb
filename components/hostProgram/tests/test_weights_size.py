# The model's real size before a download (the hub's listing, served here on loopback) or a launch (safetensors headers
# on disk), and the refusal with the figures when it cannot fit.
import http.server
import json
import shutil
import struct
import threading
import unittest

from spark_vllm import weights as w
from spark_vllm import weights_size as sz
from tests.hf import make_snapshot
from tests.test_weights import call
from tests import scratch_dir

GIB = 1024 ** 3
# Two Sparks, TP 2: each GPU holds 0.85 x 121.69 - 4 = 99.44 GiB of weights.
FIT = {"tensorParallelSize": 2, "pipelineParallelSize": 1, "gpuMemoryUtilization": 0.85, "usableGiB": 121.69, "reserveGiB": 4}


def declared(nbytes, name="w", dtype="F8_E4M3"):
    """A safetensors file whose header declares NBYTES of one tensor, without the data (as a sparse download would)."""
    header = json.dumps({"__metadata__": {"format": "pt"}, name: {"dtype": dtype, "shape": [nbytes], "data_offsets": [0, nbytes]}}).encode()
    return struct.pack("<Q", len(header)) + header


def real(tensors):
    """A complete safetensors file: TENSORS is [(name, nbytes)], BF16, data included."""
    header, offset = {}, 0
    for name, n in tensors:
        header[name] = {"dtype": "BF16", "shape": [n // 2], "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\1" * offset


class Headers(unittest.TestCase):
    def setUp(self):
        self.cache = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.cache)

    def test_sums_tensor_bytes_of_the_files_the_index_names(self):
        index = {"metadata": {"total_size": 3000}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
        snap = make_snapshot(self.cache, "org/m", files={
            "config.json": b"{}", "model.safetensors.index.json": json.dumps(index).encode(),
            "model-00001-of-00002.safetensors": real([("a", 1000), ("c", 1000)]),
            "model-00002-of-00002.safetensors": real([("b", 1000)]),
            # a consolidated copy beside the shards (Mistral's repositories): vLLM skips it, so must we
            "consolidated.safetensors": real([("a", 1000), ("b", 1000), ("c", 1000)])})
        self.assertEqual(sz.snapshot_weight_bytes(snap), (3000, 2))

    def test_without_an_index_every_safetensors_file_counts(self):
        snap = make_snapshot(self.cache, "org/m", files={"config.json": b"{}", "model.safetensors": declared(5 * GIB)})
        self.assertEqual(sz.snapshot_weight_bytes(snap), (5 * GIB, 1))

    def test_an_unreadable_header_or_no_weights_is_unknown(self):
        snap = make_snapshot(self.cache, "org/m", files={"config.json": b"{}", "model.safetensors": b"\0" * 3000})
        with self.assertRaisesRegex(sz.SizeUnknown, "model.safetensors has no readable safetensors header"):
            sz.snapshot_weight_bytes(snap)
        snap = make_snapshot(self.cache, "org/bin", files={"config.json": b"{}", "pytorch_model.bin": b"\0" * 10})
        with self.assertRaisesRegex(sz.SizeUnknown, "no safetensors weights"):
            sz.snapshot_weight_bytes(snap)
        snap = make_snapshot(self.cache, "org/huge-header", files={"config.json": b"{}", "model.safetensors": struct.pack("<Q", 200_000_000)})
        with self.assertRaisesRegex(sz.SizeUnknown, "200000000-byte header, more than safetensors allows"):
            sz.snapshot_weight_bytes(snap)


class Fit(unittest.TestCase):
    def test_figures_per_gpu(self):
        self.assertIsNone(sz.fit_problem("spark-a", "org/m", int(198 * GIB), 1, FIT, "x"))
        p = sz.fit_problem("spark-a", "meta-llama/Llama-3.1-405B-Instruct-FP8", int(378.5 * GIB), 86, FIT, "the snapshot's safetensors headers")
        self.assertEqual(p, "spark-a: meta-llama/Llama-3.1-405B-Instruct-FP8 has 378.50 GiB of weights (the snapshot's safetensors "
                            "headers, 86 files): 189.25 GiB per GPU under TP 2 x PP 1, but each GPU holds 99.44 GiB for them "
                            "(gpuMemoryUtilization 0.85 x 121.69 GiB usable, less 4 GiB reserve): the weights cannot fit. "
                            "Nothing was launched. Use at least 4 GPUs (hosts, with tensorParallelSize x pipelineParallelSize "
                            "to match), a smaller quantization of the model, or raise spark-vllm:vllm.gpuMemoryUtilization")

    def test_pipeline_stages_share_the_weights_too(self):
        fit = dict(FIT, tensorParallelSize=2, pipelineParallelSize=2)
        self.assertIsNone(sz.fit_problem("spark-a", "org/m", int(378.5 * GIB), 1, fit, "x"))


class Hub(http.server.BaseHTTPRequestHandler):
    pages = {}
    seen = []

    def do_GET(self):  # noqa: N802
        Hub.seen.append((self.path, self.headers.get("Authorization")))
        body, link = Hub.pages.get(self.path, (None, None))
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        if link:
            self.send_header("Link", '<http://127.0.0.1:%d%s>; rel="next"' % (self.server.server_address[1], link))
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *a):
        pass


class HubListing(unittest.TestCase):
    """The hub is not reachable from tests: its API, as huggingface_hub reads it, on loopback (HF_ENDPOINT)."""

    def setUp(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]
        Hub.seen = []
        shard = lambda i: "model-%05d-of-00086.safetensors" % i  # noqa: E731
        first = [{"type": "file", "path": "config.json", "size": 900},
                 {"type": "file", "path": "model.safetensors.index.json", "size": 40000},
                 {"type": "directory", "path": "original", "size": 0},
                 {"type": "file", "path": "original/consolidated.00.safetensors", "size": 10, "lfs": {"size": 400 * GIB, "oid": "ab" * 32, "pointerSize": 130}}]
        shards = [{"type": "file", "path": shard(i), "size": 130, "lfs": {"size": int(4.4 * GIB), "oid": "cd" * 32, "pointerSize": 130}} for i in range(1, 87)]
        Hub.pages = {
            "/api/models/meta-llama/Llama-3.1-405B-Instruct-FP8/tree/main?recursive=true": (first + shards[:50], "/page2"),
            "/page2": (shards[50:], None),
            "/meta-llama/Llama-3.1-405B-Instruct-FP8/resolve/main/model.safetensors.index.json": ({"weight_map": {"t%d" % i: shard(i) for i in range(1, 87)}}, None),
        }

    def test_lfs_sizes_of_the_indexed_shards_across_pages(self):
        size, files = sz.hub_weight_bytes("meta-llama/Llama-3.1-405B-Instruct-FP8", "hf_tok", endpoint=self.endpoint)
        self.assertEqual(files, 86)
        self.assertEqual(size, 86 * int(4.4 * GIB))
        self.assertEqual([a for _, a in Hub.seen], ["Bearer hf_tok"] * 3, "the token goes with every request")

    def test_a_download_that_cannot_fit_is_refused_before_it_starts(self):
        cache = scratch_dir(self)
        self.addCleanup(shutil.rmtree, cache)
        args = {"host": "spark-a", "model": "meta-llama/Llama-3.1-405B-Instruct-FP8", "cacheDir": cache, "strategy": "download", "fit": FIT}
        downloads = []
        real_download, w.download = w.download, lambda *a: downloads.append(a)
        self.addCleanup(setattr, w, "download", real_download)
        sz_env = sz.os.environ
        sz_env["HF_ENDPOINT"] = self.endpoint
        self.addCleanup(sz_env.pop, "HF_ENDPOINT")
        code, _, err = call(w.weights, args)
        self.assertEqual(code, 1)
        self.assertEqual(downloads, [], "nothing downloaded")
        self.assertRegex(err[0], r"^spark-a: meta-llama/Llama-3\.1-405B-Instruct-FP8 has 378\.40 GiB of weights \(the hub's file "
                                 r"listing, 86 files\): 189\.20 GiB per GPU under TP 2 x PP 1, but each GPU holds 99\.44 GiB .*"
                                 r"Nothing was downloaded or launched\. Use at least 4 GPUs")

    def test_an_unreachable_hub_is_said_and_the_download_goes_on(self):
        cache = scratch_dir(self)
        self.addCleanup(shutil.rmtree, cache)
        self.server.shutdown()
        args = {"host": "spark-a", "model": "org/m", "cacheDir": cache, "strategy": "download", "fit": FIT}
        downloads = []
        real_download, w.download = w.download, lambda a, t: (downloads.append(a), make_snapshot(cache, "org/m", files={"config.json": b"{}", "model.safetensors": declared(1000)}))
        self.addCleanup(setattr, w, "download", real_download)
        sz.os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
        self.addCleanup(sz.os.environ.pop, "HF_ENDPOINT")
        code, out, err = call(w.weights, args)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(downloads), 1)
        self.assertRegex(out[0], r"^spark-a: the size of org/m's weights is not known \(the hub at http://127\.0\.0\.1:9 could not be read .*\): not checked against memory before the download$")
        self.assertRegex(out[1], r"^spark-a: org/m has 0\.00 GiB of weights \(the snapshot's safetensors headers\)")


class OnDisk(unittest.TestCase):
    def test_present_weights_too_large_are_refused_before_launch_and_small_ones_listed(self):
        cache = scratch_dir(self)
        self.addCleanup(shutil.rmtree, cache)
        make_snapshot(cache, "org/big", files={"config.json": b"{}", "model.safetensors": declared(int(250 * GIB))})
        code, out, err = call(w.weights, {"host": "spark-b", "model": "org/big", "cacheDir": cache, "strategy": "present", "fit": FIT})
        self.assertEqual(code, 1)
        self.assertRegex(err[0], r"^spark-b: org/big has 250\.00 GiB of weights \(the snapshot's safetensors headers, 1 file\): "
                                 r"125\.00 GiB per GPU .* Nothing was launched\. Use at least 3 GPUs")
        self.assertFalse(any(line.startswith("{") for line in out), "no manifest: the gate never opens")
        make_snapshot(cache, "org/small", files={"config.json": b"{}", "model.safetensors": real([("a", 4096)])})
        code, out, err = call(w.weights, {"host": "spark-b", "model": "org/small", "cacheDir": cache, "strategy": "present", "fit": FIT})
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out[-1])["host"], "spark-b")


if __name__ == "__main__":
    unittest.main()
