// The helper program that runs on the hosts (components/remote), run here against the
// stand-in vLLM package and a real local `vllm serve` stand-in. No root, no Docker.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { toolsProgram } from "../../components/plan";
import { QWEN35_122B_FP8, writeModel } from "../sim/models";

const IMAGE = path.join(__dirname, "..", "sim", "image");
let dir: string;
let tools: string;
let hfHome: string;

function release(version: string, architectures: string[]): string {
    const file = path.join(dir, `release-${version}.json`);
    fs.writeFileSync(file, JSON.stringify({ version, architectures, transformers: "4.57.1", load_seconds: 1 }));
    return file;
}

function runTools(command: string, args: object, env: Record<string, string> = {}, input = "") {
    return spawnSync("python3", [tools, command, JSON.stringify(args)], {
        input,
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, PYTHONPATH: path.join(IMAGE, "python"), HF_HOME: hfHome, ...env },
    });
}

before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-tools-"));
    tools = path.join(dir, "spark_vllm_tools.py");
    fs.writeFileSync(tools, toolsProgram());
    hfHome = path.join(dir, "hf");
    writeModel(hfHome, QWEN35_122B_FP8);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const compatArgs = () => ({ model: QWEN35_122B_FP8.id, cacheDir: hfHome, trustRemoteCode: false });

test("compat: an image whose vLLM lacks the architecture is refused with both versions and the fix", () => {
    const r = runTools("compat", compatArgs(), { VLLM_SIM_RELEASE: release("0.14.0", ["Qwen3MoeForCausalLM", "LlamaForCausalLM"]) });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /Qwen\/Qwen3\.5-122B-A10B-FP8 needs architecture Qwen3_5MoeForConditionalGeneration, which vLLM 0\.14\.0 in this image does not support; it is supported from vLLM 0\.17\.0/);
    assert.match(r.stderr, /Copying model files between vLLM versions does not work/);
});

test("compat: a supporting image passes in seconds and reports what it read", () => {
    const r = runTools("compat", { ...compatArgs(), declaredVllmVersion: "0.17.1" }, { VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]) });
    assert.equal(r.status, 0, r.stderr);
    const facts = JSON.parse(r.stdout.trim().split("\n").pop()!);
    assert.equal(facts.vllmVersion, "0.17.1");
    assert.deepEqual(facts.architectures, ["Qwen3_5MoeForConditionalGeneration"]);
    assert.equal(facts.modelType, "qwen3_5_moe");
    assert.ok(facts.seconds < 10);
});

test("compat: a declared version that is not the image's is named", () => {
    const r = runTools("compat", { ...compatArgs(), declaredVllmVersion: "0.18.0" }, { VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]) });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /spark-vllm:vllm\.version says 0\.18\.0 but the image's vLLM is 0\.17\.1/);
});

test("compat: custom code needs trustRemoteCode, an unknown model_type needs a newer transformers", () => {
    const snap = writeModel(hfHome, { ...QWEN35_122B_FP8, id: "acme/custom-model" } as typeof QWEN35_122B_FP8);
    const cfgPath = path.join(snap, "config.json");
    const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
    fs.rmSync(cfgPath);
    fs.writeFileSync(cfgPath, JSON.stringify({ ...cfg, auto_map: { AutoConfig: "x.Config" } }));
    const env = { VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]) };
    const custom = runTools("compat", { ...compatArgs(), model: "acme/custom-model" }, env);
    assert.equal(custom.status, 1);
    assert.match(custom.stderr, /set spark-vllm:model\.trustRemoteCode: true/);
    fs.rmSync(cfgPath);
    fs.writeFileSync(cfgPath, JSON.stringify({ ...cfg, model_type: "qwen9_moe" }));
    const unknown = runTools("compat", { ...compatArgs(), model: "acme/custom-model" }, env);
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /transformers 4\.57\.1 in this image does not recognize model_type 'qwen9_moe'/);
});

