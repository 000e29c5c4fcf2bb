# serve-weights: the head's side of head-then-copy. Serves exactly the files of its snapshot, to holders of the copy
# token only, and runs in the foreground of its command until every worker has reported its copy.
#
#   GET  /manifest.json   {"revision": <commit>, "files": {name: {"size": n, "sha256": hex}}}
#   GET  /files/<name>    one listed file; one byte range at most (RFC 9110 §14.1.2), else 416 (§15.5.17)
#   POST /done            {"host": ..., "ok": bool, "error": ...} from a worker when its copy ends, about itself only
#
# Anything else is 404; no request without `Authorization: Bearer <worker token>` gets past 401 (RFC 6750 §3). The
# server holds the stack's copy token; each worker gets only its own token, derived from it (worker_token, mirrored by
# components/plan/copyToken.ts), so the token names the worker and a worker cannot report another one done.
#
# Issue 30: a client has HEADER_SECONDS to present its token (request line and headers; a connection that sends
# nothing is closed then), and /done takes exactly one plain Content-Length of at most DONE_BODY_MAX bytes (else 400,
# nothing read).
# Issue 41: connections are counted in two pools (copy_server). Until it has shown a worker's token a connection is
# one of at most max_keyless(workers); one more closes the oldest of them, not the new one, so a client that holds the
# pool (reopening each connection as it is closed) only ever closes its own, and a worker's connection, which shows its
# token within milliseconds of connecting, is the newest, not the oldest. A request without a valid token gets 401 and
# its connection is closed. Once its token matched, a connection leaves that pool for its worker's own,
# WORKER_CONNECTIONS at once (a 503 beyond, which the copy retries): keyless clients cannot fill it, and a worker's
# transfers never count against them.
import hashlib
import hmac
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.parse

from spark_vllm.common import fail, say
from spark_vllm.weights import COPY_CHUNK, SHA256_HEX, repo_dir, snapshot_dir, within

# One range, `bytes=first-[last]` or `bytes=-suffix` (RFC 9110 §14.1.2 byte-range-spec / suffix-range).
ONE_BYTE_RANGE = re.compile(r"bytes=(\d*)-(\d*)")

HEADER_SECONDS = 5
# Once the token is shown: the longest a read or a write may stall (a 1 MiB chunk, weights.COPY_CHUNK, on the fabric).
TRANSFER_STALL_SECONDS = 60
DONE_BODY_MAX = 4096
WORKER_TOKEN_CONTEXT = "spark-vllm weights worker "


def worker_token(token, host):
    """The token of one worker: HMAC-SHA256 of its name under the copy token, hex (components/plan/copyToken.ts)."""
    return hmac.new(token.encode("utf-8"), (WORKER_TOKEN_CONTEXT + host).encode("utf-8"), hashlib.sha256).hexdigest()


def max_keyless(workers):
    """Connections that have not shown a token yet: every worker's copy opens up to 4 fetches at once (weights.py
    copy_files) besides its manifest, keep-alive and report, each waiting here only until its headers are read; the
    rest is room, so that a client without the token must open this many connections faster than a worker's
    request arrives to close that one."""
    return 32 + 8 * len(workers)


# A worker's copy holds 4 fetches, a keep-alive or its manifest, and its report at once; room for a retried fetch
# whose old connection the server has not yet seen go.
WORKER_CONNECTIONS = 16
# socketserver's default listen backlog is 5: a burst of connections (a keyless client's) would fill it, and the
# kernel would then drop or refuse a worker's connection before this server ever saw it.
LISTEN_BACKLOG = 256


