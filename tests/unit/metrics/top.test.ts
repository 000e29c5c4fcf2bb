// `spark-vllm top`: Prometheus' text format read, vLLM's figures picked by each release's names, rates and quantiles
// from two samples, the host script run for real (sh, a local HTTP server standing in for vLLM's keyed port), and the
// 80-column frame. Fixtures: tests/unit/metrics/fixtures/vllm-0.11-*.txt (names of vLLM 0.11 and later, the deprecated
// ones beside them) and vllm-0.10-*.txt (gpu_cache_usage_perc, time_per_output_token_seconds only).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { ClusterPlan } from "../../../components/plan/clusterPlan";
import { API_KEY_FILE } from "../../../components/plan/launches";
import { parseExposition } from "../../../components/metrics/exposition";
import { vllmSnapshot } from "../../../components/metrics/vllmMetrics";
import { histogramIncrease, histogramQuantile, counterIncrease } from "../../../components/metrics/rates";
import { HostSample, hostTopScript, parseHostTop } from "../../../components/metrics/topScript";
import { FRAME_COLUMNS, keepRounds, renderTop, topFigures } from "../../../components/metrics/top";
import { rawConfig } from "../../fixtures";

const ROOT = path.join(__dirname, "..", "..", "..");
const fixture = (name: string) => fs.readFileSync(path.join(__dirname, "fixtures", name), "utf8");
const snapshot = (name: string) => vllmSnapshot(parseExposition(fixture(name)).samples);
const close = (a: number | null | undefined, b: number) => assert.ok(a != null && Math.abs(a - b) < 1e-6, `${a} is not ${b}`);

test("the text format: labels with escapes, +Inf, NaN, a timestamp; a line that is no sample is counted, not guessed", () => {
    const { samples, skipped } = parseExposition([
        "# HELP x_total Some help with \\ and \"quotes\"",
        "# TYPE x_total counter",
        'x_total{a="1",b="say \\"hi\\"\\nthere\\\\"} 3.5 1700000000000',
        'h_bucket{le="+Inf"} +Inf',
        "g NaN",
        "vllm:num_requests_running 2e0",
        'broken{a="1" 2',
        "noval",
        "",
    ].join("\n"));
    assert.equal(samples.length, 4);
    assert.deepEqual(samples[0], { name: "x_total", labels: { a: "1", b: 'say "hi"\nthere\\' }, value: 3.5 });
    assert.equal(samples[1].value, Infinity);
    assert.ok(Number.isNaN(samples[2].value));
    assert.deepEqual(samples[3], { name: "vllm:num_requests_running", labels: {}, value: 2 });
    assert.equal(skipped, 2);
});

test("vLLM 0.11 and later: kv_cache_usage_perc and inter_token_latency_seconds; 0.10: the older names", () => {
    const now = snapshot("vllm-0.11-after.txt");
    assert.equal(now.running, 4);
    assert.equal(now.waiting, 3);
    assert.equal(now.kvCacheUsage, 0.42);
    assert.equal(now.promptTokens, 1600);
    assert.equal(now.generationTokens, 800);
    assert.equal(now.requestsDone, 30, "every finished_reason summed");
    assert.equal(now.ttft?.buckets.length, 23);
    assert.equal(now.interTokenLatency?.buckets.at(-1)?.count, 500);
    const old = snapshot("vllm-0.10-after.txt");
    assert.equal(old.kvCacheUsage, 0.42, "gpu_cache_usage_perc when kv_cache_usage_perc is absent");
    assert.equal(old.interTokenLatency?.buckets.at(-1)?.count, 500, "time_per_output_token_seconds when inter_token_latency_seconds is absent");
    // The newer name wins where both are served: a kv_cache_usage_perc unlike the deprecated one is the one read.
    const both = vllmSnapshot(parseExposition('vllm:gpu_cache_usage_perc{engine="0"} 0.9\nvllm:kv_cache_usage_perc{engine="0"} 0.2\n').samples);
    assert.equal(both.kvCacheUsage, 0.2);
});

