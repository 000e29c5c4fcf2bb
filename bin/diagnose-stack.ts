// `spark-vllm diagnose --stack NAME [--json] [--dir DIR]`: every host's own logs (vLLM's, Ray's start, the driver's
// kernel lines), read over SSH from the stack file alone (no Pulumi CLI, no secrets), all hosts at once, and the
// cluster's root cause among them (components/plan/hostLogs.ts).
import { spawn } from "child_process";
import { contextAround } from "../components/knowledge/diagnosis";
import { ClusterPlan, HostPlan } from "../components/plan/clusterPlan";
import { HostLogs, clusterRootCause, hostLogsScript, parseHostLogs } from "../components/plan/hostLogs";
import { printable, sshArgv } from "../components/plan/status";
import { EXIT, stackCommand } from "./shared";

/** A host that answers nothing for this long is reported unreachable (as `spark-vllm status` does). */
const HOST_TIMEOUT_MS = 60_000;

function askHost(plan: ClusterPlan, host: HostPlan): Promise<HostLogs> {
    return new Promise(resolve => {
        const [cmd, ...args] = sshArgv(host);
        const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
        const out: Buffer[] = [];
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => out.push(d));
        child.stderr.on("data", d => { stderr += d; });
        const timer = setTimeout(() => { stderr += `\nno answer within ${HOST_TIMEOUT_MS / 1000} s`; child.kill("SIGKILL"); }, HOST_TIMEOUT_MS);
        child.on("error", err => { clearTimeout(timer); resolve(parseHostLogs(plan, host, null, "", `cannot run ${cmd}: ${err.message}`)); });
        child.on("close", code => { clearTimeout(timer); resolve(parseHostLogs(plan, host, code, Buffer.concat(out).toString("utf8"), stderr)); });
        child.stdin.on("error", () => { /* the host hung up before reading: close reports it */ });
        child.stdin.end(hostLogsScript(plan));
    });
}

export async function diagnoseStack(args: string[], usage: string): Promise<number> {
    const loaded = stackCommand("diagnose", usage, args);
    if (typeof loaded === "number") return loaded;
    const { json, plan } = loaded;
    const hosts = await Promise.all(plan.hosts.map(h => askHost(plan, h)));
    const root = clusterRootCause(hosts);
    // Every text from a host is printed through `printable` (issue 50: no control character reaches the terminal).
    if (json) {
        const bare = <T extends { text?: string; diagnosis?: { line: string } }>({ text: _text, ...s }: T) =>
            (s.diagnosis ? { ...s, diagnosis: { ...s.diagnosis, line: printable(s.diagnosis.line) } } : s);
        const host = (h: HostLogs) => ({ ...h, ...(h.error ? { error: printable(h.error) } : {}), sources: h.sources.map(bare) });
        console.log(JSON.stringify({ rootCause: root ? bare(root) : null, hosts: hosts.map(host) }, null, 2));
    } else {
        const out: string[] = [];
        if (root?.diagnosis) {
            out.push(
                `root cause: ${root.host}, ${root.source} (${root.where}): ${root.diagnosis.kind}`,
                `  ${root.diagnosis.line}`,
                ...(root.diagnosis.transport ? [`transport: ${root.diagnosis.transport} (what NCCL used)`] : []),
                `hint: ${root.diagnosis.hint}`,
                "context:",
                ...contextAround(root.text ?? "", root.diagnosis.line).map(l => (l.endsWith(root.diagnosis!.line) ? `> ${l}` : `  ${l}`)),
                "",
            );
        }
        out.push("every host's logs:");
        for (const h of hosts) {
            if (h.error) out.push(`  ${h.host}: not read: ${h.error}`);
            for (const s of h.sources)
                out.push(`  ${h.host} ${s.source}: ${s.state !== "read" ? s.state : s.diagnosis ? `${s.diagnosis.kind} (${s.tier}): ${s.diagnosis.line}` : "no known cause"}`);
        }
        console.log(out.map(printable).join("\n"));
    }
    if (!root) console.error(`no known root cause found in the logs of ${hosts.length} hosts; read the full logs`);
    return root ? EXIT.ok : EXIT.failure;
}
