// The policies on several replicas (issue 39): TP × PP × replicas against the hosts' GPUs, memory per replica, each
// replica's hosts on one fabric subnet. Judged on the planned resources as a preview shows them (policies/offline.ts).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { planResources, verdicts } from "../../policies/offline";
import { rawConfig } from "../fixtures";
import { CONTAINER, UNKNOWN } from "../../policies/rules";

function violations(raw: Record<string, any>, policy: string): string[] {
    return verdicts(planResources(planCluster(parseSpec(raw), "x"))).find(v => v.policy === policy)!.violations;
}

function replicas(n: number, hosts: number, model = "meta-llama/Llama-3.3-70B-Instruct") {
    const raw = rawConfig(hosts, { tp: hosts / n });
    raw.replicas = n;
    raw.model.id = model;
    raw.vllm.maxModelLen = 8192;
    return raw;
}

test("parallelism-matches-gpus judges each replica: TP × PP equal to one replica's GPUs passes; a replica of other GPUs is named with the figures", () => {
    assert.deepEqual(violations(replicas(2, 4), "parallelism-matches-gpus"), []);
    // parseSpec refuses this config; the pack must refuse the same resources on its own (a program could build them).
    const resources = planResources(planCluster(parseSpec(replicas(2, 4)), "x"));
    const d = resources.find(r => r.name === "spark-spark-d-container")!;
    d.props = { ...d.props, labels: d.props.labels.map((l: { label: string; value: string }) => (l.label === "spark-vllm.gpus" ? { ...l, value: "3" } : l)) };
    const found = verdicts(resources).find(v => v.policy === "parallelism-matches-gpus")!.violations;
    assert.deepEqual(found, ["replica 2 (spark-c, spark-d) has 4 GPUs but vllm serve uses TP × PP = 2 × 1 = 2: TP × PP × replicas = 4 ≠ the hosts' 6 GPUs. " +
        "Remediation: set spark-vllm:vllm.tensorParallelSize × pipelineParallelSize to 3 (the GPUs of one replica), or change spark-vllm:replicas or the hosts."]);
});

test("model-weights-fit is per replica: a model one replica cannot hold is refused, saying each replica holds a whole copy", () => {
    // Qwen3.5-122B-A10B-FP8 (about 119 GB of weights) fits two Sparks (TP=2), not one.
    assert.deepEqual(violations(replicas(1, 2, "Qwen/Qwen3.5-122B-A10B-FP8"), "model-weights-fit"), []);
    const found = violations(replicas(2, 2, "Qwen/Qwen3.5-122B-A10B-FP8"), "model-weights-fit");
    assert.equal(found.length, 1, found.join("\n"));
    assert.match(found[0], /^Qwen\/Qwen3\.5-122B-A10B-FP8: weights need [\d.]+ GiB .* \(per replica: each of the 2 replicas holds a whole copy of the model on its 1 host; fewer spark-vllm:replicas give each more hosts\)\.$/);
    assert.deepEqual(violations(replicas(2, 4, "Qwen/Qwen3.5-122B-A10B-FP8"), "model-weights-fit"), []);
});

test("replica-hosts-share-fabric-subnet: each replica's hosts on one subnet; replicas may sit on different ones", () => {
    const raw = replicas(2, 4);
    raw.hosts.forEach((h: any, i: number) => (h.fabric.address = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"][i]));
    assert.deepEqual(violations(raw, "replica-hosts-share-fabric-subnet"), []);
    raw.hosts[3].fabric.address = "10.0.3.2";
    assert.deepEqual(violations(raw, "replica-hosts-share-fabric-subnet"), [
        "replica 2's hosts are on 2 fabric subnets (assuming /24, or /16 link-local): 10.0.2.0/24: spark-c=10.0.2.1; 10.0.3.0/24: spark-d=10.0.3.2. " +
        "Remediation: give the hosts of one replica fabric.address values on one subnet (the ports they share a switch or cable on), or regroup the hosts (they form the replicas in order)."]);
    const one = rawConfig(2);
    one.hosts[1].fabric.address = "169.254.7.9";
    one.hosts[0].fabric.address = "169.254.200.1";
    assert.deepEqual(violations(one, "replica-hosts-share-fabric-subnet"), [], "link-local: one /16");
});

test("image-change-interrupts-serving: warns in the preview of a new image on one replica, not with two, not on a first deploy or an unchanged stack", () => {
    const preview = (raw: Record<string, any>, unknown: (name: string) => boolean) => {
        const resources = planResources(planCluster(parseSpec(raw), "x"));
        // As a preview of a deployed stack shows them: each pull's repo digest known from the state, unless its pull is replaced.
        for (const r of resources) if (r.type === CONTAINER) r.props = { ...r.props, image: unknown(r.name) ? UNKNOWN : "198.18.0.1:5000/vllm-sim@sha256:" + "ab".repeat(32) };
        return verdicts(resources).find(v => v.policy === "image-change-interrupts-serving")!.violations;
    };
    const vllmContainer = (name: string) => name.endsWith("-container");
    // A new image: the pulls are replaced, so the vLLM containers' image (the pull's repo digest) is unknown in the preview.
    const found = preview(rawConfig(2), vllmContainer);
    assert.equal(found.length, 1, found.join("\n"));
    assert.match(found[0], /^the image changes on a stack of one replica \(spark-a, spark-b\): the new image is proven on every host while the old version serves .* Remediation: .*spark-vllm:replicas: 2 or more/);
    assert.deepEqual(preview(replicas(2, 4), vllmContainer), [], "two replicas roll it");
    assert.deepEqual(preview(rawConfig(2), () => false), [], "the image stays");
    assert.deepEqual(preview(rawConfig(2), () => true), [], "a first deploy: the proxy's image is unknown too");
});
