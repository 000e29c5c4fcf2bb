// `npm run bench`: how fast spark-vllm does its job, on simulated Sparks and under mocks (issue 8).
//
//   npm run bench                 full run → bench/results.json + bench/results.md (~12 min, root)
//   npm run bench -- --quick      one run each, 2 hosts, small load time → a temp dir (CI: proves it works)
//   BENCH_QUICK=1 npm run bench   the same
//   --out DIR                     write results.json / results.md to DIR instead
//   --only diagnose               only the diagnosis bench (bench/diagnose.ts): no root, no sim, seconds
//   --only evaluate [--hosts 64,256] [--runs N] [--modes js,ts-node,floor,floor-containers]  only program evaluation as `pulumi preview`
//                                 runs it, through @pulumi/pulumi's cmd/run and a test gRPC engine (issue 17), and the SDK
//                                 floor of the same resources (bench/floor.ts): no root, no sim
//   --only cli                    only the CLI cold start (plan/diff/diagnose; builds dist/ first): no root, no sim
//   --only recovery [--runs N]    only recovery without `up` (bench/recovery.ts): root, one sim per run, minutes each
//
// Every figure is the median of several runs with min and max; results.json also holds each run.
// Between scenarios the stack is destroyed, the hosts are checked for leftovers and faults are
// cleared; the sim is always stopped. Only one sim may run on a machine: the bench waits for a
// running one to go away and never stops somebody else's.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Sim, simStatus, startSim } from "../tests/sim/hosts";
import { SimStackOptions, leftovers as simLeftovers, simStack as sharedSimStack } from "../tests/sim/stacks";
import { Report, Stack, destroy as engineDestroy, up as engineUp } from "../tests/engine/engine";
import { CriticalPath, Row, criticalPath, fingerprint, fmt, machine, markdown, round, source, summarize, work } from "./lib";
import { EVAL_MODES, EvalMode, Evaluation, compileProgram, evaluateOnce } from "./evaluate";
import { diagnoseBench } from "./diagnose";
import { CLI_COMMANDS, CliMode, CliRun, buildDist, cliOnce } from "./cli";
import { recoveryBench } from "./recovery";
import { resourceNames } from "../components/plan/naming";
import { diffPlans } from "../bin/diff-command";
import { planCluster } from "../components/plan/plan";
import { parseSpec } from "../components/spec/parseSpec";
import { rawConfigFromStack } from "../components/spec/stackConfig";
import { loadDuring } from "../tests/e2e/endpointLoad";
import { DEFAULT_MODELS, QWEN3_30B_A3B } from "../tests/sim/hosts";

/** Two one-host replicas need a model one Spark holds (tests/e2e/replicas.test.ts). */
const REPLICA_MODEL = { id: QWEN3_30B_A3B.id, servedName: "qwen3-30b", cacheDir: "/root/.cache/huggingface", weights: "present" };

const N = resourceNames();
/** The plan `spark-vllm diff` compares, from a stack's config. */
const planOf = (config: Record<string, unknown>) => planCluster(parseSpec(rawConfigFromStack(structuredClone(config))));
/** Commands that start a process: the Ray head, a Ray worker, vLLM. */
const isLaunch = (name: string) => name === N.of("ray-head") || name === N.of("vllm-launch") || name.endsWith("-ray");

