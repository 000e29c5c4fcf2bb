# preflight: the host's facts as JSON, and one line per problem with its fix.
import json
import os
import platform
import shutil

from spark_vllm.common import fail, read_file, run, say
from spark_vllm.ownership import ownership_problems

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


def ipv4_of_gid(gid):
    """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d, as RoCE v2 GIDs of IPv4 addresses are), else None."""
    parts = gid.strip().lower().split(":")
    if len(parts) != 8 or parts[:5] != ["0000"] * 5 or parts[5] != "ffff":
        return None
    word = int(parts[6], 16) << 16 | int(parts[7], 16)
    return ".".join(str(word >> s & 255) for s in (24, 16, 8, 0))


def hca_facts(hcas, root="/sys/class/infiniband"):
    """Per HCA and port: state, link layer, RoCE v2 GIDs with an IPv4 address and their netdev. sysfs layout of the
    kernel's IB core (Documentation/ABI/testing/sysfs-class-infiniband: ports/N/{state,link_layer,gids/M},
    ports/N/gid_attrs/{types,ndevs}/M)."""
    facts = []
    for hca in hcas:
        ports = "%s/%s/ports" % (root, hca)
        states, links, roce = [], [], []
        if os.path.isdir(ports):
            for port in sorted(os.listdir(ports)):
                base = "%s/%s" % (ports, port)
                states.append(read_file(base + "/state") or "")
                links.append(read_file(base + "/link_layer") or "")
                gids = base + "/gids"
                for index in sorted(os.listdir(gids), key=lambda x: int(x) if x.isdigit() else 0) if os.path.isdir(gids) else []:
                    kind = read_file("%s/gid_attrs/types/%s" % (base, index)) or ""
                    ip = ipv4_of_gid(read_file("%s/%s" % (gids, index)) or "")
                    if ip and kind.lower() == "roce v2":
                        roce.append({"port": int(port), "index": int(index), "address": ip,
                                     "netdev": read_file("%s/gid_attrs/ndevs/%s" % (base, index))})
        facts.append({"name": hca, "exists": os.path.isdir(ports), "active": any("ACTIVE" in s for s in states),
                      "linkLayer": links[0] if links else None, "roceV2Ipv4": roce,
                      "netdev": roce[0]["netdev"] if roce else None})
    return facts


def link_mtu(netdev):
    code, out, _ = run(["ip", "-j", "link", "show", "dev", netdev])
    try:
        return json.loads(out)[0].get("mtu") if code == 0 else None
    except (ValueError, IndexError):
        return None


def hca_problems(host, hcas, mtu=link_mtu):
    """One line per problem (naming host, HCA and fix), and warnings. ConnectX-7 twins of one port (rocep1s0f1 /
    roceP2p1s0f1) must sit on different subnets, NVIDIA's multi-Spark guide; it recommends MTU 9000."""
    problems, warnings = [], []
    subnets = {}
    for hca in hcas:
        name = hca["name"]
        if not hca["exists"]:
            problems.append("%s: HCA %s not found: check spark-vllm:hosts[].fabric.hcas (ibdev2netdev)" % (host, name))
            continue
        if not hca["active"]:
            problems.append("%s: HCA %s is not ACTIVE: check the fabric link" % (host, name))
        if hca.get("linkLayer") and hca["linkLayer"] != "Ethernet":
            problems.append("%s: HCA %s has link layer %s, not Ethernet (RoCE): check spark-vllm:hosts[].fabric.hcas"
                            % (host, name, hca["linkLayer"]))
        if not hca.get("roceV2Ipv4"):
            problems.append("%s: HCA %s has no RoCE v2 GID with an IPv4 address, so NCCL cannot use it: give its netdev an "
                            "IPv4 address (ibdev2netdev shows which netdev)" % (host, name))
            continue
        hca["mtu"] = mtu(hca["netdev"]) if hca.get("netdev") else None
        if hca["mtu"] is not None and hca["mtu"] < 9000:
            warnings.append("%s: %s (%s) has MTU %d; NVIDIA recommends 9000 for the Spark fabric" % (host, hca["netdev"], name, hca["mtu"]))
        subnet = ".".join(hca["roceV2Ipv4"][0]["address"].split(".")[:3])
        if subnet in subnets:
            problems.append("%s: HCAs %s and %s both sit on %s.0/24: put each ConnectX-7 twin on its own subnet "
                            "(NVIDIA's multi-Spark guide)" % (host, subnets[subnet], name, subnet))
        subnets.setdefault(subnet, name)
    return problems, warnings


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
    if docker_version is not None and args.get("owner"):
        # Another stack's containers here: refused before anything of ours is pulled or created (ownership.py).
        problems += ownership_problems(host, args["owner"])
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
    hca_errors, warnings = hca_problems(host, hcas)
    problems += hca_errors
    for w in warnings:
        say("warning: " + w)
    disk = None
    if os.path.isdir(args["cacheDir"]):
        usage = shutil.disk_usage(args["cacheDir"])
        disk = {"path": args["cacheDir"], "freeBytes": usage.free, "totalBytes": usage.total}
    else:
        problems.append("%s: model cache directory %s does not exist: create it (mkdir -p) or fix spark-vllm:model.cacheDir"
                        % (host, args["cacheDir"]))
    facts = {"host": host, "arch": machine, "platform": arch, "gpus": gpus, "docker": docker_version,
             "nvidiaRuntime": nvidia_runtime, "fabric": iface, "hcas": hcas, "warnings": warnings, "disk": disk,
             "memory": memory_facts()}
    say(json.dumps(facts, sort_keys=True))
    if problems:
        fail(problems)
