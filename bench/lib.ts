// Pure helpers of the benchmark: summaries, the critical path of a run, the machine, the table.
import * as os from "node:os";
import type { Op, Report } from "../tests/engine/engine";

/** One figure over several runs. */
export interface Summary {
    median: number;
    min: number;
    max: number;
    runs: number[];
}

export function summarize(values: number[]): Summary {
    if (values.length === 0) throw new Error("no runs to summarize");
    const s = [...values].sort((a, b) => a - b);
    const mid = Math.floor(s.length / 2);
    const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
    return { median: round(median), min: round(s[0]), max: round(s[s.length - 1]), runs: values.map(v => round(v)) };
}

export const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

/** A host name in an op name becomes `<host>`, so chains on 2 and on 4 hosts compare. */
export function stepKind(name: string, hosts: string[]): string {
    let kind = name;
    for (const h of hosts) kind = kind.split(`-${h}-`).join("-<host>-");
    return kind;
}

export interface CriticalPath {
    /** Op names, first to last. */
    chain: string[];
    /** The same with host names replaced by `<host>`. */
    kinds: string[];
    steps: number;
    /** Each step's duration in seconds, in chain order. */
    stepSeconds: number[];
    /** Sum of the chain's op durations (time spent in remote steps on the path). */
    busySeconds: number;
    /** Time between one step's end and the next one's start along the chain (engine scheduling). */
    gapSeconds: number;
    /** From the first step's start to the last step's end. */
    spanSeconds: number;
}

/**
 * The critical path of a run, from the ops' times (see docs/benchmarks.md).
 *
 * The engine registers a resource only once every input and `dependsOn` it waits for has
 * resolved, so each op starts just after the dependency that held it back has ended. Walking
 * back from the op that ends last, the predecessor of an op is the op that ended last no later
 * than it started. Ops that ran nothing on a host (providers, the generated API key: zero
 * actions, zero duration) are not steps.
 */
export function criticalPath(report: Report, hosts: string[]): CriticalPath {
    const steps = report.ops.filter(o => o.actions > 0 && o.op !== "same" && o.op !== "delete");
    if (steps.length === 0) return { chain: [], kinds: [], steps: 0, stepSeconds: [], busySeconds: 0, gapSeconds: 0, spanSeconds: 0 };
    const byEnd = [...steps].sort((a, b) => a.endMs - b.endMs || a.startMs - b.startMs);
    const chain: Op[] = [byEnd[byEnd.length - 1]];
    for (;;) {
        const cur = chain[0];
        const before = byEnd.filter(o => o !== cur && o.endMs <= cur.startMs);
        if (before.length === 0) break;
        chain.unshift(before[before.length - 1]);
    }
    const busy = chain.reduce((n, o) => n + (o.endMs - o.startMs), 0);
    const gaps = chain.slice(1).reduce((n, o, i) => n + (o.startMs - chain[i].endMs), 0);
    return {
        chain: chain.map(o => o.name),
        kinds: chain.map(o => stepKind(o.name, hosts)),
        steps: chain.length,
        stepSeconds: chain.map(o => round((o.endMs - o.startMs) / 1000)),
        busySeconds: round(busy / 1000),
        gapSeconds: round(gaps / 1000),
        spanSeconds: round((chain[chain.length - 1].endMs - chain[0].startMs) / 1000),
    };
}

/** Remote commands and docker operations a run performed, and what it did to which resource. */
export function work(report: Report): { actions: number; replaced: string[]; updated: string[]; created: string[]; deleted: string[] } {
    const names = (kind: string) => report.ops.filter(o => o.op === kind).map(o => o.name).sort();
    return {
        actions: report.ops.reduce((n, o) => n + o.actions, 0),
        replaced: names("replace"),
        updated: names("update"),
        created: names("create"),
        deleted: names("delete"),
    };
}

export interface Machine {
    cpus: number;
    cpuModel: string;
    memoryGiB: number;
    kernel: string;
    os: string;
    node: string;
    date: string;
    /** 1-minute load average when the bench started and ended: other work on the machine skews timings. */
    loadAverage: { start: number; end?: number };
}

