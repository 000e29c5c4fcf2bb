// `spark-vllm init`, part one: the read-only script that gathers one host's facts over SSH, and the pure parser that
// turns its output into typed facts. The choices are in components/init/initChoose.ts; the SSH calls in bin/init-command.ts.
//
// Sources, by the short names used below:
//   [ibdev2netdev] Mellanox/mlnx-tools ofed_scripts/ibdev2netdev: a ConnectX netdev is one whose
//                  /sys/class/net/X/device/vendor is 0x15b3; a RoCE port's netdev is the kernel's
//                  /sys/class/infiniband/HCA/ports/N/gid_attrs/ndevs/0 ("Honor ndev given by the kernel in the gid table
//                  for RoCE"); its "(Up)/(Down)" is /sys/class/net/X/carrier. We also read /sys/class/infiniband/HCA/device/net/*
//                  (the netdevs of the HCA's PCI function) for an HCA whose GID table names no netdev.
//   [ib-sysfs]     Linux Documentation/ABI/testing/sysfs-class-infiniband: ports/N/{state,link_layer,gids/M,
//                  gid_attrs/types/M,gid_attrs/ndevs/M} (types: "IB/RoCE v1" or "RoCE v2").
//   [net-sysfs]    Linux Documentation/ABI/testing/sysfs-class-net: carrier (reading it on a down interface fails with
//                  EINVAL), speed (Mbit/s), mtu, operstate.
//   [preflight]    components/hostProgram/spark_vllm/preflight.py: the same nvidia-smi query, `docker version`/`docker info`
//                  runtimes and hook binaries, `ip -j addr` (netlink: the host's own network namespace, where sysfs may show
//                  another's, as on the simulated hosts, tests/sim/README.md), and the RoCE v2 IPv4 GID rule.
//   [sshkey]       openssh-portable sshkey.c sshkey_fingerprint_raw/fingerprint_b64: `ssh-keygen -l` prints
//                  "SHA256:" + base64(sha256(key blob)) with the trailing "=" removed.
//   [hf-cache]     huggingface_hub "Understand caching": <cache>/hub/models--<org>--<name>/{blobs,refs,snapshots}
//                  (as components/hostProgram/spark_vllm/weights.py reads it).
import { createHash } from "crypto";
import { script, shq } from "../plan/scripts";

/** The line that opens each section of the script's output. */
export const SECTION = "@@spark-vllm-init ";

/** The nvidia-smi query the preflight makes [preflight]. */
export const NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap", "--format=csv,noheader,nounits"];

/** Mellanox's PCI vendor id, how ibdev2netdev tells a ConnectX netdev [ibdev2netdev]. */
export const MELLANOX_VENDOR = "0x15b3";

/** One section: its name, then the command's output (stderr too), then `<name>.rc` with the exit status. */
function section(name: string, command: string): string[] {
    return [`echo ${shq(SECTION + name)}`, `( ${command} ) 2>&1`, `echo "${SECTION}${name}.rc $?"`];
}

/**
 * The read-only script run by `sh -s` on every host: nothing is written, started or changed. Each fact is one section
 * of plain command output, parsed by parseHostFacts; sysfs files are printed `path:value` by one `grep -H` each, so a
 * file that cannot be read (carrier of a down link, an empty GID slot) is simply absent.
 */
export function initHostScript(): string {
    const hfHome = '"${HF_HOME:-$HOME/.cache/huggingface}"';
    const zeroGid = "0000:0000:0000:0000:0000:0000:0000:0000";
    return script([
        "export LC_ALL=C",
        ...section("hostname", "hostname"),
        ...section("arch", "uname -m"),
        ...section("gpus", NVIDIA_SMI_QUERY.join(" ")),
        ...section("docker", "docker version --format '{{.Server.Version}}'"),
        ...section("docker-runtimes", "docker info --format '{{json .Runtimes}}'"),
        ...section("nvidia-hooks", "command -v nvidia-container-runtime-hook nvidia-container-toolkit nvidia-ctk"),
        ...section("meminfo", "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo"),
        ...section("ip-addr", "ip -j addr show"),
        ...section("net-sysfs", "grep -H . /sys/class/net/*/carrier /sys/class/net/*/speed /sys/class/net/*/mtu /sys/class/net/*/operstate /sys/class/net/*/device/vendor /sys/class/net/*/device/device 2>/dev/null"),
        ...section("ib-ports", `for p in /sys/class/infiniband/*/ports/*; do [ -d "$p" ] && grep -H . "$p"/state "$p"/link_layer "$p"/gids/* "$p"/gid_attrs/types/* "$p"/gid_attrs/ndevs/* 2>/dev/null | grep -v ':${zeroGid}$'; done; true`),
        ...section("ib-netdevs", "for n in /sys/class/infiniband/*/device/net/*; do [ -e \"$n\" ] && echo \"$n\"; done; true"),
        ...section("host-key", "cat /etc/ssh/ssh_host_ed25519_key.pub"),
        ...section("hf-home", `echo ${hfHome}`),
        ...section("hf-models", `for d in ${hfHome}/hub/models--*; do [ -d "$d/snapshots" ] && echo "$(du -sb "$d" | cut -f1) \${d##*/}"; done; true`),
        ...section("disk", `df -Pk ${hfHome} 2>/dev/null || df -Pk "$HOME"`),
        ...section("images", "docker images --digests --format '{{json .}}'"),
    ]) + "\n";
}

