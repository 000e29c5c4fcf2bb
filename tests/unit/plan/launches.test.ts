import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { withPythonPath } from "../../../components/plan/hostCommands";
import { plannedResources, CONTAINER } from "../../../components/plan/resources";
import { API_KEY_FILE, LaunchRecord, RECORDS_DIR, installApiKey, keepIfSame, lockRecords, ncclGidExec, pidFileRunning, removeRecord, writeRecord } from "../../../components/plan/launches";
import { toolsPath } from "../../../components/plan/toolsProgram";
import { script } from "../../../components/plan/scripts";
import { rawConfig } from "../../fixtures";
import { containerShell } from "../../harness/container-shell";
import { testTempDir } from "../../tempDir";

const plan = (n: number, mutate: (raw: Record<string, any>) => void = () => {}) => {
    const raw = rawConfig(n);
    mutate(raw);
    return planCluster(parseSpec(raw));
};
const bash = (body: string, input = "") => spawnSync("bash", ["-c", body], { input, encoding: "utf8" });
const tmp = () => testTempDir("launches");
/** The record a launch's create writes (the JSON in its printf line). */
const recordIn = (create: string): LaunchRecord => {
    const m = /printf '"'"'%s\\n'"'"' '"'"'(\{"name":[^\n]*\})'"'"' > /.exec(create);
    assert.ok(m, "the launch writes a record");
    return JSON.parse(m![1]);
};

test("every vLLM container runs the supervisor as its main process and restarts with the host's dockerd", () => {
    const p = plan(2);
    for (const h of p.hosts) {
        assert.deepEqual(h.container.entrypoint.slice(0, 2), ["/bin/sh", "-c"]);
        // Only the program whose sha256 is pinned in the container (tests/unit/plan/entrypoint-pin.test.ts).
        assert.ok(h.container.entrypoint[2].endsWith(` /var/tmp/spark-vllm/spark_vllm_tools.py /var/lib/spark-vllm/tools.sha256 supervise "$1"; fi; sleep 5; done`), h.container.entrypoint[2]);
        assert.deepEqual(JSON.parse(h.container.command[0]), { dir: RECORDS_DIR, memoryFloorBytes: 4 * 2 ** 30 });
    }
    const containers = plannedResources(p).filter(r => r.type === CONTAINER);
    assert.equal(containers.length, 3, "two vLLM containers and the proxy");
    for (const c of containers) assert.equal((c.inputs as { restart: string }).restart, "unless-stopped", c.name);
});

test("the records: the exact argv, in order (Ray, then vLLM once every node is back), never a secret", () => {
    const p = plan(2);
    const head = recordIn(p.hosts[0].rayLaunch!.create);
    const worker = recordIn(p.hosts[1].rayLaunch!.create);
    // Each Ray start with its own host's NCCL_IB_GID_INDEX, read when it starts (tests/unit/plan/gid-index.test.ts).
    assert.deepEqual(head.argv, ncclGidExec(toolsPath(p.spec), p.spec.hosts[0], p.hosts[0].rayStartArgv!));
    assert.equal(head.process, "gcs_server");
    assert.equal(head.gate, undefined);
    assert.deepEqual(worker.argv, ncclGidExec(toolsPath(p.spec), p.spec.hosts[1], p.hosts[1].rayStartArgv!));
    assert.equal(worker.process, "raylet");
    assert.deepEqual(worker.gate, { tcp: "198.18.1.2:6379" });
    const vllm = recordIn(p.vllmLaunch.create);
    // The head's vLLM with logDir first on PYTHONPATH, to import its key guard from the helper program.
    assert.deepEqual(vllm.argv, withPythonPath(p.spec.logDir, p.vllmServeArgv));
    assert.deepEqual(vllm.argv.slice(0, 4), ["sh", "-c", 'PYTHONPATH="$0${PYTHONPATH:+:$PYTHONPATH}" exec "$@"', "/var/tmp/spark-vllm"]);
    assert.deepEqual(vllm.after, ["ray"]);
    assert.deepEqual(vllm.secretEnv, { VLLM_API_KEY: API_KEY_FILE });
    assert.equal(vllm.healthUrl, "http://127.0.0.1:8001/health");
    const gate = vllm.gate as { argv: string[] };
    assert.equal(gate.argv[2], "ray-probe");
    assert.deepEqual(JSON.parse(gate.argv[3]).nodes.map((n: { address: string }) => n.address), ["198.18.1.2", "198.18.1.3"]);
    // Written after the process started, so the supervisor never races a first start.
    assert.ok(p.vllmLaunch.create.indexOf("setsid sh -c") < p.vllmLaunch.create.lastIndexOf('"name":"vllm"'));
    assert.ok(p.hosts[1].rayLaunch!.create.indexOf("' ray start --address") < p.hosts[1].rayLaunch!.create.lastIndexOf('"name":"ray"'));
    // Deletes remove the record before they stop anything.
    assert.ok(p.vllmLaunch.delete!.indexOf("vllm.json") < p.vllmLaunch.delete!.indexOf("kill -TERM"));
    assert.ok(p.hosts[0].rayLaunch!.delete!.indexOf("ray.json") < p.hosts[0].rayLaunch!.delete!.indexOf("ray stop --force"));
    // The plan never holds a secret's value; a record names the file a secret is in, never a flag or variable with it.
    for (const r of [head, worker, vllm]) {
        assert.ok(!r.argv.some(a => /^--api-key|RAY_AUTH_TOKEN=/.test(a)), r.name);
        assert.ok(Object.values(r.secretEnv ?? {}).every(v => v.startsWith("/var/lib/spark-vllm/")), r.name);
    }
});

