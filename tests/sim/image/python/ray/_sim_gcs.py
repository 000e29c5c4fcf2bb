"""GCS stand-in: a small threaded HTTP/JSON server keeping the node table and
placement groups of one simulated Ray cluster, plus the worker heartbeat loop.

Runs inside detached daemons started by `ray start` (see _sim_cli.py)."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import simcommon as sc

HEARTBEAT_SECONDS = float(os.environ.get("RAY_SIM_HEARTBEAT_SECONDS", "1.0"))
DEAD_AFTER_SECONDS = float(os.environ.get("RAY_SIM_DEAD_AFTER_SECONDS", "4.0"))
PG_LEASE_SECONDS = 5.0


class ClusterState:
    def __init__(self, session, token=None):
        self.lock = threading.Lock()
        self.nodes = {}
        self.pgs = {}
        self.session = session
        # Token mode: the token every request must carry (the head's own, loaded as Ray loads it).
        self.token = token
        # Environment a driver (vLLM's RayDistributedExecutor) sends to the workers on a node, until its raylet
        # picks it up with its next heartbeat.
        self.worker_env = {}

    def put_worker_env(self, node_ids, env):
        with self.lock:
            for nid in node_ids:
                self.worker_env[nid] = dict(env)

    def take_worker_env(self, node_id):
        with self.lock:
            return self.worker_env.pop(node_id, None)

    def _refresh(self):
        now = time.time()
        for n in self.nodes.values():
            if n["Alive"] and now - n["_last_heartbeat"] > DEAD_AFTER_SECONDS:
                n["Alive"] = False
                n["alive"] = False
                n["_death_time"] = now
                n["DeathReason"] = 1
                n["DeathReasonMessage"] = (
                    "health check failed due to missing too many heartbeats")
                n["state"] = "DEAD"
        for pid_, pg in list(self.pgs.items()):
            if now - pg["_renewed"] > PG_LEASE_SECONDS:
                del self.pgs[pid_]

    def register(self, node):
        with self.lock:
            node = dict(node)
            node["Alive"] = True
            node["alive"] = True
            node["state"] = "ALIVE"
            node["DeathReason"] = 0
            node["DeathReasonMessage"] = ""
            node["_last_heartbeat"] = time.time()
            self.nodes[node["NodeID"]] = node
            return node

    def heartbeat(self, node_id):
        with self.lock:
            self._refresh()
            n = self.nodes.get(node_id)
            if n is None:
                return 404
            if not n["Alive"]:
                return 410
            n["_last_heartbeat"] = time.time()
            return 200

    def unregister(self, node_id):
        with self.lock:
            n = self.nodes.get(node_id)
            if n is not None and n["Alive"]:
                n["Alive"] = False
                n["alive"] = False
                n["state"] = "DEAD"
                n["_death_time"] = time.time()
                n["DeathReason"] = 2
                n["DeathReasonMessage"] = "received SIGTERM"

    def snapshot(self):
        with self.lock:
            self._refresh()
            nodes = [{k: v for k, v in n.items() if not k.startswith("_")}
                     for n in self.nodes.values()]
            pgs = [{k: v for k, v in p.items() if not k.startswith("_")}
                   for p in self.pgs.values()]
            return {"nodes": nodes, "placement_groups": pgs, "session": self.session}

    def put_pg(self, pg):
        with self.lock:
            self._refresh()
            pg = dict(pg)
            pg["_renewed"] = time.time()
            self.pgs[pg["pg_id"]] = pg

    def remove_pg(self, pg_id):
        with self.lock:
            self.pgs.pop(pg_id, None)


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):
            pass

        def _send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                return json.loads(self.rfile.read(n) or b"{}")
            except ValueError:
                return {}

        def _refused(self):
            """Token mode: a request without this cluster's token gets Ray's refusal (simcommon AUTH_REFUSED)."""
            if not state.token:
                return False
            if self.headers.get("authorization") == "Bearer " + state.token:
                return False
            self._send(401, {"error": sc.AUTH_REFUSED})
            return True

        def do_GET(self):
            if self._refused():
                return
            if self.path in ("/api/cluster", "/api/nodes"):
                return self._send(200, state.snapshot())
            if self.path == "/api/version":
                return self._send(200, {"version": "4", "ray_version": state.session["ray_version"],
                                        "ray_commit": "sim", "session_name": state.session["session_name"]})
            return self._send(404, {"error": "not found"})

        def do_POST(self):
            if self._refused():
                return
            b = self._body()
            if self.path == "/api/register":
                state.register(b)
                return self._send(200, {"ok": True, "session": state.session})
            if self.path == "/api/heartbeat":
                code = state.heartbeat(b.get("node_id"))
                return self._send(code, {"ok": code == 200, "env": state.take_worker_env(b.get("node_id"))})
            if self.path == "/api/worker_env":
                state.put_worker_env(b.get("node_ids") or [], b.get("env") or {})
                return self._send(200, {"ok": True})
            if self.path == "/api/unregister":
                state.unregister(b.get("node_id"))
                return self._send(200, {"ok": True})
            if self.path == "/api/pg":
                state.put_pg(b)
                return self._send(200, {"ok": True})
            if self.path == "/api/pg_remove":
                state.remove_pg(b.get("pg_id"))
                return self._send(200, {"ok": True})
            return self._send(404, {"error": "not found"})

    return Handler


def _log(msg, level="INFO", where="gcs_server.cc:1"):
    sys.stdout.write("[%s %s %d] (gcs_server) %s: %s\n" % (
        time.strftime("%Y-%m-%d %H:%M:%S"), level[0], os.getpid(), where, msg))
    sys.stdout.flush()


def run_head(listen_fd, node, session, dashboard=None):
    """Serve the GCS on an already bound+listening socket (fd), register own node."""
    state = ClusterState(session, sc.ray_auth_token())
    sock = socket.socket(fileno=listen_fd)
    server = ThreadingHTTPServer(sock.getsockname(), make_handler(state), bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.daemon_threads = True
    state.register(node)
    _log("Gcs Server started on %s:%d" % sock.getsockname(), where="gcs_server_main.cc:111")

    stop = threading.Event()

    def on_term(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    if dashboard:
        host, port = dashboard
        try:
            dsrv = ThreadingHTTPServer((host, port), make_handler(state))
            dsrv.daemon_threads = True
            threading.Thread(target=dsrv.serve_forever, daemon=True).start()
        except OSError as e:
            _log("dashboard failed to bind %s:%d: %s" % (host, port, e), level="WARNING")

    while not stop.wait(HEARTBEAT_SECONDS):
        state.heartbeat(node["NodeID"])
    _log("GCS server received SIGTERM, shutting down...")
    server.shutdown()
    server.server_close()
    return 0


def worker_env_file():
    return os.path.join(sc.ray_dir(), "session_latest", "logs", "worker_env.json")


def record_worker_env(env):
    """What a Ray worker on this node received from the driver: the variable names (never the values), so a test
    can see which ones vLLM carried over."""
    sc.write_json(worker_env_file(), sorted(env))


def start_actor(env, old=None):
    """vLLM's RayWorkerWrapper on this node: a process with this raylet's environment (the container's) updated with
    what the driver sent, as vllm/v1/worker/worker_base.py update_environment_variables sets each name in os.environ
    (vllm/utils/system_utils.py). Real Ray starts the actor first and vLLM then changes os.environ, which
    /proc/PID/environ does not show; the stand-in starts it with the result, so a test reads there the values NCCL,
    Gloo and UCX would see. Titled as Ray titles an actor's process (ray::<class>). A newer env replaces OLD."""
    if old is not None and old.poll() is None:
        old.terminate()
        try:
            old.wait(5)
        except Exception:  # noqa: BLE001 - a stuck one is killed
            old.kill()
    merged = dict(os.environ)
    merged.update(env)
    code = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "parent = os.getppid()\n"
            "while os.getppid() == parent:\n"
            "    time.sleep(1)\n")
    return subprocess.Popen([sys.executable, "-c", code, "ray::RayWorkerWrapper"], env=merged, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


def run_worker(address, node):
    """Heartbeat loop of a worker raylet; exits when marked dead or on SIGTERM."""
    stop = threading.Event()

    def on_term(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    actor = [None]
    try:
        return _heartbeats(address, node, stop, actor)
    finally:
        if actor[0] is not None and actor[0].poll() is None:
            actor[0].terminate()


def _heartbeats(address, node, stop, actor):
    last_ok = time.time()
    while not stop.wait(HEARTBEAT_SECONDS):
        try:
            code, body = sc.gcs_call(address, "/api/heartbeat", {"node_id": node["NodeID"]}, timeout=1.5)
        except sc.GcsUnavailable:
            if time.time() - last_ok > 60:
                _log("Failed to connect to GCS within 60 seconds. GCS may have been killed. "
                     "It's either GCS is terminated by `ray stop` or is killed unexpectedly. "
                     "If it is killed unexpectedly, see the log file gcs_server.out.",
                     level="ERROR", where="gcs_rpc_client.h:179")
                return 1
            continue
        if code == 200 and body and body.get("env") is not None:
            record_worker_env(body["env"])
            actor[0] = start_actor(body["env"], actor[0])
        if code == 404:
            try:
                sc.gcs_call(address, "/api/register", node)
            except sc.GcsUnavailable:
                pass
        elif code == 410:
            _log("[Timeout] Exiting because this node manager has mistakenly been marked as dead by the GCS: "
                 "GCS failed to check the health of this node for 5 times. This is likely because the machine "
                 "or raylet has become overloaded.", level="FATAL", where="node_manager.cc:1180")
            return 1
        last_ok = time.time()
    try:
        sc.gcs_call(address, "/api/unregister", {"node_id": node["NodeID"]}, timeout=1.5)
    except sc.GcsUnavailable:
        pass
    return 0
