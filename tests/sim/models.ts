// Fake Hugging Face models laid out exactly like a real HF hub cache
// (models--Org--Name/{blobs,refs/main,snapshots/<rev>/...}).
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";

export interface SimModel {
    /** Hub id, e.g. "Qwen/Qwen3.5-122B-A10B-FP8". */
    id: string;
    /** 40-hex snapshot revision; default: derived from the id. */
    revision?: string;
    /** The model's config.json. */
    config: Record<string, unknown>;
    /** Extra or replacement files of the snapshot (name → content). */
    files?: Record<string, string | Buffer>;
    /**
     * The snapshot is exactly config.json and `files`, none of the stand-in's defaults (a real model that a real vLLM
     * loads: tests/sim/image-vllm-cpu.ts; the default index would point it at the stand-in's fake shard).
     */
    exactFiles?: boolean;
}

export const QWEN35_122B_FP8: SimModel = {
    id: "Qwen/Qwen3.5-122B-A10B-FP8",
    config: {
        architectures: ["Qwen3_5MoeForConditionalGeneration"],
        model_type: "qwen3_5_moe",
        torch_dtype: "bfloat16",
        tie_word_embeddings: false,
        text_config: {
            model_type: "qwen3_5_moe_text",
            hidden_size: 3072,
            num_hidden_layers: 48,
            num_attention_heads: 32,
            num_key_value_heads: 2,
            head_dim: 256,
            num_experts: 256,
            num_experts_per_tok: 8,
            moe_intermediate_size: 1024,
            vocab_size: 248320,
            max_position_embeddings: 262144,
        },
        // also at top level, for readers that do not descend into text_config
        hidden_size: 3072,
        num_hidden_layers: 48,
        num_attention_heads: 32,
        num_key_value_heads: 2,
        head_dim: 256,
        vocab_size: 248320,
        max_position_embeddings: 262144,
        quantization_config: { quant_method: "fp8", fmt: "e4m3", activation_scheme: "dynamic", weight_block_size: [128, 128] },
    },
};

export const QWEN3_30B_A3B: SimModel = {
    id: "Qwen/Qwen3-30B-A3B",
    config: {
        architectures: ["Qwen3MoeForCausalLM"],
        model_type: "qwen3_moe",
        torch_dtype: "bfloat16",
        hidden_size: 2048,
        num_hidden_layers: 48,
        num_attention_heads: 32,
        num_key_value_heads: 4,
        head_dim: 128,
        num_experts: 128,
        num_experts_per_tok: 8,
        vocab_size: 151936,
        max_position_embeddings: 40960,
    },
};

export const DEFAULT_MODELS: SimModel[] = [QWEN35_122B_FP8];

export function modelRevision(m: SimModel): string {
    return m.revision ?? crypto.createHash("sha1").update(`spark-vllm-sim:${m.id}`).digest("hex");
}

/** `models--Org--Name` */
export function modelCacheName(id: string): string {
    return "models--" + id.split("/").join("--");
}

/** A tiny but valid safetensors file (one 4-byte F8 tensor). */
export function tinySafetensors(): Buffer {
    let header = JSON.stringify({
        __metadata__: { format: "pt" },
        "lm_head.weight": { dtype: "F8_E4M3", shape: [4], data_offsets: [0, 4] },
    });
    while ((8 + header.length) % 8 !== 0) header += " ";
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    return Buffer.concat([len, Buffer.from(header), Buffer.from([0x38, 0x38, 0x38, 0x38])]);
}

/**
 * A safetensors file whose header declares `bytes` of one FP8 tensor, without the data: the weights command reads
 * headers for the model's size (components/hostProgram/spark_vllm/weights_size.py), so a sim host holds a model of any
 * declared size in a few hundred bytes. vLLM would refuse the file at load; the size check refuses it first.
 */
export function declaredSafetensors(bytes: number): Buffer {
    let header = JSON.stringify({ __metadata__: { format: "pt" }, "lm_head.weight": { dtype: "F8_E4M3", shape: [bytes], data_offsets: [0, bytes] } });
    while ((8 + header.length) % 8 !== 0) header += " ";
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    return Buffer.concat([len, Buffer.from(header)]);
}

/** Meta's Llama 3.1 405B at FP8 (about 410 GB of weights, declared): more than two Sparks hold; not in the catalog. */
export const LLAMA31_405B_FP8_DECLARED: SimModel = {
    id: "meta-llama/Llama-3.1-405B-Instruct-FP8",
    config: {
        architectures: ["LlamaForCausalLM"], model_type: "llama", torch_dtype: "bfloat16", hidden_size: 16384, num_hidden_layers: 126,
        num_attention_heads: 128, num_key_value_heads: 8, vocab_size: 128256, max_position_embeddings: 131072,
    },
    files: { "model-00001-of-00001.safetensors": declaredSafetensors(410e9) },
};

export function modelFiles(m: SimModel): Record<string, string | Buffer> {
    if (m.exactFiles) return { "config.json": JSON.stringify(m.config, null, 2) + "\n", ...(m.files ?? {}) };
    const weights = "model-00001-of-00001.safetensors";
    return {
        "config.json": JSON.stringify(m.config, null, 2) + "\n",
        "generation_config.json": JSON.stringify({ bos_token_id: 1, eos_token_id: 2, do_sample: true, temperature: 0.7 }, null, 2) + "\n",
        "tokenizer_config.json": JSON.stringify({ tokenizer_class: "Qwen2Tokenizer", model_max_length: 262144 }, null, 2) + "\n",
        "tokenizer.json": JSON.stringify({ version: "1.0", model: { type: "BPE", vocab: {}, merges: [] } }) + "\n",
        "model.safetensors.index.json": JSON.stringify({ metadata: { total_size: 4 }, weight_map: { "lm_head.weight": weights } }, null, 2) + "\n",
        [weights]: tinySafetensors(),
        ...(m.files ?? {}),
    };
}

/** Writes one model into an HF cache dir (the `.../huggingface` dir, not `.../hub`). Returns the snapshot dir. */
export function writeModel(hfHome: string, m: SimModel): string {
    const repo = path.join(hfHome, "hub", modelCacheName(m.id));
    const rev = modelRevision(m);
    const snap = path.join(repo, "snapshots", rev);
    fs.mkdirSync(path.join(repo, "blobs"), { recursive: true });
    fs.mkdirSync(path.join(repo, "refs"), { recursive: true });
    fs.mkdirSync(snap, { recursive: true });
    fs.writeFileSync(path.join(repo, "refs", "main"), rev);
    for (const [name, content] of Object.entries(modelFiles(m))) {
        const buf = Buffer.isBuffer(content) ? content : Buffer.from(content);
        const blob = crypto.createHash("sha256").update(buf).digest("hex");
        fs.writeFileSync(path.join(repo, "blobs", blob), buf);
        const link = path.join(snap, name);
        fs.mkdirSync(path.dirname(link), { recursive: true });
        fs.rmSync(link, { force: true });
        const rel = path.relative(path.dirname(link), path.join(repo, "blobs", blob));
        fs.symlinkSync(rel, link);
    }
    return snap;
}
