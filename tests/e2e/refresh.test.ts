// `pulumi up --refresh` on the simulated Sparks (issue 14): the engine reads each resource through its provider before
// the update (tests/engine/refresh.ts). A worker's container stopped by hand: a plain `up` does not look and changes
// nothing; `up --refresh` finds it stopped (must_run read back as false) and the update starts the same container, whose
// supervisor relaunches Ray. Removed by hand: the refresh drops it from the state, the update creates it again and
// replaces the launches that follow it (their triggers hold its id). Remote commands are never read. Needs root.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { simSuite, completionStatus } from "./suite";
import { Report, changes, destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";

const suite = simSuite("refresh");
const CONTAINER = "docker:index/container:Container";
const WORKER = "spark-b";
const WORKER_CONTAINER = `spark-vllm-${WORKER}`;


/** Seconds until a completion answers 200 (the head's supervisor may be relaunching vLLM once the worker's Ray is back). */
async function serving(r: Report, what: string, limitSeconds = 300): Promise<number> {
    const t0 = Date.now();
    while ((await completionStatus(r)) !== 200) {
        if (Date.now() - t0 > limitSeconds * 1000) {
            const sup = await suite.sim.docker(WORKER, ["logs", "--tail", "30", WORKER_CONTAINER]);
            assert.fail(`${what}: not serving within ${limitSeconds} s\nworker supervisor:\n${sup.stdout}${sup.stderr}`);
        }
        await new Promise(res => setTimeout(res, 1000)); // poll interval of this wait for the condition (1 s: the figure's resolution)
    }
    return Math.round((Date.now() - t0) / 100) / 10;
}

const inspect = async (format: string) => (await suite.sim.docker(WORKER, ["inspect", "-f", format, WORKER_CONTAINER])).stdout.trim();
const summary = (r: Report) => changes(r).map(o => `${o.op} ${o.name}`);

test("up --refresh: a stopped container is started in place, a removed one created again; commands are not read; destroy leaves nothing", async () => {
    const stack = suite.stack("refresh");
    try {
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        assert.equal(await completionStatus(r), 200);
        const id = await inspect("{{.Id}}");

        // restart: unless-stopped keeps a container stopped by hand stopped.
        assert.equal((await suite.sim.docker(WORKER, ["stop", WORKER_CONTAINER])).code, 0);
        const plain = await up(stack);
        assert.equal(plain.error, undefined, plain.error);
        assert.equal(plain.refresh, undefined);
        assert.deepEqual(changes(plain), [], "without --refresh the engine reads nothing: the stopped container goes unnoticed");
        assert.equal(await inspect("{{.State.Running}}"), "false");

        const started = await up(stack, { refresh: true });
        assert.equal(started.error, undefined, started.error);
        const read = (started.refresh ?? []).filter(s => s.op !== "same");
        assert.deepEqual(read.map(s => [s.op, s.type]), [["update", CONTAINER]], "only the stopped container reads differently");
        assert.match(read[0].name, new RegExp(WORKER));
        assert.ok((started.refresh ?? []).some(s => s.type === "command:remote:Command"), "commands have refresh steps, which change nothing");
        assert.deepEqual(changes(started).map(o => [o.op, o.type]), [["update", CONTAINER]], summary(started).join(", "));
        assert.equal(await inspect("{{.Id}}"), id, "the same container");
        assert.equal(await inspect("{{.State.Running}}"), "true");
        console.log(`serving again ${await serving(started, "stopped worker started by up --refresh")} s after up --refresh`);

        assert.equal((await suite.sim.docker(WORKER, ["rm", "-f", WORKER_CONTAINER])).code, 0);
        const created = await up(stack, { refresh: true });
        assert.equal(created.error, undefined, created.error);
        assert.deepEqual((created.refresh ?? []).filter(s => s.op !== "same").map(s => [s.op, s.type]), [["delete", CONTAINER]]);
        const ops = changes(created);
        assert.ok(ops.some(o => o.op === "create" && o.type === CONTAINER && o.name.includes(WORKER)), summary(created).join(", "));
        assert.ok(ops.some(o => o.op === "replace" && o.type === "command:remote:Command" && o.name.includes(WORKER)),
            `the worker's launches follow its container's id and run again: ${summary(created).join(", ")}`);
        assert.notEqual(await inspect("{{.Id}}"), id);
        console.log(`serving again ${await serving(created, "removed worker created again by up --refresh")} s after up --refresh`);

        const quiet = await up(stack, { refresh: true });
        assert.equal(quiet.error, undefined, quiet.error);
        assert.deepEqual((quiet.refresh ?? []).filter(s => s.op !== "same"), []);
        assert.deepEqual(changes(quiet), [], "a healthy stack's refresh and update change nothing");
    } finally {
        const d = await destroy(stack);
        assert.equal(d.error, undefined, d.error);
        assert.deepEqual(await leftovers(suite.sim), []);
    }
});
