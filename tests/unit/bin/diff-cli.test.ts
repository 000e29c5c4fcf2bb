// `spark-vllm diff`: its resource table and trigger wiring against the real program under mocks, so they
// cannot drift from components/*.ts; its verdicts for typical changes; the CLI; docs/offline.md's examples.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { SECRET_SET } from "../../../components/spec/stackConfig";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { diffPlans, setPath } from "../../../bin/diff-command";
import { EXIT, stackOwner } from "../../../bin/shared";
import { COMMAND, plannedResources } from "../../../components/plan/resources";
import { resourceNames } from "../../../components/plan/naming";
import { Evaluation, evaluateWithMocks, stackConfig } from "../../harness/mocks";
import { assertRegistersThePlan } from "../../harness/registration";

const ROOT = path.join(__dirname, "..", "..", "..");
const NS = "spark-vllm:";
const raw = (config: Record<string, unknown>) => Object.fromEntries(Object.entries(config).map(([k, v]) => [k.slice(NS.length), v]));
const cfg = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [NS + k, v]));
// As the program under mocks plans it (evaluate below): the stack's owner is in labels and commands (components/plan/ownership.ts).
const planOf = (r: Record<string, unknown>, stack = "spark") => planCluster(parseSpec(r), undefined, { owner: stackOwner(ROOT, stack) });
const evaluations = new Map<string, Evaluation>();
const evaluate = (stack: string, r: Record<string, unknown>, manifestOverrides?: Record<string, Record<string, number>>) => {
    const key = JSON.stringify([stack, r, manifestOverrides]);
    if (!evaluations.has(key)) evaluations.set(key, evaluateWithMocks(cfg(r), { stack, preview: true, manifestOverrides }));
    const e = evaluations.get(key)!;
    assert.equal(e.error, undefined);
    return new Map(e.resources.filter(x => !x.type.startsWith("spark-vllm:index:") && x.type !== "pulumi:pulumi:Stack").map(x => [x.name, x]));
};
const n = resourceNames();

for (const [stack, key, value] of [["spark"], ["qwen3-235b-4x"], ["spark", "model.weights", "head-then-copy"], ["spark", "imageSource", "head"]]) {
    test(`Pulumi.${stack}.yaml${key ? ` with ${key} ${value}` : ""}: the program registers exactly the planned resources, inputs and trigger wiring`, () => {
        const r = key ? setPath(raw(stackConfig(stack)), key, value) : raw(stackConfig(stack));
        const recorded = evaluate(stack, r);
        assertRegistersThePlan(recorded, plannedResources(planOf(r, stack)), [n.of("api-key"), n.of("ray-token"), n.of("weights-token")]);
    });
}

test("plan order: everything a resource waits for or follows is planned before it (so components need no deferred promises)", () => {
    for (const stack of ["spark", "qwen3-235b-4x", "gpt-oss-120b"])
        for (const [key, value] of [[], ["model.weights", "head-then-copy"], ["imageSource", "head"]]) {
            const r = key ? setPath(raw(stackConfig(stack)), key, value) : raw(stackConfig(stack));
            const seen = new Set<string>();
            for (const p of plannedResources(planOf(r))) {
                for (const d of [...p.dependsOn, ...p.replacedBy]) assert.ok(seen.has(d), `${stack}: ${p.name} needs ${d}, planned after it`);
                assert.ok(!seen.has(p.name), `${p.name} planned twice`);
                seen.add(p.name);
            }
        }
});

