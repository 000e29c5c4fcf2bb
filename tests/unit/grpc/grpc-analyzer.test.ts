// The policy pack as the CLI runs it: @pulumi/policy's analyzer server started like an analyzer plugin,
// fed each registration by Analyze and the stack by AnalyzeStack (tests/grpc/analyzer.ts). A stack the
// program accepts but the pack forbids is refused: in preview with exit 1 and both verdicts printed, in
// update before the offending resource's step runs (a small program registering remote.Command resources:
// the real one needs real providers' outputs to get that far).
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { DeployResult, REPO, deploy, mandatory } from "../../grpc/deploy";
import { tempProject } from "../../grpc/fixture";
import { testTempDir } from "../../tempDir";

/** Pulumi.spark.yaml with a token pasted into extraArgs (per resource) and a 10 GbE-style interface on one host (per stack). */
function badConfig(): Record<string, any> {
    const config = structuredClone((yaml.load(fs.readFileSync(path.join(REPO, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, any> }).config);
    config["spark-vllm:vllm"].extraArgs = ["--tokenizer", "hf_abcdefghijklmnopqrstuvwxyz0123456789"];
    config["spark-vllm:hosts"][1].fabric.interface = "eth0";
    return config;
}

describe("the policy pack through its analyzer server", () => {
    let preview: { code: number | null; stdout: string; stderr: string };
    let update: DeployResult;
    const stepped: string[] = [];
    before(async () => {
        const dir = testTempDir("grpc-bad-stack");
        fs.writeFileSync(path.join(dir, "Pulumi.bad.yaml"), yaml.dump({ config: badConfig() }));
        [preview, update] = await Promise.all([
            new Promise<{ code: number | null; stdout: string; stderr: string }>(resolve =>
                execFile(process.execPath, ["--import", "tsx", path.join(REPO, "scripts", "preview.ts"), "--stack", "bad", "--dir", dir], { cwd: REPO, maxBuffer: 1 << 24 },
                    (err, stdout, stderr) => resolve({ code: err ? (err as any).code ?? 1 : 0, stdout, stderr }))),
            deploy({
                dir: tempProject("refused", [
                    `import * as pulumi from "@pulumi/pulumi";`,
                    `class Command extends pulumi.CustomResource { constructor(name: string, args: Record<string, pulumi.Input<any>>, opts?: pulumi.CustomResourceOptions) { super("command:remote:Command", name, args, opts); } }`,
                    `const first = new Command("first", { create: "echo hello" });`,
                    `const leaky = new Command("leaky", { create: "vllm serve m --tokenizer hf_abcdefghijklmnopqrstuvwxyz0123456789" }, { dependsOn: [first] });`,
                    `new Command("after", { create: "echo after" }, { dependsOn: [leaky] });`,
                ].join("\n") + "\n"),
                stack: "dev", config: {}, dryRun: false, packDir: path.join(REPO, "policies"),
                onRegister: async r => {
                    stepped.push(r.name);
                    return { id: `${r.name}-id`, outputs: { ...r.wire, stdout: "", stderr: "" } };
                },
            }),
        ]);
    });

    it("npm run preview refuses the stack: exit 1, the resource verdict and the stack verdict from the server", () => {
        assert.equal(preview.code, 1, preview.stdout + preview.stderr);
        assert.match(preview.stdout, /FAIL \[mandatory\] no-secrets-in-text \(spark-vllm-launch\): [^\n]*\n +spark-vllm-launch contains a Hugging Face token/);
        assert.match(preview.stdout, /FAIL \[mandatory\] fabric-interface-family: [^\n]*\n +hosts use different interface families/);
        assert.match(preview.stdout, /preview failed: 2 mandatory policy violations/);
        assert.doesNotMatch(preview.stdout, /hf_abcdefghijklmnopqrstuvwxyz0123456789/, "the verdict names what it found, never the token");
    });

    it("in an update, a mandatory violation refuses the resource before its step; the stack policies never run", () => {
        assert.equal(update.failed, true);
        // The server's verdicts for the command: a token in its text, and a `vllm serve` without --api-key.
        assert.deepEqual(mandatory(update.diagnostics).map(d => [d.policy, d.urn?.split("::").pop()]).sort(), [["endpoint-requires-api-key", "leaky"], ["no-secrets-in-text", "leaky"]]);
        assert.equal(update.run.engineError, "resource urn:pulumi:dev::refused::command:remote:Command::leaky is invalid");
        assert.deepEqual(stepped, ["first"], "the refused command and what depends on it never ran");
        assert.equal(update.stackDiagnostics, undefined, "AnalyzeStack runs only after every step succeeded");
        assert.notEqual(update.run.exitCode, 0);
    });
});
