// Memory planner: does the model fit the Sparks, and how many KV tokens remain? Pure arithmetic.
//
// Model (per rank, i.e. per GPU; a Spark has one GB10):
//   usable          CUDA's total memory on a GB10. vLLM logs "Free memory on device (110.34/121.69 GiB)"
//                   and computes its budget as utilization × 121.69 GiB (MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks
//                   issue #47; nvtop#449 shows the same 121.690 GiB total). The box has 128 GB (119.2 GiB) of LPDDR5X;
//                   the CUDA figure is what vLLM multiplies.
//   weights         weightBytes / (TP × PP), plus, when PP > 1, one vocab × hidden × 2 bytes / TP: vLLM shards
//                   embed_tokens and lm_head across TP (VocabParallelEmbedding / ParallelLMHead) but with PP they sit
//                   on the first and last stage only, so those ranks carry that much more than the even split.
//                   Norms, routers and other replicated tensors are small and ignored.
//   KV per token    2 (K and V) × ceil(full-attention layers / PP) × max(1, ceil(KV heads / TP)) × head_dim × dtype bytes.
//                   KV heads are replicated when TP exceeds them. Linear-attention (Gated DeltaNet, Mamba) and
//                   sliding-window layers keep per-sequence state, not per-token KV; it is not modelled.
//   KV budget       usable × gpuMemoryUtilization − weights − reserve (activations, CUDA graphs, NCCL buffers).
//   host headroom   usable − usable × gpuMemoryUtilization: what the OS, Docker, Ray and the page cache keep.
import { CatalogModel } from "./catalog";
import { HostSpec, ModelSpec, VllmSpec } from "./spec";

export const GiB = 1024 ** 3;

/** The parts of a ClusterSpec the planner reads (a ClusterSpec satisfies it). */
export interface MemoryPlanInput {
    hosts: Array<Pick<HostSpec, "name" | "gpus">>;
    vllm: Pick<VllmSpec, "tensorParallelSize" | "pipelineParallelSize" | "gpuMemoryUtilization" | "maxModelLen">;
    model?: Pick<ModelSpec, "id">;
}

export interface MemoryOptions {
    /** CUDA-visible memory per GB10, GiB. Default 121.69 (see above). */
    usableGiB?: number;
    /**
     * Activation and runtime reserve per rank, GiB. Default 4: vLLM's profile on a GB10 reports
     * 3.6 GiB peak activation + 0.26 GiB CUDA graphs for a large MoE at 2048 batched tokens (issue #47 above).
     */
    reserveGiB?: number;
    /** Least host memory outside vLLM's share, GiB. Default 8: DGX OS + Docker + Ray raylet/GCS + page cache. */
    minHostHeadroomGiB?: number;
}

export const MEMORY_DEFAULTS: Required<MemoryOptions> = { usableGiB: 121.69, reserveGiB: 4, minHostHeadroomGiB: 8 };

export interface RankRow {
    rank: number;
    host: string;
    tpRank: number;
    ppStage: number;
    weightsGiB: number;
    vllmShareGiB: number;
    reserveGiB: number;
    kvBudgetGiB: number;
    kvBytesPerToken: number;
    kvTokens: number;
}

export type MemoryPlan =
    | { kind: "unknown-model"; modelId: string; message: string }
    | {
          kind: "plan";
          modelId: string;
          rows: RankRow[];
          /** The smallest KV capacity over all ranks: what the engine can actually use. */
          kvTokens: number;
          maxModelLen: number;
          maxModelLenFits: boolean;
          weightsFit: boolean;
          hostHeadroomGiB: number;
          hostHeadroomOk: boolean;
          options: Required<MemoryOptions>;
          problems: string[];
      };

const KV_BYTES = { bf16: 2, fp8: 1 } as const;

export function kvBytesPerToken(model: CatalogModel, tp: number, pp: number): number {
    const layers = Math.ceil(model.fullAttentionLayers / pp);
    const heads = Math.max(1, Math.ceil(model.kvHeads / tp));
    return 2 * layers * heads * model.headDim * KV_BYTES[model.kvDtype];
}

