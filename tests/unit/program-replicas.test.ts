// The program under mocks with spark-vllm:replicas 2 (issue 39): it registers exactly the planned resources of every
// replica (names with replica.<k>, the front proxy and each other replica's own), with their inputs and trigger wiring.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { setPath } from "../../bin/diff-command";
import { stackOwner } from "../../bin/shared";
import { COMMAND, plannedResources } from "../../components/plan/resources";
import { evaluateWithMocks, stackConfig } from "../harness/mocks";
import { assertRegistersThePlan } from "../harness/registration";

const ROOT = path.join(__dirname, "..", "..");
const NS = "spark-vllm:";
const raw = (config: Record<string, unknown>) => Object.fromEntries(Object.entries(config).map(([k, v]) => [k.slice(NS.length), v]));
const cfg = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [NS + k, v]));

// Four hosts as two TP=2 replicas (Ray), and two hosts as two one-host replicas.
const cases: Array<[string, Array<[string, unknown]>]> = [
    ["qwen3-235b-4x", [["replicas", 2], ["vllm.pipelineParallelSize", 1], ["model.id", "meta-llama/Llama-3.3-70B-Instruct"], ["model.servedName", "llama"]]],
    ["spark", [["replicas", 2], ["vllm.tensorParallelSize", 1], ["model.id", "openai/gpt-oss-120b"], ["model.servedName", "gpt-oss"]]],
];

for (const [stack, sets] of cases) {
    test(`Pulumi.${stack}.yaml as ${sets[0][1]} replicas: the program registers exactly the planned resources, inputs and trigger wiring`, () => {
        const r = sets.reduce((acc, [k, v]) => setPath(acc, k, v), raw(stackConfig(stack)));
        const e = evaluateWithMocks(cfg(r), { stack, preview: true });
        assert.equal(e.error, undefined, String(e.error));
        const recorded = new Map(e.resources.filter(x => !x.type.startsWith("spark-vllm:index:") && x.type !== "pulumi:pulumi:Stack").map(x => [x.name, x]));
        const planned = plannedResources(planCluster(parseSpec(r), undefined, { owner: stackOwner(ROOT, stack) }));
        assert.ok(planned.some(p => p.name === "spark-replica.2-vllm-launch") && planned.some(p => p.name === "spark-replica.2-proxy"));
        assertRegistersThePlan(recorded, planned, ["spark-api-key", "spark-ray-token"]);
        // The front balances over its own vLLM and the second replica's proxy, which listens on that head's fabric address.
        const front = recorded.get("spark-proxy-conf")!.inputs.create as string;
        const second = planned.find(p => p.name === "spark-replica.2-proxy-conf")!;
        const hosts = parseSpec(r).hosts;
        const secondHead = hosts[hosts.length / 2];
        assert.ok(front.includes(`server ${secondHead.fabric.address}:8000 max_fails=1 fail_timeout=10s;`), "front upstream names replica 2's proxy");
        assert.ok(second.type === COMMAND && second.inputs.create.includes(`listen ${secondHead.fabric.address}:8000;`));
        assert.equal(second.host, secondHead.name);
    });
}
