// `spark-vllm init`, part two: from every host's facts (components/init/initFacts.ts) to the stack's choices and the text of
// Pulumi.<stack>.yaml, each choice with a comment saying where it came from. Pure: no SSH, no files, no Pulumi.
//
// Sources, by the short names used below (and those of initFacts.ts):
//   [two-sparks]  NVIDIA's "Connect Two Sparks" playbook,
//                 https://github.com/NVIDIA/dgx-spark-playbooks/blob/main/nvidia/connect-two-sparks/README.md: one QSFP
//                 cable between the Sparks; "Each physical port has two logical interfaces, for example, enp1s0f1np1 and
//                 enP2p1s0f1np1 refer to the same physical port"; ibdev2netdev shows rocep1s0f1 ==> enp1s0f1np1 and
//                 roceP2p1s0f1 ==> enP2p1s0f1np1; its netplan gives the twins different subnets (192.168.100.x/24 and
//                 192.168.101.x/24); an earlier version of it used IPv4 link-local addresses (DESIGN.md).
//   [design]      /work/shared/DESIGN.md "Facts": twins of one port on different subnets, RoCE needs a v2 GID with an IPv4
//                 address per HCA, NVIDIA recommends MTU 9000; GB10 is compute capability 12.1 with one GPU per Spark.
//   [toolkit]     NVIDIA Container Toolkit install guide, "Configuring Docker": `sudo nvidia-ctk runtime configure
//                 --runtime=docker`, then restart Docker
//                 (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html).
//   [vllm-tp]     vLLM requires the attention heads to divide evenly by the tensor parallel size
//                 (ModelConfig.verify_with_parallel_config: "Total number of attention heads (…) must be divisible by
//                 tensor parallel size (…)"; the diagnosis kind tp-divisibility, components/knowledge/diagnosis.ts).
import * as yaml from "js-yaml";
import { CATALOG, CatalogModel, findModel } from "../knowledge/catalog";
import { GB10_CAPABILITY, KNOWN_IMAGES, KnownImage, imageProblems, lookupImage, normalizeReference } from "../knowledge/images";
import { quantizationKernelProblem } from "../knowledge/imageKernels";
import { planMemory } from "../plan/memory";
import { CONFIG_NAMESPACE, rawConfigFromStack } from "../spec/stackConfig";
import { parseImageRef, parseSpec } from "../spec/parseSpec";
import { SpecError } from "../spec/spec";
import { parseHostKey } from "../spec/hostKeys";
import { Hca, HostFacts, Ipv4, MELLANOX_VENDOR, Netdev } from "./initFacts";

export const TWO_SPARKS_PLAYBOOK = "https://github.com/NVIDIA/dgx-spark-playbooks/blob/main/nvidia/connect-two-sparks/README.md";
/** NVIDIA's recommended fabric MTU [design]. */
export const RECOMMENDED_MTU = 9000;

/** `[USER@]ADDRESS[:PORT]` as given on the command line. */
export interface HostTarget {
    user: string;
    host: string;
    port: number;
}

