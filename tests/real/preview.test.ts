// `pulumi preview --diff` of every committed stack on the real Pulumi (CLI, Node.js language host, the command, docker
// and random providers: tests/engine/real.ts findRealPulumi), offline, with and without the policy pack, as the
// pull-request preview runs it (.github/workflows/preview.yml); and a stack that breaks mandatory policies fails with
// their messages. Each preview runs in a network namespace of its own with only loopback up (the CLI talks to its
// plugins over loopback): the stacks name real machines, and a preview must need no path to them. Needs root (unshare).
import { after, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { findRealPulumi } from "../engine/real";
import { testTempDir } from "../tempDir";
import { offlineEnv, runPulumi, typescriptProject } from "./realCli";
import { plannedResources } from "../../components/plan/resources";
import { parseSpec } from "../../components/spec/parseSpec";
import { rawConfigFromStack } from "../../components/spec/stackConfig";
import { planCluster } from "../../components/plan/plan";

const REPO = path.join(__dirname, "..", "..");
const { found: real, missing } = findRealPulumi();
const skip = real ? (process.getuid?.() === 0 ? false : "needs root (a network namespace per preview)") : `the real Pulumi is not installed: ${missing.join("; ")}`;
if (real) console.log(`# real Pulumi: CLI ${real.version} (${real.dir}); providers: ${Object.entries(real.providers).map(([n, p]) => `${n} ${p}`).join(", ")}`);

const STACKS = fs.readdirSync(REPO).map(f => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1]).filter((s): s is string => !!s).sort();
const temps: string[] = [];
after(() => temps.forEach(d => fs.rmSync(d, { recursive: true, force: true })));

/** A project folder running the repository's program, with the stack's file and the stack created. */
function project(stack: string, config?: Record<string, unknown>): { dir: string; env: NodeJS.ProcessEnv } {
    const dir = testTempDir(`real-preview-${stack}`);
    temps.push(dir);
    typescriptProject(dir, stack, config);
    const env = offlineEnv(real!, dir, "preview-test-not-a-secret");
    const init = pulumi(dir, env, ["stack", "init", stack, "--secrets-provider", "passphrase"]);
    assert.equal(init.status, 0, init.output);
    return { dir, env };
}

const pulumi = (dir: string, env: NodeJS.ProcessEnv, args: string[]) => runPulumi(real!, dir, env, args);

/** The resources our plan registers for the stack (the same names the real preview must list). */
function plannedNames(stack: string): string[] {
    const doc = yaml.load(fs.readFileSync(path.join(REPO, `Pulumi.${stack}.yaml`), "utf8")) as { config: Record<string, unknown> };
    return plannedResources(planCluster(parseSpec(rawConfigFromStack(doc.config))))
        .filter(p => p.type !== "spark-vllm:gate" && !p.type.startsWith("pulumi:providers:")).map(p => p.name).sort();
}

describe("pulumi preview --diff of every committed stack on the real Pulumi, offline", { skip }, () => {
    for (const stack of STACKS) {
        test(`${stack}: passes without the policy pack and with it, listing the planned resources`, () => {
            const { dir, env } = project(stack);
            const plain = pulumi(dir, env, ["preview", "--diff", "--stack", stack]);
            assert.equal(plain.status, 0, plain.output);
            assert.doesNotMatch(plain.output, /malformed secret/);
            const withPack = pulumi(dir, env, ["preview", "--diff", "--stack", stack, "--policy-pack", path.join(REPO, "policies"), "--json"]);
            assert.equal(withPack.status, 0, withPack.output);
            const result = JSON.parse(withPack.output.slice(withPack.output.indexOf("{")));
            // The resource's own type is the last of the URN's type chain (parent$child); components and providers aside.
            const ownType = (urn: string) => urn.split("::")[2].split("$").pop()!;
            const created = (result.steps as Array<{ op: string; urn: string }>)
                .filter(s => s.op === "create" && !/^(pulumi|spark-vllm):/.test(ownType(s.urn)))
                .map(s => s.urn.split("::").pop()!).sort();
            assert.deepEqual(created, plannedNames(stack));
            const mandatory = (result.diagnostics ?? []).filter((d: { message: string }) => /\[mandatory\]/.test(d.message));
            assert.deepEqual(mandatory, []);
        });
    }

    test("a stack with a token pasted into extraArgs and a 10 GbE interface on one host fails the pack's preview with both policies' messages", () => {
        const config = structuredClone((yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, any> }).config);
        config["spark-vllm:vllm"].extraArgs = ["--tokenizer", "hf_abcdefghijklmnopqrstuvwxyz0123456789"];
        config["spark-vllm:hosts"][1].fabric.interface = "eth0";
        const { dir, env } = project("bad", config);
        const plain = pulumi(dir, env, ["preview", "--stack", "bad"]);
        assert.equal(plain.status, 0, `without the pack nothing refuses it:\n${plain.output}`);
        const r = pulumi(dir, env, ["preview", "--stack", "bad", "--policy-pack", path.join(REPO, "policies")]);
        assert.notEqual(r.status, 0, r.output);
        assert.match(r.output, /no-secrets-in-text/);
        assert.match(r.output, /spark-vllm-launch contains a Hugging Face token/);
        assert.match(r.output, /fabric-interface-family/);
        assert.match(r.output, /hosts use different interface families/);
        assert.doesNotMatch(r.output, /hf_abcdefghijklmnopqrstuvwxyz0123456789/, "the verdict names what it found, never the token");
    });
});
