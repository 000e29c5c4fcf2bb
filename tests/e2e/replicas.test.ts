// End to end (needs root: network namespaces, dockerd, sshd): spark-vllm:replicas 2 on two simulated Sparks, one
// replica each (issue 39). Both serve behind the head's one proxy and key: a bounded load (200 requests, concurrency 4)
// through the endpoint has no failure and reaches both replicas (each head's vLLM access log counts its requests); a
// replica whose vLLM dies is passed over (the same load, no failure, /health answers); a flag change rolls (replica 1
// drained, relaunched, proven and put back, then replica 2) under a steady load with no failed request; a flag change
// whose relaunch fails on replica 1 fails `up` naming it, stops the roll (replica 2 keeps the old version and serves
// alone) and the relaunch it names resumes the roll; an image the proof refuses fails `up` with both replicas serving
// untouched, and a good image rolls replica by replica with no failed request (issue 46); destroy leaves the hosts clean.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { execFile, spawnSync } from "node:child_process";
import * as yaml from "js-yaml";
import { failure, simSuite } from "./suite";
import { Stack, destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";
import { QWEN3_30B_A3B } from "../sim/hosts";
import { containerName, resourceNames } from "../../components/plan/naming";
import { loadState } from "../engine/state";
import { load } from "./endpointLoad";

// A model one Spark holds (Qwen3-30B-A3B, about 61 GB in BF16): each replica is one host, so the model-weights-fit policy
// refuses the sim's default Qwen3.5-122B-A10B-FP8 (110.83 GiB per GPU) at preview, per replica.
const suite = simSuite("replicas", {}, { models: [QWEN3_30B_A3B] });
const MODEL = { id: QWEN3_30B_A3B.id, servedName: "qwen3-30b", cacheDir: "/root/.cache/huggingface", weights: "present" };
const LOG = "/var/tmp/spark-vllm/vllm-serve.log";

/**
 * Requests through the endpoint, 4 at a time with a pause of 0.5 s after each (a few hundred over an up of a minute or
 * two), for as long as `run` (an up) takes: how many were sent and which failed.
 */
async function loadThrough<T>(run: () => Promise<T>, endpoint: string, key: string, model: string): Promise<{ result: T; sent: number; failed: string[] }> {
    let done = false, sent = 0;
    const failed: string[] = [];
    const lanes = Array.from({ length: 4 }, async () => {
        while (!done) {
            sent++;
            failed.push(...await load(endpoint, key, model, 1, 1));
            await new Promise(r => setTimeout(r, 500));
        }
    });
    const result = await run().finally(() => { done = true; });
    await Promise.all(lanes);
    return { result, sent, failed };
}

/** `spark-vllm top --once ARGS` on the stack's file (written beside its state), without blocking the event loop. */
function topOnce(stack: Stack, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const dir = path.dirname(stack.statePath);
    fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }));
    return new Promise(resolve => execFile(process.execPath, [path.join(__dirname, "..", "..", "bin", "spark-vllm.js"), "top", "--stack", stack.name, "--dir", dir, "--once", ...args],
        { encoding: "utf8", env: { ...process.env, ...stack.transport.env } }, (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr })));
}

