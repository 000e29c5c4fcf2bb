// The component package (provider/) from Python, Go and YAML programs on the real Pulumi: `pulumi package add provider`
// generates the SDK (the Python one installed into the example's venv by the CLI), and the example previews the
// committed stack offline, with and without the policy pack, registering the resources the TypeScript program
// (index.ts) registers on the same stack file, with the same names and types, and drawing the same policy verdicts.
// The package's own SparkCluster adds one component around the library's (same type, same name): the only difference.
// Each preview runs in a network namespace with only loopback up, as tests/real/preview.test.ts does. Needs root.
// The language hosts are found beside the CLI or on PATH (built by hand, as the Node.js one: docs/testing.md); the
// Python SDK `pulumi` comes from PyPI and the Go one from the module proxy (tests/real/packageProject.ts).
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { findRealPulumi } from "../engine/real";
import { testTempDir } from "../tempDir";
import { offlineEnv, runPulumi, stackFile, typescriptProject } from "./realCli";
import { LANGUAGES, Language, addPackage, buildPackage, languageHost, languageHostsLine } from "./packageProject";

const REPO = path.join(__dirname, "..", "..");
const { found: real, missing } = findRealPulumi();
const hosts = Object.fromEntries(LANGUAGES.map(l => [l, languageHost(l, real)])) as Record<Language, string | undefined>;
console.log(`# ${languageHostsLine(real)}`);
const skipAll = real ? (process.getuid?.() === 0 ? false : "needs root (a network namespace per preview)") : `the real Pulumi is not installed: ${missing.join("; ")}`;
const skipFor = (language: Language) => skipAll || (hosts[language] ? false : `pulumi-language-${language} is not installed (beside ${real?.dir} or on PATH)`);

const temps: string[] = [];
after(() => temps.forEach(d => fs.rmSync(d, { recursive: true, force: true })));

const env = (dir: string) => offlineEnv(real!, dir, "languages-test-not-a-secret");
/** The CLI; `offline`: in a network namespace of its own with loopback up (nothing but loopback can be reached). */
const pulumi = (dir: string, args: string[], offline = true) => runPulumi(real!, dir, env(dir), args, offline);

/** A copy of examples/<language> (or the TypeScript program) with the stack file and a stack; the package added. */
function project(language: Language | "typescript", stack: string, config?: Record<string, unknown>): string {
    const dir = testTempDir(`lang-${language}-${stack}`);
    temps.push(dir);
    if (language === "typescript") typescriptProject(dir, stack, config);
    else {
        stackFile(dir, stack, config);
        addPackage(language, dir, args => pulumi(dir, args, false));
    }
    const init = pulumi(dir, ["stack", "init", stack, "--secrets-provider", "passphrase"]);
    assert.equal(init.status, 0, init.output);
    return dir;
}

/** A preview's created resources as "type name" (the last type of the URN's chain), and its policy verdicts. */
function preview(dir: string, stack: string, project: string) {
    const plain = pulumi(dir, ["preview", "--diff", "--stack", stack]);
    assert.equal(plain.status, 0, plain.output);
    const json = pulumi(dir, ["preview", "--stack", stack, "--json"]);
    assert.equal(json.status, 0, json.output);
    const result = JSON.parse(json.output.slice(json.output.indexOf("{")));
    const created = (result.steps as Array<{ op: string; urn: string }>).filter(s => s.op === "create")
        .map(s => `${s.urn.split("::")[2].split("$").pop()} ${s.urn.split("::").pop()}`)
        .filter(r => !r.startsWith("pulumi:pulumi:Stack "));
    const withPack = pulumi(dir, ["preview", "--stack", stack, "--policy-pack", path.join(REPO, "policies")]);
    assert.equal(withPack.status, 0, withPack.output);
    return { created: created.sort(), verdicts: verdicts(withPack.output, `${project}-${stack}`) };
}

/** The "Policies:" section's verdicts: level, policy, resource and message; the stack resource's name (project-stack) made neutral. */
function verdicts(output: string, stackName: string): string[] {
    const section = output.slice(output.indexOf("Policies:"), output.search(/\n(Diagnostics|Outputs|Resources):/));
    return section.split("\n").filter(l => /^\s*- \[(advisory|mandatory)\]/.test(l) || /^\s{10}\S/.test(l))
        .map(l => l.trim().replaceAll(`pulumi:pulumi:Stack: ${stackName})`, "pulumi:pulumi:Stack: <stack>)")).sort();
}

const STACK = "spark";
let reference: { created: string[]; verdicts: string[] } | undefined;

