// Preloaded (`--import`) into the evaluated program's process by bench/profile.ts (heap): V8's sampling heap
// profiler from the start, counting objects already collected too (what the program allocated, not only what is
// live at exit: --heap-prof keeps only the latter), written to $BENCH_HEAP_OUT at exit.
import { Session } from "node:inspector";
import { writeFileSync } from "node:fs";

const out = process.env.BENCH_HEAP_OUT;
if (out) {
    const session = new Session();
    session.connect();
    // The in-process session answers synchronously, so the exit handler can still collect the profile.
    session.post("HeapProfiler.startSampling", { samplingInterval: 32768, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    process.on("exit", () => {
        session.post("HeapProfiler.stopSampling", (err, res) => {
            if (!err) writeFileSync(out, JSON.stringify(res.profile));
        });
    });
}