export function machine(): Machine {
    let osName = `${os.type()} ${os.release()}`;
    try {
        const rel = require("node:fs").readFileSync("/etc/os-release", "utf8") as string;
        osName = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(rel)?.[1] ?? osName;
    } catch { /* keep the kernel's name */ }
    return {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model?.trim() ?? "unknown",
        memoryGiB: round(os.totalmem() / 2 ** 30, 1),
        kernel: os.release(),
        os: osName,
        node: process.version,
        date: new Date().toISOString(),
        loadAverage: { start: round(os.loadavg()[0], 2) },
    };
}

/** A row of the Markdown table. */
export interface Row {
    figure: string;
    value: Summary | string | number;
    unit: string;
    /** What the figure should be, and what moves it. */
    note: string;
}

export const fmt = (x: number) => (Number.isInteger(x) ? String(x) : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

export function cell(value: Row["value"]): { median: string; range: string; runs: string } {
    if (typeof value === "object") return { median: fmt(value.median), range: `${fmt(value.min)} – ${fmt(value.max)}`, runs: String(value.runs.length) };
    return { median: typeof value === "number" ? fmt(value) : value, range: "", runs: "" };
}

export function markdown(title: string, m: Machine, command: string, rows: Row[], extra: string[] = []): string {
    const lines = [
        `# ${title}`,
        "",
        `Command: \`${command}\``,
        "",
        `Machine: ${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB memory, kernel ${m.kernel}, ${m.os}, Node ${m.node}; ` +
            `${m.date}; load average ${m.loadAverage.start} at the start, ${m.loadAverage.end ?? "?"} at the end.`,
        "",
        "| figure | median | min – max | runs | unit | expected; what moves it |",
        "| --- | ---: | ---: | ---: | --- | --- |",
        ...rows.map(r => {
            const c = cell(r.value);
            return `| ${r.figure} | ${c.median} | ${c.range} | ${c.runs} | ${r.unit} | ${r.note} |`;
        }),
        ...(extra.length ? ["", ...extra] : []),
        "",
    ];
    return lines.join("\n");
}

// ---------------------------------------------------------------- what was measured

/** The files that make up what the bench measures: the program and the test bed it runs on. */
export const MEASURED_PATHS = ["index.ts", "components", "package.json", "tests/engine", "tests/grpc", "policies", "tests/harness", "tests/sim", "tests/fixtures.ts"];

/**
 * A hash of the measured files' contents. Another engineer editing the program in the same
 * checkout during a run would mix two programs in one result; the bench compares this before
 * and after every step and stops if it changed.
 */
export function fingerprint(root: string): string {
    const fs = require("node:fs") as typeof import("node:fs");
    const path = require("node:path") as typeof import("node:path");
    const hash = require("node:crypto").createHash("sha256");
    const walk = (rel: string): void => {
        const abs = path.join(root, rel);
        if (!fs.existsSync(abs)) return;
        const st = fs.statSync(abs);
        if (st.isDirectory()) {
            for (const e of fs.readdirSync(abs).sort()) if (e !== "node_modules" && e !== "__pycache__" && !e.startsWith(".")) walk(path.join(rel, e));
        } else if (st.isFile()) {
            hash.update(rel + "\0");
            hash.update(fs.readFileSync(abs));
        }
    };
    MEASURED_PATHS.forEach(walk);
    return hash.digest("hex").slice(0, 16);
}

/** The commit the checkout is at, and the measured paths that differ from it (if this is a git checkout). */
export function source(root: string): { commit?: string; changedFromCommit?: string[]; fingerprint: string } {
    const { spawnSync } = require("node:child_process") as typeof import("node:child_process");
    const git = (args: string[]) => spawnSync("git", args, { cwd: root, encoding: "utf8" });
    const head = git(["rev-parse", "HEAD"]);
    const fp = fingerprint(root);
    if (head.status !== 0) return { fingerprint: fp };
    const status = git(["status", "--porcelain", "--", ...MEASURED_PATHS]);
    return {
        commit: head.stdout.trim(),
        changedFromCommit: status.stdout.split("\n").filter(Boolean).map(l => l.slice(3)),
        fingerprint: fp,
    };
}
