// One demo run: simulated Sparks up, the demo stack deployed through the test engine (the real program, every
// resource's operation performed for real), the endpoint used with curl, then everything torn down — also when
// interrupted. `--keep` leaves it up (kept.ts).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { Sim, simStatus, startSim } from "../../tests/sim/hosts";
import { simStack } from "../../tests/sim/stacks";
import { Report, Stack, destroy, up } from "../../tests/engine/engine";
import { Print, printEvents, renderError } from "./display";
import { FAULTS, Fault } from "./faults";
import type { DemoOptions } from "./options";
import { keepUp } from "./kept";
import { answerOf, chatCurl, exportLine, noKeyCurl, runShown } from "./talk";


/**
 * The stand-in's load and compile times for the demo (tests/sim/README.md, faults `load_seconds`, `compile_seconds`):
 * long enough that the endpoint probe prints its progress line (every 10 s, PROGRESS_EVERY in
 * components/hostProgram/spark_vllm/common.py) with vLLM's last progress from its log.
 */
const DEMO_PACE = { load_seconds: 6, compile_seconds: 8 };

class Interrupted extends Error {}

/** Ctrl-C and SIGTERM: the first stops what runs and tears down; a later one during destroy skips to stopping the sim. */
class Interrupts {
    private signalName?: NodeJS.Signals;
    private last = 0;
    readonly up = new AbortController();
    readonly destroy = new AbortController();
    destroying = false;
    private readonly handler = (sig: NodeJS.Signals) => this.on(sig);

    constructor(private readonly print: Print) {
        process.on("SIGINT", this.handler);
        process.on("SIGTERM", this.handler);
    }

    get signal(): NodeJS.Signals | undefined {
        return this.signalName;
    }

    private on(sig: NodeJS.Signals): void {
        // Ctrl-C signals the terminal's whole foreground process group, and `npm run` also forwards it to the script it
        // runs (@npmcli/run-script lib/signal-manager.js, npm 11): where the shell execs the script, one Ctrl-C comes twice.
        if (Date.now() - this.last < 2000) return;
        this.last = Date.now();
        if (!this.signalName) {
            this.signalName = sig;
            this.print(`\n${sig}: stopping; then destroying what exists and stopping the simulated hosts`);
            this.up.abort();
        } else if (this.destroying) {
            this.print(`${sig} again: skipping the rest of destroy; stopping the simulated hosts removes everything on them`);
            this.destroy.abort();
        } else this.print(`${sig} again: already tearing down, please wait`);
    }

    check(): void {
        if (this.signalName) throw new Interrupted();
    }

    dispose(): void {
        process.removeListener("SIGINT", this.handler);
        process.removeListener("SIGTERM", this.handler);
    }
}

function stackFor(sim: Sim, work: string, opts: DemoOptions, fault?: Fault): Stack {
    const vllm = opts.hosts === 4 ? { tensorParallelSize: 2, pipelineParallelSize: 2 } : {};
    return simStack(sim, work, "demo", { ...fault?.stack, hosts: opts.hosts, vllm: { ...vllm, ...fault?.stack.vllm } });
}

function resourceSummary(r: Report): string[] {
    const counts = new Map<string, number>();
    for (const o of r.ops) if (o.op !== "same" && !o.failed) counts.set(o.op, (counts.get(o.op) ?? 0) + 1);
    return ["Resources:", ...[...counts].map(([op, n]) => `    ${op === "delete" ? "-" : "+"} ${n} ${op}d`)];
}