test("compat: missing weights on the head say where they were looked for", () => {
    const r = runTools("compat", { ...compatArgs(), model: "nobody/absent" }, { VLLM_SIM_RELEASE: release("0.17.1", []) });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /nobody\/absent: config\.json not found under .*\/hub on the head/);
});

test("preflight: prints facts as JSON and one line per problem, naming the host and the fix", () => {
    const machine = os.arch() === "arm64" ? "linux/arm64" : "linux/amd64";
    const other = machine === "linux/arm64" ? "linux/amd64" : "linux/arm64";
    const r = runTools("preflight", {
        host: "spark-x", platform: other, gpus: 1, fabric: { interface: "nosuch0", address: "198.18.9.9", hcas: ["rocep9s0f9"] },
        cacheDir: path.join(dir, "missing-cache"),
    }, { PATH: "/usr/bin:/bin" });
    assert.equal(r.status, 1);
    const facts = JSON.parse(r.stdout.trim().split("\n").pop()!);
    assert.equal(facts.host, "spark-x");
    assert.equal(facts.platform, machine);
    assert.equal(typeof facts.memory.totalBytes, "number");
    for (const expected of [
        `spark-x: CPU architecture is ${os.arch() === "arm64" ? "aarch64" : "x86_64"} (${machine}) but spark-vllm:hosts[].platform says ${other}: set it to ${machine}`,
        "spark-x: nvidia-smi failed",
        "spark-x: interface nosuch0 does not exist",
        "spark-x: HCA rocep9s0f9 not found",
        "spark-x: model cache directory",
    ]) assert.ok(r.stderr.includes(expected), `missing "${expected}" in:\n${r.stderr}`);
});

test("preflight: a loopback 'fabric' that is up with its address passes those checks", () => {
    const r = runTools("preflight", {
        host: "spark-x", platform: "linux/amd64", gpus: 1, fabric: { interface: "lo", address: "127.0.0.1", hcas: [] }, cacheDir: hfHome,
    });
    const facts = JSON.parse(r.stdout.trim().split("\n").pop()!);
    assert.equal(facts.fabric.hasAddress, true);
    assert.ok(!/interface lo/.test(r.stderr), r.stderr);
    assert.ok(facts.disk.freeBytes > 0);
});

async function freePort(): Promise<number> {
    return new Promise(resolve => {
        const s = net.createServer().listen(0, "127.0.0.1", () => {
            const port = (s.address() as net.AddressInfo).port;
            s.close(() => resolve(port));
        });
    });
}

/** Starts the stand-in `vllm serve` as the launch does: detached, log and pid file. */
async function serve(faults: object | null): Promise<{ port: number; log: string; pidFile: string; env: Record<string, string> }> {
    const port = await freePort();
    const log = path.join(dir, `vllm-${port}.log`);
    const pidFile = path.join(dir, `vllm-${port}.pid`);
    const faultsFile = path.join(dir, `faults-${port}.json`);
    fs.writeFileSync(faultsFile, JSON.stringify(faults ?? {}));
    const env = {
        ...process.env, PYTHONPATH: path.join(IMAGE, "python"), HF_HOME: hfHome, VLLM_API_KEY: "k-123", VLLM_HOST_IP: "127.0.0.1",
        VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]), VLLM_SIM_FAULTS: faultsFile,
        VLLM_SIM_LOCK_DIR: path.join(dir, "locks"),
    } as Record<string, string>;
    const out = fs.openSync(log, "w");
    const child = spawn(path.join(IMAGE, "bin", "vllm"), ["serve", QWEN35_122B_FP8.id, "--served-model-name", "qwen", "--host", "127.0.0.1", "--port", String(port)],
        { env, stdio: ["ignore", out, out], detached: true });
    child.unref();
    fs.writeFileSync(pidFile, String(child.pid));
    return { port, log, pidFile, env };
}

const probeArgs = (s: { port: number; log: string; pidFile: string }, timeoutSeconds = 30) =>
    ({ host: "spark-a", port: s.port, servedName: "qwen", log: s.log, pidFile: s.pidFile, timeoutSeconds, intervalSeconds: 1 });

