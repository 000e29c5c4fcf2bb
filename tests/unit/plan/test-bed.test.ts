// spark-vllm:testBed.cpuVllm: a real vLLM CPU build on one x86_64 test machine (tests/e2e/real-vllm.test.ts). The plan
// skips the steps that need a GPU, says so, and the key is refused with anything a Spark or a GPU cluster has.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseSpec } from "../../../components/spec/parseSpec";
import { cpuVllmSkips } from "../../../components/plan/hostCommands";
import { planCluster } from "../../../components/plan/plan";
import { planReport } from "../../../bin/plan-command";
import { rawConfig, specProblems } from "../../fixtures";

/** One linux/amd64 host, TCP fabric, with testBed.cpuVllm. */
function cpuBed(): Record<string, any> {
    const raw = rawConfig(1);
    raw.hosts[0].platform = "linux/amd64";
    raw.hosts[0].fabric.hcas = [];
    raw.testBed = { cpuVllm: true };
    raw.vllm.extraArgs = ["--kv-cache-memory-bytes", "1G"];
    return raw;
}

test("off by default: no skips, the memory gate and compat's GPU checks run", () => {
    const spec = parseSpec(rawConfig(2));
    assert.deepEqual(spec.testBed, { cpuVllm: false });
    const plan = planCluster(spec);
    assert.deepEqual(cpuVllmSkips(spec), []);
    assert.match(plan.hosts[0].memoryGate.create, /memory-check/);
    assert.match(plan.hosts[0].memoryAfterLoad.create, /memory-after-load/);
    assert.doesNotMatch(plan.compat.create, /"device"/);
});

test("cpuVllm: the GPU steps are skipped, visibly; the launch, probe and serving proof are the real ones", () => {
    const spec = parseSpec(cpuBed());
    const plan = planCluster(spec);
    const head = plan.hosts[0];
    for (const skipped of [head.memoryGate, head.memoryAfterLoad]) {
        assert.doesNotMatch(skipped.create, /memory-check|memory-after-load|flush-page-cache/);
        assert.match(skipped.create, /skipped \(spark-vllm:testBed\.cpuVllm\)/);
        assert.equal(skipped.update, skipped.create);
    }
    assert.match(plan.compat.create, /"device":"cpu"/);
    assert.equal(head.fabricRank, undefined);
    // The real launch path is unchanged: vllm serve through the key guard, the endpoint probe, the serving proof.
    assert.match(plan.vllmLaunch.create, /vllm serve/);
    assert.deepEqual(plan.vllmServeArgv.slice(-2), ["--kv-cache-memory-bytes", "1G"]);
    assert.ok(plan.servingProof);
    const report = planReport(plan, "cpu");
    assert.deepEqual(report.skipped.map(s => s.step), ["memory gate", "memory after load", "compat's CUDA checks", "fabric check"]);
});

test("cpuVllm is refused with two hosts, the Spark's platform (the default), HCAs, a known GPU image, or no KV cache size, naming the key", () => {
    const two = cpuBed();
    two.hosts = rawConfig(2).hosts.map((h: any) => ({ ...h, platform: "linux/amd64", fabric: { ...h.fabric, hcas: [] } }));
    two.vllm.tensorParallelSize = 2;
    assert.ok(specProblems(two).some(p => p.startsWith("spark-vllm:testBed.cpuVllm: needs exactly one host, the stack has 2")));

    const spark = cpuBed();
    delete spark.hosts[0].platform;
    assert.ok(specProblems(spark).some(p => /^spark-vllm:testBed\.cpuVllm: hosts\[0\]\.platform is linux\/arm64, a DGX Spark's/.test(p)));

    const rdma = cpuBed();
    rdma.hosts[0].fabric.hcas = ["rocep1s0f1"];
    assert.ok(specProblems(rdma).some(p => p.startsWith("spark-vllm:testBed.cpuVllm: hosts[0].fabric.hcas lists RDMA HCAs")));

    const gpuImage = cpuBed();
    gpuImage.image = "vllm/vllm-openai:v0.17.1@sha256:" + "cd".repeat(32);
    assert.ok(specProblems(gpuImage).some(p => p.includes("is a known GPU image")));

    const noKv = cpuBed();
    noKv.vllm.extraArgs = [];
    assert.ok(specProblems(noKv).some(p => p.startsWith("spark-vllm:vllm.extraArgs: testBed.cpuVllm needs --kv-cache-memory-bytes")));
    const kvEquals = cpuBed();
    kvEquals.vllm.extraArgs = ["--kv-cache-memory-bytes=512M"];
    assert.doesNotThrow(() => parseSpec(kvEquals));

    const unknown = cpuBed();
    unknown.testBed.cpuVllms = true;
    assert.ok(specProblems(unknown).some(p => p.startsWith("spark-vllm:testBed.cpuVllms:")));
});
