// `npm run bench -- --only diagnose`: root-cause finding stays linear in the log's size (issue 13).
//
// Every input is 2 MB. The single-line ones are shaped to make a pattern scan the rest of its line from each
// of its starts (quadratic without components/knowledge/diagnosis.ts maxLineChars: minutes); each must be diagnosed in
// under BUDGET_MS, or the bench fails. The many-line ones fill every line to the cap with such text: the
// worst a cut line can cost, for the record. The Python twin (components/hostProgram/spark_vllm/diagnosis.py,
// which runs on the hosts) is timed on the same inputs when python3 is here. No root, no sim, a few seconds.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { diagnose, maxLineChars } from "../components/knowledge/diagnosis";
import { machine, markdown, Row, summarize } from "./lib";

const ROOT = path.join(__dirname, "..");
const SIZE = 2 * 1024 * 1024;
/** Each 2 MB single-line input is diagnosed within this (issue 13). */
export const BUDGET_MS = 1000;

const fill = (unit: string, n: number) => unit.repeat(Math.ceil(n / unit.length)).slice(0, n);
const manyLines = (unit: string) => {
    const line = fill(unit, maxLineChars - 1);
    return Array(Math.floor(SIZE / (line.length + 1))).fill(line).join("\n");
};

interface Input {
    name: string;
    log: string;
    /** Held to BUDGET_MS. */
    budget: boolean;
    /** The kind it must still find, if any. */
    kind?: string;
    note: string;
}

function inputs(): Input[] {
    const realError = fs.readFileSync(path.join(ROOT, "tests", "fixtures", "logs", "kv-cache-insufficient.log"), "utf8");
    const uncut = `< ${BUDGET_MS} ms; minutes if lines are not cut at maxLineChars (${maxLineChars})`;
    const atCap = "for the record: every line as long as the cap lets a pattern scan; grows with the cap squared";
    return [
        { name: "one line of blanks (trailing-blank strip)", log: "x" + " ".repeat(SIZE - 2) + "x", budget: true, note: uncut },
        { name: "one line of unterminated OSC escapes (ESC ])", log: fill("\x1b]", SIZE), budget: true, note: `< ${BUDGET_MS} ms; quadratic if the OSC body is unbounded` },
        { name: "one line of `Model architectures [` without `]`", log: fill("Model architectures [", SIZE), budget: true, note: uncut },
        { name: "one line of `Free memory on device` without the rest", log: fill("Free memory on device ", SIZE), budget: true, note: uncut },
        { name: "one line of one letter", log: fill("a", SIZE), budget: true, note: uncut },
        { name: "a real failure log whose last line is 2 MB", log: realError + fill("y", SIZE - realError.length), budget: true, kind: "kv-cache-insufficient",
            note: `< ${BUDGET_MS} ms, and still kv-cache-insufficient` },
        { name: "full lines of `Model architectures [`", log: manyLines("Model architectures ["), budget: false, note: atCap },
        { name: "full lines of `Free memory on device`", log: manyLines("Free memory on device "), budget: false, note: atCap },
    ];
}

function timeTs(log: string, runs: number): number[] {
    const ms: number[] = [];
    for (let i = 0; i < runs; i++) {
        const t0 = process.hrtime.bigint();
        diagnose(log);
        ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return ms;
}

/** Milliseconds per run of the Python twin on each input; undefined when python3 or the module cannot run here. */
function timePython(logs: string[], runs: number, dir: string): number[][] | undefined {
    const dataFile = path.join(dir, "data.json");
    const data = spawnSync(process.execPath, ["--import", "tsx", "-e", "process.stdout.write(JSON.stringify(require('./components/plan/toolsProgram').toolsData()))"],
        { cwd: ROOT, encoding: "utf8", maxBuffer: 64 << 20 });
    if (data.status !== 0) return undefined;
    fs.writeFileSync(dataFile, data.stdout);
    const logsFile = path.join(dir, "logs.json");
    fs.writeFileSync(logsFile, JSON.stringify(logs));
    const script = [
        "import json, sys, time",
        "from spark_vllm.diagnosis import diagnose",
        "out = []",
        "for log in json.load(open(sys.argv[1])):",
        "    ms = []",
        `    for _ in range(${runs}):`,
        "        t = time.perf_counter(); diagnose(log); ms.append((time.perf_counter() - t) * 1000)",
        "    out.append(ms)",
        "print(json.dumps(out))",
    ].join("\n");
    const run = spawnSync("python3", ["-c", script, logsFile], {
        cwd: path.join(ROOT, "components", "hostProgram"),
        encoding: "utf8",
        env: { ...process.env, SPARK_VLLM_DATA_FILE: dataFile },
        timeout: 600_000,
    });
    return run.status === 0 ? (JSON.parse(run.stdout) as number[][]) : undefined;
}

export async function diagnoseBench(opts: { quick: boolean; outDir?: string }): Promise<void> {
    const runs = opts.quick ? 1 : 5;
    const m = machine();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-diagnose-"));
    try {
        const all = inputs();
        const ts = all.map(input => summarize(timeTs(input.log, runs)));
        const py = timePython(all.map(input => input.log), runs, dir);
        const rows: Row[] = [];
        all.forEach((input, i) => {
            rows.push({ figure: `diagnose (TypeScript), 2 MB: ${input.name}`, value: ts[i], unit: "ms", note: input.note });
            if (py) rows.push({ figure: `diagnose (Python twin), 2 MB: ${input.name}`, value: summarize(py[i]), unit: "ms", note: "the helper on the hosts; the same cap" });
        });
        m.loadAverage.end = Math.round(os.loadavg()[0] * 100) / 100;
        const command = `npm run bench -- --only diagnose${opts.quick ? " --quick" : ""}`;
        const md = markdown("spark-vllm benchmark: diagnose", m, command, rows, py ? [] : ["The Python twin was not timed: python3 or its modules could not run here."]);
        process.stdout.write(md);
        if (opts.outDir) {
            fs.mkdirSync(opts.outDir, { recursive: true });
            fs.writeFileSync(path.join(opts.outDir, "diagnose.json"), JSON.stringify({ command, machine: m, maxLineChars, budgetMs: BUDGET_MS, rows }, null, 2) + "\n");
            fs.writeFileSync(path.join(opts.outDir, "diagnose.md"), md);
        }
        const slow = all.flatMap((input, i) => (input.budget && ts[i].median >= BUDGET_MS ? [`${input.name}: ${ts[i].median} ms`] : []));
        if (slow.length) throw new Error(`diagnose took ${BUDGET_MS} ms or more on a 2 MB log: ${slow.join("; ")}`);
        const wrong = all.flatMap(input => (input.kind && diagnose(input.log)?.kind !== input.kind ? [`${input.name}: not ${input.kind}`] : []));
        if (wrong.length) throw new Error(`diagnose lost the root cause: ${wrong.join("; ")}`);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}
