# fabric: prove the fabric before any Ray or vLLM launch. One rank per host runs a short
# NCCL all-reduce with the image's own PyTorch and NCCL and exactly the environment the
# container carries (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_DISABLE, ...), with
# NCCL_DEBUG=INFO. It reports the transport every channel used (NCCL's own lines), the bus
# bandwidth at a few sizes, and fails when HCAs are configured but NCCL used sockets.
#
# python3 standard library (torch only inside the rank process) and spark_vllm/gid.py (NCCL_IB_GID_INDEX from this
# host's sysfs), so it also runs on its own, from components/hostProgram:
#
#   python3 -m spark_vllm.fabric '{"rank": 0, "worldSize": 2, "masterAddr": "192.168.100.10", "masterPort": 29551}'
#   torchrun --nnodes 2 --nproc-per-node 1 ... -m spark_vllm.fabric     (rank/world/master from the env)
#
# Convention of spark-vllm's helper program: progress lines on stdout, then ONE JSON object as
# the last stdout line; on failure what is wrong and how to fix it on stderr, exit 1. The entry is
# fabric_check(args) (args: the JSON object); joined into the helper program
# (components/plan/toolsProgram.ts) it shares one namespace with the other modules, so its own helpers
# are _say/_fail and it binds no `main`.
#
# How NCCL's output is captured: the rank runs in a forked child (torch is imported only
# there) with NCCL_DEBUG_FILE set. NCCL writes its log lines to stdout with fwrite and no
# fflush (NVIDIA/nccl v2.28.9-1 src/debug.cc, ncclDebugLog), so into a pipe or file they are
# block-buffered and lost when a hung rank is killed; a file named by NCCL_DEBUG_FILE is opened
# with setlinebuf (same file, ncclDebugInit), so every line is on disk as it is printed.
# The child's own stdout/stderr (torch's exceptions) go to a second file. The parent never
# imports torch, enforces the timeout, and kills the child's process group if it hangs.
import datetime
import json
import os
import re
import signal
import socket
import sys
import time
import traceback

if not __package__:  # run as a file (`python3 .../spark_vllm/fabric.py`, tests/sim/image/test_torch_standin.py): its package's parent on the path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from spark_vllm.gid import GID_SYSFS, GID_VARIABLE, gid_choice

RESULT_TAG = "FABRIC_RESULT "
DEFAULT_SIZES = [1 << 20, 16 << 20, 256 << 20]
DEFAULT_ITERS = 10
DEFAULT_WARMUP = 3
DEFAULT_TIMEOUT = 120
DEFAULT_LOG_DIR = "/var/tmp/spark-vllm"
# Bandwidth warning: busbw at the largest size below this fraction of the link's line rate.
# Bus bandwidth is the figure nccl-tests compares with the hardware's peak (nccl-tests
# doc/PERFORMANCE.md, "Bus Bandwidth"); a healthy RoCE/IB link gets most of its line rate for
# messages of hundreds of MiB, while NCCL over TCP sockets gets a small fraction of it (real run,
# two H200s, tests/fixtures/nccl/: 299.6 GB/s over NVLink, 4.2 GB/s over sockets at 256 MiB).
# 25% is our own threshold: far enough below line rate that message size or tuning alone does
# not explain it. The line rate: args.linkGbps, else /sys/class/net/<NCCL_SOCKET_IFNAME>/speed.
DEFAULT_MIN_LINK_FRACTION = 0.25
# Logging only: these change what NCCL prints, never which transport it picks.
# INIT/BOOTSTRAP/ENV are NCCL's default subsystems; NET adds the NET/IB and NET/Socket
# lines (src/debug.cc, NCCL_DEBUG_SUBSYS options).
DEBUG_SUBSYS = "INIT,BOOTSTRAP,ENV,NET"
# Variables that decide the transport; echoed in the output as the container carries them.
TRANSPORT_ENV = ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_P2P_DISABLE",
                 "NCCL_SHM_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL", "NCCL_NVLS_ENABLE",
                 "GLOO_SOCKET_IFNAME"]