def strict_content_length(headers):
    """The one Content-Length of a request as an int, when it is plain digits within DONE_BODY_MAX; else None."""
    values = headers.get_all("Content-Length") or []
    if len(values) != 1 or headers.get("Transfer-Encoding") is not None or not re.fullmatch(r"[0-9]{1,7}", values[0].strip()):
        return None
    n = int(values[0].strip())
    return n if n <= DONE_BODY_MAX else None


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
    tokens = {("Bearer " + worker_token(token, w)).encode(): w for w in state.workers}

    class Handler(http.server.BaseHTTPRequestHandler):
        # StreamRequestHandler.setup puts this timeout on the connection: a read that waits longer ends it.
        timeout = HEADER_SECONDS

        def setup(self):
            super().setup()
            # The whole request head within HEADER_SECONDS, however slowly it trickles in (one byte per 4 s would
            # keep a per-read timeout happy for ever).
            self.deadline = threading.Timer(HEADER_SECONDS, self.expire)
            self.deadline.daemon = True
            self.deadline.start()

        def expire(self):
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def finish(self):
            self.deadline.cancel()
            try:
                super().finish()
            finally:
                self.server.release(self.connection, getattr(self, "admitted", None))

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
            """The worker whose token the request carries (every token compared, each in constant time), else None.
            A match moves the connection into its worker's own pool (copy_server admit): 503 when that is full."""
            given = self.headers.get("Authorization", "").encode("utf-8", "replace")
            who = None
            for expected, worker in tokens.items():
                if hmac.compare_digest(given, expected):
                    who = worker
            if who is None:
                self.reply(401, b"copy token required\n", [("WWW-Authenticate", 'Bearer realm="spark-vllm weights"')])
                return None
            admitted = self.server.admit(self.connection, who)
            if admitted is None:
                return None  # closed as the oldest keyless connection just before its token was read: the copy retries
            if not admitted:
                self.reply(503, b"too many connections for this worker\n", [("Retry-After", "1")])
                return None
            self.admitted = who
            self.deadline.cancel()
            self.connection.settimeout(TRANSFER_STALL_SECONDS)
            return who

        def do_GET(self):
            who = self.authorized()
            if who is None:
                return
            path = urllib.parse.urlsplit(self.path).path
            if path == "/manifest.json":
                with state.lock:
                    state.contacted.add(who)
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
            who = self.authorized()
            if who is None:
                return
            if urllib.parse.urlsplit(self.path).path != "/done":
                return self.reply(404, b"not found\n")
            length = strict_content_length(self.headers)
            if length is None:
                return self.reply(400, b"bad report: one Content-Length of at most %d bytes, no Transfer-Encoding\n" % DONE_BODY_MAX)
            try:
                msg = json.loads(self.rfile.read(length))
                host, ok = str(msg["host"])[:64], msg["ok"] is True
            except (ValueError, KeyError, TypeError):
                return self.reply(400, b"bad report\n")
            if host != who:
                return self.reply(403, b"a worker may only report its own copy\n")
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


def copy_server(address, handler, keyless_limit, worker_limit=WORKER_CONNECTIONS):
    """A threading HTTP server with two pools of connections (issue 41): at most KEYLESS_LIMIT that have not shown a
    token (one more closes the oldest of them), and WORKER_LIMIT per worker once its token matched (admit)."""
    import collections
    import http.server
    import socketserver

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = LISTEN_BACKLOG

        def __init__(self, *args, **kwargs):
            self.pool_lock = threading.Lock()
            self.keyless = collections.OrderedDict()  # connection -> None, oldest first, until its token matched
            self.per_worker = collections.Counter()
            super().__init__(*args, **kwargs)

        def process_request(self, request, client_address):
            with self.pool_lock:
                while len(self.keyless) >= keyless_limit:
                    oldest, _ = self.keyless.popitem(last=False)
                    try:
                        # Its thread, waiting for the headers, reads the end of the stream and returns.
                        oldest.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                self.keyless[request] = None
            try:
                super().process_request(request, client_address)
            except Exception:
                self.release(request, None)
                raise

        def admit(self, connection, worker):
            """True: the connection now counts against WORKER's pool; False: that pool is full; None: the connection
            was closed as the oldest keyless one before its token was read."""
            with self.pool_lock:
                if self.keyless.pop(connection, False) is False:
                    return None
                if self.per_worker[worker] >= worker_limit:
                    return False
                self.per_worker[worker] += 1
                return True

        def release(self, connection, worker):
            with self.pool_lock:
                self.keyless.pop(connection, None)
                if worker is not None:
                    self.per_worker[worker] -= 1

        def handle_error(self, request, client_address):
            # A client that hangs up or is timed out mid-request is its own business; anything else is printed.
            if not isinstance(sys.exc_info()[1], OSError):
                super().handle_error(request, client_address)

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.release(request, None)  # a handler that failed in setup never reached its finish

    return Server(address, handler)


def serve_weights(args):
    """Serves the head's snapshot to the workers' copies until each has reported (or none is left busy)."""
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

    on_done = (lambda host: write_record(record, host, revision)) if record else None
    server = copy_server((args["bind"], args["port"]), make_handler(token, body, paths, os.path.realpath(repo), state, on_done),
                         max_keyless(state.workers))
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
