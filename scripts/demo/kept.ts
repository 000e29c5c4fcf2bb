// `--keep` leaves the demo's cluster up and records the stack; `--down` destroys it and stops the simulated hosts.
import * as fs from "node:fs";
import * as path from "node:path";
import { Sim, simStatus, stopSim } from "../../tests/sim/hosts";
import { Stack, destroy } from "../../tests/engine/engine";
import { Print, printEvents } from "./display";
import { chatCurl, exportLine } from "./talk";

/** Where `--keep` records the kept stack for `--down` (root-only, like the sim's own state in /run). */
export const KEPT_FILE = "/run/spark-vllm-demo.json";
const REPO = path.resolve(__dirname, "..", "..");
/** The transport variables a kept stack needs again (not the whole environment of the user who ran the demo). */
const TRANSPORT_VARS = ["PATH", "SSH_AUTH_SOCK", "SPARK_VLLM_SIM_SSH_CONFIG", "SPARK_VLLM_SIM_SSH_KEY", "SPARK_VLLM_SIM_KNOWN_HOSTS"];

/** Records the kept stack and prints how to talk to the cluster and how to stop it. */
export function keepUp(sim: Sim, stack: Stack, work: string, endpoint: string, apiKey: string, model: string, print: Print): void {
    const env = Object.fromEntries(TRANSPORT_VARS.filter(k => stack.transport.env[k] !== undefined).map(k => [k, stack.transport.env[k]]));
    fs.writeFileSync(KEPT_FILE, JSON.stringify({ work, stack: { ...stack, transport: { ...stack.transport, env } } }, null, 1), { mode: 0o600 });
    const clientBin = String(sim.env.PATH).split(":")[0];
    print();
    print("The cluster stays up (--keep). From this machine:");
    print(`  $ ${exportLine(endpoint, apiKey)}`);
    print(`  $ ${chatCurl(model)}`);
    print("Its hosts, over the sim's SSH (root, key in the sim's agent):");
    print(`  $ export PATH=${clientBin}:$PATH SSH_AUTH_SOCK=${sim.sshAuthSock}`);
    print(`  $ ssh ${sim.hosts[0].address} docker ps; ssh ${sim.hosts[0].address} tail /var/tmp/spark-vllm/vllm-serve.log`);
    print("Stop it (destroys the stack, then stops the simulated hosts):");
    print("  $ sudo npm run demo -- --down");
    print(`or stop only the hosts (everything on them goes with them): sudo node --import tsx ${path.relative(process.cwd(), path.join(REPO, "tests/sim/cli.ts")) || "tests/sim/cli.ts"} down`);
}

/** `--down`: destroy the kept stack, stop the simulated hosts, remove the demo's files. */
export async function downDemo(print: Print): Promise<number> {
    let code = 0;
    if (fs.existsSync(KEPT_FILE)) {
        const kept: { work: string; stack: Stack } = JSON.parse(fs.readFileSync(KEPT_FILE, "utf8"));
        const stack = { ...kept.stack, transport: { ...kept.stack.transport, env: { ...process.env, ...kept.stack.transport.env } } };
        print("Destroying (demo):");
        const d = await destroy(stack, { onEvent: printEvents(print) }).catch(e => ({ errors: [String(e instanceof Error ? e.message : e)] }));
        d.errors.forEach(err => print(`  destroy: ${err.split("\n")[0]}`));
        if (d.errors.length) code = 1;
        fs.rmSync(kept.work, { recursive: true, force: true });
        fs.rmSync(KEPT_FILE, { force: true });
    } else print("no kept demo stack recorded; stopping whatever simulated hosts are up");
    print("Stopping the simulated hosts ...");
    await stopSim(l => print(`  sim: ${l}`));
    const left = await simStatus();
    if (left.netns.length || left.bridge || left.state) {
        print(`left behind: ${[...left.netns, left.bridge ? "bridge svbr0" : ""].filter(Boolean).join(", ")}`);
        return 1;
    }
    print("Clean: no simulated host, network namespace, bridge or daemon is left.");
    return code;
}
