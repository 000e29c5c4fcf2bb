// The program through the Pulumi CLI's own runner (@pulumi/pulumi cmd/run, started as the Node language
// host starts it) against a gRPC engine: what setMocks skips. Each check here fails if the program only
// works in-process under mocks: ts-node type-checking, the runner's exit protocol and leak detection,
// feature negotiation, and the wire encoding of secrets, unknowns and per-property dependencies.
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import * as yaml from "js-yaml";
import { REPO } from "../../grpc/deploy";
import { tempProject } from "../../grpc/fixture";
import { EXIT_ALREADY_REPORTED, RunResult, runProgram } from "../../grpc/runner";
import { Registration } from "../../grpc/monitor";
import { Secret, UNKNOWN, pathsOf } from "../../grpc/wire";

const SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAgrpc-test-key\n-----END OPENSSH PRIVATE KEY-----\n";
const HF_TOKEN = "hf_grpcTestTokenAbcdefghijklmnopqrstuv";

function stackConfig(name: string): Record<string, unknown> {
    return (yaml.load(fs.readFileSync(path.join(REPO, `Pulumi.${name}.yaml`), "utf8")) as { config: Record<string, unknown> }).config;
}

const byName = (run: RunResult, name: string): Registration => {
    const r = run.registrations.find(x => x.name === name);
    assert.ok(r, `${name} was registered (got ${run.registrations.map(x => x.name).join(", ")})`);
    return r;
};

/** Every string (outside a Secret) that contains needle, by path. */
function plainOccurrences(v: any, needle: string, at = ""): string[] {
    if (v instanceof Secret || v === UNKNOWN) return [];
    if (typeof v === "string") return v.includes(needle) ? [at] : [];
    if (Array.isArray(v)) return v.flatMap((x, i) => plainOccurrences(x, needle, `${at}[${i}]`));
    if (v && typeof v === "object") return Object.entries(v).flatMap(([k, x]) => plainOccurrences(x, needle, at ? `${at}.${k}` : k));
    return [];
}

describe("the program run by @pulumi/pulumi cmd/run over gRPC", () => {
    let typeError: RunResult, leak: RunResult, spark: RunResult;
    before(async () => {
        const bad = tempProject("typeerror", `import * as pulumi from "@pulumi/pulumi";\nconst port: number = "8000";\nexport const out = pulumi.output(port);\n`);
        const leaking = tempProject("leak", [
            `import * as pulumi from "@pulumi/pulumi";`,
            `const never = pulumi.output(new Promise<string>(() => {}));`,
            `class Thing extends pulumi.CustomResource { constructor(name: string, args: { value: pulumi.Input<string> }) { super("test:index:Thing", name, args); } }`,
            `new Thing("thing", { value: never });`,
        ].join("\n") + "\n");
        [typeError, leak, spark] = await Promise.all([
            runProgram({ dir: bad, stack: "dev", config: {}, dryRun: true }),
            runProgram({ dir: leaking, stack: "dev", config: {}, dryRun: true }),
            runProgram({
                dir: REPO, stack: "spark", dryRun: true,
                config: { ...stackConfig("spark"), "spark-vllm:sshPrivateKey": SSH_KEY, "spark-vllm:hfToken": HF_TOKEN },
                secretKeys: ["spark-vllm:sshPrivateKey", "spark-vllm:hfToken"],
            }),
        ]);
    });

    it("type-checks TypeScript through Pulumi's ts-node path: a type error fails the run before any resource", () => {
        // tsx (the mocks' loader) strips types without checking; cmd/run's ts-node reports TS2322 and exits 32.
        assert.equal(typeError.exitCode, EXIT_ALREADY_REPORTED, typeError.stderr);
        assert.equal(typeError.bail, true);
        const errors = typeError.logs.filter(l => l.severity === "error").map(l => l.message).join("\n");
        assert.match(errors, /Unable to compile TypeScript/);
        assert.match(errors, /index\.ts\(2,7\): error TS2322: Type 'string' is not assignable to type 'number'/);
        assert.deepEqual(typeError.registrations.filter(r => r.type !== "pulumi:pulumi:Stack"), []);
    });

    it("detects a registration left waiting at exit, as the runner does, and fails with exit 1", () => {
        assert.equal(leak.exitCode, 1);
        assert.equal(leak.error, "Program exited with non-zero exit code: 1");
        assert.match(leak.stderr, /the program exited before the following resource\nregistrations could complete:\n {2}\* "thing" \[test:index:Thing\] was waiting for the value of its input property "value"/);
        assert.equal(leak.registrations.some(r => r.name === "thing"), false);
    });

    it("runs the real program clean and negotiates features as the 3.276 SDK does", () => {
        assert.equal(spark.exitCode, 0, spark.stderr);
        assert.deepEqual(spark.logs.filter(l => l.severity === "error"), []);
        assert.ok(spark.calls.includes("getDeploymentInfo"), `calls: ${[...new Set(spark.calls)].join(", ")}`);
        assert.ok(spark.calls.includes("setRootResource") || spark.calls.includes("getRootResource"));
        assert.ok(spark.stackOutputs, "the stack's outputs were registered");
    });

    it("sends secrets as secrets: the SSH key and HF token never cross the wire in plain text", () => {
        for (const r of spark.registrations) {
            assert.deepEqual(plainOccurrences(r.inputs, "grpc-test-key"), [], `${r.name}: SSH key in plain text`);
            assert.deepEqual(plainOccurrences(r.inputs, HF_TOKEN), [], `${r.name}: HF token in plain text`);
        }
        // The SDK marks the whole connection object secret once one of its values (privateKey) is.
        const preflight = byName(spark, "spark-spark-a-preflight");
        assert.ok(preflight.inputs.connection instanceof Secret, "connection is a secret");
        assert.equal((preflight.inputs.connection as Secret).value && ((preflight.inputs.connection as Secret).value as any).privateKey, SSH_KEY);
        const commands = spark.registrations.filter(r => r.type === "command:remote:Command");
        assert.ok(commands.length > 0 && commands.every(r => r.inputs.connection instanceof Secret), "every command's connection carries the key as a secret");
        assert.ok(spark.stackOutputs!.apiKey instanceof Secret || spark.stackOutputs!.apiKey === UNKNOWN, "apiKey output is secret (or unknown in preview)");
    });

    it("sends unknowns during preview, with the dependencies behind each property", () => {
        const container = byName(spark, "spark-spark-a-container");
        const image = byName(spark, "spark-spark-a-image");
        assert.equal(container.inputs.image, UNKNOWN, "the container's image is the RemoteImage's output: unknown before it is pulled");
        assert.ok(container.propertyDependencies.image?.includes(image.urn), `image depends on ${image.urn}`);
        assert.equal(container.provider?.split("::").slice(0, -1).join("::"), byName(spark, "spark-spark-a-docker").urn);
        const launch = byName(spark, "spark-vllm-launch");
        const key = byName(spark, "spark-api-key");
        assert.ok(pathsOf(launch.inputs, x => x === UNKNOWN).includes("stdin"), "the API key on stdin is unknown until the password exists");
        assert.ok(launch.propertyDependencies.stdin?.includes(key.urn), `stdin depends on ${key.urn}`);
        assert.match(container.urn, /^urn:pulumi:spark::spark-vllm::spark-vllm:index:SparkCluster\$spark-vllm:index:VllmContainer\$docker:index\/container:Container::spark-spark-a-container$/);
    });
});
