// End to end (needs root: network namespaces, dockerd, sshd): spark-vllm:replicas 2 on four simulated Sparks, each
// replica two hosts at tensorParallelSize 2 (issue 39, "Done when"). `up` serves both behind the first host's one proxy
// and key; each replica's leader (the mp master: vLLM's own multi-node launch, node rank 0) runs on its own first host
// and its second host joins that one only; a bounded load (200 requests, concurrency 4) through the endpoint has no
// failure and reaches both replicas (each head's vLLM access log counts its requests); `spark-vllm plan` of the same
// stack file shows the two groups with their own heads. Then the rolling update (components/plan/rollout.ts): a vLLM
// flag change under a steady load of streamed completions has no failed or cut-short request; the drain and undrain
// lines (the first host's clock) show replica 1 out and back before replica 2 was taken out; every host's new vLLM
// started (/proc, the same clock) inside its own replica's drained window, so replica 2 relaunched only after replica 1
// was back; requests were answered while each replica was out; afterwards every host runs the new flag, the front has
// both replicas in service and both serve. Destroy leaves the hosts clean.
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
import { containerName, proxyContainerName } from "../../components/plan/naming";
import { loadState } from "../engine/state";
import { load } from "./endpointLoad";

const ROOT = path.join(__dirname, "..", "..");
// The sim's default model, Qwen3.5-122B-A10B-FP8 (110.83 GiB of weights): at TP 2 each GPU holds half, which the
// model-weights-fit policy accepts for one replica of two Sparks (the two-host TP 2 files deploy it with the pack).
const suite = simSuite("replicas4", {}, { hosts: 4 });
const LOG = "/var/tmp/spark-vllm/vllm-serve.log";
const BACKEND = "mp";

/** The `vllm serve` command lines running in a host's network namespace (inside its container). */
async function vllmServeLines(host: string): Promise<string> {
    return (await suite.sim.exec(host, "pgrep -af --ns $$ --nslist net '[v]llm serve' || true")).stdout;
}

