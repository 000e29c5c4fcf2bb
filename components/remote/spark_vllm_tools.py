# spark-vllm's helper program on each host. The diagnosis catalog (generated from
# components/diagnosis.ts) is prepended to this file; it defines diagnose(),
# normalise_log() and context_around().
#
#   python3 spark_vllm_tools.py preflight|compat|ray-probe|endpoint-probe 'JSON ARGS'
#
# Every subcommand prints progress lines, then one JSON object as its last stdout line
# on success; on failure it prints what is wrong and how to fix it on stderr, exit 1.
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

PROGRESS_EVERY = 10


def say(text):
    print(text, flush=True)


def fail(lines):
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    sys.exit(1)


def run(argv, timeout=30):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)


# ---------------------------------------------------------------- preflight

def read_file(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def gpu_facts():
    code, out, err = run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap",
                          "--format=csv,noheader,nounits"])
    if code != 0:
        return None, (err or out).strip() or "nvidia-smi not found"
    gpus = []
    for row in out.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) >= 3:
            gpus.append({"name": cells[0], "memoryMiB": cells[1], "driver": cells[2],
                         "computeCap": cells[3] if len(cells) > 3 else None})
    return gpus, None


def docker_facts():
    code, version, err = run(["docker", "version", "--format", "{{.Server.Version}}"])
    if code != 0:
        return None, None, (err or version).strip()
    _, runtimes, _ = run(["docker", "info", "--format", "{{json .Runtimes}}"])
    nvidia = "nvidia" in runtimes or any(shutil.which(b) for b in
                                         ("nvidia-container-runtime-hook", "nvidia-container-toolkit", "nvidia-ctk"))
    return version.strip(), nvidia, None


def iface_facts(name, address):
    # Ask netlink (ip), not /sys/class/net: sysfs may show another network namespace's view.
    code, out, _ = run(["ip", "-j", "addr", "show", "dev", name])
    try:
        link = json.loads(out)[0] if code == 0 else None
    except (ValueError, IndexError):
        link = None
    if not link:
        return {"name": name, "exists": False}
    state = (link.get("operstate") or "").lower()
    flags = link.get("flags") or []
    up = state == "up" or (state == "unknown" and "UP" in flags and "LOWER_UP" in flags)
    addrs = [a.get("local") for a in link.get("addr_info") or [] if a.get("family") == "inet"]
    return {"name": name, "exists": True, "up": up, "state": state, "addresses": addrs, "hasAddress": address in addrs}


def hca_facts(hcas):
    facts = []
    for hca in hcas:
        ports = "/sys/class/infiniband/%s/ports" % hca
        states = []
        if os.path.isdir(ports):
            for port in sorted(os.listdir(ports)):
                states.append(read_file("%s/%s/state" % (ports, port)) or "")
        facts.append({"name": hca, "exists": os.path.isdir(ports),
                      "active": any("ACTIVE" in s for s in states)})
    return facts


