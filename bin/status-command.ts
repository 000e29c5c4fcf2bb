// `spark-vllm status --stack NAME [--json] [--dir DIR]`: is the cluster serving, from the stack file and SSH alone
// (no Pulumi CLI, no secrets). One read-only script per host, all hosts at once.
import { spawn } from "child_process";
import { ClusterPlan, HostPlan } from "../components/plan/clusterPlan";
import { HostReport, clusterStatus, hostStatusScript, parseHostOutput, renderStatus, sshArgv } from "../components/plan/status";
import { EXIT, stackCommand, stackOwner } from "./shared";

const USAGE = "usage: spark-vllm status --stack NAME [--json] [--dir DIR]";
/** A host that answers nothing for this long is reported unreachable. */
const HOST_TIMEOUT_MS = 60_000;

function askHost(plan: ClusterPlan, host: HostPlan): Promise<HostReport> {
    return new Promise(resolve => {
        const [cmd, ...args] = sshArgv(host);
        const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "", stderr = "";
        child.stdout.on("data", d => { stdout += d; });
        child.stderr.on("data", d => { stderr += d; });
        const timer = setTimeout(() => { stderr += `\nno answer within ${HOST_TIMEOUT_MS / 1000} s`; child.kill("SIGKILL"); }, HOST_TIMEOUT_MS);
        child.on("error", err => { clearTimeout(timer); resolve(parseHostOutput(host, null, "", `cannot run ${cmd}: ${err.message}`)); });
        child.on("close", code => { clearTimeout(timer); resolve(parseHostOutput(host, code, stdout, stderr)); });
        child.stdin.on("error", () => { /* the host hung up before reading: close reports it */ });
        child.stdin.end(hostStatusScript(plan, host));
    });
}

export async function statusCommand(args: string[]): Promise<number> {
    const loaded = stackCommand("status", USAGE, args);
    if (typeof loaded === "number") return loaded;
    const { stack, dir, json, plan } = loaded;
    const reports = await Promise.all(plan.hosts.map(h => askHost(plan, h)));
    const status = clusterStatus(plan, stack, reports, stackOwner(dir, stack).project);
    process.stdout.write(json ? JSON.stringify(status, null, 2) + "\n" : renderStatus(status));
    return status.serving ? EXIT.ok : EXIT.notServing;
}