test("quantiles as histogram_quantile computes them, from the observations between two samples; a reset counts from 0", () => {
    const ttft = histogramIncrease(snapshot("vllm-0.11-before.txt").ttft, snapshot("vllm-0.11-after.txt").ttft);
    // 10 new observations in (0.1, 0.25], 10 in (0.25, 0.5]: p50 at the top of the first, p95 at 0.25 + 0.25 × 9/10.
    close(histogramQuantile(0.5, ttft), 0.25);
    close(histogramQuantile(0.95, ttft), 0.475);
    const itl = histogramIncrease(snapshot("vllm-0.11-before.txt").interTokenLatency, snapshot("vllm-0.11-after.txt").interTokenLatency);
    close(histogramQuantile(0.5, itl), 0.025 + 0.025 * 50 / 90);
    close(histogramQuantile(0.95, itl), 0.0625);
    const inf = { buckets: [{ le: 1, count: 1 }, { le: 2, count: 1 }, { le: Infinity, count: 10 }] };
    assert.equal(histogramQuantile(0.95, inf), 2, "a rank in +Inf answers the highest finite bound");
    assert.equal(histogramQuantile(0.5, { buckets: [{ le: 1, count: 0 }, { le: Infinity, count: 0 }] }), null);
    assert.equal(counterIncrease(100, 30), 30);
    const reset = histogramIncrease(snapshot("vllm-0.11-after.txt").ttft, snapshot("vllm-0.11-before.txt").ttft);
    assert.equal(reset?.buckets.at(-1)?.count, 10);
});

function onePlan(): ClusterPlan {
    return planCluster(parseSpec(rawConfig(2)));
}

function twoReplicas(): ClusterPlan {
    const raw = rawConfig(2, { tp: 1 });
    raw.replicas = 2;
    return planCluster(parseSpec(raw));
}

const GiB = 1024 ** 3;
function sample(host: string, at: number, vllm?: string): HostSample {
    return {
        host, at, memory: { totalBytes: 121 * GiB, availableBytes: 80.25 * GiB, pageCacheBytes: 12 * GiB },
        gpu: { utilizationPercent: 96, temperatureC: 71 }, ...(vllm ? { vllm: snapshot(vllm) } : {}),
    };
}

test("figures and frame: tokens per second over the rate window, latency quantiles, memory and GPU; 80 columns", () => {
    const plan = onePlan();
    const figures = topFigures(plan, "two", [
        [sample("spark-a", 1000, "vllm-0.11-before.txt"), sample("spark-b", 1000)],
        [sample("spark-a", 1003, "vllm-0.11-after.txt"), sample("spark-b", 1003)],
    ]);
    const r = figures.replicas[0];
    assert.equal(figures.replicas.length, 1);
    assert.equal(r.promptTokensPerSecond, 200);
    assert.equal(r.generationTokensPerSecond, 100);
    assert.deepEqual(r.ttftSeconds, { p50: 0.25, p95: 0.475 });
    assert.deepEqual(r.interTokenLatencySeconds, { p50: 0.0389, p95: 0.0625 });
    assert.equal(r.kvCacheUsage, 0.42);
    assert.equal(r.frontShare, null, "no front share without replicas");
    assert.deepEqual(figures.hosts.map(h => [h.host, h.memAvailableGiB, h.pageCacheGiB, h.gpuUtilizationPercent, h.gpuTemperatureC]),
        [["spark-a", 80.3, 12, 96, 71], ["spark-b", 80.3, 12, 96, 71]]);
    assert.equal(figures.rateSeconds, 3);
    const frame = renderTop(figures);
    for (const line of frame.split("\n")) assert.ok(line.length <= FRAME_COLUMNS, `${line.length}: ${line}`);
    assert.match(frame, /^1 +4 +3 +42% +200\.0 +100\.0 +250ms\/475ms +39ms\/63ms/m);
    assert.match(frame, /^spark-b +1 +80\.3 GiB +12\.0 GiB +121\.0 GiB +96% +71C$/m);
    // One round: gauges only, the rates and quantiles unknown.
    const first = topFigures(plan, "two", [[sample("spark-a", 1000, "vllm-0.11-before.txt"), sample("spark-b", 1000)]]).replicas[0];
    assert.equal(first.running, 2);
    assert.equal(first.promptTokensPerSecond, null);
    assert.equal(first.ttftSeconds, null);
});

