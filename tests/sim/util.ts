// Small process helpers for the simulated hosts (root-only test bed).
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

export interface RunResult { code: number; stdout: string; stderr: string }

export interface RunOptions {
    env?: NodeJS.ProcessEnv;
    input?: string | Buffer;
    timeoutMs?: number;
    cwd?: string;
}

/** Runs argv (no shell) and collects its output; never throws for a non-zero exit. */
export function run(argv: string[], opts: RunOptions = {}): Promise<RunResult> {
    return new Promise((resolve, reject) => {
        const child = spawn(argv[0], argv.slice(1), {
            env: opts.env ?? process.env,
            cwd: opts.cwd,
            stdio: ["pipe", "pipe", "pipe"],
        });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        let timer: NodeJS.Timeout | undefined;
        if (opts.timeoutMs) {
            timer = setTimeout(() => { try { child.kill("SIGKILL"); } catch { /* gone */ } }, opts.timeoutMs);
        }
        child.stdout.on("data", d => out.push(d));
        child.stderr.on("data", d => err.push(d));
        child.on("error", e => { if (timer) clearTimeout(timer); reject(e); });
        child.on("close", (code, signal) => {
            if (timer) clearTimeout(timer);
            resolve({
                code: code ?? (signal ? 128 + (signalNumber(signal) ?? 0) : 1),
                stdout: Buffer.concat(out).toString(),
                stderr: Buffer.concat(err).toString(),
            });
        });
        child.stdin.on("error", () => { /* child may exit before reading */ });
        child.stdin.end(opts.input ?? "");
    });
}

function signalNumber(s: NodeJS.Signals): number | undefined {
    return ({ SIGKILL: 9, SIGTERM: 15, SIGINT: 2 } as Record<string, number>)[s];
}

/** Like run() but throws with the command, exit code and stderr when it fails. */
export async function must(argv: string[], opts: RunOptions = {}): Promise<string> {
    const r = await run(argv, opts);
    if (r.code !== 0) {
        throw new Error(`command failed (exit ${r.code}): ${argv.join(" ")}\n${(r.stderr || r.stdout).trim()}`);
    }
    return r.stdout;
}

/** Runs a bash script. */
export function sh(script: string, opts: RunOptions = {}): Promise<RunResult> {
    return run(["/bin/bash", "-c", script], opts);
}

export async function mustSh(script: string, opts: RunOptions = {}): Promise<string> {
    const r = await sh(script, opts);
    if (r.code !== 0) throw new Error(`script failed (exit ${r.code}):\n${script}\n${(r.stderr || r.stdout).trim()}`);
    return r.stdout;
}

/** Starts a long-running daemon detached from us (own session), output to logFile; returns its PID. */
export function spawnDaemon(argv: string[], logFile: string, env: NodeJS.ProcessEnv): number {
    const fd = fs.openSync(logFile, "a");
    try {
        const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: ["ignore", fd, fd], env });
        child.unref();
        if (!child.pid) throw new Error(`could not start ${argv.join(" ")}`);
        return child.pid;
    } finally {
        fs.closeSync(fd);
    }
}

export function alive(pid: number | undefined): boolean {
    if (!pid) return false;
    try {
        process.kill(pid, 0);
    } catch {
        return false;
    }
    // A zombie is not alive for our purposes.
    try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
        const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
        return state !== "Z" && state !== "X";
    } catch {
        return false;
    }
}

export function cmdline(pid: number): string {
    try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
    } catch {
        return "";
    }
}

export const sleep = (ms: number) => new Promise<void>(r => setTimeout(r, ms));

/** SIGTERM, wait up to graceMs, then SIGKILL; only if the PID's command line still contains `expect`. */
export async function stopPid(pid: number | undefined, expect: string, graceMs = 10_000): Promise<void> {
    if (!pid || !alive(pid) || !cmdline(pid).includes(expect)) return;
    try { process.kill(pid, "SIGTERM"); } catch { return; }
    const until = Date.now() + graceMs;
    while (Date.now() < until) {
        if (!alive(pid)) return;
        await sleep(100);
    }
    try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
    for (let i = 0; i < 50 && alive(pid); i++) await sleep(100);
}

export async function waitFor(what: string, fn: () => Promise<boolean>, timeoutMs: number, everyMs = 200): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
        if (await fn()) return;
        if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await sleep(everyMs);
    }
}

/**
 * Takes an exclusive flock(1) on `file` (created if missing) and returns its release. The lock is held by a child
 * `flock` process for as long as its stdin is open, so the kernel releases it when this process dies, however it dies:
 * a crashed run never leaves a stale lock behind.
 */
export function holdLock(file: string, timeoutMs: number): Promise<() => Promise<void>> {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    return new Promise((resolve, reject) => {
        const child = spawn("flock", ["--exclusive", "--timeout", String(Math.ceil(timeoutMs / 1000)), file,
            "/bin/sh", "-c", "echo locked; exec cat >/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
        let out = "";
        let err = "";
        let held = false;
        const exited = new Promise<void>(r => child.once("close", () => r()));
        child.stderr.on("data", d => { err += d; });
        child.stdout.on("data", d => {
            out += d;
            if (!held && out.includes("locked\n")) {
                held = true;
                resolve(async () => { child.stdin.end(); await exited; });
            }
        });
        child.once("error", reject);
        child.once("close", code => { if (!held) reject(new Error(`could not lock ${file} within ${timeoutMs} ms (flock exit ${code}) ${err.trim()}`)); });
    });
}
