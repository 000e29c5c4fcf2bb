// What an update runs (a new SSH key: every remote command is updated, and pulumi-command v1.2.1
// remote/commandController.go Update runs `update` when set, else `create` again), for the commands whose create must
// not run again beside a running cluster. The memory gate: while this cluster's vLLM (or, on a Ray worker, the Ray
// that runs vLLM's workers) runs on the host, it holds the memory the gate would measure, and a measurement would
// refuse the server it gates. The fabric check: vLLM's mp rendezvous holds vllm.masterPort, which the all-reduce
// would bind again (EADDRINUSE). The generated shell, run for real (tests/harness/container-shell.ts).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { plannedResources, COMMAND } from "../../../components/plan/resources";
import { LaunchRecord, RECORDS_DIR, writeRecord } from "../../../components/plan/launches";
import { script } from "../../../components/plan/scripts";
import { resourceNames } from "../../../components/plan/naming";
import { containerShell } from "../../harness/container-shell";
import { rawConfig } from "../../fixtures";

const N = resourceNames();
const startTime = (pid: number) => fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/.*\) /s, "").split(" ")[19];
const checked = (calls: string[]) => calls.some(c => / memory-check /.test(c));
const flushed = (calls: string[]) => calls.some(c => / flush-page-cache /.test(c));

/** A two-host plan whose logDir is inside the container shell's root. */
function planWithLogDir(root: string) {
    const raw = rawConfig(2);
    raw.logDir = path.join(root, "log");
    fs.mkdirSync(raw.logDir);
    return { plan: planCluster(parseSpec(raw)), logDir: raw.logDir };
}

test("memory gate update: a running vLLM on the head is not measured again; a dead or stale one is; create always measures", () => {
    const shell = containerShell();
    const sleeper = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
        const { plan, logDir } = planWithLogDir(shell.root);
        const gate = plan.hosts[0].memoryGate;
        assert.ok(gate.update, "the gate has an update");
        // The head's vLLM as its launch leaves it: the record, and the pid file with the process' start time.
        const pidFile = path.join(logDir, "vllm-serve.pid");
        const records = shell.inside(RECORDS_DIR);
        fs.mkdirSync(records, { recursive: true });
        const record: LaunchRecord = { name: "vllm", argv: ["vllm", "serve", "m"], log: "/x", pidFile };
        assert.equal(shell.run(script(writeRecord(record, records))).status, 0);
        fs.writeFileSync(pidFile, `${sleeper.pid} ${startTime(sleeper.pid!)}\n`);

        const kept = shell.run(gate.update!);
        assert.equal(kept.status, 0, kept.stderr);
        assert.match(kept.stdout, /spark-a: vLLM runs and holds its memory: not measured again \(an update relaunches nothing\)/);
        assert.ok(flushed(kept.calls) && !checked(kept.calls), kept.calls.join("\n"));

        const create = shell.run(gate.create);
        assert.ok(checked(create.calls), "create measures, whatever runs");
        assert.equal(shell.run(gate.create, { pythonExit: 1 }).status, 1, "and fails with the check");

        // A stale pid file (the number reused by another process, another start time): nothing of ours holds the memory.
        fs.writeFileSync(pidFile, `${sleeper.pid} 1\n`);
        const stale = shell.run(gate.update!, { pythonExit: 1 });
        assert.ok(checked(stale.calls), "measured");
        assert.equal(stale.status, 1, "the failed check fails the update");
        fs.writeFileSync(pidFile, `${sleeper.pid} ${startTime(sleeper.pid!)}\n`);
        fs.rmSync(path.join(records, "vllm.json"));
        assert.ok(checked(shell.run(gate.update!).calls), "no record (a launch deleted): measured");
    } finally {
        sleeper.kill("SIGKILL");
        shell.remove();
    }
});

