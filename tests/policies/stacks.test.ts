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
import { COMMAND, CONTAINER, REMOTE_IMAGE, UNKNOWN, policies } from "../../policies/rules";
import { evaluateWithMocks, stackConfig } from "../harness/mocks";

type Res = { type: string; name: string; urn: string; props: Record<string, any> };
const ROOT = path.join(__dirname, "..", "..");
const STACKS = fs.readdirSync(ROOT).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s);

/** Every violation of every rule, as "rule: message". */
function violations(resources: Res[]): string[] {
    const out: string[] = [];
    for (const p of policies) {
        const report = (m: string) => out.push(`${p.name}: ${m}`);
        if ("validateStack" in p && p.validateStack) p.validateStack({ resources, getConfig: () => ({}) } as any, report);
        else for (const r of resources) for (const fn of [("validateResource" in p && p.validateResource) || []].flat()) fn({ ...r, getConfig: () => ({}) } as any, report);
    }
    return out;
}

const rawOf = (config: Record<string, unknown>) => Object.fromEntries(Object.entries(config).map(([k, v]) => [k.replace(/^spark-vllm:/, ""), v]));

/** Resources as the components build them from the plan, with preview's unknowns where outputs feed inputs. */
function fromPlan(config: Record<string, unknown>): Res[] {
    const plan = planCluster(parseSpec(rawOf(config)), "# tools");
    const res = (type: string, name: string, props: Record<string, any>): Res => ({ type, name, urn: `urn:pulumi:stack::spark-vllm::${type}::${name}`, props });
    const cmd = (name: string, c: { create: string; delete?: string; stdin?: string }) =>
        res(COMMAND, name, { create: c.create, ...(c.delete ? { delete: c.delete } : {}), ...(c.stdin ? { stdin: UNKNOWN } : {}) });
    return [
        ...plan.hosts.flatMap(h => [
            res(REMOTE_IMAGE, `${h.host.name}-image`, { name: h.container.image, platform: h.container.platform }),
            res(CONTAINER, `${h.host.name}-container`, {
                name: h.container.name, image: UNKNOWN, entrypoints: h.container.entrypoint, command: h.container.command,
                envs: h.container.env.map(([k, v]) => `${k}=${v}`), networkMode: h.container.networkMode, ipcMode: h.container.ipcMode,
                gpus: h.container.gpus, capabilities: { adds: h.container.capabilities }, devices: h.container.devices, ulimits: h.container.ulimits,
                labels: h.container.labels.map(([label, value]) => ({ label, value })),
            }),
            cmd(`${h.host.name}-preflight`, h.preflight),
            cmd(`${h.host.name}-ray`, h.rayLaunch),
        ]),
        cmd("ray-probe", plan.rayProbe), cmd("compat", plan.compat), cmd("launch", plan.vllmLaunch), cmd("probe", plan.endpointProbe),
    ];
}

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
