// `spark-vllm diff`: its resource table and trigger wiring against the real program under mocks, so they
// cannot drift from components/*.ts; its verdicts for typical changes; the CLI; the README's example.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../components/spec";
import { planCluster } from "../../components/plan";
import { diffPlans, setPath } from "../../bin/diff-command";
import { COMMAND, plannedResources } from "../../components/resources";
import { Evaluation, evaluateWithMocks, stackConfig } from "../harness/mocks";

const ROOT = path.join(__dirname, "..", "..");
const NS = "spark-vllm:";
const raw = (config: Record<string, unknown>) => Object.fromEntries(Object.entries(config).map(([k, v]) => [k.slice(NS.length), v]));
const cfg = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [NS + k, v]));
const planOf = (r: Record<string, unknown>) => planCluster(parseSpec(r));
const evaluations = new Map<string, Evaluation>();
const evaluate = (stack: string, r: Record<string, unknown>, manifestOverrides?: Record<string, Record<string, number>>) => {
    const key = JSON.stringify([stack, r, manifestOverrides]);
    if (!evaluations.has(key)) evaluations.set(key, evaluateWithMocks(cfg(r), { stack, preview: true, manifestOverrides }));
    const e = evaluations.get(key)!;
    assert.equal(e.error, undefined);
    return new Map(e.resources.filter(x => !x.type.startsWith("spark-vllm:index:") && x.type !== "pulumi:pulumi:Stack").map(x => [x.name, x]));
};
const flat = (v: unknown): unknown[] => (Array.isArray(v) ? v.flatMap(flat) : [v]);
/** Values in a command's triggers that are neither its own plan text nor a resource id, and what they derive from. */
const DERIVED: Record<string, (hosts: string[]) => string[]> = {
    "spark-model-compat": hosts => hosts.map(h => `spark-${h}-weights`), // the agreed weights manifest's fingerprint
    "spark-model-launch": () => ["spark-api-key"], // the API key's digest
};

for (const [stack, key, value] of [["spark"], ["qwen3-235b-4x"], ["spark", "model.weights", "head-then-copy"], ["spark", "imageSource", "head"]]) {
    test(`Pulumi.${stack}.yaml${key ? ` with ${key} ${value}` : ""}: diff's resource table and trigger wiring are the real program's`, () => {
        const r = key ? setPath(raw(stackConfig(stack)), key, value) : raw(stackConfig(stack));
        const plan = planOf(r);
        const recorded = evaluate(stack, r);
        const planned = plannedResources(plan);
        assert.deepEqual(planned.map(p => p.name).sort(), [...recorded.keys()].sort());
        for (const p of planned) {
            const rec = recorded.get(p.name)!;
            assert.equal(p.type, rec.type, p.name);
            for (const [key, value] of Object.entries(p.inputs)) {
                if (key === "triggers") continue;
                assert.deepEqual(value, rec.inputs[key], `${p.name}.${key}`);
            }
            if (p.type !== COMMAND) continue;
            const triggers = flat(rec.inputs.triggers);
            const own = p.inputs.triggers as unknown[];
            assert.deepEqual(triggers.slice(0, own.length), own, `${p.name}: triggers start with its own plan text`);
            const rest = triggers.slice(own.length);
            const ids = rest.filter(t => typeof t === "string" && t.endsWith("-id") && recorded.has(t.slice(0, -3))).map(t => (t as string).slice(0, -3));
            const derived = DERIVED[p.name]?.(plan.hosts.map(h => h.host.name)) ?? [];
            assert.equal(rest.length - ids.length, derived.length ? 1 : 0, `${p.name}: unexpected trigger values ${JSON.stringify(rest)}`);
            assert.deepEqual([...ids, ...derived].sort(), [...p.replacedWith].sort(), `${p.name}: trigger wiring`);
        }
    });
}

test("the weights fingerprint really is in compat's triggers (diff: compat follows every host's weights)", () => {
    const r = raw(stackConfig("spark"));
    const files = { "config.json": 100, "model-00001-of-00002.safetensors": 7 };
    const changed = evaluate("spark", r, { "spark-spark-a-weights": files, "spark-spark-b-weights": files });
    assert.notDeepEqual(changed.get("spark-model-compat")!.inputs.triggers, evaluate("spark", r).get("spark-model-compat")!.inputs.triggers);
});

/** Per resource, the inputs that differ between two mocks evaluations. */
function recordedChanges(stack: string, before: Record<string, unknown>, after: Record<string, unknown>): Record<string, string[]> {
    const a = evaluate(stack, before), b = evaluate(stack, after);
    const out: Record<string, string[]> = {};
    for (const [name, rb] of b) {
        const ra = a.get(name);
        const keys = [...new Set([...Object.keys(ra?.inputs ?? {}), ...Object.keys(rb.inputs)])].filter(k => JSON.stringify(ra?.inputs[k]) !== JSON.stringify(rb.inputs[k]));
        if (keys.length) out[name] = keys.sort();
    }
    return out;
}

