"""`ray` command-line stand-in: start (head / worker), status, stop, --version."""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import simcommon as sc

CONNECT_TIMEOUT = float(os.environ.get("RAY_SIM_CONNECT_TIMEOUT_SECONDS", "5"))


def ray_version():
    return sc.ray_version()


def log(level, where, msg, stream=None):
    (stream or sys.stdout).write("%s\t%s %s -- %s\n" % (sc.ray_ts(), level, where, msg))
    (stream or sys.stdout).flush()


def fake_traceback(frames, final):
    sc.err("Traceback (most recent call last):")
    for f, line, fn, code in frames:
        sc.err('  File "%s", line %d, in %s' % (f, line, fn))
        sc.err("    " + code)
    sc.err(final)


RAY_PY = "/usr/local/lib/python3.12/dist-packages/ray"
CLI_FRAMES = [
    ("/usr/local/bin/ray", 10, "<module>", "sys.exit(main())"),
    (RAY_PY + "/scripts/scripts.py", 2807, "main", "return cli()"),
    ("/usr/local/lib/python3.12/dist-packages/click/core.py", 1442, "__call__", "return self.main(*args, **kwargs)"),
    (RAY_PY + "/autoscaler/_private/cli_logger.py", 823, "wrapper", "return f(*args, **kwargs)"),
]


# ------------------------------------------------------------------ arg parsing

def parse_opts(argv):
    """click-like: --k=v, --k v, and flags."""
    flags = {"head", "block", "disable-usage-stats", "force", "verbose", "v", "include-dashboard-flag"}
    opts, pos = {}, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") or (a.startswith("-") and len(a) == 2):
            key = a.lstrip("-")
            if "=" in key:
                k, v = key.split("=", 1)
                opts[k] = v
            elif key in flags:
                opts[key] = True
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                opts[key] = argv[i + 1]
                i += 1
            else:
                opts[key] = True
        else:
            pos.append(a)
        i += 1
    return opts, pos


# ------------------------------------------------------------------ local state

def state_file():
    return os.path.join(sc.ray_dir(), "sim", "daemons.json")


def local_daemons():
    return [d for d in sc.read_json(state_file(), []) if sc.pid_alive(d.get("pid"))]


def record_daemon(entry):
    ds = local_daemons()
    ds.append(entry)
    sc.write_json(state_file(), ds)


def write_current_cluster(address):
    os.makedirs(sc.ray_dir(), exist_ok=True)
    with open(os.path.join(sc.ray_dir(), "ray_current_cluster"), "w") as f:
        f.write(address + "\n")


def mem_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 128 * 1024 ** 3


def make_node(ip, opts, is_head):
    cpus = float(opts.get("num-cpus") or os.cpu_count() or 1)
    gpus = float(opts.get("num-gpus") if opts.get("num-gpus") is not None else 1)
    total = mem_bytes()
    memory = float(opts.get("memory") or int(total * 0.7))
    obj = float(opts.get("object-store-memory") or int(total * 0.3))
    resources = {"CPU": cpus, "memory": memory, "object_store_memory": obj, "node:%s" % ip: 1.0}
    if gpus > 0:
        resources["GPU"] = gpus
        resources["accelerator_type:GB10"] = 1.0
    if is_head:
        resources["node:__internal_head__"] = 1.0
    extra = opts.get("resources")
    if extra:
        try:
            resources.update({k: float(v) for k, v in json.loads(extra).items()})
        except (ValueError, AttributeError):
            pass
    rel = sc.release()
    return {
        "NodeID": secrets.token_hex(28),
        "NodeManagerAddress": ip,
        "NodeManagerHostname": socket.gethostname(),
        "NodeManagerPort": 0,
        "ObjectManagerPort": 0,
        "ObjectStoreSocketName": "/tmp/ray/session_latest/sockets/plasma_store",
        "RayletSocketName": "/tmp/ray/session_latest/sockets/raylet",
        "MetricsExportPort": 0,
        "NodeName": ip,
        "RuntimeEnvAgentPort": 0,
        "Resources": resources,
        "Labels": {"ray.io/node-id": ""},
        "IsHead": bool(is_head),
        "pid": 0,
        # what this host's image carries, so a driver can notice mixed images
        "SimImage": {"vllm": rel.get("version"), "architectures": rel.get("architectures", []),
                     "ray": ray_version()},
    }


