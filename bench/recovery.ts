// `npm run bench -- --only recovery`: seconds from a fault to serving again, without `pulumi up` (issue 15).
// It runs the end-to-end recovery scenarios (tests/e2e/recovery.test.ts: vLLM killed, a raylet killed, the worker
// and the head power-cycled) on the simulated Sparks, under the machine's one sim lock, --runs times, and reports
// each scenario's median, min and max. Needs root. results.json and results.md go to --out (default a temp dir).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Row, machine, markdown, round, summarize } from "./lib";

const ROOT = path.join(__dirname, "..");
export const RECOVERY_SCENARIOS: Record<string, string> = {
    vllmKilled: "vLLM killed (SIGKILL) on the head → serving",
    rayletKilled: "the worker's raylet killed → serving",
    workerRebooted: "worker power-cycled: host back → serving",
    headRebooted: "head power-cycled: host back → serving",
};

export function recoveryBench(opts: { runs: number; outDir?: string; command: string }): void {
    if (process.getuid?.() !== 0) throw new Error("the recovery bench needs root for the simulated hosts (network namespaces, dockerd, sshd)");
    const outDir = opts.outDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-recovery-"));
    fs.mkdirSync(outDir, { recursive: true });
    const m = machine();
    const runs: Array<Record<string, number>> = [];
    for (let i = 0; i < opts.runs; i++) {
        const file = path.join(outDir, `recovery-run${i + 1}.json`);
        fs.rmSync(file, { force: true });
        const r = spawnSync("flock", ["/tmp/spark-sim.lock", process.execPath, "--import", "tsx", "--test", "--test-concurrency=1",
            "--test-timeout=1800000", "tests/e2e/recovery.test.ts"], {
            cwd: ROOT, stdio: "inherit", env: { ...process.env, SPARK_VLLM_RECOVERY_RESULT: file },
        });
        if (r.status !== 0 || !fs.existsSync(file)) throw new Error(`recovery run ${i + 1} failed (exit ${r.status}); its output is above`);
        runs.push(JSON.parse(fs.readFileSync(file, "utf8")));
    }
    const summary = Object.fromEntries(Object.keys(RECOVERY_SCENARIOS).map(k => [k, summarize(runs.map(r => r[k]))]));
    const rows: Row[] = Object.entries(RECOVERY_SCENARIOS).map(([k, figure]) => ({
        figure, value: summary[k], unit: "s",
        note: "supervisor pass 2 s, back-off, Ray node death after missed heartbeats, the stand-in's load time; no `up`",
    }));
    m.loadAverage.end = round(os.loadavg()[0], 2);
    fs.writeFileSync(path.join(outDir, "results.json"), JSON.stringify({ command: opts.command, machine: m, recovery: summary, runs }, null, 2) + "\n");
    const md = markdown("spark-vllm benchmarks: recovery without `up`", m, opts.command, rows);
    fs.writeFileSync(path.join(outDir, "results.md"), md);
    process.stdout.write(md);
}
