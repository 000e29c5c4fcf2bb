# weights (present / download / copy from the head) and the Hugging Face cache layout both sides of the copy share.
# The cache (huggingface_hub docs "Understand caching", guides/manage-cache; src/huggingface_hub/file_download.py):
#   <cache>/hub/models--<org>--<name>/refs/main            the commit hash main points at
#   <cache>/hub/models--<org>--<name>/snapshots/<commit>/  one symlink per file, to ../../blobs/<etag>
#   <cache>/hub/models--<org>--<name>/blobs/<etag>         the content; `blob_path = os.path.join(storage_folder,
#                                                          "blobs", etag)`, partial downloads at <etag>.incomplete
# An LFS file's etag is its sha256 (file_download.py: REGEX_SHA256 "Regex to check if the file etag IS a valid
# sha256"); other files' etag is their git blob id. Snapshot folders are named by the full commit hash
# (constants.py / file_download.py REGEX_COMMIT_HASH = ^[0-9a-f]{40}$).
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import stat
import sys
import time
import traceback
import urllib.error
import urllib.request
from http.client import HTTPException

from spark_vllm.common import PROGRESS_EVERY, fail, read_file, say
from spark_vllm.weights_size import SIZE_GIB, SizeUnknown, fit_problem, hub_weight_bytes, snapshot_weight_bytes

COMMIT_HASH = re.compile(r"[0-9a-f]{40}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
MAX_NAME_BYTES = 255  # NAME_MAX of Linux file systems, per path component
MAX_PATH_CHARS = 1024
MAX_FILES = 100000
COPY_CHUNK = 1 << 20


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


def within(path, top):
    """True when path (already resolved) is top or below it."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def name_problem(name):
    """Why a file name from the head cannot be a path inside the snapshot, or None."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if len(name) > MAX_PATH_CHARS:
        return "is longer than %d characters" % MAX_PATH_CHARS
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "contains a NUL or control character"
    if name.startswith("/"):
        return "is an absolute path"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' component"
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            return "has a component longer than %d bytes" % MAX_NAME_BYTES
    return None


def shown(value, limit=80):
    text = json.dumps(value) if not isinstance(value, str) else value
    return json.dumps(text[:limit] + ("..." if len(text) > limit else ""))


def manifest_problems(remote):
    """Every reason the head's manifest cannot be used, as short phrases; [] when it is sound."""
    if not isinstance(remote, dict) or not isinstance(remote.get("files"), dict):
        return ["it is not an object with a files map"]
    problems = []
    revision = remote.get("revision")
    if not isinstance(revision, str) or not COMMIT_HASH.fullmatch(revision):
        problems.append("revision %s is not a 40-hex commit hash (the only names snapshot folders have)" % shown(revision))
    files = remote["files"]
    if not files:
        problems.append("it lists no files")
    if len(files) > MAX_FILES:
        return problems + ["it lists %d files, more than %d" % (len(files), MAX_FILES)]
    sizes = {}
    for name, entry in sorted(files.items()):
        why = name_problem(name)
        if why:
            problems.append("file %s %s" % (shown(name), why))
            continue
        if not isinstance(entry, dict) or type(entry.get("size")) is not int or entry["size"] < 0:
            problems.append("file %s has no valid size" % shown(name))
        elif not isinstance(entry.get("sha256"), str) or not SHA256_HEX.fullmatch(entry["sha256"]):
            problems.append("file %s has no valid sha256" % shown(name))
        else:
            # Names that share a sha256 share one blob (copy_files): one content cannot have two sizes.
            first = sizes.setdefault(entry["sha256"], (name, entry["size"]))
            if first[1] != entry["size"]:
                problems.append("files %s and %s have the same sha256 but sizes %d and %d"
                                % (shown(first[0]), shown(name), first[1], entry["size"]))
        parent = name.rsplit("/", 1)[0] if "/" in name else None
        while parent:
            if parent in files:
                problems.append("%s is both a file and a directory" % shown(parent))
                break
            parent = parent.rsplit("/", 1)[0] if "/" in parent else None
    return problems


def download(args, token):
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        fail(["%s: the image has no huggingface_hub to download with; put the weights in place and set "
              "spark-vllm:model.weights: present" % args["host"]])
    say("%s: downloading %s into %s" % (args["host"], args["model"], args["cacheDir"]))
    snapshot_download(repo_id=args["model"], cache_dir=os.path.join(args["cacheDir"], "hub"), token=token or None)


class CopyRefused(Exception):
    """A file the head sent that cannot be kept (its message names the file and what was wrong)."""


class CopyBrokeOff(Exception):
    """A fetch that ended early: the connection was refused, reset or closed, timed out, or the body was short. The
    partial file is kept and the fetch is tried again, resuming it. `progressed`: some bytes arrived first."""

    def __init__(self, message, progressed=False):
        super().__init__(message)
        self.progressed = progressed


# Issue 41: a fetch that meets a refused, reset or closed connection (a keyless client holding the head's server, a
# server restarted by the next `up`, the fabric flapping) is tried again after RETRY_FIRST_SECONDS, doubling up to
# RETRY_MAX_SECONDS (each wait drawn between half and all of it, so the four fetches of a copy do not come back in
# step), for as long as the copy's waitSeconds allow without any progress; bytes that arrive start that time again.
RETRY_FIRST_SECONDS = 0.25
RETRY_MAX_SECONDS = 8
# The head's server gives up on a worker that has asked and then sent nothing for its idleSeconds (300 s,
# weights_source.py CopyState.verdict): a copy that spends longer than that hashing the blobs it already holds
# asks for the manifest again this often, which the server counts as the worker being there.
KEEPALIVE_SECONDS = 60


def retry_wait(attempt):
    return min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** attempt) * random.uniform(0.5, 1.0)