test("endpoint probe: waits for /health, checks /v1/models and a completion with the key, reports seconds to ready", async () => {
    const s = await serve({ load_seconds: 2 });
    try {
        const r = runTools("endpoint-probe", probeArgs(s), s.env, "k-123\n");
        assert.equal(r.status, 0, r.stderr);
        const result = JSON.parse(r.stdout.trim().split("\n").pop()!);
        assert.equal(result.vllmVersion, "0.17.1");
        assert.ok(result.secondsToReady >= 1, `ready after ${result.secondsToReady} s`);
        const wrongKey = runTools("endpoint-probe", probeArgs(s), s.env, "wrong\n");
        assert.equal(wrongKey.status, 1);
        assert.match(wrongKey.stderr, /\/v1\/models answered 401 with the API key/);
    } finally {
        process.kill(Number(fs.readFileSync(s.pidFile, "utf8")), "SIGTERM");
    }
});

test("endpoint probe: a crash during load fails at once with kind, root cause, hint, log path and context", async () => {
    const s = await serve({ load_seconds: 30, crash_after_seconds: 2 });
    const started = Date.now();
    const r = runTools("endpoint-probe", probeArgs(s), s.env, "k-123\n");
    assert.equal(r.status, 1);
    assert.ok(Date.now() - started < 10_000, "failed within seconds, not at the timeout");
    assert.match(r.stderr, /vllm serve on spark-a exited/);
    assert.match(r.stderr, /^kind: cuda-error$/m);
    assert.match(r.stderr, /^root cause: RuntimeError: CUDA error: an illegal memory access was encountered$/m);
    assert.match(r.stderr, /^hint: /m);
    assert.match(r.stderr, new RegExp(`^full log: spark-a:${s.log.replace(/[.]/g, "\\.")}$`, "m"));
    const context = r.stderr.split("context:\n")[1].split("\n").filter(Boolean);
    assert.ok(context.length > 3 && context.length <= 16, `context of ${context.length} lines`);
});

test("endpoint probe: out of memory during load is diagnosed as cuda-oom", async () => {
    const s = await serve({ load_seconds: 4, oom_during_load: true });
    const r = runTools("endpoint-probe", probeArgs(s), s.env, "k-123\n");
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^kind: cuda-oom$/m);
    assert.match(r.stderr, /^root cause: torch\.OutOfMemoryError: CUDA out of memory/m);
});

test("weights: present lists every file with its size; a missing model or blob names the host and the fix", () => {
    const ok = runTools("weights", { host: "spark-b", model: QWEN35_122B_FP8.id, cacheDir: hfHome, strategy: "present" });
    assert.equal(ok.status, 0, ok.stderr);
    const m = JSON.parse(ok.stdout.trim().split("\n").pop()!);
    assert.equal(m.host, "spark-b");
    assert.ok(m.files["config.json"] > 0 && Object.keys(m.files).some(f => f.endsWith(".safetensors")));
    assert.equal(m.totalBytes, Object.values(m.files as Record<string, number>).reduce((a, b) => a + b, 0));

    const absent = runTools("weights", { host: "spark-b", model: "nobody/absent", cacheDir: hfHome, strategy: "present" });
    assert.equal(absent.status, 1);
    assert.match(absent.stderr, /spark-b: nobody\/absent is not in .*\/hub: download it there .* or set spark-vllm:model\.weights: download/);

    const snap = writeModel(hfHome, { ...QWEN35_122B_FP8, id: "acme/broken" } as typeof QWEN35_122B_FP8);
    const shard = fs.readdirSync(snap).find(f => f.endsWith(".safetensors"))!;
    fs.rmSync(path.resolve(snap, fs.readlinkSync(path.join(snap, shard))));
    const broken = runTools("weights", { host: "spark-b", model: "acme/broken", cacheDir: hfHome, strategy: "present" });
    assert.equal(broken.status, 1);
    assert.match(broken.stderr, new RegExp(`spark-b: acme/broken has files whose data is missing \\(dangling links\\): ${shard.replace(/[.]/g, "\\.")}`));
});

