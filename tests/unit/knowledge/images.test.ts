import { test } from "node:test";
import * as assert from "node:assert/strict";
import {
    cudaKernelsRunOn, defaultBackend, driverCudaVersion, driverSupportsCuda, firstVllmWithMultiNodeMp, firstVllmWithoutRay, GB10_CAPABILITY,
    imageProblems, KNOWN_IMAGES, lookupImage, normalizeReference, parseArchTarget, supportsMultiNodeMp, torchArchList,
} from "../../../components/knowledge/images";
import { compareVersions } from "../../../components/knowledge/catalog";

test("binary compatibility: same major, SASS minor <= device minor; never across majors", () => {
    // pytorch#164590: a binary compiled for 12.0 runs directly on 12.1 (Spark)
    assert.deepEqual(cudaKernelsRunOn(["sm_90", "sm_100", "sm_120"], "12.1"), {
        runs: true, via: "sass", target: "sm_120", reason: "sm_120 SASS runs on 12.1 (same major, minor 0 <= 1)",
    });
    assert.equal(cudaKernelsRunOn(["sm_121"], [12, 1]).target, "sm_121");
    assert.equal(cudaKernelsRunOn(["sm_120", "sm_121"], "12.1").target, "sm_121", "the closest SASS wins");
    assert.equal(cudaKernelsRunOn(["sm_121"], "12.0").runs, false, "newer minor does not run on an older one");
    assert.equal(cudaKernelsRunOn(["sm_80", "sm_86", "sm_90"], GB10_CAPABILITY).runs, false, "older majors never run");
    assert.equal(cudaKernelsRunOn(["sm_100"], "12.1").runs, false, "10.x SASS does not run on 12.x");
    // a real GB10 image without Blackwell consumer kernels (public log: 'supports CUDA capabilities sm_50 sm_80 sm_86 sm_89 sm_90 sm_90a')
    const v = cudaKernelsRunOn(["sm_50", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"], "12.1");
    assert.equal(v.runs, false);
    assert.match(v.reason, /no kernels for compute capability 12\.1/);
});

test("arch-specific (a) targets run only on their exact capability; family (f) targets on the family", () => {
    assert.equal(cudaKernelsRunOn(["sm_120a"], "12.1").runs, false);
    assert.equal(cudaKernelsRunOn(["sm_120a"], "12.0").runs, true);
    assert.equal(cudaKernelsRunOn(["sm_120f"], "12.1").runs, true);
    assert.equal(cudaKernelsRunOn(["sm_121a"], "12.1").target, "sm_121a");
});

test("PTX is JIT-compiled forward, to any higher capability", () => {
    const v = cudaKernelsRunOn(["sm_80", "sm_90", "compute_90"], "12.1");
    assert.deepEqual([v.runs, v.via, v.target], [true, "ptx", "compute_90"]);
    assert.equal(cudaKernelsRunOn(["compute_120"], "12.1").via, "ptx");
    assert.equal(cudaKernelsRunOn(["compute_121"], "12.0").runs, false, "PTX never runs backwards");
    assert.equal(cudaKernelsRunOn(["compute_90a"], "12.1").runs, false, "arch-specific PTX is not portable");
    assert.equal(cudaKernelsRunOn(["sm_120", "compute_120"], "12.1").via, "sass", "SASS is preferred over PTX");
});

test("arch targets parse in torch and TORCH_CUDA_ARCH_LIST spellings", () => {
    assert.deepEqual(parseArchTarget("sm_121"), { raw: "sm_121", kind: "sass", major: 12, minor: 1, variant: "" });
    assert.deepEqual(parseArchTarget("sm_90a"), { raw: "sm_90a", kind: "sass", major: 9, minor: 0, variant: "a" });
    assert.deepEqual(parseArchTarget("compute_120"), { raw: "compute_120", kind: "ptx", major: 12, minor: 0, variant: "" });
    assert.deepEqual(parseArchTarget("12.0f"), { raw: "12.0f", kind: "sass", major: 12, minor: 0, variant: "f" });
    assert.equal(parseArchTarget("gfx942"), undefined);
    assert.equal(cudaKernelsRunOn([], "12.1").runs, false);
    assert.equal(cudaKernelsRunOn(["sm_120"], "twelve").runs, false);
});

test("driver vs CUDA runtime: native, minor-version compatibility, unsupported", () => {
    assert.equal(driverCudaVersion("580.95.05"), "13.0");
    assert.equal(driverCudaVersion("575.57.08"), "12.9");
    assert.equal(driverCudaVersion("590.48.01"), "13.1");
    assert.equal(driverCudaVersion("470.82.01"), undefined);
    assert.deepEqual(driverSupportsCuda("580.95.05", "12.9"), {
        ok: true, mode: "native", driverCuda: "13.0", minimumDriver: "525.60.13", reason: "driver 580.95.05 supports CUDA 13.0 >= 12.9",
    });
    assert.equal(driverSupportsCuda("580.95.05", "13.0.2").mode, "native");
    const minor = driverSupportsCuda("580.95.05", "13.1.1");
    assert.deepEqual([minor.ok, minor.mode], [true, "minor-version"]);
    assert.match(minor.reason, /the provided PTX was compiled with an unsupported toolchain/);
    const bad = driverSupportsCuda("575.57.08", "13.0");
    assert.deepEqual([bad.ok, bad.mode, bad.minimumDriver], [false, "unsupported", "580"]);
    assert.match(bad.reason, /CUDA 13\.0 needs driver >= 580; driver 575\.57\.08 supports CUDA 12\.9/);
    assert.equal(driverSupportsCuda("535.104.05", "12.9").mode, "minor-version");
    assert.equal(driverSupportsCuda("latest", "12.9").mode, "unknown");
});

test("the first vLLM with the Ray-free multi-node launch and the first without Ray", () => {
    // vllm-0.11.0's MultiprocExecutor still refuses multi-node; vllm-0.11.1's ParallelConfig has nnodes (PyPI sdists).
    assert.equal(firstVllmWithMultiNodeMp, "0.11.1");
    assert.equal(firstVllmWithoutRay, "0.18.0");
    assert.equal(supportsMultiNodeMp("0.10.2"), false);
    assert.equal(supportsMultiNodeMp("0.11.0"), false);
    assert.equal(supportsMultiNodeMp("0.11.1"), true);
    assert.equal(supportsMultiNodeMp("0.17.1"), true);
    assert.equal(supportsMultiNodeMp("nightly"), undefined);
});

test("lookupImage ignores digests, docker.io and library/", () => {
    assert.equal(normalizeReference("docker.io/vllm/vllm-openai:v0.17.1@sha256:" + "0".repeat(64)), "vllm/vllm-openai:v0.17.1");
    assert.equal(lookupImage("vllm/vllm-openai:v0.17.1@sha256:" + "0".repeat(64))?.vllm, "0.17.1");
    assert.equal(lookupImage("nvcr.io/nvidia/vllm:26.01-py3")?.cuda, "13.1.1");
    assert.equal(lookupImage("198.18.0.1:5000/vllm-sim@sha256:" + "a".repeat(64)), undefined);
    assert.equal(lookupImage("vllm/vllm-openai:latest"), undefined);
});

test("the table is consistent: unique references, sources on every row, Ray absent from 0.18 on", () => {
    assert.equal(new Set(KNOWN_IMAGES.map(i => i.reference)).size, KNOWN_IMAGES.length);
    for (const i of KNOWN_IMAGES) {
        assert.ok(i.sources.length > 0, i.reference);
        assert.equal(normalizeReference(i.reference), i.reference);
        if (i.estimate) assert.ok(i.notes, `${i.reference}: estimates say how`);
        if (i.vllm && i.reference.startsWith("vllm/") && i.ray) assert.equal(i.ray.present, compareVersions(i.vllm, firstVllmWithoutRay) < 0, i.reference);
    }
});

test("torchArchList reads a Dockerfile's TORCH_CUDA_ARCH_LIST: X.Y is SASS, +PTX adds the PTX target", () => {
    assert.deepEqual(torchArchList("7.5 8.0 12.0+PTX"), ["sm_75", "sm_80", "sm_120", "compute_120"]);
    assert.deepEqual(torchArchList("9.0a 10.0a"), ["sm_90a", "sm_100a"]);
    assert.deepEqual(torchArchList(""), []);
});

test("vLLM's own images: arch lists and CUDA from each release's docker/Dockerfile, none from the unmerged proposal", () => {
    const row = (v: string) => lookupImage(`vllm/vllm-openai:v${v}`)!;
    assert.deepEqual(row("0.17.1").archList, ["sm_70", "sm_75", "sm_80", "sm_89", "sm_90", "sm_100", "sm_120"]);
    assert.equal(row("0.17.1").cuda, "12.9.1");
    assert.deepEqual(row("0.20.0").archList?.slice(-2), ["sm_120", "compute_120"]);
    assert.equal(row("0.20.0").cuda, "13.0.2");
    assert.equal(row("0.33.0").cuda, "13.0.3");
    for (const i of KNOWN_IMAGES) {
        assert.ok(!i.archList?.includes("sm_103"), `${i.reference}: 10.3 came from vllm-project/vllm#23469, never merged`);
        assert.ok(!i.sources.includes("vllm-project/vllm#23469"), i.reference);
        // Every vLLM image in the table runs on a Spark by CUDA's rule: sm_120 SASS on 12.1, and a CUDA the 580 driver runs.
        if (i.reference.startsWith("vllm/")) assert.deepEqual(imageProblems(i, { capability: "12.1", driver: "580.95.05" }, "mp", 2), [], i.reference);
    }
});

test("the driver → CUDA table goes past the 590 branch (CUDA Toolkit release notes, Table 3)", () => {
    assert.equal(driverCudaVersion("590.48.01"), "13.1");
    assert.equal(driverCudaVersion("595.58.03"), "13.2");
    assert.equal(driverCudaVersion("610.43.02"), "13.3");
    assert.equal(driverCudaVersion("615.10"), "13.4");
    assert.equal(driverSupportsCuda("595.45.04", "13.2.1").mode, "native");
    assert.equal(driverSupportsCuda("580.95.05", "13.4.3").mode, "minor-version");
});

test("defaultBackend: mp on an image known to ship no Ray, ray on a Ray image and on an image the table does not know", () => {
    const digest = "@sha256:" + "ab".repeat(32);
    assert.equal(defaultBackend("vllm/vllm-openai:v0.17.1" + digest).backend, "ray");
    assert.equal(defaultBackend("vllm/vllm-openai:v0.18.0" + digest).backend, "mp");
    assert.equal(defaultBackend("vllm/vllm-openai:v0.33.0").backend, "mp");
    assert.equal(defaultBackend("nvcr.io/nvidia/vllm:26.05-py3").backend, "mp");
    assert.equal(defaultBackend("nvcr.io/nvidia/vllm:25.11-py3").backend, "ray");
    const unknown = defaultBackend("example.org/own/vllm:custom" + digest);
    assert.equal(unknown.backend, "ray");
    assert.match(unknown.reason, /not in the known-images table/);
    assert.equal(defaultBackend("nvcr.io/nvidia/vllm:25.10-py3").backend, "ray", "no source says whether it has Ray");
    assert.equal(defaultBackend(undefined).backend, "ray");
    // Every known image without Ray has the mp launch, so the default never picks a backend the image cannot run.
    for (const i of KNOWN_IMAGES) if (i.ray?.present === false && i.vllm) assert.equal(supportsMultiNodeMp(i.vllm), true, i.reference);
});

test("imageProblems names each failure the way the stand-in variants fail", () => {
    const spark = { capability: "12.1", driver: "580.95.05" };
    const good = { vllm: "0.17.1", cuda: "12.9", archList: ["sm_90", "sm_100", "sm_120"], ray: { present: true, version: "2.54.0" } };
    assert.deepEqual(imageProblems(good, spark, "ray", 2), []);
    assert.deepEqual(imageProblems(good, spark, "mp", 2), []);
    // no-ray
    assert.deepEqual(imageProblems({ ...good, ray: { present: false } }, spark, "ray", 2).map(p => p.kind), ["ray-missing"]);
    assert.deepEqual(imageProblems({ ...good, ray: { present: false } }, spark, "mp", 2), [], "mp needs no Ray");
    assert.deepEqual(imageProblems({ ...good, ray: { present: false } }, spark, "ray", 1), [], "one host never uses Ray");
    // no-sm12x
    const noSm = imageProblems({ ...good, archList: ["sm_80", "sm_86", "sm_90"] }, spark, "ray", 2);
    assert.deepEqual(noSm.map(p => [p.kind, p.severity]), [["cuda-kernel-image", "error"]]);
    // cuda-too-new: a 13.2 runtime whose Blackwell kernels are PTX only, on the 580 driver
    const tooNew = imageProblems({ ...good, cuda: "13.2", archList: ["sm_90", "compute_120"] }, spark, "ray", 2);
    assert.deepEqual(tooNew.map(p => p.kind), ["cuda-driver"]);
    assert.match(tooNew[0].message, /only PTX \(compute_120\) for compute capability 12\.1/);
    assert.deepEqual(imageProblems({ ...good, cuda: "13.2" }, spark, "ray", 2), [], "13.2 with sm_120 SASS runs under minor-version compatibility");
    assert.deepEqual(imageProblems({ ...good, cuda: "13.0" }, { capability: "12.1", driver: "575.57.08" }, "ray", 2).map(p => p.kind), ["cuda-driver"]);
    // mp on an old vLLM
    assert.deepEqual(imageProblems({ ...good, vllm: "0.10.2" }, spark, "mp", 2).map(p => p.kind), ["mp-unsupported"]);
    // Ray without token auth is a warning
    const old = imageProblems({ ...good, ray: { present: true, version: "2.51.1" } }, spark, "ray", 2);
    assert.deepEqual(old.map(p => [p.kind, p.severity]), [["ray-no-token-auth", "warning"]]);
    // Ray 2.52-2.53: token auth, but the dashboard agent's job API takes none (images.ts [ray-agent])
    const agentOpen = imageProblems({ ...good, ray: { present: true, version: "2.53.0" } }, spark, "ray", 2);
    assert.deepEqual(agentOpen.map(p => [p.kind, p.severity]), [["ray-agent-open", "warning"]]);
    assert.match(agentOpen[0].message, /port 52365 can run commands/);
    assert.deepEqual(imageProblems({ ...good, ray: { present: true, version: "2.54.0" } }, spark, "ray", 2), []);
    // unknown facts are skipped, not guessed
    assert.deepEqual(imageProblems({}, spark, "ray", 2), []);
});
