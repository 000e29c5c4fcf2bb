// The netplan drop-in each host gets from `spark-vllm:fabric` (issue 48): pure, from the spec's fabric and hosts alone.
// Nothing writes or applies it yet (that host resource is not built): `spark-vllm plan` shows it so an owner can apply
// it by hand (docs/deploy.md, "The fabric declared in the stack").
//
// The drop-in follows NVIDIA's own (NVIDIA/dgx-spark-playbooks 0db7c141: nvidia/connect-two-sparks/README.md Step 3
// Option 1 and nvidia/connect-three-sparks/README.md Step 3 Option 2, /etc/netplan/40-cx7.yaml): netplan's
// `network: {version: 2, ethernets: {...}}` with each fabric twin, its address and `dhcp4: false`; or, with link-local
// addressing, `link-local: [ ipv4 ]` (nvidia/connect-two-sparks/assets/cx7-netplan.yaml). It names only the fabric twins:
// no routes, no gateway, nothing for any other interface, so the management network is left as it is.
import * as yaml from "js-yaml";
import type { ClusterSpec } from "../spec/spec";
import { FabricEnd, FabricLayout, FabricSetupSpec, fabricLayout } from "../spec/fabricConfig";

/**
 * Our drop-in: "60-" sorts after NVIDIA's 40-cx7.yaml and the installer's 50-cloud-init.yaml, so ours wins where they
 * name the same interface (canonical/netplan doc/netplan-generate.md: files are read in lexicographical order, later
 * ones "add to or override" earlier ones).
 */
export const FABRIC_NETPLAN_PATH = "/etc/netplan/60-spark-vllm-fabric.yaml";
/**
 * 0600: netplan warns "Permissions for %s are too open. Netplan configuration should NOT be accessible by others." for a
 * file readable or writable by group or others (canonical/netplan src/parse.c, the S_IRGRP|S_IWGRP|S_IROTH|S_IWOTH
 * check before load_yaml); NVIDIA's playbooks `chmod 600` theirs.
 */
export const FABRIC_NETPLAN_MODE = 0o600;

/** One fabric interface's stanza under `ethernets:` (netplan's YAML schema, version 2). */
export interface NetplanEthernet {
    "dhcp4": false;
    /** Static addressing: `a.b.c.d/prefix`. */
    addresses?: string[];
    /** Link-local addressing: the kernel picks an IPv4 address in 169.254.0.0/16. */
    "link-local"?: Array<"ipv4">;
    mtu: number;
}

/** The whole drop-in, as netplan reads it. */
export interface NetplanDocument {
    network: { version: 2; ethernets: Record<string, NetplanEthernet> };
}

/** One twin this host addresses, and the hosts at its other end. */
export interface FabricLink {
    interface: string;
    rdma: string;
    /** `a.b.c.d/prefix`, or undefined with link-local addressing. */
    address?: string;
    /** The subnet (or, link-local, the twin's link) this twin is on. */
    subnet?: string;
    /** The other hosts on it, by name. */
    peers: string[];
}

/** What one host gets. */
export interface HostFabricSetup {
    host: string;
    path: string;
    mode: number;
    document: NetplanDocument;
    /** The drop-in's text (js-yaml's rendering of `document`). */
    yaml: string;
    links: FabricLink[];
}

/** Which twins carry which host pair (direct and switch: both twins of the port; ring: the twins of their one cable). */
export interface HostPairLinks {
    hosts: [string, string];
    /** One per twin: each host's interface and (static) address on it. */
    twins: Array<{ subnet?: string; ends: Array<{ host: string; interface: string; address?: string }> }>;
}

export interface FabricSetupPlan {
    hosts: HostFabricSetup[];
    pairs: HostPairLinks[];
}

