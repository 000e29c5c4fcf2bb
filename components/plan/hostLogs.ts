// `spark-vllm diagnose --stack NAME`: every host's own logs, read over SSH, and the cluster's root cause chosen among
// them. A worker that dies first leaves its cause in its own log on its own host, while the head prints only the
// consequence (`A worker died or was killed while executing a task`, `EngineDeadError`; issue 47): one log is not
// enough. Pure: the script each host runs, its output parsed, the choice; bin/diagnose-command.ts does the SSH.
import { DIAGNOSIS_TIERS, DiagnosisTier, diagnoseTiered } from "../knowledge/diagnosis";
import { NcclDiagnosis, refineNcclDiagnosis } from "../knowledge/nccl";
import { ClusterPlan, HostPlan } from "./clusterPlan";
import { vllmFiles } from "./hostCommands";
import { script, shq } from "./scripts";

/** Each source's line in a host's output: `SPARK_VLLM_LOG NAME ok BASE64`, `… NAME missing` or `… NAME unreadable`. */
const LOG_LINE = "SPARK_VLLM_LOG ";

/** The end of each log that is read: a launch's failure is at its end, and a whole day's log stays on the host. */
export const LOG_TAIL_BYTES = 4 * 1024 * 1024;

/** Kernel log lines kept: the GPU driver's (`NVRM:`) and its Xid reports, the last this many since boot. */
export const KERNEL_LINES = 400;

/** One log a host holds, as `spark-vllm diagnose` names it. */
export interface LogSource {
    /** `vllm-serve.log`, `ray-start.log` or `kernel`. */
    name: string;
    /** Where it was read: a path on the host, or the command. */
    where: string;
}

/** The logs read on a host, in the order a tie between them is broken (vLLM's own first). */
export function logSources(plan: ClusterPlan): LogSource[] {
    const vllmLog = vllmFiles(plan.spec).log;
    const rayLog = `${plan.spec.logDir}/ray-start.log`;
    return [
        { name: "vllm-serve.log", where: vllmLog },
        { name: "ray-start.log", where: rayLog },
        // The preflight's order (components/hostProgram/spark_vllm/preflight.py): the journal's kernel messages since
        // boot, else the kernel ring buffer.
        { name: "kernel", where: "journalctl -k -b, else dmesg" },
    ];
}

/**
 * The script run by `sh -s` over SSH on one host, as the SSH user, reading only: the end of each log file, and the
 * driver's lines of the kernel log since boot. Each source is one line, its text base64 (GNU coreutils `base64 -w 0`:
 * no wrapping), so no log text can pass for another line.
 */
export function hostLogsScript(plan: ClusterPlan): string {
    const [vllm, ray] = logSources(plan);
    const file = (s: LogSource) =>
        `if [ -r ${shq(s.where)} ]; then echo "${LOG_LINE}${s.name} ok $(tail -c ${LOG_TAIL_BYTES} ${shq(s.where)} | base64 -w 0)"; ` +
        `elif [ -e ${shq(s.where)} ]; then echo "${LOG_LINE}${s.name} unreadable"; else echo "${LOG_LINE}${s.name} missing"; fi`;
    return script([
        file(vllm),
        file(ray),
        // journalctl answers 0 with no lines where the user may not read the journal (not in systemd-journal or adm):
        // then the ring buffer, which dmesg refuses where kernel.dmesg_restrict is set.
        `kernel=$(journalctl -k -b --no-pager -q 2>/dev/null); [ -n "$kernel" ] || kernel=$(dmesg 2>/dev/null) || kernel=`,
        `if [ -n "$kernel" ]; then echo "${LOG_LINE}kernel ok $(printf '%s\\n' "$kernel" | grep -E 'NVRM|Xid' | tail -n ${KERNEL_LINES} | base64 -w 0)"; ` +
            `else echo "${LOG_LINE}kernel unreadable"; fi`,
    ]);
}

/** What one log of one host says. */
export interface SourceFinding {
    source: string;
    where: string;
    state: "read" | "missing" | "unreadable";
    diagnosis?: NcclDiagnosis;
    tier?: DiagnosisTier;
    /** The log's text, kept for the context lines around the root cause. */
    text?: string;
}

/** One host's answer: each source, or why the host could not be asked. */
export interface HostLogs {
    host: string;
    sources: SourceFinding[];
    error?: string;
}

/** A host's output (the script above) diagnosed source by source; `error` when SSH or the script failed. */
export function parseHostLogs(plan: ClusterPlan, host: HostPlan, code: number | null, stdout: string, stderr: string): HostLogs {
    const sources = logSources(plan);
    const found = new Map<string, SourceFinding>();
    for (const line of stdout.split("\n")) {
        if (!line.startsWith(LOG_LINE)) continue;
        const [name, state, data = ""] = line.slice(LOG_LINE.length).split(" ");
        const source = sources.find(s => s.name === name);
        if (!source) continue;
        if (state !== "ok") {
            found.set(name, { source: name, where: source.where, state: state === "missing" ? "missing" : "unreadable" });
            continue;
        }
        const text = Buffer.from(data, "base64").toString("utf8");
        const tiered = diagnoseTiered(text);
        const diagnosis = refineNcclDiagnosis(tiered?.diagnosis, text);
        // A diagnosis only NCCL's lines gave (a socket fallback where nothing else matched) is a weak one.
        const tier = diagnosis ? (tiered && diagnosis.kind === tiered.diagnosis.kind ? tiered.tier : "weak") : undefined;
        found.set(name, { source: name, where: source.where, state: "read", ...(diagnosis ? { diagnosis, tier } : {}), text });
    }
    const error = code !== 0 || found.size === 0
        ? `${host.host.ssh.user}@${host.host.ssh.host}: ${code === null ? "no answer" : `exit ${code}`}${stderr.trim() ? `: ${stderr.trim().split("\n").slice(-3).join(" ")}` : ""}`
        : undefined;
    return { host: host.host.name, sources: sources.map(s => found.get(s.name)).filter((f): f is SourceFinding => f !== undefined), ...(error ? { error } : {}) };
}

/** The cluster's root cause: the strongest tier among every host's logs; a tie goes to the earlier host, then source. */
export function clusterRootCause(hosts: HostLogs[]): (SourceFinding & { host: string }) | undefined {
    let best: (SourceFinding & { host: string }) | undefined;
    const rank = (t?: DiagnosisTier) => (t ? DIAGNOSIS_TIERS.indexOf(t) : DIAGNOSIS_TIERS.length);
    for (const h of hosts)
        for (const s of h.sources)
            if (s.diagnosis && (!best || rank(s.tier) < rank(best.tier))) best = { ...s, host: h.host };
    return best;
}
