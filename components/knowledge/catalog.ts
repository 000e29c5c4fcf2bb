// Model catalog: the figures the memory planner and the policies need, as data. Pure.
//
// Sources, by the short names used in the comments below:
//   [cfg]     the model's config.json on Hugging Face (architectures[0], model_type, layer/head counts)
//   [card]    the model's Hugging Face model card
//   [reg]     vLLM's registry (vllm/model_executor/models/registry.py) and release notes
// Every figure not read from a source is marked `estimate: true` and says how it was derived.
// Weight bytes are decimal (1 GB = 1e9 bytes), as Hugging Face reports file sizes.

export type Quantization = "bf16" | "fp8" | "mxfp4" | "nvfp4" | "int4-gptq" | "int4-autoround";
export type KvDtype = "bf16" | "fp8";

/** A model we know: architecture, weight bytes, layers and heads for the memory plan, with sources. */
export interface CatalogModel {
    /** Hugging Face repository id. */
    id: string;
    /** config.json `architectures[0]`. */
    architecture: string;
    /** config.json `model_type`. */
    modelType: string;
    /** Bytes of the safetensors weights on disk. */
    weightBytes: number;
    parameters: number;
    /** Decoder layers (`num_hidden_layers`). */
    layers: number;
    /** Layers that keep a per-token KV cache for the whole context (hybrids: only full attention). */
    fullAttentionLayers: number;
    attentionHeads: number;
    kvHeads: number;
    headDim: number;
    hiddenSize: number;
    vocabSize: number;
    /** `max_position_embeddings`: the default --max-model-len. */
    maxContext: number;
    quantization: Quantization;
    /** What `--kv-cache-dtype auto` gives: the activation dtype unless the checkpoint says otherwise. */
    kvDtype: KvDtype;
    trustRemoteCode: boolean;
    /** Some figure above is derived rather than read; `notes` says which and how. */
    estimate?: boolean;
    notes?: string;
}

export interface ArchitectureSupport {
    /** First vLLM release whose model registry knows the architecture. */
    firstVllm: string;
    estimate?: boolean;
    source: string;
}

/** First vLLM release per architecture. Older images fail with "Model architectures [...] are not supported". */
export const ARCHITECTURES: Record<string, ArchitectureSupport> = {
    // vLLM 0.16.0 rejects it ("are not supported for now", runpod-workers/worker-vllm#279);
    // v0.17.0 release notes: "full Qwen3.5 family support" (7 March 2026). DESIGN.md: 0.14 does not know it.
    Qwen3_5MoeForConditionalGeneration: { firstVllm: "0.17.0", source: "vLLM v0.17.0 release notes; worker-vllm#279 (0.16.0 fails)" },
    Qwen3_5ForConditionalGeneration: { firstVllm: "0.17.0", source: "vLLM v0.17.0 release notes (same PR family as the MoE variant)" },
    // Qwen3 (dense and MoE) landed before the models' release; 0.8.5 notes "day 0 support ... fixes fp8 weight loading".
    Qwen3MoeForCausalLM: { firstVllm: "0.8.4", source: "facebookresearch/matrix#20 ('since vllm 0.8.4, qwen3 models are officially supported'); v0.8.5 notes" },
    Qwen3ForCausalLM: { firstVllm: "0.8.4", source: "as Qwen3MoeForCausalLM" },
    // Released 11 Sep 2025, shipped in v0.10.2 (vllm-ascend Qwen3-Next PR #2919 targets v0.10.2).
    // Older transformers lack the config; vLLM 0.10.2 may need a newer transformers (gpustack#2843).
    Qwen3NextForCausalLM: { firstVllm: "0.10.2", source: "vllm-ascend#2919 (vLLM v0.10.2); gpustack#2843" },
    GptOssForCausalLM: { firstVllm: "0.10.1", source: "vLLM v0.10.1 release notes: 'New model families: GPT-OSS'" },
    // v0.10.1 notes list "GLM-4.5 series improvements", so it existed before; v0.10.0 is the release after GLM-4.5 (28 Jul 2025).
    Glm4MoeForCausalLM: { firstVllm: "0.10.0", estimate: true, source: "inferred from v0.10.1 notes ('improvements') and the GLM-4.5 release date" },
    LlamaForCausalLM: { firstVllm: "0.1.0", source: "LLaMA is in vLLM's first release README" },
    // v0.10.1 notes: "Enhanced existing models: NemotronH support (#22349)"; the Nano-9B-v2 card asks for vLLM >= 0.10.1.
    // The architecture may be older; 0.10.1 is the earliest release we can confirm serves Nano v2.
    NemotronHForCausalLM: { firstVllm: "0.10.1", estimate: true, source: "v0.10.1 release notes; NVIDIA-Nemotron-Nano-9B-v2 card" },
};

