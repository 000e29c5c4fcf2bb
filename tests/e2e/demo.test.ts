// `npm run demo`, run as a user runs it (needs root): the transcript shows the whole job, a fault replay shows the
// diagnosis the end-to-end suite asserts, Ctrl-C mid-run tears down, and nothing is left behind on the machine.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { simStatus } from "../sim/hosts";

const ROOT = path.join(__dirname, "..", "..");

if (process.getuid?.() !== 0) throw new Error("the demo test needs root (the demo starts simulated hosts): run it as root, as .ci/run does");

interface DemoRun {
    code: number | null;
    signal: NodeJS.Signals | null;
    out: string;
}

/**
 * `npm run demo -- ARGS` in its own process group; `interruptWhen`: once the transcript matches, SIGINT to that whole
 * group, as a terminal's Ctrl-C signals its foreground process group (npm, the shell it runs the script with, the demo).
 */
function demo(args: string[], interruptWhen?: RegExp): Promise<DemoRun> {
    return new Promise(resolve => {
        const child = spawn("npm", ["run", "--silent", "demo", "--", ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true });
        let out = "";
        let interrupted = false;
        const onData = (d: Buffer) => {
            out += d;
            process.stdout.write(d);
            if (interruptWhen && !interrupted && interruptWhen.test(out)) {
                interrupted = true;
                process.kill(-child.pid!, "SIGINT");
            }
        };
        child.stdout.on("data", onData);
        child.stderr.on("data", onData);
        child.on("close", (code, signal) => resolve({ code, signal, out }));
    });
}

const demoTempDirs = () => fs.readdirSync(os.tmpdir()).filter(d => d.startsWith("spark-vllm-demo-"));

/** What the demo could leave on the machine: the sim's namespaces, bridge, mounts, state, daemons, cgroups, temp dirs. */
async function leftBehind(): Promise<string[]> {
    const s = await simStatus();
    const found = [...s.netns.map(n => `netns ${n}`), ...(s.bridge ? ["bridge svbr0"] : []), ...s.mounts.map(m => `mount ${m}`)];
    if (s.state) found.push("the sim's state file");
    // The sim's sshd/dockerd/registry/agent run with paths under its run dir or /run/spark-vllm-sim. With the slashes:
    // every cluster's host setup script names "(/run/spark-vllm-sim|/run/svsim)/" (tests/sim/hosts.ts), so without
    // them another file's cluster starting its hosts beside this one would count as the demo's (seen in a CI run).
    const procs = spawnSync("pgrep", ["-af", `${path.join(ROOT, ".sim", "run")}/|/run/spark-vllm-sim/`], { encoding: "utf8" }).stdout.trim();
    if (procs) found.push(`processes: ${procs}`);
    // Containers run under the sim dockerds' cgroup parent /spark-vllm-sim-<host> (tests/sim/hosts.ts).
    for (const root of ["/sys/fs/cgroup", "/sys/fs/cgroup/memory"])
        if (fs.existsSync(root)) found.push(...fs.readdirSync(root).filter(d => d.startsWith("spark-vllm-sim-")).map(d => `cgroup ${root}/${d}`));
    found.push(...demoTempDirs().map(d => `temp dir ${d}`));
    if (fs.existsSync("/run/spark-vllm-demo.json")) found.push("/run/spark-vllm-demo.json");
    return found;
}

describe("npm run demo", () => {
    test("the whole job: progress, an answered completion with the key, a refusal without it, then nothing left", async () => {
        assert.deepEqual(await leftBehind(), [], "nothing of an earlier sim or demo before the run");
        const r = await demo([]);
        assert.equal(r.code, 0, "exit 0");
        const expected = [
            /^ \+  command:remote:Command spark-spark-a-preflight created \(/m,
            /^ {6}facts: .*NVIDIA GB10, compute capability 12\.1/m,
            /^ {6}compatible: vLLM 0\.17\.1 knows Qwen3_5MoeForConditionalGeneration/m,
            /^ {6}Ray formed: 2 nodes, 2 GPUs joined the head/m,
            /spark-endpoint-probe: waiting for vLLM \/health on spark-a:8000, \d+ s; last progress: /,
            /^ {6}vLLM 0\.17\.1 ready .* 1 completion answered/m,
            /^ {4}endpoint : "http:\/\/198\.18\.0\.2:8000\/v1"/m,
            /^ {2}\$ export SPARK_VLLM_ENDPOINT=http:\/\/198\.18\.0\.2:8000\/v1 SPARK_VLLM_API_KEY=\S+$/m,
            /^ {2}\$ curl -sS "\$SPARK_VLLM_ENDPOINT\/chat\/completions" -H "Authorization: Bearer \$SPARK_VLLM_API_KEY"/m,
            /^ {2}answer: \S/m,
            /^ {2}\{"error": "Unauthorized"\}\n {2}HTTP 401$/m,
            /^Destroying \(demo\):$/m,
            /^ -  docker:index:Container spark-spark-a-container deleted/m,
            /^Clean: no simulated host/m,
        ];
        for (const re of expected) assert.match(r.out, re);
        assert.deepEqual(await leftBehind(), []);
    });

    test("--fault crash prints the diagnosis the end-to-end suite asserts, cleans up, and exits 0", async () => {
        const r = await demo(["--fault", "crash"]);
        assert.equal(r.code, 0, "a replay that shows its diagnosis succeeded");
        // As tests/e2e/cluster.test.ts asserts for "a crash during load".
        assert.match(r.out, /^Diagnostics:\n {2}command:remote:Command \(spark-endpoint-probe\):/m);
        assert.match(r.out, /kind: cuda-error/);
        assert.match(r.out, /root cause: RuntimeError: CUDA error: an illegal memory access was encountered/);
        assert.match(r.out, /full log: spark-a:\/var\/tmp\/spark-vllm\/vllm-serve\.log/);
        assert.match(r.out, /^Clean: no simulated host/m);
        assert.deepEqual(await leftBehind(), []);
    });

    test("Ctrl-C while vLLM launches destroys what exists, stops the simulated hosts, removes its files, exits 130", async () => {
        const r = await demo([], /spark-vllm-launch creating/);
        // The demo exits 130; the shell npm ran it with then dies of the same SIGINT, and npm re-raises that on itself
        // (@npmcli/run-script lib/run-script-pkg.js: `process.kill(process.pid, signal)`).
        assert.ok(r.code === 130 || r.signal === "SIGINT", `exit ${r.code}, signal ${r.signal}`);
        assert.match(r.out, /^ \+  command:remote:Command spark-vllm-launch creating$/m);
        assert.match(r.out, /^SIGINT: stopping; then destroying what exists and stopping the simulated hosts$/m);
        assert.match(r.out, /^Destroying \(demo\):$/m);
        assert.match(r.out, /^ -  command:remote:Command spark-ray-head deleted/m, "what up had created is destroyed");
        assert.doesNotMatch(r.out, /answer: /);
        assert.match(r.out, /^Clean: no simulated host/m);
        assert.deepEqual(await leftBehind(), []);
    });
});