def _say(text):
    print(text, flush=True)


def _fail(lines):
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    sys.exit(1)


# ---------------------------------------------------------------- NCCL log parsing (pure)

# NCCL sources cited below are NVIDIA/nccl at tag v2.28.9-1 (the version of the real runs in
# tests/fixtures/nccl/, whose lines these patterns were checked against).
# NCCL's log line: `host:pid:tid [cudaDev] NCCL INFO msg` and, with a timestamp by default,
# `[2026-11-30 21:39:41] host:pid:tid [cudaDev] file.cc:line NCCL WARN msg` (src/debug.cc).
_NCCL_LINE = re.compile(r"NCCL (INFO|WARN) (.*)$")
# Channel lines: src/transport/p2p.cc:393 (`Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s`),
# src/transport/shm.cc (`Channel %02d : ... via SHM/direct`), src/transport/net.cc:313/359
# (`Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s`, `[receive]` likewise).
# The ring lines `Channel 00/24 : 0 1` (src/graph/rings.cc) have no `->` and do not match.
_CHANNEL = re.compile(r"^Channel ([0-9]+)(?:/([0-9]+))? : ([0-9]+)\[([0-9]+)\] -> ([0-9]+)\[([0-9]+)\]"
                      r"(?: \[(send|receive)\])? via (.+)$")
# `Using network %s` (src/init.cc:428): the network plugin NCCL chose, `IB` or `Socket` built in.
# It is printed on one host too, where the channels may all be P2P (tests/fixtures/nccl/p2p.nccl.log).
_USING_NETWORK = re.compile(r"^Using network (.+)$")
# `NCCL version 2.28.9+cuda13.0` (src/init.cc, VERSION_STRING / showVersion).
_VERSION = re.compile(r"^NCCL version ([0-9][^ ]*)")
# `Failed to initialize NET plugin IB`, `Initialized NET plugin Socket`, `Assigned NET plugin Socket
# to comm` (src/plugin/net.cc:187/225/244).
_NET_PLUGIN = re.compile(r"^(Failed to initialize|Initialized|Assigned) NET plugin ([^ ]+)")
# The GID index a RoCE queue pair uses, INFO(NCCL_NET) when a connection is set up (`NCCL MergedDev` for merged
# devices): `NET/IB: NCCL Dev %d IbDev %d Port %d qpn %d mtu %d GID %ld (%lX/%lX) ...` (NVIDIA/nccl v2.28.9-1
# src/transport/net_ib.cc:1490), `NET/IB: %s: NCCL Dev %d IbDev %d Port %d qp_num %d mtu %d GID %ld ...` with the
# function's name first (v2.30.7-1 src/transport/net_ib/connect.cc:968).
_QP_GID = re.compile(r"^NET/IB: (?:[A-Za-z0-9_]+: )?NCCL (?:Merged)?Dev [0-9]+ IbDev [0-9]+ Port [0-9]+ "
                     r"(?:qpn|qp_num) [0-9]+ mtu [0-9]+ GID (-?[0-9]+) ")


def transport_class(via):
    """`NET/IB/0/GDRDMA` -> `NET/IB`, `NET/Socket/1` -> `NET/Socket`, `P2P/CUMEM/read` -> `P2P`, `SHM/direct/direct` -> `SHM`."""
    if via.startswith("NET/"):
        m = re.match(r"NET/(.+?)/[0-9]", via)
        return "NET/" + (m.group(1) if m else via[4:].split("/")[0])
    return via.split("/")[0]


def summarise_transport(classes):
    """One name for a set of transport classes: a network one first (one rank per host uses only that)."""
    if not classes:
        return None
    names = sorted(classes, key=lambda c: (not c.startswith("NET/"), c))
    return "+".join(names)


