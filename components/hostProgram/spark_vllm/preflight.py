# preflight: the host's facts as JSON, and one line per problem with its fix.
import grp
import json
import os
import platform
import pwd
import shutil
import stat

from spark_vllm.common import fail, ipv4_of_gid, read_file, run, say
from spark_vllm.data import data
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


def parse_cma(text):
    """/proc/meminfo's CmaTotal and CmaFree in bytes (None where absent: a kernel without CONFIG_CMA)."""
    info = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("CmaTotal", "CmaFree") and rest.split():
            info[key] = int(rest.split()[0]) * 1024
    return {"cmaTotalBytes": info.get("CmaTotal"), "cmaFreeBytes": info.get("CmaFree")}


def kernel_facts():
    """The kernel release (uname -r) and the CMA lines: on 7.0.0-1019-nvidia, CmaFree larger than CmaTotal is the tell
    of the Kexec HandOver scratch area that breaks NCCL's memory registration (MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259)."""
    facts = {"release": platform.release()}
    facts.update(parse_cma(read_file("/proc/meminfo") or ""))
    return facts


# The driver's out-of-memory (`NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)
# returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359`, NVIDIA/open-gpu-kernel-modules#1358) and Xid lines
# (`NVRM: Xid (PCI:...): <n>, ...`) in the kernel log since boot.
KERNEL_LOG_SHOWN = 3


def parse_kernel_log(text):
    nvrm_oom, xid = [], []
    for line in text.splitlines():
        if "NVRM" not in line and "NV_ERR_NO_MEMORY" not in line:
            continue
        if "NV_ERR_NO_MEMORY" in line:
            nvrm_oom.append(line.strip())
        elif "Xid" in line:
            xid.append(line.strip())
    return {"readable": True, "nvrmNoMemory": len(nvrm_oom), "nvrmNoMemoryLines": nvrm_oom[:KERNEL_LOG_SHOWN],
            "xid": len(xid), "xidLines": xid[:KERNEL_LOG_SHOWN]}


def kernel_log_facts():
    """NVRM out-of-memory and Xid lines in the kernel log since boot, if this user may read it (journalctl -k, else
    dmesg); {"readable": False} where neither answers."""
    for argv in (["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic", "-q"], ["dmesg"]):
        code, out, _ = run(argv, timeout=20)
        if code == 0:
            return parse_kernel_log(out)
    return {"readable": False}