test("mp: every host's vllm serve is recorded; headless workers are proven by running, not by /health", () => {
    const p = plan(2, raw => { raw.vllm.backend = "mp"; });
    const head = recordIn(p.vllmLaunch.create);
    const worker = recordIn(p.hosts[1].vllmLaunch!.create);
    assert.equal(head.after, undefined);
    assert.equal(head.gate, undefined);
    assert.ok(worker.argv.includes("--headless"));
    // Only the head serves HTTP: only its vLLM loads the key guard.
    assert.ok(head.argv.includes("spark_vllm_tools.SparkVllmKeyGuard"));
    assert.deepEqual(worker.argv, ncclGidExec(toolsPath(p.spec), p.spec.hosts[1], p.hosts[1].vllmServeArgv!));
    assert.ok(!worker.argv.includes("--middleware"));
    assert.equal(worker.secretEnv, undefined);
    assert.equal(worker.provenAfterSeconds, 60);
});

test("records, lock and API key file behave in bash as the supervisor reads them", async () => {
    const dir = tmp();
    const rec: LaunchRecord = { name: "vllm", argv: ["vllm", "serve", "it's quoted"], log: "/x/log", pidFile: "/x/pid" };
    fs.writeFileSync(path.join(dir, "vllm.proven"), "old\n");
    const w = bash(script([...lockRecords(dir), ...writeRecord(rec, dir)]));
    assert.equal(w.status, 0, w.stderr);
    assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, "vllm.json"), "utf8")), rec);
    assert.ok(!fs.existsSync(path.join(dir, "vllm.proven")), "a new launch is not proven by the old one");
    assert.equal((fs.statSync(dir).mode & 0o777).toString(8), "700");
    // While one holder has the lock, another cannot take it.
    // The holder keeps the lock until it is killed below (its sleep only outlasts the test).
    const holder = spawn("bash", ["-c", script([...lockRecords(dir), "echo locked", "sleep 30"])], { stdio: ["ignore", "pipe", "ignore"] });
    try {
        await new Promise<void>((resolve, reject) => {
            let out = "";
            holder.stdout!.on("data", d => { out += d; if (out.includes("locked")) resolve(); });
            holder.once("exit", code => reject(new Error(`the lock holder exited (${code}) before it took the lock`)));
        });
        const other = bash(`exec 9>>${dir}/.lock; flock -n 9`);
        assert.notEqual(other.status, 0, "the lock is held");
    } finally {
        holder.kill("SIGKILL");
    }
    assert.equal(bash(script(removeRecord("vllm", dir))).status, 0);
    assert.ok(!fs.existsSync(path.join(dir, "vllm.json")));
    const keyFile = path.join(dir, "secrets", "api_key");
    const k = bash(script([...installApiKey(keyFile), 'echo "env=$VLLM_API_KEY"']), "sk-test\n");
    assert.equal(k.status, 0, k.stderr);
    assert.match(k.stdout, /env=sk-test/);
    assert.equal(fs.readFileSync(keyFile, "utf8"), "sk-test\n");
    assert.equal((fs.statSync(keyFile).mode & 0o777).toString(8), "600");
    assert.notEqual(bash(script(installApiKey(keyFile)), "").status, 0, "no key on stdin is refused");
});

