// The package as a user gets it: `npm pack`, installed from the tarball into a fresh project, then a
// Pulumi program that imports it runs there under mocks, once in TypeScript as Pulumi runs it (Pulumi's
// own language-host entry, which registers ts-node: type-checked, and nothing inside node_modules
// compiled) and once in plain JavaScript. The TypeScript program is docs/library.md's ("A first
// program"), so the docs show the real API; the second example (examples/two-models) runs too. And
// the CLI runs from the installed package with no TypeScript loader.
//
// Offline and quick: the tarball is installed by npm itself (`npm install --offline`), but the
// package's dependencies are links to this checkout's node_modules, so nothing is downloaded (a real
// install from the registry takes 15 s or more and needs the network).
import { before, after, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFile, spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { promisify } from "util";
import * as yaml from "js-yaml";
import { evaluateWithMocks } from "../../harness/mocks";

const ROOT = path.join(__dirname, "..", "..", "..");
const NODE = process.execPath;
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const run = promisify(execFile);

interface Recorded {
    type: string;
    name: string;
    inputs: Record<string, any>;
}
interface Evaluation {
    resources: Recorded[];
    outputs?: Record<string, any>;
    exitCode: number;
    log: string;
}

let tmp = "";
let consumer = "";
let packed: { filename: string; files: Array<{ path: string }> };
let ts: Evaluation;
let js: Evaluation;
let example: Evaluation;

const stackConfig = (file: string) => (yaml.load(fs.readFileSync(file, "utf8")) as { config: Record<string, unknown> }).config;
const CONSUMER_CONFIG = stackConfig(path.join(ROOT, "tests", "package", "consumer", "Pulumi.test.yaml"));
const EXAMPLE_KEY = "EXAMPLE-KEY-from-a-secret-config-value-0123";
const EXAMPLE_CONFIG = { ...stackConfig(path.join(ROOT, "examples", "two-models", "Pulumi.dev.yaml")), "two-models:apiKey": EXAMPLE_KEY };

function npm(args: string[], cwd: string): string {
    const r = spawnSync("npm", args, { cwd, encoding: "utf8", timeout: 300_000, env: { ...process.env, npm_config_update_notifier: "false" } });
    assert.equal(r.status, 0, `npm ${args.join(" ")} failed (exit ${r.status ?? r.signal}):\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
}

/** Runs a program of the consumer project through Pulumi's language-host entry, under mocks (tests/package/consumer/run-under-mocks.js). */
async function evaluate(request: { program: string; typescript: boolean; project: string; stack: string; config: Record<string, unknown>; secretKeys?: string[] }): Promise<Evaluation> {
    const file = path.join(tmp, `request-${request.project}-${request.typescript ? "ts" : "js"}.json`);
    fs.writeFileSync(file, JSON.stringify(request));
    // TS_NODE_CACHE=false: ts-node type-checks every time, instead of reusing output compiled against older declarations.
    const r = await run(NODE, ["run-under-mocks.js", file], { cwd: consumer, timeout: 180_000, env: { ...process.env, TS_NODE_CACHE: "false" }, maxBuffer: 64 * 1024 * 1024 }).catch(err => err);
    const log = `${r.stdout ?? ""}${r.stderr ?? ""}`;
    assert.ok(fs.existsSync(`${file}.out`), `${request.program} wrote no result:\n${log}`);
    return { ...JSON.parse(fs.readFileSync(`${file}.out`, "utf8")), log };
}

/** The TypeScript block of docs/library.md's "A first program" section. */
function readmeProgram(): string {
    const readme = fs.readFileSync(path.join(ROOT, "docs", "library.md"), "utf8");
    const section = /\n## A first program\n([\s\S]*?)(\n## |$)/.exec(readme)?.[1] ?? "";
    const program = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(program, "docs/library.md's \"A first program\" section has a ```ts program");
    return program;
}

const count = (e: Evaluation, type: string) => e.resources.filter(r => r.type === type).length;
const names = (e: Pick<Evaluation, "resources">) => e.resources.filter(r => r.type !== "pulumi:pulumi:Stack").map(r => `${r.type} ${r.name}`).sort();

before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-package-"));
    // npm pack runs `prepare`, which builds dist/ (tsc + the helper program + the policy pack).
    packed = JSON.parse(npm(["pack", "--json", "--pack-destination", tmp], ROOT))[0];

    consumer = path.join(tmp, "consumer");
    fs.cpSync(path.join(ROOT, "tests", "package", "consumer"), consumer, { recursive: true });
    fs.writeFileSync(path.join(consumer, "index.ts"), readmeProgram());
    fs.cpSync(path.join(ROOT, "examples", "two-models", "index.ts"), path.join(consumer, "examples", "two-models", "index.ts"));
    // As `pulumi new typescript` makes it: @pulumi/pulumi, TypeScript and Node's types.
    const version = (name: string) => JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
    fs.writeFileSync(path.join(consumer, "package.json"), JSON.stringify({
        name: "consumer",
        version: "0.0.0",
        private: true,
        main: "index.ts",
        dependencies: { "@pulumi/pulumi": version("@pulumi/pulumi") },
        devDependencies: { typescript: version("typescript"), "@types/node": version("@types/node") },
    }, null, 2));
    // Every dependency the package declares, and the consumer's own, linked from this checkout.
    for (const name of new Set([...Object.keys(pkg.dependencies), "@pulumi/pulumi", "typescript", "@types/node"])) {
        const link = path.join(consumer, "node_modules", name);
        fs.mkdirSync(path.dirname(link), { recursive: true });
        fs.symlinkSync(path.join(ROOT, "node_modules", name), link, "dir");
    }
    npm(["install", "--offline", "--no-package-lock", "--no-audit", "--no-fund", "--ignore-scripts", path.join(tmp, packed.filename)], consumer);

    const common = { project: "consumer", stack: "test", config: CONSUMER_CONFIG };
    [ts, js, example] = await Promise.all([
        evaluate({ ...common, program: "index.ts", typescript: true }),
        evaluate({ ...common, program: "js/index.js", typescript: false }),
        evaluate({ program: "examples/two-models/index.ts", typescript: true, project: "two-models", stack: "dev", config: EXAMPLE_CONFIG, secretKeys: ["two-models:apiKey"] }),
    ]);
});

