// `spark-vllm status`: the host script run for real (sh, the real helper program, a real process and /health),
// and the CLI over a stand-in `ssh` that answers as healthy, degraded and unreachable hosts. Test addresses only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { clusterStatus, hostStatusScript, parseHostOutput, sshArgv } from "../../../components/plan/status";
import { TOOLS_FILE, toolsProgram } from "../../../components/plan/toolsProgram";
import { clusterConfig, rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");

function executable(file: string, text: string) {
    fs.writeFileSync(file, text, { mode: 0o755 });
}

test("the host script reports a running container, vLLM's pid and uptime, and /health, through the real helper program", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-host-"));
    const server = http.createServer((req, res) => { res.statusCode = req.url === "/health" ? 200 : 404; res.end(); });
    await new Promise<void>(r => server.listen(0, "127.0.0.1", r));
    const vllm = spawn("sleep", ["300"], { stdio: "ignore" });
    try {
        const port = (server.address() as AddressInfo).port;
        // No HCAs here: this machine has none, and the preflight would refuse configured ones (status-host-facts.test.ts).
        const raw = rawConfig(1);
        raw.hosts[0].fabric.hcas = [];
        const plan = planCluster(parseSpec({ ...raw, logDir: dir, vllm: { ...raw.vllm, internalPort: port } }));
        fs.writeFileSync(path.join(dir, TOOLS_FILE), toolsProgram());
        const stat = fs.readFileSync(`/proc/${vllm.pid}/stat`, "utf8");
        fs.writeFileSync(plan.vllmPidFile, `${vllm.pid} ${stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]}\n`);
        // `docker` here: the container runs, and exec runs its command on this machine.
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        executable(path.join(bin, "docker"), '#!/bin/sh\ncase "$1" in inspect) echo running ;; exec) shift 2; exec "$@" ;; esac\n');
        const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>(resolve => {
            const sh = spawn("sh", ["-s"], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
            let stdout = "", stderr = "";
            sh.stdout.on("data", d => { stdout += d; });
            sh.stderr.on("data", d => { stderr += d; });
            sh.on("close", code => resolve({ code, stdout, stderr }));
            sh.stdin.end(hostStatusScript(plan, plan.hosts[0]));
        });
        assert.equal(out.code, 0, out.stderr);
        const report = parseHostOutput(plan.hosts[0], out.code, out.stdout, out.stderr);
        assert.equal(report.container, "running");
        assert.equal(report.vllm?.state, "running");
        assert.equal(report.vllm?.pid, vllm.pid);
        assert.ok(typeof report.vllm?.uptimeSeconds === "number" && report.vllm.uptimeSeconds < 60, JSON.stringify(report));
        assert.equal(report.health, 200);
        assert.ok(report.memory?.totalGiB && report.memory.totalGiB > 0);
        assert.deepEqual(clusterStatus(plan, "one", [report]).problems, []);
        vllm.kill("SIGKILL");
        await new Promise(r => vllm.on("exit", r));
        fs.writeFileSync(plan.vllmLog, "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n");
        const dead = spawnSync("sh", ["-s"], { input: hostStatusScript(plan, plan.hosts[0]), encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
        const verdict = clusterStatus(plan, "one", [parseHostOutput(plan.hosts[0], dead.status, dead.stdout, dead.stderr)]);
        assert.equal(verdict.serving, false);
        assert.match(verdict.problems.join("\n"), /spark-a: vLLM is not running \(exited\): no-cache-memory: ValueError: No available memory/);
    } finally {
        vllm.kill("SIGKILL");
        server.close();
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

/** A stand-in `ssh` on PATH: answers per target host as the host script would, from $FAKE_HOSTS (JSON). */
function cliWithHosts(hosts: Record<string, { code?: number; stdout?: string; stderr?: string }>, args: string[]) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "status-cli-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.two.yaml"), yaml.dump({ config: clusterConfig(2) }));
        executable(path.join(dir, "ssh"), `#!/usr/bin/env node
const hosts = JSON.parse(process.env.FAKE_HOSTS);
const target = process.argv.find(a => a.includes("@")).split("@")[1];
let script = "";
process.stdin.on("data", d => { script += d; });
process.stdin.on("end", () => {
    require("fs").appendFileSync(${JSON.stringify(path.join(dir, "scripts.txt"))}, target + "\\n" + process.argv.slice(2).join(" ") + "\\n" + script);
    const h = hosts[target];
    process.stdout.write(h.stdout || "");
    process.stderr.write(h.stderr || "");
    process.exit(h.code || 0);
});
`);
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "status", "--stack", "two", "--dir", dir, ...args], {
            cwd: ROOT, encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, FAKE_HOSTS: JSON.stringify(hosts) },
        });
        return { ...r, sent: fs.existsSync(path.join(dir, "scripts.txt")) ? fs.readFileSync(path.join(dir, "scripts.txt"), "utf8") : "" };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

const memory = { availableGiB: 60.2, totalGiB: 119.7 };
/** The URN of a command of stack "two" under the component COMPONENT (tests/unit/fixtures/stack-urns.json's shape). */
const urn = (component: string, name: string) => `urn:pulumi:two::spark-vllm::spark-vllm:index:SparkCluster$spark-vllm:index:${component}$command:remote:Command::${name}`;
/** What relaunches vLLM on stack "two": every host's memory gate (components/plan/relaunch.ts relaunchUrns). */
const replaceGates = `pulumi up -s two --replace '${urn("ModelEndpoint", "spark-spark-a-memory")}' --replace '${urn("ModelEndpoint", "spark-spark-b-memory")}'`;
const head = (vllm: object, health: number | null) =>
    ({ stdout: "spark-vllm-container running\n" + JSON.stringify({ host: "spark-a", vllm, health, raylet: true, memory }) + "\n" });
const worker = { stdout: "spark-vllm-container running\n" + JSON.stringify({ host: "spark-b", vllm: { state: "no pid file", pid: null }, raylet: true, memory }) + "\n" };
const running = { state: "running", pid: 812, uptimeSeconds: 7300, servedModel: "qwen3.5-122b" };

test("status: a healthy cluster is serving (exit 0), each host asked once over SSH in batch mode with the script on stdin", () => {
    const r = cliWithHosts({ "198.18.0.2": head(running, 200), "198.18.0.3": worker }, []);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /^stack two: serving qwen3\.5-122b at http:\/\/198\.18\.0\.2:8000\/v1/);
    assert.match(r.stdout, /spark-a \(head\): container running, Ray node joined, vLLM pid 812 up 2 h 1 min serving qwen3\.5-122b, \/health 200, 60\.2 of 119\.7 GiB free/);
    assert.match(r.sent, /198\.18\.0\.2\n-o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=15 -p 22 root@198\.18\.0\.2 sh -s\n/);
    assert.match(r.sent, /docker inspect -f '\{\{\.State\.Status\}\}' spark-vllm-spark-b/);
    assert.equal(r.sent.match(/host-status/g)?.length, 2);
});