describe("the component package from Python, YAML and Go on the real Pulumi, offline", { skip: skipAll }, () => {
    before(() => {
        buildPackage();
        const dir = project("typescript", STACK);
        reference = preview(dir, STACK, "spark-vllm");
        assert.ok(reference.created.length > 20, reference.created.join("\n"));
        assert.ok(reference.verdicts.length > 0, "the stack draws advisory verdicts to compare");
    });

    for (const language of LANGUAGES) {
        const name = { python: "spark-vllm-python", yaml: "spark-vllm", go: "spark-vllm-go" }[language];
        test(`${language}: ${STACK} previews the TypeScript program's resources and verdicts, plus the package's component`, { skip: skipFor(language) }, () => {
            const dir = project(language, STACK);
            const got = preview(dir, STACK, name);
            const extra = got.created.filter(r => r === "spark-vllm:index:SparkCluster spark");
            assert.equal(extra.length, 2, "the package's SparkCluster and the library's inside it");
            assert.deepEqual(got.created.filter((r, i) => i !== got.created.indexOf("spark-vllm:index:SparkCluster spark")), reference!.created);
            assert.deepEqual(got.verdicts, reference!.verdicts);
        });
    }

    test("yaml: a fresh checkout (the committed tree, no node_modules, no build) is installed and built by package add, then previews", { skip: skipFor("yaml") }, () => {
        // As a git URL's clone: `npm install` in provider/ (the CLI's) runs its prepare, `npm ci` at the root (from the
        // npm registry), which builds dist/. The committed tree: CI runs a clean clone.
        const checkout = testTempDir("lang-checkout");
        temps.push(checkout);
        const archive = spawnSync("sh", ["-c", `git -C '${REPO}' archive HEAD | tar -x -C '${checkout}'`], { encoding: "utf8" });
        assert.equal(archive.status, 0, archive.stderr);
        assert.ok(!fs.existsSync(path.join(checkout, "node_modules")) && !fs.existsSync(path.join(checkout, "dist")));
        const dir = testTempDir("lang-yaml-checkout");
        temps.push(dir);
        fs.cpSync(path.join(REPO, "examples", "yaml"), dir, { recursive: true });
        fs.copyFileSync(path.join(REPO, `Pulumi.${STACK}.yaml`), path.join(dir, `Pulumi.${STACK}.yaml`));
        fs.mkdirSync(path.join(dir, "backend"));
        const add = pulumi(dir, ["package", "add", path.join(checkout, "provider")], false);
        assert.equal(add.status, 0, add.output);
        assert.ok(fs.existsSync(path.join(checkout, "dist", "provider", "index.js")), "prepare built the checkout");
        assert.equal(pulumi(dir, ["stack", "init", STACK, "--secrets-provider", "passphrase"]).status, 0);
        const got = preview(dir, STACK, "spark-vllm");
        assert.deepEqual(got.created.filter((r, i) => i !== got.created.indexOf("spark-vllm:index:SparkCluster spark")), reference!.created);
    });

    test("python: a stack with a token in extraArgs and a 10 GbE interface fails the pack with both policies' messages", { skip: skipFor("python") }, () => {
        const config = structuredClone((yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, any> }).config);
        config["spark-vllm:vllm"].extraArgs = ["--tokenizer", "hf_abcdefghijklmnopqrstuvwxyz0123456789"];
        config["spark-vllm:hosts"][1].fabric.interface = "eth0";
        const dir = project("python", "bad", config);
        const r = pulumi(dir, ["preview", "--stack", "bad", "--policy-pack", path.join(REPO, "policies")]);
        assert.notEqual(r.status, 0, r.output);
        assert.match(r.output, /\[mandatory\]\s+no-secrets-in-text/);
        assert.match(r.output, /spark-vllm-launch contains a Hugging Face token/);
        assert.match(r.output, /\[mandatory\]\s+fabric-interface-family/);
        assert.doesNotMatch(r.output, /hf_abcdefghijklmnopqrstuvwxyz0123456789/);
    });

    test("python: bad args fail before any resource, listing every problem with its key path", { skip: skipFor("python") }, () => {
        const config = structuredClone((yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, any> }).config);
        config["spark-vllm:hosts"][1].ssh.port = 70000;
        delete config["spark-vllm:model"].cacheDir;
        const dir = project("python", "broken", config);
        const r = pulumi(dir, ["preview", "--stack", "broken"]);
        assert.notEqual(r.status, 0, r.output);
        assert.match(r.output, /invalid stack config \(2 problems\)/);
        assert.match(r.output, /hosts\[1\]\.ssh\.port/);
        assert.match(r.output, /model\.cacheDir/);
        assert.doesNotMatch(r.output, /command:remote:Command/);
    });
});
