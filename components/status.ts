// `spark-vllm status`: what one read-only script per host reports, and the cluster's verdict. Pure: the SSH
// calls are in bin/status-command.ts.
import { ClusterPlan, HostPlan, toolsPath } from "./plan";
import { dockerExec, script, shq } from "./scripts";
import { containerName } from "./naming";
import { dockerSshOpts } from "./connection";

/** The first line the host script prints: the container's state (`docker inspect` .State.Status, or absent). */
const CONTAINER_LINE = "spark-vllm-container ";

/** The script run by `sh -s` over SSH on one host: the container's state, then the helper's host-status in it. */
export function hostStatusScript(plan: ClusterPlan, host: HostPlan): string {
    const spec = plan.spec;
    const container = containerName(host.host.name);
    const args = {
        host: host.host.name,
        pidFile: plan.vllmPidFile,
        log: plan.vllmLog,
        // vLLM's own /health on the head's loopback (behind the proxy, which may speak TLS).
        ...(host.role === "head" ? { healthUrl: `http://127.0.0.1:${spec.vllm.internalPort}/health` } : {}),
        ...(plan.backend === "ray" ? { ray: { address: `${spec.hosts[0].fabric.address}:${spec.ray.port}`, node: host.host.fabric.address } } : {}),
    };
    return script([
        `state=$(docker inspect -f '{{.State.Status}}' ${shq(container)} 2>/dev/null) || state=absent`,
        `echo "${CONTAINER_LINE}$state"`,
        `if [ "$state" = running ]; then ${dockerExec(container, ["python3", toolsPath(spec), "host-status", JSON.stringify(args)])}; fi`,
    ]) + "\n";
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
    memory?: { availableGiB: number | null; totalGiB: number | null };
}

/** One host's report from its script's output (exit status and stderr for when SSH or the script failed). */
export function parseHostOutput(host: HostPlan, code: number | null, stdout: string, stderr: string): HostReport {
    const base = { host: host.host.name, role: host.role };
    const lines = stdout.split("\n");
    const state = lines.find(l => l.startsWith(CONTAINER_LINE))?.slice(CONTAINER_LINE.length).trim();
    if (state === undefined) {
        const said = stderr.trim().split("\n").filter(Boolean).pop() ?? `exit ${code}`;
        return { ...base, unreachable: said.slice(0, 300) };
    }
    const json = lines.filter(l => l.startsWith("{")).pop();
    let inner: Partial<HostReport> = {};
    try {
        if (json) inner = JSON.parse(json);
    } catch {
        // a truncated line: report the container alone
    }
    return { ...base, container: state, ...inner, host: host.host.name, role: host.role };
}

export interface ClusterStatus {
    stack: string;
    serving: boolean;
    endpoint: string;
    model: string;
    hosts: HostReport[];
    /** What is wrong, one line per problem, each naming the host and what to run. */
    problems: string[];
}

/** Serving: every host reachable with its container running (and its Ray node, or its headless vLLM), and the head's vLLM running with /health answering 200. */
export function clusterStatus(plan: ClusterPlan, stack: string, reports: HostReport[]): ClusterStatus {
    const ssh = (r: HostReport) => {
        const s = plan.hosts.find(h => h.host.name === r.host)!.host.ssh;
        return `ssh -p ${s.port} ${s.user}@${s.host}`;
    };
    const up = `pulumi up -s ${stack}`;
    const problems: string[] = [];
    for (const r of reports) {
        if (r.unreachable !== undefined) {
            problems.push(`${r.host}: SSH failed (${r.unreachable}); check that the host is up and that \`${ssh(r)}\` works with your agent's key`);
            continue;
        }
        if (r.container !== "running") {
            problems.push(`${r.host}: container ${containerName(r.host)} is ${r.container}; run \`${up}\` to start it and relaunch the cluster`);
            continue;
        }
        if (plan.backend === "ray" && r.raylet !== true)
            problems.push(`${r.host}: ${r.raylet === false ? "its Ray node is not in the cluster" : `the Ray cluster cannot be asked (${r.rayError ?? "no answer"})`}; run \`${up}\` to relaunch Ray and vLLM`);
        const runsVllm = r.role === "head" || plan.backend === "mp";
        if (runsVllm && r.vllm?.state !== "running") {
            const d = r.vllm?.diagnosis;
            problems.push(`${r.host}: vLLM is not running (${r.vllm?.state ?? "unknown"})` +
                (d ? `: ${d.kind}: ${d.line}\n    ${d.hint}` : `; read ${r.host}:${plan.vllmLog}`) + `\n    then run \`${up}\``);
        } else if (r.role === "head" && r.health !== 200) {
            problems.push(`${r.host}: vLLM runs but /health answers ${r.health ?? "nothing"} (still loading, or hung); read ${r.host}:${plan.vllmLog}`);
        }
    }
    return { stack, serving: problems.length === 0, endpoint: plan.endpoint, model: plan.modelName, hosts: reports, problems };
}

const duration = (s: number | null | undefined) =>
    s === null || s === undefined ? "?" : s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min` : `${s} s`;

export function renderStatus(s: ClusterStatus): string {
    const out = [`stack ${s.stack}: ${s.serving ? "serving" : "NOT serving"} ${s.model} at ${s.endpoint}`];
    for (const r of s.hosts) {
        if (r.unreachable !== undefined) { out.push(`  ${r.host} (${r.role}): unreachable`); continue; }
        const parts = [`container ${r.container}`];
        if (r.raylet !== undefined) parts.push(`Ray node ${r.raylet ? "joined" : r.raylet === false ? "absent" : "unknown"}`);
        if (r.vllm) parts.push(r.vllm.state === "running"
            ? `vLLM pid ${r.vllm.pid} up ${duration(r.vllm.uptimeSeconds)}${r.vllm.servedModel ? ` serving ${r.vllm.servedModel}` : ""}`
            : `vLLM ${r.vllm.state}`);
        if (r.health !== undefined) parts.push(`/health ${r.health ?? "no answer"}`);
        if (r.memory?.availableGiB != null) parts.push(`${r.memory.availableGiB} of ${r.memory.totalGiB} GiB free`);
        out.push(`  ${r.host} (${r.role}): ${parts.join(", ")}`);
    }
    if (s.problems.length) out.push("", ...s.problems.map(p => `- ${p}`));
    return out.join("\n") + "\n";
}

/**
 * The OpenSSH client argv that runs the host script (read from stdin by `sh -s`): the Docker provider's options
 * (batch mode, never prompting; with `ssh.hostKey`, that key only), your agent's or config's key.
 */
export function sshArgv(host: HostPlan): string[] {
    const s = host.host.ssh;
    return ["ssh", ...dockerSshOpts(host.host), "-p", String(s.port), `${s.user}@${s.host}`, "sh -s"];
}
