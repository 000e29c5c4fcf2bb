// The helper program that runs on the hosts (components/hostProgram), run here against the
// stand-in vLLM package, a real local `vllm serve` stand-in and the sim image's real transformers (from PyPI, pinned:
// tests/sim/image-wheels.ts; fetched once per machine into ~/.cache/spark-vllm). No root, no Docker.
import { workerCopyToken } from "../../../components/plan/copyToken";
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { joinTools, TOOLS_FILE, TOOLS_MODULES, toolsData, toolsModuleFiles, toolsProgram } from "../../../components/plan/toolsProgram";
import { QWEN35_122B_FP8, QWEN3_30B_A3B, writeModel } from "../../sim/models";
import { KEYGUARD_MIDDLEWARE, withPythonPath } from "../../../components/plan/hostCommands";
import { hostSitePackages } from "../../sim/image-wheels";
import { DEFAULT_RELEASES } from "../../sim/image";

const IMAGE = path.join(__dirname, "..", "..", "sim", "image");
let dir: string;
let tools: string;
let hfHome: string;
let transformersSite: string;

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
        env: { ...process.env, PYTHONPATH: [path.join(IMAGE, "python"), transformersSite].join(path.delimiter), HF_HOME: hfHome, ...env },
    });
}

before(async () => {
    transformersSite = await hostSitePackages("transformers", DEFAULT_RELEASES["0.17.1"].transformers!);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-tools-"));
    tools = path.join(dir, TOOLS_FILE);
    fs.writeFileSync(tools, toolsProgram());
    hfHome = path.join(dir, "hf");
    writeModel(hfHome, QWEN35_122B_FP8);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test("the joined program: every module listed in order, nothing shadowed, deterministic, lint-clean", () => {
    assert.deepEqual(toolsModuleFiles().filter(m => m !== "main"), [...TOOLS_MODULES].sort(), "a module file missing from TOOLS_MODULES in components/plan/toolsProgram.ts, or listed but absent");
    const { program, problems } = joinTools();
    assert.deepEqual(problems, []);
    assert.equal(program, toolsProgram(), "byte for byte the same");
    assert.equal(TOOLS_FILE, "spark_vllm_tools.py");
    for (const m of [...TOOLS_MODULES, "main"]) assert.ok(program.includes(`\n# ---- spark_vllm/${m}.py\n`), m);
    assert.ok(!/^(?:from|import) +(?:spark_vllm|\.)/m.test(program), "no sibling import left");
    assert.equal(program.match(/^if __name__ == "__main__":/gm)?.length, 1, "only main.py's entry point");
    // A file, not stdin: pyflakes3 - cannot read a pipe on every machine ("-: No such file or directory").
    const joined = path.join(dir, "joined_for_lint.py");
    fs.writeFileSync(joined, program);
    const lint = spawnSync("pyflakes3", [joined], { encoding: "utf8" });
    assert.equal(lint.status, 0, `pyflakes3 on the joined program:\n${lint.stdout}${lint.stderr}`);
});

test("the joined program carries the catalogs as one line of JSON", () => {
    const lines = toolsProgram().split("\n").filter(l => l.startsWith("SPARK_VLLM_DATA"));
    assert.equal(lines.length, 1);
    const m = /^SPARK_VLLM_DATA = json\.loads\((".*")\)$/.exec(lines[0]);
    assert.ok(m, lines[0].slice(0, 80));
    assert.deepEqual(JSON.parse(JSON.parse(m[1])), JSON.parse(JSON.stringify(toolsData())));
    const read = spawnSync("python3", ["-c", "import runpy, sys, json; g = runpy.run_path(sys.argv[1], run_name='joined'); print(json.dumps(g['data']()['firstVllm']))", tools], { encoding: "utf8" });
    assert.equal(read.status, 0, read.stderr);
    assert.equal(JSON.parse(read.stdout).Qwen3_5MoeForConditionalGeneration, "0.17.0");
});

test("the joiner drops sibling imports and other modules' entry points, hoists stdlib imports, and names what it cannot join", () => {
    const pkg = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-join-"));
    try {
        for (const m of TOOLS_MODULES) fs.writeFileSync(path.join(pkg, `${m}.py`), `# ${m}\n`);
        fs.writeFileSync(path.join(pkg, "__init__.py"), "");
        fs.writeFileSync(path.join(pkg, "common.py"), "# helpers\nimport sys\n\n\ndef say(text):\n    print(text)\n");
        fs.writeFileSync(path.join(pkg, "extra.py"), [
            "import os", "import sys", "from spark_vllm.common import (", "    say,", ")", "", "",
            "def extra(args):", "    say(os.sep + sys.platform)", "", "",
            "if __name__ == \"__main__\":", "    extra({})", "",
        ].join("\n"));
        fs.writeFileSync(path.join(pkg, "main.py"), "# usage\nimport sys\n\nfrom .extra import extra\n\nCOMMANDS = {\"extra\": extra}\n\nif __name__ == \"__main__\":\n    extra(sys.argv)\n");
        const { program, problems } = joinTools(pkg);
        assert.deepEqual(problems, ["spark_vllm/extra.py is not in TOOLS_MODULES (components/plan/toolsProgram.ts): add it where its imports allow"]);
        assert.ok(program.startsWith("# usage\n#\n# Generated by components/plan/toolsProgram.ts"));
        assert.match(program, /\nimport json\nimport os\nimport sys\n\nSPARK_VLLM_DATA = /);
        assert.ok(program.indexOf("# ---- spark_vllm/extra.py") < program.indexOf("# ---- spark_vllm/main.py"), "unlisted modules come before main");
        assert.ok(!/spark_vllm\.common|from \.extra|^ +say,$|^\)$/m.test(program), program);
        assert.equal(program.match(/__main__/g)?.length, 1);
        const run = spawnSync("python3", ["-c", program.replace(/extra\(sys\.argv\)\n$/, "extra(None)\n")], { encoding: "utf8" });
        assert.equal(run.status, 0, run.stderr);
        assert.equal(run.stdout, `/${process.platform}\n`);

        fs.writeFileSync(path.join(pkg, "common.py"), "def say(text):\n    print(text)\n\n\ndef extra():\n    pass\n");
        assert.deepEqual(joinTools(pkg).problems.slice(1), ["extra is bound at top level by both spark_vllm/common.py and spark_vllm/extra.py, and the joined file has one namespace: import it from one, or rename one"]);
        fs.writeFileSync(path.join(pkg, "common.py"), "from spark_vllm.extra import extra\n");
        assert.throws(() => joinTools(pkg), /common\.py imports extra from spark_vllm\.extra, which is not joined before it/);
        fs.writeFileSync(path.join(pkg, "common.py"), "from spark_vllm import extra\n");
        assert.throws(() => joinTools(pkg), /import siblings as `from spark_vllm\.<module> import name, \.\.\.`/);
        fs.rmSync(path.join(pkg, "images.py"));
        assert.throws(() => joinTools(pkg), /lists spark_vllm\/images\.py, which does not exist/);
    } finally {
        fs.rmSync(pkg, { recursive: true, force: true });
    }
});

const compatArgs = () => ({ model: QWEN35_122B_FP8.id, cacheDir: hfHome, trustRemoteCode: false });

test("compat: an image whose vLLM lacks the architecture is refused with both versions and the fix", () => {
    const r = runTools("compat", compatArgs(), { VLLM_SIM_RELEASE: release("0.14.0", ["Qwen3MoeForCausalLM", "LlamaForCausalLM"]) });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /Qwen\/Qwen3\.5-122B-A10B-FP8 needs architecture Qwen3_5MoeForConditionalGeneration, which vLLM 0\.14\.0 in this image does not support; it is supported from vLLM 0\.17\.0/);
    assert.match(r.stderr, /Copying model files between vLLM versions does not work/);
});