const GB = 1e9;

/** The known models (estimates are marked); policies and the memory plan read them at preview. */
export const CATALOG: CatalogModel[] = [
    {
        // [cfg] via vultr/NVIDIA recipe pages: 48 layers (Gated DeltaNet ×3 + full attention ×1 → 12 full),
        // 32 heads, 2 KV heads, head_dim 256, hidden 3072; vocab 248320 (vLLM qwen3_5 config); 262144 context.
        // Weights: DESIGN.md "about 119 GB of FP8 weights"; the Hub lists 125B params incl. vision tower and MTP.
        id: "Qwen/Qwen3.5-122B-A10B-FP8", architecture: "Qwen3_5MoeForConditionalGeneration", modelType: "qwen3_5_moe",
        weightBytes: 119 * GB, parameters: 122e9, layers: 48, fullAttentionLayers: 12, attentionHeads: 32, kvHeads: 2,
        headDim: 256, hiddenSize: 3072, vocabSize: 248320, maxContext: 262144, quantization: "fp8", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true,
        notes: "weightBytes from DESIGN.md (≈119 GB), not from the index file; KV dtype bf16 per NVIDIA Dynamo recipe ('FP8 weights, BF16 KV')",
    },
    {
        // [cfg] (Megatron MIMO config for Qwen3.5-397B): 60 layers, hidden 4096, 32 heads, 2 KV heads, 3:1 hybrid → 15 full.
        // head_dim 256 as the rest of the Qwen3.5 family. eugr/spark-vllm-docker runs this build on 2–4 Sparks.
        id: "Intel/Qwen3.5-397B-A17B-int4-AutoRound", architecture: "Qwen3_5MoeForConditionalGeneration", modelType: "qwen3_5_moe",
        weightBytes: 205 * GB, parameters: 397e9, layers: 60, fullAttentionLayers: 15, attentionHeads: 32, kvHeads: 2,
        headDim: 256, hiddenSize: 4096, vocabSize: 248320, maxContext: 262144, quantization: "int4-autoround", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true,
        notes: "weightBytes estimated: 397e9 × 4.125 bits (int4, group 128 scales) ≈ 205 GB; head_dim assumed 256 (family)",
    },
    {
        // [cfg] 94 layers, 64 heads, 4 KV heads, head_dim 128, hidden 4096, vocab 151936 (slime qwen3-235B-A22B.sh), 40960 ctx.
        id: "Qwen/Qwen3-235B-A22B-FP8", architecture: "Qwen3MoeForCausalLM", modelType: "qwen3_moe",
        weightBytes: 236 * GB, parameters: 235e9, layers: 94, fullAttentionLayers: 94, attentionHeads: 64, kvHeads: 4,
        headDim: 128, hiddenSize: 4096, vocabSize: 151936, maxContext: 40960, quantization: "fp8", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes estimated: 235e9 params × 1 byte + block scales and bf16 embeddings",
    },
    {
        id: "Qwen/Qwen3-235B-A22B-GPTQ-Int4", architecture: "Qwen3MoeForCausalLM", modelType: "qwen3_moe",
        weightBytes: 125 * GB, parameters: 235e9, layers: 94, fullAttentionLayers: 94, attentionHeads: 64, kvHeads: 4,
        headDim: 128, hiddenSize: 4096, vocabSize: 151936, maxContext: 40960, quantization: "int4-gptq", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes estimated: int4 experts + bf16 attention/embeddings ≈ 125 GB",
    },
    {
        // [cfg] Qwen3NextForCausalLM, full_attention_interval 4, head_dim 256, hidden 2048; 48 layers, 16 heads, 2 KV heads.
        id: "Qwen/Qwen3-Next-80B-A3B-Instruct", architecture: "Qwen3NextForCausalLM", modelType: "qwen3_next",
        weightBytes: 163 * GB, parameters: 81.3e9, layers: 48, fullAttentionLayers: 12, attentionHeads: 16, kvHeads: 2,
        headDim: 256, hiddenSize: 2048, vocabSize: 151936, maxContext: 262144, quantization: "bf16", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes computed: 81.3e9 params × 2 bytes (bf16)",
    },
    {
        // [cfg] 36 layers alternating sliding (window 128) / full → 18 full; 64 heads, 8 KV heads, head_dim 64, hidden 2880, vocab 201088.
        // Sliding layers keep only 128 tokens, so they are left out of the per-token KV (bounded, small).
        id: "openai/gpt-oss-120b", architecture: "GptOssForCausalLM", modelType: "gpt_oss",
        weightBytes: 65.3 * GB, parameters: 116.8e9, layers: 36, fullAttentionLayers: 18, attentionHeads: 64, kvHeads: 8,
        headDim: 64, hiddenSize: 2880, vocabSize: 201088, maxContext: 131072, quantization: "mxfp4", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes: 60.8 GiB checkpoint per OpenAI's model card table (recalled, not re-read here)",
    },
    {
        // [cfg] 24 layers (12 full), 64 heads, 8 KV heads, head_dim 64 (EchoCog/gpt-oss-20b architecture notes).
        id: "openai/gpt-oss-20b", architecture: "GptOssForCausalLM", modelType: "gpt_oss",
        weightBytes: 13.7 * GB, parameters: 20.9e9, layers: 24, fullAttentionLayers: 12, attentionHeads: 64, kvHeads: 8,
        headDim: 64, hiddenSize: 2880, vocabSize: 201088, maxContext: 131072, quantization: "mxfp4", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes: 12.8 GiB checkpoint per OpenAI's model card table (recalled)",
    },
    {
        // [cfg] 46 layers (1 dense + 45 MoE; the MTP layer is only loaded for speculative decoding), 96 heads,
        // 8 KV heads, head_dim 128, hidden 4096, vocab 151552 (slime glm4.5-106B-A12B args, tilert config).
        id: "zai-org/GLM-4.5-Air-FP8", architecture: "Glm4MoeForCausalLM", modelType: "glm4_moe",
        weightBytes: 113 * GB, parameters: 110e9, layers: 46, fullAttentionLayers: 46, attentionHeads: 96, kvHeads: 8,
        headDim: 128, hiddenSize: 4096, vocabSize: 151552, maxContext: 131072, quantization: "fp8", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes estimated: 106B + MTP ≈ 110e9 params × 1 byte + scales",
    },
    {
        // [cfg] 80 layers, 64 heads, 8 KV heads, head_dim 128, hidden 8192, vocab 128256, 131072 ctx; 70.55B params.
        id: "meta-llama/Llama-3.3-70B-Instruct", architecture: "LlamaForCausalLM", modelType: "llama",
        weightBytes: 141.1 * GB, parameters: 70.55e9, layers: 80, fullAttentionLayers: 80, attentionHeads: 64, kvHeads: 8,
        headDim: 128, hiddenSize: 8192, vocabSize: 128256, maxContext: 131072, quantization: "bf16", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes computed: 70.55e9 × 2 bytes (bf16); gated repo (needs hfToken)",
    },
    {
        id: "nvidia/Llama-3.3-70B-Instruct-FP8", architecture: "LlamaForCausalLM", modelType: "llama",
        weightBytes: 72.7 * GB, parameters: 70.55e9, layers: 80, fullAttentionLayers: 80, attentionHeads: 64, kvHeads: 8,
        headDim: 128, hiddenSize: 8192, vocabSize: 128256, maxContext: 131072, quantization: "fp8", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true, notes: "weightBytes estimated: linear layers 1 byte/param + bf16 embed_tokens and lm_head (2 × 2.1 GB)",
    },
    {
        // [cfg] Llama 3.1 405B: 126 layers, 128 heads, 8 KV heads, head_dim 128, hidden 16384, vocab 128256.
        id: "nvidia/Llama-3.1-405B-Instruct-FP4", architecture: "LlamaForCausalLM", modelType: "llama",
        weightBytes: 233 * GB, parameters: 405.9e9, layers: 126, fullAttentionLayers: 126, attentionHeads: 128, kvHeads: 8,
        headDim: 128, hiddenSize: 16384, vocabSize: 128256, maxContext: 131072, quantization: "nvfp4", kvDtype: "bf16",
        trustRemoteCode: false, estimate: true,
        notes: "weightBytes estimated: NVFP4 = 4.5 bits/param (fp8 scale per 16) on linear layers + bf16 embed_tokens/lm_head ≈ 233 GB",
    },
    {
        // [card] 56 layers: 27 Mamba-2, 25 MLP, 4 attention (Jetson AI Lab Nemotron-Nano-9B-v2 page); hidden 4480
        // (Megatron-Bridge nemotronh docs). Attention heads 40 / KV heads 8 / head_dim 128 from the config as recalled.
        id: "nvidia/NVIDIA-Nemotron-Nano-9B-v2", architecture: "NemotronHForCausalLM", modelType: "nemotron_h",
        weightBytes: 17.8 * GB, parameters: 8.89e9, layers: 56, fullAttentionLayers: 4, attentionHeads: 40, kvHeads: 8,
        headDim: 128, hiddenSize: 4480, vocabSize: 131072, maxContext: 131072, quantization: "bf16", kvDtype: "bf16",
        trustRemoteCode: true, estimate: true,
        notes: "heads/head_dim not re-read from config.json; weightBytes = 8.89e9 × 2 bytes; card serves with --trust-remote-code",
    },
];

