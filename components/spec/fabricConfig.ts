// `spark-vllm:fabric`: the ConnectX-7 fabric the program sets up itself (issue 48), and the addresses that follow from
// it. Pure: no Pulumi, no I/O. parseSpec.ts reads the block with parseFabricSetup and, when `setup` is on, fills each
// host's fabric interface, address and HCAs from fabricLayout; components/plan/fabricSetup.ts renders the netplan
// drop-in per host from the same layout.
//
// Hardware facts this relies on:
// - Each QSFP port of a Spark is two PCIe x4 functions, so two netdevs and two RoCE devices ("twins"): the port
//   further from the Ethernet jack (Port1) is enp1s0f1np1 / enP2p1s0f1np1 with rocep1s0f1 / roceP2p1s0f1, the one next
//   to it (Port0) enp1s0f0np0 / enP2p1s0f0np0 with rocep1s0f0 / roceP2p1s0f0: NVIDIA/dgx-spark-playbooks
//   (0db7c141) nvidia/connect-two-sparks/README.md, the `ibdev2netdev` output of Step 2, and
//   nvidia/connect-three-sparks/README.md Step 2 ("Port0 is the CX7 port next to the Ethernet port"). NVIDIA Sync's
//   Cluster Assistant (docs.nvidia.com/sync/0.97.6/cluster-assistant.html, "Understand the ConnectX-7 Network"):
//   "Each QSFP port appears as a pair of Linux network interfaces, with corresponding ... RoCE devices".
// - Each twin on its own subnet, exactly one interface per device per subnet: the same Cluster Assistant page ("you
//   must set up two separate subnets ... with exactly one interface per device on a given subnet") and
//   nvidia/multi-sparks-through-switch/README.md Step 3 Option 2 ("assigning two distinct network interfaces to the same
//   subnet causes networking and software conflicts").
// - Both twins addressed: eugr/spark-vllm-docker (74c02c3; no setup-cluster.sh in that snapshot) README's cluster
//   section uses `enp1s0f1np1` for sockets and both RoCE devices `rocep1s0f1,roceP2p1s0f1` for NCCL, with addresses
//   "no need to allocate IP to their twins"; NVIDIA's two-Spark netplan (Option 1) addresses both, and NCCL reaches a
//   RoCE device by a GID holding an IPv4 address, so the plan addresses every twin whose RoCE device goes in the HCAs.
// - A ring is three Sparks, not four: build.nvidia.com/spark/connect-multiple-sparks/cable-devices lists "Three | Direct
//   ring" and switches for more, and NVIDIA's own setup script refuses a ring of four ("ring/line-style point-to-point
//   topology with 4 or more machines ... NOT supported": nvidia/multi-sparks-through-switch/assets/spark_cluster_setup/
//   node_scripts/detect_and_configure_cluster_networking.py). Without routes, hosts two cables apart cannot reach each
//   other, and every host must reach the head (Ray's GCS, NCCL's bootstrap).
import { isLinkLocal, parseIPv4, unusableAddress } from "./ipv4";
import { show } from "./showValue";

type Obj = Record<string, unknown>;
/** What parseFabricSetup reads with: parseSpec.ts's Reader, declared here rather than imported so neither file imports the other. */
export interface Reader {
    readonly problems: string[];
    problem(path: string, message: string): void;
    object(value: unknown, path: string, required: boolean): Obj | undefined;
    unknownKeys(obj: Obj, path: string, known: string[]): void;
    string(obj: Obj | undefined, key: string, path: string, fallback?: string, max?: number): string | undefined;
    integer(obj: Obj | undefined, key: string, path: string, min: number, max: number, fallback?: number): number | undefined;
    stringList(obj: Obj | undefined, key: string, path: string, fallback: string[], maxItems: number, maxChars: number): string[] | undefined;
    boolean(obj: Obj | undefined, key: string, path: string, fallback: boolean): boolean;
}

/** How the Sparks are cabled. */
export type FabricTopology = "direct" | "ring" | "switch";
/** How the fabric interfaces get their addresses. */
export type FabricAddressing = "static" | "link-local";

