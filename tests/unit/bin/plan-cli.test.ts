import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const ROOT = path.join(__dirname, "..", "..", "..");
const cli = (args: string[], cwd = ROOT) => spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), ...args], { cwd, encoding: "utf8" });

test("plan --stack spark prints hosts, containers, exact command lines, memory and policy verdicts", () => {
    const r = cli(["plan", "--stack", "spark"]);
    assert.equal(r.status, 0, r.stderr);
    for (const expected of [
        "spark-a (head) ssh nvidia@spark-a.local:22, 1 GPU, fabric enp1s0f1np1 192.168.100.10",
        "VLLM_HOST_IP=192.168.100.11",
        "spark-b: ray start --address=192.168.100.10:6379 --node-ip-address=192.168.100.11 --num-gpus=1",
        "vllm serve Qwen/Qwen3.5-122B-A10B-FP8 --served-model-name qwen3.5-122b --tensor-parallel-size 2",
        "spark-endpoint-probe on spark-a (apiKey on stdin):",
        "spark-spark-b-memory on spark-b:",
        "host headroom 18.25 GiB per host",
        "pass  vllm-supports-architecture (mandatory)",
    ]) assert.ok(r.stdout.includes(expected), `missing: ${expected}`);
});

test("plan --json shows each host's exact launch lines: Ray, mp (no ray start, --headless on workers), one host", () => {
    const json = (stack: string) => {
        const r = cli(["plan", "--stack", stack, "--json"]);
        assert.equal(r.status, 0, r.stderr);
        return JSON.parse(r.stdout);
    };
    const ray = json("spark");
    assert.equal(ray.backend, "ray");
    assert.match(ray.hosts[1].rayStart, /^ray start --address=192\.168\.100\.10:6379 /);
    const mp = json("spark-mp");
    assert.equal(mp.backend, "mp");
    assert.ok(mp.hosts.every((h: { rayStart?: string }) => h.rayStart === undefined), "no ray start on any host");
    assert.match(mp.hosts[0].vllmServe, / --nnodes 2 --node-rank 0 --master-addr 192\.168\.100\.10 --master-port 29501( |$)/);
    assert.ok(!mp.hosts[0].vllmServe.includes("--headless"));
    assert.match(mp.hosts[1].vllmServe, / --nnodes 2 --node-rank 1 --master-addr 192\.168\.100\.10 --master-port 29501 --headless/);
    assert.ok(!JSON.stringify(mp.commands).includes("ray start"));
    assert.deepEqual(mp.commands.filter((c: { name: string }) => c.name.endsWith("-vllm")).map((c: { name: string }) => c.name), ["spark-spark-b-vllm"]);
    const one = json("gpt-oss-120b");
    assert.equal(one.backend, "single");
    assert.ok(!one.hosts[0].vllmServe.includes("--distributed-executor-backend") && !one.hosts[0].vllmServe.includes("--nnodes"));
    assert.ok(!JSON.stringify(one.commands).includes("ray "), "no Ray at all");
});

test("plan --json is machine-readable and matches the text", () => {
    const r = cli(["plan", "--stack", "spark", "--json"]);
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.hosts.length, 2);
    assert.equal(report.hosts[1].rayStart, "ray start --address=192.168.100.10:6379 --node-ip-address=192.168.100.11 --num-gpus=1 --disable-usage-stats");
    assert.equal(report.memory.kvTokens, 3846771);
    // The committed stack pins no SSH host key (users' machines), and its vLLM 0.17.1 image (CUDA 12.9) builds its SM120
    // FP8 kernels for sm_120a, which a GB10 does not run (components/knowledge/vllmKernels.ts): only those advisories show.
    const failing = report.policies.filter((v: { violations: string[] }) => v.violations.length > 0);
    assert.deepEqual(failing.map((v: { policy: string; enforcementLevel: string }) => `${v.policy} (${v.enforcementLevel})`),
        ["quantization-kernels-on-gb10 (advisory)", "ssh-host-keys-pinned (advisory)"]);
});

