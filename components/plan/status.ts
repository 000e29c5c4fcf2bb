// `spark-vllm status`: what one read-only script per host reports, and the cluster's verdict. Pure: the SSH
// calls are in bin/status-command.ts.
import { ClusterPlan, HostPlan } from "./clusterPlan";
import { toolsPath } from "./toolsProgram";
import { argvLine, dockerExec, script, shq } from "./scripts";
import { containerName, resourceNames } from "./naming";
import { dockerSshOpts } from "./connection";
import { RECORDS_DIR } from "./launches";
import { relaunchUrns, replaceCommand, toolsUrn } from "./relaunch";
import { helperDigest, verifiedTools } from "./verifiedRun";
import { REPLICAS_FILE, frontServers, proxyDir } from "./proxyPlan";

/**
 * A host's text as status may print it: every character a terminal could act on, written out instead. C0 controls
 * (ESC starts an escape sequence; a newline would forge a line of the report), DEL, C1 controls (U+009B is a CSI on
 * its own: ECMA-48 section 5.3), the line and paragraph separators and the bidirectional overrides and isolates
 * (Unicode UAX #9: they reorder what follows on the line). Everything from a host passes through it (parseHostOutput),
 * so the report, its JSON and its problems hold no such character (issue 50, finding 3).
 */
export function printable(text: string): string {
    return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, c => {
        const code = c.codePointAt(0)!;
        return c === "\n" ? "\\n" : c === "\t" ? "\\t" : c === "\r" ? "\\r" : code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
    });
}

/** Every string in VALUE (a host's report) made printable; numbers, booleans and null as they are. */
function printableAll<T>(value: T): T {
    if (typeof value === "string") return printable(value) as T;
    if (Array.isArray(value)) return value.map(printableAll) as T;
    if (value && typeof value === "object")
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [printable(k), printableAll(v)])) as T;
    return value;
}

/** The line the host script prints when the helper program in logDir is not the one this plan places. */
const REFUSED_LINE = "spark-vllm-helper-refused ";

// Issue 30: only the helper program the plan places is run (components/plan/verifiedRun.ts); re-exported for the tests.
export { VERIFIED_RUN, helperDigest, verifiedTools } from "./verifiedRun";

/** The first line the host script prints: the container's state (`docker inspect` .State.Status, or absent). */
const CONTAINER_LINE = "spark-vllm-container ";
/** The line with the launches the container's supervisor gave up on (the helper's given-up: a JSON list). */
const GIVEN_UP_LINE = "spark-vllm-given-up ";
/** The line with the facts the preflight gates on (the helper's host-facts, run on the host: a JSON object). */
const FACTS_LINE = "spark-vllm-host-facts ";
/**
 * Several replicas, the first host only: the front proxy's REPLICAS_FILE, `ok BASE64`, `missing`, or `unreadable WHY`.
 * Base64 keeps the file's bytes (newlines included) on one line.
 */
const FRONT_LINE = "spark-vllm-front-replicas ";

/** One `server` of the front's REPLICAS_FILE: replica k is the k-th (replicasFile, rollout.ts drains by position). */
export interface FrontServer {
    server: string;
    /** `down`: a rolling update's drain took it out (rollout.ts) and no undrain or proxy-conf has put it back. */
    down: boolean;
}

/** proxyPlan.ts replicasFile's line: `server HOST:PORT max_fails=1 fail_timeout=10s[ down];`. */
const SERVER_LINE = /^server ([^\s;]+) max_fails=1 fail_timeout=10s( down)?;$/;

/**
 * REPLICAS_FILE's servers, in order, or undefined for any text replicasFile does not write: every line (each ending
 * in a newline) one SERVER_LINE, at least one. A hand-edited file is not guessed at.
 */
export function parseReplicasFile(text: string): FrontServer[] | undefined {
    const lines = text.split("\n");
    if (lines.pop() !== "" || lines.length === 0) return undefined;
    const servers: FrontServer[] = [];
    for (const line of lines) {
        const m = SERVER_LINE.exec(line);
        if (!m) return undefined;
        servers.push({ server: m[1], down: m[2] !== undefined });
    }
    return servers;
}

/**
 * The front's REPLICAS_FILE as the first host's script found it: its servers, or why not. Read-only (`base64` of the
 * file, coreutils' base64(1): `-w 0` disables line wrapping); the file holds addresses only, no secret.
 */
export type FrontReplicas =
    | { state: "read"; servers: FrontServer[] }
    | { state: "missing" }
    | { state: "unreadable"; why: string }
    | { state: "unrecognized"; text: string };

