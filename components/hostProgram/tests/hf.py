# A tiny Hugging Face cache for the tests: blobs, a snapshot of links to them, refs/main. As the hub names them
# (huggingface_hub file_download.py: blobs/<etag>): an LFS file's blob by its sha256, any other by its git blob id.
import hashlib
import os

REVISION = "0123456789abcdef0123456789abcdef01234567"


def blob_name(name, content):
    if name.endswith(".safetensors"):
        return hashlib.sha256(content).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def make_snapshot(cache, model, revision=REVISION, files=None):
    files = files or {"config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
                      "model-00001-of-00001.safetensors": b"\0" * 3000}
    repo = os.path.join(cache, "hub", "models--" + model.replace("/", "--"))
    snap = os.path.join(repo, "snapshots", revision)
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    for name, content in files.items():
        blob = os.path.join(repo, "blobs", blob_name(name, content))
        with open(blob, "wb") as f:
            f.write(content)
        link = os.path.join(snap, name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revision)
    return snap
