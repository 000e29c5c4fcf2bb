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
//   KV dtype        `--kv-cache-dtype` in vllm.extraArgs overrides the model's default (catalog `kvDtype`, what `auto`
//                   gives). vLLM's choices are CacheDType = Literal["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2",
//                   "fp8_inc", "fp8_ds_mla"] (vllm/config/cache.py); every fp8 variant stores one byte per element
//                   (STR_DTYPE_TO_TORCH_DTYPE maps "fp8" to torch.uint8, vllm/utils/torch_utils.py), bfloat16/float16 two:
//                   fp8 halves the KV bytes per token of a bf16 cache.
//   total memory    which figure the plan multiplies is reported (`totalMemory`): 121.69 GiB, CUDA's total on a GB10
//                   (above; public Spark logs: "Free memory on device cuda:0 (104.5/121.69 GiB) on startup ..."), a
//                   configured one (policy config `usableGiB`), or one measured on the hosts with torch.cuda.mem_get_info()
//                   (`measuredTotalGiB`, the smallest over the hosts), which wins.
//   startup check   vLLM refuses to start when free < ceil(total × gpuMemoryUtilization) (request_memory in
//                   vllm/v1/worker/utils.py, called from gpu_worker.py init_device); vllmStartupMemoryCheck repeats it
//                   with vLLM's own message so the memory gate can refuse before the launch.
//   "free"          depends on the image's vLLM (vllmStartupFreeSource; components/knowledge/images.ts [uma-free]): before 0.11.1
//                   CUDA's free figure (torch.cuda.mem_get_info, which leaves out the page cache on a Spark); from 0.11.1
//                   MemAvailable (psutil.virtual_memory().available, page cache counts as available) on capability
//                   8.7/11.0/12.1; from 0.20.0 on any GPU CUDA calls integrated (vllm-project/vllm#35356).
import { CatalogModel, compareVersions, parseVersion } from "../knowledge/catalog";
import { UMA_CAPABILITIES_BEFORE_INTEGRATED_QUERY, firstVllmWithIntegratedGpuQuery, firstVllmWithUnifiedMemoryAvailable, parseCapability } from "../knowledge/images";
import { HostSpec, ModelSpec, VllmSpec } from "../spec/spec";

export const GiB = 1024 ** 3;

const KV_BYTES = { bf16: 2, fp8: 1 } as const;

/** The parts of a ClusterSpec the planner reads (a ClusterSpec satisfies it). */
export interface MemoryPlanInput {
    hosts: Array<Pick<HostSpec, "name" | "gpus">>;
    vllm: Pick<VllmSpec, "tensorParallelSize" | "pipelineParallelSize" | "gpuMemoryUtilization" | "maxModelLen"> & Partial<Pick<VllmSpec, "extraArgs">>;
    model?: Pick<ModelSpec, "id">;
}

export interface MemoryOptions {
    /** CUDA-visible memory per GB10, GiB. Default 121.69 (see above). */
    usableGiB?: number;
    /** Total memory measured on the hosts (torch.cuda.mem_get_info()[1], GiB; the smallest host). Overrides usableGiB. */
    measuredTotalGiB?: number;
    /**
     * Activation and runtime reserve per rank, GiB. Default 4: vLLM's profile on a GB10 reports
     * 3.6 GiB peak activation + 0.26 GiB CUDA graphs for a large MoE at 2048 batched tokens (issue #47 above).
     */
    reserveGiB?: number;
    /** Least host memory outside vLLM's share, GiB. Default 8: DGX OS + Docker + Ray raylet/GCS + page cache. */
    minHostHeadroomGiB?: number;
}

export interface PlannerOptions {
    usableGiB: number;
    reserveGiB: number;
    minHostHeadroomGiB: number;
}

export const MEMORY_DEFAULTS: PlannerOptions = { usableGiB: 121.69, reserveGiB: 4, minHostHeadroomGiB: 8 };

/** Which total-memory figure a plan used. */
export interface TotalMemory {
    gib: number;
    source: "gb10-default" | "configured" | "measured";
    /** One line for `spark-vllm plan`. */
    note: string;
}

/** Which KV cache dtype a plan used and why. */
export interface KvCacheDtype {
    /** The model's default ("bf16"/"fp8") or the --kv-cache-dtype value. */
    dtype: string;
    bytesPerElement: 1 | 2;
    source: "model" | "--kv-cache-dtype";
}

