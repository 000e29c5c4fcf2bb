// Preloaded (`--import`) into the harness' evaluation child (tests/harness/recording-run.ts):
// on exit, writes the child's peak RSS and the time since this preload ran to $BENCH_MEASURE_OUT.
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const loadedMs = performance.now();
const out = process.env.BENCH_MEASURE_OUT;
if (out) {
    process.on("exit", () => {
        writeFileSync(out, JSON.stringify({
            // kibibytes, as getrusage reports them
            maxRssKiB: process.resourceUsage().maxRSS,
            sinceStartMs: performance.now(),
            sincePreloadMs: performance.now() - loadedMs,
        }));
    });
}