/** One IPv4 address on a netdev, with its prefix length. */
export interface Ipv4 {
    address: string;
    prefix: number;
}

/** A network interface as the host reports it (netlink first, sysfs where readable). */
export interface Netdev {
    name: string;
    /** Administratively up (the UP flag). */
    up: boolean;
    /** Link detected: sysfs carrier 1, or netlink's LOWER_UP flag where sysfs cannot be read [net-sysfs]. */
    carrier: boolean;
    operstate: string;
    mtu: number | null;
    /** Mbit/s from sysfs; null when unknown (link down, or not readable in this namespace). */
    speedMbps: number | null;
    ipv4: Ipv4[];
    /** PCI vendor id from sysfs (0x15b3: Mellanox/NVIDIA ConnectX), null when not readable. */
    vendor: string | null;
    device: string | null;
}

/** One RoCE v2 GID holding an IPv4 address. */
export interface RoceGid {
    index: number;
    address: string;
    netdev: string | null;
}

/** One RDMA device (HCA) port. */
export interface Hca {
    name: string;
    port: number;
    /** e.g. "4: ACTIVE" [ib-sysfs]. */
    state: string;
    active: boolean;
    linkLayer: string;
    /** The netdev behind it, as ibdev2netdev maps it [ibdev2netdev]. */
    netdev: string | null;
    roceV2Ipv4: RoceGid[];
}

export interface CachedModel {
    /** Hugging Face id, from the `models--org--name` directory. */
    id: string;
    bytes: number;
}

export interface PulledImage {
    repository: string;
    tag: string;
    /** sha256:… (the RepoDigest), or null for a locally built image. */
    digest: string | null;
}

export interface Gpu {
    name: string;
    /** MiB, or null where nvidia-smi says [N/A] (a GB10 does: its memory is unified, unslothai/unsloth#10703). */
    memoryMiB: number | null;
    driver: string;
    computeCap: string | null;
}

/** Everything init reads from one host. */
export interface HostFacts {
    hostname: string | null;
    arch: string | null;
    gpus: Gpu[];
    /** Why nvidia-smi gave no GPUs. */
    gpuError?: string;
    docker: string | null;
    dockerError?: string;
    nvidiaRuntime: boolean;
    memTotalBytes: number | null;
    memAvailableBytes: number | null;
    netdevs: Netdev[];
    hcas: Hca[];
    /** `ssh-ed25519 <base64>` from /etc/ssh/ssh_host_ed25519_key.pub, comment dropped; null when unreadable. */
    hostKey: string | null;
    /** What `ssh-keygen -lf` prints for it [sshkey]. */
    hostKeyFingerprint: string | null;
    hfHome: string | null;
    models: CachedModel[];
    /** Free bytes on the HF cache's file system. */
    diskFreeBytes: number | null;
    images: PulledImage[];
}

/** The script's output, by section: text and exit status. */
export function splitSections(stdout: string): Map<string, { text: string; rc: number | null }> {
    const out = new Map<string, { text: string; rc: number | null }>();
    let current: string | undefined;
    let lines: string[] = [];
    const close = () => {
        if (current !== undefined) out.set(current, { text: lines.join("\n"), rc: null });
    };
    for (const line of stdout.split("\n")) {
        if (!line.startsWith(SECTION)) {
            lines.push(line);
            continue;
        }
        const rest = line.slice(SECTION.length).trim();
        const rc = /^(\S+)\.rc (\d+)$/.exec(rest);
        if (rc && rc[1] === current) {
            out.set(current, { text: lines.join("\n").replace(/\n$/, ""), rc: Number(rc[2]) });
            current = undefined;
            lines = [];
            continue;
        }
        close();
        current = rest;
        lines = [];
    }
    close();
    return out;
}

/** "SHA256:…" as `ssh-keygen -l` prints it for an OpenSSH public key line `<type> <base64> [comment]` [sshkey]. */
export function sshFingerprint(keyLine: string): string | null {
    const data = keyLine.trim().split(/\s+/)[1];
    if (!data || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) return null;
    return "SHA256:" + createHash("sha256").update(Buffer.from(data, "base64")).digest("base64").replace(/=+$/, "");
}