/** The first host's extra script line with several replicas (hostStatusScript). */
function frontReplicasLine(plan: ClusterPlan): string {
    const file = shq(`${proxyDir(plan.spec)}/${REPLICAS_FILE}`);
    // `2>&1` before `<`: redirections apply left to right, so the shell's own "cannot open" is captured too.
    return `if [ ! -e ${file} ]; then echo "${FRONT_LINE}missing"; elif front=$(base64 -w 0 2>&1 < ${file}); then echo "${FRONT_LINE}ok $front"; ` +
        `else echo "${FRONT_LINE}unreadable $(echo "$front" | tr '\\n' ' ')"; fi`;
}

function parseFrontLine(text: string): FrontReplicas {
    const [word, ...rest] = text.trim().split(" ");
    if (word === "missing") return { state: "missing" };
    if (word === "ok") {
        const content = Buffer.from(rest.join(" "), "base64").toString("utf8");
        const servers = parseReplicasFile(content);
        return servers ? { state: "read", servers } : { state: "unrecognized", text: content.slice(0, 300) };
    }
    return { state: "unreadable", why: (word === "unreadable" ? rest.join(" ") : text).trim().slice(0, 300) };
}

/**
 * The script run by `sh -s` over SSH on one host: the container's state, the helper's host-status in it, and the
 * launches its supervisor gave up on. Those markers live in the container's own file system (RECORDS_DIR, not under
 * logDir), so the records directory is streamed out with `docker cp CONTAINER:DIR -`, a tar on stdout that Docker gives
 * for a stopped container too (https://docs.docker.com/reference/cli/docker/container/cp/), and read by the helper
 * on the host (the python3 the tools install already needs); nothing is written.
 */
export function hostStatusScript(plan: ClusterPlan, host: HostPlan): string {
    // Several replicas: a host is asked about its own replica (its head's Ray cluster, not the first replica's).
    const own = replicaPlanOf(plan, host.host.name);
    const spec = own.spec;
    const container = containerName(host.host.name);
    const args = {
        host: host.host.name,
        pidFile: own.vllmPidFile,
        log: own.vllmLog,
        // vLLM's own /health on the head's loopback (behind the proxy, which may speak TLS).
        ...(host.role === "head" ? { healthUrl: `http://127.0.0.1:${spec.vllm.internalPort}/health` } : {}),
        ...(own.backend === "ray" ? { ray: { address: `${own.head.host.fabric.address}:${spec.ray.port}`, node: host.host.fabric.address } } : {}),
    };
    // Issue 47: the preflight's gates, asked of the host itself (as the SSH user, whatever the container's state).
    const facts = { host: host.host.name, fabric: { address: host.host.fabric.address, hcas: host.host.fabric.hcas } };
    // Issue 30: only the helper program this plan places is run, as container root and as the SSH user (VERIFIED_RUN).
    const tools = toolsPath(spec);
    const digest = helperDigest(host.tools.content);
    return script([
        `state=$(docker inspect -f '{{.State.Status}}' ${shq(container)} 2>/dev/null) || state=absent`,
        `echo "${CONTAINER_LINE}$state"`,
        `if refused=$(${argvLine(verifiedTools(tools, digest, []))} 2>&1); then`,
        `  if [ "$state" = running ]; then ${dockerExec(container, verifiedTools(tools, digest, ["host-status", JSON.stringify(args)]))}; fi`,
        `  if [ "$state" != absent ]; then echo "${GIVEN_UP_LINE}$(docker cp ${shq(`${container}:${RECORDS_DIR}`)} - 2>/dev/null | ${argvLine(verifiedTools(tools, digest, ["given-up", "{}"]))})"; fi`,
        // Its JSON, or the last words of its failure (parseFacts tells them apart).
        `  echo "${FACTS_LINE}$(${argvLine(verifiedTools(tools, digest, ["host-facts", JSON.stringify(facts)]))} 2>&1 | tail -n 1)"`,
        `else`,
        `  echo "${REFUSED_LINE}$(echo "$refused" | tr '\\n' ' ')"`,
        `fi`,
        // Several replicas: the front's upstream servers (replica k out while a rolling update relaunches it).
        ...(plan.replicas && host.host.name === plan.hosts[0].host.name ? [frontReplicasLine(plan)] : []),
    ]) + "\n";
}

/** A launch the container's supervisor stopped relaunching (supervise.py give_up, its `<name>.failed` marker). */
export interface GivenUp {
    /** The launch record's name (LaunchRecord.name). */
    name: string;
    /** Deaths in a row after a relaunch (supervise.py MAX_FAILURES). */
    failures: number | null;
    /** The root cause the supervisor found in the log, or null when none is known. */
    diagnosis: { kind: string; line: string; hint: string } | null;
    log: string | null;
    /** When the supervisor wrote the marker (UTC, to the second). */
    markedAt: string;
    /** Set when the memory guard stopped it (supervise.py Supervisor.guard): the figures it read. */
    guard?: { memAvailableBytes: number; floorBytes: number; at: number };
    /** Set by clusterStatus: the URNs whose `pulumi up --replace` relaunches it, which clears the marker (relaunchUrns). */
    replace?: string[];
}