test("spark-vllm diff predicts the same replacements and updates as before the restructure (names aside)", () => {
    const before = JSON.parse(fs.readFileSync(path.join(ROOT, "tests", "fixtures", "diff", "before-house.json"), "utf8"));
    // Old name → new name (tests/fixtures/diff/before-house.json was recorded at the commit it names).
    const rename = (old: string) => old
        .replace(/^spark-model-launch$/, n.of("vllm-launch")).replace(/^spark-model-probe$/, n.of("endpoint-probe"))
        .replace(/^spark-model-compat$/, n.of("compat")).replace(/^spark-ray-head-launch$/, n.of("ray-head"))
        .replace(/^spark-ray-head-probe$/, n.of("ray-probe")).replace(/^spark-ray-(.+)-launch$/, (_, h) => n.host(h, "ray"));
    let cases = 0;
    for (const [stack, changes] of Object.entries<Record<string, Record<string, string>>>(before.stacks)) {
        const r = raw(stackConfig(stack));
        for (const [change, expected] of Object.entries(changes)) {
            const eq = change.indexOf("=");
            const after = setPath(r, change.slice(0, eq), JSON.parse(change.slice(eq + 1)));
            // The memory gates (issue 11), fabric ranks (issue 12), the copy token and the endpoint proxy (issue 13) and the
            // serving proof (issue 15), the after-load memory (issue 29) and the image proof (issue 46) came after the recording:
            // the only names it cannot hold.
            const got = Object.fromEntries(diffPlans(planOf(r), planOf(after))
                .filter(c => c.op !== "same" && !/-(memory|fabric|serving-proof|loaded|image-check)$/.test(c.name) && c.name !== n.of("weights-token") && !/^spark-proxy(-|$)/.test(c.name))
                .map(c => [c.name, c.op]));
            // Since issue 29 the weights commands check the real size against TP × PP × gpuMemoryUtilization (hostCommands.ts
            // weightsFitArgs): a change of those runs them again, and the compatibility check that follows them.
            const refit = /^vllm\.(gpuMemoryUtilization|tensorParallelSize|pipelineParallelSize)=/.test(change)
                ? Object.fromEntries([...planOf(r).hosts.map(h => [n.host(h.host.name, "weights"), "replace"]), [n.of("compat"), "replace"]]) : {};
            assert.deepEqual(got, { ...refit, ...Object.fromEntries(Object.entries(expected).map(([k, v]) => [rename(k), v])) }, `${stack} with ${change}`);
            cases++;
        }
    }
    assert.equal(cases, 45);
});

test("the weights fingerprint really is in compat's triggers (diff: compat follows every host's weights)", () => {
    const r = raw(stackConfig("spark"));
    const files = { "config.json": 100, "model-00001-of-00002.safetensors": 7 };
    const changed = evaluate("spark", r, { [n.host("spark-a", "weights")]: files, [n.host("spark-b", "weights")]: files });
    assert.notDeepEqual(changed.get(n.of("compat"))!.inputs.triggers, evaluate("spark", r).get(n.of("compat"))!.inputs.triggers);
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

const GATES = [n.host("spark-a", "memory"), n.host("spark-b", "memory")];
const RANKS = [n.host("spark-a", "fabric"), n.host("spark-b", "fabric")];
/** Free memory after the load, per host (issue 29): measured again whenever the endpoint is proven again. */
const LOADED = [n.host("spark-a", "loaded"), n.host("spark-b", "loaded")];
const CHANGES: Array<[string, string, unknown, string[]]> = [
    // [label, key, value, resources replaced]
    ["one vLLM flag", "vllm.extraArgs", ["--enable-prefix-caching"], [n.of("vllm-launch"), n.of("endpoint-probe"), n.of("serving-proof"), ...GATES, ...LOADED]],
    ["maxModelLen", "vllm.maxModelLen", 65536, [n.of("vllm-launch"), n.of("endpoint-probe"), n.of("serving-proof"), ...GATES, ...LOADED]],
    // The proxy carries the served name in its labels (components/plan/ownership.ts): a rename replaces it too (seconds).
    ["the served name", "model.servedName", "qwen", [n.of("vllm-launch"), n.of("endpoint-probe"), n.of("serving-proof"), n.of("proxy"), ...GATES, ...LOADED]],
    ["the image", "image", `vllm/vllm-openai:v0.17.2@sha256:${"1".repeat(64)}`, [
        "spark-spark-a-image", "spark-spark-a-image-check", "spark-spark-b-image-check", "spark-spark-a-container", "spark-spark-a-weights", "spark-spark-b-image", "spark-spark-b-container",
        "spark-spark-b-weights", n.of("compat"), n.of("ray-head"), n.host("spark-b", "ray"), n.of("ray-probe"),
        n.of("vllm-launch"), n.of("endpoint-probe"), n.of("serving-proof"), ...GATES, ...LOADED, ...RANKS]],
    ["a worker's fabric address", "hosts[1].fabric.address", "192.168.100.12", [
        "spark-spark-b-preflight", "spark-spark-b-container", "spark-spark-b-weights", n.of("compat"), n.host("spark-b", "ray"),
        n.of("ray-probe"), n.of("vllm-launch"), n.of("endpoint-probe"), n.of("serving-proof"), ...GATES, ...LOADED, ...RANKS]],
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

test("a flag change: only the vLLM launch's inputs change; a worker's ssh port relaunches Ray there and everything after it", () => {
    const before = raw(stackConfig("spark"));
    const flag = diffPlans(planOf(before), planOf(setPath(before, "vllm.extraArgs", ["--enable-prefix-caching"])));
    assert.deepEqual(flag.filter(c => c.inputs.length).map(c => [c.name, c.inputs]),
        [...GATES.map(g => [g, ["triggers"]]), [n.of("vllm-launch"), ["create", "triggers"]]]);
    const port = diffPlans(planOf(before), planOf(setPath(before, "hosts[1].ssh.port", 2222)));
    assert.deepEqual(port.filter(c => c.op !== "same").map(c => [c.name, c.op]),
        [["spark-spark-b-docker", "update"], ["spark-spark-b-tools", "update"], ["spark-spark-b-preflight", "update"], ["spark-spark-b-image-check", "update"], ["spark-spark-b-weights", "update"], [n.host("spark-b", "fabric"), "update"],
            [n.host("spark-b", "ray"), "replace"], [n.of("ray-probe"), "replace"], ...GATES.map(g => [g, "replace"]),
            [n.of("vllm-launch"), "replace"], [n.of("endpoint-probe"), "replace"], ...LOADED.map(l => [l, "replace"]), [n.of("serving-proof"), "replace"]]);
});

const cli = (args: string[]) => spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), ...args], { cwd: ROOT, encoding: "utf8" });

