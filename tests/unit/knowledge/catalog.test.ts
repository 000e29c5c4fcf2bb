import { test } from "node:test";
import * as assert from "node:assert/strict";
import { ARCHITECTURES, CATALOG, compareVersions, findModel, firstVllmVersionFor, parseVersion, supportsArchitecture } from "../../../components/knowledge/catalog";

test("catalog has the models the issue asks for, each complete and consistent", () => {
    const ids = [
        "Qwen/Qwen3.5-122B-A10B-FP8", "Intel/Qwen3.5-397B-A17B-int4-AutoRound", "Qwen/Qwen3-235B-A22B-FP8",
        "Qwen/Qwen3-235B-A22B-GPTQ-Int4", "Qwen/Qwen3-Next-80B-A3B-Instruct", "openai/gpt-oss-120b", "openai/gpt-oss-20b",
        "zai-org/GLM-4.5-Air-FP8", "meta-llama/Llama-3.3-70B-Instruct", "nvidia/Llama-3.3-70B-Instruct-FP8",
        "nvidia/Llama-3.1-405B-Instruct-FP4", "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    ];
    assert.ok(CATALOG.length >= 12);
    for (const id of ids) assert.ok(findModel(id), id);
    assert.equal(new Set(CATALOG.map(m => m.id)).size, CATALOG.length, "ids are unique");
    for (const m of CATALOG) {
        assert.ok(ARCHITECTURES[m.architecture], `${m.id}: architecture ${m.architecture} has a first vLLM version`);
        assert.ok(m.fullAttentionLayers >= 1 && m.fullAttentionLayers <= m.layers, m.id);
        assert.ok(m.kvHeads >= 1 && m.attentionHeads % m.kvHeads === 0, `${m.id}: heads are a multiple of KV heads`);
        assert.ok(m.weightBytes > 1e9 && m.parameters > 1e9 && m.headDim > 0, m.id);
        if (m.estimate) assert.ok(m.notes && m.notes.length > 0, `${m.id}: estimates say how they were derived`);
    }
});

test("hybrid models count only full-attention layers", () => {
    assert.equal(findModel("Qwen/Qwen3.5-122B-A10B-FP8")!.fullAttentionLayers, 12); // 48 layers, every 4th
    assert.equal(findModel("Qwen/Qwen3-Next-80B-A3B-Instruct")!.fullAttentionLayers, 12);
    assert.equal(findModel("openai/gpt-oss-120b")!.fullAttentionLayers, 18); // alternating sliding window
    assert.equal(findModel("nvidia/NVIDIA-Nemotron-Nano-9B-v2")!.fullAttentionLayers, 4);
});

test("findModel is case-insensitive and undefined for unknown ids", () => {
    assert.equal(findModel("qwen/qwen3.5-122b-a10b-fp8")?.architecture, "Qwen3_5MoeForConditionalGeneration");
    assert.equal(findModel("nobody/nothing"), undefined);
});

test("compareVersions orders releases and ignores prefixes and suffixes", () => {
    assert.ok(compareVersions("0.17.0", "0.14.0") > 0);
    assert.ok(compareVersions("0.9.2", "0.10.0") < 0);
    assert.equal(compareVersions("v0.17.1", "0.17.1"), 0);
    assert.equal(compareVersions("0.17", "0.17.0"), 0);
    assert.equal(compareVersions("0.17.1rc1+cu130", "0.17.1"), 0);
    assert.equal(parseVersion("latest"), undefined);
    assert.throws(() => compareVersions("latest", "0.1.0"));
});

test("Qwen3.5 needs vLLM 0.17: 0.14 and 0.16 do not know it", () => {
    assert.equal(firstVllmVersionFor("Qwen3_5MoeForConditionalGeneration"), "0.17.0");
    assert.equal(supportsArchitecture("0.14.0", "Qwen3_5MoeForConditionalGeneration"), false);
    assert.equal(supportsArchitecture("0.16.0", "Qwen3_5MoeForConditionalGeneration"), false);
    assert.equal(supportsArchitecture("0.17.0", "Qwen3_5MoeForConditionalGeneration"), true);
    assert.equal(supportsArchitecture("0.17.1", "Qwen3_5ForConditionalGeneration"), true);
    assert.equal(supportsArchitecture("0.10.1", "GptOssForCausalLM"), true);
    assert.equal(supportsArchitecture("0.10.0", "GptOssForCausalLM"), false);
});

test("supportsArchitecture is undefined when the version or the architecture is unknown", () => {
    assert.equal(supportsArchitecture("latest", "LlamaForCausalLM"), undefined);
    assert.equal(supportsArchitecture("0.17.0", "MadeUpForCausalLM"), undefined);
    assert.equal(firstVllmVersionFor("MadeUpForCausalLM"), undefined);
});
