// The faithful engine's replacement order on the simulated Sparks (tests/engine/README.md): a container-replacing
// change (shmSizeMb) stops vLLM and Ray in the OLD containers (their launches' deletes, with their old state, last
// dependent first) before the containers go, and re-runs the compatibility check in the new head container.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { simSuite } from "./suite";
import { EngineEvent, changes, destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";
import { resourceNames } from "../../components/plan/naming";

const N = resourceNames();
const suite = simSuite("order");

describe("a container-replacing change under the faithful engine", () => {
    test("deletes the launches in the old containers first (vLLM before Ray), then replaces the containers, then re-runs compat and relaunches", async () => {
        const stack = suite.stack("shm");
        const first = await up(stack);
        assert.equal(first.error, undefined, first.error);
        stack.config["spark-vllm:shmSizeMb"] = 12288;
        const events: EngineEvent[] = [];
        const r = await up(stack, { onEvent: e => { if (e.kind !== "line") events.push(e); } });
        assert.equal(r.error, undefined, r.error);
        const at = (kind: string, op: string, name: string) => events.findIndex(e => e.kind === kind && "op" in e && e.op === op && e.name === name);
        const vllmStop = at("end", "delete", N.of("vllm-launch"));
        const rayHeadStop = at("end", "delete", N.of("ray-head"));
        const workerStop = at("end", "delete", N.host("spark-b", "ray"));
        const containerDone = Math.min(at("end", "replace", N.host("spark-a", "container")), at("end", "replace", N.host("spark-b", "container")));
        for (const [what, i] of Object.entries({ vllmStop, rayHeadStop, workerStop })) assert.ok(i >= 0, `${what}: no delete ahead of the containers`);
        assert.ok(vllmStop < rayHeadStop && vllmStop < workerStop, "vLLM is stopped before the Ray it runs on");
        assert.ok(Math.max(vllmStop, rayHeadStop, workerStop) < containerDone, "the launches are deleted before the containers are replaced");
        const replaced = changes(r).filter(o => o.op === "replace").map(o => o.name);
        for (const n of [N.host("spark-a", "container"), N.host("spark-b", "container"), N.of("compat"), N.of("ray-head"), N.of("vllm-launch")])
            assert.ok(replaced.includes(n), `${n} was not replaced (replaced: ${replaced.join(", ")})`);
        const compat = r.ops.find(o => o.name === N.of("compat"))!;
        assert.ok(compat.actions >= 1, "the compatibility check ran again in the new head container");
        const serving = await suite.sim.exec("spark-a", "pgrep -fc --ns $$ --nslist net '[v]llm serve' || true");
        assert.equal(serving.stdout.trim(), "1", "one vllm serve on the head");
        const again = await up(stack);
        assert.deepEqual(changes(again), []);
        assert.deepEqual((await destroy(stack)).errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
    });
});