/** What `sudo npm run demo` does; resolves with the exit code. */
export async function runDemo(opts: DemoOptions, print: Print): Promise<number> {
    const status = await simStatus();
    if (status.state || status.netns.length || status.bridge) {
        print(`simulated Sparks are already up on this machine (${status.netns.join(", ") || "bridge svbr0"}): an earlier ` +
            "`npm run demo -- --keep`, tests/sim/cli.ts, or an end-to-end test still running. Stop them first: sudo npm run demo -- --down");
        return 1;
    }
    const run: DemoRun = { opts, fault: opts.fault ? FAULTS[opts.fault] : undefined, print, interrupts: new Interrupts(print),
        work: fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-demo-")), faultSet: false, kept: false };
    let code: number;
    try {
        code = await deploy(run);
    } catch (e) {
        // A Ctrl-C also reaches the short-lived commands the sim's start-up runs (same process group): they fail.
        if (e instanceof Interrupted || run.interrupts.signal) code = run.interrupts.signal === "SIGTERM" ? 143 : 130;
        else {
            print(`demo failed: ${e instanceof Error ? e.message : String(e)}`);
            code = 1;
        }
    }
    if (!run.kept && !(await tearDown(run))) code = code || 1;
    run.interrupts.dispose();
    return code;
}

interface DemoRun {
    opts: DemoOptions;
    fault?: Fault;
    print: Print;
    interrupts: Interrupts;
    work: string;
    sim?: Sim;
    stack?: Stack;
    /** sim-faults.json was written on a host (the fault, or the demo's pace): undone before destroy. */
    faultSet: boolean;
    /** --keep and all went well: nothing is torn down. */
    kept: boolean;
}

async function deploy(run: DemoRun): Promise<number> {
    const { opts, fault, print, interrupts } = run;
    print(`spark-vllm demo: ${opts.hosts} simulated DGX Sparks on this machine — network namespaces, each with its own real sshd`);
    print("and dockerd, a local registry with a stand-in vLLM image — deployed by the real program, every resource's");
    print("operation performed for real over SSH and the Docker API. Nothing outside this machine is contacted, except on");
    print("the first run: the stand-in image is built from Debian packages (debootstrap, about a minute; cached in ~/.cache/spark-vllm/sim).");
    print();
    const sim = run.sim = await startSim({ hosts: opts.hosts, handleSignals: false, ownerPid: opts.keep ? 0 : process.pid, log: l => print(`  sim: ${l}`) });
    for (const h of sim.hosts) print(`  ${h.name}  ${h.address}  sshd pid ${h.pids.sshd}, dockerd pid ${h.pids.dockerd} (${h.storageDriver})`);
    interrupts.check();

    const stack = run.stack = stackFor(sim, run.work, opts, fault);
    const stackFile = path.join(run.work, "Pulumi.demo.yaml");
    fs.writeFileSync(stackFile, yaml.dump({ config: stack.config }, { lineWidth: 120, flowLevel: 3 }));
    print();
    print(`The stack (${stackFile}):`);
    fs.readFileSync(stackFile, "utf8").trimEnd().split("\n").forEach(l => print(`  ${l}`));
    print();
    run.faultSet = true;
    if (fault) {
        print(`Fault replayed: ${opts.fault}: ${fault.summary}`);
        await fault.setup(sim);
    } else {
        print(`The stand-in vLLM on ${sim.hosts[0].name} loads for ${DEMO_PACE.load_seconds} s and compiles for ${DEMO_PACE.compile_seconds} s ` +
            "(a real load of 119 GB takes minutes), so the endpoint probe's progress line shows.");
        await sim.setFaults(sim.hosts[0].name, DEMO_PACE);
    }
    interrupts.check();

    print();
    print("Updating (demo):");
    const r = await up(stack, { onEvent: printEvents(print), signal: interrupts.up.signal }).catch(e => {
        interrupts.check();
        throw e;
    });
    interrupts.check();
    print();
    if (r.error) {
        renderError(r.error).forEach(l => print(l));
        print();
        resourceSummary(r).forEach(l => print(l));
        if (!fault) return 1;
        const missed = fault.expect.filter(re => !re.test(r.error!));
        if (missed.length) {
            print(`the replay of ${opts.fault} did not print the expected diagnosis (${missed.map(String).join(", ")})`);
            return 1;
        }
        print();
        print(`That is the diagnosis \`pulumi up\` prints for ${opts.fault}. Cleaning up.`);
        return 0;
    }
    if (fault) {
        print(`up succeeded although ${opts.fault} was replayed: the replay is broken`);
        return 1;
    }
    const endpoint = String(r.outputs?.endpoint);
    const apiKey = String(r.outputs?.apiKey);
    const model = String(r.outputs?.modelName);
    print("Outputs:");
    print(`    endpoint : ${JSON.stringify(endpoint)}`);
    print(`    modelName: ${JSON.stringify(model)}`);
    print(`    apiKey   : [secret]`);
    print();
    resourceSummary(r).forEach(l => print(l));
    print(`Duration: ${Math.round(r.wallMs / 1000)}s`);
    print();
    const code = talk(endpoint, apiKey, model, print);
    interrupts.check();
    if (code === 0 && opts.keep) {
        keepUp(sim, stack, run.work, endpoint, apiKey, model, print);
        run.kept = true;
    }
    return code;
}

/** Undo the fault, destroy what the stack holds, stop the sim, remove the work dir; false if anything is left. */
async function tearDown(run: DemoRun): Promise<boolean> {
    const { sim, stack, print, interrupts } = run;
    if (sim && run.faultSet)
        await (run.fault ? run.fault.cleanup(sim) : sim.setFaults(sim.hosts[0].name, null)).catch(e => print(`undoing the fault: ${e}`));
    if (stack) {
        print();
        print("Destroying (demo):");
        interrupts.destroying = true;
        const d = await destroy(stack, { onEvent: printEvents(print), signal: interrupts.destroy.signal })
            .catch(e => ({ errors: [String(e instanceof Error ? e.message : e)] }));
        interrupts.destroying = false;
        d.errors.forEach(err => print(`  destroy: ${err.split("\n")[0]}`));
    }
    if (sim) {
        print("Stopping the simulated hosts ...");
        await sim.stop();
    }
    fs.rmSync(run.work, { recursive: true, force: true });
    const left = await simStatus();
    const remains = [...left.netns, ...(left.bridge ? ["bridge svbr0"] : []), ...left.mounts, ...(left.state ? ["the sim's state file"] : []),
        ...(fs.existsSync(run.work) ? [run.work] : [])];
    if (remains.length) {
        print(`left behind: ${remains.join(", ")}; remove with: sudo node --import tsx tests/sim/cli.ts down`);
        return false;
    }
    print("Clean: no simulated host, network namespace, bridge, daemon or temporary directory is left.");
    return true;
}

/** The two curl lines, shown and run; 0 when the completion is answered and the keyless request refused. */
function talk(endpoint: string, apiKey: string, model: string, print: Print): number {
    print("The endpoint and its API key (pulumi stack output endpoint; pulumi stack output apiKey --show-secrets):");
    print(`  $ ${exportLine(endpoint, apiKey)}`);
    print();
    print("A chat completion with the key:");
    const chat = chatCurl(model);
    print(`  $ ${chat}`);
    const c = runShown(chat, endpoint, apiKey);
    const { answer, problem } = answerOf(c.stdout);
    if (c.code !== 0 || problem) {
        print(`  curl exited ${c.code}: ${problem ?? ""} ${c.stderr.trim()}`);
        return 1;
    }
    print(`  answer: ${answer}`);
    print();
    print("The same endpoint without the key is refused:");
    const denied = noKeyCurl();
    print(`  $ ${denied}`);
    const d = runShown(denied, endpoint, apiKey);
    d.stdout.trimEnd().split("\n").forEach(l => print(`  ${l}`));
    if (!/^HTTP 401$/m.test(d.stdout)) {
        print(`  expected HTTP 401 without the key (curl exited ${d.code}: ${d.stderr.trim()})`);
        return 1;
    }
    return 0;
}