test("plan fails with the key path for a broken stack and with a usage line without --stack", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plan-cli-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.bad.yaml"), "config:\n  spark-vllm:hosts: []\n  spark-vllm:image: x\n");
        const bad = cli(["plan", "--stack", "bad", "--dir", dir]);
        assert.equal(bad.status, 3, "a config error");
        assert.match(bad.stderr, /spark-vllm:hosts: is empty/);
        assert.match(bad.stderr, /spark-vllm:model: missing/);
        const missing = cli(["plan", "--stack", "nope", "--dir", dir]);
        assert.match(missing.stderr, /stacks here: bad/);
        assert.equal(missing.status, 3);
        assert.equal(cli(["plan"]).status, 2);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

/** Writes Pulumi.<stack>.yaml with `text` into a fresh directory and runs plan on it. */
function planText(text: string, stack = "t") {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plan-cli-"));
    try {
        fs.writeFileSync(path.join(dir, `Pulumi.${stack}.yaml`), text);
        return { ...cli(["plan", "--stack", stack, "--dir", dir]), file: path.join(dir, `Pulumi.${stack}.yaml`) };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

const SPARK = fs.readFileSync(path.join(ROOT, "Pulumi.spark.yaml"), "utf8");

test("plan on a stack file that is not YAML names the file, line and column, and never quotes the file", () => {
    const r = planText("config:\n  spark-vllm:hfToken: hf_PLAINSECRET\n  spark-vllm:image: [unclosed\n");
    assert.equal(r.status, 3);
    assert.match(r.stderr, new RegExp(`^${r.file.replace(/[.\\/]/g, "\\$&")}:4:1: not valid YAML: `));
    assert.ok(!r.stderr.includes("hf_PLAINSECRET"), "no snippet of the file (it may hold a secret)");
    const dup = planText("config:\n  spark-vllm:image: a\n  spark-vllm:image: b\n");
    assert.equal(dup.status, 3);
    assert.match(dup.stderr, /Pulumi\.t\.yaml:3:\d+: not valid YAML: duplicated mapping key/);
});

test("plan on a stack file of the wrong shape says what it found", () => {
    const cases: [string, RegExp][] = [
        ["", /Pulumi\.t\.yaml: is empty, not a stack file: expected a mapping with a config: section/],
        ["- a\n- b\n", /Pulumi\.t\.yaml: is a list, not a stack file/],
        ["just text\n", /Pulumi\.t\.yaml: is a string, not a stack file/],
        ["encryptionsalt: x\n", /Pulumi\.t\.yaml: has no config: section; the spark-vllm:\* keys go under config:/],
        ["config:\n  - spark-vllm:hosts\n", /Pulumi\.t\.yaml: config: is a list, not a mapping/],
        ["config:\n", /Pulumi\.t\.yaml: config: is empty, not a mapping/],
    ];
    for (const [text, expected] of cases) {
        const r = planText(text);
        assert.equal(r.status, 3, text);
        assert.match(r.stderr, expected);
    }
});

test("plan refuses hfToken and sshPrivateKey in plain text, with every other problem, and never prints them", () => {
    const text = SPARK + "  spark-vllm:hfToken: hf_PLAINSECRET\n  spark-vllm:sshPrivateKey: |\n    -----BEGIN KEY-----\n    PRIVATE\n  spark-vllm:modle: {}\n";
    const r = planText(text);
    assert.equal(r.status, 3);
    assert.match(r.stderr, /spark-vllm:hfToken: is in plain text in the stack file; encrypt it with `pulumi config set --secret spark-vllm:hfToken`/);
    assert.match(r.stderr, /spark-vllm:sshPrivateKey: is in plain text in the stack file/);
    assert.match(r.stderr, /spark-vllm:modle: unknown key; did you mean model\?/);
    assert.ok(!r.stderr.includes("hf_PLAINSECRET") && !r.stderr.includes("PRIVATE\n"));
    const secure = planText(SPARK + "  spark-vllm:hfToken:\n    secure: v1:c2VjcmV0\n");
    assert.equal(secure.status, 0, secure.stderr);
});

test("exit codes are distinct: 0 done, 2 usage, 3 config, 4 mandatory policy; the usage text lists them", () => {
    assert.equal(cli(["plan", "--stack", "spark"]).status, 0);
    assert.equal(cli(["plan", "--stack"]).status, 2, "a missing value");
    assert.equal(cli(["plan", "--stack", "spark", "--bogus"]).status, 2);
    assert.equal(cli(["plan", "--stack", "../../etc/passwd"]).status, 2, "a stack name is never a path");
    assert.equal(cli(["nonsense"]).status, 2);
    assert.equal(planText("config: {}\n").status, 3);
    // The Qwen3.5 architecture is unknown to vLLM 0.14: the vllm-supports-architecture policy is mandatory.
    const old = planText(SPARK.replace(/vllm\/vllm-openai:v0\.17\.1@/, "vllm/vllm-openai:v0.14.0@").replace("version: 0.17.1", "version: 0.14.0"));
    assert.equal(old.status, 4, old.stderr);
    assert.match(old.stdout, /FAIL  vllm-supports-architecture \(mandatory\)/);
    const usage = cli(["--help"]);
    assert.equal(usage.status, 0);
    for (const line of [/^ {2}0 {2}done/m, /^ {2}1 {2}diagnose: no known root cause/m, /^ {2}2 {2}usage error/m, /^ {2}3 {2}config error/m, /^ {2}4 {2}a mandatory policy fails/m])
        assert.match(usage.stderr, line);
});

test("every multi-host stack runs the fabric check after the compat check and before any Ray or vLLM launch; one host has none", () => {
    for (const stack of ["spark", "spark-mp", "llama-70b", "qwen3-235b-4x", "gpt-oss-120b"]) {
        const r = cli(["plan", "--stack", stack, "--json"]);
        assert.equal(r.status, 0, r.stderr);
        const order: string[] = JSON.parse(r.stdout).commands.map((c: { name: string }) => c.name);
        const ranks = order.filter(n => n.endsWith("-fabric"));
        const launches = order.filter(n => n === "spark-ray-head" || n.endsWith("-ray") || n === "spark-vllm-launch" || n.endsWith("-vllm") || n.endsWith("-memory"));
        if (stack === "gpt-oss-120b") { assert.deepEqual(ranks, [], "one host: no fabric check"); continue; }
        const hosts = JSON.parse(r.stdout).hosts.length;
        assert.equal(ranks.length, hosts, `${stack}: one rank per host`);
        const lastRank = Math.max(...ranks.map(n => order.indexOf(n)));
        assert.ok(order.indexOf("spark-compat") < Math.min(...ranks.map(n => order.indexOf(n))), `${stack}: compat first`);
        assert.ok(launches.every(n => order.indexOf(n) > lastRank), `${stack}: ${order.join(" ")}`);
    }
});

test("plan accepts link-local fabric addresses and says they can change at boot and how to pin them", () => {
    const text = SPARK.replace(/192\.168\.100\.10\b/g, "169.254.10.1").replace(/192\.168\.100\.11\b/g, "169.254.10.2");
    assert.notEqual(text, SPARK);
    const r = planText(text);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    assert.ok(r.stdout.includes("fabric enp1s0f1np1 169.254.10.1"), r.stdout);
    const warnings = r.stdout.split("\n").filter(l => l.startsWith("  warning: "));
    assert.equal(warnings.length, 2, r.stdout);
    assert.match(warnings[0], /spark-vllm:hosts\[0\]\.fabric\.address 169\.254\.10\.1 \(spark-a\) is link-local .*can change at boot unless pinned.*\/etc\/netplan\/40-cx7\.yaml on spark-a give enp1s0f1np1 `addresses: \[169\.254\.10\.1\/16\]`.*sudo netplan apply/);
    // a routable address gets no such warning
    assert.ok(!cli(["plan", "--stack", "spark"]).stdout.includes("link-local"));
});
