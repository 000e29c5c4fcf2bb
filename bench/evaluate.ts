// Program evaluation under mocks: time and peak memory of the harness' evaluation child
// (tests/harness/recording-run.ts, the same child `evaluateWithMocks` runs) for N hosts.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { manyHostConfig } from "../tests/harness/many-hosts";

const ROOT = path.join(__dirname, "..");

export { manyHostConfig };

export interface Evaluation {
    hosts: number;
    resources: number;
    /** Spawn to exit of the child (node start, tsx, the SDK, the program, every registration). */
    wallSeconds: number;
    /** From the child's first user code (after node and tsx start) to its exit. */
    evaluateSeconds: number;
    peakRssMiB: number;
}

export function evaluateOnce(n: number): Evaluation {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-eval-"));
    try {
        const request = path.join(dir, "request.json");
        const measure = path.join(dir, "measure.json");
        fs.writeFileSync(request, JSON.stringify({ stack: "bench", config: manyHostConfig(n), preview: false }));
        const t0 = process.hrtime.bigint();
        const run = spawnSync(process.execPath, ["--import", "tsx", "--import", path.join(__dirname, "measure-preload.mjs"),
            path.join(ROOT, "tests", "harness", "recording-run.ts"), request], {
            cwd: ROOT,
            encoding: "utf8",
            maxBuffer: 64 * 1024 * 1024,
            env: { ...process.env, BENCH_MEASURE_OUT: measure },
        });
        const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
        // The child writes its result to <request>.out (tests/harness/mocks.ts reads it the same way).
        const out = `${request}.out`;
        if (!fs.existsSync(out)) throw new Error(`evaluation of ${n} hosts wrote no result (exit ${run.status}, signal ${run.signal}): ${run.stderr}`);
        const result = JSON.parse(fs.readFileSync(out, "utf8")) as { resources: unknown[]; error?: string };
        if (result.error) throw new Error(`evaluation of ${n} hosts failed: ${result.error}`);
        const m = JSON.parse(fs.readFileSync(measure, "utf8")) as { maxRssKiB: number; sincePreloadMs: number };
        return {
            hosts: n,
            resources: result.resources.length,
            wallSeconds: wallMs / 1000,
            evaluateSeconds: m.sincePreloadMs / 1000,
            peakRssMiB: m.maxRssKiB / 1024,
        };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}
