// The mandatory rules run in preview under the real analyzer server. @pulumi/policy's server hands rules a proxy that
// throws on reading a value unknown in preview, and then reports "can't run policy … during preview" as advisory
// instead of the rule's verdict (@pulumi/policy 1.21.0 proxy.js unknownCheckingProxy, server.js UnknownValueError).
// Here a program whose hosts pull different images and whose `vllm serve` commands take their stdin from a password
// not yet created (unknown in preview, as the API key is) is previewed through tests/grpc/deploy.ts.
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "path";
import { DeployResult, REPO, deploy, mandatory } from "../../grpc/deploy";
import { tempProject } from "../../grpc/fixture";

const A = "vllm/vllm-openai:v0.17.1@sha256:" + "a".repeat(64);
const B = "vllm/vllm-openai:v0.14.0@sha256:" + "b".repeat(64);

describe("the mandatory rules in preview, through the analyzer server", () => {
    let preview: DeployResult;
    before(async () => {
        preview = await deploy({
            dir: tempProject("preview-rules", [
                `import * as pulumi from "@pulumi/pulumi";`,
                `class R extends pulumi.CustomResource { constructor(t: string, name: string, args: Record<string, pulumi.Input<any>>) { super(t, name, args); } }`,
                `const key = new R("random:index/randomPassword:RandomPassword", "api-key", { length: 40, special: false, result: undefined });`,
                `const stdin = (key as any).result.apply((k: string) => k + "\\n");`,
                `for (const [host, image] of [["spark-a", ${JSON.stringify(A)}], ["spark-b", ${JSON.stringify(B)}]]) {`,
                `    const pull = new R("docker:index/remoteImage:RemoteImage", host + "-image", { name: image, repoDigest: undefined });`,
                `    new R("docker:index/container:Container", host + "-container", { name: "spark-vllm-" + host, image: (pull as any).repoDigest,`,
                `        networkMode: "host", ipcMode: "host", labels: [{ label: "spark-vllm.host", value: host }] });`,
                `}`,
                `new R("command:remote:Command", "served", { create: "set -e; IFS= read -r VLLM_API_KEY; export VLLM_API_KEY; vllm serve m --tensor-parallel-size 2", stdin });`,
                `new R("command:remote:Command", "open", { create: "vllm serve m --tensor-parallel-size 2", stdin });`,
            ].join("\n") + "\n"),
            stack: "dev", config: {}, dryRun: true, packDir: path.join(REPO, "policies"),
        });
    });

    it("runs every rule: no \"can't run policy … during preview\"", () => {
        const all = [...preview.diagnostics, ...(preview.stackDiagnostics ?? [])];
        assert.ok(preview.stackDiagnostics, "AnalyzeStack ran");
        assert.deepEqual(all.filter(d => /can't run/.test(d.message)).map(d => `${d.policy}: ${d.message}`), []);
    });

    it("refuses hosts that would pull different images, from the pulls' names (the containers' digests are unknown yet)", () => {
        const same = mandatory(preview.stackDiagnostics).filter(d => d.policy === "same-image-on-every-host");
        assert.equal(same.length, 1, JSON.stringify(preview.stackDiagnostics));
        assert.match(same[0].message, new RegExp(`hosts use different images: ${A.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}, ${B.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
        assert.equal(preview.failed, true);
    });

    it("endpoint-requires-api-key: a serve that reads the key from a stdin unknown yet passes; one that does not read it is refused", () => {
        const refused = mandatory(preview.diagnostics).filter(d => d.policy === "endpoint-requires-api-key").map(d => d.urn?.split("::").pop());
        assert.deepEqual(refused, ["open"]);
    });
});