def memory_facts():
    info = {}
    for line in (read_file("/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024 if rest.split() else 0
    return {"totalBytes": info.get("MemTotal"), "availableBytes": info.get("MemAvailable")}


def preflight(args):
    host = args["host"]
    fabric = args["fabric"]
    problems = []
    machine = platform.machine()
    arch = {"aarch64": "linux/arm64", "arm64": "linux/arm64", "x86_64": "linux/amd64"}.get(machine, machine)
    if arch != args["platform"]:
        problems.append("%s: CPU architecture is %s (%s) but spark-vllm:hosts[].platform says %s: set it to %s"
                        % (host, machine, arch, args["platform"], arch))
    gpus, gpu_err = gpu_facts()
    if gpus is None:
        problems.append("%s: nvidia-smi failed (%s): install the NVIDIA driver" % (host, gpu_err))
    elif len(gpus) < args["gpus"]:
        problems.append("%s: %d GPU(s) visible but spark-vllm:hosts[].gpus says %d" % (host, len(gpus), args["gpus"]))
    docker_version, nvidia_runtime, docker_err = docker_facts()
    if docker_version is None:
        problems.append("%s: Docker is not reachable (%s): install Docker and add %s to the docker group"
                        % (host, docker_err, os.environ.get("USER", "the SSH user")))
    elif not nvidia_runtime:
        problems.append("%s: NVIDIA container runtime not found: install nvidia-container-toolkit" % host)
    iface = iface_facts(fabric["interface"], fabric["address"])
    if not iface["exists"]:
        problems.append("%s: interface %s does not exist: check spark-vllm:hosts[].fabric.interface (ip -br link)"
                        % (host, fabric["interface"]))
    elif not iface["up"]:
        problems.append("%s: interface %s is down: bring it up (ip link set %s up) or check the cable"
                        % (host, fabric["interface"], fabric["interface"]))
    elif not iface["hasAddress"]:
        problems.append("%s: interface %s carries %s, not %s: fix spark-vllm:hosts[].fabric.address or the netplan"
                        % (host, fabric["interface"], ", ".join(iface["addresses"]) or "no IPv4 address",
                           fabric["address"]))
    hcas = hca_facts(fabric["hcas"])
    for hca in hcas:
        if not hca["exists"]:
            problems.append("%s: HCA %s not found: check spark-vllm:hosts[].fabric.hcas (ibdev2netdev)" % (host, hca["name"]))
        elif not hca["active"]:
            problems.append("%s: HCA %s is not ACTIVE: check the fabric link" % (host, hca["name"]))
    disk = None
    if os.path.isdir(args["cacheDir"]):
        usage = shutil.disk_usage(args["cacheDir"])
        disk = {"path": args["cacheDir"], "freeBytes": usage.free, "totalBytes": usage.total}
    else:
        problems.append("%s: model cache directory %s does not exist: create it (mkdir -p) or fix spark-vllm:model.cacheDir"
                        % (host, args["cacheDir"]))
    facts = {"host": host, "arch": machine, "platform": arch, "gpus": gpus, "docker": docker_version,
             "nvidiaRuntime": nvidia_runtime, "fabric": iface, "hcas": hcas, "disk": disk,
             "memory": memory_facts()}
    say(json.dumps(facts, sort_keys=True))
    if problems:
        fail(problems)


# ---------------------------------------------------------------- compat

def snapshot_dir(cache_dir, model_id):
    repo = os.path.join(cache_dir, "hub", "models--" + model_id.replace("/", "--"))
    ref = read_file(os.path.join(repo, "refs", "main"))
    if ref:
        return os.path.join(repo, "snapshots", ref)
    snaps = os.path.join(repo, "snapshots")
    if os.path.isdir(snaps) and os.listdir(snaps):
        return os.path.join(snaps, sorted(os.listdir(snaps))[0])
    return None


def compat(args):
    started = time.time()
    model = args["model"]
    snap = snapshot_dir(args["cacheDir"], model)
    config_path = snap and os.path.join(snap, "config.json")
    if not config_path or not os.path.isfile(config_path):
        fail(["%s: config.json not found under %s/hub on the head: put the weights there first "
              "(huggingface-cli download %s) or set spark-vllm:model.weights" % (model, args["cacheDir"], model)])
    with open(config_path) as f:
        config = json.load(f)
    archs = config.get("architectures") or []
    model_type = config.get("model_type")
    try:
        import vllm
        from vllm import ModelRegistry
        version = getattr(vllm, "__version__", "unknown")
        supported = set(ModelRegistry.get_supported_archs())
    except Exception as e:  # an image without vLLM is a configuration error, not a crash
        fail(["the image has no importable vLLM (%s: %s): use a vLLM image in spark-vllm:image" % (type(e).__name__, e)])
    declared = args.get("declaredVllmVersion")
    problems = []
    if declared and declared != version:
        problems.append("spark-vllm:vllm.version says %s but the image's vLLM is %s: correct the config" % (declared, version))
    missing = [a for a in archs if a not in supported]
    if missing:
        first = FIRST_VLLM.get(missing[0])
        problems.append(
            "%s needs architecture %s, which vLLM %s in this image does not support%s. "
            "Use an image whose vLLM supports it. Copying model files between vLLM versions does not work: "
            "the model's code lives in vLLM itself."
            % (model, ", ".join(missing), version,
               ("; it is supported from vLLM %s" % first) if first else ""))
    remote_code = "auto_map" in config
    if remote_code and not args.get("trustRemoteCode"):
        problems.append("%s ships custom code (config.json auto_map) and needs trust_remote_code: "
                        "set spark-vllm:model.trustRemoteCode: true after reading that code" % model)
    tf_version = None
    try:
        import transformers
        tf_version = getattr(transformers, "__version__", None)
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        if model_type and model_type not in CONFIG_MAPPING_NAMES and not remote_code:
            problems.append("transformers %s in this image does not recognize model_type %r of %s: "
                            "use an image with a newer transformers" % (tf_version, model_type, model))
    except ImportError:
        pass
    if problems:
        fail(problems)
    say(json.dumps({"model": model, "architectures": archs, "modelType": model_type, "vllmVersion": version,
                    "transformers": tf_version, "seconds": round(time.time() - started, 2)}, sort_keys=True))


# ---------------------------------------------------------------- image transfer

def image_id(argv):
    code, out, _ = run(argv, timeout=60)
    return out.strip() if code == 0 and out.strip().startswith("sha256:") else None


def image_transfer(args):
    """On the head: copies the image to one worker over the fabric (docker save | ssh docker load)."""
    image, target = args["image"], args["target"]
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "%s@%s" % (target["user"], target["address"])]
    inspect = ["docker", "image", "inspect", "--format", "{{.Id}}", image]
    have = image_id(inspect)
    if not have:
        fail(["%s: image %s is not on the head: build or pull it there first" % (args["host"], image)])
    code, _, err = run(ssh + ["true"])
    if code != 0:
        fail(["%s: cannot ssh to %s@%s over the fabric (%s): the head needs key access to every worker for "
              "spark-vllm:imageSource: head" % (args["host"], target["user"], target["address"], err.strip())])
    theirs = image_id(ssh + inspect)
    if theirs == have:
        say("%s already holds %s (%s): skipped" % (target["name"], image, have))
    else:
        started = time.time()
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.Popen(ssh + ["docker", "load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        sent, next_progress = 0, started + PROGRESS_EVERY
        for chunk in iter(lambda: save.stdout.read(1 << 20), b""):
            load.stdin.write(chunk)
            sent += len(chunk)
            if time.time() >= next_progress:
                say("%s: sent %.2f GB to %s (%.0f MB/s)" % (args["host"], sent / 1e9, target["name"],
                                                          sent / 1e6 / (time.time() - started)))
                next_progress += PROGRESS_EVERY
        load.stdin.close()
        out = load.stdout.read().decode(errors="replace")
        if save.wait() != 0 or load.wait() != 0:
            fail(["%s: copying %s to %s failed: %s" % (args["host"], image, target["name"], out.strip()[-500:])])
        say("%s: sent %.2f GB to %s in %d s" % (args["host"], sent / 1e9, target["name"], time.time() - started))
        theirs = image_id(ssh + inspect)
    if theirs != have:
        fail(["%s: after the copy %s holds %s, not %s" % (args["host"], target["name"], theirs, have)])
    say(json.dumps({"host": target["name"], "imageId": theirs}))


# ---------------------------------------------------------------- weights

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
    repo = os.path.join(cache, "hub", "models--" + model.replace("/", "--"))
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


# ---------------------------------------------------------------- ray-probe

def ray_probe(args):
    import ray
    started = time.time()
    deadline = started + args["timeoutSeconds"]
    next_progress = started + PROGRESS_EVERY
    ray.init(address=args["address"], logging_level="ERROR")
    try:
        while True:
            alive = [n for n in ray.nodes() if n.get("Alive")]
            ips = {n.get("NodeManagerAddress") for n in alive}
            gpus = sum(float((n.get("Resources") or {}).get("GPU", 0)) for n in alive)
            missing = [n for n in args["nodes"] if n["address"] not in ips]
            expected = {n["address"] for n in args["nodes"]}
            if not missing and gpus >= args["gpus"]:
                say(json.dumps({"nodes": len(alive), "gpus": gpus, "seconds": round(time.time() - started, 1)}))
                return
            now = time.time()
            if now >= deadline:
                fail(["Ray cluster incomplete after %d s: %d of %d nodes, %g of %d GPUs joined the head at %s."
                      % (args["timeoutSeconds"], len(args["nodes"]) - len(missing), len(args["nodes"]), gpus,
                         args["gpus"], args["address"])]
                     + ["  %s (%s) did not join: see the output of its Ray worker launch; check the fabric link "
                        "and that port %s on the head is reachable from it"
                        % (n["name"], n["address"], args["address"].rsplit(":", 1)[1]) for n in missing]
                     + ["  a node joined from %s (%g GPU), which is no host's fabric address: a worker on the wrong "
                        "interface? check spark-vllm:hosts[].fabric.address and VLLM_HOST_IP in its container"
                        % (n.get("NodeManagerAddress"), float((n.get("Resources") or {}).get("GPU", 0)))
                        for n in alive if n.get("NodeManagerAddress") not in expected])
            if now >= next_progress:
                say("waiting for Ray nodes: %d/%d joined, %g/%d GPUs, %d s; missing %s"
                    % (len(args["nodes"]) - len(missing), len(args["nodes"]), gpus, args["gpus"], now - started,
                       ", ".join("%s (%s)" % (n["name"], n["address"]) for n in missing) or "GPUs only"))
                next_progress = now + PROGRESS_EVERY
            time.sleep(args["intervalSeconds"])
    finally:
        ray.shutdown()


# ---------------------------------------------------------------- endpoint-probe

PROGRESS_PATTERNS = [
    r"Loading safetensors checkpoint shards:.*",
    r"Loading weights took .*",
    r"Model loading took .*",
    r"Available KV cache memory: .*",
    r"GPU KV cache size: .*",
    r"Maximum concurrency for .*",
    r"Capturing CUDA graphs.*",
    r"Graph capturing finished .*",
    r"Starting vLLM API server .*",
]


def read_log(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def last_progress(log):
    found = None
    for line in normalise_log(log):
        for pattern in PROGRESS_PATTERNS:
            m = re.search(pattern, line)
            if m:
                found = m.group(0)[:160]
    return found


def process_state(pid_file):
    pid = read_file(pid_file)
    if not pid or not pid.isdigit():
        return None, "no pid file"
    stat = read_file("/proc/%s/stat" % pid)
    if stat is None:
        return int(pid), "exited"
    state = stat.rsplit(")", 1)[1].split()[0]
    return int(pid), "exited" if state in ("Z", "X") else "running"


def http(method, url, key=None, body=None, timeout=5):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def failure_report(args, headline, log):
    where = "%s:%s" % (args["host"], args["log"])
    found = diagnose(log) if log else None
    lines = [headline]
    if found:
        lines += ["kind: " + found["kind"], "root cause: " + found["line"], "hint: " + found["hint"],
                  "full log: " + where, "context:"]
        lines += ["  " + l for l in context_around(log, found["line"])]
    else:
        tail = [l for l in normalise_log(log) if l.strip()][-15:]
        lines += ["no known root cause found in the log; full log: " + where, "last lines:"] + ["  " + l for l in tail]
    return lines


def endpoint_probe(args):
    key = sys.stdin.readline().strip()
    base = "http://127.0.0.1:%d" % args["port"]
    started = time.time()
    deadline = started + args["timeoutSeconds"]
    next_progress = started + PROGRESS_EVERY
    while True:
        status, _ = http("GET", base + "/health", timeout=2)
        if status == 200:
            break
        pid, state = process_state(args["pidFile"])
        if state != "running":
            # Let the last lines of a dying process reach the log.
            time.sleep(0.2)
            fail(failure_report(args, "vllm serve on %s exited %d s after the probe started (pid %s)"
                                % (args["host"], time.time() - started, pid), read_log(args["log"])))
        now = time.time()
        if now >= deadline:
            fail(failure_report(args, "vllm serve on %s did not become healthy within %d s (still running: hung or "
                                "too slow; raise spark-vllm:probes.endpointTimeoutSeconds if it was still making progress)"
                                % (args["host"], args["timeoutSeconds"]), read_log(args["log"])))
        if now >= next_progress:
            say("waiting for vLLM /health on %s:%d, %d s; last progress: %s"
                % (args["host"], args["port"], now - started, last_progress(read_log(args["log"])) or "none yet"))
            next_progress = now + PROGRESS_EVERY
        time.sleep(args["intervalSeconds"])
    ready = round(time.time() - started, 1)
    status, body = http("GET", base + "/v1/models", key)
    if status != 200:
        fail(["/v1/models answered %s with the API key: %s" % (status, body[:300])])
    names = [m.get("id") for m in json.loads(body).get("data", [])]
    if args["servedName"] not in names:
        fail(["/v1/models lists %s, not %s: check spark-vllm:model.servedName" % (names, args["servedName"])])
    status, body = http("POST", base + "/v1/completions", key,
                        {"model": args["servedName"], "prompt": "ping", "max_tokens": 1}, timeout=60)
    if status != 200:
        fail(["a one-token completion failed with %s: %s" % (status, body[:300])])
    _, version = http("GET", base + "/version")
    try:
        version = json.loads(version).get("version")
    except ValueError:
        version = None
    say(json.dumps({"secondsToReady": ready, "vllmVersion": version, "model": args["servedName"]}, sort_keys=True))


COMMANDS = {"preflight": preflight, "image-transfer": image_transfer, "weights": weights, "serve-weights": serve_weights, "compat": compat, "ray-probe": ray_probe, "endpoint-probe": endpoint_probe}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in COMMANDS:
        fail(["usage: spark_vllm_tools.py %s 'JSON'" % "|".join(COMMANDS)])
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