/** One kind of driver line in the kernel log since boot (status.py kernel_log_summary). */
export interface KernelLogKind {
    count: number;
    /**
     * One of its lines: the last since boot (`which` "last"), or, past the lines the preflight's reader keeps
     * (preflight.py KERNEL_LOG_SHOWN), the first ("first"). Absent when the count is 0.
     */
    line?: string;
    which?: "last" | "first";
}

/**
 * What the preflight gates on, as the host's helper read it with the preflight's own readers (status.py host_facts),
 * and what the preflight would refuse (`problems`) or warn about (`warnings`) in it, in the preflight's words.
 */
export interface HostFacts {
    /** `uname -r`, and /proc/meminfo's CmaTotal and CmaFree in bytes (null: no such line, a kernel without CMA). */
    kernel: { release: string; cmaTotalBytes: number | null; cmaFreeBytes: number | null };
    /** The loaded driver's version (its module's, else nvidia-smi's), or why it could not be read. */
    driver: { version: string; source: string } | { version: null; why: string };
    /** NVRM NV_ERR_NO_MEMORY and Xid lines since boot (journalctl -k -b, else dmesg), unless neither may be read. */
    kernelLog: { readable: false } | { readable: true; nvrmNoMemory: KernelLogKind; xid: KernelLogKind };
    /** The host's spark-vllm:hosts[].fabric.address. */
    fabricAddress: string;
    /** Per spark-vllm:hosts[].fabric.hcas entry: the index of the RoCE v2 GID carrying fabricAddress (null: none). */
    hcas: Array<{ name: string; exists: boolean; active: boolean; fabricGidIndex: number | null; roceV2Ipv4: Array<{ index: number; address: string }> }>;
    problems: string[];
    warnings: string[];
}

export interface HostReport {
    host: string;
    role: HostPlan["role"];
    /** Set when SSH itself failed: its last words. */
    unreachable?: string;
    container?: string;
    vllm?: { state: string; pid: number | null; uptimeSeconds?: number | null; servedModel?: string | null;
        diagnosis?: { kind: string; line: string; hint: string } };
    health?: number | null;
    /** Ray backend: whether the head's GCS lists this host's node alive (null: it could not be asked, see rayError). */
    raylet?: boolean | null;
    rayError?: string;
    /**
     * MemAvailable and MemTotal; with vLLM running, also CUDA's free figure, the one vLLM calls free (freeGiB, by its
     * version's rule) and a warning below 4 GiB (components/hostProgram/spark_vllm/memory.py LOW_AFTER_LOAD_GIB).
     */
    memory?: { availableGiB: number | null; totalGiB: number | null; cudaFreeGiB?: number; freeGiB?: number; freeSource?: string; warning?: string };
    /** The launches whose marker names the record in place now (an older launch's marker does not count). */
    givenUp?: GivenUp[];
    /** Set when the helper program in logDir is not the one the plan places: why nothing was run there. */
    helperRefused?: string;
    /** Several replicas, the first host only: the front proxy's REPLICAS_FILE (absent when its script printed no line). */
    frontReplicas?: FrontReplicas;
    /** The facts the preflight gates on (absent when the helper was not run: SSH failed, or it was refused). */
    facts?: HostFacts;
    /** Set instead of facts when the helper's host-facts printed no report: its last words. */
    factsError?: string;
}