/** `spark-vllm:fabric`: whether and how the program sets up the ConnectX-7 fabric on every host. */
export interface FabricSetupSpec {
    /**
     * Default false: the hosts' fabric is addressed already and `hosts[].fabric` names it (as before issue 48). True: the
     * program plans the fabric (this block) and fills `hosts[].fabric.interface`, `.address` and `.hcas` from the plan.
     */
    setup: boolean;
    /**
     * Default "direct": two Sparks on one cable, port `port` to port `port`. "ring": three Sparks, each one's
     * Port0 cabled to the next one's Port1 (hosts in list order, the last back to the first; NVIDIA's
     * connect-three-sparks cabling). "switch": every Spark's port `port` on one switch.
     */
    topology: FabricTopology;
    /**
     * Default "static": one subnet per twin (per cable's twin in a ring), host `hosts[i]` at address number 10 + i in each.
     * "link-local": netplan's `link-local: [ ipv4 ]` (NVIDIA's earlier two-Spark netplan, assets/cx7-netplan.yaml); the
     * kernel picks the addresses, so `hosts[].fabric.address` must still be given. Not with a ring.
     */
    addressing: FabricAddressing;
    /** The QSFP port used by direct and switch: 0 (next to the Ethernet jack) or 1 (default, NVIDIA's playbooks' choice). A ring uses both. */
    port: 0 | 1;
    /**
     * Static addressing: the subnets, one per twin for direct and switch (2), one per twin of every cable for a ring (6). Default 192.168.100.0/24, 192.168.101.0/24, … (NVIDIA's two-Spark and switch playbooks use the first two).
     * Empty with link-local addressing, and where the topology does not fit the hosts.
     */
    subnets: string[];
    /** Default 9000 (jumbo frames); every hop must carry it, a switch's ports included. */
    mtu: number;
}

/** One QSFP port's two PCIe functions: netdev and RoCE device of twin 0 (PCIe domain 0000) and twin 1 (domain 0002). */
export function portTwins(port: 0 | 1): Array<{ netdev: string; rdma: string }> {
    return [
        { netdev: `enp1s0f${port}np${port}`, rdma: `rocep1s0f${port}` },
        { netdev: `enP2p1s0f${port}np${port}`, rdma: `roceP2p1s0f${port}` },
    ];
}

/** Static addresses are number FIRST_HOST_NUMBER + i in each subnet, so the default two-Spark plan keeps NVIDIA's .10 / .11. */
export const FIRST_HOST_NUMBER = 10;
/** The widest prefix accepted (a /28 holds hosts 10..14). */
const MAX_PREFIX = 28;
/** A ring of Sparks is three (see the header: NVIDIA cables no ring of four, and its hosts two hops apart would not meet). */
const RING_HOSTS = [3];
/** The most subnets a topology takes: a ring of three, two per cable. */
const MAX_SUBNETS = 2 * Math.max(...RING_HOSTS);

/** One subnet (or, with link-local addressing, one twin's link) and the hosts on it. */
export interface FabricSegment {
    index: number;
    /** `a.b.c.d/p`; undefined with link-local addressing. */
    subnet?: string;
    twin: 0 | 1;
    /** Indexes into hosts[]. */
    hosts: number[];
}

/** One host's end of a segment: the netdev, its RoCE device and its address there. */
export interface FabricEnd {
    host: number;
    segment: number;
    port: 0 | 1;
    twin: 0 | 1;
    interface: string;
    rdma: string;
    /** Static: the address; undefined with link-local addressing (the kernel picks it). */
    address?: string;
    prefix?: number;
}

export interface FabricLayout {
    segments: FabricSegment[];
    ends: FabricEnd[];
}

const toInt = (p: number[]) => ((p[0] << 24) >>> 0) + (p[1] << 16) + (p[2] << 8) + p[3];
const toDotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");

/** A subnet `a.b.c.d/p`: its network number and prefix, or undefined. */
export function parseCidr(text: string): { network: number; prefix: number; address: number[] } | undefined {
    const m = /^([0-9.]+)\/(\d{1,2})$/.exec(text);
    const address = m ? parseIPv4(m[1]) : undefined;
    if (!m || !address || Number(m[2]) > 32) return undefined;
    return { network: toInt(address), prefix: Number(m[2]), address };
}

const mask = (prefix: number) => (prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0);
/** Whether the IPv4 address `ip` is inside `cidr`. */
export function subnetContains(cidr: { network: number; prefix: number }, ip: number[]): boolean {
    return ((toInt(ip) & mask(cidr.prefix)) >>> 0) === ((cidr.network & mask(cidr.prefix)) >>> 0);
}
const overlaps = (a: { network: number; prefix: number }, b: { network: number; prefix: number }) => {
    const p = Math.min(a.prefix, b.prefix);
    return ((a.network & mask(p)) >>> 0) === ((b.network & mask(p)) >>> 0);
};

