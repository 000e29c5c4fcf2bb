// Values unknown in preview reach a rule through @pulumi/policy's own proxy (proxy.js unknownCheckingProxy), which
// throws on reading one; the pack's rules get plain copies instead (policies/rules.ts knownInPreview), so they judge
// what is known rather than being reported as "can't run … during preview". The gRPC test
// (tests/unit/grpc/grpc-preview-policies.test.ts) proves it through the real analyzer server.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import * as proxy from "@pulumi/policy/proxy";
import { COMMAND, CONTAINER, REMOTE_IMAGE, UNKNOWN, knownOrUnknown, policies } from "../../policies/rules";

const p = proxy as unknown as Record<string, string> & { unknownCheckingProxy<T>(o: T): T };
const sentinels = ["unknownBooleanValue", "unknownNumberValue", "unknownStringValue", "unknownArrayValue", "unknownAssetValue", "unknownArchiveValue", "unknownObjectValue"];

test("knownOrUnknown: every unknown sentinel, at any depth of the server's proxy, becomes UNKNOWN; known values stay", () => {
    const props = p.unknownCheckingProxy({
        name: "x", n: 3, yes: true, labels: [{ label: "a", value: p.unknownStringValue }],
        ...Object.fromEntries(sentinels.map(s => [s, p[s]])),
    });
    assert.throws(() => (props as any).unknownStringValue, /can't be known during preview/, "the server's proxy throws");
    assert.deepEqual(knownOrUnknown(props), {
        name: "x", n: 3, yes: true, labels: [{ label: "a", value: UNKNOWN }], ...Object.fromEntries(sentinels.map(s => [s, UNKNOWN])),
    });
});

const policy = (name: string) => policies.find(x => x.name === name)!;
const digest = (c: string) => `vllm/vllm-openai:v0.17.1@sha256:${c.repeat(64)}`;

test("same-image-on-every-host judges the pulls' names while the containers' digests are unknown", () => {
    const resources = [
        { type: REMOTE_IMAGE, name: "spark-spark-a-image", urn: "a", props: p.unknownCheckingProxy({ name: digest("a"), repoDigest: p.unknownStringValue }) },
        { type: REMOTE_IMAGE, name: "spark-spark-b-image", urn: "b", props: p.unknownCheckingProxy({ name: digest("b"), repoDigest: p.unknownStringValue }) },
        { type: CONTAINER, name: "spark-spark-a-container", urn: "c", props: p.unknownCheckingProxy({ image: p.unknownStringValue, labels: [] }) },
    ];
    const out: string[] = [];
    (policy("same-image-on-every-host") as StackValidationPolicy).validateStack!({ resources, getConfig: () => ({}) } as any, (m: string) => out.push(m));
    assert.deepEqual(out, [`hosts use different images: ${digest("a")}, ${digest("b")}. Remediation: use one spark-vllm:image for every host.`]);
});

test("endpoint-requires-api-key: an unknown stdin (the key not generated yet) is a piped key; no read is still refused", () => {
    const run = (create: string) => {
        const out: string[] = [];
        const v = (policy("endpoint-requires-api-key") as ResourceValidationPolicy).validateResource;
        for (const fn of [v!].flat()) fn({ type: COMMAND, name: "launch", urn: "l", props: p.unknownCheckingProxy({ create, stdin: p.unknownStringValue }) } as any, (m: string) => out.push(m));
        return out;
    };
    assert.deepEqual(run("IFS= read -r VLLM_API_KEY; export VLLM_API_KEY; vllm serve m"), []);
    assert.equal(run("vllm serve m").length, 1);
});

test("image-change-interrupts-serving reads the vLLM containers' unknown image through the server's proxy, beside the proxy's known one", () => {
    const container = (name: string, host: string | undefined, image: string) => ({ type: CONTAINER, name, urn: name, props: p.unknownCheckingProxy({
        image, labels: host ? [{ label: "spark-vllm.host", value: host }, { label: "spark-vllm.role", value: "head" }] : [{ label: "spark-vllm.role", value: "proxy" }] }) });
    const judge = (vllmImage: string, proxyImage: string) => {
        const out: string[] = [];
        const resources = [container("spark-spark-a-container", "spark-a", vllmImage), container("spark-proxy", undefined, proxyImage)];
        (policy("image-change-interrupts-serving") as StackValidationPolicy).validateStack!({ resources, getConfig: () => ({}) } as any, (m: string) => out.push(m));
        return out;
    };
    assert.equal(judge(p.unknownStringValue, "nginx@sha256:" + "e".repeat(64)).length, 1, "a new image on a deployed stack");
    assert.deepEqual(judge(digest("a"), "nginx@sha256:" + "e".repeat(64)), [], "the image stays");
    assert.deepEqual(judge(p.unknownStringValue, p.unknownStringValue), [], "a first deploy");
});
