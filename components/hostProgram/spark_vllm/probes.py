# ray-probe (every node and GPU joined the head) and endpoint-probe (vLLM answers, or why it died).
import hashlib
import json
import re
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

from spark_vllm.common import PROGRESS_EVERY, fail, read_file, say
from spark_vllm.diagnosis import context_around, diagnose, normalise_log


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


def stat_state(stat):
    """The state letter of a /proc/PID/stat line (the command name in parentheses may hold spaces and ')')."""
    return stat.rsplit(")", 1)[1].split()[0]


def stat_start_time(stat):
    """Field 22 of a /proc/PID/stat line, the start time in clock ticks since boot (proc(5))."""
    return stat.rsplit(")", 1)[1].split()[19]


def process_state(pid_file, proc="/proc"):
    """(pid, state) of the process a launch recorded as "PID STARTTIME" (components/plan/scripts.ts detachedLaunch).
    A pid whose start time differs is another process that reused the number: the launched one has exited."""
    parts = (read_file(pid_file) or "").split()
    if not parts or not parts[0].isdigit():
        return None, "no pid file"
    pid = int(parts[0])
    stat = read_file("%s/%d/stat" % (proc, pid))
    if stat is None or stat_state(stat) in ("Z", "X"):
        return pid, "exited"
    if len(parts) > 1 and stat_start_time(stat) != parts[1]:
        return pid, "exited"
    return pid, "running"


# https to the proxy on loopback: the certificate is checked by pinning (served_certificate_matches), not by a
# chain or a host name (a self-signed certificate for the head's SSH address, reached here as 127.0.0.1).
_TLS = ssl.create_default_context()
_TLS.check_hostname = False
_TLS.verify_mode = ssl.CERT_NONE


def http(method, url, key=None, body=None, timeout=5):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=_TLS if url.startswith("https:") else None) as resp:
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


def exit_headline(host, pid, seconds, first_check):
    if first_check:
        return "vllm serve on %s is not running (pid %s): it had exited before this probe's first check" % (host, pid)
    return "vllm serve on %s exited %d s after the probe started (pid %s)" % (host, seconds, pid)


def guard_stop(marker):
    """The memory guard's diagnosis when it stopped this launch (its `<name>.failed` marker holds `guard`: supervise.py
    Supervisor.guard), else None. The marker's first line is the record's digest, the second its detail."""
    lines = (read_file(marker) or "").split("\n") if marker else []
    try:
        detail = json.loads(lines[1]) if len(lines) > 1 else {}
    except ValueError:
        return None
    return detail.get("diagnosis") if isinstance(detail, dict) and detail.get("guard") else None


def relaunch_advice(args):
    """What relaunches it: the launch succeeded and stays in the stack, and the command provider never reads a command
    back, so a `pulumi up` with no change runs only this probe again (components/plan/relaunch.ts)."""
    if not args.get("relaunch"):
        return []
    return ["a plain `pulumi up` runs only this probe again and does not relaunch vLLM; once the cause is fixed, "
            "relaunch it (memory check and page cache drop on every host first) with:", "  " + args["relaunch"]]


def concurrent_completions(base, key, model, n):
    """n one-token completions at once; [(status, body)] in order."""
    results = [None] * n

    def one(i):
        results[i] = http("POST", base + "/v1/completions", key, {"model": model, "prompt": "ping %d" % i, "max_tokens": 1}, timeout=60)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def first_certificate(pem):
    """The first PEM certificate of a file (a given chain holds the server's first, then its issuers), or None.
    ssl.PEM_cert_to_DER_cert takes one certificate only: it decodes everything between the first BEGIN and the last END."""
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = pem.find(begin)
    stop = pem.find(end, start)
    return pem[start:stop + len(end)] + "\n" if start >= 0 and stop >= 0 else None