const argv = process.argv.slice(2);
const QUICK = argv.includes("--quick") || ["1", "true", "yes"].includes(String(process.env.BENCH_QUICK ?? "").toLowerCase());
const outArg = argv.indexOf("--out");
const onlyArg = argv.indexOf("--only");
const ONLY = onlyArg >= 0 ? argv[onlyArg + 1] : undefined;
const hostsArg = argv.indexOf("--hosts");
/** --hosts 64,256: the host counts of the evaluation bench. */
const HOSTS = hostsArg >= 0 ? argv[hostsArg + 1].split(",").map(x => {
    const n = Number(x);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--hosts ${argv[hostsArg + 1]}: a comma-separated list of host counts, e.g. 64,256`);
    return n;
}) : undefined;

const P = QUICK
    ? { upRuns: 1, hostCounts: [2], loadSeconds: 2, crashRuns: 1, hangRuns: 1, compatRuns: 1, imageRuns: 1, imageReplicas: false, evalRuns: 1, evalHosts: [2, 8] }
    : { upRuns: 3, hostCounts: [2, 4], loadSeconds: 5, crashRuns: 5, hangRuns: 5, compatRuns: 3, imageRuns: 3, imageReplicas: true, evalRuns: 3, evalHosts: [2, 8, 64] };
if (HOSTS) P.evalHosts = HOSTS;
const runsArg = argv.indexOf("--runs");
/** --runs N: evaluations per host count (default 3; 1 with --quick). */
if (runsArg >= 0) {
    P.evalRuns = Number(argv[runsArg + 1]);
    if (!Number.isInteger(P.evalRuns) || P.evalRuns < 1) throw new Error(`--runs ${argv[runsArg + 1]}: a positive whole number`);
}
/** Cold starts per CLI command and mode. */
const CLI_RUNS = QUICK ? 1 : 5;
/** Crash scenario: the stand-in loads for 30 s and dies 6 s after `vllm serve` started (the probe is polling by then). */
const CRASH = { load_seconds: 30, crash_after_seconds: 6 };
/** Hang scenario: NCCL never completes; the endpoint probe gives up after this many seconds (the minimum allowed). */
const HANG_TIMEOUT = 5;
/** Probes poll every second, as in the end-to-end suite (the default is 2). */
const PROBES = { intervalSeconds: 1, rayTimeoutSeconds: 30, endpointTimeoutSeconds: 120 };
const FLAG = "--enable-prefix-caching";

const t0 = Date.now();
const log = (s: string) => process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${s}\n`);
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const secs = (ms: number) => round(ms / 1000);

let sim: Sim;
let work_: string;

// ---------------------------------------------------------------- the program must not change under the bench

const ROOT = path.join(__dirname, "..");
const measured = source(ROOT);

/** Stops the bench if the program or the test bed changed since it started (someone editing the checkout). */
function unchanged(after: string): void {
    const now = fingerprint(ROOT);
    if (now !== measured.fingerprint)
        throw new Error(`the program or the test bed changed during the bench (after ${after}): the results would mix two programs. ` +
            "Run it on a checkout nobody edits (e.g. a `git clone --shared` of this one), or again when the edits are done.");
}
const up = async (stack: Stack) => { const r = await engineUp(stack); unchanged(`up of ${stack.name}`); return r; };
const destroy = async (stack: Stack) => { const r = await engineDestroy(stack); unchanged(`destroy of ${stack.name}`); return r; };

// ---------------------------------------------------------------- the sim and stacks

function alive(pid: number): boolean {
    try {
        process.kill(pid, 0);
        return true;
    } catch {
        return false;
    }
}

/** Waits until no other sim is up (somebody's tests, or `tests/sim/cli.ts up`), then starts ours. */
async function startOwnSim(hosts: number): Promise<Sim> {
    const deadline = Date.now() + 30 * 60_000;
    for (;;) {
        const s = await simStatus();
        const owner = s.state?.ownerPid;
        // A sim whose owner process is gone is a crashed run's leftover: startSim replaces it.
        const leftover = s.state !== undefined && !!owner && !alive(owner);
        if (leftover || (s.netns.length === 0 && !s.bridge && !s.state)) break;
        if (Date.now() > deadline) throw new Error(`another sim is still up after 30 min (netns ${s.netns.join(" ")}, owner ${owner}); not touching it`);
        log(`another sim is up (netns ${s.netns.join(" ") || "-"}, owner pid ${owner ?? "?"}); waiting for it to go away`);
        await sleep(15_000);
    }
    // Not force: if somebody started a sim since the check, startSim refuses instead of stopping theirs.
    return startSim({ hosts, models: [...DEFAULT_MODELS, QWEN3_30B_A3B] });
}

const simStack = (name: string, n: number, opts: SimStackOptions = {}): Stack =>
    sharedSimStack(sim, work_, name, { ...opts, hosts: n, probes: { ...PROBES, ...(opts.probes ?? {}) } });
const leftovers = () => simLeftovers(sim);

/** Destroy, prove nothing is left, clear every fault. Throws if anything stayed behind. */
async function cleanUp(stack: Stack): Promise<void> {
    try {
        const r = await destroy(stack);
        if (r.errors.length) throw new Error(`destroy of ${stack.name} failed: ${r.errors.join("; ")}`);
        const state = JSON.parse(fs.readFileSync(stack.statePath, "utf8")) as { resources: object };
        if (Object.keys(state.resources).length) throw new Error(`destroy of ${stack.name} left state: ${Object.keys(state.resources).join(", ")}`);
        const left = await leftovers();
        if (left.length) throw new Error(`destroy of ${stack.name} left: ${left.join("; ")}`);
    } finally {
        for (const h of sim.hosts) await sim.setFaults(h.name, null);
    }
}

function mustSucceed(r: Report, what: string): Report {
    if (r.error) throw new Error(`${what} failed: ${r.error}`);
    return r;
}

function mustFail(r: Report, what: string, pattern: RegExp): string {
    if (!r.error) throw new Error(`${what} was expected to fail and did not`);
    if (!pattern.test(r.error)) throw new Error(`${what} failed, but not as expected (${pattern}): ${r.error.slice(0, 2000)}`);
    return r.error;
}

// ---------------------------------------------------------------- scenarios

interface UpRun {
    hosts: number;
    wallSeconds: number;
    /** Including the engine process' start (node, tsx), as a user typing `up` waits. */
    processWallSeconds: number;
    overheadSeconds: number;
    criticalPath: CriticalPath;
    noop: { actions: number; changed: string[]; replaced: number; wallSeconds: number };
    flag: { actions: number; changed: string[]; replaced: string[]; others: string[]; wallSeconds: number };
}

/** Fresh up (load time L) → the same up again → one vLLM flag changed → destroy. */
async function upScenario(n: number, run: number): Promise<UpRun> {
    const stack = simStack(`up${n}-${run}`, n);
    const hostNames = sim.hosts.slice(0, n).map(h => h.name);
    try {
        await sim.setFaults(hostNames[0], { load_seconds: P.loadSeconds });
        const started = Date.now();
        const fresh = mustSucceed(await up(stack), `fresh up on ${n} hosts`);
        const processWall = Date.now() - started;
        const cp = criticalPath(fresh, hostNames);

        const again = mustSucceed(await up(stack), `no-op up on ${n} hosts`);
        const a = work(again);
        const changed = again.ops.filter(o => o.op !== "same").map(o => o.name);

        const before = planOf(stack.config);
        stack.config["spark-vllm:vllm"] = { ...(stack.config["spark-vllm:vllm"] as object), extraArgs: [FLAG] };
        // What `spark-vllm diff` predicts the flag changes (the launch, its probe and proof, the memory gates before it
        // and the after-load readings); anything else the up changes counts as touched.
        const expected = diffPlans(before, planOf(stack.config)).filter(c => c.op !== "same").map(c => c.name);
        const flag = mustSucceed(await up(stack), `up with ${FLAG} on ${n} hosts`);
        const f = work(flag);
        const flagChanged = flag.ops.filter(o => o.op !== "same").map(o => o.name);
        const result: UpRun = {
            hosts: n,
            wallSeconds: secs(fresh.wallMs),
            processWallSeconds: secs(processWall),
            overheadSeconds: round(fresh.wallMs / 1000 - P.loadSeconds),
            criticalPath: cp,
            noop: { actions: a.actions, changed, replaced: a.replaced.length, wallSeconds: secs(again.wallMs) },
            flag: { actions: f.actions, changed: flagChanged, replaced: f.replaced, others: flagChanged.filter(x => !expected.includes(x)), wallSeconds: secs(flag.wallMs) },
        };
        log(`up on ${n} hosts #${run}: fresh ${result.wallSeconds} s (overhead ${result.overheadSeconds} s, critical path ${cp.steps} steps), ` +
            `no-op ${result.noop.wallSeconds} s / ${a.actions} actions, flag ${result.flag.wallSeconds} s / ${f.actions} actions [${flagChanged.join(" ")}]`);
        return result;
    } finally {
        await cleanUp(stack);
    }
}

async function crashScenario(run: number): Promise<{ seconds: number; kind: string }> {
    const stack = simStack(`crash-${run}`, 2);
    try {
        await sim.setFaults("spark-a", CRASH);
        const r = await up(stack);
        const error = mustFail(r, "up with a crash during load", new RegExp(`${N.of("endpoint-probe")}[\\s\\S]*root cause: RuntimeError: CUDA error: an illegal memory access`));
        const logText = (await sim.exec("spark-a", "cat /var/tmp/spark-vllm/vllm-serve.log")).stdout;
        const at = /SIM_CRASH_AT (\d+\.\d+)/.exec(logText);
        if (!at) throw new Error("the stand-in's log has no SIM_CRASH_AT line");
        const probe = r.ops.find(o => o.name === N.of("endpoint-probe") && o.failed);
        if (!probe) throw new Error(`no failed ${N.of("endpoint-probe")} op`);
        const seconds = round((r.startedAt + probe.endMs - Number(at[1]) * 1000) / 1000);
        const kind = /kind: (\S+)/.exec(error)?.[1] ?? "none";
        log(`crash #${run}: failed ${seconds} s after the crash (kind ${kind})`);
        return { seconds, kind };
    } finally {
        await cleanUp(stack);
    }
}

async function hangScenario(run: number): Promise<{ seconds: number; probeSeconds: number }> {
    const stack = simStack(`hang-${run}`, 2, { probes: { endpointTimeoutSeconds: HANG_TIMEOUT } });
    try {
        await sim.setFaults("spark-a", { nccl_hang: true });
        const r = await up(stack);
        mustFail(r, "up with an NCCL hang", new RegExp(`${N.of("endpoint-probe")}[\\s\\S]*did not become healthy within ${HANG_TIMEOUT} s`));
        const probe = r.ops.find(o => o.name === N.of("endpoint-probe") && o.failed);
        if (!probe) throw new Error(`no failed ${N.of("endpoint-probe")} op`);
        const probeSeconds = secs(probe.endMs - probe.startMs);
        const seconds = round(probeSeconds - HANG_TIMEOUT);
        log(`hang #${run}: probe ran ${probeSeconds} s, failed ${seconds} s after its ${HANG_TIMEOUT} s timeout`);
        return { seconds, probeSeconds };
    } finally {
        await cleanUp(stack);
    }
}

async function compatScenario(run: number): Promise<{ seconds: number; processSeconds: number; launches: number }> {
    const stack = simStack(`compat-${run}`, 2, { tag: "0.14.0" });
    try {
        const started = Date.now();
        const r = await up(stack);
        // Refused by the image proof on the hosts (issue 46), before any container: the weights are on the sim's hosts.
        mustFail(r, "up with the 0.14.0 image", /image-check[\s\S]*Qwen3_5MoeForConditionalGeneration/);
        const verdict = r.ops.find(o => o.name.endsWith("-image-check") && o.failed);
        if (!verdict) throw new Error("no failed image-check op");
        const launches = r.ops.filter(o => isLaunch(o.name)).length;
        const out = { seconds: secs(verdict.endMs), processSeconds: secs(r.startedAt + verdict.endMs - started), launches };
        log(`compat #${run}: 0.14.0 refused ${out.seconds} s after up started (${out.processSeconds} s incl. process start), ${launches} launches`);
        return out;
    } finally {
        await cleanUp(stack);
    }
}

/**
 * An image change under a steady load through the endpoint (4 lanes, a request each 0.5 s per lane; issue 46): on one
 * TP=2 replica over both hosts, an image the proof refuses (no-sm12x) and then a good one (ray-2.52, the same vLLM);
 * on two one-host replicas, a good one. The unavailable time is from the first failed request to the last.
 */
async function imageScenario(run: number): Promise<{ refusedFailed: number; refusedSent: number; goodDownSeconds: number; goodFailed: number; goodSent: number;
    goodStoppedAtSeconds: number; replicasFailed?: number; replicasSent?: number }> {
    const one = simStack(`image-${run}`, 2);
    const result: Awaited<ReturnType<typeof imageScenario>> = { refusedFailed: 0, refusedSent: 0, goodDownSeconds: 0, goodFailed: 0, goodSent: 0, goodStoppedAtSeconds: 0 };
    try {
        await sim.setFaults("spark-a", { load_seconds: P.loadSeconds });
        const r = mustSucceed(await up(one), "up for the image change");
        const { endpoint, apiKey, modelName } = r.outputs as Record<string, string>;
        one.config["spark-vllm:image"] = sim.images["no-sm12x"];
        const refused = await loadDuring(() => up(one), endpoint, apiKey, modelName);
        mustFail(refused.result, "up with an image the proof refuses", /image-check[\s\S]*cannot run on this GPU/);
        one.config["spark-vllm:image"] = sim.images["ray-2.52"];
        const good = await loadDuring(() => up(one), endpoint, apiKey, modelName);
        mustSucceed(good.result, "up with a good new image");
        // The old vLLM stops when its launch's replacement starts (its delete); the proofs ran before (resources.ts).
        const launch = good.result.ops.find(o => o.name === N.of("vllm-launch"));
        if (!launch) throw new Error(`no ${N.of("vllm-launch")} op in the good image's up`);
        const proven = good.result.startedAt + launch.startMs;
        Object.assign(result, { refusedFailed: refused.failed.length, refusedSent: refused.sent, goodDownSeconds: round(good.downSeconds),
            goodFailed: good.failed.length, goodSent: good.sent, goodStoppedAtSeconds: secs(proven - good.startedMs) });
    } finally {
        await cleanUp(one);
    }
    // --quick leaves out the two replicas' bring-up and roll (about 2 minutes on the CI machine): the e2e stage rolls
    // an image across replicas under load (tests/e2e/replicas.test.ts).
    if (!P.imageReplicas) {
        log(`image #${run}: refused ${result.refusedFailed}/${result.refusedSent} failed; good: down ${result.goodDownSeconds} s (${result.goodFailed}/${result.goodSent} failed, ` +
            `old vLLM stopped at +${result.goodStoppedAtSeconds} s); two replicas: not run (--quick)`);
        return result;
    }
    const two = simStack(`image-replicas-${run}`, 2, { vllm: { tensorParallelSize: 1 }, model: REPLICA_MODEL });
    two.config["spark-vllm:replicas"] = 2;
    two.policyPack = false;
    try {
        const r = mustSucceed(await up(two), "up of two replicas for the image change");
        const { endpoint, apiKey, modelName } = r.outputs as Record<string, string>;
        two.config["spark-vllm:image"] = sim.images["ray-2.52"];
        const rolled = await loadDuring(() => up(two), endpoint, apiKey, modelName);
        mustSucceed(rolled.result, "up of two replicas with a good new image");
        Object.assign(result, { replicasFailed: rolled.failed.length, replicasSent: rolled.sent });
    } finally {
        await cleanUp(two);
    }
    log(`image #${run}: refused ${result.refusedFailed}/${result.refusedSent} failed; good: down ${result.goodDownSeconds} s (${result.goodFailed}/${result.goodSent} failed, ` +
        `old vLLM stopped at +${result.goodStoppedAtSeconds} s); two replicas: ${result.replicasFailed}/${result.replicasSent} failed`);
    return result;
}

// ---------------------------------------------------------------- main

async function simulated(): Promise<Record<string, any>> {
    work_ = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-"));
    const hostCount = Math.max(...P.hostCounts);
    log(`starting ${hostCount} simulated hosts`);
    sim = await startOwnSim(hostCount);
    try {
        for (const h of sim.hosts) await sim.setFaults(h.name, null);
        // The images are on every host before the first up, as after any earlier deployment (destroy
        // keeps them): pulls from the local registry are CPU-bound on a small machine and would
        // measure the machine, not the orchestration.
        await Promise.all(sim.hosts.flatMap(h => Object.values(sim.images).map(async image => {
            const r = await sim.docker(h.name, ["pull", "-q", image]);
            if (r.code !== 0) throw new Error(`pull ${image} on ${h.name}: ${r.stderr}`);
        })));
        log("images on every host");

        const ups: UpRun[] = [];
        for (let run = 1; run <= P.upRuns; run++)
            for (const n of P.hostCounts) ups.push(await upScenario(n, run));
        const crashes = [];
        for (let run = 1; run <= P.crashRuns; run++) crashes.push(await crashScenario(run));
        const hangs = [];
        for (let run = 1; run <= P.hangRuns; run++) hangs.push(await hangScenario(run));
        const compat = [];
        for (let run = 1; run <= P.compatRuns; run++) compat.push(await compatScenario(run));
        const images = [];
        for (let run = 1; run <= P.imageRuns; run++) images.push(await imageScenario(run));
        return { ups, crashes, hangs, compat, images };
    } finally {
        await sim.stop();
        fs.rmSync(work_, { recursive: true, force: true });
        log("sim stopped");
    }
}

/** --modes js,ts-node: how the program is run (bench/evaluate.ts); default both. */
const modesArg = argv.indexOf("--modes");
const EVAL_MODES_RUN: EvalMode[] = modesArg >= 0 ? argv[modesArg + 1].split(",").map(m => {
    if (!(EVAL_MODES as string[]).includes(m)) throw new Error(`--modes ${argv[modesArg + 1]}: a comma-separated list of ${EVAL_MODES.join(", ")}`);
    return m as EvalMode;
}).sort((a, b) => EVAL_MODES.indexOf(a) - EVAL_MODES.indexOf(b)) : EVAL_MODES; // js before floor, which replays js's graph

const EVAL_MODE_TEXT: Record<EvalMode, string> = {
    js: "compiled JavaScript (Pulumi.yaml typescript: false)",
    "ts-node": "TypeScript through the SDK's ts-node, type-checking (the committed Pulumi.yaml)",
    floor: "the SDK floor: the js run's resources (types, names, parents, providers) registered with the smallest inputs and no spark-vllm code (bench/floor.ts)",
    "floor-containers": "the SDK floor of the js run's docker.Containers alone: the least a design with a container per host registers (bench/floor.ts)",
};

/** How to read the evaluation figures (results.md). */
const EVAL_READING = "CPU is the program process' own user + system time (getrusage at its exit, bench/measure-preload.mjs): " +
    "what the evaluation cost, whatever else runs. Wall time is spawn to exit; on a machine shared with other work it " +
    "measures mostly that work (see the load average above and each run's in results.json). Contention for the cores " +
    "(SMT siblings, caches) still inflates CPU time under load, so compare figures taken under similar load.";

/** Every mode and host count once per run, interleaved, so a change in the machine's load spreads over all of them. */
async function evaluations(): Promise<Evaluation[]> {
    const all: Evaluation[] = [];
    const floors = EVAL_MODES_RUN.some(m => m.startsWith("floor"));
    const needsJs = EVAL_MODES_RUN.includes("js") || floors;
    const compiled = needsJs ? compileProgram() : undefined;
    const graphs = new Map<number, Evaluation["graph"]>();
    try {
        unchanged("compiling the program");
        if (floors && !EVAL_MODES_RUN.includes("js"))
            for (const n of P.evalHosts) graphs.set(n, (await evaluateOnce(n, "js", compiled)).graph);
        for (let run = 1; run <= P.evalRuns; run++)
            for (const mode of EVAL_MODES_RUN)
                for (const n of P.evalHosts) {
                    const { graph, ...e } = await evaluateOnce(n, mode, compiled, graphs.get(n));
                    if (graph && !graphs.has(n)) graphs.set(n, graph);
                    unchanged(`evaluation of ${n} hosts (${mode})`);
                    log(`evaluate ${n} hosts (${mode}) #${run}: ${round(e.cpuSeconds, 2)} s CPU, ${round(e.wallSeconds, 2)} s wall, ${round(e.peakRssMiB, 1)} MiB peak, ` +
                        `${e.resources} resources, load ${round(os.loadavg()[0], 2)}`);
                    all.push({ ...e, loadAverage: round(os.loadavg()[0], 2) });
                }
    } finally {
        if (compiled) fs.rmSync(compiled, { recursive: true, force: true });
    }
    return all;
}

/** Per mode and host count: resources, and the medians (with min, max, runs) of CPU, wall and peak memory. */
function evaluationSummary(evals: Evaluation[]): Record<string, any> {
    const evaluation: Record<string, any> = {};
    for (const mode of EVAL_MODES_RUN) {
        const byHosts: Record<string, any> = {};
        for (const n of P.evalHosts) {
            const es = evals.filter(e => e.hosts === n && e.mode === mode);
            byHosts[`hosts${n}`] = {
                hosts: n,
                resources: es[0].resources,
                cpuSeconds: summarize(es.map(e => e.cpuSeconds)),
                wallSeconds: summarize(es.map(e => e.wallSeconds)),
                peakRssMiB: summarize(es.map(e => e.peakRssMiB)),
            };
        }
        // Each larger count against the smallest: for linear evaluation, time and memory grow no faster than the resources.
        const [first, ...rest] = P.evalHosts;
        for (const n of rest) {
            const [a, b] = [byHosts[`hosts${first}`], byHosts[`hosts${n}`]];
            b.ratioTo = {
                hosts: first,
                cpuSeconds: round(b.cpuSeconds.median / a.cpuSeconds.median),
                wallSeconds: round(b.wallSeconds.median / a.wallSeconds.median),
                peakRssMiB: round(b.peakRssMiB.median / a.peakRssMiB.median),
                resources: round(b.resources / a.resources),
            };
        }
        evaluation[mode] = byHosts;
    }
    // What spark-vllm adds to the SDKs' own cost of registering the same resources (bench/floor.ts).
    if (evaluation.js && evaluation.floor)
        for (const n of P.evalHosts) {
            const [js, floor] = [evaluation.js[`hosts${n}`], evaluation.floor[`hosts${n}`]];
            js.aboveFloor = {
                cpuSeconds: round(js.cpuSeconds.median - floor.cpuSeconds.median),
                peakRssMiB: round(js.peakRssMiB.median - floor.peakRssMiB.median),
                cpuShare: round(1 - floor.cpuSeconds.median / js.cpuSeconds.median),
            };
        }
    return evaluation;
}

function evaluationRows(evaluation: Record<string, any>): Row[] {
    const rows: Row[] = [];
    for (const mode of EVAL_MODES_RUN)
        for (const n of P.evalHosts) {
            const e = evaluation[mode][`hosts${n}`];
            const r = e.ratioTo;
            const vs = (k: string) => (r ? ` ${fmt(r[k])}× the ${r.hosts}-host figure${k === "cpuSeconds" ? ` for ${fmt(r.resources)}× the resources` : ""}.` : "");
            const what = mode === "floor" ? `SDK floor of ${n} hosts' resources` : mode === "floor-containers" ? `SDK floor of ${n} hosts' containers alone`
                : `\`pulumi preview\` of ${n} hosts, ${mode}`;
            rows.push({ figure: `${what} (${e.resources} resources): CPU`, value: e.cpuSeconds, unit: "s",
                note: `user + system of the program's process: ${EVAL_MODE_TEXT[mode]}, node start to exit.${vs("cpuSeconds")}` });
            rows.push({ figure: `${what}: wall`, value: e.wallSeconds, unit: "s",
                note: `spawn to exit; on a shared machine mostly a measure of its load.${vs("wallSeconds")}` });
            rows.push({ figure: `${what}: peak RSS`, value: e.peakRssMiB, unit: "MiB", note: `of the program's process.${vs("peakRssMiB")}` });
            if (e.aboveFloor) rows.push({ figure: `${what}: CPU above the SDK floor`, value: e.aboveFloor.cpuSeconds, unit: "s",
                note: `medians' difference: ${fmt(Math.round(e.aboveFloor.cpuShare * 100))} % of the program's CPU is spark-vllm's own code and inputs; ${fmt(e.aboveFloor.peakRssMiB)} MiB of its peak RSS.` });
        }
    return rows;
}

function cliBench(): { runs: CliRun[]; summary: Record<string, any>; rows: Row[] } {
    buildDist();
    unchanged("npm run build");
    const runs: CliRun[] = [];
    for (let run = 1; run <= CLI_RUNS; run++)
        for (const c of CLI_COMMANDS)
            for (const mode of ["dist", "source"] as CliMode[]) {
                const r = cliOnce(c, mode);
                log(`cli ${c.label} (${mode}) #${run}: ${round(r.seconds, 2)} s`);
                runs.push(r);
            }
    const summary: Record<string, any> = {};
    const rows: Row[] = [];
    for (const c of CLI_COMMANDS)
        for (const mode of ["dist", "source"] as CliMode[]) {
            const s = summarize(runs.filter(r => r.command === c.label && r.mode === mode).map(r => r.seconds));
            summary[`${c.args[0]}.${mode}`] = { command: c.label, mode, seconds: s };
            rows.push({ figure: `CLI cold start: \`spark-vllm ${c.label}\` (${mode === "dist" ? "compiled dist/" : "TypeScript sources via tsx"})`, value: s, unit: "s",
                note: mode === "dist" ? "< 1 s. What the installed package, and a checkout after `npm run build`, runs" : "what a checkout runs while dist/ is stale: tsx loads and compiles the sources" });
        }
    return { runs, summary, rows };
}

/** --only evaluate / --only cli: no sim, no root; results.json and results.md in --out (default a temp dir). */
async function alone(which: "evaluate" | "cli"): Promise<void> {
    const outDir = outArg >= 0 ? path.resolve(argv[outArg + 1]) : fs.mkdtempSync(path.join(os.tmpdir(), `spark-vllm-bench-${which}-`));
    const m = machine();
    const command = `npm run bench -- ${argv.join(" ")}`;
    log(`${which} on ${m.cpus} CPUs, load ${m.loadAverage.start}; results in ${outDir}`);
    const results: Record<string, any> = { command, quick: QUICK, machine: m, source: measured };
    let rows: Row[];
    if (which === "evaluate") {
        const evals = await evaluations();
        results.parameters = { evalRuns: P.evalRuns, evalHosts: P.evalHosts, evalModes: EVAL_MODES_RUN };
        results.evaluation = evaluationSummary(evals);
        results.runs = { evaluations: evals };
        rows = evaluationRows(results.evaluation);
    } else {
        const cli = cliBench();
        results.parameters = { cliRuns: CLI_RUNS, commands: CLI_COMMANDS };
        results.cli = cli.summary;
        results.runs = { cli: cli.runs };
        rows = cli.rows;
    }
    m.loadAverage.end = round(os.loadavg()[0], 2);
    results.durationSeconds = secs(Date.now() - t0);
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(path.join(outDir, "results.json"), JSON.stringify(results, null, 2) + "\n");
    const md = markdown(`spark-vllm benchmarks: ${which === "evaluate" ? "program evaluation as `pulumi preview` runs it" : "CLI cold start"}`, m, command, rows,
        [`Program measured: ${describe(measured)}.`, ...(which === "evaluate" ? ["", EVAL_READING] : [])]);
    fs.writeFileSync(path.join(outDir, "results.md"), md);
    process.stdout.write(md);
    log(`wrote ${path.join(outDir, "results.json")} and results.md`);
}

function describe(src: ReturnType<typeof source>): string {
    return `${src.commit ? `commit ${src.commit.slice(0, 12)}${src.changedFromCommit?.length ? ` with local changes to ${src.changedFromCommit.join(", ")}` : ", no local changes"}` : "not a git checkout"} (fingerprint ${src.fingerprint})`;
}

async function main(): Promise<void> {
    if (ONLY !== undefined) {
        if (ONLY === "evaluate" || ONLY === "cli") return alone(ONLY);
        if (ONLY === "recovery")
            return recoveryBench({ runs: runsArg >= 0 ? P.evalRuns : 1, outDir: outArg >= 0 ? path.resolve(argv[outArg + 1]) : undefined, command: `npm run bench -- ${argv.join(" ")}` });
        if (ONLY !== "diagnose") throw new Error(`--only ${ONLY}: the benches that run alone are: diagnose, evaluate, cli, recovery`);
        return diagnoseBench({ quick: QUICK, outDir: outArg >= 0 ? path.resolve(argv[outArg + 1]) : undefined });
    }
    if (process.getuid?.() !== 0) throw new Error("the bench needs root for the simulated hosts (network namespaces, dockerd, sshd)");
    const outDir = outArg >= 0 ? path.resolve(argv[outArg + 1]) : QUICK ? fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-quick-")) : __dirname;
    const m = machine();
    const command = `npm run bench${argv.length ? ` -- ${argv.join(" ")}` : ""}${process.env.BENCH_QUICK ? ` (BENCH_QUICK=${process.env.BENCH_QUICK})` : ""}`;
    log(`${QUICK ? "quick" : "full"} run on ${m.cpus} CPUs, ${m.memoryGiB} GiB, kernel ${m.kernel}, Node ${m.node}; results in ${outDir}`);

    const evals = await evaluations();
    const s = await simulated();
    m.loadAverage.end = round(os.loadavg()[0], 2);

    const ups = s.ups as UpRun[];
    const of = (n: number) => ups.filter(u => u.hosts === n);
    const orchestration: Record<string, any> = {};
    for (const n of P.hostCounts) {
        const runs = of(n);
        orchestration[`hosts${n}`] = {
            wallSeconds: summarize(runs.map(u => u.wallSeconds)),
            processWallSeconds: summarize(runs.map(u => u.processWallSeconds)),
            overheadSeconds: summarize(runs.map(u => u.overheadSeconds)),
            criticalPath: {
                steps: summarize(runs.map(u => u.criticalPath.steps)),
                busySeconds: summarize(runs.map(u => u.criticalPath.busySeconds)),
                gapSeconds: summarize(runs.map(u => u.criticalPath.gapSeconds)),
                kinds: runs[0].criticalPath.kinds,
                sameChainEveryRun: runs.every(u => u.criticalPath.kinds.join() === runs[0].criticalPath.kinds.join()),
                runs: runs.map(u => u.criticalPath),
            },
        };
    }
    // Runs alternate 2 and 4 hosts, so run i of each saw the same machine: the ratio is per run.
    const ratio = P.hostCounts.includes(4) ? summarize(of(4).map((u, i) => u.overheadSeconds / of(2)[i].overheadSeconds)) : undefined;
    if (ratio) orchestration.ratio4to2 = ratio;

    const noopFlag = (n: number) => ({
        noop: {
            actions: summarize(of(n).map(u => u.noop.actions)),
            replaced: summarize(of(n).map(u => u.noop.replaced)),
            changed: [...new Set(of(n).flatMap(u => u.noop.changed))],
            wallSeconds: summarize(of(n).map(u => u.noop.wallSeconds)),
        },
        flag: {
            actions: summarize(of(n).map(u => u.flag.actions)),
            replaced: summarize(of(n).map(u => u.flag.replaced.length)),
            outsideLaunchAndProbe: summarize(of(n).map(u => u.flag.others.length)),
            changed: [...new Set(of(n).flatMap(u => u.flag.changed))],
            wallSeconds: summarize(of(n).map(u => u.flag.wallSeconds)),
        },
    });
    const rerun = Object.fromEntries(P.hostCounts.map(n => [`hosts${n}`, noopFlag(n)]));
    const crash = { seconds: summarize(s.crashes.map((c: any) => c.seconds)), kinds: [...new Set(s.crashes.map((c: any) => c.kind))] };
    const hang = { seconds: summarize(s.hangs.map((h: any) => h.seconds)), probeSeconds: summarize(s.hangs.map((h: any) => h.probeSeconds)), timeoutSeconds: HANG_TIMEOUT };
    const compat = {
        seconds: summarize(s.compat.map((c: any) => c.seconds)),
        processSeconds: summarize(s.compat.map((c: any) => c.processSeconds)),
        launchesBeforeVerdict: summarize(s.compat.map((c: any) => c.launches)),
    };
    const images = s.images as Array<Record<string, number>>;
    const image = Object.fromEntries(Object.keys(images[0]).map(k => [k, summarize(images.map(i => i[k]))])) as Record<string, ReturnType<typeof summarize>>;
    const evaluation = evaluationSummary(evals);
    const cli = cliBench();

    const rows: Row[] = [];
    const L = P.loadSeconds;
    for (const n of P.hostCounts)
        rows.push({ figure: `Orchestration overhead, fresh \`up\` on ${n} hosts − L`, value: orchestration[`hosts${n}`].overheadSeconds, unit: "s",
            note: `L = ${L} s stand-in load; wall ${fmt(orchestration[`hosts${n}`].wallSeconds.median)} s. Rises with any slower step or added wait` });
    if (ratio) rows.push({ figure: "Overhead 4 hosts ÷ 2 hosts", value: ratio, unit: "ratio",
        note: "≈ 1: hosts proceed in parallel. Serialized hosts push it towards 2 (or more)" });
    for (const n of P.hostCounts) {
        const cp = orchestration[`hosts${n}`].criticalPath;
        rows.push({ figure: `Critical path on ${n} hosts: steps`, value: cp.steps, unit: "steps",
            note: `${cp.kinds.length} dependent steps (below). A per-host step run host after host adds steps on 4 hosts; a new wait adds one` });
        rows.push({ figure: `Critical path on ${n} hosts: time in steps / gaps between them`, value: `${fmt(cp.busySeconds.median)} / ${fmt(cp.gapSeconds.median)}`, unit: "s",
            note: `medians; the gaps are the engine's scheduling, the rest is remote work (includes L)` });
    }
    for (const n of P.hostCounts) {
        const r = rerun[`hosts${n}`];
        rows.push({ figure: `No-op re-run on ${n} hosts: commands/actions run`, value: r.noop.actions, unit: "count", note: "0: a re-run runs no command. > 0 if a command re-runs on every up" });
        rows.push({ figure: `No-op re-run on ${n} hosts: resources replaced`, value: r.noop.replaced, unit: "count", note: "0. > 0 if an input changes on every evaluation (e.g. a timestamp in a command)" });
        rows.push({ figure: `No-op re-run on ${n} hosts: wall`, value: r.noop.wallSeconds, unit: "s", note: "evaluation only; jumps if any remote step runs" });
        rows.push({ figure: `One vLLM flag (\`${FLAG}\`) on ${n} hosts: resources replaced`, value: r.flag.replaced, unit: "count", note: `what \`spark-vllm diff\` predicts (${r.flag.changed.join(", ")})` });
        rows.push({ figure: `One vLLM flag on ${n} hosts: other resources touched`, value: r.flag.outsideLaunchAndProbe, unit: "count", note: "0: nothing beyond what `spark-vllm diff` predicts. > 0 if the flag reaches Ray, containers or other checks" });
        rows.push({ figure: `One vLLM flag on ${n} hosts: commands/actions run`, value: r.flag.actions, unit: "count", note: "stop old vLLM, launch, probe. More if anything else reruns" });
        rows.push({ figure: `One vLLM flag on ${n} hosts: wall`, value: r.flag.wallSeconds, unit: "s", note: `≈ L + relaunch; rises if Ray or containers are recreated` });
    }
    rows.push({ figure: "Failure to error: crash → failed `up`", value: crash.seconds, unit: "s",
        note: `from the stand-in's SIM_CRASH_AT to the failed probe; ≈ poll interval (1 s). A blind sleep moves it to the sleep's length` });
    rows.push({ figure: `Failure to error: hang → failed \`up\` after the ${HANG_TIMEOUT} s timeout`, value: hang.seconds, unit: "s",
        note: `probe duration − ${HANG_TIMEOUT} s; includes ssh/docker exec start. Rises if the timeout is not enforced by the probe` });
    rows.push({ figure: "Compatibility verdict: start of `up` → 0.14.0 refused", value: compat.seconds, unit: "s",
        note: "before any launch; rises if the check moves after Ray or vLLM start, or becomes slow" });
    rows.push({ figure: "Launches before the compatibility verdict", value: compat.launchesBeforeVerdict, unit: "count", note: "0. > 0 if Ray or vLLM start before the check" });
    rows.push({ figure: "Image change, one TP=2 replica, refused image: failed requests", value: image.refusedFailed, unit: "count",
        note: `of ${fmt(image.refusedSent.median)} under a steady load; goal 0 (before issue 46: 248 of 364, and down after the up)` });
    rows.push({ figure: "Image change, one TP=2 replica, good image: endpoint unavailable", value: image.goodDownSeconds, unit: "s",
        note: `first to last failed request (${fmt(image.goodFailed.median)} of ${fmt(image.goodSent.median)}); goal: the new version's load (L = ${P.loadSeconds} s) + at most 5 s; before issue 46: 44 s` });
    rows.push({ figure: "Image change, one TP=2 replica, good image: old vLLM stopped, from the up's start", value: image.goodStoppedAtSeconds, unit: "s",
        note: "after every host's image proof: the old version serves while the new image is pulled and proven" });
    if (image.replicasFailed) rows.push({ figure: "Image change, two one-host replicas, good image: failed requests", value: image.replicasFailed, unit: "count",
        note: `of ${fmt(image.replicasSent.median)} under a steady load; goal 0 (before issue 46: 188 of 499)` });
    rows.push(...evaluationRows(evaluation), ...cli.rows);

    const chainLines: string[] = [];
    for (const n of P.hostCounts) {
        const cp = orchestration[`hosts${n}`].criticalPath;
        const runs = cp.runs as CriticalPath[];
        // Median duration of each step over the runs (when every run took the same chain; else run 1's).
        const secondsAt = (i: number) => cp.sameChainEveryRun ? summarize(runs.map(r => r.stepSeconds[i])).median : runs[0].stepSeconds[i];
        chainLines.push(`Critical path on ${n} hosts (${cp.sameChainEveryRun ? "the same chain in every run; median seconds per step" : "run 1; runs differ, see results.json"}): ` +
            cp.kinds.map((k: string, i: number) => `${k} ${fmt(secondsAt(i))}`).join(" → "), "");
    }
    const results = {
        command,
        quick: QUICK,
        machine: m,
        source: measured,
        parameters: { ...P, crash: CRASH, hangTimeoutSeconds: HANG_TIMEOUT, probes: PROBES, flag: FLAG, hostsHoldTheImage: true },
        orchestration,
        failureToError: { crash, hang },
        rerun,
        compatibility: compat,
        imageChange: image,
        evaluation,
        cli: cli.summary,
        runs: { ...s, evaluations: evals, cli: cli.runs },
        durationSeconds: secs(Date.now() - t0),
    };
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(path.join(outDir, "results.json"), JSON.stringify(results, null, 2) + "\n");
    const md = markdown("spark-vllm benchmarks", m, command, rows, [...chainLines,
        `Program measured: ${describe(measured)}.`, "",
        `Total bench time ${Math.round((Date.now() - t0) / 1000)} s. Every run in results.json.`]);
    fs.writeFileSync(path.join(outDir, "results.md"), md);
    process.stdout.write(md);
    log(`wrote ${path.join(outDir, "results.json")} and results.md in ${Math.round((Date.now() - t0) / 1000)} s`);
}

main().then(() => process.exit(0), err => {
    log(`FAILED: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
});