test("compat: a supporting image passes in seconds and reports what it read", () => {
    // backend mp: the stand-ins carry no Ray (real Ray is in the sim image only; its checks run end to end)
    const r = runTools("compat", { ...compatArgs(), declaredVllmVersion: "0.17.1", backend: "mp" }, { VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]) });
    assert.equal(r.status, 0, r.stderr);
    const facts = JSON.parse(r.stdout.trim().split("\n").pop()!);
    assert.equal(facts.vllmVersion, "0.17.1");
    assert.deepEqual(facts.architectures, ["Qwen3_5MoeForConditionalGeneration"]);
    assert.equal(facts.modelType, "qwen3_5_moe");
    assert.ok(facts.seconds < 10);
});

test("compat: the block-FP8 sim model on a vLLM whose SM120 FP8 kernels are sm_120a (vLLM 0.17.1's CUDA 12.9 image) is refused; sm_120f passes", () => {
    const kernelsFile = (name: string, kernels: object) => {
        const file = path.join(dir, `release-${name}.json`);
        fs.writeFileSync(file, JSON.stringify({ version: "0.17.1", architectures: ["Qwen3_5MoeForConditionalGeneration"], transformers: "4.57.1", vllm_kernels: kernels }));
        return file;
    };
    const cu129 = runTools("compat", { ...compatArgs(), backend: "mp" }, { VLLM_SIM_RELEASE: kernelsFile("cu129", { cuda: "12.9.1", scaled_mm_sm120: ["sm_120a"], nvfp4_sm120: ["sm_120a"] }) });
    assert.equal(cu129.status, 1);
    assert.match(cu129.stderr, /Qwen\/Qwen3\.5-122B-A10B-FP8 is fp8-block \(quant_method fp8\)\. vLLM 0\.17\.1 in this image answers cutlass_scaled_mm_supports_block_fp8\(121\) = True and uses its own CUTLASS block FP8 GEMM \(vllm\._custom_ops\.cutlass_scaled_mm, block scales\), which fails on this GPU \(compute capability 12\.1\): RuntimeError: Error Internal\./);
    assert.match(cu129.stderr, /known to carry it: vllm\/vllm-openai:v0\.33\.0, .*vllm\/vllm-openai:v0\.17\.1-cu130/);
    const cu130 = runTools("compat", { ...compatArgs(), backend: "mp" }, { VLLM_SIM_RELEASE: kernelsFile("cu130", { cuda: "13.0.1", scaled_mm_sm120: ["sm_120f"], nvfp4_sm120: ["sm_120f"] }) });
    assert.equal(cu130.status, 0, cu130.stderr);
    const q = JSON.parse(cu130.stdout.trim().split("\n").pop()!).quantization;
    assert.deepEqual([q.method, q.scheme, q.checked, q.answers.minCapability, q.answers.supportsBlockFp8, q.answers.kernelRun.error], ["fp8", "fp8-block", true, 75, true, null]);
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
    // real transformers' own words (configuration_auto.py), quoted
    assert.match(unknown.stderr, /transformers 4\.57\.1 in this image does not recognize model_type 'qwen9_moe' of acme\/custom-model, and vLLM 0\.17\.1 has no config of its own for it either/);
    assert.match(unknown.stderr, /transformers said: The checkpoint you are trying to load has model type `qwen9_moe` but Transformers does not recognize this architecture/);
});