/** The --kv-cache-dtype value in extraArgs (`--kv-cache-dtype X` or `--kv-cache-dtype=X`; the last one wins), or undefined. */
export function kvCacheDtypeFlag(extraArgs: readonly string[] | undefined): string | undefined {
    let v: string | undefined;
    const args = extraArgs ?? [];
    for (let i = 0; i < args.length; i++) {
        const a = args[i];
        if (a === "--kv-cache-dtype" || a === "--kv_cache_dtype") v = args[i + 1];
        else if (a.startsWith("--kv-cache-dtype=") || a.startsWith("--kv_cache_dtype=")) v = a.slice(a.indexOf("=") + 1);
    }
    return v;
}

/** The KV cache dtype vLLM will use for `model` with these extra arguments (vllm/config/cache.py CacheDType). */
export function resolveKvCacheDtype(model: Pick<CatalogModel, "kvDtype">, extraArgs?: readonly string[]): KvCacheDtype {
    const flag = kvCacheDtypeFlag(extraArgs);
    if (flag === undefined || flag === "auto") return { dtype: model.kvDtype, bytesPerElement: KV_BYTES[model.kvDtype], source: "model" };
    const one = flag.startsWith("fp8") || flag === "int8";
    return { dtype: flag, bytesPerElement: one ? 1 : 2, source: "--kv-cache-dtype" };
}

export function totalMemoryFor(opts: MemoryOptions = {}): TotalMemory {
    if (opts.measuredTotalGiB !== undefined)
        return { gib: opts.measuredTotalGiB, source: "measured", note: `${opts.measuredTotalGiB.toFixed(2)} GiB per GPU, measured on the hosts (torch.cuda.mem_get_info, smallest host)` };
    if (opts.usableGiB !== undefined && opts.usableGiB !== MEMORY_DEFAULTS.usableGiB)
        return { gib: opts.usableGiB, source: "configured", note: `${opts.usableGiB.toFixed(2)} GiB per GPU, as configured (usableGiB)` };
    return { gib: MEMORY_DEFAULTS.usableGiB, source: "gb10-default", note: `${MEMORY_DEFAULTS.usableGiB.toFixed(2)} GiB per GPU, what CUDA reports as total on a DGX Spark (GB10); not measured` };
}

export interface StartupMemoryCheck {
    ok: boolean;
    /** ceil(total × utilization), GiB. */
    requestedGiB: number;
    freeGiB: number;
    totalGiB: number;
    utilization: number;
    /** The largest utilization (two decimals) that passes with this much free memory. */
    maxUtilization: number;
    /** vLLM's own ValueError text when it would refuse (request_memory, vllm/v1/worker/utils.py). */
    message?: string;
}

/** vLLM's start-up free-memory check, with its message: free < ceil(total × utilization) refuses. */
export function vllmStartupMemoryCheck(freeGiB: number, totalGiB: number, utilization: number, device = "cuda:0"): StartupMemoryCheck {
    const requestedBytes = Math.ceil(totalGiB * GiB * utilization);
    const requestedGiB = requestedBytes / GiB;
    const ok = freeGiB * GiB >= requestedBytes;
    const maxUtilization = Math.floor((freeGiB / totalGiB) * 100) / 100;
    const r: StartupMemoryCheck = { ok, requestedGiB, freeGiB, totalGiB, utilization, maxUtilization };
    if (!ok)
        r.message = `ValueError: Free memory on device ${device} (${freeGiB.toFixed(2)}/${totalGiB.toFixed(2)} GiB) on startup is less than desired GPU memory utilization (${utilization}, ${requestedGiB.toFixed(2)} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.`;
    return r;
}

/** Which figure vLLM's start-up check takes as free memory, and why. */
export interface StartupFreeSource {
    /** "mem-available": /proc/meminfo MemAvailable (page cache counts); "cuda-free": torch.cuda.mem_get_info()[0]. */
    source: "mem-available" | "cuda-free";
    reason: string;
}

/**
 * The rule of vLLM `version` on a GPU of `capability` (integrated: CUDA's is_integrated, when known) [uma-free in
 * components/knowledge/images.ts]. A version that is not a release number gets CUDA's free figure: the stricter of the two.
 */