/** The IPv4 address in an IPv4-mapped GID (::ffff:a.b.c.d, as RoCE v2 GIDs of IPv4 addresses are) [preflight]. */
export function ipv4OfGid(gid: string): string | null {
    const parts = gid.trim().toLowerCase().split(":");
    if (parts.length !== 8 || parts.slice(0, 5).some(p => p !== "0000") || parts[5] !== "ffff") return null;
    const word = (parseInt(parts[6], 16) << 16 >>> 0) + parseInt(parts[7], 16);
    return [24, 16, 8, 0].map(s => (word >>> s) & 255).join(".");
}

/** `path:value` lines of `grep -H .` as a map. */
function sysfsLines(text: string): Map<string, string> {
    const m = new Map<string, string>();
    for (const line of text.split("\n")) {
        const i = line.indexOf(":");
        if (i > 0 && line.startsWith("/sys/")) m.set(line.slice(0, i), line.slice(i + 1).trim());
    }
    return m;
}

interface IpLink {
    ifname?: string;
    flags?: string[];
    mtu?: number;
    operstate?: string;
    addr_info?: Array<{ family?: string; local?: string; prefixlen?: number }>;
}

function parseIpAddr(text: string | undefined): IpLink[] {
    if (!text) return [];
    try {
        const v = JSON.parse(text);
        return Array.isArray(v) ? v : [];
    } catch {
        return [];
    }
}

/** Netdevs: netlink (`ip -j addr`, the host's own namespace) joined with what sysfs adds (carrier, speed, vendor). */
export function parseNetdevs(ipJson: string | undefined, sysfs: string): Netdev[] {
    const sys = sysfsLines(sysfs);
    const at = (name: string, file: string) => sys.get(`/sys/class/net/${name}/${file}`);
    return parseIpAddr(ipJson).filter(l => l.ifname).map(l => {
        const name = l.ifname!;
        const flags = l.flags ?? [];
        const carrierFile = at(name, "carrier");
        const speed = Number(at(name, "speed"));
        return {
            name,
            up: flags.includes("UP"),
            carrier: carrierFile !== undefined ? carrierFile === "1" : flags.includes("LOWER_UP"),
            operstate: (l.operstate ?? at(name, "operstate") ?? "unknown").toLowerCase(),
            mtu: l.mtu ?? (Number(at(name, "mtu")) || null),
            // sysfs speed is -1 (or unreadable) without a link [net-sysfs].
            speedMbps: Number.isFinite(speed) && speed > 0 ? speed : null,
            ipv4: (l.addr_info ?? []).filter(a => a.family === "inet" && a.local).map(a => ({ address: a.local!, prefix: a.prefixlen ?? 32 })),
            vendor: at(name, "device/vendor") ?? null,
            device: at(name, "device/device") ?? null,
        };
    });
}

/** HCA ports from `grep -H .` over /sys/class/infiniband/*\/ports/*, and the HCAs' PCI netdevs (device/net/*). */
export function parseHcas(ports: string, pciNetdevs: string): Hca[] {
    const sys = sysfsLines(ports);
    const byPort = new Map<string, { hca: string; port: number; files: Map<string, string> }>();
    for (const [p, value] of sys) {
        const m = /^\/sys\/class\/infiniband\/([^/]+)\/ports\/(\d+)\/(.+)$/.exec(p);
        if (!m) continue;
        const key = `${m[1]}/${m[2]}`;
        if (!byPort.has(key)) byPort.set(key, { hca: m[1], port: Number(m[2]), files: new Map() });
        byPort.get(key)!.files.set(m[3], value);
    }
    const pciNet = new Map<string, string[]>();
    for (const line of pciNetdevs.split("\n")) {
        const m = /^\/sys\/class\/infiniband\/([^/]+)\/device\/net\/([^/\s]+)$/.exec(line.trim());
        if (m) pciNet.set(m[1], [...(pciNet.get(m[1]) ?? []), m[2]]);
    }
    return [...byPort.values()].sort((a, b) => a.hca.localeCompare(b.hca) || a.port - b.port).map(({ hca, port, files }) => {
        const roceV2Ipv4: RoceGid[] = [];
        for (const [file, gid] of files) {
            const g = /^gids\/(\d+)$/.exec(file);
            if (!g) continue;
            const address = ipv4OfGid(gid);
            if (address && (files.get(`gid_attrs/types/${g[1]}`) ?? "").toLowerCase() === "roce v2")
                roceV2Ipv4.push({ index: Number(g[1]), address, netdev: files.get(`gid_attrs/ndevs/${g[1]}`) ?? null });
        }
        roceV2Ipv4.sort((a, b) => a.index - b.index);
        const state = files.get("state") ?? "";
        // [ibdev2netdev]: the GID table's netdev (entry 0) first; else the PCI function's one netdev.
        const netdev = files.get("gid_attrs/ndevs/0") ?? roceV2Ipv4.find(g => g.netdev)?.netdev ?? (pciNet.get(hca)?.length === 1 ? pciNet.get(hca)![0] : null);
        return { name: hca, port, state, active: /ACTIVE/.test(state), linkLayer: files.get("link_layer") ?? "", netdev, roceV2Ipv4 };
    });
}

