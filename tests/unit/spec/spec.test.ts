import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseImageRef, parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig, specProblems } from "../../fixtures";

const problems = specProblems;

test("a valid config gets the documented defaults", () => {
    const raw = rawConfig(2);
    delete raw.model.servedName;
    const spec = parseSpec(raw);
    assert.equal(spec.hosts[0].ssh.port, 22);
    assert.equal(spec.hosts[1].gpus, 1);
    assert.equal(spec.hosts[0].platform, "linux/arm64");
    assert.equal(spec.model.servedName, "Qwen/Qwen3.5-122B-A10B-FP8");
    assert.equal(spec.model.weights, "present");
    assert.equal(spec.vllm.port, 8000);
    assert.equal(spec.vllm.gpuMemoryUtilization, 0.85);
    assert.deepEqual(spec.vllm.extraArgs, []);
    assert.equal(spec.ray.port, 6379);
    assert.equal(spec.ray.dashboardPort, 8265);
    assert.equal(spec.logDir, "/var/tmp/spark-vllm");
    assert.equal(spec.image.digest, "sha256:" + "ab".repeat(32));
});

test("tensorParallelSize defaults to the GPUs of all hosts divided by PP", () => {
    const raw = rawConfig(4);
    raw.vllm = { pipelineParallelSize: 2 };
    const spec = parseSpec(raw);
    assert.equal(spec.vllm.tensorParallelSize, 2);
});

test("every problem is reported at once, each with its key path", () => {
    const raw = rawConfig(2);
    raw.hosts[1].name = "spark-a";
    raw.hosts[1].fabric.address = "198.18.1.2";
    raw.hosts[0].fabric.address = "198.18.1.300";
    raw.hosts[1].ssh.port = 70000;
    delete raw.hosts[0].ssh.user;
    raw.vllm = { tensorParallelSize: 4, gpuMemoryUtilization: 1.5, port: "http", extraArgs: ["--port=9000"] };
    raw.image = "Not An Image!";
    delete raw.model.cacheDir;
    raw.rayy = {};
    const found = problems(raw);
    const expected = [
        "spark-vllm:hosts[0].ssh.user: missing",
        "spark-vllm:hosts[0].fabric.address: not an IPv4 address",
        "spark-vllm:hosts[1].ssh.port: must be between 1 and 65535",
        "spark-vllm:hosts[1].name: \"spark-a\" repeats hosts[0].name",
        "spark-vllm:vllm.tensorParallelSize: TP × PP = 4 × 1 = 4, but the hosts have 2 GPUs",
        "spark-vllm:vllm.gpuMemoryUtilization: must be a number in (0, 1]",
        "spark-vllm:vllm.port: must be a whole number",
        "spark-vllm:vllm.extraArgs[0]: --port is set by spark-vllm",
        "spark-vllm:image: cannot parse",
        "spark-vllm:model.cacheDir: missing",
        "spark-vllm:rayy: unknown key",
    ];
    for (const e of expected) assert.ok(found.some(p => p.startsWith(e)), `missing "${e}" in:\n${found.join("\n")}`);
});

test("duplicate fabric addresses are named on the later host", () => {
    const raw = rawConfig(2);
    raw.hosts[1].fabric.address = raw.hosts[0].fabric.address;
    assert.deepEqual(problems(raw), ['spark-vllm:hosts[1].fabric.address: "198.18.1.2" repeats hosts[0].fabric.address; every host needs its own fabric address']);
});

test("TP × PP must equal the GPUs of all hosts, counting hosts with several GPUs", () => {
    const raw = rawConfig(2);
    raw.hosts[1].gpus = 2;
    raw.vllm = { tensorParallelSize: 2 };
    assert.match(problems(raw)[0], /^spark-vllm:vllm\.tensorParallelSize: TP × PP = 2 × 1 = 2, but the hosts have 3 GPUs/);
    raw.vllm = { tensorParallelSize: 3 };
    assert.equal(parseSpec(raw).vllm.tensorParallelSize, 3);
});

test("missing or empty hosts and wrong types are named", () => {
    assert.ok(problems({ image: "a/b:1" }).includes("spark-vllm:hosts: missing; list at least one host (the first is the Ray head)"));
    const raw = rawConfig(1);
    raw.hosts = [];
    assert.ok(problems(raw).includes("spark-vllm:hosts: is empty; list at least one host (the first is the Ray head)"));
    raw.hosts = "spark-a";
    assert.ok(problems(raw).some(p => p.startsWith("spark-vllm:hosts: must be a list of hosts")));
    const typo = rawConfig(1);
    typo.vllm.tensorParalelSize = 1;
    assert.ok(problems(typo).includes("spark-vllm:vllm.tensorParalelSize: unknown key; did you mean tensorParallelSize?"));
});

test("image references parse as Docker does", () => {
    assert.deepEqual(parseImageRef("vllm/vllm-openai:v0.17.1"), { reference: "vllm/vllm-openai:v0.17.1", repository: "vllm/vllm-openai", tag: "v0.17.1", digest: undefined });
    const pinned = parseImageRef(`nvcr.io/nvidia/vllm:25.11-py3@sha256:${"0".repeat(64)}`);
    assert.equal(pinned?.repository, "nvcr.io/nvidia/vllm");
    assert.equal(pinned?.digest, `sha256:${"0".repeat(64)}`);
    assert.equal(parseImageRef("198.18.0.1:5000/vllm-sim@sha256:" + "1".repeat(64))?.repository, "198.18.0.1:5000/vllm-sim");
    assert.equal(parseImageRef("localhost:5000/x")?.repository, "localhost:5000/x");
    for (const bad of ["", "UPPER/case", "a/b@sha256:short", "a/b:", "a b", " a/b", "a//b"]) assert.equal(parseImageRef(bad), undefined, bad);
});

test("gpuMemoryUtilization accepts (0, 1] only", () => {
    for (const [value, ok] of [[1, true], [0.5, true], [0, false], [-0.1, false], [1.01, false]] as const) {
        const raw = rawConfig(1);
        raw.vllm.gpuMemoryUtilization = value;
        if (ok) assert.equal(parseSpec(raw).vllm.gpuMemoryUtilization, value);
        else assert.match(problems(raw)[0], /^spark-vllm:vllm\.gpuMemoryUtilization: must be a number in \(0, 1\]/);
    }
});

test("imageSource and the head-then-copy port are checked", () => {
    const raw = rawConfig(2);
    raw.imageSource = "nfs";
    raw.model.weights = "head-then-copy";
    raw.model.copyPort = 6379;
    const found = problems(raw);
    assert.ok(found.includes('spark-vllm:imageSource: must be registry or head, got "nfs"'), found.join("\n"));
    assert.ok(found.includes("spark-vllm:model.copyPort: 6379 is also ray.port; pick a free port for the weights copy"), found.join("\n"));
    const ok = rawConfig(2);
    ok.imageSource = "head";
    assert.equal(parseSpec(ok).imageSource, "head");
    assert.equal(parseSpec(ok).model.copyPort, 20080, "outside Ray's default worker ports, 10002-19999");
});