/** 169.254.0.0/16 (RFC 3927). */
const LINK_LOCAL = { network: toInt([169, 254, 0, 0]), prefix: 16 };

/** How many subnets the topology needs for `hosts` hosts: two twins per cable (ring) or per shared segment. */
export function subnetsNeeded(topology: FabricTopology, hosts: number): number {
    return topology === "ring" ? 2 * hosts : 2;
}

/** 192.168.100.0/24, 192.168.101.0/24, …: `count` subnets. */
export function defaultSubnets(count: number): string[] {
    return Array.from({ length: count }, (_, k) => `192.168.${100 + k}.0/24`);
}

/** Why the topology cannot join `hosts` hosts, or undefined. */
export function topologyProblem(topology: FabricTopology, hosts: number): string | undefined {
    if (topology === "direct" && hosts !== 2)
        return `direct joins exactly two Sparks on one cable, and the stack has ${hosts} host${hosts === 1 ? "" : "s"}; set ring (three Sparks, each cabled to the next two) or switch`;
    if (topology === "ring" && !RING_HOSTS.includes(hosts))
        return `ring joins three Sparks (each one's Port0 to the next one's Port1), and the stack has ${hosts}` +
            (hosts === 4 ? " (in a ring of four, hosts two cables apart cannot reach each other: no routes are planned, and every host must reach the head)" : "") +
            `; set ${hosts === 2 ? "direct" : "switch"}`;
    if (topology === "switch" && hosts < 2) return `switch needs two or more hosts, and the stack has ${hosts}`;
    return undefined;
}

/**
 * Which netdevs carry which subnet on which host, and each end's address. direct and switch: the two twins of `port`
 * on every host, twin t on segment t. ring: cable k joins host k's Port0 to host (k+1) mod n's Port1, its twin t on
 * segment 2k + t (NVIDIA's connect-three-sparks cabling and netplan: one subnet per twin of every cable).
 */
export function fabricLayout(fabric: FabricSetupSpec, hostCount: number): FabricLayout {
    const segments: FabricSegment[] = [];
    const ends: FabricEnd[] = [];
    const addEnd = (segment: FabricSegment, host: number, port: 0 | 1) => {
        const names = portTwins(port)[segment.twin];
        const cidr = segment.subnet === undefined ? undefined : parseCidr(segment.subnet);
        ends.push({
            host, segment: segment.index, port, twin: segment.twin, interface: names.netdev, rdma: names.rdma,
            ...(cidr ? { address: toDotted(((cidr.network & mask(cidr.prefix)) >>> 0) + FIRST_HOST_NUMBER + host), prefix: cidr.prefix } : {}),
        });
    };
    const subnetAt = (k: number) => (fabric.addressing === "static" ? fabric.subnets[k] : undefined);
    if (fabric.topology === "ring") {
        for (let k = 0; k < hostCount; k++)
            for (const twin of [0, 1] as const) {
                const segment: FabricSegment = { index: 2 * k + twin, subnet: subnetAt(2 * k + twin), twin, hosts: [k, (k + 1) % hostCount] };
                segments.push(segment);
                addEnd(segment, k, 0);
                addEnd(segment, (k + 1) % hostCount, 1);
            }
    } else {
        for (const twin of [0, 1] as const) {
            const segment: FabricSegment = { index: twin, subnet: subnetAt(twin), twin, hosts: Array.from({ length: hostCount }, (_, i) => i) };
            segments.push(segment);
            for (const h of segment.hosts) addEnd(segment, h, fabric.port);
        }
    }
    return { segments, ends };
}

/**
 * The end a host is known by (its `fabric.interface` and `.address`: VLLM_HOST_IP, Ray's node IP): twin 0 of the first
 * segment it shares with the head (hosts[0]), else of its first segment. In a ring that address reaches only the
 * neighbour on that cable (no routes are planned), so a host two hops from the head is not reached at it.
 */
export function primaryEnd(layout: FabricLayout, host: number): FabricEnd | undefined {
    const mine = layout.ends.filter(e => e.host === host && e.twin === 0);
    const withHead = mine.find(e => host === 0 || layout.segments[e.segment].hosts.includes(0));
    return withHead ?? mine[0];
}

/** The host pairs no segment joins (two hops apart in a ring of four). */
export function unreachedPairs(layout: FabricLayout, hostCount: number): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (let a = 0; a < hostCount; a++)
        for (let b = a + 1; b < hostCount; b++)
            if (!layout.segments.some(s => s.hosts.includes(a) && s.hosts.includes(b))) out.push([a, b]);
    return out;
}

