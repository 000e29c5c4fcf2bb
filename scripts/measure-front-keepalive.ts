// Measures, with the real nginx on loopback, what the front of several replicas' `keepalive_timeout 0` costs and what it
// buys (issue 50, finding 7): throughput and latency of a keep-alive client with and without client keep-alive, for
// /health and for a completion that takes DELAY ms at the replica, and requests lost over 40 reloads (a rolling update's
// drain and undrain each reload the front) under the same client's load. The figures are in docs/security.md.
//   node --import tsx scripts/measure-front-keepalive.ts
import * as http from "node:http";
import { parseSpec } from "../components/spec/parseSpec";
import { REPLICAS_FILE, nginxConf, replicasFile } from "../components/plan/proxyPlan";
import { freePort, startNginx } from "../tests/unit/plan/realNginx";
import { rawConfig } from "../tests/fixtures";

const KEY = "keepaliveKey0123456789abcdefghijklmn";

function replica(delayMs: () => number) {
    return http.createServer((req, res) => { req.resume(); req.on("end", () => setTimeout(() => res.end('{"ok":1}'), delayMs())); });
}

async function load(port: number, path: string, n: number, concurrency: number, during?: () => Promise<void>) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    const latencies: number[] = [];
    let errors = 0, next = 0;
    const t0 = Date.now();
    let done = false;
    const lanes = Array.from({ length: concurrency }, async () => {
        while (during ? !done : next < n) {
            next++;
            const s = Date.now();
            await new Promise<void>(resolve => {
                const req = http.request({ host: "127.0.0.1", port, path, method: path === "/health" ? "GET" : "POST", agent,
                    headers: path === "/health" ? {} : { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json", "Content-Length": 2 } }, res => {
                    res.resume();
                    res.on("end", () => { if (res.statusCode !== 200) errors++; latencies.push(Date.now() - s); resolve(); });
                });
                req.on("error", () => { errors++; resolve(); });
                req.end(path === "/health" ? undefined : "{}");
            });
            if (during) await new Promise(r => setTimeout(r, 20));
        }
    });
    if (during) { await during(); done = true; }
    await Promise.all(lanes);
    const seconds = (Date.now() - t0) / 1000;
    agent.destroy();
    latencies.sort((a, b) => a - b);
    return { requests: latencies.length + (latencies.length < next ? 0 : 0), errors, perSecond: Math.round(latencies.length / seconds), p50ms: latencies[Math.floor(latencies.length / 2)], p99ms: latencies[Math.floor(latencies.length * 0.99)] };
}

async function main() {
    let delay = 0;
    const [p1, p2] = [await freePort(), await freePort()];
    const one = replica(() => delay), two = replica(() => delay);
    await new Promise<void>(r => one.listen(p1, "127.0.0.1", r));
    await new Promise<void>(r => two.listen(p2, "127.0.0.1", r));
    const servers = [`127.0.0.1:${p1}`, `127.0.0.1:${p2}`];
    for (const keepalive of ["0", "2s", "75s (nginx's default)"]) {
        const port = await freePort();
        const spec = parseSpec({ ...rawConfig(1), vllm: { ...rawConfig(1).vllm, port, internalPort: p1 } });
        let conf = nginxConf(spec, { replicas: servers });
        conf = conf.replace("        keepalive_timeout 0;\n        proxy_next_upstream", keepalive === "0" ? "        keepalive_timeout 0;\n        proxy_next_upstream"
            : `        keepalive_timeout ${keepalive.split(" ")[0]};\n        proxy_next_upstream`);
        const nginx = startNginx(conf, KEY, "spark-vllm-keepalive-", { files: { [REPLICAS_FILE]: replicasFile(servers) } });
        await new Promise(r => setTimeout(r, 500));
        const out: Record<string, unknown> = { keepalive_timeout: keepalive };
        delay = 0;
        out.health = await load(port, "/health", 3000, 1);
        out.healthConcurrency8 = await load(port, "/health", 6000, 8);
        delay = 50;
        out.completion50ms = await load(port, "/v1/completions", 800, 8);
        delay = 5;
        const master = Number(require("node:fs").readFileSync(`${nginx.dir}/nginx.pid`, "utf8"));
        out.over40Reloads = await load(port, "/v1/completions", 0, 4, async () => {
            for (let i = 0; i < 40; i++) { await new Promise(r => setTimeout(r, 150)); process.kill(master, "SIGHUP"); }
            await new Promise(r => setTimeout(r, 300));
        });
        await nginx.stop();
        console.log(JSON.stringify(out));
    }
    one.close(); two.close();
}
main().catch(e => { console.error(e); process.exit(1); });