test("weights: download checks the disk against the model size before fetching", () => {
    const r = runTools("weights", { host: "spark-a", model: "acme/huge", cacheDir: hfHome, strategy: "download", expectedBytes: 1e18 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /spark-a: [\d.]+ GB free at .* but acme\/huge needs about 1000000000\.0 GB: free disk space or use another cacheDir/);
});

test("endpoint probe: a hang is reported at the timeout with the last log lines and progress on the way", async () => {
    const s = await serve({ nccl_hang: true });
    try {
        const r = runTools("endpoint-probe", probeArgs(s, 4), s.env, "k-123\n");
        assert.equal(r.status, 1);
        assert.match(r.stderr, /vllm serve on spark-a did not become healthy within 4 s/);
        assert.match(r.stderr, /no known root cause found in the log; full log: spark-a:/);
        const tail = r.stderr.split("last lines:\n")[1].split("\n").filter(Boolean);
        assert.ok(tail.length > 0 && tail.length <= 15, `${tail.length} last lines`);
    } finally {
        process.kill(Number(fs.readFileSync(s.pidFile, "utf8")), "SIGKILL");
    }
});

test("head-then-copy: a worker copies the head's snapshot over HTTP, resuming a partial file", async () => {
    const port = await freePort();
    const server = spawn("python3", [tools, "serve-weights", JSON.stringify({ host: "spark-a", model: QWEN35_122B_FP8.id, cacheDir: hfHome, bind: "127.0.0.1", port })],
        { stdio: ["ignore", "pipe", "pipe"], detached: true });
    try {
        await new Promise<void>(resolve => server.stdout!.once("data", () => resolve()));
        const worker = path.join(dir, "worker-hf");
        const headSnap = fs.readdirSync(path.join(hfHome, "hub", "models--Qwen--Qwen3.5-122B-A10B-FP8", "snapshots"))[0];
        const shard = "model-00001-of-00001.safetensors";
        const partial = path.join(worker, "hub", "models--Qwen--Qwen3.5-122B-A10B-FP8", "snapshots", headSnap, shard);
        fs.mkdirSync(path.dirname(partial), { recursive: true });
        const full = fs.readFileSync(path.join(hfHome, "hub", "models--Qwen--Qwen3.5-122B-A10B-FP8", "snapshots", headSnap, shard));
        fs.writeFileSync(partial, full.subarray(0, Math.floor(full.length / 2)));
        const args = { host: "spark-b", model: QWEN35_122B_FP8.id, cacheDir: worker, strategy: "copy", source: `http://127.0.0.1:${port}` };
        const r = runTools("weights", args);
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /spark-b: copying Qwen\/Qwen3\.5-122B-A10B-FP8 from http:\/\/127\.0\.0\.1:\d+: 0\.00 of 0\.00 GB already here/);
        assert.match(r.stdout, /spark-b: copy complete/);
        assert.deepEqual(fs.readFileSync(partial), full, "the partial file was completed, not corrupted");
        const workerManifest = JSON.parse(r.stdout.trim().split("\n").pop()!);
        const headManifest = JSON.parse(runTools("weights", { host: "spark-a", model: QWEN35_122B_FP8.id, cacheDir: hfHome, strategy: "present" }).stdout.trim().split("\n").pop()!);
        assert.deepEqual(workerManifest.files, headManifest.files);
        assert.equal(workerManifest.revision, headManifest.revision);
        const again = runTools("weights", args);
        assert.match(again.stdout, /already here/);
        const unreachable = runTools("weights", { ...args, source: "http://127.0.0.1:1" });
        assert.equal(unreachable.status, 1);
        assert.match(unreachable.stderr, /spark-b: cannot reach the head's weights at http:\/\/127\.0\.0\.1:1/);
    } finally {
        process.kill(-server.pid!, "SIGKILL");
    }
});
