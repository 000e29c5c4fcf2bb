// `spark-vllm top`: the figures from successive rounds of host samples, and the frame that shows them. Pure.
import { ClusterPlan } from "../plan/clusterPlan";
import { HostSample, replicaOf } from "./topScript";
import { VllmSnapshot } from "./vllmMetrics";
import { counterIncrease, histogramIncrease, histogramQuantile } from "./rates";

/** Latency quantiles are taken over at most this long (the rounds kept back to it): "over the last minute". */
export const LATENCY_WINDOW_SECONDS = 60;
/** The widest line a frame has: an 80-column terminal. */
export const FRAME_COLUMNS = 80;
const GiB = 1024 ** 3;

export interface Quantiles { p50: number | null; p95: number | null }

export interface ReplicaFigures {
    /** 1-based; 1 for a stack without replicas. */
    replica: number;
    head: string;
    hosts: string[];
    /** Why this replica's vLLM figures are missing (its head unreachable, /metrics unreadable). */
    error?: string;
    running: number | null;
    waiting: number | null;
    /** 0 to 1. */
    kvCacheUsage: number | null;
    promptTokensPerSecond: number | null;
    generationTokensPerSecond: number | null;
    ttftSeconds: Quantiles | null;
    interTokenLatencySeconds: Quantiles | null;
    /**
     * Several replicas only: this replica's share (0 to 1) of the requests all replicas completed over the latency window
     * (vllm:request_success_total's increase); null while none completed, or when a replica's count is unknown.
     */
    frontShare: number | null;
}

export interface HostFigures {
    host: string;
    replica: number;
    error?: string;
    memAvailableGiB: number | null;
    memTotalGiB: number | null;
    pageCacheGiB: number | null;
    gpuUtilizationPercent: number | null;
    gpuTemperatureC: number | null;
}

export interface TopFigures {
    stack: string;
    model: string;
    endpoint: string;
    /** The newest round's time (ISO 8601, UTC), from the first host that gave one. */
    at: string | null;
    /** Seconds between the two newest rounds (the rates'), and between the oldest kept round and the newest (the latencies'). */
    rateSeconds: number | null;
    latencySeconds: number | null;
    replicas: ReplicaFigures[];
    hosts: HostFigures[];
}

const isSnapshot = (v: HostSample["vllm"]): v is VllmSnapshot => v !== undefined && !("error" in v);
const round = (v: number | null, digits: number) => (v === null ? null : Number(v.toFixed(digits)));

/** The rounds to keep for the next figures: those no older than LATENCY_WINDOW_SECONDS before the newest. */
export function keepRounds(rounds: HostSample[][]): HostSample[][] {
    const times = rounds.map(r => Math.max(...r.map(s => s.at ?? -Infinity)));
    const newest = times[times.length - 1];
    const first = times.findIndex(t => newest - t <= LATENCY_WINDOW_SECONDS);
    return rounds.slice(Math.max(0, Math.min(first, rounds.length - 2)));
}

/** A host's sample in ROUND. */
const of = (round: HostSample[] | undefined, host: string) => round?.find(s => s.host === host);

/**
 * The figures from ROUNDS (oldest first, each one sample per host): rates between the two newest, latency quantiles and
 * shares between the oldest and the newest (keepRounds keeps them within the last minute). One round gives the gauges only.
 */
