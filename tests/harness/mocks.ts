// Test helper: evaluates the program with recording mocks in a child process.
import { spawnSync } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as yaml from "js-yaml";

export interface RecordedResource {
    type: string;
    name: string;
    inputs: Record<string, any>;
    provider?: string;
    /** The names of the resources its registration depends on (its dependsOn and the resources behind its inputs). */
    dependencies?: string[];
    /** How many registrations had been answered when this one was requested (unless delayed, the mocks answer at once). */
    answeredBefore?: number;
    /** This registration's answer was the how-manieth (from 0): answered before X was requested iff `answeredAs < X.answeredBefore`. */
    answeredAs?: number;
    /** Its customTimeouts as registered ("40m"), when any is set. */
    customTimeouts?: { create: string; update: string; delete: string };
}

export interface Evaluation {
    resources: RecordedResource[];
    outputs?: Record<string, any>;
    /** The SDK's per-promise debug stacks: taken, and holding frames (tests/harness/recording-run.ts). */
    debugStacks?: { total: number; withFrames: number };
    error?: string;
}

const ROOT = path.join(__dirname, "..", "..");

export interface EvaluateOptions {
    stack?: string;
    preview?: boolean;
    /** RemoteImage name → the repo digest its pull reports (default: the configured reference's). */
    digestOverrides?: Record<string, string>;
    /** Weights command name → the file manifest it reports. */
    manifestOverrides?: Record<string, Record<string, number>>;
    /** Resource name → milliseconds its registration takes (a slow host), to show what waits for it. */
    delays?: Record<string, number>;
    /** A file where bench/measure-preload.mjs writes the evaluating process' CPU time and peak RSS (bench/mocks.ts). */
    measureOut?: string;
}

export function evaluateWithMocks(config: Record<string, unknown>, opts: EvaluateOptions = {}): Evaluation {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-eval-"));
    try {
        const request = path.join(dir, "request.json");
        fs.writeFileSync(request, JSON.stringify({ stack: opts.stack ?? "test", config, preview: opts.preview ?? false, digestOverrides: opts.digestOverrides, manifestOverrides: opts.manifestOverrides, delays: opts.delays }));
        // A program error also exits non-zero, as `pulumi up` does; the JSON it wrote says what happened.
        const measure = opts.measureOut ? ["--import", path.join(ROOT, "bench", "measure-preload.mjs")] : [];
        const run = spawnSync(process.execPath, [...measure, "--import", "tsx", path.join(__dirname, "recording-run.ts"), request], {
            cwd: ROOT,
            encoding: "utf8",
            maxBuffer: 256 * 1024 * 1024,
            ...(opts.measureOut ? { env: { ...process.env, BENCH_MEASURE_OUT: opts.measureOut } } : {}),
        });
        if (!fs.existsSync(`${request}.out`)) throw new Error(`the program evaluation wrote no result (exit ${run.status}): ${run.stderr}`);
        return JSON.parse(fs.readFileSync(`${request}.out`, "utf8"));
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/** The `config:` map of a committed Pulumi.<stack>.yaml. */
export function stackConfig(stack: string): Record<string, unknown> {
    const doc = yaml.load(fs.readFileSync(path.join(ROOT, `Pulumi.${stack}.yaml`), "utf8")) as { config: Record<string, unknown> };
    return doc.config;
}