test("compat: the default sim model's qwen3_5_moe is vLLM 0.17.1's own config, which real transformers 4.57.1 does not know; 0.14.0 has neither", () => {
    const ok = runTools("compat", { ...compatArgs(), backend: "mp" }, { VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3_5MoeForConditionalGeneration"]) });
    assert.equal(ok.status, 0, ok.stderr);
    const lines = ok.stdout.trim().split("\n");
    assert.equal(JSON.parse(lines.at(-1)!).modelTypeKnownBy, "vllm");
    assert.equal(JSON.parse(lines.at(-1)!).transformers, "4.57.1");
    assert.match(lines.at(-2)!, /^model_type 'qwen3_5_moe' of Qwen\/Qwen3\.5-122B-A10B-FP8: vLLM 0\.17\.1 reads it with its own config class/);
    assert.equal(ok.stderr, "", "transformers' own advice (no PyTorch it can see) stays out of the check's output");
    const old = runTools("compat", { ...compatArgs(), backend: "mp" }, { VLLM_SIM_RELEASE: release("0.14.0", ["Qwen3_5MoeForConditionalGeneration"]) });
    assert.equal(old.status, 1);
    assert.match(old.stderr, /does not recognize model_type 'qwen3_5_moe' of Qwen\/Qwen3\.5-122B-A10B-FP8, and vLLM 0\.14\.0 has no config of its own/);
});

test("compat: a model type transformers knows is read by the real AutoConfig from the sim snapshot", () => {
    writeModel(hfHome, QWEN3_30B_A3B);
    const r = runTools("compat", { ...compatArgs(), model: QWEN3_30B_A3B.id, backend: "mp" }, { VLLM_SIM_RELEASE: release("0.17.1", ["Qwen3MoeForCausalLM"]) });
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    assert.equal(JSON.parse(lines.at(-1)!).modelTypeKnownBy, "transformers");
    assert.equal(lines.at(-2), "model_type 'qwen3_moe' of Qwen/Qwen3-30B-A3B: transformers 4.57.1's AutoConfig reads it");
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
async function serve(faults: object | null, extra: { args?: string[]; wrap?: (argv: string[]) => string[] } = {}): Promise<{ port: number; log: string; pidFile: string; env: Record<string, string> }> {
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
    const argv = [path.join(IMAGE, "bin", "vllm"), "serve", QWEN35_122B_FP8.id, "--served-model-name", "qwen", "--host", "127.0.0.1", "--port", String(port), ...(extra.args ?? [])];
    const [cmd, ...rest] = extra.wrap ? extra.wrap(argv) : argv;
    const child = spawn(cmd, rest, { env, stdio: ["ignore", out, out], detached: true });
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

test("the key guard: vllm serve --middleware imports it from the shipped file (logDir on PYTHONPATH); every path but /health asks the key", async () => {
    const s = await serve({ load_seconds: 1 }, { args: ["--middleware", KEYGUARD_MIDDLEWARE], wrap: argv => withPythonPath(dir, argv) });
    const open = await serve({ load_seconds: 1 });
    try {
        const base = `http://127.0.0.1:${s.port}`;
        const ready = runTools("endpoint-probe", { ...probeArgs(s), internalPort: s.port }, s.env, "k-123\n");
        assert.equal(ready.status, 0, ready.stderr);
        assert.equal(JSON.parse(ready.stdout.trim().split("\n").pop()!).vllmVersion, "0.17.1", "/version read with the key");
        assert.equal((await fetch(`${base}/health`)).status, 200);
        for (const p of ["/metrics", "/metricsX", "/version", "/v1/models", "/load", "/ping"]) {
            const r = await fetch(base + p);
            assert.equal(r.status, 401, `${p} without the key`);
            assert.equal(r.headers.get("www-authenticate"), "Bearer");
        }
        for (const p of ["/invocations", "/tokenize", "/v1/completions"])
            assert.equal((await fetch(base + p, { method: "POST", body: "{}" })).status, 401, `POST ${p} without the key`);
        const metrics = await fetch(`${base}/metrics`, { headers: { Authorization: "Bearer k-123" } });
        assert.equal(metrics.status, 200);
        assert.match(await metrics.text(), /^# (HELP|TYPE) vllm:/m);
        // Without the guard vLLM's own check leaves /metrics open, and the probe says so.
        assert.equal((await fetch(`http://127.0.0.1:${open.port}/metrics`)).status, 200);
        const unguarded = runTools("endpoint-probe", { ...probeArgs(open), internalPort: open.port }, open.env, "k-123\n");
        assert.equal(unguarded.status, 1);
        assert.match(unguarded.stderr, /answered \/metrics on its loopback port \d+ with 200 without the API key, not 401: its key guard/);
    } finally {
        for (const x of [s, open]) process.kill(Number(fs.readFileSync(x.pidFile, "utf8")), "SIGTERM");
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

test("head-then-copy: with the copy token a worker copies the head's snapshot, resuming a partial blob, and the server then stops", async () => {
    const port = await freePort();
    const token = "copy-token-123";
    const server = spawn("python3", [tools, "serve-weights", JSON.stringify({ host: "spark-a", model: QWEN35_122B_FP8.id, cacheDir: hfHome, bind: "127.0.0.1", port, workers: ["spark-b"], idleSeconds: 30 })],
        { stdio: ["pipe", "pipe", "pipe"], detached: true });
    server.stdin!.end(`${token}\n`);
    let serverOut = "";
    server.stdout!.on("data", d => (serverOut += d));
    const exited = new Promise<number | null>(resolve => server.once("exit", code => resolve(code)));
    try {
        await new Promise<void>(resolve => server.stdout!.once("data", () => resolve()));
        const worker = path.join(dir, "worker-hf");
        const repo = path.join("hub", "models--Qwen--Qwen3.5-122B-A10B-FP8");
        const headSnap = fs.readdirSync(path.join(hfHome, repo, "snapshots"))[0];
        const shard = "model-00001-of-00001.safetensors";
        const full = fs.readFileSync(path.join(hfHome, repo, "snapshots", headSnap, shard));
        const blob = crypto.createHash("sha256").update(full).digest("hex");
        fs.mkdirSync(path.join(worker, repo, "blobs"), { recursive: true });
        fs.writeFileSync(path.join(worker, repo, "blobs", `${blob}.incomplete`), full.subarray(0, Math.floor(full.length / 2)));
        const args = { host: "spark-b", model: QWEN35_122B_FP8.id, cacheDir: worker, strategy: "copy", source: `http://127.0.0.1:${port}`, tokenOnStdin: true };
        const wrong = runTools("weights", args, {}, "not-the-token\n");
        assert.equal(wrong.status, 1);
        assert.match(wrong.stderr, /answered 401 to the manifest request: the copy token does not match/);
        // The stack's copy token is the server's; a worker holds only its own (components/plan/copyToken.ts).
        assert.equal(runTools("weights", args, {}, `${token}\n`).status, 1);
        const r = runTools("weights", args, {}, `${workerCopyToken(token, "spark-b")}\n`);
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /spark-b: copying Qwen\/Qwen3\.5-122B-A10B-FP8 from http:\/\/127\.0\.0\.1:\d+: 0\.00 of 0\.00 GB already here/);
        assert.match(r.stdout, /spark-b: copy complete in \d+ s, every file's sha256 checked/);
        assert.equal(fs.readlinkSync(path.join(worker, repo, "snapshots", headSnap, shard)), `../../blobs/${blob}`);
        assert.deepEqual(fs.readFileSync(path.join(worker, repo, "snapshots", headSnap, shard)), full, "the partial blob was completed, not corrupted");
        const workerManifest = JSON.parse(r.stdout.trim().split("\n").pop()!);
        const headManifest = JSON.parse(runTools("weights", { host: "spark-a", model: QWEN35_122B_FP8.id, cacheDir: hfHome, strategy: "present" }).stdout.trim().split("\n").pop()!);
        assert.deepEqual(workerManifest.files, headManifest.files);
        assert.equal(workerManifest.revision, headManifest.revision);
        assert.equal(await exited, 0, "the server stopped once spark-b reported");
        assert.match(serverOut, /spark-a: every worker holds the weights \(spark-b\); stopped serving/);
        const unreachable = runTools("weights", { ...args, source: "http://127.0.0.1:1", waitSeconds: 0 }, {}, `${token}\n`);
        assert.equal(unreachable.status, 1);
        assert.match(unreachable.stderr, /spark-b: cannot reach the head's weights at http:\/\/127\.0\.0\.1:1/);
    } finally {
        if (server.exitCode === null) process.kill(-server.pid!, "SIGKILL");
    }
});
