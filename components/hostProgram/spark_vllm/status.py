# host-status: what runs on one host right now, for `spark-vllm status` (bin/status-command.ts). Read-only:
# it starts, stops and writes nothing, and needs no secret (so /v1/models, which wants the API key, is not asked;
# the served model comes from the running vLLM's own command line).
import json
import os
import re
import sys
import tarfile
import time

from spark_vllm.common import read_file, run, say
from spark_vllm.diagnosis import diagnose
from spark_vllm.memory import free_now, low_memory_warning
from spark_vllm.preflight import gpu_facts, hca_facts, hca_problems, host_kernel_problems, kernel_facts, kernel_log_facts
from spark_vllm.probes import http, process_state, stat_start_time
from spark_vllm.supervise import marker_matches, parse_launch_record


def uptime_seconds(pid, proc="/proc"):
    """Seconds since PID started: /proc/uptime minus its start time in clock ticks (proc(5) starttime)."""
    stat = read_file("%s/%d/stat" % (proc, pid))
    up = read_file("%s/uptime" % proc)
    if stat is None or up is None:
        return None
    return max(0, round(float(up.split()[0]) - int(stat_start_time(stat)) / os.sysconf("SC_CLK_TCK")))


def served_model(pid, proc="/proc"):
    """`--served-model-name` (else the model) from the vLLM process's argv."""
    try:
        with open("%s/%d/cmdline" % (proc, pid), "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    for flag in ("--served-model-name", "--model"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            return argv[argv.index(flag) + 1]
    serve = [i for i, a in enumerate(argv) if a == "serve"]
    return argv[serve[0] + 1] if serve and serve[0] + 1 < len(argv) else None


def memory_gib(proc="/proc"):
    """MemAvailable and MemTotal in GiB (on a Spark the GPU shares this memory)."""
    fields = {}
    for line in (read_file("%s/meminfo" % proc) or "").splitlines():
        m = re.match(r"^(MemTotal|MemAvailable):\s+([0-9]+) kB", line)
        if m:
            fields[m.group(1)] = round(int(m.group(2)) / 1048576, 1)
    return {"availableGiB": fields.get("MemAvailable"), "totalGiB": fields.get("MemTotal")}


# Asked of the cluster (the head's GCS), not of process names: the container's environment carries RAY_AUTH_MODE and
# the token file's path (components/plan/rayAuth.ts), so this client authenticates as the launches do.
RAY_NODES = ("import json, ray; ray.init(address=%r, logging_level='ERROR'); "
             "print(json.dumps([n.get('NodeManagerAddress') for n in ray.nodes() if n.get('Alive')]))")


def ray_node_joined(address, node_address, timeout=30):
    """Whether the Ray cluster at ADDRESS has a live node on NODE_ADDRESS; (None, why) when it cannot be asked."""
    code, out, err = run([sys.executable, "-c", RAY_NODES % address], timeout=timeout)
    lines = out.strip().splitlines()
    if code != 0 or not lines:
        return None, (err.strip().splitlines() or ["exit %d" % code])[-1][:300]
    return node_address in json.loads(lines[-1]), None


def host_status(args, proc="/proc"):
    pid, state = process_state(args["pidFile"], proc)
    vllm = {"state": state, "pid": pid}
    if state == "running":
        vllm["uptimeSeconds"] = uptime_seconds(pid, proc)
        vllm["servedModel"] = served_model(pid, proc)
    elif state == "exited":
        found = diagnose(read_file(args["log"]) or "")
        if found:
            vllm["diagnosis"] = found
    out = {"host": args["host"], "vllm": vllm, "memory": memory_gib(proc)}
    if state == "running" and proc == "/proc":
        # With vLLM loaded, the figure the memory gate reads and the warning below LOW_AFTER_LOAD_GIB (memory.py).
        try:
            facts = free_now(args["host"])
            out["memory"].update({k: facts[k] for k in ("cudaFreeGiB", "freeGiB", "freeSource")})
            warning = low_memory_warning(facts, when="with vLLM running")
            if warning:
                out["memory"]["warning"] = warning
        except Exception as e:  # no torch or no GPU in the container: MemAvailable alone
            out["memory"]["gpuError"] = "%s: %s" % (type(e).__name__, e)
    if args.get("healthUrl"):
        code, _ = http("GET", args["healthUrl"], timeout=5)
        out["health"] = code
    if args.get("ray"):
        joined, why = ray_node_joined(args["ray"]["address"], args["ray"]["node"])
        out["raylet"] = joined
        if why:
            out["rayError"] = why
    return out


def host_status_command(args):
    say(json.dumps(host_status(args)))


# ---------------------------------------------------------------------------------------------------- host-facts
# Issue 47: the facts the preflight gates on, read on the host (as the SSH user, whether or not the container runs) by
# the preflight's own readers, and what the preflight would refuse or warn about in them, in its own words
# (host_kernel_problems, hca_problems). Read-only, like the rest of status.

# The loaded driver's version, read without touching the GPU: the kernel shows a module's MODULE_VERSION as
# /sys/module/<name>/version (kernel/module/main.c, MODINFO_ATTR(version)) and NVIDIA's module declares the driver's
# (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv.c, MODULE_VERSION(NV_VERSION_STRING)). Else nvidia-smi, asked as
# the preflight asks it (gpu_facts).
NVIDIA_MODULE_VERSION = "/module/nvidia/version"
# A kernel log line as status shows it, at most (an NVRM out-of-memory line is about 190 characters).
KERNEL_LOG_LINE_CHARS = 400


def driver_facts(sys_root="/sys"):
    """{"version", "source"}, or {"version": None, "why"} when neither the module nor nvidia-smi tells it."""
    path = sys_root + NVIDIA_MODULE_VERSION
    version = read_file(path)
    if version:
        return {"version": version, "source": path}
    gpus, err = gpu_facts()
    versions = sorted({g["driver"] for g in gpus or [] if g.get("driver")})
    if versions:
        return {"version": ", ".join(versions), "source": "nvidia-smi"}
    return {"version": None, "why": (err or "nvidia-smi lists no GPU")[:300]}


def kernel_log_summary(log):
    """Per kind (NVRM out-of-memory, Xid): the count since boot and one line. The preflight's reader keeps the first
    KERNEL_LOG_SHOWN lines of each kind, so the last line since boot is known only up to that many; past it the first is
    given, and `which` says so."""
    if not log.get("readable"):
        return {"readable": False}
    out = {"readable": True}
    for kind in ("nvrmNoMemory", "xid"):
        count, lines = log.get(kind) or 0, log.get(kind + "Lines") or []
        out[kind] = {"count": count}
        if lines:
            last = count <= len(lines)  # every line was kept: the last kept is the last since boot
            out[kind].update({"line": (lines[-1] if last else lines[0])[:KERNEL_LOG_LINE_CHARS], "which": "last" if last else "first"})
    return out


def fabric_gids(hcas, address):
    """Per configured HCA: whether it is there and ACTIVE, the index of its RoCE v2 GID that carries ADDRESS (the
    host's fabric address: NCCL_IB_GID_INDEX for this host, docs/troubleshooting.md roce-gid-index) or None, and every
    RoCE v2 IPv4 GID it has (a twin on its own subnet carries another address)."""
    return [{"name": h["name"], "exists": h["exists"], "active": h["active"],
             "fabricGidIndex": next((g["index"] for g in h["roceV2Ipv4"] if g["address"] == address), None),
             "roceV2Ipv4": [{"index": g["index"], "address": g["address"]} for g in h["roceV2Ipv4"]]} for h in hcas]


def host_facts(args, sys_root="/sys"):
    host, fabric = args["host"], args["fabric"]
    kernel, kernel_log = kernel_facts(), kernel_log_facts()
    problems, warnings = host_kernel_problems(host, kernel, kernel_log)
    hcas = hca_facts(fabric["hcas"], root=sys_root + "/class/infiniband")
    hca_errors, hca_warnings = hca_problems(host, hcas)
    return {"kernel": kernel, "driver": driver_facts(sys_root), "kernelLog": kernel_log_summary(kernel_log),
            "fabricAddress": fabric["address"], "hcas": fabric_gids(hcas, fabric["address"]),
            "problems": problems + hca_errors, "warnings": warnings + hca_warnings}


def host_facts_command(args):
    say(json.dumps(host_facts(args)))


# ---------------------------------------------------------------------------------------------------- given-up
# The launches the container's supervisor stopped relaunching (supervise.py give_up writes `<name>.failed` beside the
# record). The records live in the container's own file system (components/plan/launches.ts RECORDS_DIR), not under
# logDir, so the host script streams them with `docker cp CONTAINER:DIR -`: a tar archive on stdout, for a running or a
# stopped container alike (https://docs.docker.com/reference/cli/docker/container/cp/), its entries named under the
# directory's base name, `launches/<file>` (moby daemon/archive_unix.go, docker-v29.6.1:
# `archive.TarResourceRebaseOpts(sourceBase, filepath.Base(absPath))`). Read-only: nothing is extracted.
MAX_RECORD_BYTES = 1 << 20


def records_from_tar(stream):
    """{file name: (text as read_file gives it, mtime)} of the files directly in the archived directory; {} when the
    stream is empty or not a tar archive (no records directory yet: nothing was launched)."""
    files = {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                parts = member.name.strip("/").split("/")
                if member.isfile() and len(parts) == 2 and member.size <= MAX_RECORD_BYTES:
                    text = tar.extractfile(member).read().decode("utf-8", errors="replace").strip()
                    files[parts[1]] = (text, member.mtime)
    except (tarfile.TarError, OSError, EOFError):
        return files
    return files


def given_up(files):
    """Each launch the supervisor gave up on: a `.failed` marker that names the digest of the record in place now, the
    supervisor's own rule (supervise.py Supervisor.marked); a marker from an older launch is ignored, as it ignores it."""
    out = []
    for file in sorted(files):
        if not file.endswith(".json") or file.startswith("."):  # supervise.py record_names
            continue
        name = file[:-len(".json")]
        rec, digest = parse_launch_record(files[file][0])
        marker = files.get(name + ".failed")
        if rec is None or marker is None or not marker_matches(marker[0], digest):
            continue
        lines = marker[0].split("\n")
        try:
            detail = json.loads(lines[1]) if len(lines) > 1 else {}
        except ValueError:
            detail = {}
        entry = {"name": name, "failures": detail.get("failures"), "diagnosis": detail.get("diagnosis"),
                 "log": detail.get("log", rec.get("log")),
                 "markedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(marker[1]))}
        if isinstance(detail.get("guard"), dict):  # the memory guard stopped it (supervise.py Supervisor.guard)
            entry["guard"] = detail["guard"]
        out.append(entry)
    return out


def given_up_command(args):
    say(json.dumps(given_up(records_from_tar(sys.stdin.buffer))))
