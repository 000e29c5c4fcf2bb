// End to end (needs root: network namespaces, dockerd, sshd): spark-vllm:replicas 2 on four simulated Sparks, each
// replica two hosts at tensorParallelSize 2 (issue 39, "Done when"). `up` serves both behind the first host's one proxy
// and key; each replica's leader (the mp master: vLLM's own multi-node launch, node rank 0) runs on its own first host
// and its second host joins that one only; a bounded load (200 requests, concurrency 4) through the endpoint has no
// failure and reaches both replicas (each head's vLLM access log counts its requests); `spark-vllm plan` of the same
// stack file shows the two groups with their own heads; destroy leaves the hosts clean.
//
// Backend: mp, not Ray. Both lead a replica from its first host (components/plan/replicas.ts replicaSummaries), and both
// deployed this stack on the sim (2026-12-05, real Pulumi, alone): mp's `up` took 42 s and its destroy 10.5 s, Ray's
// 57 s and 12.5 s (each replica's hosts in one Ray session of their own). mp runs no real Ray daemons on the hosts
// (`ray start`/`ray stop` and its daemons are about a third of the suite's CPU: docs/testing.md "Test durations") and is
// the default for current images, which ship no Ray (components/knowledge/images.ts defaultBackend). One backend, not
// both: the replica grouping is the same code for either (components/plan/replicas.ts replicaGroups).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { esc, simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { usesRealPulumi } from "../engine/real";
import { leftovers } from "../sim/stacks";
import { containerName } from "../../components/plan/naming";

const ROOT = path.join(__dirname, "..", "..");
// The sim's default model, Qwen3.5-122B-A10B-FP8 (110.83 GiB of weights): at TP 2 each GPU holds half, which the
// model-weights-fit policy accepts for one replica of two Sparks (the two-host TP 2 files deploy it with the pack).
const suite = simSuite("replicas4", {}, { hosts: 4 });
const LOG = "/var/tmp/spark-vllm/vllm-serve.log";
const BACKEND = "mp";

/** `n` chat completions through the endpoint with the key, `concurrency` at a time; the failures (status and body, or the error). */
async function load(endpoint: string, key: string, model: string, n: number, concurrency: number): Promise<string[]> {
    const failed: string[] = [];
    let next = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next < n) {
            next++;
            try {
                const res = await fetch(`${endpoint}/chat/completions`, {
                    method: "POST",
                    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
                    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
                    signal: AbortSignal.timeout(30_000),
                });
                const body = await res.text();
                if (res.status !== 200) failed.push(`${res.status} ${body.slice(0, 200)}`);
            } catch (e) {
                failed.push(String(e));
            }
        }
    }));
    return failed;
}

/** The `vllm serve` command lines running in a host's network namespace (inside its container). */
async function vllmServeLines(host: string): Promise<string> {
    return (await suite.sim.exec(host, "pgrep -af --ns $$ --nslist net '[v]llm serve' || true")).stdout;
}

