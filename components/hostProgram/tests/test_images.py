import json
import os
import shutil
import stat
import unittest
import warnings
from unittest import mock

from spark_vllm import images
from tests.test_weights import call
from tests import scratch_dir

# Stand-ins on PATH: `docker` keeps one image ID in the file $STORE; `ssh` runs its command
# locally against the worker's store ($STORE.worker), or refuses when $SSH_REFUSE is set.
DOCKER = """#!/bin/sh
case "$1 $2" in
"image inspect") [ -s "$STORE" ] && cat "$STORE" && exit 0; echo "Error: No such image: $5" >&2; exit 1;;
"save "*) printf 'layer-%04d' $(seq 1 1000); exit 0;;
"load ") cat > "$STORE.tar"; echo sha256:1111 > "$STORE"; echo "Loaded image: $IMAGE"; exit 0;;
esac
exit 2
"""
SSH = """#!/bin/sh
[ -n "$SSH_REFUSE" ] && { echo "Permission denied (publickey)." >&2; exit 255; }
printf '%s\\n' "$@" > "$STORE.ssh-argv"
while [ "$1" = "-o" ]; do shift 2; done
shift
STORE="$STORE.worker" exec "$@"
"""


class ImageTransfer(unittest.TestCase):
    def setUp(self):
        self.dir = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.dir)
        for name, text in (("docker", DOCKER), ("ssh", SSH)):
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, stat.S_IRWXU)
        self.store = os.path.join(self.dir, "store")
        env = {"PATH": self.dir + os.pathsep + os.environ["PATH"], "STORE": self.store}
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        self.addCleanup(patcher.stop)
        # On failure the program exits with its docker pipes open; the process's end closes them.
        filters = warnings.catch_warnings()
        filters.__enter__()
        self.addCleanup(filters.__exit__, None, None, None)
        warnings.simplefilter("ignore", ResourceWarning)
        self.args = {"host": "spark-a", "image": "vllm:0.17.1",
                     "target": {"name": "spark-b", "user": "nvidia", "address": "192.168.100.11"}}

    def test_image_id_only_from_a_successful_inspect(self):
        self.assertEqual(images.image_id(["echo", "sha256:abc"]), "sha256:abc")
        self.assertIsNone(images.image_id(["echo", "Error"]))
        self.assertIsNone(images.image_id(["false"]))

    def test_copies_then_skips(self):
        with open(self.store, "w") as f:
            f.write("sha256:1111\n")
        code, out, err = call(images.image_transfer, self.args)
        self.assertEqual(code, 0, err)
        self.assertTrue(out[0].startswith("spark-a: sent 0.00 GB to spark-b in "), out)
        self.assertEqual(json.loads(out[-1]), {"host": "spark-b", "imageId": "sha256:1111"})
        self.assertEqual(os.path.getsize(self.store + ".worker.tar"), 10000)
        code, out, _ = call(images.image_transfer, self.args)
        self.assertEqual(out[0], "spark-b already holds vllm:0.17.1 (sha256:1111): skipped")

    def test_a_copy_that_arrives_different_is_refused(self):
        with open(self.store, "w") as f:
            f.write("sha256:2222\n")
        code, _, err = call(images.image_transfer, self.args)
        self.assertEqual(code, 1)
        self.assertEqual(err, ["spark-a: after the copy spark-b holds sha256:1111, not sha256:2222"])

    def test_a_pinned_worker_key_is_the_only_one_ssh_accepts(self):
        with open(self.store, "w") as f:
            f.write("sha256:1111\n")
        key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKUcZFdnMYt1+OQnP9uJD4s1CFnLWUciKxw5B95cRYc1"
        self.args["target"]["hostKey"] = key
        code, _, err = call(images.image_transfer, self.args)
        self.assertEqual(code, 0, err)
        with open(self.store + ".ssh-argv") as f:
            argv = f.read().splitlines()
        self.assertEqual(argv[:argv.index("nvidia@192.168.100.11") + 1], ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "StrictHostKeyChecking=yes",
                                     "-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=none",
                                     "-o", "HostKeyAlgorithms=ssh-ed25519", "-o", "KnownHostsCommand=/bin/echo * " + key,
                                     "nvidia@192.168.100.11"])
        self.assertEqual(images.pinned_key_options(None), [])

    def test_no_image_on_the_head_and_no_ssh_to_the_worker(self):
        code, _, err = call(images.image_transfer, self.args)
        self.assertEqual(err, ["spark-a: image vllm:0.17.1 is not on the head: build or pull it there first"])
        with open(self.store, "w") as f:
            f.write("sha256:1111\n")
        with mock.patch.dict(os.environ, {"SSH_REFUSE": "1"}):
            code, _, err = call(images.image_transfer, self.args)
        self.assertEqual(err, ["spark-a: cannot ssh to nvidia@192.168.100.11 over the fabric (Permission denied (publickey).): "
                               "the head needs key access to every worker for spark-vllm:imageSource: head"])


if __name__ == "__main__":
    unittest.main()