test("memory gate update on a Ray worker: skipped while Ray (vLLM's workers) runs there; an mp worker looks at its own vllm serve", () => {
    const shell = containerShell();
    // A process whose command name is raylet (/proc/PID/comm), as Ray's daemon is.
    const raylet = path.join(shell.root, "raylet");
    fs.copyFileSync("/bin/sleep", raylet);
    fs.chmodSync(raylet, 0o755);
    const daemon = spawn(raylet, ["60"], { stdio: "ignore" });
    try {
        const worker = planCluster(parseSpec(rawConfig(2))).hosts[1].memoryGate;
        const records = shell.inside(RECORDS_DIR);
        fs.mkdirSync(records, { recursive: true });
        assert.ok(checked(shell.run(worker.update!).calls), "no Ray record: measured");
        fs.writeFileSync(path.join(records, "ray.json"), "{}\n");
        const kept = shell.run(worker.update!);
        assert.equal(kept.status, 0, kept.stderr);
        assert.match(kept.stdout, /spark-b: Ray, which runs vLLM's workers here, runs and holds its memory: not measured again/);
        assert.ok(!checked(kept.calls));
        const mp = planCluster(parseSpec({ ...rawConfig(2), vllm: { ...rawConfig(2).vllm, backend: "mp" } })).hosts[1].memoryGate;
        assert.ok(checked(shell.run(mp.update!).calls), "mp: the worker's own vllm serve, not Ray, holds its memory");
    } finally {
        daemon.kill("SIGKILL");
        shell.remove();
    }
});

test("an update script reaches the remote.Command inputs of the memory gates and the proxy's configuration (and generated certificate) only", () => {
    const withUpdate = (edit: (raw: Record<string, any>) => void = () => {}) => {
        const raw = rawConfig(2);
        edit(raw);
        return plannedResources(planCluster(parseSpec(raw))).filter(r => r.type === COMMAND && r.inputs.update !== undefined).map(r => r.name).sort();
    };
    const always = [N.host("spark-a", "memory"), N.host("spark-b", "memory"), N.host("spark-a", "fabric"), N.host("spark-b", "fabric"), N.of("proxy-conf")];
    assert.deepEqual(withUpdate(), always.sort());
    assert.deepEqual(withUpdate(r => (r.endpoint = { tls: "generated" })), [...always, N.of("proxy-tls")].sort());
});

test("fabric rank update: the verdict kept in logDir is reported again without an all-reduce; without one, the check runs unless vLLM runs", () => {
    const shell = containerShell();
    const sleeper = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
        const { plan, logDir } = planWithLogDir(shell.root);
        const rank = plan.hosts[0].fabricRank!;
        const fresh = shell.run(rank.update!);
        assert.equal(fresh.status, 0, fresh.stderr);
        assert.ok(fresh.calls.some(c => / fabric-check /.test(c)), "no verdict: the check runs");
        const verdict = JSON.stringify({ host: "spark-a", rank: 0, transport: "NET/Socket" });
        fs.writeFileSync(path.join(logDir, "fabric-rank0.json"), `${verdict}\n`);
        const again = shell.run(rank.update!);
        assert.equal(again.status, 0, again.stderr);
        assert.deepEqual(again.calls, [], "no all-reduce");
        assert.equal(again.stdout.trim().split("\n").pop(), verdict, "the verdict is the last line, as components/fabricCheck.ts reads it");
        assert.match(again.stdout, /^fabric: spark-a: proven when the cluster was launched; an update relaunches nothing, so the same verdict:$/m);
        assert.ok(shell.run(rank.create).calls.some(c => / fabric-check /.test(c)), "create always checks");
        assert.equal(shell.run(rank.delete!).status, 0);
        assert.deepEqual(fs.readdirSync(logDir), [], "the delete removes the verdict with the logs");
        // No verdict (launched by a spark-vllm that kept none) while this cluster's vLLM runs here: not measured.
        const records = shell.inside(RECORDS_DIR);
        fs.mkdirSync(records, { recursive: true });
        fs.writeFileSync(path.join(records, "vllm.json"), "{}\n");
        fs.writeFileSync(path.join(logDir, "vllm-serve.pid"), `${sleeper.pid} ${startTime(sleeper.pid!)}\n`);
        const running = shell.run(rank.update!);
        assert.equal(running.status, 0, running.stderr);
        assert.deepEqual(running.calls, [], "no all-reduce beside the running vLLM");
        assert.deepEqual(JSON.parse(running.stdout.trim().split("\n").pop()!), { host: "spark-a", rank: 0, notMeasured: "vLLM runs on the fabric; an update relaunches nothing" });
    } finally {
        sleeper.kill("SIGKILL");
        shell.remove();
    }
});