def parse_nccl_log(text):
    """Facts from NCCL_DEBUG=INFO output. Lines are kept as printed (stripped), to be quoted."""
    facts = {"version": None, "network": None, "usingNetworkLine": None, "ibNoDevice": None, "ibLines": [],
             "ibHcaLine": None, "ibPluginFailed": None, "socketLines": [], "channels": [], "transports": {},
             "transportClasses": {}, "transport": None, "warnings": [], "bootstrapError": None, "gidIndexes": []}
    for raw in text.splitlines():
        m = _NCCL_LINE.search(raw)
        if not m:
            continue
        level, msg = m.group(1), m.group(2).strip()
        line = raw.strip()
        if level == "WARN":
            facts["warnings"].append(line)
            # src/bootstrap.cc:114 `Bootstrap : no socket interface found` (NCCL_SOCKET_IFNAME matches
            # nothing; tests/fixtures/nccl/iface-missing.nccl.log), and
            # `NET/Socket : No usable listening interface found` (NCCL_COMM_ID given).
            if facts["bootstrapError"] is None and (msg.startswith("Bootstrap") or
                                                    "No usable listening interface" in msg):
                facts["bootstrapError"] = line
            continue
        v = _VERSION.match(msg)
        if v and not facts["version"]:
            facts["version"] = v.group(1)
            continue
        u = _USING_NETWORK.match(msg)
        if u:
            facts["network"] = u.group(1)
            facts["usingNetworkLine"] = facts["usingNetworkLine"] or line
            continue
        p = _NET_PLUGIN.match(msg)
        if p:
            if p.group(1) == "Failed to initialize" and p.group(2) == "IB" and not facts["ibPluginFailed"]:
                facts["ibPluginFailed"] = line
            continue
        if msg.startswith("NCCL_IB_HCA set to"):  # src/transport/net_ib.cc:702
            facts["ibHcaLine"] = facts["ibHcaLine"] or line
            continue
        if msg.startswith("NET/IB"):
            g = _QP_GID.match(msg)
            if g:
                if int(g.group(1)) not in facts["gidIndexes"]:
                    facts["gidIndexes"].append(int(g.group(1)))
                continue
            facts["ibLines"].append(line)
            # src/transport/net_ib.cc:826: `NET/IB : No device found.`
            if msg.startswith("NET/IB : No device found") and not facts["ibNoDevice"]:
                facts["ibNoDevice"] = line
            continue
        if msg.startswith("NET/Socket"):
            facts["socketLines"].append(line)
            continue
        c = _CHANNEL.match(msg)
        if c:
            via = c.group(8).strip()
            cls = transport_class(via)
            facts["channels"].append({"channel": int(c.group(1)), "from": int(c.group(3)), "to": int(c.group(5)),
                                      "direction": c.group(7), "via": via, "transport": cls, "line": line})
            facts["transports"][via] = facts["transports"].get(via, 0) + 1
            facts["transportClasses"][cls] = facts["transportClasses"].get(cls, 0) + 1
    facts["transport"] = summarise_transport(facts["transportClasses"])
    return facts


# ---------------------------------------------------------------- bandwidth (pure)

def bus_bandwidth(size_bytes, seconds, world_size):
    """(algbw, busbw) in GB/s (1e9 bytes) for one all-reduce of size_bytes taking seconds.

    nccl-tests doc/PERFORMANCE.md: algbw = S/t; for AllReduce busbw = algbw * 2(n-1)/n.
    """
    if seconds <= 0:
        return None, None
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2.0 * (world_size - 1) / world_size


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return "%dB" % n


def link_gbps_from_sysfs(iface, root="/sys/class/net"):
    """Line rate of a netdev in Gb/s from /sys/class/net/<iface>/speed (Mb/s; -1 or absent: unknown)."""
    if not iface:
        return None
    try:
        with open(os.path.join(root, iface, "speed")) as f:
            mbps = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return mbps / 1000.0 if mbps > 0 else None


