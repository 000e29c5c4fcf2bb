// The test engine's front: `up` and `destroy` of the real program, each in its own process
// (as `pulumi up` is), with state kept in a file between runs.
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import type { Report, Request } from "./run";
import type { Transport } from "./operations";
import type { Op } from "./state";

export type { Report, Op };

export interface Stack {
    name: string;
    config: Record<string, unknown>;
    secretKeys?: string[];
    statePath: string;
    transport: Transport;
}

function runChild(request: Request, onOutput?: (line: string) => void): Promise<Report> {
    const dir = fs.mkdtempSync(path.join(path.dirname(request.statePath), ".req-"));
    const file = path.join(dir, "request.json");
    fs.writeFileSync(file, JSON.stringify(request));
    return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "run.ts"), file], {
            cwd: path.join(__dirname, "..", ".."),
            stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", d => (stdout += d));
        child.stderr.on("data", d => {
            stderr += d;
            if (onOutput) String(d).split("\n").filter(Boolean).forEach(onOutput);
        });
        child.on("close", code => {
            try {
                const report: Report = JSON.parse(fs.readFileSync(`${file}.report`, "utf8"));
                // Without an engine, pulumi.log.warn prints "warning: [runtime] …" (@pulumi/pulumi log/index.js).
                report.warnings = stderr.split("\n").filter(l => l.startsWith("warning: ")).map(l => l.replace(/^warning: (\[runtime\] )?/, ""));
                resolve(report);
            } catch {
                reject(new Error(`test engine exited ${code} without a report:\n${stdout}${stderr}`));
            } finally {
                fs.rmSync(dir, { recursive: true, force: true });
            }
        });
    });
}

export function up(stack: Stack): Promise<Report> {
    return runChild({ mode: "up", stack: stack.name, config: stack.config, secretKeys: stack.secretKeys, statePath: stack.statePath, transport: stack.transport });
}

export function destroy(stack: Stack): Promise<Report> {
    return runChild({ mode: "destroy", stack: stack.name, config: stack.config, statePath: stack.statePath, transport: stack.transport });
}

/** Ops that did something (not "same"). */
export const changes = (r: Report) => r.ops.filter(o => o.op !== "same");
export const actionCount = (r: Report) => r.ops.reduce((n, o) => n + o.actions, 0);