/** One host's report from its script's output (exit status and stderr for when SSH or the script failed). */
export function parseHostOutput(host: HostPlan, code: number | null, stdout: string, stderr: string): HostReport {
    const base = { host: host.host.name, role: host.role };
    const lines = stdout.split("\n");
    const state = lines.find(l => l.startsWith(CONTAINER_LINE))?.slice(CONTAINER_LINE.length).trim();
    if (state === undefined) {
        const said = stderr.trim().split("\n").filter(Boolean).pop() ?? `exit ${code}`;
        return { ...base, unreachable: printable(said.slice(0, 300)) };
    }
    const json = lines.filter(l => l.startsWith("{")).pop();
    let inner: Partial<HostReport> = {};
    try {
        // The front's file comes from its own line only (FRONT_LINE), never from the helper's JSON.
        if (json) {
            inner = JSON.parse(json);
            delete inner.frontReplicas;
        }
    } catch {
        // a truncated line: report the container alone
    }
    const givenUp = parseGivenUp(lines.find(l => l.startsWith(GIVEN_UP_LINE))?.slice(GIVEN_UP_LINE.length));
    const refused = lines.find(l => l.startsWith(REFUSED_LINE))?.slice(REFUSED_LINE.length).trim();
    const front = lines.find(l => l.startsWith(FRONT_LINE))?.slice(FRONT_LINE.length);
    const facts = lines.find(l => l.startsWith(FACTS_LINE))?.slice(FACTS_LINE.length);
    // The facts come from their own line only, never from host-status's JSON.
    delete inner.facts;
    delete inner.factsError;
    // Every text from the host made printable (printable); the host's name and role are the plan's.
    return { ...printableAll({ ...base, container: state, ...inner, ...(givenUp ? { givenUp } : {}),
        ...(refused !== undefined ? { helperRefused: refused.slice(0, 600) } : {}),
        ...(facts !== undefined ? parseFacts(facts) : {}),
        ...(front !== undefined ? { frontReplicas: parseFrontLine(front) } : {}) }), host: host.host.name, role: host.role };
}

/** The host-facts line: its report, or the helper's last words when it printed none. */
function parseFacts(text: string): Pick<HostReport, "facts" | "factsError"> {
    try {
        const facts = JSON.parse(text);
        if (facts && typeof facts === "object" && facts.kernel && Array.isArray(facts.problems)) return { facts };
    } catch {
        // not JSON: the failure's last line
    }
    return { factsError: text.trim().slice(0, 300) || "no output" };
}

function parseGivenUp(text: string | undefined): GivenUp[] | undefined {
    try {
        const list = text ? JSON.parse(text) : undefined;
        return Array.isArray(list) ? list : undefined;
    } catch {
        return undefined;
    }
}

/** One replica's part of the verdict (spark-vllm:replicas above 1 only). */
export interface ReplicaStatus {
    /** 1-based, as its resource names (`<cluster>-replica.<k>-<role>`, naming.ts) and `spark-vllm plan` count them. */
    replica: number;
    hosts: string[];
    head: string;
    serving: boolean;
    /**
     * Whether the front proxy sends it requests: `down` in the front's REPLICAS_FILE (a rolling update's drain that no
     * undrain followed) counts as not serving; unknown when the file could not be read (ClusterStatus.front says why).
     */
    front: "in service" | "down" | "unknown";
    /** Its hosts' problems, and its being down in the front, each also in ClusterStatus.problems. */
    problems: string[];
}

/** Several replicas: the front proxy's REPLICAS_FILE on the first host, as read (`not asked`: that host did not answer). */
export interface FrontStatus {
    host: string;
    /** HOST:PATH of REPLICAS_FILE. */
    config: string;
    state: FrontReplicas["state"] | "not asked";
    /** What is wrong with the file itself (not a replica's being down), each also in ClusterStatus.problems. */
    problems: string[];
}

export interface ClusterStatus {
    stack: string;
    serving: boolean;
    endpoint: string;
    model: string;
    hosts: HostReport[];
    /**
     * What is wrong, one line per problem, each naming the host and what to run. A host fact the preflight refuses
     * (HostFacts.problems) is one too, after its host's others, but does not by itself make `serving` false: the
     * endpoint may still answer.
     */
    problems: string[];
    /** Several replicas only: each one's verdict, in order (the first is the front's, on hosts[0]). */
    replicas?: ReplicaStatus[];
    /** Several replicas only: the front proxy's list of replicas. */
    front?: FrontStatus;
}

/** The plan of the replica HOST serves in: the whole plan with one replica. */
function replicaPlanOf(plan: ClusterPlan, host: string): ClusterPlan {
    return plan.replicas?.find(r => r.hosts.some(h => h.host.name === host)) ?? plan;
}

/**
 * A replica serves when every host of it is reachable with its container running (and its Ray node, or its headless
 * vLLM), its head's vLLM running with /health answering 200, and no launch that the supervisor gave up on. The
 * endpoint serves while one replica does and the front's host (hosts[0], where the proxy that balances across the
 * replicas runs) answers: the front skips a replica that fails (proxyPlan.ts, `max_fails`). PROJECT: Pulumi.yaml's name.
 */
