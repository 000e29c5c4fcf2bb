import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const ROOT = path.join(__dirname, "..", "..");
const cli = (args: string[], cwd = ROOT) => spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), ...args], { cwd, encoding: "utf8" });

test("plan --stack spark prints hosts, containers, exact command lines, memory and policy verdicts", () => {
    const r = cli(["plan", "--stack", "spark"]);
    assert.equal(r.status, 0, r.stderr);
    for (const expected of [
        "spark-a (head) ssh nvidia@spark-a.local:22, 1 GPU, fabric enp1s0f1np1 192.168.100.10",
        "VLLM_HOST_IP=192.168.100.11",
        "spark-b: ray start --address=192.168.100.10:6379 --node-ip-address=192.168.100.11 --num-gpus=1",
        "vllm serve Qwen/Qwen3.5-122B-A10B-FP8 --served-model-name qwen3.5-122b --tensor-parallel-size 2",
        "endpoint probe (timeout 1860 s, apiKey on stdin)",
        "host headroom 18.25 GiB per host",
        "pass  vllm-supports-architecture (mandatory)",
    ]) assert.ok(r.stdout.includes(expected), `missing: ${expected}`);
});

test("plan --json is machine-readable and matches the text", () => {
    const r = cli(["plan", "--stack", "spark", "--json"]);
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.hosts.length, 2);
    assert.equal(report.hosts[1].rayStart, "ray start --address=192.168.100.10:6379 --node-ip-address=192.168.100.11 --num-gpus=1 --disable-usage-stats");
    assert.equal(report.memory.kvTokens, 3846771);
    assert.ok(report.policies.every((v: { violations: string[] }) => v.violations.length === 0));
});

test("plan fails with the key path for a broken stack and with a usage line without --stack", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plan-cli-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.bad.yaml"), "config:\n  spark-vllm:hosts: []\n  spark-vllm:image: x\n");
        const bad = cli(["plan", "--stack", "bad", "--dir", dir]);
        assert.equal(bad.status, 1);
        assert.match(bad.stderr, /spark-vllm:hosts: is empty/);
        assert.match(bad.stderr, /spark-vllm:model: missing/);
        const missing = cli(["plan", "--stack", "nope", "--dir", dir]);
        assert.match(missing.stderr, /stacks here: bad/);
        assert.equal(cli(["plan"]).status, 2);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});