/** Rows of the preflight's nvidia-smi query; `[N/A]` memory becomes null [preflight]. */
export function parseGpus(csv: string): Gpu[] {
    return csv.split("\n").map(r => r.split(",").map(c => c.trim())).filter(c => c.length >= 3 && c[0]).map(c => ({
        name: c[0], memoryMiB: /^\d+(\.\d+)?$/.test(c[1]) ? Number(c[1]) : null, driver: c[2], computeCap: c[3] || null,
    }));
}

/** `docker images --digests --format '{{json .}}'` lines; `<none>` becomes null. */
export function parseImages(text: string): PulledImage[] {
    const out: PulledImage[] = [];
    for (const line of text.split("\n")) {
        if (!line.startsWith("{")) continue;
        try {
            const j = JSON.parse(line) as { Repository?: string; Tag?: string; Digest?: string };
            if (!j.Repository || j.Repository === "<none>") continue;
            out.push({ repository: j.Repository, tag: j.Tag && j.Tag !== "<none>" ? j.Tag : "", digest: j.Digest && /^sha256:[0-9a-f]{64}$/.test(j.Digest) ? j.Digest : null });
        } catch {
            // a line that is not JSON: skip it
        }
    }
    return out;
}

/** `<bytes> models--org--name` lines [hf-cache]. */
export function parseModels(text: string): CachedModel[] {
    return text.split("\n").flatMap(line => {
        const m = /^(\d+)\s+models--([^/\s]+?)--(\S+)$/.exec(line.trim());
        return m ? [{ id: `${m[2]}/${m[3].replace(/--/g, "/")}`, bytes: Number(m[1]) }] : [];
    });
}

const kib = (line: string | undefined) => {
    const m = /(\d+)\s*kB/.exec(line ?? "");
    return m ? Number(m[1]) * 1024 : null;
};

/** One host's facts from its script's output. */
export function parseHostFacts(stdout: string): HostFacts {
    const s = splitSections(stdout);
    const ok = (name: string) => (s.get(name)?.rc === 0 ? s.get(name)!.text.trim() : undefined);
    const said = (name: string) => s.get(name)?.text.trim().split("\n").filter(Boolean).pop() ?? "no output";
    const gpus = ok("gpus") !== undefined ? parseGpus(ok("gpus")!) : [];
    const docker = ok("docker") || null;
    const runtimes = ok("docker-runtimes") ?? "";
    const hooks = ok("nvidia-hooks") ?? s.get("nvidia-hooks")?.text ?? "";
    const meminfo = ok("meminfo") ?? "";
    const keyLine = ok("host-key")?.split("\n")[0];
    const hostKey = keyLine ? keyLine.trim().split(/\s+/).slice(0, 2).join(" ") : null;
    const df = ok("disk")?.split("\n")[1]?.trim().split(/\s+/);
    return {
        hostname: ok("hostname") || null,
        arch: ok("arch") || null,
        gpus,
        ...(gpus.length === 0 ? { gpuError: said("gpus") } : {}),
        docker,
        ...(docker ? {} : { dockerError: said("docker") }),
        // As the preflight decides: a runtime named nvidia, or the toolkit's hook on PATH [preflight].
        nvidiaRuntime: /"nvidia"/.test(runtimes) || /nvidia-(container-runtime-hook|container-toolkit|ctk)/.test(hooks),
        memTotalBytes: kib(meminfo.split("\n").find(l => l.startsWith("MemTotal:"))),
        memAvailableBytes: kib(meminfo.split("\n").find(l => l.startsWith("MemAvailable:"))),
        netdevs: parseNetdevs(ok("ip-addr"), s.get("net-sysfs")?.text ?? ""),
        hcas: parseHcas(s.get("ib-ports")?.text ?? "", s.get("ib-netdevs")?.text ?? ""),
        hostKey: hostKey && hostKey.includes(" ") ? hostKey : null,
        hostKeyFingerprint: hostKey && hostKey.includes(" ") ? sshFingerprint(hostKey) : null,
        hfHome: ok("hf-home") || null,
        models: parseModels(s.get("hf-models")?.text ?? ""),
        diskFreeBytes: df && /^\d+$/.test(df[3] ?? "") ? Number(df[3]) * 1024 : null,
        images: parseImages(ok("images") ?? ""),
    };
}
