# preflight: the host's facts as JSON, and one line per problem with its fix.
import json
import os
import platform
import shutil

from spark_vllm.common import fail, read_file, run, say

PLATFORMS = {"aarch64": "linux/arm64", "arm64": "linux/arm64", "x86_64": "linux/amd64"}


def parse_gpus(csv):
    """Rows of `nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader,nounits`."""
    gpus = []
    for row in csv.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) >= 3:
            gpus.append({"name": cells[0], "memoryMiB": cells[1], "driver": cells[2],
                         "computeCap": cells[3] if len(cells) > 3 else None})
    return gpus


def gpu_facts():
    code, out, err = run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap",
                          "--format=csv,noheader,nounits"])
    if code != 0:
        return None, (err or out).strip() or "nvidia-smi not found"
    return parse_gpus(out), None


def docker_facts():
    code, version, err = run(["docker", "version", "--format", "{{.Server.Version}}"])
    if code != 0:
        return None, None, (err or version).strip()
    _, runtimes, _ = run(["docker", "info", "--format", "{{json .Runtimes}}"])
    nvidia = "nvidia" in runtimes or any(shutil.which(b) for b in
                                         ("nvidia-container-runtime-hook", "nvidia-container-toolkit", "nvidia-ctk"))
    return version.strip(), nvidia, None


def parse_iface(name, address, ip_json):
    """Facts of one interface from `ip -j addr show dev NAME` output (None: the command failed)."""
    try:
        link = json.loads(ip_json)[0] if ip_json is not None else None
    except (ValueError, IndexError):
        link = None
    if not link:
        return {"name": name, "exists": False}
    state = (link.get("operstate") or "").lower()
    flags = link.get("flags") or []
    up = state == "up" or (state == "unknown" and "UP" in flags and "LOWER_UP" in flags)
    addrs = [a.get("local") for a in link.get("addr_info") or [] if a.get("family") == "inet"]
    return {"name": name, "exists": True, "up": up, "state": state, "addresses": addrs, "hasAddress": address in addrs}


def iface_facts(name, address):
    # Ask netlink (ip), not /sys/class/net: sysfs may show another network namespace's view.
    code, out, _ = run(["ip", "-j", "addr", "show", "dev", name])
    return parse_iface(name, address, out if code == 0 else None)


def hca_facts(hcas, root="/sys/class/infiniband"):
    facts = []
    for hca in hcas:
        ports = "%s/%s/ports" % (root, hca)
        states = []
        if os.path.isdir(ports):
            for port in sorted(os.listdir(ports)):
                states.append(read_file("%s/%s/state" % (ports, port)) or "")
        facts.append({"name": hca, "exists": os.path.isdir(ports),
                      "active": any("ACTIVE" in s for s in states)})
    return facts


def parse_meminfo(text):
    info = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024 if rest.split() else 0
    return {"totalBytes": info.get("MemTotal"), "availableBytes": info.get("MemAvailable")}


def memory_facts():
    return parse_meminfo(read_file("/proc/meminfo") or "")


def preflight(args):
    host = args["host"]
    fabric = args["fabric"]
    problems = []
    machine = platform.machine()
    arch = PLATFORMS.get(machine, machine)
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
