import { test } from "node:test";
import * as assert from "node:assert/strict";
import { CatalogModel, findModel } from "../../../components/knowledge/catalog";
import { GiB, kvBytesPerToken, kvCacheDtypeFlag, planMemory, renderMemoryPlan, resolveKvCacheDtype, totalMemoryFor, vllmStartupFreeSource, vllmStartupMemoryCheck } from "../../../components/plan/memory";

const twoSparks = (tp: number, pp: number, gpuMemoryUtilization: number, maxModelLen?: number) => ({
    hosts: [{ name: "spark-a", gpus: 1 }, { name: "spark-b", gpus: 1 }],
    vllm: { tensorParallelSize: tp, pipelineParallelSize: pp, gpuMemoryUtilization, maxModelLen },
});
const close = (a: number, b: number, eps = 1e-6) => assert.ok(Math.abs(a - b) < eps, `${a} ≉ ${b}`);

test("Qwen3.5-122B-A10B-FP8 on two Sparks, TP=2, 0.85, 32768 (README numbers)", () => {
    const plan = planMemory(twoSparks(2, 1, 0.85, 32768), findModel("Qwen/Qwen3.5-122B-A10B-FP8"));
    assert.equal(plan.kind, "plan");
    if (plan.kind !== "plan") return;
    // share = 0.85 × 121.69 = 103.4365 GiB
    close(plan.rows[0].vllmShareGiB, 103.4365);
    // weights = 119e9 / 2 = 59.5e9 B = 55.41369 GiB
    close(plan.rows[0].weightsGiB, 59.5e9 / GiB);
    close(plan.rows[0].weightsGiB, 55.413693, 1e-5);
    // budget = 103.4365 − 55.413693 − 4 = 44.022807 GiB
    close(plan.rows[0].kvBudgetGiB, 44.022807, 1e-5);
    // KV/token = 2 × 12 layers × max(1, 2/2) heads × 256 × 2 bytes = 12288
    assert.equal(plan.rows[0].kvBytesPerToken, 12288);
    // tokens = floor(44.022807 GiB / 12288 B) = 3,846,771
    assert.equal(plan.kvTokens, 3846771);
    assert.equal(plan.maxModelLen, 32768);
    assert.ok(plan.weightsFit && plan.maxModelLenFits && plan.hostHeadroomOk);
    close(plan.hostHeadroomGiB, 18.2535); // 121.69 × 0.15
    assert.deepEqual(plan.rows.map(r => [r.rank, r.host, r.tpRank, r.ppStage]), [[0, "spark-a", 0, 0], [1, "spark-b", 1, 0]]);
    assert.deepEqual(plan.problems, []);
});

test("KV heads are replicated, never split below one per rank", () => {
    const m = findModel("meta-llama/Llama-3.3-70B-Instruct")!; // 80 layers, 8 KV heads, 128 dim, bf16
    assert.equal(kvBytesPerToken(m, 1, 1), 2 * 80 * 8 * 128 * 2); // 327680
    assert.equal(kvBytesPerToken(m, 2, 1), 2 * 80 * 4 * 128 * 2); // 163840
    assert.equal(kvBytesPerToken(m, 16, 1), 2 * 80 * 1 * 128 * 2); // replicated: 40960
    assert.equal(kvBytesPerToken(m, 2, 2), 2 * 40 * 4 * 128 * 2); // half the layers per stage
});

const toy: CatalogModel = {
    id: "toy/Toy-10B", architecture: "LlamaForCausalLM", modelType: "llama", weightBytes: 100 * GiB, parameters: 5e10,
    layers: 10, fullAttentionLayers: 10, attentionHeads: 8, kvHeads: 2, headDim: 128, hiddenSize: 1024, vocabSize: 1024 * 1024,
    maxContext: 4096, quantization: "bf16", kvDtype: "bf16", trustRemoteCode: false,
};

test("pipeline parallelism adds the stage-local embedding to each rank", () => {
    const plan = planMemory(twoSparks(1, 2, 0.5), toy, { usableGiB: 100, reserveGiB: 2 });
    if (plan.kind !== "plan") return assert.fail();
    // 100 GiB / 2 + 1024² × 1024 × 2 B / TP 1 = 50 + 2 = 52 GiB, share 50 → does not fit
    close(plan.rows[0].weightsGiB, 52);
    assert.equal(plan.weightsFit, false);
    assert.equal(plan.kvTokens, 0);
    assert.match(plan.problems[0], /weights need 52\.00 GiB \+ 2 GiB reserve/);
    assert.deepEqual(plan.rows.map(r => r.ppStage), [0, 1]);
});

