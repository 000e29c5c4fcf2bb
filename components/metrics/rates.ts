// Rates and quantiles from two samples of the same counters and histograms, as Prometheus' rate() and
// histogram_quantile() compute them. Pure.
import { Histogram } from "./vllmMetrics";

/**
 * How much a counter grew from BEFORE to AFTER. A counter that went down was reset (vLLM restarted): it counted from 0,
 * so AFTER is the growth, as Prometheus' rate() treats a reset (prometheus/prometheus promql/functions.go extrapolatedRate).
 */
export function counterIncrease(before: number | null, after: number | null): number | null {
    if (before === null || after === null) return null;
    return after >= before ? after - before : after;
}

/** The observations made between two samples of one histogram: each bucket's increase (all of AFTER after a reset). */
export function histogramIncrease(before: Histogram | null, after: Histogram | null): Histogram | null {
    if (!after) return null;
    if (!before || before.buckets.length !== after.buckets.length || before.buckets.some((b, i) => b.le !== after.buckets[i].le))
        return after;
    const reset = after.buckets.some((b, i) => b.count < before.buckets[i].count);
    return reset ? after : { buckets: after.buckets.map((b, i) => ({ le: b.le, count: b.count - before.buckets[i].count })) };
}

/**
 * The Q-quantile (0 to 1) of a histogram's observations, as histogram_quantile() estimates it
 * (prometheus/prometheus promql/quantile.go bucketQuantile): the rank q × count falls in the first bucket whose
 * cumulative count reaches it, and is placed linearly within that bucket; the first bucket starts at 0 (its upper bound
 * when that is 0 or less); a rank in the +Inf bucket answers the highest finite bound. Null with no observations.
 */
export function histogramQuantile(q: number, h: Histogram | null): number | null {
    if (!h || h.buckets.length < 2) return null;
    const total = h.buckets[h.buckets.length - 1].count;
    if (!(total > 0)) return null;
    const rank = q * total;
    const i = h.buckets.findIndex(b => b.count >= rank);
    if (i === h.buckets.length - 1) return h.buckets[h.buckets.length - 2].le;
    const end = h.buckets[i].le;
    let start = 0, countBefore = 0;
    if (i > 0) {
        start = h.buckets[i - 1].le;
        countBefore = h.buckets[i - 1].count;
    } else if (end <= 0) {
        return end;
    }
    const inBucket = h.buckets[i].count - countBefore;
    return inBucket > 0 ? start + (end - start) * ((rank - countBefore) / inBucket) : end;
}