def spawn_daemon(args, pass_fds=()):
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    logdir = os.path.join(sc.ray_dir(), "session_latest", "logs")
    os.makedirs(logdir, exist_ok=True)
    name = "gcs_server.out" if args[0] == "head" else "raylet.out"
    logf = open(os.path.join(logdir, name), "ab")
    # Named as Ray's own daemons are, the executables GCS_SERVER_EXECUTABLE (.../gcs/gcs_server) and
    # RAYLET_EXECUTABLE (.../raylet/raylet) in ray-project/ray python/ray/_private/services.py: the interpreter is
    # exec'd through a link of that name, so /proc/PID/comm (and `pkill raylet`) shows it from the exec on, before
    # `ray start` returns, as for the real binaries. The head's one daemon stands in for both.
    comm = "gcs_server" if args[0] == "head" else "raylet"
    link = os.path.join(sc.ray_dir(), "sim", "bin", comm)
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        try:
            os.symlink(sys.executable, link)
        except FileExistsError:
            pass
    p = subprocess.Popen([link, "-c", "from ray._sim_cli import daemon_main; daemon_main()"] + args,
                         stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, pass_fds=pass_fds,
                         start_new_session=True, close_fds=True, env=env)
    logf.close()
    return p


def daemon_main():
    # argv: role ...
    from ray import _sim_gcs
    role = sys.argv[1]
    if role == "head":
        fd, node_json, session_json, dash = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
        node = json.loads(node_json)
        node["pid"] = os.getpid()
        dashboard = None
        if dash:
            h, p = dash.rsplit(":", 1)
            dashboard = (h, int(p))
        sys.exit(_sim_gcs.run_head(fd, node, json.loads(session_json), dashboard))
    else:
        address, node_json = sys.argv[2], sys.argv[3]
        node = json.loads(node_json)
        node["pid"] = os.getpid()
        # re-register with our real pid (the CLI registered first to fail fast)
        try:
            sc.gcs_call(address, "/api/register", node)
        except sc.GcsUnavailable:
            pass
        sys.exit(_sim_gcs.run_worker(address, node))


# ------------------------------------------------------------------ ray start

def usage_stats_line(opts):
    if opts.get("disable-usage-stats") or os.environ.get("RAY_USAGE_STATS_ENABLED") == "0":
        sc.out("Usage stats collection is disabled.")
    else:
        log("INFO", "usage_lib.py:473",
            "Usage stats collection is enabled by default without user confirmation because this terminal "
            "is detected to be non-interactive. To disable this, add `--disable-usage-stats` to the command "
            "that starts the cluster, or run the following command: `ray disable-usage-stats` before starting "
            "the cluster. See https://docs.ray.io/en/master/cluster/usage-stats.html for more details.")
    sc.out("")


def already_running(address):
    fake_traceback(CLI_FRAMES + [(RAY_PY + "/scripts/scripts.py", 858, "start",
                                  "raise ConnectionError(")],
                   "ConnectionError: Ray is already running at %s. Please specify a different port using "
                   "the `--port` command to `ray start`." % address)
    return 1


def block_forever(children):
    log("INFO", "scripts.py:1076", "--block")
    log("INFO", "scripts.py:1077", "This command will now block forever until terminated by a signal.")
    log("INFO", "scripts.py:1080",
        "Running subprocesses are monitored and a message will be printed if any of them terminate "
        "unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported.")

    def on_term(signum, frame):
        for c in children:
            try:
                c.terminate()
            except OSError:
                pass
        for c in children:
            try:
                c.wait(5)
            except subprocess.TimeoutExpired:
                c.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    while True:
        for c in children:
            if c.poll() is not None:
                log("ERROR", "scripts.py:1102", "Some Ray subprocesses exited unexpectedly:")
                sc.out("  gcs_server [exit code=%s]" % c.returncode)
                sys.exit(1)
        time.sleep(0.5)