test("maxModelLen that does not fit the KV budget is reported with the largest that does", () => {
    // usable 100, util 0.9 → share 90; weights 100/2 = 50; reserve 4 → 36 GiB; KV/token 2×10×1×128×2 = 5120 B
    const plan = planMemory(twoSparks(2, 1, 0.9, 10_000_000), toy, { usableGiB: 100 });
    if (plan.kind !== "plan") return assert.fail();
    assert.equal(plan.rows[0].kvBytesPerToken, 5120);
    assert.equal(plan.kvTokens, Math.floor((36 * GiB) / 5120)); // 7549747
    assert.ok(plan.weightsFit);
    assert.equal(plan.maxModelLenFits, false);
    assert.match(plan.problems[0], /lower vllm.maxModelLen to at most 7549747/);
});

test("maxModelLen defaults to the model's context; low host headroom is a problem", () => {
    const plan = planMemory(twoSparks(2, 1, 0.95), toy, { usableGiB: 100, minHostHeadroomGiB: 8 });
    if (plan.kind !== "plan") return assert.fail();
    assert.equal(plan.maxModelLen, 4096);
    close(plan.hostHeadroomGiB, 5);
    assert.equal(plan.hostHeadroomOk, false);
    assert.match(plan.problems.join("\n"), /leaves 5\.00 GiB .* lower it to at most 0\.92/);
});

test("unknown model gives an unknown-model result, rendered plainly", () => {
    const plan = planMemory({ ...twoSparks(2, 1, 0.85), model: { id: "someone/new-model" } }, undefined);
    assert.equal(plan.kind, "unknown-model");
    assert.match(renderMemoryPlan(plan), /someone\/new-model is not in the catalog/);
});

test("renderMemoryPlan prints one row per rank and the verdicts", () => {
    const text = renderMemoryPlan(planMemory(twoSparks(2, 1, 0.85, 32768), findModel("Qwen/Qwen3.5-122B-A10B-FP8")));
    const lines = text.trimEnd().split("\n");
    assert.match(lines[0], /^rank\s+host\s+tp\s+pp\s+weights GiB/);
    assert.match(lines[2], /^0\s+spark-a\s+0\s+0\s+55\.41\s+103\.44\s+4\.00\s+44\.02\s+12288\s+3846771$/);
    assert.match(lines[3], /^1\s+spark-b\s+1\s+0\s+55\.41/);
    assert.match(text, /weights fit; max-model-len 32768 fits \(KV capacity 3846771 tokens\)/);
    assert.match(text, /host headroom 18\.25 GiB per host/);
});