def broke_off(e):
    """The exception a failed request raised, as why it broke off; None for what is not worth another try (an HTTP
    answer other than 503, which the server gives when a worker already holds as many connections as it may)."""
    if isinstance(e, urllib.error.HTTPError):
        return "the head answered 503 (busy)" if e.code == 503 else None
    if isinstance(e, urllib.error.URLError):
        return str(e.reason)
    if isinstance(e, (OSError, HTTPException)):
        return "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
    return None


def release(error):
    """Closes what a failed request left open in an exception and its context: an HTTP error's answer, and http.client's
    half-made response in the finished frames of their tracebacks (a request that broke off before its answer). The
    fetches' thread pool keeps exceptions in reference cycles, so without this their sockets wait for the garbage
    collector, which closes them with a ResourceWarning at whatever point it runs."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, urllib.error.HTTPError):
            error.close()
        traceback.clear_frames(error.__traceback__)  # a frame still running is left as it is
        error = error.__context__


def with_retries(attempt_once, wait_seconds, sleep=time.sleep, request_errors=True):
    """attempt_once() until it returns; a CopyBrokeOff (or, with request_errors, a request error broke_off names) is
    tried again, with backoff, until wait_seconds have passed since the last attempt that made progress; then the
    last one is raised. fetch_blob turns its request errors into CopyBrokeOff itself: what else it raises (the disk
    full, a folder it cannot write) is not tried again."""
    deadline, attempt = time.monotonic() + wait_seconds, 0
    while True:
        try:
            return attempt_once()
        except CopyBrokeOff as e:
            if e.progressed:
                deadline, attempt = time.monotonic() + wait_seconds, 0
            error = e
        except Exception as e:  # noqa: BLE001 - sorted by broke_off; anything else goes up as it is
            if not request_errors or broke_off(e) is None:
                raise
            error = e
        release(error)
        wait = retry_wait(attempt)
        if time.monotonic() + wait > deadline:
            # Unbound once raised: a local holding the exception whose traceback holds this frame is a cycle that only
            # the garbage collector frees, and http.client's half-read response in it then closes its socket there,
            # with a ResourceWarning, at whatever point the collector runs.
            try:
                raise error
            finally:
                error = None
        sleep(wait)
        attempt += 1


def head_request(source, path, token, headers=None, data=None, timeout=60):
    hdrs = dict(headers or {}, Authorization="Bearer " + token)
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    return urllib.request.urlopen(urllib.request.Request(source + path, data=data, headers=hdrs), timeout=timeout)


def fetch_manifest(source, token, host, wait_seconds):
    """The head's manifest; its server starts together with this command, so a refused connection is retried."""
    def once():
        with head_request(source, "/manifest.json", token, headers={"X-Spark-Vllm-Host": host}, timeout=30) as resp:
            return json.loads(resp.read(64 << 20))
    return with_retries(once, wait_seconds)