test("status: a dead vLLM (with its diagnosis) and an unreachable worker are not serving (exit 5), each problem naming the host and what to run", () => {
    const dead = { state: "exited", pid: 812, diagnosis: { kind: "cuda-oom", line: "torch.OutOfMemoryError: CUDA out of memory.", hint: "Lower gpuMemoryUtilization." } };
    const r = cliWithHosts({ "198.18.0.2": head(dead, null), "198.18.0.3": { code: 255, stderr: "ssh: connect to host 198.18.0.3 port 22: No route to host\n" } }, []);
    assert.equal(r.status, 5, r.stderr + r.stdout);
    assert.match(r.stdout, /NOT serving/);
    assert.ok(r.stdout.includes("- spark-a: vLLM is not running (exited): cuda-oom: torch.OutOfMemoryError: CUDA out of memory.\n    Lower gpuMemoryUtilization.\n" +
        `    the supervisor relaunches a vLLM that had served (backing off while it keeps dying); to relaunch it now (or after a failed \`up\`), run \`${replaceGates}\`\n`), r.stdout);
    assert.match(r.stdout, /spark-b: SSH failed \(ssh: connect to host 198\.18\.0\.3 port 22: No route to host\); check that the host is up and that `ssh -p 22 root@198\.18\.0\.3` works/);
});

test("status --json: a stopped container and a missing Ray node, machine-readable", () => {
    const r = cliWithHosts({ "198.18.0.2": head(running, 200), "198.18.0.3": { stdout: "spark-vllm-container exited\n" } }, ["--json"]);
    assert.equal(r.status, 5);
    const s = JSON.parse(r.stdout);
    assert.equal(s.serving, false);
    assert.equal(s.hosts[1].container, "exited");
    assert.deepEqual(s.problems, ["spark-b: container spark-vllm-spark-b is exited; run `pulumi up -s two --refresh` to start it: its supervisor relaunches what it ran (a plain `pulumi up -s two` does not look at the hosts)"]);
});

