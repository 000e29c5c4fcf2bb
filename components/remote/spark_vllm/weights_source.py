# serve-weights: the head's side of head-then-copy. Serves exactly the files of its snapshot, to holders of the copy
# token only, and runs in the foreground of its command until every worker has reported its copy.
#
#   GET  /manifest.json   {"revision": <commit>, "files": {name: {"size": n, "sha256": hex}}}
#   GET  /files/<name>    one listed file; one byte range at most (RFC 9110 §14.1.2), else 416 (§15.5.17)
#   POST /done            {"host": ..., "ok": bool, "error": ...} from a worker when its copy ends
#
# Anything else is 404; no request without `Authorization: Bearer <token>` gets past 401 (RFC 6750 §3).
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import urllib.parse

from spark_vllm.common import fail, say
from spark_vllm.weights import COPY_CHUNK, SHA256_HEX, repo_dir, snapshot_dir, within

# One range, `bytes=first-[last]` or `bytes=-suffix` (RFC 9110 §14.1.2 byte-range-spec / suffix-range).
ONE_BYTE_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(COPY_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def served_files(repo, snap):
    """(name → {size, sha256}, name → path, problems). A blob named by a sha256 is that file's sha256 (the cache's
    LFS blobs: file_download.py REGEX_SHA256); any other file is hashed here. Files that resolve outside the
    model's repo folder (snapshots link to ../../blobs, nothing else is allowed) are problems, never served."""
    top = os.path.realpath(repo)
    files, paths, problems = {}, {}, []
    for root, _, names in os.walk(snap):  # does not descend into linked folders (os.walk followlinks=False)
        for base in names:
            path = os.path.join(root, base)
            name = os.path.relpath(path, snap)
            real = os.path.realpath(path)
            if not within(real, top):
                problems.append("%s resolves outside %s (to %s)" % (name, repo, real))
            elif not os.path.isfile(real):
                problems.append("%s has no data (a dangling link)" % name)
            else:
                blob = os.path.basename(real)
                sha = blob if SHA256_HEX.fullmatch(blob) else file_sha256(real)
                files[name] = {"size": os.path.getsize(real), "sha256": sha}
                paths[name] = path
    return files, paths, problems


def byte_range(header, size):
    """(start, end) inclusive for a Range header, None without one; raises ValueError when it is unsatisfiable or
    not one plain byte range: RFC 9110 §14.1.2 (last-pos < first-pos is invalid; first-pos >= length, or a zero
    suffix, is unsatisfiable). The RFC lets a server ignore a Range it cannot use; this one refuses it (416), so a
    client never takes a whole file for the piece it asked for."""
    if header is None:
        return None
    m = ONE_BYTE_RANGE.fullmatch(header.strip())
    if not m or not (m.group(1) or m.group(2)):
        raise ValueError("not one byte range")
    first, last = m.group(1), m.group(2)
    if not first:
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise ValueError("unsatisfiable")
        return max(0, size - suffix), size - 1
    start = int(first)
    end = size - 1 if not last else int(last)
    if end < start or start >= size:
        raise ValueError("unsatisfiable")
    return start, min(end, size - 1)


def read_record(path, revision):
    """The workers the record says received this revision in an earlier run of this server (a set)."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return set()
    return {h for h, r in record.items() if r == revision} if isinstance(record, dict) else set()


def write_record(path, host, revision):
    """Adds host → revision to the record: a temporary file of our own in its (private) directory, then a rename."""
    import tempfile
    try:
        with open(path) as f:
            record = json.load(f)
        record = record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        record = {}
    record[host] = revision
    fd, tmp = tempfile.mkstemp(prefix=".weights-copied.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise


class CopyState:
    """Which workers have reported, and when the server was last busy. `held`: the workers that received this
    revision in an earlier run (the record): silent is fine for them, as their copy command does not run again."""

    def __init__(self, workers, held=()):
        self.lock = threading.Lock()
        self.workers = list(workers)
        self.held = set(held)
        self.contacted, self.done, self.failed = set(), set(), {}
        self.active, self.last = 0, time.time()

    def busy(self, delta):
        with self.lock:
            self.active += delta
            self.last = time.time()

    def verdict(self, idle_seconds):
        """None while serving; else (exit code, lines)."""
        with self.lock:
            if self.active:
                return None
            finished = self.done | set(self.failed)
            if self.failed and self.contacted <= finished:
                return 1, ["%s: its copy failed: %s" % (h, e) for h, e in sorted(self.failed.items())]
            if set(self.workers) <= self.done:
                return 0, ["every worker holds the weights (%s); stopped serving" % ", ".join(self.workers)]
            if time.time() - self.last < idle_seconds:
                return None
            silent = [w for w in self.workers if w not in self.contacted]
            if not self.contacted:
                return 1, ["no worker asked for the weights within %d s (%s); check that their weights commands run"
                           % (idle_seconds, ", ".join(silent))]
            if not self.contacted <= finished:
                return 1, ["%s stopped without reporting within %d s" % (", ".join(sorted(self.contacted - finished)), idle_seconds)]
            # A worker that never asked and holds no copy from an earlier run failed before it reached this server (or
            # never started). Failing here keeps this command out of the state, so the next `up` runs it again beside
            # that worker's copy; stopping with success would leave the worker nothing to copy from on a re-run.
            missing = [w for w in silent if w not in self.held]
            if missing:
                return 1, ["%s did not ask for the weights within %d s and received no copy in an earlier run: its weights "
                           "command failed before it reached the head, or never started; run up again (this server runs "
                           "again for it)" % (", ".join(missing), idle_seconds)]
            return 0, ["%s hold the weights; %s did not ask within %d s (they received them in an earlier run)"
                       % (", ".join(sorted(self.done)), ", ".join(silent), idle_seconds)]


def make_handler(token, manifest_body, paths, top, state, on_done=None):
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, code, body=b"", headers=()):
            self.send_response(code)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def authorized(self):
            given = self.headers.get("Authorization", "")
            if hmac.compare_digest(given.encode("utf-8", "replace"), ("Bearer " + token).encode()):
                return True
            self.reply(401, b"copy token required\n", [("WWW-Authenticate", 'Bearer realm="spark-vllm weights"')])
            return False

        def do_GET(self):
            if not self.authorized():
                return
            path = urllib.parse.urlsplit(self.path).path
            if path == "/manifest.json":
                host = self.headers.get("X-Spark-Vllm-Host", "")
                with state.lock:
                    state.contacted.add(host or self.client_address[0])
                    state.last = time.time()
                return self.reply(200, manifest_body, [("Content-Type", "application/json")])
            name = urllib.parse.unquote(path[len("/files/"):]) if path.startswith("/files/") else None
            if name not in paths:
                return self.reply(404, b"not found\n")
            real = os.path.realpath(paths[name])
            if not within(real, top) or not os.path.isfile(real):  # changed since the manifest was made
                return self.reply(404, b"not found\n")
            size = os.path.getsize(real)
            try:
                rng = byte_range(self.headers.get("Range"), size)
            except ValueError:
                return self.reply(416, headers=[("Content-Range", "bytes */%d" % size)])
            start, end = rng if rng else (0, size - 1)
            state.busy(1)
            try:
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
                self.send_header("Content-Length", str(end - start + 1))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                with open(real, "rb") as f:
                    f.seek(start)
                    left = end - start + 1
                    while left > 0:
                        chunk = f.read(min(COPY_CHUNK, left))
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        left -= len(chunk)
            finally:
                state.busy(-1)

        def do_POST(self):
            if not self.authorized():
                return
            if urllib.parse.urlsplit(self.path).path != "/done":
                return self.reply(404, b"not found\n")
            try:
                msg = json.loads(self.rfile.read(min(int(self.headers.get("Content-Length", "0")), 4096)))
                host, ok = str(msg["host"])[:64], msg["ok"] is True
            except (ValueError, KeyError, TypeError):
                return self.reply(400, b"bad report\n")
            with state.lock:
                if ok and on_done and host in state.workers:
                    on_done(host)
                state.contacted.add(host)
                if ok:
                    state.done.add(host)
                else:
                    state.failed[host] = str(msg.get("error", ""))[:300]
                state.last = time.time()
            say("%s: %s" % (host, "holds the weights" if ok else "copy failed"))
            self.reply(200, b"ok\n")

    return Handler


def serve_weights(args):
    """Serves the head's snapshot to the workers' copies until each has reported (or none is left busy)."""
    import http.server
    import socketserver
    token = sys.stdin.readline().strip()
    host, model = args["host"], args["model"]
    if not token:
        fail(["%s: the copy token did not arrive on stdin" % host])
    snap = snapshot_dir(args["cacheDir"], model)
    if snap is None or not os.path.isdir(snap):
        fail(["%s: %s is not in %s/hub: nothing to copy" % (host, model, args["cacheDir"])])
    repo = repo_dir(args["cacheDir"], model)
    files, paths, problems = served_files(repo, snap)
    if problems:
        fail(["%s: refusing to serve %s:" % (host, snap)] + ["  " + p for p in problems[:20]])
    revision = os.path.basename(snap)
    body = json.dumps({"revision": revision, "files": files}, sort_keys=True).encode()
    # Which workers received this revision from an earlier run (logDir, private to the SSH user): a re-run after a
    # worker failed runs only that worker's copy again, and the others stay silent.
    record = args.get("record")
    state = CopyState(args["workers"], read_record(record, revision) if record else ())

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    on_done = (lambda host: write_record(record, host, revision)) if record else None
    server = Server((args["bind"], args["port"]), make_handler(token, body, paths, os.path.realpath(repo), state, on_done))
    pid_file = args.get("pidFile")
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    say("%s: serving %s (%d files, %.2f GB) on %s:%d to %s" % (host, model, len(files), sum(f["size"] for f in files.values()) / 1e9,
                                                             args["bind"], args["port"], ", ".join(state.workers)))
    try:
        while True:
            time.sleep(0.2)
            verdict = state.verdict(args.get("idleSeconds", 300))
            if verdict:
                break
    finally:
        server.shutdown()
        server.server_close()
        if pid_file and os.path.exists(pid_file):
            os.remove(pid_file)
    code, lines = verdict
    if code:
        fail(["%s: the weights copy did not finish:" % host] + ["  " + line for line in lines])
    say("%s: %s" % (host, lines[0]))
