// The preview's steps against a test-engine state file (tests/grpc/steps.ts): unchanged resources answer
// with their old outputs (so dependents stay known), changed ones answer as a preview does (unknown
// outputs), and what the program no longer registers is deleted, last registered first.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { StepPlanner } from "../../grpc/steps";
import type { Registration } from "../../grpc/monitor";
import { decode } from "../../grpc/wire";
import type { State } from "../../engine/state";

const COMMAND = "command:remote:Command";

function reg(name: string, wire: Record<string, any>, type = COMMAND): Registration {
    return { urn: `urn:pulumi:s::p::${type}::${name}`, type, name, custom: true, inputs: decode(wire), wire, dependencies: [], propertyDependencies: {},
        deleteBeforeReplace: false, additionalSecretOutputs: [], ignoreChanges: [], replaceOnChanges: [], seq: 0 };
}

const state: State = {
    resources: {
        [`urn:pulumi:s::p::${COMMAND}::same`]: { urn: `urn:pulumi:s::p::${COMMAND}::same`, dependencies: [], type: COMMAND, name: "same", id: "same-1", inputs: { create: "a", triggers: ["a"] }, outputs: { create: "a", triggers: ["a"], stdout: "{\"ok\":true}" }, seq: 0 },
        [`urn:pulumi:s::p::${COMMAND}::text`]: { urn: `urn:pulumi:s::p::${COMMAND}::text`, dependencies: [], type: COMMAND, name: "text", id: "text-1", inputs: { create: "a", triggers: ["t"] }, outputs: {}, seq: 1 },
        [`urn:pulumi:s::p::${COMMAND}::trig`]: { urn: `urn:pulumi:s::p::${COMMAND}::trig`, dependencies: [], type: COMMAND, name: "trig", id: "trig-1", inputs: { create: "a", triggers: ["a"] }, outputs: {}, seq: 2 },
        [`urn:pulumi:s::p::${COMMAND}::gone1`]: { urn: `urn:pulumi:s::p::${COMMAND}::gone1`, dependencies: [], type: COMMAND, name: "gone1", id: "g1", inputs: {}, outputs: {}, seq: 3 },
        [`urn:pulumi:s::p::${COMMAND}::gone2`]: { urn: `urn:pulumi:s::p::${COMMAND}::gone2`, dependencies: [], type: COMMAND, name: "gone2", id: "g2", inputs: {}, outputs: {}, seq: 4 },
    },
};

describe("preview steps against a state file", () => {
    it("same answers with the old id and outputs; update and replace follow the providers' rules; unknown inputs count as changed", async () => {
        const p = new StepPlanner(state);
        const same = await p.onRegister(reg("same", { create: "a", triggers: ["a"] }));
        assert.deepEqual(same, { id: "same-1", outputs: { create: "a", triggers: ["a"], stdout: "{\"ok\":true}" } });
        const update = await p.onRegister(reg("text", { create: "b", triggers: ["t"] }));
        assert.equal(update.id, "text-1", "an update keeps its id in preview (step.go UpdateStep.Apply)");
        await p.onRegister(reg("trig", { create: "a", triggers: ["04da6b54-80e4-46f7-96ec-b56ff0331ba9"] }));
        await p.onRegister(reg("new", { create: "n", triggers: ["n"] }));
        assert.deepEqual(p.steps.map(s => [s.name, s.op]), [["same", "same"], ["text", "update"], ["trig", "replace"], ["new", "create"]]);
        assert.deepEqual(p.deletes().map(s => s.name), ["gone2", "gone1"]);
    });

    it("without a state every resource is created", async () => {
        const p = new StepPlanner();
        await p.onRegister(reg("x", { create: "a" }));
        assert.deepEqual(p.steps.map(s => s.op), ["create"]);
        assert.deepEqual(p.deletes(), []);
    });

    it("a command updated in preview keeps its id, so what follows it (its id in their triggers) stays the same", async () => {
        const p = new StepPlanner(state);
        const pre = await p.onRegister(reg("text", { create: "changed", triggers: ["t"] }));
        await p.onRegister(reg("follower", { create: "f", triggers: ["f", pre.id] }));
        const followerState: State = { resources: { ...state.resources, [`urn:pulumi:s::p::${COMMAND}::follower`]:
            { urn: `urn:pulumi:s::p::${COMMAND}::follower`, dependencies: [], type: COMMAND, name: "follower", id: "f-1", inputs: { create: "f", triggers: ["f", "text-1"] }, outputs: {}, seq: 5 } } };
        const q = new StepPlanner(followerState);
        const again = await q.onRegister(reg("text", { create: "changed", triggers: ["t"] }));
        await q.onRegister(reg("follower", { create: "f", triggers: ["f", again.id] }));
        assert.deepEqual(q.steps.map(s => [s.name, s.op]), [["text", "update"], ["follower", "same"]]);
    });
});