export function topFigures(plan: ClusterPlan, stack: string, rounds: HostSample[][]): TopFigures {
    const newest = rounds[rounds.length - 1] ?? [];
    const previous = rounds.length > 1 ? rounds[rounds.length - 2] : undefined;
    const oldest = rounds.length > 1 ? rounds[0] : undefined;
    const groups = plan.replicas ?? [plan];
    const seconds = (a: HostSample | undefined, b: HostSample | undefined) =>
        a?.at != null && b?.at != null && b.at > a.at ? b.at - a.at : null;

    const replicas: ReplicaFigures[] = groups.map((g, k) => {
        const head = g.head.host.name;
        const base = { replica: k + 1, head, hosts: g.hosts.map(h => h.host.name) };
        const now = of(newest, head);
        const empty = { running: null, waiting: null, kvCacheUsage: null, promptTokensPerSecond: null, generationTokensPerSecond: null,
            ttftSeconds: null, interTokenLatencySeconds: null, frontShare: null };
        if (!now || now.error !== undefined || !isSnapshot(now.vllm))
            return { ...base, ...empty, error: `${head}: ${now?.error ?? (now?.vllm && "error" in now.vllm ? now.vllm.error : "no sample")}` };
        const v = now.vllm;
        const before = of(previous, head), first = of(oldest, head);
        const rateWindow = seconds(before, now), latencyWindow = seconds(first, now);
        const perSecond = (pick: (s: VllmSnapshot) => number | null) => {
            if (rateWindow === null || !isSnapshot(before!.vllm)) return null;
            const grew = counterIncrease(pick(before!.vllm), pick(v));
            return grew === null ? null : round(grew / rateWindow, 1);
        };
        const quantiles = (pick: (s: VllmSnapshot) => VllmSnapshot["ttft"]): Quantiles | null => {
            if (latencyWindow === null || !isSnapshot(first!.vllm) || !pick(v)) return null;
            const observed = histogramIncrease(pick(first!.vllm), pick(v));
            return { p50: round(histogramQuantile(0.5, observed), 4), p95: round(histogramQuantile(0.95, observed), 4) };
        };
        return {
            ...base, running: v.running, waiting: v.waiting, kvCacheUsage: round(v.kvCacheUsage, 4),
            promptTokensPerSecond: perSecond(s => s.promptTokens), generationTokensPerSecond: perSecond(s => s.generationTokens),
            ttftSeconds: quantiles(s => s.ttft), interTokenLatencySeconds: quantiles(s => s.interTokenLatency), frontShare: null,
        };
    });

    if (plan.replicas && oldest) {
        const done = groups.map(g => {
            const first = of(oldest, g.head.host.name)?.vllm, now = of(newest, g.head.host.name)?.vllm;
            return isSnapshot(first) && isSnapshot(now) ? counterIncrease(first.requestsDone, now.requestsDone) : null;
        });
        const total = done.reduce<number>((a, d) => a + (d ?? 0), 0);
        if (total > 0 && done.every(d => d !== null)) replicas.forEach((r, k) => { r.frontShare = round(done[k]! / total, 3); });
    }

    const hosts: HostFigures[] = plan.hosts.map(h => {
        const name = h.host.name;
        const s = of(newest, name);
        const replica = groups.indexOf(replicaOf(plan, name)) + 1;
        const memory = s?.memory && !("error" in s.memory) ? s.memory : undefined;
        const gpu = s?.gpu && !("error" in s.gpu) ? s.gpu : undefined;
        const why = !s ? "no sample" : s.error ?? [s.memory && "error" in s.memory ? s.memory.error : undefined,
            s.gpu && "error" in s.gpu ? s.gpu.error : undefined].filter(Boolean).join("; ");
        return {
            host: name, replica, ...(why ? { error: `${name}: ${why}` } : {}),
            memAvailableGiB: memory ? round(memory.availableBytes / GiB, 1) : null,
            memTotalGiB: memory ? round(memory.totalBytes / GiB, 1) : null,
            pageCacheGiB: memory ? round(memory.pageCacheBytes / GiB, 1) : null,
            gpuUtilizationPercent: gpu?.utilizationPercent ?? null,
            gpuTemperatureC: gpu?.temperatureC ?? null,
        };
    });

    const at = newest.find(s => s.at !== null)?.at;
    const span = (a: HostSample[] | undefined) => {
        const h = newest.find(s => s.at !== null && of(a, s.host)?.at != null);
        return h ? round(h.at! - of(a, h.host)!.at!, 1) : null;
    };
    return {
        stack, model: plan.modelName, endpoint: plan.endpoint, at: at != null ? new Date(at * 1000).toISOString() : null,
        rateSeconds: span(previous), latencySeconds: span(oldest), replicas, hosts,
    };
}

