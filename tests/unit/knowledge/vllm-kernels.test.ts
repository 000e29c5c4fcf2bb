import { test } from "node:test";
import * as assert from "node:assert/strict";
import { looseIntersection, rulesFor, vllmKernelRuns, vllmKernelsFor } from "../../../components/knowledge/vllmKernels";
import { imageKernelFor, imageQuantizationKernels, imagesCarrying, quantizationKernelProblem } from "../../../components/knowledge/imageKernels";
import { KNOWN_IMAGES, lookupImage } from "../../../components/knowledge/images";

test("looseIntersection gives what vLLM's cmake/utils.cmake cuda_archs_loose_intersection gives (cmake -P on each release's file)", () => {
    // [release, SRC, TGT, the real function's output]
    const cases: Array<[string, string, string, string]> = [
        ["0.17.1", "12.0a", "8.7;8.9;9.0;10.0;12.0", "12.0a"],
        ["0.17.1", "12.0f", "8.7;8.9;9.0;10.0;12.0", "12.0f"],
        // CUDA 13's CUDA_SUPPORTED_ARCHS has no 12.1: a requested 12.1 collapses to 12.0 (vllm-project/vllm#36835)
        ["0.17.1", "7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0", "8.7;8.9;9.0;10.0;12.0;12.1", "8.7;8.9;9.0;10.0;12.0"],
        ["0.19.0", "12.0a;12.1a", "12.0", "12.0a"],
        ["0.19.0", "12.0a;12.1a", "12.1", "12.1a"],
        ["0.19.0", "12.0f", "12.1", "12.1"],   // the family fallback, new in 0.19.0
        ["0.18.0", "12.0f", "12.1", ""],
        ["0.10.1.1", "12.0;12.0a", "12.0", "12.0a"],
        ["0.11.1", "10.0a;10.1a;12.0a;12.1a", "8.7;8.9;9.0;10.0;12.0", "10.0a;12.0a"],
        ["0.33.0", "12.0f", "8.0;8.7;8.9;9.0;10.0;11.0;12.0", "12.0f"],
        ["0.33.0", "7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;10.3;12.0;12.1", "12.1", "12.1"],
    ];
    for (const [release, src, tgt, out] of cases) {
        const rules = rulesFor(release)!;
        assert.equal(looseIntersection(src.split(";"), tgt.split(";"), rules.familyFallback, rules.aSuffixOnly).join(";"), out, `${release} ${src} ∩ ${tgt}`);
    }
});

test("rules exist only for the releases read and the spans between releases with the same rules", () => {
    assert.deepEqual(rulesFor("0.17.1")?.read, ["0.17.1", "0.18.0"]);
    assert.deepEqual(rulesFor("0.17.5")?.read, ["0.17.1", "0.18.0"], "between two reads with equal rules");
    assert.deepEqual(rulesFor("0.32.0")?.read, ["0.31.0", "0.33.0"]);
    // the FP8 guards changed between 0.14.0 and 0.17.1 and between 0.20.1 and 0.31.0 [sm120-guard]: no claim in between
    for (const unread of ["0.12.0", "0.16.0", "0.18.1", "0.19.1", "0.25.0", "0.34.0", "0.9.2", "nightly"]) assert.equal(rulesFor(unread), undefined, unread);
    assert.match(vllmKernelRuns({ vllm: "0.19.1", cuda: "12.9.1", torchCudaArchList: "12.0" }, "fp8").reason, /CMake rules were not read/);
});

test("a CUDA 12.x build compiles the SM120 CUTLASS kernels for sm_120a, which does not run on a GB10; a CUDA 13 build for sm_120f, which does", () => {
    // vLLM 0.17.1's arm64 release image (.buildkite/release-pipeline.yaml)
    const cu129 = vllmKernelRuns({ vllm: "0.17.1", cuda: "12.9.1", torchCudaArchList: "8.7 8.9 9.0 10.0+PTX 12.0" }, "fp8");
    assert.deepEqual([cu129.runs, cu129.targets], [false, ["sm_120a"]]);
    assert.match(cu129.reason, /for sm_120a only, which does not run on 12\.1/);
    const cu130 = vllmKernelRuns({ vllm: "0.17.1", cuda: "13.0.1", torchCudaArchList: "8.7 8.9 9.0 10.0+PTX 12.0 12.1" }, "fp8");
    assert.deepEqual([cu130.runs, cu130.targets], [true, ["sm_120f"]]);
    assert.equal(vllmKernelRuns({ vllm: "0.17.1", cuda: "12.9.1", torchCudaArchList: "12.0" }, "fp8", "12.0").runs, true, "sm_120a runs on an RTX 50 (12.0)");
    // the fix vllm-project/vllm#38484 proposes: 12.1 in the list of a CUDA 12.8+ build from 0.19.0 gives sm_121a
    assert.deepEqual(vllmKernelRuns({ vllm: "0.20.0", cuda: "12.9.1", torchCudaArchList: "9.0 10.0 12.0 12.1" }, "fp8").targets, ["sm_120a", "sm_121a"]);
    assert.equal(vllmKernelRuns({ vllm: "0.20.0", cuda: "12.9.1", torchCudaArchList: "9.0 10.0 12.0 12.1" }, "fp8").runs, true);
    // ... which 0.17.1's CMake drops (no 12.1 in its CUDA_SUPPORTED_ARCHS)
    assert.deepEqual(vllmKernelRuns({ vllm: "0.17.1", cuda: "12.9.1", torchCudaArchList: "12.0 12.1" }, "fp8").targets, ["sm_120a"]);
});