/** Per-rank memory arithmetic for MODEL on the cluster; "unknown-model" when the catalog has no entry. */
export function planMemory(input: MemoryPlanInput, model: CatalogModel | undefined, opts: MemoryOptions = {}): MemoryPlan {
    const modelId = model?.id ?? input.model?.id ?? "(no model id)";
    if (!model) return { kind: "unknown-model", modelId, message: `${modelId} is not in the catalog (components/catalog.ts); memory not checked` };
    const o = { ...MEMORY_DEFAULTS, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) } as Required<MemoryOptions>;
    const { tensorParallelSize: tp, pipelineParallelSize: pp, gpuMemoryUtilization: gmu } = input.vllm;
    const maxModelLen = input.vllm.maxModelLen ?? model.maxContext;
    const share = o.usableGiB * gmu;
    const embedExtra = pp > 1 ? (model.vocabSize * model.hiddenSize * 2) / tp : 0;
    const weights = (model.weightBytes / (tp * pp) + embedExtra) / GiB;
    const perToken = kvBytesPerToken(model, tp, pp);
    const kvBudget = share - weights - o.reserveGiB;
    const kvTokens = Math.max(0, Math.floor((kvBudget * GiB) / perToken));

    // Ranks in placement order: each host contributes `gpus` ranks; rank r is TP rank r % TP of stage ⌊r / TP⌋.
    const hostOfRank = input.hosts.flatMap(h => Array.from({ length: h.gpus }, () => h.name));
    const rows: RankRow[] = Array.from({ length: tp * pp }, (_, r) => ({
        rank: r, host: hostOfRank[r] ?? "(no host)", tpRank: r % tp, ppStage: Math.floor(r / tp),
        weightsGiB: weights, vllmShareGiB: share, reserveGiB: o.reserveGiB, kvBudgetGiB: kvBudget, kvBytesPerToken: perToken, kvTokens,
    }));
    const headroom = o.usableGiB - share;
    const weightsFit = weights + o.reserveGiB <= share;
    const problems: string[] = [];
    if (!weightsFit)
        problems.push(`weights need ${weights.toFixed(2)} GiB + ${o.reserveGiB} GiB reserve per GPU but vLLM's share is ${share.toFixed(2)} GiB (${gmu} × ${o.usableGiB} GiB); add hosts (raise TP × PP), pick a smaller quantization, or raise gpuMemoryUtilization`);
    else if (kvTokens < maxModelLen)
        problems.push(`the KV cache holds ${kvTokens} tokens per GPU but maxModelLen is ${maxModelLen}; lower vllm.maxModelLen to at most ${kvTokens}, or free memory`);
    if (headroom < o.minHostHeadroomGiB)
        problems.push(`gpuMemoryUtilization ${gmu} leaves ${headroom.toFixed(2)} GiB for the OS, Docker and Ray (minimum ${o.minHostHeadroomGiB} GiB); lower it to at most ${Math.floor(((o.usableGiB - o.minHostHeadroomGiB) / o.usableGiB) * 100) / 100}`);
    return {
        kind: "plan", modelId, rows, kvTokens, maxModelLen, maxModelLenFits: weightsFit && kvTokens >= maxModelLen, weightsFit,
        hostHeadroomGiB: headroom, hostHeadroomOk: headroom >= o.minHostHeadroomGiB, options: o, problems,
    };
}

/** Plain-text table of a plan (fixed-width columns, GiB with two decimals). */
export function renderMemoryPlan(plan: MemoryPlan): string {
    if (plan.kind === "unknown-model") return `memory: ${plan.message}\n`;
    const head = ["rank", "host", "tp", "pp", "weights GiB", "vLLM share GiB", "reserve GiB", "KV budget GiB", "KV B/token", "KV tokens"];
    const body = plan.rows.map(r => [
        String(r.rank), r.host, String(r.tpRank), String(r.ppStage), r.weightsGiB.toFixed(2), r.vllmShareGiB.toFixed(2),
        r.reserveGiB.toFixed(2), r.kvBudgetGiB.toFixed(2), String(r.kvBytesPerToken), String(r.kvTokens),
    ]);
    const widths = head.map((h, i) => Math.max(h.length, ...body.map(row => row[i].length)));
    const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ").trimEnd();
    const out = [line(head), widths.map(w => "-".repeat(w)).join("  "), ...body.map(line)];
    out.push(
        `model ${plan.modelId}: weights ${plan.weightsFit ? "fit" : "DO NOT fit"}; max-model-len ${plan.maxModelLen} ${plan.maxModelLenFits ? "fits" : "does NOT fit"} (KV capacity ${plan.kvTokens} tokens)`,
        `host headroom ${plan.hostHeadroomGiB.toFixed(2)} GiB per host (minimum ${plan.options.minHostHeadroomGiB} GiB)${plan.hostHeadroomOk ? "" : " — TOO LOW"}`,
        ...plan.problems.map(p => `problem: ${p}`),
    );
    return out.join("\n") + "\n";
}