export function clusterStatus(plan: ClusterPlan, stack: string, reports: HostReport[], project = "spark-vllm"): ClusterStatus {
    const ssh = (r: HostReport) => {
        const s = plan.hosts.find(h => h.host.name === r.host)!.host.ssh;
        return `ssh -p ${s.port} ${s.user}@${s.host}`;
    };
    // What relaunches a launch (components/plan/relaunch.ts): a plain `up` cannot, the command provider never reads one back.
    const owner = { project, stack };
    const up = replaceCommand(owner, []);
    // Several replicas: a host's launches belong to its replica (its head, its hosts' memory gates, its names).
    const groups = plan.replicas ?? [plan];
    const groupOf = (host: string) => groups.findIndex(g => g.hosts.some(h => h.host.name === host));
    const headOf = (host: string) => (groups[groupOf(host)] ?? plan).head.host.name;
    const urns = (host: string, launch: string) => {
        const k = groupOf(host);
        const g = groups[k] ?? plan;
        return relaunchUrns(owner, g.hosts.map(h => h.host.name), host, g.head.host.name === host, launch, plan.replicas ? k + 1 : undefined);
    };
    const hosts = reports.map(r => r.givenUp ? { ...r, givenUp: r.givenUp.map(g => ({ ...g, replace: urns(r.host, g.name) })) } : r);
    const relaunch = (host: string, launch: "vllm" | "ray") => replaceCommand(owner, urns(host, launch)!);
    // Only a new launch clears a marker (launches.ts writeRecord removes `<name>.failed` before it writes the record; a
    // re-run that changes nothing runs no command, and keepIfSame never keeps a launch that has one): replace it.
    const stoppedBy = (g: GivenUp) => (g.guard
        ? `the memory guard stopped ${g.name} (${g.markedAt})`
        : `the supervisor stopped relaunching ${g.name} after ${g.failures ?? "repeated"} failures in a row (${g.markedAt})`);
    const givenUp = (r: HostReport, g: GivenUp) => `${r.host}: ${stoppedBy(g)}` +
        (g.diagnosis ? `: ${g.diagnosis.kind}: ${g.diagnosis.line}\n    ${g.diagnosis.hint}` : "; no known cause in its log") +
        `\n    log: ${r.host}:${g.log ?? plan.vllmLog}` +
        `\n    fix the cause, then run \`${g.replace ? replaceCommand(owner, g.replace) : `${up} --replace <the URN of the launch of ${g.name}>`}\`: the new launch clears the marker (a plain \`${up}\` changes nothing)`;
    const problemsOf = (r: HostReport): string[] => {
        const found: string[] = [];
        const own = replicaPlanOf(plan, r.host);
        const gaveUp = new Set((r.givenUp ?? []).map(g => g.name));
        if (r.unreachable !== undefined) {
            found.push(`${r.host}: SSH failed (${r.unreachable}); check that the host is up and that \`${ssh(r)}\` works with your agent's key`);
            return found;
        }
        if (r.helperRefused !== undefined) {
            // A plain `up` does not install it again: the tools command's inputs did not change.
            found.push(`${r.host}: nothing was asked of the host's helper program: ${r.helperRefused}` +
                `\n    to install it again (and pin it in the container): run \`${replaceCommand(owner, [toolsUrn(owner, r.host)])}\``);
            return found;
        }
        if (r.container !== "running") {
            // A plain `up` never reads the hosts; a refresh reads each container (docs/operations.md, `pulumi up --refresh`,
            // tests/e2e/refresh.test.ts): a stopped one is started in place, a missing one created again.
            found.push(`${r.host}: container ${containerName(r.host)} is ${r.container}; run \`${up} --refresh\` to ` +
                (r.container === "absent" ? "create it again and relaunch the cluster" : "start it: its supervisor relaunches what it ran") +
                ` (a plain \`${up}\` does not look at the hosts)`);
            found.push(...(r.givenUp ?? []).map(g => givenUp(r, g)));
            return found;
        }
        found.push(...(r.givenUp ?? []).map(g => givenUp(r, g)));
        if (own.backend === "ray" && r.raylet !== true && !gaveUp.has("ray"))
            // Not in the cluster: its own Ray launch; not asked (the head's GCS did not answer): the head's, which every
            // worker's Ray launch follows (replacedBy). Either is followed by the Ray probe, the memory gates, vLLM.
            found.push(r.raylet === false
                ? `${r.host}: its Ray node is not in the cluster; run \`${relaunch(r.host, "ray")}\` to relaunch Ray and vLLM`
                : `${r.host}: the Ray cluster cannot be asked (${r.rayError ?? "no answer"}); run \`${relaunch(headOf(r.host), "ray")}\` to relaunch Ray and vLLM`);
        const runsVllm = r.role === "head" || own.backend === "mp";
        if (runsVllm && r.vllm?.state !== "running") {
            if (gaveUp.has("vllm")) return found;
            const d = r.vllm?.diagnosis;
            found.push(`${r.host}: vLLM is not running (${r.vllm?.state ?? "unknown"})` +
                (d ? `: ${d.kind}: ${d.line}\n    ${d.hint}` : `; read ${r.host}:${own.vllmLog}`) +
                // supervise.py tick_one: only a proven launch (it had served) is relaunched; failed tries back off (5 s doubling).
                `\n    the supervisor relaunches a vLLM that had served (backing off while it keeps dying); to relaunch it now (or after a failed \`up\`), run \`${relaunch(r.host, "vllm")}\``);
        } else if (r.role === "head" && r.health !== 200) {
            found.push(`${r.host}: vLLM runs but /health answers ${r.health ?? "nothing"} (still loading, or hung); read ${r.host}:${own.vllmLog}`);
        }
        return found;
    };
    const problemsByHost = new Map(hosts.map(r => [r.host, problemsOf(r)]));
    // The preflight's refusals of what the host shows now, in its words (HostFacts.problems): said, not counted against serving.
    const factProblems = (names: string[]) => hosts.filter(r => names.includes(r.host)).flatMap(r => r.facts?.problems ?? []);
    const problems = hosts.flatMap(r => [...problemsByHost.get(r.host)!, ...factProblems([r.host])]);
    const verdict = (serving: boolean) => ({ stack, serving, endpoint: plan.endpoint, model: plan.modelName, hosts, problems });
    if (!plan.replicas) return verdict(hosts.every(r => problemsByHost.get(r.host)!.length === 0));
    const frontHost = plan.hosts[0].host.name;
    const front = hosts.find(r => r.host === frontHost);
    const frontStatus = frontOf(plan, front, owner);
    const servers = frontStatus.state === "read" && front?.frontReplicas?.state === "read" ? front.frontReplicas.servers : undefined;
    const drained: string[] = [];
    const replicas: ReplicaStatus[] = plan.replicas.map((g, k) => {
        const names = g.hosts.map(h => h.host.name);
        const its = hosts.filter(r => names.includes(r.host)).flatMap(r => problemsByHost.get(r.host)!);
        const inFront = servers === undefined ? "unknown" : servers[k].down ? "down" : "in service";
        if (inFront === "down") {
            drained.push(drainedProblem(plan, g, k + 1, servers![k].server, its.length > 0, up));
            its.push(drained[drained.length - 1]);
        }
        return { replica: k + 1, hosts: names, head: g.head.host.name, serving: its.length === 0, front: inFront, problems: [...its, ...factProblems(names)] };
    });
    // After the hosts' problems: the file's own, then each replica's being down in the front.
    problems.push(...frontStatus.problems, ...drained);
    return { ...verdict(front?.unreachable === undefined && replicas.some(r => r.serving)), replicas, front: frontStatus };
}

