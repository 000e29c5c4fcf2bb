// `spark-vllm status --stack NAME [--json] [--dir DIR]`: is the cluster serving, from the stack file and SSH alone
// (no Pulumi CLI, no secrets). One read-only script per host, all hosts at once.
import { spawn } from "child_process";
import { SpecError, parseSpec, show } from "../components/spec";
import { ClusterPlan, HostPlan, planCluster } from "../components/plan";
import { HostReport, clusterStatus, hostStatusScript, parseHostOutput, renderStatus, sshArgv } from "../components/status";
import { EXIT } from "./cli";
import { STACK_NAME, StackFileError, readStackFile } from "./plan-command";

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
    let stack: string | undefined;
    let json = false;
    let dir = process.cwd();
    for (let i = 0; i < args.length; i++) {
        const a = args[i];
        if ((a === "--stack" || a === "-s" || a === "--dir") && (args[i + 1] === undefined || args[i + 1].startsWith("-"))) {
            console.error(`spark-vllm status: ${a} needs a value\n${USAGE}`);
            return EXIT.usage;
        }
        if (a === "--stack" || a === "-s") stack = args[++i];
        else if (a === "--json") json = true;
        else if (a === "--dir") dir = args[++i];
        else if (a === "--help" || a === "-h") {
            console.log(USAGE);
            return EXIT.ok;
        } else {
            console.error(`spark-vllm status: unknown argument ${show(a)}\n${USAGE}`);
            return EXIT.usage;
        }
    }
    if (!stack || !STACK_NAME.test(stack)) {
        console.error(stack ? `spark-vllm status: ${show(stack)} is not a stack name (letters, digits, -, _ and .)\n${USAGE}` : USAGE);
        return EXIT.usage;
    }
    let plan: ClusterPlan;
    try {
        plan = planCluster(parseSpec(readStackFile(dir, stack)));
    } catch (err) {
        if (err instanceof SpecError) console.error(`Pulumi.${stack}.yaml: ${err.message}`);
        else if (err instanceof StackFileError) console.error(err.message);
        else throw err;
        return EXIT.config;
    }
    const reports = await Promise.all(plan.hosts.map(h => askHost(plan, h)));
    const status = clusterStatus(plan, stack, reports);
    process.stdout.write(json ? JSON.stringify(status, null, 2) + "\n" : renderStatus(status));
    return status.serving ? EXIT.ok : EXIT.notServing;
}