after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

test("npm pack ships the compiled package, the helper program, the policy pack and the docs, and no tests, fixtures, sim or bench", () => {
    const files = packed.files.map(f => f.path);
    for (const f of files) {
        assert.ok(/^(dist\/|docs\/|bin\/spark-vllm\.js$|README\.md$|package\.json$|LICENSE)/.test(f), `unexpected file in the package: ${f}`);
        assert.ok(!/(^|\/)(tests?|fixtures?|sim|bench|\.sim|examples)(\/|$)|\.test\.|__pycache__/.test(f), `test or bench file in the package: ${f}`);
        assert.ok(!f.endsWith(".ts") || f.endsWith(".d.ts"), `TypeScript source in the package: ${f}`);
    }
    for (const f of ["dist/components/index.js", "dist/components/index.d.ts", "dist/bin/cli.js", "dist/policies/index.js", "dist/policies/PulumiPolicy.yaml", "docs/configuration.md"])
        assert.ok(files.includes(f), `${f} is missing from the package`);
    assert.ok(files.some(f => f.startsWith("dist/components/hostProgram/") && f.endsWith(".py")), "the helper program's Python sources are in the package");
    // The policy pack, runnable as `pulumi preview --policy-pack node_modules/spark-vllm/dist/policies`.
    const pack = path.join(consumer, "node_modules", "spark-vllm", "dist", "policies");
    assert.equal(JSON.parse(fs.readFileSync(path.join(pack, "package.json"), "utf8")).main, "index.js");
    assert.ok(fs.existsSync(path.join(pack, "PulumiPolicy.yaml")));
    const rules = require(path.join(pack, "rules.js"));
    assert.ok(Array.isArray(rules.policies) && rules.policies.length > 0, "the pack's rules load from the package");
    const installed = JSON.parse(fs.readFileSync(path.join(consumer, "node_modules", "spark-vllm", "package.json"), "utf8"));
    assert.equal(installed.main, "dist/components/index.js");
    assert.equal(installed.types, "dist/components/index.d.ts");
});

test("docs/library.md's TypeScript program, run by Pulumi's ts-node, builds a cluster from the installed package", () => {
    assert.equal(ts.exitCode, 0, ts.log);
    const hosts = (CONSUMER_CONFIG["spark-vllm:hosts"] as unknown[]).length;
    assert.equal(count(ts, "spark-vllm:index:SparkCluster"), 1);
    assert.equal(count(ts, "docker:index/container:Container"), hosts + 1, "one container per host, and the endpoint proxy on the head");
    assert.equal(count(ts, "docker:index/remoteImage:RemoteImage"), hosts + 1, "the image on every host, and the proxy's on the head");
    assert.equal(count(ts, "pulumi:providers:docker"), hosts, "one Docker provider per host");
    const passwords = ts.resources.filter(r => r.type === "random:index/randomPassword:RandomPassword").map(r => r.name).sort();
    assert.deepEqual(passwords, ["spark-api-key", "spark-ray-token"], "a generated API key and, for Ray, a generated Ray token");
    const commands = ts.resources.filter(r => r.type === "command:remote:Command");
    for (const host of ["spark-a", "spark-b"]) assert.ok(commands.filter(c => c.name.includes(`-${host}-`)).length >= 2, `remote commands on ${host}`);
    assert.equal(ts.outputs?.endpoint, "http://198.18.0.11:8000/v1");
    assert.equal(typeof ts.outputs?.apiKey, "string");
    assert.match(ts.outputs?.vllmServe, /^vllm serve Qwen\/Qwen3\.5-122B-A10B-FP8 .*--tensor-parallel-size 2/);
    assert.equal(ts.outputs?.example, "port-in-use", "docs/library.md's diagnose example");
});