test("replicas: each head's figures, and its share of the requests completed in the window", () => {
    const plan = twoReplicas();
    const figures = topFigures(plan, "two", [
        [sample("spark-a", 1000, "vllm-0.11-before.txt"), sample("spark-b", 1000, "vllm-0.10-after.txt")],
        [sample("spark-a", 1003, "vllm-0.11-after.txt"), sample("spark-b", 1003, "vllm-0.10-after.txt")],
        [sample("spark-a", 1006, "vllm-0.11-after.txt"), { host: "spark-b", at: null, error: "ssh: connect to host 198.18.0.3 port 22: Connection refused" }],
    ].slice(0, 2));
    assert.deepEqual(figures.replicas.map(r => [r.replica, r.head, r.frontShare]), [[1, "spark-a", 1], [2, "spark-b", 0]]);
    assert.equal(figures.replicas[1].generationTokensPerSecond, 0);
    const down = topFigures(plan, "two", [
        [sample("spark-a", 1000, "vllm-0.11-before.txt"), sample("spark-b", 1000, "vllm-0.10-after.txt")],
        [sample("spark-a", 1003, "vllm-0.11-after.txt"), { host: "spark-b", at: null, error: "ssh: connect to host 198.18.0.3 port 22: Connection refused" }],
    ]);
    assert.equal(down.replicas[1].error, "spark-b: ssh: connect to host 198.18.0.3 port 22: Connection refused");
    assert.equal(down.replicas[0].frontShare, null, "no share claimed while a replica's count is unknown");
    const frame = renderTop(down);
    assert.match(frame, /^- spark-b: ssh: connect to host/m);
    for (const line of frame.split("\n")) assert.ok(line.length <= FRAME_COLUMNS, line);
});

test("keepRounds keeps the rounds of the last minute, and always two", () => {
    const round = (at: number) => [sample("spark-a", at)];
    assert.deepEqual(keepRounds([0, 3, 30, 61, 64].map(round)).map(r => r[0].at), [30, 61, 64]);
    assert.deepEqual(keepRounds([0, 100].map(round)).map(r => r[0].at), [0, 100]);
});

function executable(file: string, text: string) {
    fs.writeFileSync(file, text, { mode: 0o755 });
}

