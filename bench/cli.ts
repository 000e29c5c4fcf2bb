// CLI cold start: `spark-vllm plan`, `diff` and `diagnose` on the committed stacks, each a fresh process started
// through bin/spark-vllm.js, as a user types it. Measured with the compiled build (SPARK_VLLM_CLI=dist, what the
// installed package runs; `npm run build` first) and with the TypeScript sources through tsx (=source, what a
// checkout runs when dist/ is stale), so the table shows what the loader costs.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const ROOT = path.join(__dirname, "..");
const BIN = path.join(ROOT, "bin", "spark-vllm.js");

/** The commands measured: what a user runs on the committed stacks. */
export const CLI_COMMANDS: Array<{ label: string; args: string[] }> = [
    { label: "plan --stack spark", args: ["plan", "--stack", "spark"] },
    { label: "diff --stack spark --set vllm.maxModelLen=65536", args: ["diff", "--stack", "spark", "--set", "vllm.maxModelLen=65536"] },
    { label: "diagnose tests/fixtures/logs/arch-inspect-failed.log", args: ["diagnose", path.join("tests", "fixtures", "logs", "arch-inspect-failed.log")] },
];

export type CliMode = "dist" | "source";

export interface CliRun {
    command: string;
    mode: CliMode;
    seconds: number;
    exitCode: number | null;
}

/** Builds dist/ (npm run build) so the dist runs measure the current sources. */
export function buildDist(): void {
    const r = spawnSync(process.execPath, [path.join(ROOT, "scripts", "build.js")], { cwd: ROOT, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`npm run build failed: ${r.stderr}`);
}

/** One cold start of one command; the exit code is the CLI's verdict (0: done), which the bench checks. */
export function cliOnce(command: { label: string; args: string[] }, mode: CliMode): CliRun {
    const env = { ...process.env, SPARK_VLLM_CLI: mode };
    const t0 = process.hrtime.bigint();
    const r = spawnSync(process.execPath, [BIN, ...command.args], { cwd: ROOT, encoding: "utf8", env, maxBuffer: 64 * 1024 * 1024 });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r.status !== 0) throw new Error(`spark-vllm ${command.label} (${mode}) exited ${r.status}: ${r.stderr.slice(0, 2000)}`);
    if (mode === "dist" && !fs.existsSync(path.join(ROOT, "dist", "bin", "cli.js"))) throw new Error("no dist/ build");
    return { command: command.label, mode, seconds, exitCode: r.status };
}
