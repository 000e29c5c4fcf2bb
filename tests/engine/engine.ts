// The test engine's front: `up` and `destroy` of the real program, each in its own process
// (as `pulumi up` is), with state kept in a file between runs.
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import type { EngineEvent, Report, Request } from "./run";
import { ENGINE_SCRATCH_ENV, type Transport } from "./operations";
import type { Op } from "./state";
import { realDestroy, realUp, usesRealPulumi } from "./real";

export type { EngineEvent, Report, Op };

/** Optional: watch each step as it happens; stop the run (its process group) when `signal` aborts. */
export interface RunOptions {
    onEvent?: (e: EngineEvent) => void;
    signal?: AbortSignal;
}

/** `up`'s own options: `refresh` is `pulumi up --refresh` (tests/engine/refresh.ts), `replace` its `--replace URN`s. */
export interface UpOptions extends RunOptions {
    refresh?: boolean;
    replace?: string[];
}

export interface Stack {
    name: string;
    config: Record<string, unknown>;
    secretKeys?: string[];
    statePath: string;
    transport: Transport;
    /** false: `pulumi up` without `--policy-pack` (grpc mode runs the repository's pack otherwise). */
    policyPack?: false;
}

function runChild(request: Request, opts: RunOptions = {}): Promise<Report> {
    const dir = fs.mkdtempSync(path.join(path.dirname(request.statePath), ".req-"));
    const file = path.join(dir, "request.json");
    fs.writeFileSync(file, JSON.stringify(request));
    return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "run.ts"), file], {
            cwd: path.join(__dirname, "..", ".."),
            // Its scratch files live in this request's folder, which `close` below removes even when the child was killed.
            env: { ...process.env, [ENGINE_SCRATCH_ENV]: path.join(dir, "scratch") },
            stdio: ["ignore", "pipe", "pipe", ...(opts.onEvent ? ["ipc" as const] : [])],
            // Its own process group, so an abort stops the ssh and docker clients it runs too.
            detached: opts.signal !== undefined,
        });
        if (opts.onEvent) child.on("message", (e: EngineEvent | { kind: "flush" }) => { if (e.kind !== "flush") opts.onEvent!(e); });
        const stop = () => { try { process.kill(-child.pid!, "SIGTERM"); } catch { /* already gone */ } };
        if (opts.signal?.aborted) stop();
        opts.signal?.addEventListener("abort", stop, { once: true });
        let stdout = "";
        let stderr = "";
        child.stdout!.on("data", d => (stdout += d));
        child.stderr!.on("data", d => (stderr += d));
        child.on("close", code => {
            opts.signal?.removeEventListener("abort", stop);
            try {
                const report: Report = JSON.parse(fs.readFileSync(`${file}.report`, "utf8"));
                // Under mocks (no engine to log to), pulumi.log.warn prints "warning: [runtime] …" (@pulumi/pulumi log/index.js).
                report.warnings ??= stderr.split("\n").filter(l => l.startsWith("warning: ")).map(l => l.replace(/^warning: (\[runtime\] )?/, ""));
                resolve(report);
            } catch {
                reject(new Error(`test engine exited ${code} without a report:\n${stdout}${stderr}`));
            } finally {
                fs.rmSync(dir, { recursive: true, force: true });
            }
        });
    });
}

export function up(stack: Stack, opts: UpOptions = {}): Promise<Report> {
    if (usesRealPulumi()) return realUp(stack, opts);
    return runChild({ mode: "up", stack: stack.name, config: stack.config, secretKeys: stack.secretKeys, statePath: stack.statePath, transport: stack.transport, progress: !!opts.onEvent,
        ...(opts.refresh ? { refresh: true } : {}),
        ...(opts.replace?.length ? { replace: opts.replace } : {}),
        ...(stack.policyPack === false ? { packDir: "" } : {}) }, opts);
}

export function destroy(stack: Stack, opts: RunOptions = {}): Promise<Report> {
    if (usesRealPulumi()) return realDestroy(stack, opts);
    return runChild({ mode: "destroy", stack: stack.name, config: stack.config, statePath: stack.statePath, transport: stack.transport, progress: !!opts.onEvent }, opts);
}

/** Ops that did something (not "same"). */
export const changes = (r: Report) => r.ops.filter(o => o.op !== "same");
export const actionCount = (r: Report) => r.ops.reduce((n, o) => n + o.actions, 0);