test("two TP=2 replicas on four hosts: each led from its own first host, a load reaches both with no failure, plan shows both groups; a flag change rolls them one after the other under load with no failure; destroy cleans", async () => {
    const s = suite.sim;
    const [a, b, c, d] = s.hosts;
    const stack = suite.stack("replicas4", { vllm: { tensorParallelSize: 2, backend: BACKEND } });
    stack.config["spark-vllm:replicas"] = 2;
    const groups = [[a, b], [c, d]];
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
        for (const [head, worker] of groups) {
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

        // The rolling update: a vLLM flag changes while a paced load of streamed completions (concurrency 4, each client
        // pausing 100 ms between its requests, each answer about a quarter of a second: the stand-in's 23 words at its
        // default 100 tokens/s) runs through the endpoint until `up` is done.
        const oldStarts = await Promise.all(s.hosts.map(h => vllmStarts(h.name)));
        (stack.config["spark-vllm:vllm"] as Record<string, unknown>).extraArgs = ["--enforce-eager"];
        const rollStarted = Date.now() / 1000;
        let rolling = true;
        const rolled = up(stack).finally(() => { rolling = false; });
        const during = await pacedStreamLoad(endpoint, apiKey, modelName, 4, 100, () => rolling);
        const roll = await rolled;
        const rollSeconds = Date.now() / 1000 - rollStarted;
        assert.equal(roll.error, undefined, roll.error);
        console.log(`the rolling up: ${rollSeconds.toFixed(1)} s; ${during.completed.length + during.failed.length} requests during it, ${during.failed.length} failed`);
        assert.deepEqual(during.failed, [], "no request failed while the replicas were relaunched");

        // Each replica's drain and undrain ran in this up, on the first host, in order: replica 1 out, back, then replica
        // 2 out, back (the drain and undrain commands' JSON lines, with the host's clock).
        const lines = rolloutLines(stack.statePath);
        console.log(`drain/undrain: ${JSON.stringify(lines)}`);
        assert.deepEqual(lines.map(l => l.replica), [1, 2]);
        for (const l of lines) {
            assert.ok(l.drain.drainedAt >= rollStarted && l.drain.drainedAt <= l.drain.drainedUntil && l.drain.drainedUntil < l.undrain.undrainedAt,
                `replica ${l.replica}: drained in this up, then taken back: ${JSON.stringify(l)}`);
            assert.equal(l.drain.stillRunning, 0, `replica ${l.replica}: no request was cut by its relaunch`);
            // Issue 50: the drain counted the front nginx's own connections (read in the proxy container as nobody).
            assert.equal(l.drain.counted, "nginx", `replica ${l.replica}: ${JSON.stringify(l.drain)}`);
        }
        const [one, two] = lines;
        assert.ok(one.undrain.undrainedAt <= two.drain.drainedAt, "replica 2 was taken out only after replica 1 was back");
        // Every host's vLLM is a new process, started (host clock) inside its own replica's drained window: so replica 2's
        // relaunch began after replica 1 was back in service.
        const newStarts = await Promise.all(s.hosts.map(h => vllmStarts(h.name)));
        groups.forEach((hosts, k) => hosts.forEach(h => {
            const i = s.hosts.indexOf(h);
            const start = Math.min(...newStarts[i]);
            console.log(`${h.name} (replica ${k + 1}): vllm serve started ${(start - rollStarted).toFixed(2)} s into the roll (drained ${(lines[k].drain.drainedUntil - rollStarted).toFixed(2)}, back ${(lines[k].undrain.undrainedAt - rollStarted).toFixed(2)})`);
            assert.ok(!newStarts[i].some(t => oldStarts[i].includes(t)), `${h.name}: vllm serve was relaunched`);
            assert.ok(start > lines[k].drain.drainedUntil && start < lines[k].undrain.undrainedAt,
                `${h.name}: its vllm serve started while replica ${k + 1} was out of the front (${start} not in ${lines[k].drain.drainedUntil}..${lines[k].undrain.undrainedAt})`);
        }));
        assert.ok(Math.min(...newStarts[2], ...newStarts[3]) > one.undrain.undrainedAt, "replica 2 relaunched after replica 1's undrain");
        // The load overlapped both relaunches: requests completed while each replica was out (the other served them).
        for (const l of lines) {
            const inWindow = during.completed.filter(t => t > l.drain.drainedUntil && t < l.undrain.undrainedAt).length;
            console.log(`replica ${l.replica} out of the front for ${(l.undrain.undrainedAt - l.drain.drainedAt).toFixed(1)} s (its requests done in ${(l.drain.drainedUntil - l.drain.drainedAt).toFixed(2)} s): ${inWindow} requests answered meanwhile`);
            assert.ok(inWindow >= 5, `the load ran while replica ${l.replica} was relaunched: ${inWindow} requests`);
        }
        // While replica 2 was out, the front sent it nothing: replica 2's own proxy on its head logs every request that
        // reaches it (`access_log /dev/stdout`, components/plan/proxyPlan.ts; the front's come from the first host's
        // address), and none of the front's ended between its drain (once none was running, with half a second for the
        // log's timestamps) and its undrain; while replica 1 was out, the front's requests went there.
        const fromFront = await frontRequestsAt(c.name, a.address);
        const between = (l: typeof one) => fromFront.filter(t => t > l.drain.drainedUntil + 0.5 && t < l.undrain.undrainedAt).length;
        console.log(`replica 2's proxy: ${fromFront.length} requests from the front in all; ${between(one)} while replica 1 was out, ${between(two)} while replica 2 was out`);
        assert.equal(between(two), 0, "the front sent replica 2 no request while it was drained");
        assert.ok(between(one) >= 5, `the front sent replica 2 the load while replica 1 was out: ${between(one)}`);
        // Afterwards: every host's vLLM runs with the new flag, the front has both replicas in service, and both serve.
        for (const h of s.hosts) assert.match(await vllmServeLines(h.name), /vllm serve .*--enforce-eager/, `${h.name} runs the new flag`);
        const replicasConf = await s.exec(a.name, "cat /var/tmp/spark-vllm/proxy/replicas.conf");
        assert.equal(replicasConf.code, 0, replicasConf.stderr);
        assert.equal(replicasConf.stdout.match(/^server /gm)?.length, 2, replicasConf.stdout);
        assert.doesNotMatch(replicasConf.stdout, / down;/, "no replica left out of the front");
        const beforeAfter = await served();
        assert.deepEqual(await load(endpoint, apiKey, modelName, 100, 4), []);
        const afterCounts = (await served()).map((n, i) => n - beforeAfter[i]);
        console.log(`100 requests after the roll: served by replica 1: ${afterCounts[0]}, replica 2: ${afterCounts[1]}`);
        assert.ok(afterCounts.every(n => n >= 10), `both replicas serve after the roll: ${afterCounts}`);
        assert.equal(afterCounts[0] + afterCounts[1], 100, "every request was served exactly once");
    } finally {
        const destroyStarted = Date.now();
        const gone = await destroy(stack);
        console.log(`destroy: ${((Date.now() - destroyStarted) / 1000).toFixed(1)} s; the test: ${((Date.now() - started) / 1000).toFixed(1)} s`);
        assert.deepEqual(gone.errors, []);
    }
    assert.deepEqual(await leftovers(s), []);
});

/**
 * Streamed chat completions through the endpoint with the key, `concurrency` clients each pausing `pauseMs` after every
 * request, for as long as `going()`. Streamed, and each to the end: the front cannot retry a request on the other replica
 * once the answer has begun (ngx_http_proxy_module `proxy_next_upstream`: only "if nothing has been sent to a client
 * yet"), so a replica stopped while it streams shows as an answer without its closing `data: [DONE]`. Returns when each
 * whole answer arrived (epoch seconds, this machine's clock, which the simulated hosts share: they are namespaces on
 * it), and the failures.
 */
