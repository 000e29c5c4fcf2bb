// spark-vllm:replicas and spark-vllm:rollout.drainSeconds (issue 39): defaults, and every problem at once with its key
// path and the figures.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig, specProblems } from "../../fixtures";

test("replicas defaults to 1 and rollout.drainSeconds to 120; TP defaults to one replica's GPUs", () => {
    const spec = parseSpec(rawConfig(2));
    assert.equal(spec.replicas, 1);
    assert.equal(spec.rollout.drainSeconds, 120);
    const raw = rawConfig(4);
    raw.replicas = 2;
    raw.rollout = { drainSeconds: 30 };
    delete raw.vllm.tensorParallelSize;
    const two = parseSpec(raw);
    assert.equal(two.replicas, 2);
    assert.equal(two.rollout.drainSeconds, 30);
    assert.equal(two.vllm.tensorParallelSize, 2, "4 hosts in 2 replicas: 2 GPUs per replica");
    assert.equal(two.vllm.backend, "ray");
});

test("two one-host replicas: each is plain vllm serve, and vllm.backend is refused with why", () => {
    const raw = rawConfig(2, { tp: 1 });
    raw.replicas = 2;
    assert.equal(parseSpec(raw).vllm.backend, "single");
    raw.vllm.backend = "ray";
    const found = specProblems(raw);
    assert.ok(found.some(p => p.startsWith("spark-vllm:vllm.backend: each replica is one host")), found.join("\n"));
});

test("hosts that do not divide into replicas, and TP × PP × replicas ≠ the hosts' GPUs, are refused with the figures, all at once", () => {
    const raw = rawConfig(3, { tp: 1 });
    raw.replicas = 2;
    raw.rollout = { drainSeconds: 0 };
    const found = specProblems(raw);
    assert.ok(found.some(p => p === "spark-vllm:replicas: 2 replicas cannot split the 3 hosts into groups of equal size " +
        "(hosts, in order, form the replicas); set it to one of 1, 3, or list 4 hosts"), found.join("\n"));
    assert.ok(found.some(p => p.startsWith("spark-vllm:rollout.drainSeconds: must be between 1 and 3600, got 0")), found.join("\n"));

    const four = rawConfig(4, { tp: 4 });
    four.replicas = 2;
    const wrong = specProblems(four);
    assert.deepEqual(wrong.filter(p => p.includes("tensorParallelSize")), [1, 2].map(k =>
        `spark-vllm:vllm.tensorParallelSize: TP × PP = 4 × 1 = 4, but replica ${k} of 2 (hosts[${2 * k - 2}..${2 * k - 1}]) has 2 GPUs; every ` +
        `replica runs one copy on TP × PP GPUs, so TP × PP × replicas = 8 must equal the hosts' 4 GPUs, split evenly: change TP × PP, spark-vllm:replicas or the hosts`));
});

test("replicas of unequal GPUs: the replica whose hosts differ is named", () => {
    const raw = rawConfig(4, { tp: 2 });
    raw.replicas = 2;
    raw.hosts[3].gpus = 2;
    const found = specProblems(raw).filter(p => p.includes("tensorParallelSize"));
    assert.equal(found.length, 1, found.join("\n"));
    assert.match(found[0], /replica 2 of 2 \(hosts\[2\.\.3\]\) has 3 GPUs/);
});

test("with several replicas, copying from the first host (imageSource head, head-then-copy weights) is refused", () => {
    const raw = rawConfig(2, { tp: 1 });
    raw.replicas = 2;
    raw.imageSource = "head";
    raw.model.weights = "head-then-copy";
    const found = specProblems(raw);
    assert.ok(found.some(p => p.startsWith("spark-vllm:imageSource: head copies the image from the first host")), found.join("\n"));
    assert.ok(found.some(p => p.startsWith("spark-vllm:model.weights: head-then-copy copies from each replica's head")), found.join("\n"));
    raw.replicas = 1;
    raw.vllm.tensorParallelSize = 2;
    assert.equal(parseSpec(raw).imageSource, "head", "one replica: as before");
});

test("replicas is a whole number between 1 and 256", () => {
    for (const bad of [0, 1.5, "two"]) {
        const raw = rawConfig(2);
        raw.replicas = bad;
        assert.ok(specProblems(raw).some(p => p.startsWith("spark-vllm:replicas: must be")), String(bad));
    }
});