test("status: a missing container, a Ray node not in the cluster and a Ray cluster that cannot be asked each name the replace that relaunches it", () => {
    const gone = cliWithHosts({ "198.18.0.2": head(running, 200), "198.18.0.3": { stdout: "spark-vllm-container absent\n" } }, ["--json"]);
    assert.deepEqual(JSON.parse(gone.stdout).problems, ["spark-b: container spark-vllm-spark-b is absent; run `pulumi up -s two --refresh` to create it again and relaunch the cluster (a plain `pulumi up -s two` does not look at the hosts)"]);
    const lost = { stdout: "spark-vllm-container running\n" + JSON.stringify({ host: "spark-b", vllm: { state: "no pid file", pid: null }, raylet: false, memory }) + "\n" };
    assert.deepEqual(JSON.parse(cliWithHosts({ "198.18.0.2": head(running, 200), "198.18.0.3": lost }, ["--json"]).stdout).problems,
        [`spark-b: its Ray node is not in the cluster; run \`pulumi up -s two --replace '${urn("RayCluster", "spark-spark-b-ray")}'\` to relaunch Ray and vLLM`]);
    const unasked = { stdout: "spark-vllm-container running\n" + JSON.stringify({ host: "spark-b", vllm: { state: "no pid file", pid: null }, raylet: null, rayError: "ConnectionError: GCS unreachable", memory }) + "\n" };
    assert.deepEqual(JSON.parse(cliWithHosts({ "198.18.0.2": head(running, 200), "198.18.0.3": unasked }, ["--json"]).stdout).problems,
        [`spark-b: the Ray cluster cannot be asked (ConnectionError: GCS unreachable); run \`pulumi up -s two --replace '${urn("RayCluster", "spark-ray-head")}'\` to relaunch Ray and vLLM`]);
});

test("status: a launch the supervisor gave up on is named in the verdict and the host's line (exit 5), and in --json with the URN to replace", () => {
    const given = { name: "vllm", failures: 5, log: "/var/tmp/spark-vllm/vllm-serve.log", markedAt: "2026-12-01T12:00:00Z",
        diagnosis: { kind: "cuda-oom", line: "torch.OutOfMemoryError: CUDA out of memory.", hint: "Lower gpuMemoryUtilization." } };
    const gaveUp = { stdout: head({ state: "exited", pid: 812 }, null).stdout + `spark-vllm-given-up ${JSON.stringify([given])}\n` };
    const okWorker = { stdout: worker.stdout + "spark-vllm-given-up []\n" };
    const r = cliWithHosts({ "198.18.0.2": gaveUp, "198.18.0.3": okWorker }, []);
    assert.equal(r.status, 5, r.stderr + r.stdout);
    assert.match(r.stdout, /^stack two: NOT serving .*; the supervisor gave up relaunching vllm on spark-a\n/);
    assert.match(r.stdout, /spark-a \(head\): .*supervisor gave up on vllm \(5 failures, cuda-oom\)/);
    assert.match(r.stdout, /- spark-a: the supervisor stopped relaunching vllm after 5 failures in a row \(2026-12-01T12:00:00Z\): cuda-oom: torch\.OutOfMemoryError/);
    assert.doesNotMatch(r.stdout, /vLLM is not running/, "one line for the dead vLLM: the supervisor's");
    assert.match(r.sent, /docker cp spark-vllm-spark-b:\/var\/lib\/spark-vllm\/launches - 2>\/dev\/null \| python3 -c '[^]*' \/var\/tmp\/spark-vllm\/spark_vllm_tools\.py [0-9a-f]{64} given-up/);
    const j = JSON.parse(cliWithHosts({ "198.18.0.2": gaveUp, "198.18.0.3": okWorker }, ["--json"]).stdout);
    assert.deepEqual(j.hosts[0].givenUp, [{ ...given, replace: [urn("ModelEndpoint", "spark-spark-a-memory"), urn("ModelEndpoint", "spark-spark-b-memory")] }]);
    assert.ok(j.problems[0].endsWith(`fix the cause, then run \`${replaceGates}\`: the new launch clears the marker (a plain \`pulumi up -s two\` changes nothing)`), j.problems[0]);
    assert.deepEqual(j.hosts[1].givenUp, []);
});

test("status: usage and config errors keep their exit codes", () => {
    assert.equal(cliWithHosts({}, ["--bogus"]).status, 2);
    const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "status", "--stack", "nosuch", "--dir", os.tmpdir()], { encoding: "utf8" });
    assert.equal(r.status, 3);
    assert.match(r.stderr, /no stack file/);
});

test("status with ssh.hostKey accepts only that key, as the Docker provider does (no known_hosts needed)", () => {
    const raw = rawConfig(2);
    raw.hosts[1].ssh.hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKUcZFdnMYt1+OQnP9uJD4s1CFnLWUciKxw5B95cRYc1";
    const plan = planCluster(parseSpec(raw));
    const argv = sshArgv(plan.hosts[1]).join(" ");
    assert.match(argv, /StrictHostKeyChecking=yes/);
    assert.match(argv, /KnownHostsCommand=\/bin\/echo \* ssh-ed25519 AAAAC3Nza/);
    assert.doesNotMatch(sshArgv(plan.hosts[0]).join(" "), /KnownHostsCommand/, "a host without a pinned key uses known_hosts");
});