async function pacedStreamLoad(endpoint: string, key: string, model: string, concurrency: number, pauseMs: number, going: () => boolean): Promise<{ completed: number[]; failed: string[] }> {
    const completed: number[] = [];
    const failed: string[] = [];
    await Promise.all(Array.from({ length: concurrency }, async () => {
        while (going()) {
            try {
                const res = await fetch(`${endpoint}/chat/completions`, {
                    method: "POST",
                    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
                    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 32, stream: true }),
                    signal: AbortSignal.timeout(30_000),
                });
                const body = await res.text();
                if (res.status !== 200) failed.push(`${new Date().toISOString()} ${res.status} ${body.slice(0, 200)}`);
                else if (!body.trimEnd().endsWith("data: [DONE]")) failed.push(`${new Date().toISOString()} 200 cut short: ${body.slice(-200)}`);
                else completed.push(Date.now() / 1000);
            } catch (e) {
                failed.push(`${new Date().toISOString()} ${e}`);
            }
            await new Promise(r => setTimeout(r, pauseMs));
        }
    }));
    return { completed, failed };
}

/**
 * When each `vllm serve` process in a host's network namespace started, in epoch seconds (10 ms steps): its start in
 * clock ticks after boot (/proc/PID/stat field 22, proc(5)) plus the boot time as now minus /proc/uptime.
 */
async function vllmStarts(host: string): Promise<number[]> {
    const r = await suite.sim.exec(host, "now=$(date +%s.%N); up=$(cut -d' ' -f1 /proc/uptime); echo \"$now $up $(getconf CLK_TCK)\"; " +
        "for p in $(pgrep -f --ns $$ --nslist net '[v]llm serve'); do sed 's/.*) //' /proc/$p/stat | cut -d' ' -f20; done");
    assert.equal(r.code, 0, r.stderr);
    const [clock, ...ticks] = r.stdout.trim().split("\n");
    const [now, uptime, hz] = clock.split(" ").map(Number);
    assert.ok(ticks.length > 0, `${host}: no vllm serve running`);
    return ticks.map(t => Math.round((now - uptime + Number(t) / hz) * 100) / 100);
}

/**
 * When each chat completion from `client` ended at the endpoint proxy on `host`, in epoch seconds: its access lines
 * (nginx's default combined format, `$remote_addr - $remote_user [$time_local] "$request" …`: ngx_http_log_module) with
 * the time Docker received each (`docker logs --timestamps`, RFC 3339 with nanoseconds, read here to the millisecond).
 */
async function frontRequestsAt(host: string, client: string): Promise<number[]> {
    const r = await suite.sim.exec(host, `docker logs --timestamps ${proxyContainerName()} 2>&1`);
    assert.equal(r.code, 0, r.stderr);
    const line = new RegExp(`^(\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d)(\\.\\d{1,3})?\\d*Z ${esc(client)} - \\S+ \\[[^\\]]*\\] "POST /v1/chat/completions `);
    return r.stdout.split("\n").flatMap(l => {
        const m = line.exec(l);
        return m ? [Date.parse(`${m[1]}${m[2] ?? ""}Z`) / 1000] : [];
    });
}

interface Drained { replica: number; server: string; drainedAt: number; drainedUntil: number; stillRunning: number; counted: "nginx" | "all" }
interface Undrained { replica: number; server: string; undrainedAt: number }

/** Each replica's drain and undrain JSON lines, from their commands' stdout in the stack's state, by replica. */
function rolloutLines(statePath: string): Array<{ replica: number; drain: Drained; undrain: Undrained }> {
    const found = new Map<number, { drain?: Drained; undrain?: Undrained }>();
    for (const e of Object.values(loadState(statePath).resources)) {
        const m = /-replica\.(\d+)-(drain|undrain)$/.exec(e.name);
        if (!m) continue;
        const line = String(e.outputs?.stdout ?? "").split("\n").filter(l => l.startsWith("{")).pop();
        assert.ok(line, `${e.name} printed no JSON line: ${e.outputs?.stdout}`);
        const entry = found.get(Number(m[1])) ?? {};
        entry[m[2] as "drain" | "undrain"] = JSON.parse(line);
        found.set(Number(m[1]), entry);
    }
    return [...found.entries()].sort((x, y) => x[0] - y[0]).map(([replica, l]) => {
        assert.ok(l.drain && l.undrain, `replica ${replica} has a drain and an undrain: ${JSON.stringify(l)}`);
        assert.equal(l.drain.replica, replica);
        assert.equal(l.undrain.replica, replica);
        return { replica, drain: l.drain, undrain: l.undrain };
    });
}

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