test("--kv-cache-dtype fp8 in extraArgs halves the KV bytes per token and doubles the tokens", () => {
    const qwen = findModel("Qwen/Qwen3.5-122B-A10B-FP8")!;
    const base = twoSparks(2, 1, 0.85, 32768);
    const bf16 = planMemory(base, qwen);
    const fp8 = planMemory({ ...base, vllm: { ...base.vllm, extraArgs: ["--kv-cache-dtype", "fp8"] } }, qwen);
    if (bf16.kind !== "plan" || fp8.kind !== "plan") return assert.fail();
    assert.equal(bf16.rows[0].kvBytesPerToken, 12288);
    assert.equal(fp8.rows[0].kvBytesPerToken, 6144); // 2 × 12 × 1 × 256 × 1 byte
    assert.equal(fp8.kvTokens, Math.floor((fp8.rows[0].kvBudgetGiB * GiB) / 6144));
    assert.ok(fp8.kvTokens >= 2 * bf16.kvTokens - 1);
    assert.deepEqual(bf16.kvCacheDtype, { dtype: "bf16", bytesPerElement: 2, source: "model" });
    assert.deepEqual(fp8.kvCacheDtype, { dtype: "fp8", bytesPerElement: 1, source: "--kv-cache-dtype" });
    assert.match(renderMemoryPlan(fp8), /KV cache dtype: fp8 \(1 byte per element, --kv-cache-dtype in extraArgs\)/);
    assert.match(renderMemoryPlan(bf16), /KV cache dtype: bf16 \(2 bytes per element, the model's default\)/);
});

test("kvCacheDtypeFlag reads both spellings, the last wins; auto keeps the model's dtype", () => {
    assert.equal(kvCacheDtypeFlag(["--kv-cache-dtype=fp8_e5m2"]), "fp8_e5m2");
    assert.equal(kvCacheDtypeFlag(["--kv-cache-dtype", "fp8", "--enforce-eager", "--kv-cache-dtype", "auto"]), "auto");
    assert.equal(kvCacheDtypeFlag(["--max-num-seqs", "8"]), undefined);
    assert.equal(kvCacheDtypeFlag(undefined), undefined);
    assert.equal(resolveKvCacheDtype({ kvDtype: "bf16" }, ["--kv-cache-dtype", "auto"]).source, "model");
    assert.equal(resolveKvCacheDtype({ kvDtype: "bf16" }, ["--kv-cache-dtype", "fp8_e4m3"]).bytesPerElement, 1);
    assert.equal(resolveKvCacheDtype({ kvDtype: "fp8" }, ["--kv-cache-dtype", "bfloat16"]).bytesPerElement, 2);
});

test("the plan says which total-memory figure it assumed: GB10 default, configured, or measured", () => {
    assert.equal(totalMemoryFor().source, "gb10-default");
    assert.match(totalMemoryFor().note, /121\.69 GiB per GPU, what CUDA reports as total on a DGX Spark \(GB10\); not measured/);
    assert.deepEqual([totalMemoryFor({ usableGiB: 121.69 }).source, totalMemoryFor({ usableGiB: 100 }).source], ["gb10-default", "configured"]);
    const measured = planMemory(twoSparks(2, 1, 0.85, 32768), findModel("Qwen/Qwen3.5-122B-A10B-FP8"), { measuredTotalGiB: 119.7, usableGiB: 100 });
    if (measured.kind !== "plan") return assert.fail();
    assert.equal(measured.totalMemory.source, "measured");
    close(measured.rows[0].vllmShareGiB, 119.7 * 0.85);
    assert.equal(measured.options.usableGiB, 119.7);
    assert.match(renderMemoryPlan(measured), /memory assumed: 119\.70 GiB per GPU, measured on the hosts/);
});

test("vLLM's start-up check: free < ceil(total × utilization) refuses with vLLM's own message", () => {
    // a public Spark log: "Free memory on device cuda:0 (104.5/121.69 GiB) on startup is less than desired GPU memory utilization (0.92, 111.95 GiB)."
    const r = vllmStartupMemoryCheck(104.5, 121.69, 0.92);
    assert.equal(r.ok, false);
    assert.equal(r.message, "ValueError: Free memory on device cuda:0 (104.50/121.69 GiB) on startup is less than desired GPU memory " +
        "utilization (0.92, 111.95 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.");
    assert.equal(r.maxUtilization, 0.85);
    const ok = vllmStartupMemoryCheck(110, 121.69, 0.85);
    assert.equal(ok.ok, true);
    assert.equal(ok.message, undefined);
    close(ok.requestedGiB, 103.4365, 1e-6);
});

test("vllmStartupFreeSource: which free figure vLLM's start-up check takes, per version (components/knowledge/images.ts [uma-free])", () => {
    const src = (v: string | undefined, cap = "12.1", integrated?: boolean) => vllmStartupFreeSource(v, cap, integrated).source;
    // vllm-0.11.0 MemorySnapshot: torch.cuda.mem_get_info() only.
    assert.equal(src("0.10.2"), "cuda-free");
    assert.equal(src("0.11.0"), "cuda-free");
    // vllm-0.11.1 … 0.19.0: MemAvailable on capability (8,7), (11,0), (12,1).
    assert.equal(src("0.11.1"), "mem-available");
    assert.equal(src("0.17.1"), "mem-available");
    assert.equal(src("0.19.0", "9.0", true), "cuda-free", "a GH200 is not in the capability list before 0.20");
    assert.equal(src("0.19.0", "8.7"), "mem-available");
    // vllm-0.20.0 on: is_integrated (vllm-project/vllm#35356).
    assert.equal(src("0.20.0", "9.0", true), "mem-available");
    assert.equal(src("0.33.0", "12.1", false), "cuda-free");
    assert.equal(src("0.33.0"), "mem-available", "is_integrated unknown: the capability list");
    // Not a release number: the stricter figure.
    assert.equal(src(undefined), "cuda-free");
    assert.equal(src("nightly"), "cuda-free");
    assert.match(vllmStartupFreeSource("0.11.0", "12.1").reason, /< 0\.11\.1 takes CUDA's free figure/);
});