test("two TP=2 replicas on four hosts: each led from its own first host, a load reaches both with no failure, plan shows both groups, destroy cleans", async () => {
    const s = suite.sim;
    const [a, b, c, d] = s.hosts;
    const stack = suite.stack("replicas4", { vllm: { tensorParallelSize: 2, backend: BACKEND } });
    stack.config["spark-vllm:replicas"] = 2;
    const heads = [a, c];
    // The chat completions each replica head's vLLM stand-in logged (uvicorn's access line, tests/sim/image/python/vllm/_sim_serve.py).
    const served = async () => Promise.all(heads.map(async h =>
        Number((await s.exec(h.name, `grep -c '"POST /v1/chat/completions HTTP/1.1" 200' ${LOG} || true`)).stdout.trim() || 0)));
    console.log(`engine: ${usesRealPulumi() ? "the real Pulumi" : "the test engine"}`);
    const started = Date.now();
    try {
        const r = await up(stack);
        const upSeconds = (Date.now() - started) / 1000;
        assert.equal(r.error, undefined, r.error);
        console.log(`up of 2 replicas x 2 hosts: ${upSeconds.toFixed(1)} s`);
        const { endpoint, apiKey, modelName } = r.outputs as Record<string, string>;
        assert.match(endpoint, new RegExp(`^http://${esc(a.address)}:8000/v1$`), "one endpoint, on the first host");

        // The outputs report each replica: its hosts in order, its head the first, its own serving proof.
        const replicas = r.outputs?.replicas as Array<{ replica: number; hosts: string[]; head: string; serving?: unknown }>;
        assert.deepEqual(replicas.map(x => [x.replica, x.hosts, x.head]), [[1, [a.name, b.name], a.name], [2, [c.name, d.name], c.name]]);
        assert.ok(replicas.every(x => x.serving), "each replica's serving proof ran");

        // Each replica's mp master (node rank 0) runs on its first host; its second host runs headless and joins that
        // master, not the other replica's; each launch is for its own two nodes, not four. No Ray anywhere.
        for (const [head, worker] of [[a, b], [c, d]]) {
            const headServe = await vllmServeLines(head.name);
            assert.match(headServe, new RegExp(`vllm serve .*--nnodes 2 --node-rank 0 --master-addr ${esc(head.address)} --master-port 29501`), `${head.name}: ${headServe}`);
            assert.doesNotMatch(headServe, /--headless/, head.name);
            const workerServe = await vllmServeLines(worker.name);
            assert.match(workerServe, new RegExp(`vllm serve .*--nnodes 2 --node-rank 1 --master-addr ${esc(head.address)} --master-port 29501 --headless`), `${worker.name}: ${workerServe}`);
        }
        for (const h of s.hosts) {
            const ps = await s.exec(h.name, `docker exec ${containerName(h.name)} ps -eo args`);
            assert.equal(ps.code, 0, ps.stderr);
            assert.doesNotMatch(ps.stdout, /raylet|gcs_server|ray start/, `no Ray on ${h.name}`);
        }

        // A bounded load through the endpoint with the key: no failure, both replicas reached, each request once.
        const before = await served();
        const loadStarted = Date.now();
        const failed = await load(endpoint, apiKey, modelName, 200, 4);
        const loadSeconds = (Date.now() - loadStarted) / 1000;
        const counts = (await served()).map((n, i) => n - before[i]);
        console.log(`200 requests at concurrency 4 in ${loadSeconds.toFixed(1)} s: ${failed.length} failed; served by replica 1: ${counts[0]}, replica 2: ${counts[1]}`);
        assert.deepEqual(failed, []);
        assert.ok(counts[0] >= 20 && counts[1] >= 20, `both replicas served: ${counts}`);
        assert.equal(counts[0] + counts[1], 200, "every request was served exactly once");

        // `spark-vllm plan` of the same stack file: the two groups, each with its own head and mp master.
        const planDir = planDirOf(stack);
        const plan = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "plan", "--stack", stack.name, "--dir", planDir, "--json"],
            { encoding: "utf8", maxBuffer: 64 << 20 });
        assert.equal(plan.status, 0, plan.stdout.slice(-2000) + plan.stderr);
        const report = JSON.parse(plan.stdout) as {
            backend: string;
            replicas: Array<{ replica: number; hosts: string[]; head: string; leader: string }>;
            hosts: Array<{ name: string; replica: number; role: string }>;
        };
        console.log(`spark-vllm plan: ${report.replicas.map(g => `replica ${g.replica}: ${g.hosts.join(", ")}; head ${g.head}, ${g.leader}`).join(" | ")}`);
        assert.equal(report.backend, BACKEND);
        assert.deepEqual(report.replicas, [
            { replica: 1, hosts: [a.name, b.name], head: a.name, leader: `mp master on ${a.name} (${a.address}:29501)` },
            { replica: 2, hosts: [c.name, d.name], head: c.name, leader: `mp master on ${c.name} (${c.address}:29501)` },
        ]);
        assert.deepEqual(report.hosts.map(h => [h.name, h.replica, h.role]),
            [[a.name, 1, "head"], [b.name, 1, "worker"], [c.name, 2, "head"], [d.name, 2, "worker"]]);
    } finally {
        const destroyStarted = Date.now();
        const gone = await destroy(stack);
        console.log(`destroy: ${((Date.now() - destroyStarted) / 1000).toFixed(1)} s; the file's test so far: ${((Date.now() - started) / 1000).toFixed(1)} s`);
        assert.deepEqual(gone.errors, []);
    }
    assert.deepEqual(await leftovers(s), []);
});

/**
 * The folder holding the stack's Pulumi.<stack>.yaml that `spark-vllm plan` reads: on the real Pulumi, the project folder
 * the CLI ran `up` from (tests/engine/real.ts workspace, its config as `up` read it); on the test engine, which keeps no
 * stack file, one written here from the same config.
 */
function planDirOf(stack: { name: string; statePath: string; config: Record<string, unknown> }): string {
    const real = stack.statePath.replace(/\.state\.json$/, "") + ".pulumi";
    if (usesRealPulumi()) {
        assert.ok(fs.existsSync(path.join(real, `Pulumi.${stack.name}.yaml`)), `the real CLI's stack file in ${real}`);
        return real;
    }
    const dir = `${real}-plan`;
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }, { lineWidth: -1 }));
    return dir;
}