def start(argv):
    opts, _ = parse_opts(argv)
    ip = sc.node_ip(opts.get("node-ip-address"))
    for d in local_daemons():
        return already_running(d.get("address", "%s:%s" % (ip, opts.get("port", 6379))))
    # `ray start` checks for a token before it starts anything when RAY_AUTH_MODE=token (ray-project/ray#58276;
    # the message and RuntimeError as doc/source/ray-security/token-auth.md shows them for Ray 2.52).
    try:
        sc.ray_auth_token()
    except sc.RayTokenError as e:
        usage_stats_line(opts)
        fake_traceback(CLI_FRAMES + [(RAY_PY + "/scripts/scripts.py", 946, "start",
                                      "ensure_token_if_auth_enabled(system_config, create_token_if_missing=False)")],
                       "RuntimeError: %s" % e)
        return 1
    if opts.get("head"):
        return start_head(opts, ip)
    address = opts.get("address")
    if not address:
        fake_traceback(CLI_FRAMES, "ValueError: If --head is not passed in, --address must be provided.")
        return 1
    return start_worker(opts, ip, address.replace("ray://", ""))


def start_head(opts, ip):
    port = int(opts.get("port") or 6379)
    address = "%s:%d" % (ip, port)
    usage_stats_line(opts)
    sc.out("Local node IP: %s" % ip)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((ip, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        log("CRITICAL", "node.py:1315", "Failed to start GCS. Last 10 lines of error files:")
        sc.out("[%s E %d %d] (gcs_server) grpc_server.cc:141: Failed to start the grpc server. The specified "
               "port is %d. This means that Ray's core components will not be able to function correctly. "
               "If the server startup error message is `Address already in use`, it indicates the server fails "
               "to start because the port is already used by other processes (such as --node-manager-port, "
               "--object-manager-port, --gcs-server-port, and ports between --min-worker-port, "
               "--max-worker-port). Try running sudo lsof -i :%d to check if there are other processes "
               "listening to the port." % (time.strftime("%Y-%m-%d %H:%M:%S"), os.getpid(), os.getpid(),
                                            port, port))
        sc.out("[%s E %d %d] (gcs_server) grpc_server.cc:142: %s" % (
            time.strftime("%Y-%m-%d %H:%M:%S"), os.getpid(), os.getpid(), e.strerror))
        fake_traceback(CLI_FRAMES + [(RAY_PY + "/_private/node.py", 1316, "start_gcs_server",
                                      'raise RuntimeError("Failed to start GCS.")')],
                       "RuntimeError: Failed to start GCS.")
        return 1
    node = make_node(ip, opts, True)
    session = {"session_name": time.strftime("session_%Y-%m-%d_%H-%M-%S_") + "%06d_%d" % (
        int(time.time() * 1e6) % 1000000, os.getpid()), "ray_version": ray_version(), "gcs_address": address}
    dash = ""
    dash_host = opts.get("dashboard-host", "127.0.0.1")
    dash_port = int(opts.get("dashboard-port") or 8265)
    if opts.get("dashboard-port"):
        dash = "%s:%d" % (dash_host, dash_port)
    p = spawn_daemon(["head", str(sock.fileno()), json.dumps(node), json.dumps(session), dash],
                     pass_fds=(sock.fileno(),))
    sock.close()
    # wait until it answers
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            code, _ = sc.gcs_call(address, "/api/cluster", timeout=1)
            if code == 200:
                break
        except sc.GcsUnavailable:
            time.sleep(0.05)
    record_daemon({"pid": p.pid, "role": "head", "address": address, "node_id": node["NodeID"]})
    write_current_cluster(address)
    shown = dash_host if dash_host not in ("0.0.0.0", "") else ip
    lines = [
        "--------------------", "Ray runtime started.", "--------------------", "",
        "Next steps",
        "  To add another node to this Ray cluster, run",
        "    ray start --address='%s'" % address, "",
        "  To connect to this Ray cluster:",
        "    import ray",
        "    ray.init()", "",
        "  To submit a Ray job using the Ray Jobs CLI:",
        "    RAY_API_SERVER_ADDRESS='http://%s:%d' ray job submit --working-dir . -- python my_script.py" % (
            shown, dash_port), "",
        "  See https://docs.ray.io/en/latest/cluster/running-applications/job-submission/index.html ",
        "  for more information on submitting Ray jobs to the Ray cluster.", "",
        "  To terminate the Ray runtime, run",
        "    ray stop", "",
        "  To view the status of the cluster, use",
        "    ray status", "",
        "  To monitor and debug Ray, view the dashboard at ",
        "    %s:%d" % (shown, dash_port), "",
        "  If connection to the dashboard fails, check your firewall settings and network configuration.",
    ]
    sc.out("")
    for line in lines:
        sc.out(line)
    if opts.get("block"):
        block_forever([p])
    return 0


def gcs_unreachable_msg(address):
    return ("Unable to connect to GCS at %s. Check that (1) Ray GCS with matching version started "
            "successfully at the specified address, and (2) there is no firewall setting preventing access."
            % address)


def start_worker(opts, ip, address):
    # Fault: the worker comes up on another address than its fabric one (as Ray does when it
    # picks the wrong interface); it joins, but not as the node the head expects.
    ip = sc.faults().get("node_ip_override") or ip
    sc.out("Local node IP: %s" % ip)
    node = make_node(ip, opts, False)
    refused = bool(sc.faults().get("ray_join_refused"))
    deadline = time.time() + CONNECT_TIMEOUT
    registered = False
    next_warn = 0
    while time.time() < deadline:
        if not refused:
            try:
                code, _ = sc.gcs_call(address, "/api/register", node, timeout=1)
                if code == 200:
                    registered = True
                    break
            except sc.GcsAuthError as e:
                # The head's GCS is in token mode and this node's token is missing or another one. The status text is
                # Ray's (simcommon.AUTH_REFUSED); the Python exception wrapped around it here is the stand-in's.
                fake_traceback(CLI_FRAMES + [
                    (RAY_PY + "/scripts/scripts.py", 1117, "start", "node = ray._private.node.Node("),
                    (RAY_PY + "/_private/node.py", 187, "__init__", "self._init_gcs_client()")],
                    "RuntimeError: Failed to connect to GCS at %s: %s" % (address, e))
                return 1
            except sc.GcsUnavailable:
                pass
        if time.time() >= next_warn:
            log("WARNING", "utils.py:1591", gcs_unreachable_msg(address), stream=sys.stderr)
            next_warn = time.time() + 2
        time.sleep(0.3)
    if not registered:
        fake_traceback(CLI_FRAMES + [
            (RAY_PY + "/scripts/scripts.py", 1117, "start", "node = ray._private.node.Node("),
            (RAY_PY + "/_private/node.py", 187, "__init__", "self._init_gcs_client()"),
            (RAY_PY + "/_private/node.py", 758, "_init_gcs_client", "raise ConnectionError(")],
            "ConnectionError: " + gcs_unreachable_msg(address))
        return 1
    p = spawn_daemon(["worker", address, json.dumps(node)])
    record_daemon({"pid": p.pid, "role": "worker", "address": address, "node_id": node["NodeID"]})
    write_current_cluster(address)
    sc.out("")
    for line in ["--------------------", "Ray runtime started.", "--------------------", "",
                 "To terminate the Ray runtime, run", "  ray stop"]:
        sc.out(line)
    if opts.get("block"):
        block_forever([p])
    return 0


# ------------------------------------------------------------------ ray status

def fmt_mem(b):
    gib = b / 1024 ** 3
    return "%.2fGiB" % gib


def status(argv):
    opts, _ = parse_opts(argv)
    address = opts.get("address") or sc.current_cluster_address()
    if not address:
        fake_traceback(CLI_FRAMES, "ConnectionError: Could not find any running Ray instance. Please specify the "
                       "one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable.")
        return 1
    try:
        code, snap = sc.gcs_call(address, "/api/cluster", timeout=3)
    except sc.GcsUnavailable:
        log("WARNING", "utils.py:1591", gcs_unreachable_msg(address), stream=sys.stderr)
        fake_traceback(CLI_FRAMES, "ConnectionError: " + gcs_unreachable_msg(address))
        return 1
    nodes = snap["nodes"]
    alive = [n for n in nodes if n["Alive"]]
    dead = [n for n in nodes if not n["Alive"]]
    pgs = snap["placement_groups"]
    used = {}
    for pg in pgs:
        if pg.get("state") == "CREATED":
            for b in pg["bundles"]:
                for k, v in b.items():
                    if not k.startswith("node:"):
                        used[k] = used.get(k, 0.0) + v
    total = {}
    for n in alive:
        for k, v in n["Resources"].items():
            total[k] = total.get(k, 0.0) + v
    t = time.time()
    sc.out("======== Autoscaler status: %s.%06d ========" % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)),
                                                            int((t % 1) * 1e6)))
    sc.out("Node status")
    sc.out("-" * 63)
    sc.out("Active:")
    if alive:
        for n in alive:
            sc.out(" 1 node_%s" % n["NodeID"])
    else:
        sc.out(" (no active nodes)")
    sc.out("Idle:")
    sc.out(" (no idle nodes)")
    sc.out("Pending:")
    sc.out(" (no pending nodes)")
    sc.out("Recent failures:")
    if dead:
        for n in dead:
            sc.out(" node_%s: NodeTerminated (ip: %s)" % (n["NodeID"], n["NodeManagerAddress"]))
    else:
        sc.out(" (no failures)")
    sc.out("")
    sc.out("Resources")
    sc.out("-" * 63)
    sc.out("Usage:")
    for k in ("CPU", "GPU"):
        if k in total:
            u = used.get(k, 0.0)
            extra = " (%.1f used of %.1f reserved in placement groups)" % (u, u) if u else ""
            sc.out(" %.1f/%.1f %s%s" % (u, total[k], k, extra))
    for k in sorted(total):
        if k.startswith("accelerator_type:"):
            sc.out(" 0.0/%.1f %s" % (total[k], k))
    sc.out(" 0B/%s memory" % fmt_mem(total.get("memory", 0)))
    sc.out(" 0B/%s object_store_memory" % fmt_mem(total.get("object_store_memory", 0)))
    sc.out("")
    sc.out("Demands:")
    pending = [pg for pg in pgs if pg.get("state") == "PENDING"]
    if pending:
        for pg in pending:
            b = {k: v for k, v in pg["bundles"][-1].items() if not k.startswith("node:")}
            sc.out(" %s * %d (PACK): 1+ pending placement groups" % (b, len(pg["bundles"])))
    else:
        sc.out(" (no resource demands)")
    return 0