def bandwidth_warning(results, link_gbps, fraction, host):
    """A warning line when busbw at the largest size is below fraction x line rate, else None."""
    if not results or not link_gbps:
        return None
    top = max(results, key=lambda r: r["bytes"])
    if top.get("busbwGBps") is None:
        return None
    line_rate = link_gbps / 8.0
    if top["busbwGBps"] >= fraction * line_rate:
        return None
    return ("%s: all-reduce bus bandwidth %.2f GB/s at %s is below %d%% of the fabric link's line rate "
            "(%g Gb/s = %.1f GB/s): check the link speed and MTU (ip link, ethtool), the RoCE setup of the HCAs, "
            "and that NCCL used NET/IB" % (host, top["busbwGBps"], size_label(top["bytes"]), round(fraction * 100),
                                           link_gbps, line_rate))


# ---------------------------------------------------------------- policy (pure)

def configured_hcas(env, explicit=None):
    """The HCAs NCCL was asked to use: args.hcas if given, else NCCL_IB_HCA (`^` excludes, `=` exact)."""
    if explicit is not None:
        return [h for h in explicit if h]
    value = (env.get("NCCL_IB_HCA") or "").strip()
    if not value or value.startswith("^"):
        return []
    return [h.split(":")[0] for h in value.lstrip("=").split(",") if h.strip()]


def rank_gid(host, hcas, address, root=GID_SYSFS):
    """(the verdict's `gid`, failure lines) for this rank: NCCL_IB_GID_INDEX from this host's own table (spark_vllm/gid.py
    says what NCCL does unset and why it is set); (None, None) with no HCA, where NCCL runs over sockets, and when no
    address is given (run on its own, not by the plan, which always passes the host's fabric address): NCCL picks."""
    if not hcas or not address:
        return None, None
    choice = gid_choice(hcas, address or "", root)
    if choice["problem"]:
        return None, ["%s: %s" % (host, choice["problem"]),
                      "fix: the fabric address's RoCE v2 GID must be on one of the configured HCAs; `ls %s/*/ports/*/gids` "
                      "and `cat .../gid_attrs/types/N` on %s list the table, or set spark-vllm:hosts[].fabric.hcas to [] "
                      "to run over TCP on purpose" % (root, host)]
    g = choice["fabricGid"]
    report = {"variable": GID_VARIABLE, "index": choice["index"], "perHca": choice["perHca"], "sysfs": root,
              "table": {"hca": g["hca"], "port": g["port"], "index": g["index"], "type": "RoCE v2",
                        "address": g["address"]}}
    if choice["note"]:
        report["note"] = choice["note"]
    return report, None


def gid_progress(host, gid):
    """The progress line that says which GID index this rank runs with and where it is in the host's table."""
    t = gid["table"]
    where = "%s port %d GID %d is RoCE v2 with the fabric address %s in %s's table" % (t["hca"], t["port"], t["index"],
                                                                                       t["address"], host)
    if gid["index"] is None:
        return "fabric: %s: %s unset (%s): %s" % (host, GID_VARIABLE, where, gid["note"])
    return "fabric: %s: %s=%d (%s)" % (host, GID_VARIABLE, gid["index"], where)


def key_lines(facts):
    """NCCL's own lines that say which network it chose and why, in log order of importance."""
    # With no device, NCCL still prints `NET/IB : Using [RO]; OOB eth0:…` (no device listed): leave it out.
    ib = [facts["ibNoDevice"]] if facts["ibNoDevice"] else facts["ibLines"]
    lines = [facts["ibHcaLine"]] + ib + [facts["ibPluginFailed"], facts["usingNetworkLine"]]
    return [l for l in lines if l]


def used_sockets(facts):
    return facts["network"] == "Socket" or any(c.startswith("NET/Socket") for c in facts["transportClasses"])


