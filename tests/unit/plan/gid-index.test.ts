// Issue 47: every process that runs NCCL on a host gets NCCL_IB_GID_INDEX from that host's own GID table, read when
// it starts (components/plan/launches.ts ncclGidExec, components/hostProgram/spark_vllm/gid.py): the fabric check's
// rank, Ray's start under Ray, `vllm serve` on every host under mp; never the head's value copied to a worker.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { rayNonCarryOver } from "../../../components/plan/containers";
import { GID_EXEC, LaunchRecord, NCCL_GID_VARIABLE, ncclGidExec } from "../../../components/plan/launches";
import { toolsProgram } from "../../../components/plan/toolsProgram";
import { rawConfig } from "../../fixtures";
import { testTempDir } from "../../tempDir";

const plan = (n: number, mutate: (raw: Record<string, any>) => void = () => {}) => {
    const raw = rawConfig(n);
    mutate(raw);
    return planCluster(parseSpec(raw));
};
/** The record a launch's create writes (the JSON in its printf line). */
const recordIn = (create: string): LaunchRecord => {
    const m = /printf '"'"'%s\\n'"'"' '"'"'(\{"name":[^\n]*\})'"'"' > /.exec(create);
    assert.ok(m, "the launch writes a record");
    return JSON.parse(m![1]);
};
const PIN = "/var/lib/spark-vllm/tools.sha256";
/** The wrapper's prefix for a host: the verified call, the helper program, the pin, that host's own address and HCAs. */
const wrapped = (address: string, hcas: string[]) =>
    ["python3", "-c", GID_EXEC, "/var/tmp/spark-vllm/spark_vllm_tools.py", PIN, JSON.stringify({ address, hcas })];

test("Ray: each host's Ray start (the record the supervisor relaunches too) reads its own host's GID index", () => {
    const p = plan(3);
    p.hosts.forEach((h, i) => {
        const record = recordIn(h.rayLaunch!.create);
        const host = p.spec.hosts[i];
        assert.deepEqual(record.argv, [...wrapped(host.fabric.address, host.fabric.hcas), ...h.rayStartArgv!], host.name);
        // The first start runs the same argv (inside the launch script's quotes).
        assert.ok(h.rayLaunch!.create.includes(`${JSON.stringify({ address: host.fabric.address, hcas: host.fabric.hcas })}'"'"' ray start`), host.name);
    });
    assert.notEqual(p.spec.hosts[0].fabric.address, p.spec.hosts[1].fabric.address);
    // Ray's workers inherit Ray's environment; vLLM itself (the driver) runs no NCCL rank under Ray and is not wrapped.
    assert.equal(recordIn(p.vllmLaunch.create).argv[0], "sh");
    assert.ok(!p.vllmLaunch.create.includes("nccl_gid_exec"));
});

test("mp: every host's vllm serve reads its own host's GID index; one host, or no HCA, runs as before", () => {
    const p = plan(2, raw => { raw.vllm.backend = "mp"; });
    const head = recordIn(p.vllmLaunch.create);
    const worker = recordIn(p.hosts[1].vllmLaunch!.create);
    const [a, b] = p.spec.hosts;
    assert.deepEqual(head.argv.slice(0, 6), wrapped(a.fabric.address, a.fabric.hcas));
    assert.deepEqual(head.argv.slice(6, 8), ["sh", "-c"], "the key guard's PYTHONPATH inside the wrapper, not around it");
    assert.deepEqual(worker.argv, [...wrapped(b.fabric.address, b.fabric.hcas), ...p.hosts[1].vllmServeArgv!]);
    const tcp = plan(2, raw => { raw.vllm.backend = "mp"; for (const h of raw.hosts) h.fabric.hcas = []; });
    assert.deepEqual(recordIn(tcp.hosts[1].vllmLaunch!.create).argv, tcp.hosts[1].vllmServeArgv);
    const tcpRay = plan(2, raw => { for (const h of raw.hosts) h.fabric.hcas = []; });
    assert.deepEqual(recordIn(tcpRay.hosts[1].rayLaunch!.create).argv, tcpRay.hosts[1].rayStartArgv);
    const one = plan(1);
    assert.ok(!one.vllmLaunch.create.includes("nccl_gid_exec"), "one host: NCCL never leaves it");
});

test("the fabric check's rank gets its own host's address and HCAs, to read the index from its table", () => {
    const p = plan(2);
    p.hosts.forEach((h, i) => {
        const args = JSON.parse(/fabric-check '(\{[^']*\})'/.exec(h.fabricRank!.create)![1]);
        assert.equal(args.address, p.spec.hosts[i].fabric.address);
        assert.deepEqual(args.hcas, p.spec.hosts[i].fabric.hcas);
    });
});

test("vLLM's Ray executor never copies the head's NCCL_IB_GID_INDEX to a worker (non-carry-over); over TCP it is not named", () => {
    const p = plan(2);
    assert.ok(rayNonCarryOver(p.spec).includes(NCCL_GID_VARIABLE), rayNonCarryOver(p.spec).join(","));
    assert.ok(p.vllmLaunch.create.includes(NCCL_GID_VARIABLE), "the head's ray-env call lists it");
    const tcp = plan(2, raw => { for (const h of raw.hosts) h.fabric.hcas = []; });
    assert.ok(!rayNonCarryOver(tcp.spec).includes(NCCL_GID_VARIABLE));
});

test("the wrapper runs the pinned helper program's nccl_gid_exec in the same process, and nothing when the program was swapped", () => {
    const dir = testTempDir("gid-exec");
    const p = plan(2);
    const tools = path.join(dir, "spark_vllm_tools.py");
    const program = toolsProgram();
    fs.writeFileSync(tools, program);
    const pin = path.join(dir, "tools.sha256");
    fs.writeFileSync(pin, crypto.createHash("sha256").update(program, "utf8").digest("hex") + "\n");
    const host = { ...p.spec.hosts[0], fabric: { ...p.spec.hosts[0].fabric, hcas: ["spark-vllm-test-no-such-hca"] } };
    // `$$` of the shell ARGV runs is the wrapper's own pid: exec, not a child (a pid file keeps naming the process).
    const argv = ncclGidExec(tools, host, ["sh", "-c", 'echo "pid=$$ ppid=$PPID gid=${NCCL_IB_GID_INDEX-unset}"'], pin);
    const run = () => spawnSync("sh", ["-c", 'echo "shell=$$"; exec "$@"', "sh", ...argv], {
        encoding: "utf8", env: { ...process.env, [NCCL_GID_VARIABLE]: "0" } });
    const r = run();
    assert.equal(r.status, 0, r.stderr);
    const shell = /shell=(\d+)/.exec(r.stdout)![1];
    // No GID of the host's address on that HCA (no such device here): NCCL's own choice, a stale value dropped, and why.
    assert.match(r.stdout, new RegExp(`pid=${shell} .*gid=unset`));
    assert.match(r.stderr, /spark-vllm: NCCL_IB_GID_INDEX not set: no RoCE v2 GID carries the fabric address 198\.18\.1\.2 on spark-vllm-test-no-such-hca/);
    fs.appendFileSync(tools, "\nprint('planted')\n");
    const swapped = run();
    assert.equal(swapped.status, 97);
    assert.doesNotMatch(swapped.stdout, /planted|pid=/);
    assert.match(swapped.stderr, /refusing to run .*spark_vllm_tools\.py: its sha256 is not the one pinned/);
});
