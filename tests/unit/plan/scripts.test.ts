// The generated launch/stop shell, run for real: a stop signals only the process the launch started.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { detachedLaunch, script, stopByPidFile } from "../../../components/plan/scripts";

const bash = (body: string) => spawnSync("bash", ["-c", body], { encoding: "utf8" });
/** Running, not a zombie (a killed child of this test stays a zombie until reaped, and kill -0 still finds it). */
function alive(pid: number): boolean {
    try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]);
    } catch { return false; }
}

function withDir(fn: (dir: string) => void) {
    const dir = mkdtempSync(path.join(tmpdir(), "spark-vllm-scripts-"));
    try { fn(dir); } finally { rmSync(dir, { recursive: true, force: true }); }
}

test("a launch records pid and start time; its stop ends that process and removes the file", () => withDir(dir => {
    const pidFile = path.join(dir, "x.pid"), log = path.join(dir, "x.log");
    const launched = bash(script(detachedLaunch(["sleep", "300"], log, pidFile)));
    assert.equal(launched.status, 0, launched.stderr);
    const [pid, started] = readFileSync(pidFile, "utf8").trim().split(" ");
    assert.match(started, /^[0-9]+$/, "the start time is recorded");
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    assert.equal(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19], started, "field 22 of /proc/PID/stat");
    assert.ok(alive(Number(pid)));
    const stopped = bash(script(stopByPidFile(pidFile, 5)));
    assert.equal(stopped.status, 0, stopped.stderr);
    assert.ok(!alive(Number(pid)), "the launched process is gone");
    assert.equal(bash(`test -e '${pidFile}'`).status, 1, "the pid file is removed");
}));

test("a stale pid file naming another live process never signals it", () => withDir(dir => {
    const pidFile = path.join(dir, "x.pid");
    const other = spawn("sleep", ["300"], { stdio: "ignore" });
    try {
        // The pid a replaced container's launch wrote, now reused by an unrelated process: same number, other start.
        writeFileSync(pidFile, `${other.pid} 1\n`);
        const stopped = bash(script(stopByPidFile(pidFile, 1)));
        assert.equal(stopped.status, 0, stopped.stderr);
        assert.ok(alive(other.pid!), "the unrelated process still runs");
        assert.equal(bash(`test -e '${pidFile}'`).status, 1, "the stale file is removed");
        // A file from before start times were recorded (a bare pid) is stale too.
        writeFileSync(pidFile, `${other.pid}\n`);
        assert.equal(bash(script(stopByPidFile(pidFile, 1))).status, 0);
        assert.ok(alive(other.pid!), "a bare pid is never signalled");
    } finally {
        other.kill("SIGKILL");
    }
}));

test("a stop with no pid file, or garbage in it, succeeds and signals nothing", () => withDir(dir => {
    const pidFile = path.join(dir, "x.pid");
    assert.equal(bash(script(stopByPidFile(pidFile, 1))).status, 0);
    writeFileSync(pidFile, "-1 5\n");
    assert.equal(bash(script(stopByPidFile(pidFile, 1))).status, 0);
}));
