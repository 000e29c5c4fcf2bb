// `spark-vllm top`: the read-only script run on each host over SSH, and what it printed, parsed. Pure: the SSH calls
// are in bin/top-command.ts (with components/plan/status.ts's sshArgv, as `spark-vllm status`).
import { ClusterPlan, HostPlan } from "../plan/clusterPlan";
import { containerName } from "../plan/naming";
import { API_KEY_FILE } from "../plan/launches";
import { argvLine, script } from "../plan/scripts";
import { printable } from "../plan/status";
import { parseExposition } from "./exposition";
import { VllmSnapshot, vllmSnapshot } from "./vllmMetrics";

const CLOCK_LINE = "spark-vllm-top-clock ";
const MEMORY_LINE = "spark-vllm-top-meminfo ";
const GPU_LINE = "spark-vllm-top-gpu ";
const METRICS_LINE = "spark-vllm-top-metrics ";

/**
 * Fetches vLLM's /metrics on the container's loopback and writes the body on stdout; run as `python3 -c` in the head's
 * container (the interpreter the helper program runs with there, components/plan/verifiedRun.ts). vLLM's own port asks
 * the key on every path but /health (the key guard it loads, components/hostProgram/spark_vllm/keyguard.py), so the key
 * is read from the file the launch wrote it to (components/plan/launches.ts API_KEY_FILE, 0600, container root): it is
 * never on a command line, never leaves the host, and is not in the stack file.
 */
export const FETCH_METRICS_PY = [
    "import sys, urllib.request",
    "with open(sys.argv[2]) as f: key = f.readline().rstrip('\\n')",
    "req = urllib.request.Request('http://127.0.0.1:%s/metrics' % sys.argv[1], headers={'Authorization': 'Bearer ' + key})",
    "sys.stdout.write(urllib.request.urlopen(req, timeout=10).read().decode('utf-8', 'replace'))",
].join("\n");

/** nvidia-smi's query for the GPU's figures (on a Spark its memory figures are [N/A]: unified memory). */
export const GPU_QUERY = ["nvidia-smi", "--query-gpu=utilization.gpu,temperature.gpu", "--format=csv,noheader,nounits"];

/** The plan of the replica HOST belongs to (the plan itself without replicas). */
export function replicaOf(plan: ClusterPlan, host: string): ClusterPlan {
    return plan.replicas?.find(r => r.hosts.some(h => h.host.name === host)) ?? plan;
}

/**
 * The script `sh -s` runs on one host: the host's clock, MemTotal/MemAvailable/Cached from /proc/meminfo, nvidia-smi's
 * utilisation and temperature, and on a replica's head its vLLM's /metrics (base64, one line). Nothing is written.
 */
export function hostTopScript(plan: ClusterPlan, host: HostPlan): string {
    const own = replicaOf(plan, host.host.name);
    const lines = [
        `echo "${CLOCK_LINE}$(date +%s.%N)"`,
        `echo "${MEMORY_LINE}$(grep -E '^(MemTotal|MemAvailable|Cached):' /proc/meminfo | tr -s ' \\n' '  ')"`,
        `echo "${GPU_LINE}$(${argvLine(GPU_QUERY)} 2>&1 | head -n 1)"`,
    ];
    if (own.head.host.name === host.host.name) {
        const fetch = argvLine(["docker", "exec", containerName(host.host.name), "python3", "-c", FETCH_METRICS_PY,
            String(own.spec.vllm.internalPort), API_KEY_FILE]);
        lines.push(`if m=$(${fetch} 2>&1); then echo "${METRICS_LINE}ok $(printf '%s' "$m" | base64 -w 0)"; ` +
            `else echo "${METRICS_LINE}error $(printf '%s' "$m" | tail -n 2 | tr '\\n' ' ')"; fi`);
    }
    return script(lines) + "\n";
}

/** What one host's script reported at one instant. */
export interface HostSample {
    host: string;
    /** The host's clock when its script ran (seconds since the epoch), or null when it printed none. */
    at: number | null;
    /** Set when SSH or the script failed: its last words. */
    error?: string;
    memory?: { totalBytes: number; availableBytes: number; pageCacheBytes: number } | { error: string };
    gpu?: { utilizationPercent: number | null; temperatureC: number | null } | { error: string };
    /** A replica's head only: its vLLM's figures, or why not. */
    vllm?: VllmSnapshot | { error: string };
}

function parseMemory(text: string): HostSample["memory"] {
    const kB = (key: string) => {
        const m = new RegExp(`${key}: (\\d+) kB`).exec(text);
        return m ? Number(m[1]) * 1024 : undefined;
    };
    const [totalBytes, availableBytes, pageCacheBytes] = [kB("MemTotal"), kB("MemAvailable"), kB("Cached")];
    if (totalBytes === undefined || availableBytes === undefined || pageCacheBytes === undefined)
        return { error: `/proc/meminfo lacks MemTotal, MemAvailable or Cached: "${printable(text.slice(0, 200))}"` };
    return { totalBytes, availableBytes, pageCacheBytes };
}

/** `U, T` as nvidia-smi's csv,noheader,nounits writes it; `[N/A]` (or `[Not Supported]`) is null. */
function parseGpu(text: string): HostSample["gpu"] {
    const fields = text.trim().split(",").map(f => f.trim());
    const figure = (f: string) => (/^\d+(\.\d+)?$/.test(f) ? Number(f) : /^\[.*\]$/.test(f) ? null : undefined);
    const [utilizationPercent, temperatureC] = fields.map(figure);
    if (fields.length !== 2 || utilizationPercent === undefined || temperatureC === undefined)
        return { error: `nvidia-smi: ${printable(text.trim().slice(0, 200)) || "no answer"}` };
    return { utilizationPercent, temperatureC };
}

function parseMetrics(text: string): HostSample["vllm"] {
    const [word, ...rest] = text.trim().split(" ");
    if (word !== "ok") return { error: `vLLM's /metrics could not be read: ${printable(rest.join(" ").trim().slice(0, 300)) || "no answer"}` };
    const { samples } = parseExposition(Buffer.from(rest.join(""), "base64").toString("utf8"));
    if (!samples.length) return { error: "vLLM's /metrics answered no samples" };
    return vllmSnapshot(samples);
}

/** One host's sample from its script's output (exit status and stderr for when SSH or the script failed). */
export function parseHostTop(host: string, code: number | null, stdout: string, stderr: string): HostSample {
    const line = (prefix: string) => stdout.split("\n").find(l => l.startsWith(prefix))?.slice(prefix.length);
    const clock = line(CLOCK_LINE);
    const at = clock !== undefined && /^\d+(\.\d+)?$/.test(clock.trim()) ? Number(clock.trim()) : null;
    if (code !== 0 || at === null) {
        const words = (stderr.trim().split("\n").pop() ?? "").trim() || `exit status ${code}`;
        return { host, at, error: printable(words.slice(0, 300)) };
    }
    const sample: HostSample = { host, at };
    const memory = line(MEMORY_LINE), gpu = line(GPU_LINE), metrics = line(METRICS_LINE);
    if (memory !== undefined) sample.memory = parseMemory(memory);
    if (gpu !== undefined) sample.gpu = parseGpu(gpu);
    if (metrics !== undefined) sample.vllm = parseMetrics(metrics);
    return sample;
}