/** Parses `[USER@]ADDRESS[:PORT]` (an IPv6 address in brackets); the user defaults to DEFAULT_USER. */
export function parseHostTarget(text: string, defaultUser: string): HostTarget | { problem: string } {
    const m = /^(?:([a-z_][a-z0-9_.-]*)@)?(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/i.exec(text);
    if (!m) return { problem: `--host ${JSON.stringify(text)}: expected [USER@]ADDRESS[:PORT], e.g. nvidia@spark-a.local or 192.168.1.20:2222` };
    const port = m[3] === undefined ? 22 : Number(m[3]);
    if (port < 1 || port > 65535) return { problem: `--host ${text}: port ${m[3]} is not 1-65535` };
    return { user: m[1] ?? defaultUser, host: m[2].replace(/^\[|\]$/g, ""), port };
}

/** What the SSH call to one host gave: its facts, or why it could not be read. */
export interface HostResult {
    target: HostTarget;
    facts?: HostFacts;
    /** SSH's last words when the host could not be reached or the script did not run. */
    unreachable?: string;
}

export interface InitOptions {
    stack: string;
    /** --model: a Hugging Face id. */
    model?: string;
    /** --image: a reference, pinned or not. */
    image?: string;
    /** --identity: the private key file SSH used, for the printed sshPrivateKey line. */
    identity?: string;
    /** When the file was written (its header comment). */
    now?: Date;
}

/** A choice and where it came from (the comment beside it in the file). */
interface Sourced<T> {
    value: T;
    why: string;
}

export interface HostChoice {
    name: Sourced<string>;
    ssh: HostTarget;
    hostKey?: Sourced<string>;
    fingerprint?: string;
    fabric: { interface: Sourced<string>; address: Sourced<string>; hcas: Sourced<string[]> };
    gpus: Sourced<number>;
    platform: Sourced<string>;
}

export interface StackChoices {
    hosts: HostChoice[];
    image: Sourced<string>;
    model: { id: Sourced<string>; cacheDir: Sourced<string>; weights: Sourced<"present" | "download" | "head-then-copy"> };
    vllm: {
        tensorParallelSize: Sourced<number>;
        pipelineParallelSize: Sourced<number>;
        maxModelLen?: Sourced<number>;
        backend?: Sourced<"ray" | "mp">;
        version?: Sourced<string>;
    };
}

export interface InitResult {
    /** Why no stack can be written, one line per problem, each naming the host and the fix. Empty when it can. */
    problems: string[];
    warnings: string[];
    choices?: StackChoices;
    /** The stack file's text (only without problems). */
    yaml?: string;
    /** `pulumi config set --secret …` lines for what init does not write. */
    secretLines: string[];
    /** Per host: what was read, for the owner to see (host keys' fingerprints among them). */
    summary: string[];
}

// ---------------------------------------------------------------- the fabric

const ipToInt = (a: string) => a.split(".").reduce((n, o) => n * 256 + Number(o), 0);
const intToIp = (n: number) => [24, 16, 8, 0].map(s => Math.floor(n / 2 ** s) % 256).join(".");
/** The network of ADDRESS/PREFIX, as "a.b.c.d/p". */
export function subnetOf(a: Ipv4): string {
    const size = 2 ** (32 - a.prefix);
    return `${intToIp(Math.floor(ipToInt(a.address) / size) * size)}/${a.prefix}`;
}
const isLinkLocal = (address: string) => address.startsWith("169.254.");

/** The physical port of a ConnectX-7 netdev: its twin (`enP2p1s0f1np1` for `enp1s0f1np1`) has the same [two-sparks]. */
export function physicalPort(netdev: string): string {
    const m = /^en(?:P\d+)?(p\d+s\d+f\d+(?:np\d+)?)$/.exec(netdev);
    return m ? m[1] : netdev;
}
/** The second PCIe function's name of a port (`enP2p…`): NVIDIA's guide names the plain one first [two-sparks]. */
const isSecondFunction = (netdev: string) => /^enP\d+p/.test(netdev);

/** The HCA ports whose netdev is NAME [ibdev2netdev]. */
function hcasOf(f: HostFacts, name: string): Hca[] {
    return f.hcas.filter(h => h.netdev === name || h.roceV2Ipv4.some(g => g.netdev === name));
}

/** A ConnectX netdev: Mellanox's vendor id in sysfs [ibdev2netdev], or an RDMA device behind it. */
function isConnectX(f: HostFacts, n: Netdev): boolean {
    return n.vendor === MELLANOX_VENDOR || hcasOf(f, n.name).length > 0;
}

/** An HCA NCCL can use over RoCE on ADDRESS: ACTIVE, Ethernet, with a RoCE v2 GID holding the address [design]. */
function usableHca(h: Hca, address: string): boolean {
    return h.active && /ethernet/i.test(h.linkLayer) && h.roceV2Ipv4.some(g => g.address === address);
}

interface Candidate {
    netdev: Netdev;
    ipv4: Ipv4;
    subnet: string;
    hcas: Hca[];
}

/** A host's ConnectX netdevs that can carry the fabric: up, with carrier, with an IPv4 address. */
function candidates(f: HostFacts): Candidate[] {
    return f.netdevs.filter(n => isConnectX(f, n) && n.up && n.carrier).flatMap(n =>
        n.ipv4.map(ipv4 => ({ netdev: n, ipv4, subnet: subnetOf(ipv4), hcas: hcasOf(f, n.name).filter(h => usableHca(h, ipv4.address)) })));
}

/** On one subnet, the host's best candidate: one with a usable HCA, then the port's first function, then by name. */
function bestOn(cands: Candidate[]): Candidate {
    return [...cands].sort((a, b) => (b.hcas.length > 0 ? 1 : 0) - (a.hcas.length > 0 ? 1 : 0)
        || Number(isSecondFunction(a.netdev.name)) - Number(isSecondFunction(b.netdev.name)) || a.netdev.name.localeCompare(b.netdev.name))[0];
}

const describeLinks = (f: HostFacts) => {
    const cx = f.netdevs.filter(n => isConnectX(f, n));
    if (cx.length === 0) return "no ConnectX-7 netdev found";
    return cx.map(n => `${n.name} ${n.carrier ? "carrier" : "no carrier"}${n.up ? "" : ", admin down"}, ${n.ipv4.map(a => `${a.address}/${a.prefix}`).join(" ") || "no IPv4"}`).join("; ");
};

interface FabricChoice {
    subnet: string;
    picks: Candidate[];
    hcas: string[][];
}

/** The subnet every host shares and each host's interface, HCAs and address on it; or the problems. */
function chooseFabric(names: string[], facts: HostFacts[], problems: string[], warnings: string[]): FabricChoice | undefined {
    const perHost = facts.map(candidates);
    const down = facts.map((f, i) => (perHost[i].length === 0 ? i : -1)).filter(i => i >= 0);
    for (const i of down) {
        const cx = facts[i].netdevs.filter(n => isConnectX(facts[i], n));
        const withCarrier = cx.filter(n => n.carrier && n.up);
        problems.push(withCarrier.length === 0
            ? `${names[i]}: no ConnectX-7 port has a link (${describeLinks(facts[i])}); check the QSFP cable between the Sparks and that the port is up (\`ip link set DEV up\`), as in NVIDIA's two-Spark playbook: ${TWO_SPARKS_PLAYBOOK}`
            : `${names[i]}: ${withCarrier.map(n => n.name).join(", ")} ${withCarrier.length === 1 ? "has" : "have"} a link but no IPv4 address; give the port an address (netplan, ${TWO_SPARKS_PLAYBOOK})`);
    }
    if (down.length) return undefined;
    const subnets = [...new Set(perHost.flat().map(c => c.subnet))].filter(s => perHost.every(cs => cs.some(c => c.subnet === s)));
    if (subnets.length === 0) {
        problems.push(`the hosts share no fabric subnet: ${facts.map((f, i) => `${names[i]}: ${describeLinks(f)}`).join(" | ")}; put one cabled port of each host on one subnet, e.g. 192.168.100.10/24 and 192.168.100.11/24 as NVIDIA's two-Spark playbook does (${TWO_SPARKS_PLAYBOOK})`);
        return undefined;
    }
    const options = subnets.map(subnet => {
        const picks = perHost.map(cs => bestOn(cs.filter(c => c.subnet === subnet)));
        const score = [
            picks.every(p => p.hcas.length > 0) ? 1 : 0,
            -picks.filter(p => isSecondFunction(p.netdev.name)).length,
            isLinkLocal(picks[0].ipv4.address) ? 0 : 1,
            Math.min(...picks.map(p => p.netdev.speedMbps ?? 0)),
        ];
        return { subnet, picks, score };
    }).sort((a, b) => {
        for (let i = 0; i < a.score.length; i++) if (a.score[i] !== b.score[i]) return b.score[i] - a.score[i];
        return a.subnet.localeCompare(b.subnet);
    });
    const { subnet, picks } = options[0];
    const seen = new Map<string, string>();
    picks.forEach((p, i) => {
        const other = seen.get(p.ipv4.address);
        if (other) problems.push(`${names[i]}: its fabric address ${p.ipv4.address} (${p.netdev.name}) is also ${other}'s; give every host its own address on ${subnet}`);
        seen.set(p.ipv4.address, names[i]);
    });
    const hcas = picks.map((p, i) => {
        // The chosen port's HCAs, then every other cabled port's on a subnet all hosts share (a twin or a second cable:
        // full bandwidth needs them all addressed [two-sparks]), never two on one subnet [design].
        const chosen: Candidate[] = [p];
        for (const c of perHost[i].filter(c => c !== p && subnets.includes(c.subnet) && c.hcas.length > 0).sort((a, b) => a.netdev.name.localeCompare(b.netdev.name))) {
            const clash = chosen.find(k => k.subnet === c.subnet);
            if (clash) continue;
            chosen.push(c);
        }
        return [...new Set(chosen.flatMap(c => c.hcas.map(h => h.name)))];
    });
    facts.forEach((f, i) => {
        const mine = perHost[i];
        for (const a of mine) for (const b of mine)
            if (a.netdev.name < b.netdev.name && physicalPort(a.netdev.name) === physicalPort(b.netdev.name) && a.subnet === b.subnet)
                warnings.push(`${names[i]}: ${a.netdev.name} and ${b.netdev.name} are the twins of one port and share ${a.subnet}; give each twin its own subnet (NVIDIA's playbook uses 192.168.100.0/24 and 192.168.101.0/24: ${TWO_SPARKS_PLAYBOOK}); only one of their HCAs is used`);
        const mtuLow = [...new Set([picks[i].netdev, ...f.netdevs.filter(n => hcas[i].some(h => hcasOf(f, n.name).some(x => x.name === h)))])]
            .filter(n => n.mtu !== null && n.mtu < RECOMMENDED_MTU);
        for (const n of mtuLow)
            warnings.push(`${names[i]}: ${n.name} has MTU ${n.mtu}; NVIDIA recommends ${RECOMMENDED_MTU} on the Spark fabric (netplan \`mtu: ${RECOMMENDED_MTU}\` on both hosts)`);
        if (hcas[i].length === 0)
            warnings.push(`${names[i]}: no RoCE HCA with a RoCE v2 IPv4 GID sits behind ${picks[i].netdev.name}; NCCL will use TCP sockets (hcas: [])`);
    });
    return { subnet, picks, hcas };
}

// ---------------------------------------------------------------- names, image, model, parallelism

/** A host's name for the stack: its hostname made a valid name (a-z, 0-9, -), unique; else spark-<n>. */
function hostNames(results: HostResult[]): Array<Sourced<string>> {
    const used = new Set<string>();
    return results.map((r, i) => {
        const raw = (r.facts?.hostname ?? "").toLowerCase().split(".")[0].replace(/[^a-z0-9-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 63);
        let name = raw && !used.has(raw) ? raw : "";
        let why = "the host's hostname";
        if (!name) {
            name = `spark-${i + 1}`;
            for (let n = i + 1; used.has(name); n++) name = `spark-${n}`;
            why = raw ? `its hostname ${raw} is another host's` : "no usable hostname";
        }
        used.add(name);
        return { value: name, why };
    });
}

const imageRefOf = (repository: string, tag: string, digest: string) => `${repository}${tag ? `:${tag}` : ""}@${digest}`;

/** The image: the given one (pinned from the hosts' pulled copy when it has no digest), else a pulled one known to run on a GB10. */
function chooseImage(opts: InitOptions, facts: HostFacts[], names: string[], problems: string[], warnings: string[], hostCaps: { capability: string; driver: string }): Sourced<string> | undefined {
    const onEvery = (repo: string, tag: string) => {
        const digests = facts.map(f => f.images.find(i => normalizeReference(`${i.repository}:${i.tag}`) === normalizeReference(`${repo}:${tag}`))?.digest ?? null);
        return digests.every(d => d && d === digests[0]) ? digests[0] : undefined;
    };
    let chosen: Sourced<string> | undefined;
    if (opts.image) {
        const ref = parseImageRef(opts.image);
        if (!ref) {
            problems.push(`--image ${opts.image}: not an image reference; give <repo>[:tag][@sha256:<digest>]`);
            return undefined;
        }
        if (ref.digest) chosen = { value: opts.image, why: "--image" };
        else {
            const pulled = facts.map(f => f.images.find(i => normalizeReference(`${i.repository}:${i.tag}`) === normalizeReference(opts.image!)));
            const digest = pulled[0]?.digest;
            if (!digest) {
                problems.push(`--image ${opts.image} is not pinned by digest and ${names[0]} has not pulled it: pin it (\`docker buildx imagetools inspect ${opts.image}\` prints the digest; give ${opts.image}@sha256:…) or pull it on the hosts first`);
                return undefined;
            }
            pulled.forEach((p, i) => {
                if (p?.digest && p.digest !== digest) warnings.push(`${names[i]}: its ${opts.image} is ${p.digest}, not the head's ${digest}; \`up\` pulls the head's digest on every host`);
            });
            chosen = { value: imageRefOf(ref.repository, ref.tag ?? "", digest), why: `--image, pinned to the digest ${names[0]} pulled (docker images --digests)` };
        }
    } else {
        // Known to run on a GB10 (components/knowledge/images.ts runsOnGb10), pulled with the same digest on every host; the newest.
        const known = [...KNOWN_IMAGES].reverse().filter(k => k.runsOnGb10);
        for (const k of known) {
            const [repo, tag] = [k.reference.slice(0, k.reference.lastIndexOf(":")), k.reference.slice(k.reference.lastIndexOf(":") + 1)];
            const digest = onEvery(repo, tag);
            if (digest) {
                chosen = { value: `${k.reference}@${digest}`, why: `pulled on every host, known to run on a GB10 (${k.runsOnGb10})` };
                break;
            }
        }
        if (!chosen) {
            const example = known[0]?.reference ?? "nvcr.io/nvidia/vllm:25.11-py3";
            problems.push(`no --image given and no vLLM image known to run on a GB10 is pulled on every host (components/knowledge/images.ts knows ${known.map(k => k.reference).join(", ")}); pull one on every host (\`docker pull ${example}\`) or pass --image <repo>[:tag]@sha256:<digest>`);
            return undefined;
        }
    }
    const known = lookupImage(chosen.value);
    if (known) for (const p of imageProblems(known, hostCaps, facts.length > 1 ? (known.ray?.present === false ? "mp" : "ray") : "single", facts.length))
        (p.severity === "error" ? problems : warnings).push(`image ${chosen.value}: ${p.message}`);
    return chosen;
}

/** TP × PP for the GPUs: TP across every GPU when the model's heads divide by it, else TP within a host and PP across [vllm-tp]. */
function parallelism(gpusPerHost: number, hosts: number, model: CatalogModel | undefined): { tp: Sourced<number>; pp: Sourced<number> } {
    const total = gpusPerHost * hosts;
    if (!model || model.attentionHeads % total === 0)
        return { tp: { value: total, why: `every GPU (${hosts} host${hosts === 1 ? "" : "s"} × ${gpusPerHost}), tensor parallel across the fabric` }, pp: { value: 1, why: "no pipeline stages" } };
    return {
        tp: { value: gpusPerHost, why: `${model.attentionHeads} attention heads do not divide by ${total}: tensor parallel within a host` },
        pp: { value: hosts, why: "one pipeline stage per host" },
    };
}

/** The largest maxModelLen the memory plan gives, in 1024-token steps, capped at the model's own maximum. */
function maxModelLenFor(hostNames: string[], gpus: number, tp: number, pp: number, model: CatalogModel): { fits: boolean; len?: Sourced<number>; why?: string } {
    const plan = planMemory({ hosts: hostNames.map(name => ({ name, gpus })), vllm: { tensorParallelSize: tp, pipelineParallelSize: pp, gpuMemoryUtilization: 0.85, maxModelLen: model.maxContext } }, model);
    if (plan.kind !== "plan" || !plan.weightsFit) return { fits: false, why: plan.kind === "plan" ? plan.problems[0] : plan.message };
    if (plan.kvTokens >= model.maxContext) return { fits: true, len: { value: model.maxContext, why: `the model's own maximum; the KV cache holds ${plan.kvTokens} tokens per GPU (memory plan)` } };
    const len = Math.floor(plan.kvTokens / 1024) * 1024;
    if (len < 1024) return { fits: false, why: `the KV cache holds only ${plan.kvTokens} tokens per GPU (memory plan)` };
    return { fits: true, len: { value: len, why: `the KV cache holds ${plan.kvTokens} tokens per GPU (memory plan); the model allows ${model.maxContext}` } };
}

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

// ---------------------------------------------------------------- the whole choice

/** Every choice for the stack from the hosts' facts, or every reason it cannot be made. */
export function chooseStack(results: HostResult[], opts: InitOptions): InitResult {
    const problems: string[] = [];
    const warnings: string[] = [];
    const summary: string[] = [];
    const secretLines: string[] = [];
    const names = hostNames(results);
    const label = (i: number) => names[i].value;
    results.forEach((r, i) => {
        if (r.unreachable !== undefined || !r.facts) {
            const t = r.target;
            problems.push(`${t.user}@${t.host}:${t.port}: unreachable (${r.unreachable ?? "no answer"}); check that the host is up and that \`ssh -o BatchMode=yes -p ${t.port} ${t.user}@${t.host} true\` works with your agent's key or --identity (its host key must be in ~/.ssh/known_hosts: connect once by hand and compare the fingerprint)`);
        }
    });
    results.forEach((r, i) => {
        const f = r.facts;
        if (!f) return;
        const g = f.gpus[0];
        summary.push(`${label(i)} (${results[i].target.user}@${results[i].target.host}): ${f.arch ?? "?"}, ${f.gpus.length} × ${g ? `${g.name} (compute ${g.computeCap ?? "?"}, driver ${g.driver})` : "no GPU"}, ` +
            `Docker ${f.docker ?? "missing"}${f.nvidiaRuntime ? " with the NVIDIA runtime" : ""}, memory ${f.memTotalBytes ? gib(f.memTotalBytes) : "?"}, ` +
            `${f.diskFreeBytes !== null ? `${gib(f.diskFreeBytes)} free at ${f.hfHome}` : "disk ?"}; cached models: ${f.models.map(m => `${m.id} (${gib(m.bytes)})`).join(", ") || "none"}; ` +
            `vLLM images: ${f.images.filter(im => /vllm/i.test(im.repository)).map(im => `${im.repository}:${im.tag}${im.digest ? `@${im.digest.slice(0, 19)}…` : ""}`).join(", ") || "none"}`);
        summary.push(`  ${label(i)} host key: ${f.hostKeyFingerprint ? `ED25519 ${f.hostKeyFingerprint}` : "unreadable"} (compare with what your SSH client recorded: \`ssh-keygen -lF ${results[i].target.host} -f ~/.ssh/known_hosts\`)`);
        if (f.gpus.length === 0) problems.push(`${label(i)}: nvidia-smi found no GPU (${f.gpuError ?? "no output"}); install the NVIDIA driver (DGX OS ships it)`);
        if (!f.docker) problems.push(`${label(i)}: Docker is not reachable for ${results[i].target.user} (${f.dockerError ?? "no answer"}); install Docker and add the user to the docker group (\`sudo usermod -aG docker ${results[i].target.user}\`, then log in again)`);
        else if (!f.nvidiaRuntime) problems.push(`${label(i)}: Docker has no NVIDIA runtime; install nvidia-container-toolkit and run \`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker\` (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)`);
        if (!f.hostKey) warnings.push(`${label(i)}: /etc/ssh/ssh_host_ed25519_key.pub is not readable; hosts[].ssh.hostKey is left out (any host key is then accepted by the remote commands: docs/security.md)`);
    });
    const reached = results.flatMap((r, i) => (r.facts ? [[r.facts, i] as [HostFacts, number]] : []));
    const gpuKey = (f: HostFacts) => (f.gpus[0] ? `${f.gpus[0].name} (compute ${f.gpus[0].computeCap ?? "?"})` : "");
    const gpuKinds = [...new Set(reached.filter(([f]) => f.gpus.length).map(([f]) => gpuKey(f)))];
    if (gpuKinds.length > 1)
        problems.push(`the hosts have different GPUs (${reached.map(([f, i]) => `${label(i)}: ${gpuKey(f) || "none"}`).join(", ")}); one model is split evenly over identical GPUs: list only hosts with the same GPU`);
    const gpuCounts = [...new Set(reached.map(([f]) => f.gpus.length))];
    if (gpuCounts.length > 1 && reached.every(([f]) => f.gpus.length))
        problems.push(`the hosts have different GPU counts (${reached.map(([f, i]) => `${label(i)}: ${f.gpus.length}`).join(", ")}); list only hosts with as many GPUs each`);
    // An unreachable host leaves nothing to choose; what the others said wrong is reported with it.
    if (results.some(r => !r.facts)) return { problems, warnings, secretLines, summary };
    const facts = results.map(r => r.facts!);
    const hostList = facts.map((_, i) => label(i));

    const platforms = facts.map((f, i) => {
        const p = f.arch === "aarch64" || f.arch === "arm64" ? "linux/arm64" : f.arch === "x86_64" ? "linux/amd64" : undefined;
        if (!p) problems.push(`${label(i)}: CPU architecture ${f.arch ?? "unknown"} is neither aarch64 nor x86_64`);
        return p ?? "linux/arm64";
    });
    const hfHomes = [...new Set(facts.map(f => f.hfHome))];
    if (hfHomes.some(h => !h)) problems.push(`${facts.map((f, i) => (f.hfHome ? "" : label(i))).filter(Boolean).join(", ")}: the Hugging Face cache directory could not be read ($HF_HOME or ~/.cache/huggingface)`);
    else if (hfHomes.length > 1)
        problems.push(`the Hugging Face cache is not the same path on every host (${facts.map((f, i) => `${label(i)}: ${f.hfHome}`).join(", ")}); model.cacheDir is one path for all: use the same user on every host, or set HF_HOME alike`);

    const fabric = chooseFabric(hostList, facts, problems, warnings);

    const g0 = facts[0].gpus[0];
    const hostCaps = { capability: g0?.computeCap ?? GB10_CAPABILITY, driver: g0?.driver ?? "" };
    const image = chooseImage(opts, facts, hostList, problems, warnings, hostCaps);
    const knownImage: KnownImage | undefined = image ? lookupImage(image.value) : undefined;

    // The model: given, or the largest cached on every host that the catalog knows and the memory plan fits.
    const gpusPerHost = Math.max(1, facts[0].gpus.length);
    const cachedEverywhere = (id: string) => facts.every(f => f.models.some(m => m.id === id));
    let modelId: Sourced<string> | undefined;
    let catalogModel: CatalogModel | undefined;
    if (opts.model) {
        modelId = { value: opts.model, why: "--model" };
        catalogModel = findModel(opts.model);
        if (!catalogModel) warnings.push(`model ${opts.model} is not in the catalog (components/knowledge/catalog.ts): its memory is not planned; maxModelLen is left to vLLM`);
    } else {
        const fitting = facts[0].models.filter(m => cachedEverywhere(m.id)).flatMap(m => {
            const c = findModel(m.id);
            if (!c) return [];
            const { tp, pp } = parallelism(gpusPerHost, facts.length, c);
            return maxModelLenFor(hostList, gpusPerHost, tp.value, pp.value, c).fits ? [c] : [];
        }).sort((a, b) => b.weightBytes - a.weightBytes);
        catalogModel = fitting[0];
        if (catalogModel) modelId = { value: catalogModel.id, why: `the largest model cached on every host that fits (${(catalogModel.weightBytes / 1e9).toFixed(0)} GB of weights over ${facts.length * gpusPerHost} GPUs, memory plan)` };
        else problems.push(`no --model given and no model cached on every host is both in the catalog and fits ${facts.length} × ${gpusPerHost} GPU (cached: ${[...new Set(facts.flatMap(f => f.models.map(m => m.id)))].join(", ") || "none"}; the catalog knows ${CATALOG.map(c => c.id).join(", ")}); pass --model ORG/NAME`);
    }
    const kernel = knownImage && catalogModel ? quantizationKernelProblem(knownImage, catalogModel.quantization, catalogModel.id, hostCaps.capability) : undefined;
    if (kernel) warnings.push(`image ${image!.value}: ${kernel.message}`);
    const { tp, pp } = parallelism(gpusPerHost, facts.length, catalogModel);
    let maxModelLen: Sourced<number> | undefined;
    if (catalogModel) {
        const m = maxModelLenFor(hostList, gpusPerHost, tp.value, pp.value, catalogModel);
        if (!m.fits) problems.push(`model ${catalogModel.id} does not fit ${facts.length} × ${gpusPerHost} GPU: ${m.why}; pick a smaller model (--model) or add hosts`);
        maxModelLen = m.len;
    }
    let weights: Sourced<"present" | "download" | "head-then-copy"> = { value: "present", why: "cached on every host" };
    if (modelId && !cachedEverywhere(modelId.value)) {
        const onHead = facts[0].models.some(m => m.id === modelId!.value);
        weights = onHead && facts.length > 1
            ? { value: "head-then-copy", why: `cached on ${hostList[0]} only: the workers copy it from the head over the fabric` }
            : { value: "download", why: "not cached on every host: each host downloads it (hfToken for gated models)" };
        const need = catalogModel?.weightBytes;
        facts.forEach((f, i) => {
            if (need && f.diskFreeBytes !== null && f.diskFreeBytes < need && !f.models.some(m => m.id === modelId!.value))
                warnings.push(`${label(i)}: ${gib(f.diskFreeBytes)} free at ${f.hfHome}, but ${modelId!.value} needs about ${gib(need)}`);
        });
    }

    let backend: Sourced<"ray" | "mp"> | undefined;
    if (facts.length > 1 && image) {
        backend = knownImage?.ray?.present === false
            ? { value: "mp", why: "the image has no Ray (components/knowledge/images.ts): vLLM's own multi-node launch" }
            : knownImage?.ray?.present
                ? { value: "ray", why: "the image ships Ray (components/knowledge/images.ts)" }
                : { value: "ray", why: "the default for two or more hosts; the image's Ray is not known: use mp if it has none" };
    }

    secretLines.push(`pulumi config set --secret ${CONFIG_NAMESPACE}:hfToken hf_… -s ${opts.stack}   # only for a gated model or weights: download/head-then-copy`);
    if (opts.identity) secretLines.push(`cat ${opts.identity} | pulumi config set --secret ${CONFIG_NAMESPACE}:sshPrivateKey -s ${opts.stack}   # or leave it out: the ssh-agent is used`);

    if (problems.length || !fabric || !image || !modelId) return { problems, warnings, secretLines, summary };

    const hosts: HostChoice[] = facts.map((f, i) => {
        const pick = fabric.picks[i];
        const hca = fabric.hcas[i];
        const key = f.hostKey ? parseHostKey(f.hostKey) : undefined;
        if (key && "problem" in key) warnings.push(`${label(i)}: its host key is not usable for hosts[].ssh.hostKey (${key.problem}); left out`);
        return {
            name: names[i],
            ssh: results[i].target,
            ...(key && "key" in key ? { hostKey: { value: key.key, why: `/etc/ssh/ssh_host_ed25519_key.pub on the host, ${f.hostKeyFingerprint}` }, fingerprint: f.hostKeyFingerprint ?? undefined } : {}),
            fabric: {
                interface: { value: pick.netdev.name, why: `ConnectX-7 port with carrier${pick.netdev.speedMbps ? ` (${pick.netdev.speedMbps / 1000} Gb/s)` : ""}, MTU ${pick.netdev.mtu ?? "?"}, on ${fabric.subnet}, the subnet every host shares` },
                address: { value: pick.ipv4.address, why: `its IPv4 address on ${pick.netdev.name}${isLinkLocal(pick.ipv4.address) ? " (link-local)" : ""}` },
                hcas: { value: hca, why: hca.length ? "ACTIVE RoCE HCAs with a RoCE v2 IPv4 GID behind the host's cabled ports (as ibdev2netdev maps them)" : "no usable RoCE HCA: NCCL uses TCP sockets" },
            },
            gpus: { value: f.gpus.length, why: `nvidia-smi: ${f.gpus.length} × ${f.gpus[0].name}, compute ${f.gpus[0].computeCap}, driver ${f.gpus[0].driver}` },
            platform: { value: platforms[i], why: `uname -m: ${f.arch}` },
        };
    });
    const choices: StackChoices = {
        hosts,
        image,
        model: { id: modelId, cacheDir: { value: facts[0].hfHome!, why: "$HF_HOME (or ~/.cache/huggingface) of the SSH user, the same on every host" }, weights },
        vllm: {
            tensorParallelSize: tp,
            pipelineParallelSize: pp,
            ...(maxModelLen ? { maxModelLen } : {}),
            ...(backend ? { backend } : {}),
            ...(knownImage?.vllm ? { version: { value: knownImage.vllm, why: `the image's vLLM (components/knowledge/images.ts), for the policies' architecture check at preview` } } : {}),
        },
    };
    const text = renderStack(choices, opts);
    const parseProblems = checkStackText(text);
    if (parseProblems.length) return { problems: parseProblems.map(p => `the stack init would write does not parse: ${p}`), warnings, secretLines, summary, choices };
    return { problems: [], warnings, choices, yaml: text, secretLines, summary };
}

// ---------------------------------------------------------------- the file

const scalar = (v: unknown) => yaml.dump(v, { flowLevel: 0, lineWidth: -1 }).trim();

/** The stack file: the choices as YAML, a comment beside each saying where it came from. No secret is ever in it. */
export function renderStack(c: StackChoices, opts: InitOptions): string {
    const rows: Array<[string, string | undefined]> = [];
    const line = (text: string, why?: string) => rows.push([text, why]);
    line(`# Written by \`spark-vllm init --stack ${opts.stack}\`${opts.now ? ` on ${opts.now.toISOString().slice(0, 10)}` : ""} from what each host reported over SSH.`);
    line(`# Next: \`npx spark-vllm plan --stack ${opts.stack}\`, then \`pulumi up -s ${opts.stack}\` (docs/init.md).`);
    line("# Secrets are never written here: set them with the `pulumi config set --secret` lines init printed.");
    line("config:");
    line(`  ${CONFIG_NAMESPACE}:hosts:`, "the first host is the head");
    for (const h of c.hosts) {
        line(`    - name: ${scalar(h.name.value)}`, h.name.why);
        line("      ssh:");
        line(`        host: ${scalar(h.ssh.host)}`, "--host");
        line(`        user: ${scalar(h.ssh.user)}`, "--host (or your local user)");
        line(`        port: ${h.ssh.port}`);
        if (h.hostKey) line(`        hostKey: ${scalar(h.hostKey.value)}`, h.hostKey.why);
        line("      fabric:");
        line(`        interface: ${scalar(h.fabric.interface.value)}`, h.fabric.interface.why);
        line(`        address: ${scalar(h.fabric.address.value)}`, h.fabric.address.why);
        line(`        hcas: ${yaml.dump(h.fabric.hcas.value, { flowLevel: 0 }).trim()}`, h.fabric.hcas.why);
        line(`      gpus: ${h.gpus.value}`, h.gpus.why);
        line(`      platform: ${h.platform.value}`, h.platform.why);
    }
    line(`  ${CONFIG_NAMESPACE}:image: ${scalar(c.image.value)}`, c.image.why);
    line(`  ${CONFIG_NAMESPACE}:model:`);
    line(`    id: ${scalar(c.model.id.value)}`, c.model.id.why);
    line(`    cacheDir: ${scalar(c.model.cacheDir.value)}`, c.model.cacheDir.why);
    line(`    weights: ${c.model.weights.value}`, c.model.weights.why);
    line(`  ${CONFIG_NAMESPACE}:vllm:`);
    line(`    tensorParallelSize: ${c.vllm.tensorParallelSize.value}`, c.vllm.tensorParallelSize.why);
    line(`    pipelineParallelSize: ${c.vllm.pipelineParallelSize.value}`, c.vllm.pipelineParallelSize.why);
    if (c.vllm.maxModelLen) line(`    maxModelLen: ${c.vllm.maxModelLen.value}`, c.vllm.maxModelLen.why);
    if (c.vllm.backend) line(`    backend: ${c.vllm.backend.value}`, c.vllm.backend.why);
    if (c.vllm.version) line(`    version: ${scalar(c.vllm.version.value)}`, c.vllm.version.why);
    const width = Math.min(60, Math.max(...rows.filter(([, why]) => why).map(([t]) => t.length)) + 2);
    return rows.map(([t, why]) => (why ? `${t.padEnd(width)}  # ${why.replace(/\n/g, " ")}` : t)).join("\n") + "\n";
}

/** What the spec parser says of TEXT read as a stack file (as `spark-vllm plan` reads it); [] when it parses. */
export function checkStackText(text: string): string[] {
    const doc = yaml.load(text) as { config?: Record<string, unknown> };
    try {
        parseSpec(rawConfigFromStack(doc.config ?? {}, { plainText: v => !(typeof v === "object" && v !== null && "secure" in v) }));
        return [];
    } catch (err) {
        if (err instanceof SpecError) return err.problems;
        throw err;
    }
}

/** Everything init prints: what it read, the problems or the file's fate, the warnings, the secret lines. */
export function renderReport(r: InitResult): string {
    const out = ["read from the hosts:", ...r.summary.map(s => `  ${s}`)];
    if (r.warnings.length) out.push("", "warnings:", ...r.warnings.map(w => `  - ${w}`));
    if (r.problems.length) out.push("", "these hosts cannot form a cluster yet; nothing was written:", ...r.problems.map(p => `  - ${p}`));
    else if (r.secretLines.length) out.push("", "not written (secrets; set them if you need them):", ...r.secretLines.map(s => `  ${s}`));
    return out.join("\n") + "\n";
}
