// End to end (needs root: network namespaces, dockerd, sshd) on the real Pulumi with its Python language host: the
// Python example (examples/python) with the component package added (`pulumi package add provider`, the SDK into the
// example's venv from PyPI) deploys to two simulated Sparks with the policy pack and serves a completion with its API
// key, a second `up` changes nothing, and `destroy` leaves the hosts clean. Skipped, saying why, where the real
// Pulumi or its Python host is missing (tests/real/packageProject.ts names the hosts it found).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { completionStatus, simSuite } from "./suite";
import { leftovers } from "../sim/stacks";
import { findRealPulumi, usesRealPulumi } from "../engine/real";
import { testTempDir } from "../tempDir";
import { addPackage, buildPackage, languageHost, languageHostsLine } from "../real/packageProject";
import type { Report } from "../engine/engine";

const REPO = path.join(__dirname, "..", "..");
const { found: real, missing } = findRealPulumi();
console.log(`# ${languageHostsLine(real)}`);
const skip = !usesRealPulumi() ? "runs on the real Pulumi only (SPARK_VLLM_ENGINE is not real)"
    : !real ? `the real Pulumi is not installed: ${missing.join("; ")}`
        : !languageHost("python", real) ? `pulumi-language-python is not installed (beside ${real.dir} or on PATH)` : false;
// Only when it runs: the simulated hosts take a minute to start.
const suite = skip ? undefined : simSuite("python", {});

/** The CLI in the project folder, without blocking the event loop (the sim's daemons report through it). */
function pulumi(dir: string, env: NodeJS.ProcessEnv, args: string[], input?: string): Promise<{ status: number | null; output: string }> {
    return new Promise(resolve => {
        const child = spawn(real!.pulumi, ["--cwd", dir, "--non-interactive", ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
        let output = "";
        child.stdout.on("data", d => (output += d));
        child.stderr.on("data", d => (output += d));
        child.stdin.end(input ?? "");
        child.on("close", status => resolve({ status, output }));
    });
}

test("python example: up serves with the pack, a second up changes nothing, destroy cleans (the component package, real Pulumi)", { skip, timeout: 1_200_000 }, async () => {
    const s = suite!.sim;
    const stack = suite!.stack("python");
    const dir = testTempDir("e2e-python");
    fs.mkdirSync(path.join(dir, "backend"));
    const env: NodeJS.ProcessEnv = {
        ...process.env, ...stack.transport.env,
        PATH: `${real!.dir}:${path.join(REPO, "node_modules", ".bin")}:${stack.transport.env.PATH ?? process.env.PATH}`,
        PULUMI_BACKEND_URL: `file://${path.join(dir, "backend")}`, PULUMI_CONFIG_PASSPHRASE: "e2e-python-not-a-secret",
        PULUMI_SKIP_UPDATE_CHECK: "true", PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    };
    delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
    buildPackage();
    addPackage("python", dir, args => {
        const r = spawnSync(real!.pulumi, ["--cwd", dir, "--non-interactive", ...args], { env, encoding: "utf8" });
        return { status: r.status, output: `${r.stdout}${r.stderr}` };
    });
    fs.writeFileSync(path.join(dir, "Pulumi.python.yaml"), yaml.dump({ config: stack.config }, { lineWidth: -1 }));
    const init = await pulumi(dir, env, ["stack", "init", "python", "--secrets-provider", "passphrase"]);
    assert.equal(init.status, 0, init.output);
    const pack = ["--policy-pack", path.join(REPO, "policies")];
    let upped = false;
    try {
        const first = await pulumi(dir, env, ["up", "--yes", "--stack", "python", ...pack]);
        upped = true;
        assert.equal(first.status, 0, first.output);
        const created = Number(/(\d+) created/.exec(first.output)?.[1]);
        assert.ok(created > 20, first.output.slice(-3000));
        const out = await pulumi(dir, env, ["stack", "output", "--json", "--show-secrets", "--stack", "python"]);
        assert.equal(out.status, 0, out.output);
        const outputs = JSON.parse(out.output);
        assert.match(outputs.endpoint, /^http:\/\/198\.1[89]\.\d+\.\d+:8000\/v1$/);
        assert.equal(outputs.modelName, "qwen3.5-122b");
        assert.equal(outputs.apiKey.length, 40);
        assert.deepEqual(Object.keys(outputs.hosts).sort(), s.hosts.map(h => h.name).sort());
        assert.ok(outputs.serving && outputs.fabric, "the serving proof's and the fabric check's figures");
        assert.equal(await completionStatus({ outputs } as unknown as Report), 200, "a completion with the API key answers");
        const shown = await pulumi(dir, env, ["stack", "output", "--json", "--stack", "python"]);
        assert.equal(JSON.parse(shown.output).apiKey, "[secret]", "apiKey is a secret output");

        // --expect-no-changes: the CLI fails the update if any step would change something.
        const again = await pulumi(dir, env, ["up", "--yes", "--expect-no-changes", "--stack", "python", ...pack]);
        assert.equal(again.status, 0, again.output);
        assert.equal(Number(/(\d+) unchanged/.exec(again.output)?.[1]), created, again.output.slice(-2000));
    } finally {
        if (upped) {
            const d = await pulumi(dir, env, ["destroy", "--yes", "--stack", "python"]);
            assert.equal(d.status, 0, d.output);
        }
    }
    assert.deepEqual(await leftovers(s), []);
});
