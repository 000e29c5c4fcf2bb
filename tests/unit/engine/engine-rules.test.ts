// The test engine's rules taken from the real engine and providers (tests/engine/rules.ts; sources in
// tests/engine/README.md), each on its own.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Node, WILL_CHANGE, Workers, commandText, defaultParallel, deleteOrder, dependentReplacements } from "../../engine/rules";
import { Entry, diff } from "../../engine/state";

const CMD = "command:remote:Command", CONTAINER = "docker:index/container:Container";

function node(name: string, type: string, seq: number, inputs: Record<string, any>, deps: Record<string, string[]> = {}, extra: Partial<Node> = {}): Entry {
    const propertyDependencies = Object.fromEntries(Object.entries(deps).map(([k, v]) => [k, v.map(n => `urn:${n}`)]));
    return { urn: `urn:${name}`, type, name, id: `${name}-id`, inputs, outputs: {}, seq, propertyDependencies,
        dependencies: [...new Set(Object.values(propertyDependencies).flat())], ...extra } as Entry;
}

describe("replacement order: the dependents a delete-before-replace resource takes with it", () => {
    // container ← launch (triggers from the container: replaced) ← probe (triggers from the launch: replaced)
    //           ← note  (only its create text uses the container: updated, so it stays)
    //           ← other (dependsOn only, no property from it: stays)
    const container = node("container", CONTAINER, 0, { image: "a" });
    const launch = node("launch", CMD, 1, { create: "start", delete: "stop", triggers: ["container-id"] }, { triggers: ["container"] });
    const note = node("note", CMD, 2, { create: "echo container-id" }, { create: ["container"] });
    const probe = node("probe", CMD, 3, { create: "probe", triggers: ["launch-id"] }, { triggers: ["launch"] });
    const other = node("other", CMD, 4, { create: "x" }, {}, { dependencies: ["urn:container"] });
    const state = [probe, other, note, launch, container];
    const wouldReplace = (n: Entry, inputs: Record<string, any>) => diff(n.type, n, inputs) === "replace";

    it("are the transitive dependents the provider's diff replaces once their inputs from a replaced resource are unknown, in dependency order", () => {
        assert.deepEqual(dependentReplacements(container, state, new Set(), wouldReplace).map(n => n.name), ["launch", "probe"]);
    });
    it("skip what this run has already registered", () => {
        assert.deepEqual(dependentReplacements(container, state, new Set(["urn:probe"]), wouldReplace).map(n => n.name), ["launch"]);
    });
    it("include everything whose provider is replaced", () => {
        const provider = node("provider", "pulumi:providers:docker", 0, {});
        const managed = node("managed", CONTAINER, 1, { image: "a" }, {}, { provider: "urn:provider::provider-id" });
        assert.deepEqual(dependentReplacements(provider, [provider, managed], new Set(), () => false).map(n => n.name), ["managed"]);
    });
    it("ask the provider's diff with the changing inputs unknown", () => {
        const seen: Array<Record<string, any>> = [];
        dependentReplacements(container, state, new Set(), (n, inputs) => { seen.push(inputs); return false; });
        assert.deepEqual(seen[0], { create: "start", delete: "stop", triggers: WILL_CHANGE });
    });
});

describe("end-of-update deletes", () => {
    it("run last-registered first (dependents before what they depend on)", () => {
        const a = node("a", CMD, 0, {}), b = node("b", CMD, 5, {}), c = node("c", CMD, 2, {});
        assert.deepEqual(deleteOrder([a, b, c]).map(n => n.name), ["b", "c", "a"]);
    });
});

describe("parallelism as the CLI caps it", () => {
    it("defaults to 4 per CPU, or PULUMI_PARALLEL", () => {
        assert.equal(defaultParallel({}, 2), 8);
        assert.equal(defaultParallel({ PULUMI_PARALLEL: "3" }, 2), 3);
        assert.equal(defaultParallel({ PULUMI_PARALLEL: "0" }, 2), 8);
    });
    it("never runs more steps at once than the cap", async () => {
        const w = new Workers(2);
        let now = 0, most = 0;
        await Promise.all(Array.from({ length: 7 }, () => w.run(async () => {
            most = Math.max(most, ++now);
            await new Promise(r => setTimeout(r, 5)); // each step stays busy a moment, so steps overlap if the cap lets them
            now--;
        })));
        assert.equal(most, 2);
        assert.equal(w.peak, 2);
    });
});

describe("what a remote.Command step runs", () => {
    const cmd = { create: "c", update: "u", delete: "d" };
    it("an update runs `update`, or else `create` again", () => {
        assert.equal(commandText("update", cmd), "u");
        assert.equal(commandText("update", { create: "c" }), "c");
    });
    it("a create and a replacement run `create`, a delete `delete`, an unchanged resource nothing", () => {
        assert.deepEqual(["create", "replace", "delete", "same"].map(op => commandText(op as any, cmd)), ["c", "c", "d", undefined]);
    });
});