test("two one-host replicas behind one endpoint: a load reaches both with no failure; a dead replica is passed over; destroy cleans", async () => {
    const s = suite.sim;
    const stack = suite.stack("replicas", { vllm: { tensorParallelSize: 1 }, model: MODEL });
    stack.config["spark-vllm:replicas"] = 2;
    // The chat completions each head's vLLM stand-in logged (uvicorn's access line, tests/sim/image/python/vllm/_sim_serve.py).
    const served = async () => Promise.all(s.hosts.map(async h =>
        Number((await s.exec(h.name, `grep -c '"POST /v1/chat/completions HTTP/1.1" 200' ${LOG} || true`)).stdout.trim() || 0)));
    try {
        // When each head's running vLLM started, in seconds since the epoch on that host (ps's elapsed time, whole seconds).
        // The supervisor's relaunch (after a kill) writes no pid file, so the process is found by its command line.
        const vllmStart = async (h: { name: string }) => {
            const r = await s.exec(h.name, `e=$(docker exec ${containerName(h.name)} ps -eo etimes=,args= | awk '/vllm serve/ && !/awk/ { print $1; exit }') && [ -n "$e" ] && echo $(( $(date +%s) - e ))`);
            assert.equal(r.code, 0, `${h.name}: no vllm serve running ${r.stderr}`);
            return Number(r.stdout.trim());
        };
        const vllmStarts = () => Promise.all(s.hosts.map(vllmStart));
        const vllmPid = async (h: { name: string }) =>
            (await s.exec(h.name, `docker exec ${containerName(h.name)} ps -eo pid=,args= | awk '/vllm serve/ && !/awk/ { print $1; exit }'`)).stdout.trim();
        // The drain and undrain lines (components/plan/rollout.ts) each replica's commands printed, from the stack's state.
        const rolloutLines = () => {
            const resources = Object.values(loadState(stack.statePath).resources);
            const line = (name: string) => {
                const e = resources.find(x => x.name === name);
                return e ? JSON.parse(String(e.outputs.stdout).trim().split("\n").pop()!) as { drainedAt?: number; undrainedAt?: number } : {};
            };
            return Object.fromEntries([1, 2].map(k => [k, { ...line(resourceNames(undefined, k).of("drain")), ...line(resourceNames(undefined, k).of("undrain")) }])) as
                Record<number, { drainedAt?: number; undrainedAt?: number }>;
        };
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        const { endpoint, apiKey, modelName } = r.outputs as Record<string, string>;
        assert.match(endpoint, new RegExp(`^http://${s.hosts[0].address.replace(/\./g, "\\.")}:8000/v1$`));
        // The outputs report each replica, with its own serving proof.
        const replicas = r.outputs?.replicas as Array<{ replica: number; hosts: string[]; head: string; serving?: unknown }>;
        assert.deepEqual(replicas.map(x => [x.replica, x.hosts, x.head]), s.hosts.map((h, i) => [i + 1, [h.name], h.name]));
        assert.ok(replicas.every(x => x.serving), "each replica's serving proof ran");
        // Each replica runs its own plain vllm serve on its own host (no Ray, no multi-node launch).
        for (const h of s.hosts) {
            const ps = await s.exec(h.name, `docker exec ${containerName(h.name)} ps -eo args`);
            assert.match(ps.stdout, /vllm serve .*--host 127\.0\.0\.1/, `${h.name}: ${ps.stdout}`);
            assert.doesNotMatch(ps.stdout, /--nnodes|--distributed-executor-backend|raylet/, h.name);
        }
        const before = await served();
        const failed = await load(endpoint, apiKey, modelName, 200, 4);
        const after = await served();
        const counts = after.map((n, i) => n - before[i]);
        console.log(`200 requests at concurrency 4: ${failed.length} failed; served by replica 1: ${counts[0]}, replica 2: ${counts[1]}`);
        assert.deepEqual(failed, []);
        assert.ok(counts[0] >= 20 && counts[1] >= 20, `both replicas served: ${counts}`);
        assert.equal(counts[0] + counts[1], 200, "every request was served exactly once");

        // `spark-vllm top --once` under a steady load (issue 49): each replica's figures from its head's /metrics, read
        // over SSH; both take requests (the front's round robin), tokens flow, each host's memory and GB10 are read.
        const topped = await loadThrough(() => topOnce(stack, ["--json"]), endpoint, apiKey, modelName);
        console.log(`--- spark-vllm top --once --json under load (exit ${topped.result.code}, ${topped.sent} requests sent):\n${topped.result.stdout}${topped.result.stderr}---`);
        assert.equal(topped.result.code, 0, topped.result.stderr);
        assert.deepEqual(topped.failed, []);
        const figures = JSON.parse(topped.result.stdout) as import("../../components/metrics/top").TopFigures;
        assert.deepEqual(figures.replicas.map(r => [r.replica, r.head, r.error]), [[1, s.hosts[0].name, undefined], [2, s.hosts[1].name, undefined]]);
        assert.ok(figures.rateSeconds !== null && figures.rateSeconds >= 2 && figures.rateSeconds < 30, `rate window ${figures.rateSeconds}`);
        for (const r of figures.replicas) {
            assert.ok(r.running !== null && r.running >= 0 && r.waiting !== null && r.waiting >= 0, JSON.stringify(r));
            assert.ok(r.kvCacheUsage !== null && r.kvCacheUsage >= 0 && r.kvCacheUsage <= 1, JSON.stringify(r));
            assert.ok(r.promptTokensPerSecond !== null && r.promptTokensPerSecond > 0, `replica ${r.replica} read prompts: ${JSON.stringify(r)}`);
            assert.ok(r.generationTokensPerSecond !== null && r.generationTokensPerSecond > 0, `replica ${r.replica} generated: ${JSON.stringify(r)}`);
            assert.ok(r.frontShare !== null && r.frontShare > 0.2 && r.frontShare < 0.8, `replica ${r.replica}'s share of the round robin: ${r.frontShare}`);
        }
        assert.ok(Math.abs(figures.replicas[0].frontShare! + figures.replicas[1].frontShare! - 1) < 0.01);
        for (const h of figures.hosts) {
            assert.equal(h.error, undefined, JSON.stringify(h));
            assert.ok(h.memAvailableGiB! > 0 && h.memAvailableGiB! <= h.memTotalGiB! && h.pageCacheGiB! >= 0, JSON.stringify(h));
            // The simulated GB10's nvidia-smi (tests/sim/host-bin/nvidia-smi): utilization 0 %, 40 C.
            assert.deepEqual([h.gpuUtilizationPercent, h.gpuTemperatureC], [0, 40], JSON.stringify(h));
        }
        const frame = await loadThrough(() => topOnce(stack, []), endpoint, apiKey, modelName);
        console.log(`--- spark-vllm top --once under load (exit ${frame.result.code}):\n${frame.result.stdout}${frame.result.stderr}---`);
        assert.equal(frame.result.code, 0, frame.result.stderr);
        for (const line of frame.result.stdout.split("\n")) assert.ok(line.length <= 80, `${line.length} columns: ${line}`);
        assert.match(frame.result.stdout, new RegExp(`^${s.hosts[1].name} +2 +[0-9.]+ GiB`, "m"));

        // Replica 2's vLLM dies (its supervisor relaunches it later): the front passes over it.
        const kill = await s.exec(s.hosts[1].name, `docker exec ${containerName(s.hosts[1].name)} sh -c 'kill -9 $(cut -d" " -f1 /var/tmp/spark-vllm/vllm-serve.pid)'`);
        assert.equal(kill.code, 0, kill.stderr);
        const beforeKill = await served();
        const whileDown = await load(endpoint, apiKey, modelName, 100, 4);
        const downCounts = (await served()).map((n, i) => n - beforeKill[i]);
        console.log(`100 requests with replica 2's vLLM killed: ${whileDown.length} failed; served by replica 1: ${downCounts[0]}, replica 2: ${downCounts[1]}`);
        assert.deepEqual(whileDown, []);
        assert.ok(downCounts[0] > downCounts[1], `replica 1 took the load while replica 2 was down: ${downCounts}`);
        const health = await fetch(`${endpoint.replace(/\/v1$/, "")}/health`, { signal: AbortSignal.timeout(10_000) });
        assert.equal(health.status, 200);
        // Without the key, the front refuses (and no replica is reached).
        const keyless = await fetch(`${endpoint}/models`, { signal: AbortSignal.timeout(10_000) });
        assert.equal(keyless.status, 401);

        // Replica 2's supervisor relaunches its vLLM; both serve again before the roll.
        const replica2Runs = async () => (await s.exec(s.hosts[1].name, `docker exec ${containerName(s.hosts[1].name)} ps -eo args | grep -q 'vllm serve'`)).code === 0;
        for (const backBy = Date.now() + 60_000; !(await replica2Runs()) && Date.now() < backBy;) await new Promise(r => setTimeout(r, 1000));
        assert.ok(await replica2Runs(), "replica 2's supervisor relaunched its vLLM");
        // A flag change relaunches the replicas one at a time (components/plan/rollout.ts) under a steady load through the
        // endpoint: no request fails, both replicas serve before and after, and replica 2 relaunched only once replica 1
        // was proven and back (the hosts' clocks: the drain and undrain lines from the front, each vLLM's start).
        (stack.config["spark-vllm:vllm"] as Record<string, unknown>).extraArgs = ["--enforce-eager"];
        // (Both served the loads above; a relaunch starts a new log, so the counts start again.)
        const started = await vllmStarts();
        const rolled = await loadThrough(() => up(stack), endpoint, apiKey, modelName);
        assert.equal(rolled.result.error, undefined, rolled.result.error);
        console.log(`${rolled.sent} requests at concurrency 4 through the rolling update: ${rolled.failed.length} failed`);
        assert.deepEqual(rolled.failed, []);
        assert.ok(rolled.sent >= 200, `a few hundred requests ran through the update: ${rolled.sent}`);
        const roll = rolloutLines();
        const relaunchedAt = await vllmStarts();
        console.log(`rolling update on the hosts' clocks: ${JSON.stringify(roll)}; vLLM started at ${relaunchedAt}`);
        assert.ok(relaunchedAt.every((t, i) => t > started[i]), "both replicas relaunched");
        // One after the other: replica 1 relaunched between its drain and its undrain, replica 2 after replica 1's undrain.
        // vLLM's start is read in whole seconds (ps etimes against date +%s), so it is compared with a second's slack.
        assert.ok(roll[1].drainedAt! <= roll[1].undrainedAt! && roll[1].undrainedAt! <= roll[2].drainedAt! && roll[2].drainedAt! <= roll[2].undrainedAt!, JSON.stringify(roll));
        assert.ok(relaunchedAt[0] >= roll[1].drainedAt! - 1 && relaunchedAt[0] <= roll[1].undrainedAt! + 1, "replica 1 relaunched while drained");
        assert.ok(relaunchedAt[1] >= roll[1].undrainedAt! - 1 && relaunchedAt[1] >= roll[2].drainedAt! - 1, "replica 2 relaunched after replica 1 was back");
        for (const h of s.hosts) assert.match((await s.exec(h.name, `docker exec ${containerName(h.name)} ps -eo args`)).stdout, /vllm serve .*--enforce-eager/, h.name);
        const afterRoll = await served();
        assert.deepEqual(await load(endpoint, apiKey, modelName, 100, 4), []);
        const afterRollCounts = (await served()).map((n, i) => n - afterRoll[i]);
        assert.ok(afterRollCounts.every(n => n >= 10), `both replicas serve after the roll: ${afterRollCounts}`);

        // A flag change whose relaunch fails on replica 1 (its vLLM dies while loading): up fails naming replica 1 and the
        // root cause from its log; the roll stops there, so replica 2 keeps serving the old version, and no request fails
        // (replica 1 stays out of the front proxy).
        await s.setFaults(s.hosts[0].name, { load_seconds: 3, crash_after_seconds: 1 });
        (stack.config["spark-vllm:vllm"] as Record<string, unknown>).extraArgs = ["--enforce-eager", "--max-num-seqs", "64"];
        const replica2Pid = await vllmPid(s.hosts[1]);
        assert.match(replica2Pid, /^\d+$/);
        const failing = await loadThrough(() => up(stack), endpoint, apiKey, modelName);
        const failedUp = failure(failing.result);
        assert.match(failedUp, /spark-replica\.1-/, "the failing resource is replica 1's");
        assert.match(failedUp, /illegal memory access/, "the root cause from replica 1's log");
        console.log(`${failing.sent} requests through the failed update: ${failing.failed.length} failed`);
        assert.deepEqual(failing.failed, [], "replica 1 was out of the proxy when it failed: no request reached it");
        const ps2 = (await s.exec(s.hosts[1].name, `docker exec ${containerName(s.hosts[1].name)} ps -eo args`)).stdout;
        assert.match(ps2, /vllm serve .*--enforce-eager/);
        assert.doesNotMatch(ps2, /--max-num-seqs 64/, "replica 2 keeps the old version");
        assert.equal(await vllmPid(s.hosts[1]), replica2Pid, "replica 2 was not relaunched");
        assert.equal(rolloutLines()[2].drainedAt, roll[2].drainedAt, "replica 2 was not drained");
        const meanwhile = await served();
        assert.deepEqual(await load(endpoint, apiKey, modelName, 50, 4), []);
        const meanwhileCounts = (await served()).map((n, i) => n - meanwhile[i]);
        assert.deepEqual(meanwhileCounts, [0, 50], "replica 2 alone serves while replica 1 is out");

        // `spark-vllm status` says so: replica 1 is down in the front proxy (and its vLLM dead), replica 2 serves the endpoint.
        const dir = path.dirname(stack.statePath);
        fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }));
        const status = spawnSync(process.execPath, [path.join(__dirname, "..", "..", "bin", "spark-vllm.js"), "status", "--stack", stack.name, "--dir", dir, "--json"],
            { encoding: "utf8", env: { ...process.env, ...stack.transport.env } });
        console.log(`--- spark-vllm status after the stopped roll (exit ${status.status}):\n${status.stdout}${status.stderr}---`);
        const report = JSON.parse(status.stdout) as { serving: boolean; replicas: Array<{ replica: number; serving: boolean; front: string }> };
        assert.equal(status.status, 0, "the endpoint serves (replica 2)");
        assert.deepEqual([report.serving, report.replicas.map(r => [r.replica, r.serving, r.front])], [true, [[1, false, "down"], [2, true, "in service"]]]);

        // The cause fixed, the relaunch the failure names (replica 1's memory gate: a plain up re-runs only the probe, as
        // with one replica, tests/e2e/relaunch.test.ts) resumes the roll: replica 1 comes back, then replica 2 relaunches.
        const gate = Object.keys(loadState(stack.statePath).resources).find(u => u.endsWith(`::${resourceNames().host(s.hosts[0].name, "memory")}`))!;
        assert.ok(new RegExp(`^  pulumi up -s ${stack.name} --replace '${gate.replace(/[.*+?^${}()|[\]\\$]/g, "\\$&")}'$`, "m").test(failedUp),
            `the hint relaunches replica 1 only: ${failedUp}`);
        await s.setFaults(s.hosts[0].name, null);
        const resumed = await loadThrough(() => up(stack, { replace: [gate] }), endpoint, apiKey, modelName);
        assert.equal(resumed.result.error, undefined, resumed.result.error);
        assert.deepEqual(resumed.failed, []);
        for (const h of s.hosts) assert.match((await s.exec(h.name, `docker exec ${containerName(h.name)} ps -eo args`)).stdout, /vllm serve .*--max-num-seqs 64/, h.name);
        const resumedRoll = rolloutLines();
        assert.ok(resumedRoll[1].undrainedAt! <= resumedRoll[2].drainedAt!, `replica 2 drained after replica 1 was back: ${JSON.stringify(resumedRoll)}`);
        const beforeFixed = await served();
        assert.deepEqual(await load(endpoint, apiKey, modelName, 100, 4), []);
        const fixedCounts = (await served()).map((n, i) => n - beforeFixed[i]);
        console.log(`100 requests after the fix: served by replica 1: ${fixedCounts[0]}, replica 2: ${fixedCounts[1]}`);
        assert.ok(fixedCounts.every(n => n >= 10), `both replicas serve again: ${fixedCounts}`);

        // An image change (issue 46). One whose kernels cannot run on the GB10 is refused by its proof on the hosts while
        // both replicas serve: up fails, no request fails, no container or vLLM is touched.
        const containerIds = () => Promise.all(s.hosts.map(async h => (await s.exec(h.name, `docker inspect -f '{{.Id}}' ${containerName(h.name)}`)).stdout.trim()));
        const idsBefore = await containerIds(), pidsBefore = await Promise.all(s.hosts.map(vllmPid));
        stack.config["spark-vllm:image"] = s.images["no-sm12x"];
        const refused = await loadThrough(() => up(stack), endpoint, apiKey, modelName);
        assert.match(failure(refused.result), /image-check[\s\S]*cannot run on this GPU \(compute capability 12\.1\)/);
        console.log(`${refused.sent} requests through the refused image's up: ${refused.failed.length} failed`);
        assert.deepEqual(refused.failed, []);
        assert.deepEqual(await containerIds(), idsBefore);
        assert.deepEqual(await Promise.all(s.hosts.map(vllmPid)), pidsBefore);
        // A good image: proven on both hosts, then rolled: replica 1's container replaced between its drain and undrain,
        // replica 2's only once replica 1 is back, with no failed request.
        stack.config["spark-vllm:image"] = s.images["ray-2.52"];
        const upgraded = await loadThrough(() => up(stack), endpoint, apiKey, modelName);
        assert.equal(upgraded.result.error, undefined, upgraded.result.error);
        console.log(`${upgraded.sent} requests through the rolled image change: ${upgraded.failed.length} failed`);
        assert.deepEqual(upgraded.failed, []);
        const op = (name: string) => upgraded.result.ops.find(o => o.name === name)!;
        assert.deepEqual(s.hosts.map(h => op(resourceNames().host(h.name, "container")).op), ["replace", "replace"]);
        // On the hosts' clocks (an op's span also holds the deletion of a replaced command's old copy, which the engine
        // runs at the end of the update): each new container was created between its replica's drain and undrain, and
        // replica 2's only after replica 1 was back.
        const created = await Promise.all(s.hosts.map(async h =>
            Date.parse((await s.exec(h.name, `docker inspect -f '{{.Created}}' ${containerName(h.name)}`)).stdout.trim()) / 1000));
        const imageRoll = rolloutLines();
        console.log(`image roll on the hosts' clocks: ${JSON.stringify(imageRoll)}; containers created at ${created}`);
        assert.ok(imageRoll[1].drainedAt! <= created[0] && created[0] <= imageRoll[1].undrainedAt!, "replica 1's container replaced while it was drained");
        assert.ok(imageRoll[1].undrainedAt! <= imageRoll[2].drainedAt! && imageRoll[2].drainedAt! <= created[1] && created[1] <= imageRoll[2].undrainedAt!,
            "replica 2's container replaced after replica 1 was back, while replica 2 was drained");
        const idsAfter = await containerIds();
        assert.ok(idsAfter.every((id, i) => id !== idsBefore[i]), "both containers run the new image");
        assert.deepEqual(await load(endpoint, apiKey, modelName, 40, 4), []);
    } finally {
        const d = await destroy(stack);
        assert.deepEqual(d.errors, []);
    }
    assert.deepEqual(await leftovers(s), []);
});