const BY_ID = new Map(CATALOG.map(m => [m.id.toLowerCase(), m]));

/** The catalog entry for a Hugging Face id (case-insensitive), or undefined. */
export function findModel(id: string): CatalogModel | undefined {
    return BY_ID.get(id.toLowerCase());
}

/** The first vLLM release that knows an architecture, or undefined when the catalog does not say. */
export function firstVllmVersionFor(architecture: string): string | undefined {
    return ARCHITECTURES[architecture]?.firstVllm;
}

/** Numeric release parts of a version such as "0.17.1", "v0.14.0", "0.17.1rc1+cu130"; undefined if none. */
export function parseVersion(v: string): number[] | undefined {
    const m = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(v.trim());
    return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

/** Compares release numbers (pre-release and local suffixes ignored): negative, 0 or positive. */
export function compareVersions(a: string, b: string): number {
    const pa = parseVersion(a), pb = parseVersion(b);
    if (!pa || !pb) throw new Error(`cannot compare versions "${a}" and "${b}"`);
    for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
    return 0;
}

/** true/false when both the version and the architecture are known; undefined otherwise. */
export function supportsArchitecture(vllmVersion: string, architecture: string): boolean | undefined {
    const first = firstVllmVersionFor(architecture);
    if (first === undefined || parseVersion(vllmVersion) === undefined) return undefined;
    return compareVersions(vllmVersion, first) >= 0;
}