def socket_fallback_problem(facts, hcas, env, host):
    """Failure lines when HCAs are configured but NCCL used sockets, quoting NCCL's own lines; else None."""
    if not hcas or not used_sockets(facts):
        return None
    lines = ["%s: NCCL used TCP sockets although HCAs are configured (NCCL_IB_HCA=%s): tensor parallelism over "
             "sockets runs many times slower than RoCE" % (host, env.get("NCCL_IB_HCA") or ",".join(hcas))]
    quoted = key_lines(facts)
    first_socket = next((c["line"] for c in facts["channels"] if c["transport"] == "NET/Socket"), None)
    if first_socket:
        quoted.append(first_socket)
    lines.append("NCCL said:")
    lines += ["  " + q for q in quoted]
    if (env.get("NCCL_IB_DISABLE") or "").strip() == "1":
        lines.append("fix: NCCL_IB_DISABLE=1 is set in the container; IB/RoCE needs it unset or 0")
    lines.append("fix: on %s check that %s exist and are ACTIVE (`ibdev2netdev`, `ibv_devinfo`), that they carry a RoCE v2 "
                 "GID with an IPv4 address, and that the container sees them (/dev/infiniband, IPC_LOCK, memlock "
                 "unlimited); or set spark-vllm:hosts[].fabric.hcas to [] to run over TCP on purpose"
                 % (host, ", ".join(hcas)))
    return lines


def failure_lines(facts, child_output, cfg, timed_out):
    """What is wrong, NCCL's own cause line, and the fix, for a rank that failed or hung."""
    host = cfg["host"]
    where = "rank %d of %d, master %s:%s" % (cfg["rank"], cfg["worldSize"], cfg.get("masterAddr") or "(env)",
                                             cfg.get("masterPort") or "(env)")
    lines = []
    exc = [l.strip() for l in child_output.splitlines()
           if re.match(r"^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception)(\([A-Za-z0-9_.]*\))?: .", l.strip())]
    if facts["bootstrapError"]:
        lines += ["%s: NCCL could not bootstrap the all-reduce (%s)" % (host, where), "NCCL said:",
                  "  " + facts["bootstrapError"]]
        iface = cfg["env"].get("NCCL_SOCKET_IFNAME")
        if "no socket interface found" in facts["bootstrapError"] and iface:
            lines.append("fix: NCCL_SOCKET_IFNAME=%s matches no interface with an address in the container on %s: set "
                         "spark-vllm:hosts[].fabric.interface to the fabric netdev (`ip -br addr` on the host)"
                         % (iface, host))
        else:
            lines.append("fix: check spark-vllm:hosts[].fabric.interface and .address on %s (`ip -br addr`)" % host)
    elif timed_out:
        lines.append("%s: the all-reduce did not finish within %d s (%s): the other hosts' checks did not start, or "
                     "this host cannot reach %s:%s over the fabric" % (host, cfg["timeoutSeconds"], where,
                                                                     cfg.get("masterAddr"), cfg.get("masterPort")))
        lines.append("fix: every host must run the check with the same masterAddr/masterPort; check the fabric "
                     "addresses, routes and firewalls (ping the master's fabric address from %s)" % host)
    elif any("retrieving ncclUniqueId" in e for e in exc):
        # torch's ProcessGroupNCCL::broadcastUniqueNCCLID: rank 0 makes NCCL's unique id and
        # shares it through the c10d store; it died or never got that far
        # (tests/fixtures/nccl/iface-missing-rank1.err).
        lines.append("%s: rank 0 (on the master, %s:%s) failed before it shared NCCL's unique id (%s): its own "
                     "fabric check says why" % (host, cfg.get("masterAddr"), cfg.get("masterPort"), where))
    else:
        lines.append("%s: the all-reduce failed (%s)" % (host, where))
    warnings = [w for w in facts["warnings"] if w != facts["bootstrapError"]][:6]
    if warnings:
        lines.append("NCCL said:")
        lines += ["  " + w for w in warnings]
    if exc:
        lines.append("exception: " + exc[-1][:500])
    return lines


# ---------------------------------------------------------------- arguments

def _env_int(env, key):
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return None