/**
 * The front's REPLICAS_FILE as FRONT (the first host's report) found it. Read: it must list one server per replica
 * (replica k the k-th, as replicasFile writes and a drain marks them); anything else is a problem, and no replica's
 * place in the front is then claimed.
 */
function frontOf(plan: ClusterPlan, front: HostReport | undefined, owner: { project: string; stack: string }): FrontStatus {
    const host = plan.hosts[0].host.name;
    const config = `${host}:${proxyDir(plan.spec)}/${REPLICAS_FILE}`;
    if (!front || front.unreachable !== undefined) return { host, config, state: "not asked", problems: [] };
    const got: FrontReplicas = front.frontReplicas ?? { state: "unreadable", why: "the host's script printed nothing about it" };
    const count = plan.replicas!.length;
    // proxy-conf writes it (every replica in service) on create and on a change of its inputs only; its replacement also
    // restarts the front proxy (proxyPlan.ts proxyConfig). Its URN: tests/unit/fixtures/stack-urns.json.
    const rewrite = `to write it again with every replica in service (this restarts the front proxy), run \`${replaceCommand(owner, [
        `urn:pulumi:${owner.stack}::${owner.project}::spark-vllm:index:SparkCluster$spark-vllm:index:EndpointProxy$command:remote:Command::${resourceNames().of("proxy-conf")}`])}\``;
    const unknown = "status cannot tell which replicas the front proxy sends requests to";
    // A file that lists another count of servers is as foreign as one that is not replicasFile's at all.
    const problem = (what: string, fix = true): FrontStatus => ({ host, config, state: got.state === "read" ? "unrecognized" : got.state,
        problems: [`${host}: ${what}; ${unknown}` + (fix ? `\n    ${rewrite}` : "")] });
    switch (got.state) {
        case "missing": return problem(`the front proxy configuration is missing: ${config} does not exist`);
        case "unreadable": return problem(`the front proxy configuration ${config} could not be read (${printable(got.why)})`, false);
        case "unrecognized": return problem(`the front proxy configuration ${config} is not what spark-vllm writes ("${printable(got.text)}")`);
        case "read": {
            if (got.servers.length !== count) return problem(`the front proxy configuration ${config} lists ${got.servers.length} servers for ${count} replicas`);
            // Every server must be the plan's replica at its place: another address would get requests with the API key
            // (issue 50, finding 2: a `server 127.0.0.1:9999` put there took 3 of 4 keyed requests).
            const planned = frontServers(plan.spec, plan.replicas!.map(r => r.head.host));
            const wrong = got.servers.map((s, k) => [k, s.server] as const).filter(([k, server]) => server !== planned[k]);
            if (wrong.length > 0) return problem(`the front proxy configuration ${config} names ${wrong.map(([k, server]) =>
                `"${printable(server)}" as replica ${k + 1}, which the plan has at ${planned[k]}`).join(", and ")}: the front sends requests, with the API key, to a server that is not the plan's replica`);
            return { host, config, state: "read", problems: [] };
        }
    }
}