def served_certificate_matches(port, cert_file, timeout=5):
    """Whether the certificate served on 127.0.0.1:port is the first in cert_file (same DER bytes): (ok, detail)."""
    pem = first_certificate(read_file(cert_file) or "")
    if not pem:
        return False, "%s holds no certificate" % cert_file
    want = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with _TLS.wrap_socket(raw) as tls:
            got = hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()
    return got == want, "served sha256 %s, %s has %s" % (got, cert_file, want)


def endpoint_probe(args):
    key = sys.stdin.readline().strip()
    # Through the endpoint proxy, as a client reaches it (vLLM itself listens on loopback only).
    base = "%s://127.0.0.1:%d" % (args.get("scheme", "http"), args["port"])
    started = time.time()
    deadline = started + args["timeoutSeconds"]
    next_progress = started + PROGRESS_EVERY
    first_check = True
    while True:
        status, _ = http("GET", base + "/health", timeout=2)
        if status == 200:
            break
        pid, state = process_state(args["pidFile"])
        if state != "running":
            # Let the last lines of a dying process reach the log.
            time.sleep(0.2)
            headline = exit_headline(args["host"], pid, time.time() - started, first_check)
            guard = guard_stop(args.get("guardMarker"))
            if guard:
                fail([headline + ": the memory guard stopped it", "kind: " + guard["kind"], "root cause: " + guard["line"],
                      "hint: " + guard["hint"], "full log: %s:%s" % (args["host"], args["log"])] + relaunch_advice(args))
            fail(failure_report(args, headline, read_log(args["log"])) + relaunch_advice(args))
        first_check = False
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
    if args.get("certificate"):
        ok, detail = served_certificate_matches(args["port"], args["certificate"])
        if not ok:
            fail(["the endpoint proxy on %s serves another certificate than the one spark-vllm wrote: %s" % (args["host"], detail)])
    status, _ = http("GET", base + "/v1/models")
    if status != 401:
        fail(["/v1/models answered %s without the API key, not 401: the endpoint proxy on %s does not require the key" % (status, args["host"])])
    status, body = http("GET", base + "/v1/models", key)
    if status != 200:
        fail(["/v1/models answered %s with the API key: %s" % (status, body[:300])])
    names = [m.get("id") for m in json.loads(body).get("data", [])]
    if args["servedName"] not in names:
        fail(["/v1/models lists %s, not %s: check spark-vllm:model.servedName" % (names, args["servedName"])])
    # Pipeline parallelism over Ray has failed only once two requests ran at once (vllm-project/vllm#39900):
    # with PP > 1 the plan asks for two concurrent completions.
    concurrency = max(1, int(args.get("concurrency", 1)))
    completions = concurrent_completions(base, key, args["servedName"], concurrency)
    for status, body in completions:
        if status != 200:
            fail(["%s failed with %s: %s" % ("a one-token completion" if concurrency == 1 else
                                             "one of %d concurrent one-token completions" % concurrency, status, body[:300])])
    # vLLM itself on the head's loopback: its key guard (keyguard.py, `--middleware`) asks the key on every path but
    # /health, /metrics among them, which vLLM's own --api-key leaves open; then its /version, with the key (the proxy
    # forwards only the client routes).
    internal = "http://127.0.0.1:%d" % args.get("internalPort", args["port"])
    if args.get("internalPort"):
        status, _ = http("GET", internal + "/metrics")
        if status != 401:
            fail(["vLLM on %s answered /metrics on its loopback port %d with %s without the API key, not 401: its key guard "
                  "(--middleware %s) is not active, so any account on the host reaches it" % (
                      args["host"], args["internalPort"], status, "spark_vllm_tools.SparkVllmKeyGuard")])
    _, version = http("GET", internal + "/version", key)
    try:
        version = json.loads(version).get("version")
    except ValueError:
        version = None
    say(json.dumps({"secondsToReady": ready, "vllmVersion": version, "model": args["servedName"], "completions": concurrency}, sort_keys=True))
