// Preloaded (`--import`) into the evaluated program's process: on exit, writes to $BENCH_MEASURE_OUT the
// process' peak RSS and CPU time (getrusage of itself: every thread, GC included; what the program cost the
// machine, whatever else runs on it) and the time since this preload ran.
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const loadedMs = performance.now();
const out = process.env.BENCH_MEASURE_OUT;
if (out) {
    process.on("exit", () => {
        const u = process.resourceUsage();
        writeFileSync(out, JSON.stringify({
            // kibibytes and microseconds, as getrusage reports them
            maxRssKiB: u.maxRSS,
            userMicros: u.userCPUTime,
            systemMicros: u.systemCPUTime,
            sinceStartMs: performance.now(),
            sincePreloadMs: performance.now() - loadedMs,
        }));
    });
}