test("NVFP4: 0.10.x and 0.11.x call the SM100 kernel whenever it is built; later releases dispatch by GPU", () => {
    const old = vllmKernelRuns({ vllm: "0.11.1", cuda: "13.0.2", torchCudaArchList: "9.0 10.0 12.0" }, "nvfp4");
    assert.equal(old.runs, false);
    assert.match(old.reason, /also builds the SM100 one \(sm_100f sm_120f\), which vLLM 0.11.1 calls on every GPU/);
    assert.equal(vllmKernelRuns({ vllm: "0.11.1", cuda: "13.0.2", torchCudaArchList: "9.0 10.0 12.0" }, "fp8").runs, true, "FP8 dispatches by GPU");
    assert.equal(vllmKernelRuns({ vllm: "0.10.1.1", cuda: "12.8", torchCudaArchList: "9.0 12.0" }, "nvfp4").runs, false, "sm_120a");
    assert.equal(vllmKernelRuns({ vllm: "0.14.0", cuda: "13.0.2", torchCudaArchList: "9.0 10.0 12.0" }, "nvfp4").runs, true);
});

test("a native 12.1 target: block FP8 runs where its kernel is family-guarded; the per-tensor kernel traps where it is enable_sm120_only", () => {
    // CUDA 12.9 with 12.1 requested: SRC "12.0a;12.1a" gives sm_121a, the cubin the GB10 loads (vllm-project/vllm#43367's rebuild)
    const build = (vllm: string) => vllmKernelRuns({ vllm, cuda: "12.9.1", torchCudaArchList: "9.0 12.0 12.1" }, "fp8");
    for (const v of ["0.19.0", "0.20.0", "0.20.1"]) {
        const k = build(v);
        assert.deepEqual([k.runs, k.targets], [true, ["sm_120a", "sm_121a"]], v);
        assert.match(k.reason, /block FP8 runs, but a sm_121a cubin .* per-tensor FP8 GEMM in enable_sm120_only, which traps there \(eugr\/spark-vllm-docker#143/, v);
    }
    const fixed = build("0.33.0");
    assert.equal(fixed.runs, true);
    assert.doesNotMatch(fixed.reason, /traps/, "0.31.0 and later wrap both in enable_sm120_family (vllm-project/vllm#41215)");
    // a sm_120f or sm_120a cubin is compiled for exactly 12.0: no guard applies, whatever the release
    assert.doesNotMatch(vllmKernelRuns({ vllm: "0.20.0", cuda: "13.0.2", torchCudaArchList: "9.0 12.0 12.1" }, "fp8").reason, /traps/);
    // 0.19.0's family fallback turns "12.0f" into a plain 12.1 target when 12.0 is not requested
    const only121 = vllmKernelRuns({ vllm: "0.19.0", cuda: "13.0.1", torchCudaArchList: "12.1" }, "fp8");
    assert.deepEqual([only121.runs, only121.targets], [true, ["sm_121"]]);
    assert.match(only121.reason, /per-tensor FP8 GEMM in enable_sm120_only/);
    // NVFP4 has no such guard in the files read
    assert.doesNotMatch(vllmKernelRuns({ vllm: "0.20.0", cuda: "12.9.1", torchCudaArchList: "9.0 12.0 12.1" }, "nvfp4").reason, /traps/);
});

test("builds the model does not cover say so instead of guessing", () => {
    assert.deepEqual(vllmKernelRuns({ vllm: "0.17.1", cuda: "12.9.1", torchCudaArchList: "9.0a 12.0a" }, "fp8").runs, undefined);
    const old = vllmKernelRuns({ vllm: "0.17.1", cuda: "12.6", torchCudaArchList: "8.0 9.0" }, "fp8");
    assert.deepEqual([old.runs, old.targets], [false, []]);
    assert.match(old.reason, /CUDA 12\.6 builds no SM12x CUTLASS kernels/);
    const no12 = vllmKernelRuns({ vllm: "0.17.1", cuda: "12.9.1", torchCudaArchList: "8.0 9.0 10.0" }, "fp8");
    assert.deepEqual([no12.runs, no12.targets], [false, []]);
    assert.deepEqual(Object.keys(vllmKernelsFor({ vllm: "0.33.0", cuda: "13.0.2", torchCudaArchList: "12.0" })), ["fp8", "nvfp4"]);
});

test("the known images: vLLM's CUDA 12.9 images lack the GB10 kernels, their -cu130 twins and the CUDA 13 releases carry them", () => {
    const kernels = (ref: string) => imageQuantizationKernels(lookupImage(ref)!);
    for (const v of ["0.11.1", "0.14.0", "0.17.1", "0.18.0", "0.19.0"]) assert.deepEqual(kernels(`vllm/vllm-openai:v${v}`), { fp8: false, nvfp4: false }, v);
    for (const ref of ["vllm/vllm-openai:v0.17.1-cu130", "vllm/vllm-openai:v0.18.0-cu130", "vllm/vllm-openai:v0.19.0-cu130", "vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.33.0"])
        assert.deepEqual(kernels(ref), { fp8: true, nvfp4: true }, ref);
    // NGC images publish no build arch list: nothing is claimed
    assert.deepEqual(kernels("nvcr.io/nvidia/vllm:26.05-py3"), {});
    assert.equal(imageKernelFor(lookupImage("nvcr.io/nvidia/vllm:25.09-py3")!, "fp8"), undefined);
    assert.deepEqual(imagesCarrying("fp8"), ["vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.19.0-cu130", "vllm/vllm-openai:v0.18.0-cu130", "vllm/vllm-openai:v0.17.1-cu130"]);
    // the cu130 twins keep their release's Ray
    assert.equal(lookupImage("vllm/vllm-openai:v0.17.1-cu130")!.ray?.present, true);
    assert.equal(lookupImage("vllm/vllm-openai:v0.18.0-cu130")!.ray?.present, false);
    for (const i of KNOWN_IMAGES) if (i.vllmBuild) assert.ok(i.sources.some(s => s.includes("release-pipeline.yaml")), i.reference);
});

test("quantizationKernelProblem: a warning naming the model, the image, the kernel's targets and the images that carry it", () => {
    const v0171 = lookupImage("vllm/vllm-openai:v0.17.1")!;
    const p = quantizationKernelProblem(v0171, "fp8", "Qwen/Qwen3.5-122B-A10B-FP8")!;
    assert.deepEqual([p.kind, p.severity], ["quantization-kernel", "warning"]);
    for (const part of ["Qwen/Qwen3.5-122B-A10B-FP8 is fp8", "vllm/vllm-openai:v0.17.1", "sm_120a only", "does not run on 12.1", "vllm/vllm-openai:v0.17.1-cu130", "another quantization"])
        assert.ok(p.message.includes(part), part);
    for (const part of ["a vLLM built for 12.1 itself", "TORCH_CUDA_ARCH_LIST=12.1a", "eugr/spark-vllm-docker", "nvcr.io/nvidia/vllm", "(BF16)",
        "VLLM_DISABLED_KERNELS=CutlassFp8BlockScaledMMKernel", "spark-vllm has no setting for", "vllm-project/vllm#43367"])
        assert.ok(p.message.includes(part), part);
    const fp4 = quantizationKernelProblem(v0171, "nvfp4", "m")!;
    assert.ok(fp4.message.includes("a vLLM built for 12.1 itself"));
    assert.ok(!fp4.message.includes("VLLM_DISABLED_KERNELS"), "the Triton switch is about block FP8 only");
    assert.equal(quantizationKernelProblem(lookupImage("vllm/vllm-openai:v0.33.0")!, "fp8", "m"), undefined);
    for (const q of ["bf16", "mxfp4", "int4-gptq", "int4-autoround"] as const) assert.equal(quantizationKernelProblem(v0171, q, "m"), undefined, q);
    assert.equal(quantizationKernelProblem(lookupImage("nvcr.io/nvidia/vllm:26.05-py3")!, "nvfp4", "m"), undefined, "unknown build: no claim");
});
