// `spark-vllm top --stack NAME [--once] [--json] [--dir DIR]`: requests, tokens per second, latencies, KV cache, memory
// and the GPU, per replica and host, from the stack file and SSH alone (one read-only script per host, as `status`).
import { spawn } from "child_process";
import { ClusterPlan, HostPlan } from "../components/plan/clusterPlan";
import { sshArgv } from "../components/plan/status";
import { HostSample, hostTopScript, parseHostTop } from "../components/metrics/topScript";
import { keepRounds, renderTop, topFigures } from "../components/metrics/top";
import { EXIT, stackCommand } from "./shared";

const USAGE = "usage: spark-vllm top --stack NAME [--once] [--json] [--dir DIR]";
/** Seconds between two rounds of samples: the rates' window (and a live frame's refresh). */
const ROUND_SECONDS = 3;
/** A host that answers nothing for this long is reported unreachable in that round. */
const HOST_TIMEOUT_MS = 20_000;

function sampleHost(plan: ClusterPlan, host: HostPlan): Promise<HostSample> {
    return new Promise(resolve => {
        const [cmd, ...args] = sshArgv(host);
        const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "", stderr = "";
        child.stdout.on("data", d => { stdout += d; });
        child.stderr.on("data", d => { stderr += d; });
        const timer = setTimeout(() => { stderr += `\nno answer within ${HOST_TIMEOUT_MS / 1000} s`; child.kill("SIGKILL"); }, HOST_TIMEOUT_MS);
        child.on("error", err => { clearTimeout(timer); resolve(parseHostTop(host.host.name, null, "", `cannot run ${cmd}: ${err.message}`)); });
        child.on("close", code => { clearTimeout(timer); resolve(parseHostTop(host.host.name, code, stdout, stderr)); });
        child.stdin.on("error", () => { /* the host hung up before reading: close reports it */ });
        child.stdin.end(hostTopScript(plan, host));
    });
}

const sampleAll = (plan: ClusterPlan) => Promise.all(plan.hosts.map(h => sampleHost(plan, h)));
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

export async function topCommand(args: string[]): Promise<number> {
    const once = args.includes("--once");
    const loaded = stackCommand("top", USAGE, args.filter(a => a !== "--once"));
    if (typeof loaded === "number") return loaded;
    const { stack, json, plan } = loaded;
    const show = (rounds: HostSample[][]) => {
        const figures = topFigures(plan, stack, rounds);
        return json ? JSON.stringify(figures, null, 2) + "\n" : renderTop(figures);
    };
    let rounds = [await sampleAll(plan)];
    if (once) {
        await sleep(ROUND_SECONDS * 1000);
        rounds.push(await sampleAll(plan));
        process.stdout.write(show(rounds));
        return rounds[1].some(s => s.error !== undefined) ? EXIT.failure : EXIT.ok;
    }
    // Live: on a terminal each frame replaces the last (cursor home, clear screen: ECMA-48 CUP and ED).
    const live = process.stdout.isTTY && !json;
    for (;;) {
        await sleep(ROUND_SECONDS * 1000);
        rounds = keepRounds([...rounds, await sampleAll(plan)]);
        process.stdout.write((live ? "\x1b[H\x1b[2J" : "") + show(rounds));
    }
}