const CHANGES: Array<[string, string, unknown, string[]]> = [
    // [label, key, value, resources replaced]
    ["one vLLM flag", "vllm.extraArgs", ["--enable-prefix-caching"], ["spark-model-launch", "spark-model-probe"]],
    ["maxModelLen", "vllm.maxModelLen", 65536, ["spark-model-launch", "spark-model-probe"]],
    ["the served name", "model.servedName", "qwen", ["spark-model-launch", "spark-model-probe"]],
    ["the image", "image", `vllm/vllm-openai:v0.17.2@sha256:${"1".repeat(64)}`, [
        "spark-spark-a-image", "spark-spark-a-container", "spark-spark-a-weights", "spark-spark-b-image", "spark-spark-b-container",
        "spark-spark-b-weights", "spark-model-compat", "spark-ray-head-launch", "spark-ray-spark-b-launch", "spark-ray-head-probe",
        "spark-model-launch", "spark-model-probe"]],
    ["a worker's fabric address", "hosts[1].fabric.address", "192.168.100.12", [
        "spark-spark-b-preflight", "spark-spark-b-container", "spark-spark-b-weights", "spark-model-compat", "spark-ray-spark-b-launch",
        "spark-ray-head-probe", "spark-model-launch", "spark-model-probe"]],
];

for (const [label, key, value, replaced] of CHANGES) {
    test(`diff of ${label}: the same input changes as the program under mocks, and the right replacements`, () => {
        const before = raw(stackConfig("spark"));
        const after = setPath(before, key, value);
        const changes = diffPlans(planOf(before), planOf(after));
        const fromDiff = Object.fromEntries(changes.filter(c => c.inputs.length).map(c => [c.name, [...c.inputs].sort()]));
        assert.deepEqual(fromDiff, recordedChanges("spark", before, after));
        assert.deepEqual(changes.filter(c => c.op === "replace").map(c => c.name).sort(), [...replaced].sort());
        assert.deepEqual(changes.filter(c => c.op !== "replace" && c.op !== "same"), []);
    });
}

test("a flag change: only spark-model-launch's inputs change; a worker's ssh port relaunches Ray there and everything after it", () => {
    const before = raw(stackConfig("spark"));
    const flag = diffPlans(planOf(before), planOf(setPath(before, "vllm.extraArgs", ["--enable-prefix-caching"])));
    assert.deepEqual(flag.filter(c => c.inputs.length).map(c => [c.name, c.inputs]), [["spark-model-launch", ["create", "triggers"]]]);
    const port = diffPlans(planOf(before), planOf(setPath(before, "hosts[1].ssh.port", 2222)));
    assert.deepEqual(port.filter(c => c.op !== "same").map(c => [c.name, c.op]),
        [["spark-spark-b-docker", "update"], ["spark-spark-b-tools", "update"], ["spark-spark-b-preflight", "update"], ["spark-spark-b-weights", "update"],
            ["spark-ray-spark-b-launch", "replace"], ["spark-ray-head-probe", "replace"], ["spark-model-launch", "replace"], ["spark-model-probe", "replace"]]);
});

const cli = (args: string[]) => spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), ...args], { cwd: ROOT, encoding: "utf8" });

test("spark-vllm diff prints the replaced resources and the flag as a unified diff; the README shows that output", () => {
    const r = cli(["diff", "--stack", "spark", "--set", 'vllm.extraArgs=["--enable-prefix-caching"]']);
    assert.equal(r.status, 0, r.stderr);
    for (const line of ["+- spark-model-launch", "+- spark-model-probe", "+++ vllm serve (vllm.extraArgs=[\"--enable-prefix-caching\"])", "   --max-model-len 32768", "+  --enable-prefix-caching", "every mandatory policy passes with the change"])
        assert.ok(r.stdout.includes(line), `missing: ${line}\n${r.stdout}`);
    const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
    const example = /\$ npx spark-vllm diff --stack spark --set 'vllm\.extraArgs=\["--enable-prefix-caching"\]'\n([\s\S]*?)```/.exec(readme);
    assert.ok(example, "README shows an example of spark-vllm diff for a flag change");
    for (const line of example[1].split("\n").filter(l => /^ *(\+-|~ |[-+@] ?)/.test(l)))
        assert.ok(r.stdout.split("\n").some(o => o.trimEnd() === line.trimEnd()), `README line not in the output: ${line}`);
});

test("spark-vllm diff: usage without --set, the key path of a bad value, a mandatory policy failure, --json", () => {
    assert.equal(cli(["diff", "--stack", "spark"]).status, 2);
    const bad = cli(["diff", "--stack", "spark", "--set", "vllm.port=abc"]);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /spark-vllm:vllm\.port: must be a whole number/);
    const unsupported = cli(["diff", "--stack", "spark", "--set", `image=vllm/vllm-openai:v0.14.0@sha256:${"0".repeat(64)}`, "--set", "vllm.version=0.14.0"]);
    assert.equal(unsupported.status, 1);
    assert.match(unsupported.stdout, /FAIL vllm-supports-architecture/);
    const json = JSON.parse(cli(["diff", "--stack", "spark", "--set", "vllm.maxModelLen=65536", "--json"]).stdout);
    assert.deepEqual(json.changes.filter((c: { op: string }) => c.op !== "same").map((c: { name: string }) => c.name), ["spark-model-launch", "spark-model-probe"]);
    assert.match(json.diffs[0], /-  --max-model-len 32768\n\+  --max-model-len 65536/);
});
