# weights (present / download / copy from the head) and serve-weights (the head's side of the copy).
# The Hugging Face cache layout: <cache>/hub/models--<org>--<name>/{refs/main, snapshots/<rev>/...}.
import json
import os
import re
import shutil
import sys
import time
import urllib.error
import urllib.request

from spark_vllm.common import PROGRESS_EVERY, fail, read_file, say


def repo_dir(cache_dir, model_id):
    return os.path.join(cache_dir, "hub", "models--" + model_id.replace("/", "--"))


def snapshot_dir(cache_dir, model_id):
    repo = repo_dir(cache_dir, model_id)
    ref = read_file(os.path.join(repo, "refs", "main"))
    if ref:
        return os.path.join(repo, "snapshots", ref)
    snaps = os.path.join(repo, "snapshots")
    if os.path.isdir(snaps) and os.listdir(snaps):
        return os.path.join(snaps, sorted(os.listdir(snaps))[0])
    return None


def manifest(snap):
    files = {}
    for root, _, names in os.walk(snap):
        for name in names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, snap)
            try:
                files[rel] = os.stat(full).st_size  # follows the cache's symlinks to blobs
            except OSError:
                files[rel] = -1  # a dangling link: the blob is missing
    return files


def download(args, token):
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        fail(["%s: the image has no huggingface_hub to download with; put the weights in place and set "
              "spark-vllm:model.weights: present" % args["host"]])
    say("%s: downloading %s into %s" % (args["host"], args["model"], args["cacheDir"]))
    snapshot_download(repo_id=args["model"], cache_dir=os.path.join(args["cacheDir"], "hub"), token=token or None)


def serve_weights(args):
    """Serves the head's snapshot read-only on the fabric address for the workers' copies."""
    import http.server
    import socketserver
    snap = snapshot_dir(args["cacheDir"], args["model"])
    if snap is None:
        fail(["%s: %s is not in %s/hub: nothing to copy" % (args["host"], args["model"], args["cacheDir"])])
    listing = json.dumps({"revision": os.path.basename(snap), "files": manifest(snap)}).encode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=snap, **kw)

        def do_GET(self):
            if self.path == "/manifest.json":
                self.send_response(200)
                self.send_header("Content-Length", str(len(listing)))
                self.end_headers()
                self.wfile.write(listing)
                return
            rng = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
            path = self.translate_path(self.path)
            if not rng or not os.path.isfile(path):
                return super().do_GET()
            start, size = int(rng.group(1)), os.path.getsize(path)
            self.send_response(206)
            self.send_header("Content-Length", str(max(0, size - start)))
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
            self.end_headers()
            with open(path, "rb") as f:
                f.seek(start)
                shutil.copyfileobj(f, self.wfile, 1 << 20)

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    say("serving %s (%d files) on %s:%d" % (args["model"], len(json.loads(listing)["files"]), args["bind"], args["port"]))
    Server((args["bind"], args["port"]), Handler).serve_forever()


def fetch(url, dest, size):
    """Downloads url to dest, resuming a partial file; returns bytes transferred."""
    have = os.path.getsize(dest) if os.path.exists(dest) else 0
    if have == size:
        return 0
    if have > size:
        os.remove(dest)
        have = 0
    req = urllib.request.Request(url, headers={"Range": "bytes=%d-" % have} if have else {})
    with urllib.request.urlopen(req, timeout=60) as resp, open(dest, "ab" if have else "wb") as out:
        shutil.copyfileobj(resp, out, 1 << 20)
    return size - have


def copy_from(args, cache, model):
    """Copies the head's snapshot over the fabric: missing or short files only, several at once."""
    from concurrent.futures import ThreadPoolExecutor
    source = args["source"]
    try:
        with urllib.request.urlopen(source + "/manifest.json", timeout=30) as resp:
            remote = json.loads(resp.read())
    except (urllib.error.URLError, OSError) as e:
        fail(["%s: cannot reach the head's weights at %s (%s): check the fabric link" % (args["host"], source, e)])
    repo = repo_dir(cache, model)
    snap = os.path.join(repo, "snapshots", remote["revision"])
    total = sum(remote["files"].values())
    done = [sum(min(os.path.getsize(os.path.join(snap, f)), n) for f, n in remote["files"].items()
                if os.path.exists(os.path.join(snap, f)))]
    started = time.time()
    say("%s: copying %s from %s: %.2f of %.2f GB already here" % (args["host"], model, source, done[0] / 1e9, total / 1e9))
    os.makedirs(cache, exist_ok=True)
    free = shutil.disk_usage(cache).free
    if free < (total - done[0]) * 1.05:
        fail(["%s: %.1f GB free at %s but copying %s needs %.1f GB more: free disk space or use another cacheDir"
              % (args["host"], free / 1e9, cache, model, (total - done[0]) / 1e9)])

    def one(item):
        name, size = item
        dest = os.path.join(snap, name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.islink(dest) and not os.path.exists(dest):
            os.remove(dest)
        done[0] += fetch(source + "/" + urllib.request.quote(name), dest, size)

    with ThreadPoolExecutor(max_workers=4) as pool:
        pending = [pool.submit(one, item) for item in sorted(remote["files"].items())]
        next_progress = started + PROGRESS_EVERY
        while any(not f.done() for f in pending):
            time.sleep(0.5)
            if time.time() >= next_progress:
                say("%s: %.2f of %.2f GB (%d%%)" % (args["host"], done[0] / 1e9, total / 1e9, 100 * done[0] // max(total, 1)))
                next_progress += PROGRESS_EVERY
        for f in pending:
            f.result()
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(remote["revision"])
    say("%s: copy complete in %d s" % (args["host"], time.time() - started))


def weights(args):
    token = sys.stdin.readline().strip() if args.get("tokenOnStdin") else ""
    host, model, cache = args["host"], args["model"], args["cacheDir"]
    if args["strategy"] == "copy":
        copy_from(args, cache, model)
    snap = snapshot_dir(cache, model)
    if args["strategy"] == "download" and (snap is None or not os.path.isfile(os.path.join(snap, "config.json"))):
        need = args.get("expectedBytes") or 0
        free = shutil.disk_usage(cache).free if os.path.isdir(cache) else 0
        if need and free < need * 1.05:
            fail(["%s: %.1f GB free at %s but %s needs about %.1f GB: free disk space or use another cacheDir"
                  % (host, free / 1e9, cache, model, need / 1e9)])
        download(args, token)
        snap = snapshot_dir(cache, model)
    if snap is None or not os.path.isdir(snap):
        fail(["%s: %s is not in %s/hub: download it there (huggingface-cli download %s) or set "
              "spark-vllm:model.weights: download" % (host, model, cache, model)])
    files = manifest(snap)
    broken = sorted(f for f, size in files.items() if size < 0)
    if broken:
        fail(["%s: %s has files whose data is missing (dangling links): %s; download the model again"
              % (host, model, ", ".join(broken[:10]))])
    say(json.dumps({"host": host, "revision": os.path.basename(snap), "files": files,
                    "totalBytes": sum(files.values())}, sort_keys=True))