test("the host script for real: meminfo, nvidia-smi, and /metrics fetched in the container with the key from its file", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "top-script-"));
    const key = "sk-top-test-key";
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
        seen.push(`${req.url} ${req.headers.authorization ?? "none"}`);
        if (req.headers.authorization !== `Bearer ${key}`) { res.writeHead(401); res.end('{"error": "Unauthorized"}'); return; }
        res.end(fixture("vllm-0.11-after.txt"));
    });
    await new Promise<void>(r => server.listen(0, "127.0.0.1", r));
    try {
        const port = (server.address() as AddressInfo).port;
        const raw = rawConfig(2);
        raw.vllm.internalPort = port;
        const plan = planCluster(parseSpec(raw));
        const bin = path.join(dir, "bin");
        fs.mkdirSync(bin);
        fs.writeFileSync(path.join(dir, "api_key"), `${key}\n`);
        // `docker exec CONTAINER ARGV…` runs ARGV here, with the container's key file at its place in this directory.
        executable(path.join(bin, "docker"), `#!/usr/bin/env python3
import os, sys
assert sys.argv[1] == "exec", sys.argv
argv = [os.environ["KEY_FILE"] if a == ${JSON.stringify(API_KEY_FILE)} else a for a in sys.argv[3:]]
os.execvp(argv[0], argv)
`);
        executable(path.join(bin, "nvidia-smi"), '#!/bin/sh\n[ "$*" = "--query-gpu=utilization.gpu,temperature.gpu --format=csv,noheader,nounits" ] && echo "87, 66"\n');
        const run = (host: number, keyFile: string) => new Promise<HostSample>(resolve => {
            const sh = spawn("sh", ["-s"], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, KEY_FILE: keyFile } });
            let stdout = "", stderr = "";
            sh.stdout.on("data", d => { stdout += d; });
            sh.stderr.on("data", d => { stderr += d; });
            sh.on("close", code => resolve(parseHostTop(plan.hosts[host].host.name, code, stdout, stderr)));
            sh.stdin.end(hostTopScript(plan, plan.hosts[host]));
        });
        const head = await run(0, path.join(dir, "api_key"));
        assert.ok(head.at && Math.abs(head.at - Date.now() / 1000) < 60, JSON.stringify(head));
        assert.deepEqual(head.gpu, { utilizationPercent: 87, temperatureC: 66 });
        assert.ok(head.memory && "availableBytes" in head.memory && head.memory.availableBytes > 0 && head.memory.totalBytes >= head.memory.availableBytes, JSON.stringify(head.memory));
        assert.ok(head.vllm && "running" in head.vllm, JSON.stringify(head.vllm));
        assert.equal(head.vllm.generationTokens, 800);
        assert.deepEqual(seen, [`/metrics Bearer ${key}`]);
        assert.ok(!hostTopScript(plan, plan.hosts[0]).includes(key), "the key is never in the script");
        // A worker is not asked for metrics.
        const worker = await run(1, path.join(dir, "api_key"));
        assert.equal(worker.vllm, undefined);
        assert.equal(seen.length, 1);
        // The wrong key: vLLM's guard answers 401, and the sample says why.
        fs.writeFileSync(path.join(dir, "wrong_key"), "nope\n");
        const refused = await run(0, path.join(dir, "wrong_key"));
        assert.ok(refused.vllm && "error" in refused.vllm);
        assert.match(refused.vllm.error, /could not be read: .*401/);
    } finally {
        server.close();
        fs.rmSync(dir, { recursive: true, force: true });
    }
});

test("an unreachable host and an nvidia-smi that says N/A", () => {
    assert.deepEqual(parseHostTop("spark-b", 255, "", "ssh: connect to host 198.18.0.3 port 22: No route to host\n"),
        { host: "spark-b", at: null, error: "ssh: connect to host 198.18.0.3 port 22: No route to host" });
    const s = parseHostTop("spark-a", 0, "spark-vllm-top-clock 1700000000.5\nspark-vllm-top-gpu [N/A], 52\nspark-vllm-top-meminfo MemTotal: 100 kB\n", "");
    assert.deepEqual(s.gpu, { utilizationPercent: null, temperatureC: 52 });
    assert.ok(s.memory && "error" in s.memory);
    const broken = parseHostTop("spark-a", 0, "spark-vllm-top-clock 1\nspark-vllm-top-gpu NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\n", "");
    assert.match((broken.gpu as { error: string }).error, /^nvidia-smi: NVIDIA-SMI has failed/);
});

test("the simulated Sparks' /metrics (tests/sim/image/python/vllm/_sim_serve.py metrics()) reads as vLLM's", () => {
    const py = spawnSync("python3", ["-c", [
        "import sys, types", `sys.path.insert(0, ${JSON.stringify(path.join(ROOT, "tests/sim/image/python"))})`,
        "from vllm._sim_serve import metrics",
        "print(metrics(types.SimpleNamespace(served=['m'], stats={'prompt': 10, 'gen': 20, 'ok': 3}, util=0.85, kv_tokens=1600)))",
    ].join("\n")], { encoding: "utf8" });
    assert.equal(py.status, 0, py.stderr);
    const s = vllmSnapshot(parseExposition(py.stdout).samples);
    assert.deepEqual([s.running, s.waiting, s.kvCacheUsage, s.promptTokens, s.generationTokens, s.requestsDone], [0, 0, 0, 10, 20, 3]);
});