def host_kernel_problems(host, kernel, kernel_log, table=None):
    """Refusals and warnings from the known-bad kernel table (components/knowledge/diagnosis.ts KNOWN_BAD_KERNELS) and the
    kernel log; each line names the host, what breaks and the fix."""
    if table is None:
        table = data()["diagnosis"].get("knownBadKernels", [])
    problems, warnings = [], []
    total, free = kernel.get("cmaTotalBytes"), kernel.get("cmaFreeBytes")
    cma_tell = total is not None and free is not None and free > total
    for bad in table:
        if kernel.get("release") != bad["release"]:
            continue
        line = "%s: kernel %s: %s (%s); fix: %s" % (host, bad["release"], bad["symptom"], bad["source"], bad["fix"])
        if bad["refuse"] == "always" or cma_tell:
            if cma_tell:
                line = "%s: kernel %s with CmaFree %d kB larger than CmaTotal %d kB: %s (%s); fix: %s" % (
                    host, bad["release"], free // 1024, total // 1024, bad["symptom"], bad["source"], bad["fix"])
            problems.append(line)
        else:
            warnings.append(line + " (CmaFree is not above CmaTotal here, so it may not bite)")
    if kernel_log.get("nvrmNoMemory"):
        problems.append("%s: the GPU driver ran out of memory since boot (%d NVRM NV_ERR_NO_MEMORY lines in the kernel log, "
                        "first: %s); a GB10 in this state often wedges under the next load (NVIDIA/open-gpu-kernel-modules#1358): "
                        "reboot this host first" % (host, kernel_log["nvrmNoMemory"], kernel_log["nvrmNoMemoryLines"][0]))
    return problems, warnings


# Issue 41: model.cacheDir is mounted into every vLLM container, whose root loads code from under it: vLLM's
# torch.compile cache (VLLM_CACHE_ROOT, vllm/envs.py), Triton's compiled launchers, dlopened (TRITON_CACHE_DIR,
# triton/runtime/cache.py), Inductor's generated Python and pickled graphs (TORCHINDUCTOR_CACHE_DIR, torch/_inductor),
# and, with HF_HOME = cacheDir, the hub's files (HF_HUB_CACHE = HF_HOME/hub, huggingface_hub constants.py) and
# transformers' remote-code modules (HF_MODULES_CACHE = HF_HOME/modules, transformers utils/hub.py), imported with
# trustRemoteCode. Whoever can write there runs code as that root. So, as for logDir (components/plan/hostCommands.ts
# logDirChainCheck): every directory above cacheDir, on its literal and on its resolved path, is owned by root or the
# SSH user and writable by no one else unless sticky; cacheDir itself is owned by root or the SSH user and writable
# by no one else, sticky or not (else anyone could make a code cache there first); and every entry of the code caches
# that exist is owned by root or the SSH user, writable by no one else, and links nowhere outside its cache. A group
# write bit counts only when the group has someone else in it (Ubuntu's umask 002 for users with a private group,
# login.defs USERGROUPS_ENAB, makes 775 folders).
# Keep in step with containerEnv in components/plan/containers.ts (tests/test_cache_chain.py reads it).
COMPILE_ROOT = "spark-vllm-compile"
COMPILE_CACHES = {"spark-vllm-compile/vllm": "VLLM_CACHE_ROOT", "spark-vllm-compile/triton": "TRITON_CACHE_DIR",
                  "spark-vllm-compile/inductor": "TORCHINDUCTOR_CACHE_DIR"}
CACHE_PROBLEMS_SHOWN = 10
CACHE_WHY = "since root in the vLLM container loads code from under it (VLLM_CACHE_ROOT, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, HF_HOME)"


def group_members_of(gid):
    """The user names in group GID: its listed members and every user whose primary group it is; None if unknown."""
    try:
        names = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return None
    return names | {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid}


def user_name_of(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def cache_dir_problems(host, cache_dir, me=None, group_members=group_members_of, user_name=user_name_of):
    """One line per directory or file under or above model.cacheDir that someone other than root or the SSH user
    (ME) owns or may write, naming it, its owner and mode, and the fix; at most CACHE_PROBLEMS_SHOWN and a count."""
    me = os.getuid() if me is None else me
    my_name = user_name(me) or "uid %d" % me
    allowed = {0, me}
    allowed_names = {"root", my_name}
    prefix = "%s: spark-vllm:model.cacheDir: " % host
    problems = []
    groups = {}  # gid -> members, asked once per group (a cache made under umask 002 is group-writable throughout)

    def who(uid):
        return "uid %d (%s)" % (uid, user_name(uid) or "no user")

    def writers(st):
        """Why others may write (an entry of) this, or None: the others' bit, or a group with someone else in it."""
        if st.st_mode & stat.S_IWOTH:
            return "writable by others"
        if st.st_mode & stat.S_IWGRP:
            if st.st_gid not in groups:
                groups[st.st_gid] = group_members(st.st_gid)
            members = groups[st.st_gid]
            strangers = sorted(members - allowed_names) if members is not None else None
            if strangers is None or strangers:
                return "writable by group %d (members besides %s: %s)" % (
                    st.st_gid, " and ".join(sorted(allowed_names, key=lambda n: n != "root")), ", ".join(strangers) if strangers else "unknown")
        return None

    def owner_of(st):
        return user_name(st.st_uid) or "uid %d" % st.st_uid

    # Above cacheDir: its literal path and its resolved one, closest first.
    real = os.path.realpath(cache_dir)
    seen = set()
    for top in (real, cache_dir.rstrip("/") or "/"):
        d = os.path.dirname(top)
        while True:
            if d not in seen:
                seen.add(d)
                try:
                    st = os.stat(d)
                except OSError:
                    st = None
                if st is None:
                    pass
                elif st.st_uid not in allowed:
                    problems.append("%s (above model.cacheDir %s) is owned by %s, mode %s: only root or %s may own model.cacheDir and the "
                                    "directories above it, %s; fix: sudo chown root %s && sudo chmod go-w %s, or set "
                                    "spark-vllm:model.cacheDir to a directory of your own"
                                    % (d, top, who(st.st_uid), stat.filemode(st.st_mode), my_name, CACHE_WHY, d, d))
                elif writers(st) and not st.st_mode & stat.S_ISVTX:
                    problems.append("%s (above model.cacheDir %s) is %s (owner %s, mode %s) without the sticky bit: anyone who can "
                                    "write it could rename model.cacheDir away and put their own in its place; fix: sudo chmod go-w %s, "
                                    "or set spark-vllm:model.cacheDir to a directory of your own"
                                    % (d, top, writers(st), owner_of(st), stat.filemode(st.st_mode), d))
            if d == "/":
                break
            d = os.path.dirname(d)
        if real == cache_dir:
            break

    # cacheDir itself: no sticky exemption (a name made first there is what the attack needs).
    st = os.stat(real)
    if st.st_uid not in allowed:
        problems.append("%s is owned by %s, mode %s: only root or %s may own model.cacheDir and the directories above it, %s; "
                        "fix: sudo chown %s %s && sudo chmod go-w %s, or set spark-vllm:model.cacheDir to a directory of your own"
                        % (cache_dir, who(st.st_uid), stat.filemode(st.st_mode), my_name, CACHE_WHY, my_name, cache_dir, cache_dir))
    elif writers(st):
        problems.append("%s is %s (owner %s, mode %s): anyone could put code there for root in the vLLM container to load; fix: "
                        "sudo chmod go-w %s, or set spark-vllm:model.cacheDir to a directory of your own"
                        % (cache_dir, writers(st), owner_of(st), stat.filemode(st.st_mode), cache_dir))

    # The code caches that exist, every entry (links not followed).
    def compile_fix(rel):
        names = [name for sub, name in COMPILE_CACHES.items() if rel == sub or rel.startswith(sub + "/")]
        what = names[0] if names else ", ".join(COMPILE_CACHES.values())
        return ("root in the vLLM container loads code from this cache (%s); fix: sudo rm -rf %s (a cache: it is made again)"
                % (what, os.path.join(cache_dir, COMPILE_ROOT)))

    def modules_fix(rel):
        return ("root in the vLLM container loads code from this cache (HF_HOME modules: remote code, with trustRemoteCode); "
                "fix: sudo rm -rf %s (a cache: it is made again)" % os.path.join(cache_dir, "modules"))

    def hub_fix(rel):
        parts = rel.split("/")
        model = os.path.join(cache_dir, *parts[:2])
        return ("root in the vLLM container loads the model's files and, with trustRemoteCode, its code from the hub cache (HF_HOME); "
                "fix: sudo rm -rf %s and fetch the model again, or sudo chown -R %s %s && sudo chmod -R go-w %s if you trust what is there"
                % (model, my_name, model, model))

    for root, fix in ((COMPILE_ROOT, compile_fix), ("modules", modules_fix), ("hub", hub_fix)):
        literal = os.path.join(cache_dir, root)
        if not os.path.lexists(literal):
            continue
        base = os.path.realpath(literal)

        def check(path, rel):
            try:
                st = os.lstat(path)
            except OSError:
                return
            shown = os.path.join(cache_dir, rel)
            if st.st_uid not in allowed:
                problems.append("%s is owned by %s, mode %s: %s" % (shown, who(st.st_uid), stat.filemode(st.st_mode), fix(rel)))
            elif stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                if not (target == base or target.startswith(base.rstrip("/") + "/")):
                    problems.append("%s is a link out of %s (to %s): %s" % (shown, literal, target, fix(rel)))
            elif writers(st):
                problems.append("%s is %s (owner %s, mode %s): %s" % (shown, writers(st), owner_of(st), stat.filemode(st.st_mode), fix(rel)))

        if base != literal:
            # The cache lives elsewhere (a link to another disk): the directories above where it leads count too.
            check(literal, root)
            d = os.path.dirname(base)
            while d not in seen:
                seen.add(d)
                st = os.stat(d)
                if st.st_uid not in allowed or (writers(st) and not st.st_mode & stat.S_ISVTX):
                    problems.append("%s (above %s, where %s leads) is owned by %s, mode %s: %s"
                                    % (d, base, literal, owner_of(st), stat.filemode(st.st_mode), fix(root)))
                if d == "/":
                    break
                d = os.path.dirname(d)
        if not os.path.isdir(base):
            continue
        check(base, root)
        for parent, dirs, names in os.walk(base):
            for name in sorted(dirs) + sorted(names):
                path = os.path.join(parent, name)
                check(path, os.path.join(root, os.path.relpath(path, base)))
            dirs.sort()
    shown = [prefix + p for p in problems[:CACHE_PROBLEMS_SHOWN]]
    if len(problems) > CACHE_PROBLEMS_SHOWN:
        shown.append(prefix + "and %d more like these" % (len(problems) - CACHE_PROBLEMS_SHOWN))
    return shown


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
    kernel, kernel_log = kernel_facts(), kernel_log_facts()
    kernel_errors, kernel_warnings = host_kernel_problems(host, kernel, kernel_log)
    problems += kernel_errors
    warnings += kernel_warnings
    for w in warnings:
        say("warning: " + w)
    disk = None
    if os.path.isdir(args["cacheDir"]):
        usage = shutil.disk_usage(args["cacheDir"])
        disk = {"path": args["cacheDir"], "freeBytes": usage.free, "totalBytes": usage.total}
        # Before any image is pulled or container made (every preflight gates them, components/plan/resources.ts).
        problems += cache_dir_problems(host, args["cacheDir"])
    else:
        problems.append("%s: model cache directory %s does not exist: create it (mkdir -p) or fix spark-vllm:model.cacheDir"
                        % (host, args["cacheDir"]))
    facts = {"host": host, "arch": machine, "platform": arch, "gpus": gpus, "docker": docker_version,
             "nvidiaRuntime": nvidia_runtime, "fabric": iface, "hcas": hcas, "warnings": warnings, "disk": disk,
             "memory": memory_facts(), "kernel": kernel, "kernelLog": kernel_log}
    say(json.dumps(facts, sort_keys=True))
    if problems:
        fail(problems)
