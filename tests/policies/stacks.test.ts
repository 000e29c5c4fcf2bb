// The committed stacks pass the pack: the rules evaluated on the resources each Pulumi.<stack>.yaml produces,
// (1) built from the planner's plan as the components shape them and (2) recorded from the real program under mocks.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { findModel } from "../../components/knowledge/catalog";
import { planMemory } from "../../components/plan/memory";
import { COMMAND, CONTAINER } from "../../policies/rules";
import { OfflineResource, planResources, verdicts } from "../../policies/offline";
import { evaluateWithMocks, stackConfig } from "../harness/mocks";

type Res = OfflineResource;
const ROOT = path.join(__dirname, "..", "..");
const STACKS = fs.readdirSync(ROOT).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s);

/**
 * Every violation of every rule, as "rule: message", but two advisories tested on their own below: that hosts pin no
 * SSH host key (the committed stacks describe users' machines, whose keys only their owners can read), and that the
 * image's vLLM lacks its GB10 kernel for the model's quantization (the stacks on vLLM's CUDA 12.9 images).
 */
const violations = (resources: Res[]): string[] => verdicts(resources).flatMap(v => v.violations.map(m => `${v.policy}: ${m}`))
    .filter(v => !v.startsWith("ssh-host-keys-pinned: ") && !v.startsWith("quantization-kernels-on-gb10: "));

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

for (const stack of STACKS) {
    test(`Pulumi.${stack}.yaml pins no SSH host key: the advisory names each of its hosts and how to get the key`, () => {
        const config = stackConfig(stack);
        const [advisory] = verdicts(fromPlan(config)).filter(v => v.policy === "ssh-host-keys-pinned");
        assert.equal(advisory.enforcementLevel, "advisory");
        assert.equal(advisory.violations.length, 1);
        for (const h of config["spark-vllm:hosts"] as Array<{ ssh: { host: string } }>) assert.ok(advisory.violations[0].includes(h.ssh.host), h.ssh.host);
        assert.match(advisory.violations[0], /hosts\[\]\.ssh\.hostKey/);
    });
}

test("the committed FP8 stacks on vLLM's CUDA 12.9 images carry the kernel advisory, naming the -cu130 twin; the 0.33.0 stack does not", () => {
    const advisories = (stack: string) => verdicts(fromPlan(stackConfig(stack))).filter(v => v.policy === "quantization-kernels-on-gb10").flatMap(v => v.violations);
    const flagged = STACKS.filter(s => advisories(s).length > 0).sort();
    assert.deepEqual(flagged, ["spark", "spark-mp"]);
    const [spark] = advisories("spark");
    assert.match(spark, /^Qwen\/Qwen3\.5-122B-A10B-FP8 is fp8, but vllm\/vllm-openai:v0\.17\.1: .* for sm_120a only, which does not run on 12\.1/);
    assert.ok(spark.includes("vllm/vllm-openai:v0.17.1-cu130"), spark);
    assert.equal(verdicts(fromPlan(stackConfig("spark"))).find(v => v.policy === "quantization-kernels-on-gb10")?.enforcementLevel, "advisory");
    assert.deepEqual(advisories("spark-current"), []);
});

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