/** What parseFabricSetup needs to know of each host. */
export interface FabricHostFacts {
    index: number;
    /** hosts[i].ssh.host as written (a name or an address). */
    sshHost?: string;
}

const TOPOLOGIES: readonly FabricTopology[] = ["direct", "ring", "switch"];
const ADDRESSINGS: readonly FabricAddressing[] = ["static", "link-local"];
export const FABRIC_KEYS = ["setup", "topology", "addressing", "port", "subnets", "mtu"];

/** Whether the raw `spark-vllm:fabric` asks for setup (read before the hosts, whose fabric keys it makes optional). */
export function fabricSetupRequested(raw: unknown): boolean {
    const setup = raw !== null && typeof raw === "object" && !Array.isArray(raw) ? (raw as Obj).setup : undefined;
    return setup === true || setup === "true";
}

/**
 * `spark-vllm:fabric`, every default filled; problems go to `r` with their key paths. Checked even with `setup` off,
 * except what depends on the hosts (the topology against their number, the subnets against their SSH addresses).
 */
export function parseFabricSetup(r: Reader, value: unknown, hosts: FabricHostFacts[]): FabricSetupSpec | undefined {
    const obj = r.object(value, "fabric", false) ?? {};
    r.unknownKeys(obj, "fabric", FABRIC_KEYS);
    const setup = r.boolean(obj, "setup", "fabric", false);
    const topology = r.string(obj, "topology", "fabric", "direct", 16);
    if (topology !== undefined && !TOPOLOGIES.includes(topology as FabricTopology))
        r.problem("fabric.topology", `must be ${TOPOLOGIES.join(", ").replace(/, ([^,]*)$/, " or $1")}, got ${show(topology)}`);
    const addressing = r.string(obj, "addressing", "fabric", "static", 16);
    if (addressing !== undefined && !ADDRESSINGS.includes(addressing as FabricAddressing))
        r.problem("fabric.addressing", `must be static or link-local, got ${show(addressing)}`);
    const port = r.integer(obj, "port", "fabric", 0, 1, 1) as 0 | 1 | undefined;
    // Ethernet's MTU 1500 (RFC 894) up to 9000 jumbo frames. NVIDIA's Spark playbooks' drop-ins set no MTU (1500 in
    // their `ip addr` output); NVIDIA's connect-two-stations playbook sets 9000 on its ConnectX rails
    // (NVIDIA/dgx-spark-playbooks nvidia/station-connect-two-stations/README.md), and a two-Spark switch write-up needed
    // "MTU 9000 (jumbo frames) on every hop" for full TCP rate (catharsis.net.au/blog/nvidea-dgx-spark-benchmarking).
    // A larger one would need every hop to carry it, and nothing here checks that before the apply.
    const mtu = r.integer(obj, "mtu", "fabric", 1500, 9000, 9000);
    const given = obj.subnets !== undefined && obj.subnets !== null;
    const written = r.stringList(obj, "subnets", "fabric", [], MAX_SUBNETS, 18);
    const knownTopology = TOPOLOGIES.includes(topology as FabricTopology) ? (topology as FabricTopology) : undefined;
    const shapeProblem = knownTopology && topologyProblem(knownTopology, hosts.length);
    if (setup && shapeProblem) r.problem("fabric.topology", shapeProblem);
    if (addressing === "link-local" && knownTopology === "ring")
        r.problem("fabric.addressing", "link-local puts every twin of both cables in 169.254.0.0/16, and each twin needs a subnet of its own (NVIDIA's multi-Spark guide); use static with a ring");
    const linkLocalSsh = hosts.find(h => h.sshHost !== undefined && parseIPv4(h.sshHost) && isLinkLocal(parseIPv4(h.sshHost)!));
    // A link-local SSH address may be on a ConnectX-7 twin (NVIDIA's first two-Spark netplan addressed them so), and the
    // drop-in takes every twin: link-local addressing re-addresses it, static turns IPv4 link-local off on it
    // (netplan generate writes LinkLocalAddressing=ipv6 for a twin with addresses: fabric-setup-netplan.test.ts).
    if (setup && linkLocalSsh)
        r.problem(`hosts[${linkLocalSsh.index}].ssh.host`, `${linkLocalSsh.sshHost} is link-local (169.254.0.0/16), as ConnectX-7 twins may be, and spark-vllm:fabric.setup ` +
            "re-addresses every fabric twin, which would take this SSH session's network; reach the host by its management address (10 GbE or Wi-Fi), or set fabric.setup: false");
    if (addressing === "link-local" && given)
        r.problem("fabric.subnets", "link-local addressing takes no subnets (the kernel picks addresses in 169.254.0.0/16); remove fabric.subnets or set fabric.addressing: static");

    let subnets: string[] = [];
    if (addressing === "static" && written !== undefined && knownTopology && !shapeProblem) {
        const needed = subnetsNeeded(knownTopology, hosts.length);
        subnets = given ? written : defaultSubnets(needed);
        if (given && subnets.length !== needed)
            r.problem("fabric.subnets", `lists ${subnets.length} subnet${subnets.length === 1 ? "" : "s"}; ${knownTopology} with ${hosts.length} hosts needs ${needed}, ` +
                `one per twin${knownTopology === "ring" ? " of every cable" : ""} (each twin on its own subnet); list ${needed} or leave it out for ${defaultSubnets(needed).slice(0, 2).join(", ")}, …`);
        else if (subnetProblems(r, subnets, given, hosts) > 0) subnets = [];
    } else if (written !== undefined && addressing === "static") {
        // The topology does not fit the hosts (reported above when setup is on): check the written subnets' form only.
        subnetProblems(r, written, given, []);
    }
    if (topology === undefined || addressing === undefined || port === undefined || mtu === undefined || written === undefined || !knownTopology) return undefined;
    return { setup, topology: knownTopology, addressing: addressing as FabricAddressing, port, subnets, mtu };
}