def resolve(args, env):
    """Arguments with defaults; rank/world/master fall back to torchrun's RANK/WORLD_SIZE/MASTER_*."""
    cfg = {
        "rank": args.get("rank", _env_int(env, "RANK")),
        "worldSize": args.get("worldSize", _env_int(env, "WORLD_SIZE")),
        "masterAddr": args.get("masterAddr"),
        "masterPort": args.get("masterPort"),
        "host": args.get("host") or socket.gethostname(),
        "address": args.get("address"),
        "device": args.get("device", _env_int(env, "LOCAL_RANK") or 0),
        "sizes": [int(s) for s in args.get("sizes") or DEFAULT_SIZES],
        "iters": int(args.get("iters", DEFAULT_ITERS)),
        "warmup": int(args.get("warmup", DEFAULT_WARMUP)),
        "timeoutSeconds": int(args.get("timeoutSeconds", DEFAULT_TIMEOUT)),
        "logDir": args.get("logDir") or DEFAULT_LOG_DIR,
        "minLinkFraction": float(args.get("minLinkFraction", DEFAULT_MIN_LINK_FRACTION)),
    }
    # tcp:// rendezvous when a master is given; env:// (torchrun's store) otherwise.
    cfg["initMethod"] = ("tcp://%s:%d" % (cfg["masterAddr"], int(cfg["masterPort"]))
                         if cfg["masterAddr"] and cfg["masterPort"] else "env://")
    iface = (env.get("NCCL_SOCKET_IFNAME") or "").lstrip("=^").split(",")[0]
    cfg["linkGbps"] = args.get("linkGbps") if args.get("linkGbps") is not None else link_gbps_from_sysfs(iface)
    cfg["hcas"] = configured_hcas(env, args.get("hcas"))
    cfg["env"] = {k: env[k] for k in TRANSPORT_ENV if k in env}
    problems = []
    if not isinstance(cfg["rank"], int) or not isinstance(cfg["worldSize"], int):
        problems.append("rank and worldSize are required (args or torchrun's RANK/WORLD_SIZE)")
    elif not 0 <= cfg["rank"] < cfg["worldSize"] or cfg["worldSize"] < 2:
        problems.append("rank %s / worldSize %s: need worldSize >= 2 and 0 <= rank < worldSize"
                        % (cfg["rank"], cfg["worldSize"]))
    if cfg["initMethod"] == "env://" and not (env.get("MASTER_ADDR") and env.get("MASTER_PORT")):
        problems.append("masterAddr and masterPort are required (args or MASTER_ADDR/MASTER_PORT)")
    if any(s < 4 or s % 4 for s in cfg["sizes"]) or cfg["iters"] < 1 or cfg["warmup"] < 0:
        problems.append("sizes must be multiples of 4 bytes, iters >= 1, warmup >= 0")
    return cfg, problems


# ---------------------------------------------------------------- the rank (child process)