# ------------------------------------------------------------------ ray stop

def stop(argv):
    opts, _ = parse_opts(argv)
    force = bool(opts.get("force") or opts.get("f"))
    grace = float(opts.get("grace-period") or 16)
    ds = local_daemons()
    for d in ds:
        try:
            os.kill(d["pid"], signal.SIGKILL if force else signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + min(grace, 10)
    while time.time() < deadline and any(sc.pid_alive(d["pid"]) for d in ds):
        time.sleep(0.05)
    for d in ds:
        if sc.pid_alive(d["pid"]):
            try:
                os.kill(d["pid"], signal.SIGKILL)
            except OSError:
                pass
    for f in (state_file(), os.path.join(sc.ray_dir(), "ray_current_cluster")):
        try:
            os.remove(f)
        except OSError:
            pass
    if not ds:
        sc.out("Did not find any active Ray processes.")
    else:
        sc.out("Stopped all %d Ray processes." % len(ds))
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sc.out("Usage: ray [OPTIONS] COMMAND [ARGS]...\n\nCommands:\n  start   Start Ray processes manually "
               "on the local machine.\n  status  Print cluster status, including autoscaling info.\n  stop    "
               "Stop Ray processes manually on the local machine.")
        return 0
    if argv[0] in ("--version", "version"):
        sc.out("ray, version %s" % ray_version())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "start":
        return start(rest)
    if cmd == "status":
        return status(rest)
    if cmd == "stop":
        return stop(rest)
    if cmd == "list" and rest[:1] == ["nodes"]:
        return list_nodes(rest[1:])
    sc.err("Usage: ray [OPTIONS] COMMAND [ARGS]...\nTry 'ray --help' for help.\n\nError: No such command '%s'."
           % cmd)
    return 2


def list_nodes(argv):
    opts, _ = parse_opts(argv)
    address = opts.get("address") or sc.current_cluster_address()
    try:
        _, snap = sc.gcs_call(address or "127.0.0.1:6379", "/api/cluster", timeout=3)
    except sc.GcsUnavailable:
        fake_traceback(CLI_FRAMES, "ConnectionError: " + gcs_unreachable_msg(address))
        return 1
    sc.out("======== List: %s ========" % time.strftime("%Y-%m-%d %H:%M:%S"))
    sc.out("Stats:\n------------------------------\nTotal: %d\n\nTable:\n------------------------------"
           % len(snap["nodes"]))
    sc.out("    NODE_ID                                                   NODE_IP       IS_HEAD_NODE    STATE")
    for i, n in enumerate(snap["nodes"]):
        sc.out(" %d  %s  %s  %s  %s" % (i, n["NodeID"], n["NodeManagerAddress"], n["IsHead"],
                                       "ALIVE" if n["Alive"] else "DEAD"))
    return 0