/**
 * Replica K is `down` in the front's REPLICAS_FILE: a rolling update's drain took it out and its undrain has not run
 * (the relaunch between them failed, or the up stopped). What puts it back (components/plan/resources.ts): its undrain
 * follows its endpoint probe, its hosts' free-memory checks (`loaded`) and its serving proof, and is replaced with its
 * drain; a failed create leaves no state (docs/troubleshooting.md#after-a-failure), so the next `up` runs the failed
 * step again, what follows it, and the undrain. With a problem on its hosts (vLLM dead: a plain up would re-run only a
 * failed probe), the relaunch that problem names is followed by the same undrain (it replaces the probe).
 */
function drainedProblem(plan: ClusterPlan, g: ClusterPlan, k: number, server: string, others: boolean, up: string): string {
    const n = resourceNames(undefined, k);
    const checks = ["its endpoint probe", "its hosts' free-memory checks", ...(g.servingProof ? ["its serving proof"] : [])];
    const after = `${checks.slice(0, -1).join(", ")} and ${checks[checks.length - 1]}`;
    return `${plan.hosts[0].host.name}: replica ${k} (${printable(server)}) is down in the front proxy (${REPLICAS_FILE}): a rolling update took it out and did not put it back, so the endpoint sends it nothing` +
        `\n    ${others ? "fix the problems above first: the `pulumi up` that then relaunches it runs" : `fix what failed, then run \`${up}\` again: it runs the step that failed and what follows it, ending with`}` +
        ` ${n.of("undrain")}, which puts replica ${k} back once ${after} pass (the roll resumes from there)`;
}

const duration = (s: number | null | undefined) =>
    s === null || s === undefined ? "?" : s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min` : `${s} s`;

export function renderStatus(s: ClusterStatus): string {
    const gaveUp = s.hosts.flatMap(r => (r.givenUp ?? []).map(g => `${g.name} on ${r.host}`));
    const out = [`stack ${s.stack}: ${s.serving ? "serving" : "NOT serving"} ${s.model} at ${s.endpoint}` +
        (s.replicas ? `: ${replicasLine(s, s.replicas)}` : "") +
        (gaveUp.length ? `; the supervisor gave up relaunching ${gaveUp.join(", ")}` : "")];
    // Low memory with vLLM running, then what the preflight would warn about (HostFacts.warnings).
    const low = s.hosts.flatMap(r => [...(r.memory?.warning ? [r.memory.warning] : []), ...(r.facts?.warnings ?? [])]);
    if (!s.replicas) {
        out.push(...s.hosts.flatMap(r => [hostLine(r, "  "), ...factsLines(r, "    ")]));
        if (s.problems.length || low.length) out.push("", ...s.problems.map(p => `- ${p}`), ...low.map(w => `- warning: ${w}`));
        return out.join("\n") + "\n";
    }
    for (const g of s.replicas) {
        out.push(`  replica ${g.replica} (head ${g.head}): ${g.serving ? "serving" : "NOT serving"}${g.front === "down" ? " (down in the front proxy)" : ""}`);
        out.push(...s.hosts.filter(r => g.hosts.includes(r.host)).flatMap(r => [hostLine(r, "    "), ...factsLines(r, "      ")]));
    }
    // Each replica's problems under its name: what to run names that replica's own resources.
    for (const g of s.replicas.filter(g => g.problems.length))
        out.push("", `replica ${g.replica} (${g.hosts.join(", ")}):`, ...g.problems.map(p => `- ${p}`));
    if (s.front?.problems.length) out.push("", `front proxy (${s.front.host}):`, ...s.front.problems.map(p => `- ${p}`));
    if (low.length) out.push("", ...low.map(w => `- warning: ${w}`));
    return out.join("\n") + "\n";
}