export function vllmStartupFreeSource(version: string | undefined, capability: string, integrated?: boolean): StartupFreeSource {
    const cap = parseCapability(capability);
    const uma = !!cap && UMA_CAPABILITIES_BEFORE_INTEGRATED_QUERY.some(([M, m]) => M === cap[0] && m === cap[1]);
    if (!version || !parseVersion(version))
        return { source: "cuda-free", reason: `vLLM version ${version ?? "unknown"}: CUDA's free figure, the stricter one` };
    if (compareVersions(version, firstVllmWithUnifiedMemoryAvailable) < 0)
        return { source: "cuda-free", reason: `vLLM ${version} < ${firstVllmWithUnifiedMemoryAvailable} takes CUDA's free figure (the page cache counts as used)` };
    if (compareVersions(version, firstVllmWithIntegratedGpuQuery) >= 0) {
        const isIntegrated = integrated ?? uma;
        return isIntegrated
            ? { source: "mem-available", reason: `vLLM ${version} >= ${firstVllmWithIntegratedGpuQuery} takes MemAvailable on an integrated GPU` }
            : { source: "cuda-free", reason: `vLLM ${version}: the GPU is not integrated, CUDA's free figure` };
    }
    return uma
        ? { source: "mem-available", reason: `vLLM ${version} (${firstVllmWithUnifiedMemoryAvailable}–${firstVllmWithIntegratedGpuQuery}) takes MemAvailable on compute capability ${capability}` }
        : { source: "cuda-free", reason: `vLLM ${version}: compute capability ${capability} is not in its unified-memory list, CUDA's free figure` };
}

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

/** Per-rank memory arithmetic for a spec (weights, KV budget and tokens, headroom, the total it assumed), or why it is unknown. */
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
          options: PlannerOptions;
          /** The total-memory figure the plan multiplied, and where it came from. */
          totalMemory: TotalMemory;
          kvCacheDtype: KvCacheDtype;
          problems: string[];
      };

/** KV bytes per token per rank; `bytesPerElement` defaults to the model's KV dtype (see resolveKvCacheDtype). */
export function kvBytesPerToken(model: CatalogModel, tp: number, pp: number, bytesPerElement: number = KV_BYTES[model.kvDtype]): number {
    const layers = Math.ceil(model.fullAttentionLayers / pp);
    const heads = Math.max(1, Math.ceil(model.kvHeads / tp));
    return 2 * layers * heads * model.headDim * bytesPerElement;
}

/** Per-rank memory arithmetic for MODEL on the cluster; "unknown-model" when the catalog has no entry. */
export function planMemory(input: MemoryPlanInput, model: CatalogModel | undefined, opts: MemoryOptions = {}): MemoryPlan {
    const modelId = model?.id ?? input.model?.id ?? "(no model id)";
    if (!model) return { kind: "unknown-model", modelId, message: `${modelId} is not in the catalog (components/knowledge/catalog.ts); memory not checked` };
    const totalMemory = totalMemoryFor(opts);
    const o: PlannerOptions = {
        usableGiB: totalMemory.gib,
        reserveGiB: opts.reserveGiB ?? MEMORY_DEFAULTS.reserveGiB,
        minHostHeadroomGiB: opts.minHostHeadroomGiB ?? MEMORY_DEFAULTS.minHostHeadroomGiB,
    };
    const kvCacheDtype = resolveKvCacheDtype(model, input.vllm.extraArgs);
    const { tensorParallelSize: tp, pipelineParallelSize: pp, gpuMemoryUtilization: gmu } = input.vllm;
    const maxModelLen = input.vllm.maxModelLen ?? model.maxContext;
    const share = o.usableGiB * gmu;
    const embedExtra = pp > 1 ? (model.vocabSize * model.hiddenSize * 2) / tp : 0;
    const weights = (model.weightBytes / (tp * pp) + embedExtra) / GiB;
    const perToken = kvBytesPerToken(model, tp, pp, kvCacheDtype.bytesPerElement);
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
        hostHeadroomGiB: headroom, hostHeadroomOk: headroom >= o.minHostHeadroomGiB, options: o, totalMemory, kvCacheDtype, problems,
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
        `memory assumed: ${plan.totalMemory.note}`,
        `KV cache dtype: ${plan.kvCacheDtype.dtype} (${plan.kvCacheDtype.bytesPerElement} byte${plan.kvCacheDtype.bytesPerElement === 1 ? "" : "s"} per element, ${plan.kvCacheDtype.source === "model" ? "the model's default" : "--kv-cache-dtype in extraArgs"})`,
        ...plan.problems.map(p => `problem: ${p}`),
    );
    return out.join("\n") + "\n";
}
