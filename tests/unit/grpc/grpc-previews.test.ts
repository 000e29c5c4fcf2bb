// Each provider's preview answer (tests/grpc/previews.ts), as the program sees it: an id ("" is unknown) and the
// outputs, where a property left out is unknown.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { previewCreate, previewOutcome, previewUpdate } from "../../grpc/previews";
import type { Registration } from "../../grpc/monitor";
import { decode, encode } from "../../grpc/wire";
import type { Entry } from "../../engine/state";

const COMMAND = "command:remote:Command", CONTAINER = "docker:index/container:Container", IMAGE = "docker:index/remoteImage:RemoteImage";
const PASSWORD = "random:index/randomPassword:RandomPassword";

function reg(type: string, name: string, inputs: Record<string, any>): Registration {
    const wire = encode(inputs);
    return { urn: `urn:pulumi:s::p::${type}::${name}`, type, name, custom: true, inputs: decode(wire), wire, dependencies: [], propertyDependencies: {},
        deleteBeforeReplace: false, additionalSecretOutputs: [], ignoreChanges: [], replaceOnChanges: [], seq: 0 };
}
const entry = (type: string, name: string, id: string, inputs: Record<string, any>, outputs: Record<string, any>): Entry =>
    ({ urn: `urn:pulumi:s::p::${type}::${name}`, type, name, dependencies: [], id, inputs, outputs, seq: 0 });

describe("remote.Command (pulumi-command v1.2.1, pulumi-go-provider v1.3.0 infer)", () => {
    it("create: the inputs echoed, stdout and stderr unknown, and an id already known (name + 8 hex digits)", () => {
        const r = reg(COMMAND, "spark-a-launch", { create: "ray start", triggers: ["x"] });
        const out = previewCreate(r);
        assert.match(out.id!, /^spark-a-launch[0-9a-f]{8}$/);
        assert.deepEqual(out.outputs, r.wire);
        assert.ok(!("stdout" in out.outputs) && !("stderr" in out.outputs));
        assert.notEqual(previewCreate(r).id, out.id, "a fresh id each time");
    });

    it("update: the old id, the new inputs, stdout and stderr unknown (an input changed)", () => {
        const old = entry(COMMAND, "pre", "pre-1", { create: "a" }, { create: "a", stdout: "{\"arch\":\"aarch64\"}", stderr: "" });
        const out = previewUpdate(reg(COMMAND, "pre", { create: "b" }), old);
        assert.equal(out.id, "pre-1");
        assert.deepEqual(out.outputs, { create: "b" });
    });
});

describe("docker (terraform-provider-docker v4.5.0 through pulumi-terraform-bridge v3.133.0)", () => {
    it("RemoteImage create: the inputs; repoDigest, imageId and the id unknown", () => {
        const out = previewCreate(reg(IMAGE, "img", { name: "r:t@sha256:1", keepLocally: true }));
        assert.equal(out.id, "");
        assert.deepEqual(Object.keys(out.outputs).sort(), ["keepLocally", "name"]);
    });

    it("RemoteImage update: the prior state with the new inputs over it, so repoDigest and imageId stay known", () => {
        const old = entry(IMAGE, "img", "sha256:abr:t", { name: "r:t", keepLocally: false }, { name: "r:t", keepLocally: false, repoDigest: "r@sha256:1", imageId: "sha256:ab" });
        const out = previewOutcome("update", reg(IMAGE, "img", { name: "r:t", keepLocally: true }), old);
        assert.equal(out.id, "sha256:abr:t");
        assert.deepEqual(decode(out.outputs), { name: "r:t", keepLocally: true, repoDigest: "r@sha256:1", imageId: "sha256:ab" });
    });

    it("Container create: the inputs, the id unknown; update: the old id and prior computed outputs, an input dropped is gone", () => {
        const created = previewCreate(reg(CONTAINER, "c", { name: "spark-vllm-a", image: "r@sha256:1", restart: "no" }));
        assert.equal(created.id, "");
        assert.ok(!("exitCode" in created.outputs));
        const old = entry(CONTAINER, "c", "c0ffee", { name: "spark-vllm-a", image: "r@sha256:1", restart: "no", memory: 512 },
            { name: "spark-vllm-a", image: "r@sha256:1", restart: "no", memory: 512, id: "c0ffee", exitCode: 0 });
        const out = previewUpdate(reg(CONTAINER, "c", { name: "spark-vllm-a", image: "r@sha256:1", restart: "unless-stopped" }), old);
        assert.equal(out.id, "c0ffee");
        assert.deepEqual(decode(out.outputs), { name: "spark-vllm-a", image: "r@sha256:1", restart: "unless-stopped", id: "c0ffee", exitCode: 0 });
    });
});

describe("random.RandomPassword (terraform-provider-random through the bridge)", () => {
    it("create: the inputs; result and the id unknown", () => {
        const out = previewCreate(reg(PASSWORD, "api-key", { length: 40, special: false }));
        assert.equal(out.id, "");
        assert.deepEqual(Object.keys(out.outputs).sort(), ["length", "special"]);
    });
});

describe("provider resources (created by the engine's provider registry)", () => {
    it("create: the id is the UnknownID token, which the program sees as a string; the inputs echoed", () => {
        const r = reg("pulumi:providers:docker", "spark-a-docker", { host: "ssh://nvidia@spark-a.local" });
        const out = previewCreate(r);
        assert.equal(out.id, "04da6b54-80e4-46f7-96ec-b56ff0331ba9");
        assert.deepEqual(out.outputs, r.wire);
    });
});