test("idempotent by content: the same launch, running, with the same secret, is kept; any difference replaces it", () => {
    const dir = tmp();
    const pidFile = path.join(dir, "vllm.pid");
    const keyFile = path.join(dir, "api_key");
    const rec: LaunchRecord = { name: "vllm", argv: ["vllm", "serve", "m"], log: path.join(dir, "log"), pidFile };
    const sleeper = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
        const started = fs.readFileSync(`/proc/${sleeper.pid}/stat`, "utf8").replace(/.*\) /s, "").split(" ")[19];
        fs.writeFileSync(pidFile, `${sleeper.pid} ${started}\n`);
        fs.writeFileSync(keyFile, "sk-1\n");
        assert.equal(bash(script(writeRecord(rec, dir))).status, 0);
        const launch = (r: LaunchRecord, key: string) => bash(script([
            "set -e", `old_key=$(cat ${keyFile} 2>/dev/null || true)`, ...installApiKey(keyFile),
            ...keepIfSame(r, { dir, running: pidFileRunning(pidFile), secret: { variable: "old_key", file: keyFile } }),
            "echo replaced",
        ]), `${key}\n`);
        const same = launch(rec, "sk-1");
        assert.equal(same.status, 0, same.stderr);
        assert.match(same.stdout, /vllm already runs as this launch declares it; kept/);
        assert.doesNotMatch(same.stdout, /replaced/);
        assert.match(launch({ ...rec, argv: ["vllm", "serve", "other"] }, "sk-1").stdout, /^replaced$/m, "another argv is replaced");
        assert.match(launch(rec, "sk-2").stdout, /^replaced$/m, "another key is replaced");
        fs.writeFileSync(keyFile, "sk-1\n");
        fs.writeFileSync(path.join(dir, "vllm.failed"), "x\n");
        assert.match(launch(rec, "sk-1").stdout, /^replaced$/m, "a launch the supervisor gave up on is replaced");
        fs.rmSync(path.join(dir, "vllm.failed"));
        sleeper.kill("SIGKILL");
        spawnSync("sleep", ["0.2"]);
        assert.match(launch(rec, "sk-1").stdout, /^replaced$/m, "a dead process is replaced");
    } finally {
        sleeper.kill("SIGKILL");
    }
});

test("the launches check for an identical running launch before they stop anything", () => {
    const p = plan(2);
    const vllm = p.vllmLaunch.create;
    assert.ok(vllm.indexOf("already runs as this launch declares it") < vllm.indexOf("vllm.json /"), "before the old record goes");
    assert.ok(vllm.indexOf("already runs as this launch declares it") < vllm.indexOf("kill -TERM"));
    assert.match(vllm, /urlopen\(sys\.argv\[1\], timeout=5\)'"'"' http:\/\/127\.0\.0\.1:8001\/health/);
    const ray = p.hosts[1].rayLaunch!.create;
    assert.ok(ray.indexOf("already runs as this launch declares it") < ray.indexOf("ray stop --force"));
    assert.match(ray, /grep -qsx raylet \/proc\/\[0-9\]\*\/comm/);
});

test("vLLM's delete after a container replacement: a stale pid file (the pid reused, another start time) signals nothing and goes; the launched process is stopped", () => {
    const shell = containerShell();
    const alive = (pid: number) => { try { return !/^[ZX]/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/.*\) /s, "")); } catch { return false; } };
    // Not a child of this process: its delete waits for the stopped process to be gone, and a child of node stays a
    // zombie (still in /proc) until node's event loop reaps it, which the synchronous runs below block: the delete then
    // waited out its whole grace. A shell that exits at once leaves the sleep to init, which reaps it.
    const spawned = spawnSync("sh", ["-c", "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!"], { encoding: "utf8" });
    const other = { pid: Number(spawned.stdout.trim()), kill: (signal: NodeJS.Signals) => { try { process.kill(Number(spawned.stdout.trim()), signal); } catch { /* gone */ } } };
    assert.ok(other.pid > 0, spawned.stderr);
    try {
        const logDir = path.join(shell.root, "log");
        fs.mkdirSync(logDir);
        const p = plan(2, raw => (raw.logDir = logDir));
        const pidFile = path.join(logDir, "vllm-serve.pid");
        const started = fs.readFileSync(`/proc/${other.pid}/stat`, "utf8").replace(/.*\) /s, "").split(" ")[19];
        // logDir outlives the container; the new container numbers its processes again, so the file's pid may be another's.
        fs.writeFileSync(pidFile, `${other.pid} ${Number(started) + 1}\n`);
        assert.equal(bash(pidFileRunning(pidFile)).status, 1, "not running: a launch would not keep it");
        const stale = shell.run(p.vllmLaunch.delete!);
        assert.equal(stale.status, 0, stale.stderr);
        assert.ok(alive(other.pid!), "the unrelated process still runs");
        assert.ok(!fs.existsSync(pidFile), "the stale file is gone");
        // The same delete with the file the launch wrote stops that process.
        fs.writeFileSync(pidFile, `${other.pid} ${started}\n`);
        assert.equal(bash(pidFileRunning(pidFile)).status, 0);
        assert.equal(shell.run(p.vllmLaunch.delete!).status, 0);
        spawnSync("sleep", ["0.3"]);
        assert.ok(!alive(other.pid!), "the launched process is stopped");
    } finally {
        other.kill("SIGKILL");
        shell.remove();
    }
});