test("spark-vllm diff prints the replaced resources and the flag as a unified diff; docs/offline.md shows that output", () => {
    const r = cli(["diff", "--stack", "spark", "--set", 'vllm.extraArgs=["--enable-prefix-caching"]']);
    assert.equal(r.status, 0, r.stderr);
    for (const line of [`+- ${n.of("vllm-launch")}`, `+- ${n.of("endpoint-probe")}`, "+++ vllm serve (vllm.extraArgs=[\"--enable-prefix-caching\"])", "   --max-model-len 32768", "+  --enable-prefix-caching", "every mandatory policy passes with the change"])
        assert.ok(r.stdout.includes(line), `missing: ${line}\n${r.stdout}`);
    const readme = fs.readFileSync(path.join(ROOT, "docs", "offline.md"), "utf8");
    const example = /\$ npx spark-vllm diff --stack spark --set 'vllm\.extraArgs=\["--enable-prefix-caching"\]'\n([\s\S]*?)```/.exec(readme);
    assert.ok(example, "docs/offline.md shows an example of spark-vllm diff for a flag change");
    for (const line of example[1].split("\n").filter(l => /^ *(\+-|~ |[-+@] ?)/.test(l)))
        assert.ok(r.stdout.split("\n").some(o => o.trimEnd() === line.trimEnd()), `docs/offline.md line not in the output: ${line}`);
});

test("spark-vllm diff: usage without --set, the key path of a bad value, a mandatory policy failure, --json", () => {
    assert.equal(cli(["diff", "--stack", "spark"]).status, EXIT.usage);
    const bad = cli(["diff", "--stack", "spark", "--set", "vllm.port=abc"]);
    assert.equal(bad.status, EXIT.config);
    assert.match(bad.stderr, /spark-vllm:vllm\.port: must be a whole number/);
    const unsupported = cli(["diff", "--stack", "spark", "--set", `image=vllm/vllm-openai:v0.14.0@sha256:${"0".repeat(64)}`, "--set", "vllm.version=0.14.0"]);
    assert.equal(unsupported.status, EXIT.policy);
    assert.match(unsupported.stdout, /FAIL vllm-supports-architecture/);
    const json = JSON.parse(cli(["diff", "--stack", "spark", "--set", "vllm.maxModelLen=65536", "--json"]).stdout);
    assert.deepEqual(json.changes.filter((c: { op: string }) => c.op !== "same").map((c: { name: string }) => c.name), [...GATES, n.of("vllm-launch"), n.of("endpoint-probe"), ...LOADED, n.of("serving-proof")]);
    assert.match(json.diffs[0], /-  --max-model-len 32768\n\+  --max-model-len 65536/);
});

// ---------------------------------------------------------------- --rotate: a secret's new value (issue 14)

const commands = (r: Record<string, unknown>) => plannedResources(planOf(r)).filter(p => p.type === COMMAND).map(p => p.name).sort();

test("--rotate sshPrivateKey: every remote command is updated through its connection, as the program under mocks changes exactly their connection", () => {
    const before = { ...raw(stackConfig("spark")), sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nA\n" };
    const after = { ...before, sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nB\n" };
    const recorded = recordedChanges("spark", before, after);
    assert.deepEqual(Object.keys(recorded).sort(), commands(before));
    for (const [name, inputs] of Object.entries(recorded)) assert.deepEqual(inputs, ["connection"], name);
    const changes = diffPlans(planOf(before), planOf(before), ["sshPrivateKey"]);
    assert.deepEqual(changes.filter(c => c.op !== "same").map(c => c.name).sort(), commands(before));
    assert.ok(changes.every(c => c.op === "same" || (c.op === "update" && c.inputs.join() === "connection")), "updates only, no replacement");
    assert.ok(changes.filter(c => c.type !== COMMAND).every(c => c.op === "same"), "the Docker providers, images, containers and passwords read no key");
    const reason = (name: string) => changes.find(c => c.name === name)!.reason!;
    assert.equal(reason(n.of("vllm-launch")), "connection.privateKey (secret) changes: update runs create again; a running identical launch is kept (components/plan/launches.ts keepIfSame)");
    assert.equal(reason(n.of("compat")), "connection.privateKey (secret) changes: update runs create again");
    assert.equal(reason(n.host("spark-a", "memory")), "connection.privateKey (secret) changes: update runs its update script");
});

test("--rotate hfToken: nothing reads it unless the weights download; then exactly the weights commands' stdin, as under mocks", () => {
    const present = raw(stackConfig("spark"));
    assert.deepEqual(diffPlans(planOf(present), planOf(present), ["hfToken"]).filter(c => c.op !== "same"), [], "weights present: no token on any stdin");
    const before = { ...setPath(present, "model.weights", "download"), hfToken: "hf_AAAA" };
    const after = { ...before, hfToken: "hf_BBBB" };
    const weights = [n.host("spark-a", "weights"), n.host("spark-b", "weights")];
    assert.deepEqual(recordedChanges("spark", before, after), Object.fromEntries(weights.map(w => [w, ["stdin"]])));
    const plan = planCluster(parseSpec(before), undefined, { owner: stackOwner(ROOT, "spark"), hfToken: true });
    const changes = diffPlans(plan, plan, ["hfToken"]).filter(c => c.op !== "same");
    assert.deepEqual(changes.map(c => [c.name, c.op, c.inputs]), weights.map(w => [w, "update", ["stdin"]]));
    assert.equal(changes[0].reason, "stdin (secret) carries the new hfToken: update runs create again");
});

test("--rotate tlsCertificate / tlsPrivateKey: with endpoint.tls given, the certificate's digest replaces its files and what follows them; otherwise nothing", () => {
    const none = raw(stackConfig("spark"));
    for (const key of ["tlsCertificate", "tlsPrivateKey"]) assert.deepEqual(diffPlans(planOf(none), planOf(none), [key]).filter(c => c.op !== "same"), [], key);
    const given = planOf({ ...none, endpoint: { tls: "given" }, tlsCertificate: SECRET_SET, tlsPrivateKey: SECRET_SET });
    for (const key of ["tlsCertificate", "tlsPrivateKey"]) {
        const changes = diffPlans(given, given, [key]).filter(c => c.op !== "same");
        assert.deepEqual(changes.map(c => [c.name, c.op]), [n.of("proxy-tls"), n.of("proxy-conf"), n.of("endpoint-probe"), ...LOADED, n.of("serving-proof")].map(x => [x, "replace"]), key);
        assert.equal(changes[0].reason, `follows ${n.of("proxy-cert")} (its value is the digest of ${key}) (in its triggers)`);
    }
});

test("spark-vllm diff --rotate: the table, the Docker note, an unread secret, --set beside it, --json, and refusals; docs/offline.md shows it", () => {
    const ssh = cli(["diff", "--stack", "spark", "--rotate", "sshPrivateKey"]);
    assert.equal(ssh.status, EXIT.ok, ssh.stderr);
    assert.match(ssh.stdout, /^stack spark with a new sshPrivateKey: 0 to replace, 22 to update, 0 to create, 0 to delete, 10 unchanged$/m);
    assert.match(ssh.stdout, /^ {2}~ {2}spark-vllm-launch +update {3}inputs: connection; connection\.privateKey \(secret\) changes: update runs create again; a running identical launch is kept/m);
    assert.match(ssh.stdout, /sshPrivateKey: read by the 22 remote commands only; the Docker providers log in with the agent or ~\/\.ssh\/config/);
    const hf = cli(["diff", "--stack", "spark", "--rotate", "spark-vllm:hfToken"]);
    assert.equal(hf.status, EXIT.ok, hf.stderr);
    assert.match(hf.stdout, /hfToken: no resource of stack spark reads it: a new value changes nothing/);
    const both = cli(["diff", "--stack", "spark", "--set", "vllm.maxModelLen=65536", "--rotate", "sshPrivateKey", "--json"]);
    const json = JSON.parse(both.stdout);
    assert.equal(json.rotate.sshPrivateKey.length, 22);
    const launch = json.changes.find((c: { name: string }) => c.name === n.of("vllm-launch"));
    assert.equal(launch.op, "replace", "the flag's replacement wins over the key's update");
    assert.deepEqual(launch.inputs, ["create", "triggers"]);
    assert.equal(json.changes.find((c: { name: string }) => c.name === n.of("compat")).op, "update");
    for (const bad of [["--rotate", "apiKey"], ["--rotate", "hfToken=hf_x"], ["--rotate"]]) {
        const r = cli(["diff", "--stack", "spark", ...bad]);
        assert.equal(r.status, EXIT.usage, bad.join(" "));
        assert.ok(!r.stdout, bad.join(" "));
    }
    assert.match(cli(["diff", "--stack", "spark", "--rotate", "hfToken=hf_x"]).stderr, /--rotate hfToken=hf_x: not a secret of spark-vllm \(sshPrivateKey, hfToken, tlsCertificate, tlsPrivateKey\); a secret's new value is never given here/);
    const readme = fs.readFileSync(path.join(ROOT, "docs", "offline.md"), "utf8");
    const example = /\$ npx spark-vllm diff --stack spark --rotate sshPrivateKey\n((?: {2}.*\n)+)/.exec(readme);
    assert.ok(example, "docs/offline.md shows a rotation");
    for (const line of example[1].split("\n").filter(l => l.trim() && !l.includes("…")))
        assert.ok(ssh.stdout.split("\n").some(o => o.trimEnd() === line.trimEnd()), `docs/offline.md line not in the output: ${line}`);
});

test("spark-vllm diff --rotate tlsCertificate on a stack whose certificate is given (secure: values, as pulumi config set --secret writes)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-diff-"));
    try {
        const doc = fs.readFileSync(path.join(ROOT, "Pulumi.spark.yaml"), "utf8") +
            "  spark-vllm:endpoint:\n    tls: given\n  spark-vllm:tlsCertificate:\n    secure: v1:AAAA\n  spark-vllm:tlsPrivateKey:\n    secure: v1:BBBB\n";
        fs.writeFileSync(path.join(dir, "Pulumi.tls.yaml"), doc);
        const r = cli(["diff", "--stack", "tls", "--dir", dir, "--rotate", "tlsCertificate"]);
        assert.equal(r.status, EXIT.ok, r.stderr);
        assert.match(r.stdout, /^stack tls with a new tlsCertificate: 6 to replace, 0 to update/m);
        assert.match(r.stdout, new RegExp(`\\+- ${n.of("proxy-tls")} +replace  inputs: stdin; follows ${n.of("proxy-cert")} \\(its value is the digest of tlsCertificate\\)`));
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});
