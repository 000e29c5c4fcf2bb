// The committed stacks pass the pack: the rules evaluated on the resources each Pulumi.<stack>.yaml produces,
// (1) built from the planner's plan as the components shape them and (2) recorded from the real program under mocks.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import { parseSpec } from "../../components/spec";
import { planCluster } from "../../components/plan";
import { findModel } from "../../components/catalog";
import { planMemory } from "../../components/memory";
import { COMMAND, CONTAINER } from "../../policies/rules";
import { OfflineResource, planResources, verdicts } from "../../policies/offline";
import { evaluateWithMocks, stackConfig } from "../harness/mocks";

type Res = OfflineResource;
const ROOT = path.join(__dirname, "..", "..");
const STACKS = fs.readdirSync(ROOT).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s);

/** Every violation of every rule, as "rule: message". */
const violations = (resources: Res[]): string[] => verdicts(resources).flatMap(v => v.violations.map(m => `${v.policy}: ${m}`));

const rawOf = (config: Record<string, unknown>) => Object.fromEntries(Object.entries(config).map(([k, v]) => [k.replace(/^spark-vllm:/, ""), v]));

const fromPlan = (config: Record<string, unknown>): Res[] => planResources(planCluster(parseSpec(rawOf(config)), "# tools"));

test("committed stacks exist", () => assert.ok(STACKS.includes("spark"), `stacks: ${STACKS.join(", ")}`));

for (const stack of STACKS) {
    test(`Pulumi.${stack}.yaml: the planner's resources pass every rule`, () => {
        assert.deepEqual(violations(fromPlan(stackConfig(stack))), []);
    });

    test(`Pulumi.${stack}.yaml: the real program's resources (recording mocks, preview) pass every rule`, () => {
        const { resources, error } = evaluateWithMocks(stackConfig(stack), { stack, preview: true });
        assert.equal(error, undefined);
        const rs: Res[] = resources.map(r => ({ type: r.type, name: r.name, urn: `urn:pulumi:${stack}::spark-vllm::${r.type}::${r.name}`, props: r.inputs }));
        assert.ok(rs.some(r => r.type === CONTAINER) && rs.some(r => r.type === COMMAND && /vllm serve/.test(r.props.create)));
        assert.deepEqual(violations(rs), []);
    });
}

test("Pulumi.spark.yaml: the memory plan is the README's (Qwen3.5-122B-A10B-FP8, 2 × Spark, TP=2, 0.85, 32768)", () => {
    const spec = parseSpec(rawOf(stackConfig("spark")));
    const plan = planMemory(spec, findModel(spec.model.id));
    assert.equal(plan.kind, "plan");
    if (plan.kind !== "plan") return;
    assert.equal(plan.kvTokens, 3846771);
    assert.ok(plan.weightsFit && plan.maxModelLenFits && plan.hostHeadroomOk);
});

test("Pulumi.spark.yaml with the vLLM 0.14 image of the incident is refused before launch", () => {
    const config = { ...stackConfig("spark") } as Record<string, any>;
    config["spark-vllm:image"] = `vllm/vllm-openai:v0.14.0@sha256:${"0".repeat(64)}`;
    config["spark-vllm:vllm"] = { ...config["spark-vllm:vllm"], version: "0.14.0" };
    const v = violations(fromPlan(config));
    assert.equal(v.length, 1);
    assert.match(v[0], /^vllm-supports-architecture: vLLM 0\.14\.0 .* does not know Qwen3_5MoeForConditionalGeneration/);
});