def report(source, token, host, ok, error="", wait_seconds=30):
    """Tells the head's server this worker is done (or failed), so it stops once every worker holds the weights."""
    body = json.dumps({"host": host, "ok": ok, "error": error[:500]}).encode()
    try:
        with_retries(lambda: head_request(source, "/done", token, data=body, timeout=10).close(), wait_seconds)
    except (urllib.error.URLError, OSError, ValueError, HTTPException, CopyBrokeOff):
        pass  # the copy's own outcome stands; without the report the server stops after its idle time


def file_matches(path, size, want):
    """True when path is a plain file (a link there is not followed) of SIZE bytes whose content hashes to WANT."""
    try:
        # O_NONBLOCK: a FIFO planted at the name does not hang the open (it is then refused as not a plain file).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        digest = hashlib.sha256()
        for chunk in iter(lambda: f.read(COPY_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest() == want


def open_partial(part):
    """The partial file, open for reading and appending, locked (flock) against any other copy of the same blob:
    another copy process (one an interrupted `up` left running beside the next one's) holding it is waited for. A
    partial file that was renamed or removed while we waited (the other copy finished or dropped it) is opened
    again by its name, so we never append to a file that is no longer the partial one. O_NOFOLLOW: a link planted
    at the partial name is never written through."""
    while True:
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.lstat(part)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fetch_blob(source, token, name, entry, blob, on_wrong=None):
    """Puts the blob named by entry's sha256 in place, fetching NAME (one of the files with that content) through
    blob.incomplete and resuming it; returns the bytes fetched. A blob already there is kept only when its content
    hashes to its name; on_wrong(blob) is told of one that does not, which is then fetched again and replaced."""
    size, want = entry["size"], entry["sha256"]
    if file_matches(blob, size, want):
        return 0
    wrong = os.path.lexists(blob)
    part = blob + ".incomplete"
    fd = open_partial(part)
    try:
        # Another copy may have put the blob in place while we waited for its partial file.
        if file_matches(blob, size, want):
            os.remove(part)
            return 0
        if wrong and on_wrong:
            on_wrong(blob)
        have = os.fstat(fd).st_size
        if have > size:
            os.ftruncate(fd, 0)
            have = 0
        resumed, digest = have, hashlib.sha256()
        offset = 0
        while offset < have:
            chunk = os.pread(fd, min(COPY_CHUNK, have - offset), offset)
            if not chunk:
                break
            digest.update(chunk)
            offset += len(chunk)
        got = 0
        if have < size:
            rng = {"Range": "bytes=%d-" % have} if have else {}
            on_disk = False  # an error of this host's disk is not the fetch breaking off: it is not tried again
            try:
                with head_request(source, "/files/" + urllib.request.quote(name), token, headers=rng) as resp:
                    if have and resp.status != 206:
                        on_disk = True
                        os.ftruncate(fd, 0)
                        on_disk = False
                        digest, have, resumed = hashlib.sha256(), 0, 0
                    left = size - have
                    while left >= 0:
                        chunk = resp.read(min(COPY_CHUNK, left + 1))
                        if not chunk:
                            break
                        if len(chunk) > left:
                            os.remove(part)
                            raise CopyRefused("%s: the head sent more than the %d bytes its manifest lists" % (name, size))
                        on_disk = True
                        write_all(fd, chunk)
                        on_disk = False
                        digest.update(chunk)
                        left -= len(chunk)
                        got += len(chunk)
            except CopyRefused:
                raise
            except Exception as e:  # noqa: BLE001 - what broke_off names (a 503 too) is a broken-off fetch, resumed by the next try
                why = None if on_disk else broke_off(e)
                if why is None:
                    raise
                raise CopyBrokeOff("%s: %s (after %d of %d bytes)" % (name, why, have + got, size), got > 0)
        if have + got != size:
            raise CopyBrokeOff("%s: the head sent %d of %d bytes" % (name, have + got, size), got > 0)
        if digest.hexdigest() != want:
            os.remove(part)
            if resumed:
                # The part from an earlier copy may be what did not match: the next try fetches the whole file.
                raise CopyBrokeOff("%s: content does not match after resuming at byte %d; fetching it whole" % (name, resumed))
            raise CopyRefused("%s: content does not match: sha256 %s, the manifest says %s" % (name, digest.hexdigest(), want))
        os.replace(part, blob)  # under the lock: a copy waiting for it opens the name again, and finds the blob
        return got
    finally:
        os.close(fd)


def link_problems(snap, names):
    """Each name whose place in the snapshot resolves outside it (an existing link on the way), or that is a folder."""
    top = os.path.realpath(snap)
    problems = []
    for name in names:
        dest = os.path.join(snap, name)
        if not within(os.path.realpath(os.path.dirname(dest)), top):
            problems.append("%s: its folder resolves outside the snapshot (%s)" % (name, os.path.realpath(os.path.dirname(dest))))
        elif os.path.isdir(dest) and not os.path.islink(dest):
            problems.append("%s: a folder is in its place" % name)
    return problems


def replace_with_link(target, dest):
    tmp = "%s.spark-vllm-%d.tmp" % (dest, os.getpid())
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, dest)  # replaces a file or link at dest; never writes through it


def write_ref(repo, revision):
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    tmp = os.path.join(repo, "refs", ".main.spark-vllm-%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        f.write(revision)
    os.replace(tmp, os.path.join(repo, "refs", "main"))


def copy_from(args, cache, model, token):
    """Copies the head's snapshot over the fabric, checking every name and every byte before it is kept."""
    host, source = args["host"], args["source"]
    try:
        remote = fetch_manifest(source, token, host, args.get("waitSeconds", 120))
    except urllib.error.HTTPError as e:
        fail(["%s: the head's weights server at %s answered %d to the manifest request%s"
              % (host, source, e.code, ": the copy token does not match" if e.code == 401 else "")])
    except (urllib.error.URLError, OSError, ValueError, HTTPException) as e:
        fail(["%s: cannot reach the head's weights at %s (%s): check the fabric link" % (host, source, e)])
    problems = manifest_problems(remote)
    if problems:
        report(source, token, host, False, "refused the manifest")
        fail(["%s: refusing the weights manifest from %s; nothing was written:" % (host, source)]
             + ["  " + p for p in problems[:20]] + (["  and %d more" % (len(problems) - 20)] if len(problems) > 20 else []))
    try:
        copy_files(args, cache, model, token, remote)
    except BaseException as e:
        report(source, token, host, False, str(e))
        raise
    report(source, token, host, True)


def copy_files(args, cache, model, token, remote):
    from concurrent.futures import ThreadPoolExecutor
    host, source = args["host"], args["source"]
    wait_seconds = args.get("waitSeconds", 120)
    repo = repo_dir(cache, model)
    snap = os.path.join(repo, "snapshots", remote["revision"])
    blobs = os.path.join(repo, "blobs")
    files = remote["files"]
    # Names with identical content share one blob (the hub's cache: one blobs/<etag> per content, file_download.py),
    # so the manifest lists one sha256 under several names: each distinct blob is fetched once, through the first of
    # its names, and every name is linked to it. Two fetches of one blob would append to one partial file.
    wanted = {}
    for name, entry in sorted(files.items()):
        wanted.setdefault(entry["sha256"], (entry, []))[1].append(name)
    total = sum(entry["size"] for entry, _ in wanted.values())
    blob = lambda e: os.path.join(blobs, e["sha256"])  # noqa: E731
    here = sum(e["size"] for e, _ in wanted.values() if os.path.isfile(blob(e)) and os.path.getsize(blob(e)) == e["size"])
    # `here`: the blobs of the right size; each is hashed before it is kept (fetch_blob).
    say("%s: copying %s from %s: %.2f of %.2f GB already here" % (host, model, source, here / 1e9, total / 1e9))
    os.makedirs(blobs, exist_ok=True)
    free = shutil.disk_usage(blobs).free
    if free < (total - here) * 1.05:
        fail(["%s: %.1f GB free at %s but copying %s needs %.1f GB more: free disk space or use another cacheDir"
              % (host, free / 1e9, cache, model, (total - here) / 1e9)])
    done, started, refused, failed = [0], time.time(), [], []

    def wrong(path):
        say("%s: blobs/%s did not hash to its name: fetched again" % (host, os.path.basename(path)))

    def one(item):
        entry, names = item
        name = names[0]
        try:
            with_retries(lambda: fetch_blob(source, token, name, entry, blob(entry), wrong), wait_seconds, request_errors=False)
            done[0] += entry["size"]
        except (CopyRefused, CopyBrokeOff, urllib.error.URLError, OSError, HTTPException) as e:
            release(e)
            if isinstance(e, CopyRefused):
                refused.append(str(e))
            elif isinstance(e, urllib.error.HTTPError):
                refused.append("%s: the head answered %d" % (name, e.code))
            elif isinstance(e, CopyBrokeOff):
                failed.append("%s (no progress for %d s)" % (e, wait_seconds))
            else:
                failed.append("%s: %s" % (name, broke_off(e) or e))

    with ThreadPoolExecutor(max_workers=4) as pool:
        pending = [pool.submit(one, item) for _, item in sorted(wanted.items(), key=lambda kv: kv[1][1][0])]
        next_progress = started + PROGRESS_EVERY
        next_keepalive = started + KEEPALIVE_SECONDS
        while any(not f.done() for f in pending):
            time.sleep(0.2)
            if time.time() >= next_progress:
                say("%s: %.2f of %.2f GB (%d%%)" % (host, done[0] / 1e9, total / 1e9, 100 * done[0] // max(total, 1)))
                next_progress += PROGRESS_EVERY
            if time.time() >= next_keepalive:
                try:
                    head_request(source, "/manifest.json", token, headers={"X-Spark-Vllm-Host": host}, timeout=10).close()
                except (urllib.error.URLError, OSError, HTTPException):
                    pass
                next_keepalive = time.time() + KEEPALIVE_SECONDS
        for f in pending:
            f.result()
    if failed and not refused:
        fail(["%s: the copy of %s from %s broke off; run up again to resume it:" % (host, model, source)] + ["  " + f for f in sorted(failed)])
    if refused or failed:
        fail(["%s: refusing the head's copy of %s; the snapshot was not changed:" % (host, model)] + ["  " + r for r in sorted(refused + failed)])
    for name in files:
        os.makedirs(os.path.dirname(os.path.join(snap, name)), exist_ok=True)
    bad = link_problems(snap, sorted(files))
    if bad:
        fail(["%s: refusing the head's copy of %s; the snapshot was not changed:" % (host, model)] + ["  " + b for b in bad])
    for name, entry in sorted(files.items()):
        dest = os.path.join(snap, name)
        replace_with_link(os.path.relpath(blob(entry), os.path.dirname(dest)), dest)
    write_ref(repo, remote["revision"])
    say("%s: copy complete in %d s, every file's sha256 checked" % (host, time.time() - started))


def check_fit(args, read_size, where):
    """Refuses, with the figures, weights that cannot fit the GPUs (args["fit"], from the plan); a size that cannot be
    read is said and left to the memory gate and vLLM."""
    if not args.get("fit"):
        return
    try:
        size, nfiles = read_size()
    except SizeUnknown as e:
        say("%s: the size of %s's weights is not known (%s): not checked against memory before %s"
            % (args["host"], args["model"], e, "the download" if where.startswith("the hub") else "the launch"))
        return
    problem = fit_problem(args["host"], args["model"], size, nfiles, args["fit"], where)
    if problem:
        fail([problem])
    say("%s: %s has %.2f GiB of weights (%s): %.2f GiB per GPU, room for %.2f"
        % (args["host"], args["model"], size / SIZE_GIB, where,
           size / SIZE_GIB / (args["fit"]["tensorParallelSize"] * args["fit"]["pipelineParallelSize"]),
           args["fit"]["usableGiB"] * args["fit"]["gpuMemoryUtilization"] - args["fit"]["reserveGiB"]))


def weights(args):
    token = sys.stdin.readline().strip() if args.get("tokenOnStdin") else ""
    host, model, cache = args["host"], args["model"], args["cacheDir"]
    if args["strategy"] == "copy":
        if not token:
            fail(["%s: the copy token did not arrive on stdin" % host])
        copy_from(args, cache, model, token)
    snap = snapshot_dir(cache, model)
    if args["strategy"] == "download" and (snap is None or not os.path.isfile(os.path.join(snap, "config.json"))):
        check_fit(args, lambda: hub_weight_bytes(model, token), "the hub's file listing")
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
    check_fit(args, lambda: snapshot_weight_bytes(snap), "the snapshot's safetensors headers")
    say(json.dumps({"host": host, "revision": os.path.basename(snap), "files": files,
                    "totalBytes": sum(files.values())}, sort_keys=True))