/** Problems of the subnets (form, overlaps, the SSH addresses inside them), reported at their paths; returns how many. */
function subnetProblems(r: Reader, subnets: string[], given: boolean, hosts: FabricHostFacts[]): number {
    const before = r.problems.length;
    const at = (j: number) => (given ? `fabric.subnets[${j}]` : "fabric.subnets");
    const parsed = subnets.map((text, j) => {
        const cidr = parseCidr(text);
        if (!cidr) return void r.problem(at(j), `${show(text)} is not a subnet; write it as a.b.c.d/prefix, e.g. 192.168.100.0/24`);
        const hostBits = (cidr.network & ~mask(cidr.prefix)) >>> 0;
        const unusable = unusableAddress(cidr.address);
        if (unusable) return void r.problem(at(j), `${text} is ${unusable}; give a private subnet such as 192.168.100.0/24`);
        if (overlaps(cidr, LINK_LOCAL))
            return void r.problem(at(j), `${text} overlaps 169.254.0.0/16, the link-local range (RFC 3927) the kernel picks from itself; give a private subnet such as 192.168.100.0/24, or set fabric.addressing: link-local`);
        if (cidr.prefix < 8 || cidr.prefix > MAX_PREFIX)
            return void r.problem(at(j), `${text}: the prefix must be between /8 and /${MAX_PREFIX} (hosts take addresses .${FIRST_HOST_NUMBER} and up)`);
        if (hostBits !== 0)
            return void r.problem(at(j), `${text} has host bits set; write the network itself, ${toDotted((cidr.network & mask(cidr.prefix)) >>> 0)}/${cidr.prefix}`);
        const room = 2 ** (32 - cidr.prefix) - 2;
        if (FIRST_HOST_NUMBER + hosts.length - 1 > room)
            return void r.problem(at(j), `${text} holds ${room} addresses, too few for ${hosts.length} hosts at .${FIRST_HOST_NUMBER} and up; give a wider subnet such as /24`);
        return cidr;
    });
    parsed.forEach((cidr, j) => {
        if (!cidr) return;
        const earlier = parsed.findIndex((o, i) => i < j && o && overlaps(o, cidr));
        if (earlier >= 0)
            r.problem(at(j), `${subnets[j]} overlaps fabric.subnets[${earlier}] ${subnets[earlier]}; every twin needs a subnet of its own (one interface per host per subnet), so give one that does not overlap`);
        for (const h of hosts) {
            const ip = h.sshHost === undefined ? undefined : parseIPv4(h.sshHost);
            if (ip && subnetContains(cidr, ip))
                r.problem(at(j), `${subnets[j]} contains hosts[${h.index}].ssh.host ${h.sshHost}, the management address spark-vllm reaches that host at: ` +
                    `setting up the fabric there would take the SSH session's network; give spark-vllm:fabric.subnets that leave the management network out`);
        }
    });
    return r.problems.length - before;
}