/** How many replicas serve, which do not, and whether the front's host answered (its proxy is the endpoint). */
function replicasLine(s: ClusterStatus, replicas: ReplicaStatus[]): string {
    const down = replicas.filter(g => !g.serving).map(g => g.replica);
    const front = replicas[0].head;
    return (s.hosts.find(r => r.host === front)?.unreachable !== undefined ? `the front proxy's host ${front} does not answer SSH; ` : "") +
        `${replicas.length - down.length} of ${replicas.length} replicas serving` +
        (down.length ? ` (down: replica${down.length > 1 ? "s" : ""} ${down.join(", ")})` : "");
}

function hostLine(r: HostReport, indent: string): string {
    if (r.unreachable !== undefined) return `${indent}${r.host} (${r.role}): unreachable`;
    const parts = [`container ${r.container}`];
    if (r.raylet !== undefined) parts.push(`Ray node ${r.raylet ? "joined" : r.raylet === false ? "absent" : "unknown"}`);
    if (r.vllm) parts.push(r.vllm.state === "running"
        ? `vLLM pid ${r.vllm.pid} up ${duration(r.vllm.uptimeSeconds)}${r.vllm.servedModel ? ` serving ${r.vllm.servedModel}` : ""}`
        : `vLLM ${r.vllm.state}`);
    if (r.health !== undefined) parts.push(`/health ${r.health ?? "no answer"}`);
    if (r.memory?.availableGiB != null) parts.push(`${r.memory.availableGiB} of ${r.memory.totalGiB} GiB free` +
        (r.memory.cudaFreeGiB != null ? ` (CUDA free ${r.memory.cudaFreeGiB} GiB)` : ""));
    for (const g of r.givenUp ?? []) parts.push(g.guard
        ? `memory guard stopped ${g.name} (MemAvailable ${(g.guard.memAvailableBytes / 2 ** 30).toFixed(1)} GiB < ${(g.guard.floorBytes / 2 ** 30).toFixed(1)} GiB)`
        : `supervisor gave up on ${g.name} (${g.failures ?? "?"} failures${g.diagnosis ? `, ${g.diagnosis.kind}` : ""})`);
    return `${indent}${r.host} (${r.role}): ${parts.join(", ")}`;
}

const kB = (bytes: number | null) => (bytes === null ? "?" : `${Math.floor(bytes / 1024)} kB`);
const LOG_KINDS = [["nvrmNoMemory", "NVRM out-of-memory"], ["xid", "Xid"]] as const;

/** Under a host's line: the facts the preflight gates on, then the kernel log lines it counted (one of each kind). */
function factsLines(r: HostReport, indent: string): string[] {
    if (r.factsError !== undefined) return [`${indent}host facts not read: ${r.factsError}`];
    const f = r.facts;
    if (!f) return [];
    const { cmaTotalBytes: total, cmaFreeBytes: free } = f.kernel;
    const parts = [`kernel ${f.kernel.release}` + (total === null && free === null ? " (no CMA lines)" : ` (CmaTotal ${kB(total)}, CmaFree ${kB(free)})`),
        f.driver.version !== null ? `driver ${f.driver.version}` : `driver unknown (${f.driver.why})`];
    const log = f.kernelLog;
    parts.push(log.readable ? `since boot ${LOG_KINDS.map(([k, name]) => `${log[k].count} ${name}`).join(" and ")} lines` : "kernel log unreadable");
    if (f.hcas.length) parts.push(`RoCE v2 GID index for ${f.fabricAddress}: ` + f.hcas.map(h =>
        !h.exists ? `${h.name} not found`
            : (h.fabricGidIndex !== null ? `${h.name} ${h.fabricGidIndex}` : `${h.name} none` + (h.roceV2Ipv4.length ? ` (it has ${h.roceV2Ipv4.map(g => `${g.index} = ${g.address}`).join(", ")})` : "")) +
            (h.active ? "" : " (not ACTIVE)")).join(", "));
    const lines = [`${indent}${parts.join(", ")}`];
    if (log.readable) for (const [k, name] of LOG_KINDS) if (log[k].line) lines.push(`${indent}  ${log[k].which} ${name} line: ${log[k].line}`);
    return lines;
}

/**
 * The OpenSSH client argv that runs the host script (read from stdin by `sh -s`): the Docker provider's options
 * (batch mode, never prompting; with `ssh.hostKey`, that key only), your agent's or config's key.
 */
export function sshArgv(host: HostPlan): string[] {
    const s = host.host.ssh;
    return ["ssh", ...dockerSshOpts(host.host), "-p", String(s.port), `${s.user}@${s.host}`, "sh -s"];
}
