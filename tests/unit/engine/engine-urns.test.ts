// URNs as the real engine makes them (pulumi/pulumi@1b59498 pkg/resource/deploy/deployment.go generateURN:
// the parent's QualifiedType, unless it is the root stack, then urn.New in sdk/go/common/resource/urn/urn.go),
// which the test engine keys its state by, in both of its modes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { urnOf } from "../../grpc/monitor";

describe("urn.New", () => {
    const stack = urnOf("s", "p", "pulumi:pulumi:Stack", "p-s");
    const cluster = urnOf("s", "p", "spark-vllm:index:SparkCluster", "spark", stack);
    const host = urnOf("s", "p", "spark-vllm:index:SparkHost", "spark-a", cluster);
    it("under the root stack: the type alone", () => assert.equal(cluster, "urn:pulumi:s::p::spark-vllm:index:SparkCluster::spark"));
    it("deeper: the parent's whole type chain, joined by $ (not only the parent's last type, as the SDK's mocks do)", () => {
        assert.equal(urnOf("s", "p", "pulumi:providers:docker", "d", host),
            "urn:pulumi:s::p::spark-vllm:index:SparkCluster$spark-vllm:index:SparkHost$pulumi:providers:docker::d");
    });
});