test("the installed package registers exactly what this checkout's own program registers, with the same helper program", () => {
    const own = evaluateWithMocks(CONSUMER_CONFIG);
    assert.equal(own.error, undefined);
    assert.deepEqual(names(ts), names(own), "resources by type and name");
    const stdin = (rs: Recorded[]) => rs.filter(r => r.type === "command:remote:Command").map(r => [r.name, r.inputs.stdin ?? null]);
    assert.deepEqual(stdin(ts.resources), stdin(own.resources as Recorded[]), "every command's stdin, the helper program included");
    // The helper program, as the packed package produced it from dist/components/hostProgram, is Python that compiles.
    const helper = ts.resources.filter(r => r.type === "command:remote:Command" && typeof r.inputs.stdin === "string" && r.inputs.stdin.length > 10_000);
    assert.ok(helper.length >= 2, "the helper program goes to every host on a command's stdin");
    // It travels packed (components/plan/hostCommands.ts packTools): unpacked as the tools command does, then compiled.
    const compiled = spawnSync("python3", ["-c", "import base64, sys, zlib; compile(zlib.decompress(base64.b64decode(sys.stdin.read())), 'spark_vllm_tools.py', 'exec')"], { input: helper[0].inputs.stdin, encoding: "utf8" });
    assert.equal(compiled.status, 0, compiled.stderr);
});

test("the same program in plain JavaScript registers the same resources and gives the same outputs", () => {
    assert.equal(js.exitCode, 0, js.log);
    assert.deepEqual(names(js), names(ts));
    assert.deepEqual(js.outputs, ts.outputs);
});

test("examples/two-models: two clusters on their own pairs of Sparks, one API key from a secret config value", () => {
    assert.equal(example.exitCode, 0, example.log);
    assert.equal(count(example, "spark-vllm:index:SparkCluster"), 2);
    assert.equal(count(example, "docker:index/container:Container"), 4 + 2, "one container on each of the four Sparks, and each cluster's endpoint proxy");
    const passwords = example.resources.filter(r => r.type === "random:index/randomPassword:RandomPassword").map(r => r.name);
    assert.deepEqual(passwords.filter(p => p.endsWith("-api-key")), [], "no generated API key: the config's");
    assert.equal(passwords.filter(p => p.endsWith("-ray-token")).length, 2, "each Ray cluster's own generated Ray token");
    assert.deepEqual(example.outputs?.endpoints, { "qwen3.5-122b": "http://198.18.0.11:8000/v1", "llama-3.3-70b": "http://198.18.0.13:8000/v1" });
    const withKey = example.resources.filter(r => JSON.stringify(r.inputs).includes(EXAMPLE_KEY));
    assert.ok(withKey.length >= 2, "both endpoints get the key");
    for (const r of withKey) {
        const { stdin, ...rest } = r.inputs;
        assert.ok(String(stdin).includes(EXAMPLE_KEY) && !JSON.stringify(rest).includes(EXAMPLE_KEY), `${r.name}: the key only on stdin`);
    }
});

test("the CLI runs from the installed package, with no TypeScript loader", () => {
    const bin = path.join(consumer, "node_modules", ".bin", "spark-vllm");
    assert.throws(() => require.resolve("tsx", { paths: [consumer] }), "tsx is not installed with the package");
    const diagnose = spawnSync(NODE, [bin, "diagnose", "-"], { cwd: consumer, input: "(APIServer pid=1) OSError: [Errno 98] Address already in use\n", encoding: "utf8" });
    assert.equal(diagnose.status, 0, diagnose.stderr);
    assert.match(diagnose.stdout, /port-in-use/);
    const plan = spawnSync(NODE, [bin, "plan", "--stack", "test", "--json"], { cwd: consumer, encoding: "utf8" });
    assert.equal(plan.status, 0, plan.stderr);
    const report = JSON.parse(plan.stdout);
    assert.equal(report.endpoint, "http://198.18.0.11:8000/v1");
    assert.deepEqual(report.hosts.map((h: { name: string }) => h.name), ["spark-a", "spark-b"]);
});