def _rank(cfg):
    """One rank: all-reduce at each size; prints RESULT_TAG + JSON. Runs in the forked child."""
    import torch
    import torch.distributed as dist

    nccl = getattr(torch.cuda, "nccl", None)
    try:
        v = nccl.version() if nccl else None
        nccl_version = ".".join(str(x) for x in v) if isinstance(v, tuple) else v
    except Exception:  # noqa: BLE001 - a version string is informative only
        nccl_version = None
    _say("fabric: rank %d of %d on GPU %d: torch %s, CUDA %s, torch's NCCL %s"
        % (cfg["rank"], cfg["worldSize"], cfg["device"], torch.__version__, torch.version.cuda, nccl_version))
    if not torch.cuda.is_available() or torch.cuda.device_count() <= cfg["device"]:
        print("RuntimeError: no CUDA device %d in this container (torch.cuda.device_count() = %d)"
              % (cfg["device"], torch.cuda.device_count() if torch.cuda.is_available() else 0), file=sys.stderr)
        return 1
    torch.cuda.set_device(cfg["device"])
    device = "cuda:%d" % cfg["device"]
    dist.init_process_group("nccl", init_method=cfg["initMethod"], rank=cfg["rank"], world_size=cfg["worldSize"],
                            timeout=datetime.timedelta(seconds=cfg["timeoutSeconds"]))
    n = cfg["worldSize"]
    results = []
    for size in cfg["sizes"]:
        t = torch.ones(size // 4, dtype=torch.float32, device=device)
        for _ in range(cfg["warmup"]):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(cfg["iters"]):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / cfg["iters"]
        t.fill_(1.0)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        correct = float(t[0]) == n and float(t[-1]) == n
        del t
        algbw, busbw = bus_bandwidth(size, seconds, n)
        results.append({"bytes": size, "timeUs": round(seconds * 1e6, 1), "algbwGBps": round(algbw, 3),
                         "busbwGBps": round(busbw, 3), "correct": correct})
        _say("fabric: %s all-reduce: %.1f us, algbw %.2f GB/s, busbw %.2f GB/s%s"
            % (size_label(size), seconds * 1e6, algbw, busbw, "" if correct else ", WRONG SUM"))
    dist.destroy_process_group()
    _say(RESULT_TAG + json.dumps({"results": results, "torchVersion": torch.__version__,
                                 "cudaVersion": torch.version.cuda, "torchNcclVersion": nccl_version}))
    return 0


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _spawn_rank(cfg, out_log, nccl_log):
    """Fork the rank with its output in out_log and NCCL's in nccl_log; return its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        fd = os.open(out_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # Exactly the container's environment, but NCCL_IB_GID_INDEX: this host's own, read now (rank_gid).
        os.environ.pop(GID_VARIABLE, None)
        if cfg.get("gidIndex") is not None:
            os.environ[GID_VARIABLE] = str(cfg["gidIndex"])
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["NCCL_DEBUG_FILE"] = nccl_log
        os.environ["NCCL_DEBUG_SUBSYS"] = DEBUG_SUBSYS
        os.environ["PYTHONUNBUFFERED"] = "1"
        code = _rank(cfg)
    except BaseException:  # noqa: BLE001 - the child reports everything into its log
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid, out_log, deadline):
    """Wait for the rank, echoing its `fabric:` lines; (exit code or None on timeout)."""
    shown = 0
    code = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        lines = _read(out_log).splitlines()
        for line in lines[shown:]:
            if line.startswith("fabric: "):
                _say(line)
        shown = len(lines)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return code
        if time.time() >= deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            return None
        time.sleep(0.2)


def verdict_path(log_dir, rank):
    """Where a passed check keeps its verdict: an update of the rank's command prints it again (components/plan/hostCommands.ts fabricRank)."""
    return os.path.join(log_dir, "fabric-rank%d.json" % rank)


def save_verdict(path, verdict):
    """Writes the verdict (one JSON line) to path, atomically; returns the line."""
    line = json.dumps(verdict, sort_keys=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(line + "\n")
    os.replace(tmp, path)
    return line


def fabric_check(args, env=None, sysfs=GID_SYSFS):
    env = dict(os.environ if env is None else env)
    cfg, problems = resolve(args, env)
    if problems:
        _fail(["fabric check: " + p for p in problems])
    gid, gid_problem = rank_gid(cfg["host"], cfg["hcas"], cfg["address"], sysfs)
    if gid_problem:
        _fail(gid_problem)
    cfg["gidIndex"] = gid["index"] if gid else None
    if gid:
        cfg["env"].pop(GID_VARIABLE, None)
        if gid["index"] is not None:
            cfg["env"][GID_VARIABLE] = str(gid["index"])
    try:
        os.makedirs(cfg["logDir"], exist_ok=True)
    except OSError as e:
        _fail(["fabric check: cannot create the log directory %s: %s" % (cfg["logDir"], e)])
    out_log = os.path.join(cfg["logDir"], "fabric-rank%d.log" % cfg["rank"])
    nccl_log = os.path.join(cfg["logDir"], "fabric-rank%d.nccl.log" % cfg["rank"])
    verdict_file = verdict_path(cfg["logDir"], cfg["rank"])
    for path in (out_log, nccl_log, verdict_file):
        try:
            os.unlink(path)
        except OSError:
            pass
    _say("fabric: %s: all-reduce rank %d of %d via %s, GPU %d, sizes %s; transport environment: %s"
        % (cfg["host"], cfg["rank"], cfg["worldSize"], cfg["initMethod"], cfg["device"],
           ",".join(size_label(s) for s in cfg["sizes"]),
           " ".join("%s=%s" % kv for kv in sorted(cfg["env"].items())) or "(none)"))
    if gid:
        _say(gid_progress(cfg["host"], gid))
    started = time.time()
    pid = _spawn_rank(cfg, out_log, nccl_log)
    # A few seconds past torch's own timeout (init_process_group's), so its error comes first.
    code = _wait(pid, out_log, started + cfg["timeoutSeconds"] + 5)
    out_text, nccl_text = _read(out_log), _read(nccl_log)
    facts = parse_nccl_log(nccl_text + "\n" + out_text)
    for key in ("version",):
        if facts[key]:
            _say("fabric: NCCL version %s" % facts[key])
    for line in key_lines(facts):
        _say("fabric: NCCL: " + line)
    if facts["transportClasses"]:
        _say("fabric: channels: " + ", ".join("%s x%d" % kv for kv in sorted(facts["transports"].items())))
    logs = "full logs: %s:%s and %s" % (cfg["host"], out_log, nccl_log)
    result_line = next((l for l in reversed(out_text.splitlines()) if l.startswith(RESULT_TAG)), None)
    if code != 0 or result_line is None:
        _fail(failure_lines(facts, out_text, cfg, code is None) + [logs])
    measured = json.loads(result_line[len(RESULT_TAG):])
    results = measured["results"]
    problem = socket_fallback_problem(facts, cfg["hcas"], cfg["env"], cfg["host"])
    if problem:
        _fail(problem + [logs])
    wrong = [size_label(r["bytes"]) for r in results if not r["correct"]]
    if wrong:
        _fail(["%s: the all-reduce returned a wrong sum at %s: the GPUs or NCCL are broken on this host or its peer"
              % (cfg["host"], ", ".join(wrong)), logs])
    if gid and facts["gidIndexes"]:
        # NCCL's own word on the index its queue pairs used (real NCCL prints it; the test bed's stand-in does not).
        gid["ncclUsed"] = facts["gidIndexes"]
    warnings = []
    slow = bandwidth_warning(results, cfg["linkGbps"], cfg["minLinkFraction"], cfg["host"])
    if slow:
        warnings.append(slow)
        _say("fabric: WARNING " + slow)
    _say(save_verdict(verdict_file, {
        "host": cfg["host"], "rank": cfg["rank"], "worldSize": cfg["worldSize"], "device": cfg["device"],
        "transport": facts["transport"], "network": facts["network"], "transports": facts["transports"],
        "busbwGBps": {size_label(r["bytes"]): r["busbwGBps"] for r in results},
        "results": results, "linkGbps": cfg["linkGbps"], "hcas": cfg["hcas"], "gid": gid, "warnings": warnings,
        "ncclVersion": facts["version"] or measured.get("torchNcclVersion"),
        "torchVersion": measured.get("torchVersion"), "cudaVersion": measured.get("cudaVersion"),
        "ncclLines": key_lines(facts),
        "env": cfg["env"], "seconds": round(time.time() - started, 1), "log": nccl_log,
    }))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        _fail(["usage: fabric.py ['JSON ARGS']  (rank/worldSize/masterAddr/masterPort, or torchrun's environment)"])
    fabric_check(json.loads(sys.argv[1]) if len(sys.argv) == 2 else {})