function ethernet(fabric: FabricSetupSpec, end: FabricEnd): NetplanEthernet {
    return end.address === undefined
        ? { "dhcp4": false, "link-local": ["ipv4"], mtu: fabric.mtu }
        : { "dhcp4": false, addresses: [`${end.address}/${end.prefix}`], mtu: fabric.mtu };
}

/** The YAML text of a drop-in: block style, keys in the order written, no aliases. */
export function renderNetplan(document: NetplanDocument): string {
    return yaml.dump(document, { noRefs: true, sortKeys: false, lineWidth: -1 });
}

function pairsOf(layout: FabricLayout, names: string[]): HostPairLinks[] {
    const out: HostPairLinks[] = [];
    for (let a = 0; a < names.length; a++)
        for (let b = a + 1; b < names.length; b++) {
            const shared = layout.segments.filter(s => s.hosts.includes(a) && s.hosts.includes(b));
            if (shared.length === 0) continue;
            out.push({
                hosts: [names[a], names[b]],
                twins: shared.map(s => ({
                    ...(s.subnet ? { subnet: s.subnet } : {}),
                    ends: layout.ends.filter(e => e.segment === s.index && (e.host === a || e.host === b))
                        .map(e => ({ host: names[e.host], interface: e.interface, ...(e.address ? { address: e.address } : {}) })),
                })),
            });
        }
    return out;
}

/** Each host's drop-in and links, and the host pairs' twins; undefined unless `spark-vllm:fabric.setup` is on. */
export function planFabricSetup(spec: Pick<ClusterSpec, "fabric" | "hosts">): FabricSetupPlan | undefined {
    const fabric = spec.fabric;
    if (!fabric?.setup) return undefined;
    const names = spec.hosts.map(h => h.name);
    const layout = fabricLayout(fabric, names.length);
    const hosts = names.map((name, i): HostFabricSetup => {
        const mine = layout.ends.filter(e => e.host === i);
        const document: NetplanDocument = { network: { version: 2, ethernets: Object.fromEntries(mine.map(e => [e.interface, ethernet(fabric, e)])) } };
        return {
            host: name,
            path: FABRIC_NETPLAN_PATH,
            mode: FABRIC_NETPLAN_MODE,
            document,
            yaml: renderNetplan(document),
            links: mine.map(e => {
                const segment = layout.segments[e.segment];
                return {
                    interface: e.interface,
                    rdma: e.rdma,
                    ...(e.address ? { address: `${e.address}/${e.prefix}` } : {}),
                    ...(segment.subnet ? { subnet: segment.subnet } : {}),
                    peers: segment.hosts.filter(h => h !== i).map(h => names[h]),
                };
            }),
        };
    });
    return { hosts, pairs: pairsOf(layout, names) };
}

/**
 * What an owner must know before applying the plan: in a ring each host is known by one address (its `fabric.address`,
 * on the cable it shares with hosts[0]), and a host on another cable of the head reaches the head only at the head's
 * address on their own cable; no routes are planned, so such pairs do not meet at the known addresses.
 */
export function fabricSetupNotes(spec: Pick<ClusterSpec, "fabric" | "hosts">): string[] {
    const fabric = spec.fabric;
    if (!fabric?.setup || fabric.topology !== "ring") return [];
    const known = spec.hosts.map(h => h.fabric.address);
    const layout = fabricLayout(fabric, spec.hosts.length);
    const notes: string[] = [];
    spec.hosts.forEach((h, i) => {
        if (i === 0) return;
        const onHeadSubnet = layout.ends.some(e => e.host === i && e.address !== undefined &&
            layout.ends.some(o => o.host === 0 && o.segment === e.segment && o.address === known[0]));
        if (!onHeadSubnet)
            notes.push(`spark-vllm:fabric (ring): ${h.name} shares no subnet with ${spec.hosts[0].name}'s fabric address ${known[0]} ` +
                `(no routes are planned), so Ray and NCCL's bootstrap on ${h.name} cannot reach the head there until a route or a per-peer address is set up`);
    });
    return notes;
}
