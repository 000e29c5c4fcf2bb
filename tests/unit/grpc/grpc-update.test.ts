// An update through the CLI's runner: the program's applies run on known values, so an error thrown in one
// must fail the run (exit 32, the message logged) instead of hanging (tests/grpc/inspect-fix.js says why it hung).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { tempProject } from "../../grpc/fixture";
import { EXIT_ALREADY_REPORTED, runProgram } from "../../grpc/runner";
import { REPO } from "../../grpc/deploy";
import { fakeOutcome } from "../../grpc/fake";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";

describe("an update whose program throws inside an apply", () => {
    it("fails with the program's error instead of hanging", { timeout: 90_000 }, async () => {
        const dir = tempProject("apply-throws", [
            `import * as pulumi from "@pulumi/pulumi";`,
            `class Thing extends pulumi.CustomResource {`,
            `    declare readonly stdout: pulumi.Output<string>;`,
            `    constructor(name: string) { super("test:index:Thing", name, { value: "x", stdout: undefined }); }`,
            `}`,
            `export const out = new Thing("thing").stdout.apply(s => s.toUpperCase());`,
        ].join("\n") + "\n");
        // The provider answers without the `stdout` the program reads: undefined in an update, so the apply throws.
        const run = await runProgram({ dir, stack: "dev", config: {}, dryRun: false, onRegister: async () => ({ id: "thing-id", outputs: { value: "x" } }) });
        assert.equal(run.exitCode, EXIT_ALREADY_REPORTED, run.stderr);
        const errors = run.logs.filter(l => l.severity === "error").map(l => l.message);
        assert.match(errors.join("\n"), /Cannot read properties of undefined \(reading 'toUpperCase'\)/);
    });
});

describe("the program's own cross-host check in an update, run as the real language host runs it", () => {
    it("fails cleanly with the check's message when the hosts pulled different images, even where util.inspect hangs", { timeout: 120_000 }, async () => {
        const config = (yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, unknown> }).config;
        const digests: Record<string, string> = { "spark-spark-a-image": "sha256:" + "a".repeat(64), "spark-spark-b-image": "sha256:" + "b".repeat(64) };
        const run = await runProgram({
            dir: REPO, stack: "spark", config, dryRun: false, inspectFix: false, env: { PULUMI_NODEJS_TRANSPILE_ONLY: "true" },
            onRegister: async r => {
                const outcome = fakeOutcome(r);
                if (digests[r.name]) outcome.outputs.repoDigest = `registry.example/vllm@${digests[r.name]}`;
                return outcome;
            },
        });
        const errors = run.logs.filter(l => l.severity === "error").map(l => l.message).join("\n");
        assert.match(errors, /the hosts pulled different images for/);
        // Once, as written: not behind one "error serializing property" prefix per resource that waited on the check.
        assert.equal(errors.match(/the hosts pulled different images/g)?.length, 1, errors);
        assert.ok(!errors.includes("error serializing property"), errors);
        assert.equal(run.exitCode, EXIT_ALREADY_REPORTED, run.stderr);
    });
});

describe("a stack config with problems, run as the real language host runs it", () => {
    it("prints every problem with its key path, as a message alone: no 'unhandled exception', no stack frames", { timeout: 120_000 }, async () => {
        const config = { ...(yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, unknown> }).config };
        config["spark-vllm:logdir"] = "/var/tmp/x";
        const run = await runProgram({ dir: REPO, stack: "spark", config, dryRun: true, env: { PULUMI_NODEJS_TRANSPILE_ONLY: "true" } });
        const errors = run.logs.filter(l => l.severity === "error").map(l => l.message);
        assert.equal(errors.length, 1, errors.join("\n"));
        assert.match(errors[0], /^invalid stack config \(1 problem\):\n {2}- spark-vllm:logdir: unknown key; did you mean logDir\?/);
        assert.ok(!/unhandled exception|\n\s+at /.test(errors[0]), errors[0]);
        assert.equal(run.exitCode, EXIT_ALREADY_REPORTED, run.stderr);
    });
});