/** TEXT cut to WIDTH columns ("…" at the end when cut). */
const fit = (text: string, width: number) => (text.length > width ? text.slice(0, width - 1) + "…" : text);
const pad = (text: string, width: number, right = false) => (right ? fit(text, width).padStart(width) : fit(text, width).padEnd(width));
const dash = "-";
const num = (v: number | null, digits = 0) => (v === null ? dash : v.toFixed(digits));
const latency = (v: number | null) => (v === null ? dash : v < 1 ? `${Math.round(v * 1000)}ms` : `${v.toFixed(2)}s`);
const pair = (q: Quantiles | null) => (q === null || (q.p50 === null && q.p95 === null) ? dash : `${latency(q.p50)}/${latency(q.p95)}`);
const percent = (v: number | null) => (v === null ? dash : `${Math.round(v * 100)}%`);

/** One frame of `spark-vllm top`: every line at most FRAME_COLUMNS wide. */
export function renderTop(f: TopFigures): string {
    const time = f.at ? f.at.slice(11, 19) + " UTC" : "";
    const title = fit(`spark-vllm top: ${f.stack}, ${f.model}`, FRAME_COLUMNS - time.length - 1);
    const windows = `tokens/s over ${f.rateSeconds ?? dash} s, latency p50/p95 over ${f.latencySeconds ?? dash} s`;
    const out = [`${title.padEnd(FRAME_COLUMNS - time.length)}${time}`.trimEnd(), fit(windows, FRAME_COLUMNS), ""];
    const replicaRow = (cells: string[]) => [pad(cells[0], 3), pad(cells[1], 4, true), pad(cells[2], 5, true), pad(cells[3], 5, true),
        pad(cells[4], 9, true), pad(cells[5], 9, true), pad(cells[6], 13, true), pad(cells[7], 13, true), pad(cells[8], 6, true)].join(" ").trimEnd();
    out.push(replicaRow(["rep", "run", "wait", "KV", "in tok/s", "out tok/s", "TTFT", "ITL", "share"]));
    for (const r of f.replicas)
        out.push(replicaRow([String(r.replica), num(r.running), num(r.waiting), percent(r.kvCacheUsage), num(r.promptTokensPerSecond, 1),
            num(r.generationTokensPerSecond, 1), pair(r.ttftSeconds), pair(r.interTokenLatencySeconds), percent(r.frontShare)]));
    out.push("");
    const hostRow = (cells: string[]) => [pad(cells[0], 20), pad(cells[1], 3, true), pad(cells[2], 11, true), pad(cells[3], 10, true),
        pad(cells[4], 9, true), pad(cells[5], 5, true), pad(cells[6], 5, true)].join(" ").trimEnd();
    out.push(hostRow(["host", "rep", "MemAvail", "cache", "total", "GPU", "temp"]));
    for (const h of f.hosts)
        out.push(hostRow([h.host, String(h.replica), h.memAvailableGiB === null ? dash : `${num(h.memAvailableGiB, 1)} GiB`,
            h.pageCacheGiB === null ? dash : `${num(h.pageCacheGiB, 1)} GiB`, h.memTotalGiB === null ? dash : `${num(h.memTotalGiB, 1)} GiB`,
            h.gpuUtilizationPercent === null ? dash : `${h.gpuUtilizationPercent}%`, h.gpuTemperatureC === null ? dash : `${h.gpuTemperatureC}C`]));
    const errors = [...f.replicas.flatMap(r => (r.error ? [r.error] : [])), ...f.hosts.flatMap(h => (h.error ? [h.error] : []))];
    if (errors.length) out.push("", ...errors.map(e => fit(`- ${e}`, FRAME_COLUMNS)));
    return out.join("\n") + "\n";
}
