// The figures `spark-vllm top` reads from one vLLM's `/metrics`, by name, whichever vLLM release serves them. Pure.
//
// Names, from vLLM's PrometheusStatLogger (vllm/v1/metrics/loggers.py) of the releases components/knowledge/images.ts
// lists (0.10.1.1 to 0.33.0); prometheus_client appends `_total` to a counter's name and writes a histogram as
// `_bucket{le=…}`, `_sum` and `_count`, every series labelled `model_name` and `engine`:
// - `vllm:num_requests_running`, `vllm:num_requests_waiting` (gauges), `vllm:prompt_tokens`, `vllm:generation_tokens`,
//   `vllm:request_success` (counters, the last also labelled `finished_reason`), `vllm:time_to_first_token_seconds`
//   (histogram): in every release listed (vllm-project/vllm loggers.py at 005a810b, the 0.10 line, and after).
// - KV cache: `vllm:kv_cache_usage_perc`, "KV-cache usage. 1 means 100 percent usage."; the older
//   `vllm:gpu_cache_usage_perc` is "Deprecated in 0.9 - Renamed as vllm:kv_cache_usage_perc" (loggers.py at 005a810b)
//   and served beside it until hidden behind --show-hidden-metrics-for-version: the new name first, the old as fallback.
// - Inter-token latency: `vllm:inter_token_latency_seconds`; `vllm:time_per_output_token_seconds` is "Deprecated in
//   0.11 - Renamed as vllm:inter_token_latency_seconds", "TODO: remove in 0.13.0" (loggers.py at 5cdd6645,
//   llm-d/llm-d-inference-sim#264; vllm-project/vllm#23919 and #24015): 0.10.x serves only the old name.
import { Sample } from "./exposition";

/** Each figure's names, the one to prefer first. */
export const VLLM_METRIC_NAMES = {
    running: ["vllm:num_requests_running"],
    waiting: ["vllm:num_requests_waiting"],
    kvCacheUsage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    promptTokens: ["vllm:prompt_tokens_total"],
    generationTokens: ["vllm:generation_tokens_total"],
    requestsDone: ["vllm:request_success_total"],
    ttft: ["vllm:time_to_first_token_seconds"],
    interTokenLatency: ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"],
} as const;

/** A histogram's cumulative buckets (upper bound `le`, ascending, the last +Inf), summed over its series. */
export interface Histogram {
    buckets: Array<{ le: number; count: number }>;
}

/** One vLLM's figures at one instant; null where its `/metrics` has no such series. */
export interface VllmSnapshot {
    running: number | null;
    waiting: number | null;
    /** 0 to 1: the fullest engine's. */
    kvCacheUsage: number | null;
    promptTokens: number | null;
    generationTokens: number | null;
    requestsDone: number | null;
    ttft: Histogram | null;
    interTokenLatency: Histogram | null;
}

/** The samples of the first of NAMES that has any. */
function firstPresent(samples: Sample[], names: readonly string[]): Sample[] {
    for (const name of names) {
        const found = samples.filter(s => s.name === name);
        if (found.length) return found;
    }
    return [];
}

const sum = (found: Sample[]) => (found.length ? found.reduce((a, s) => a + s.value, 0) : null);
const max = (found: Sample[]) => (found.length ? Math.max(...found.map(s => s.value)) : null);

/** The histogram NAMES name (its `_bucket` series), every label set but `le` summed per bound. */
function histogram(samples: Sample[], names: readonly string[]): Histogram | null {
    const found = firstPresent(samples, names.map(n => `${n}_bucket`)).filter(s => s.labels.le !== undefined);
    if (!found.length) return null;
    const byBound = new Map<number, number>();
    for (const s of found) {
        const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
        if (Number.isNaN(le)) continue;
        byBound.set(le, (byBound.get(le) ?? 0) + s.value);
    }
    const buckets = [...byBound.entries()].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
    return buckets.length && buckets[buckets.length - 1].le === Infinity ? { buckets } : null;
}

/** One vLLM's figures from its parsed `/metrics` (every engine's series summed; KV cache: the fullest engine). */
export function vllmSnapshot(samples: Sample[]): VllmSnapshot {
    const n = VLLM_METRIC_NAMES;
    return {
        running: sum(firstPresent(samples, n.running)),
        waiting: sum(firstPresent(samples, n.waiting)),
        kvCacheUsage: max(firstPresent(samples, n.kvCacheUsage)),
        promptTokens: sum(firstPresent(samples, n.promptTokens)),
        generationTokens: sum(firstPresent(samples, n.generationTokens)),
        requestsDone: sum(firstPresent(samples, n.requestsDone)),
        ttft: histogram(samples, n.ttft),
        interTokenLatency: histogram(samples, n.interTokenLatency),
    };
}
