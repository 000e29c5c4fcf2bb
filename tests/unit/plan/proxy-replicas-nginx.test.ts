// The front proxy of several replicas (components/plan/proxyPlan.ts nginxConf with `replicas`), run by the real nginx on
// loopback in front of two upstreams standing in for the replicas (the first replica's vLLM, the second replica's proxy):
// requests with the key reach both (least_conn) with the client's Authorization header; a replica that refuses the
// connection, or answers 502 as a replica proxy without its vLLM does, is passed over, for POSTs too; /health answers
// while one replica does. Needs an nginx binary and root (tests/unit/plan/realNginx.ts).
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as http from "node:http";
import { parseSpec } from "../../../components/spec/parseSpec";
import { REPLICAS_FILE, nginxConf, replicasFile } from "../../../components/plan/proxyPlan";
import { RunningNginx, freePort, startNginx } from "./realNginx";
import { rawConfig } from "../../fixtures";

const KEY = "k3yForReplicas";

/** A stand-in replica: answers every request with its name, or with `status` when set (a replica proxy without vLLM: 502). */
function replica(name: string, seen: string[]) {
    const state = { status: 200 };
    const server = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
            seen.push(`${name} ${req.method} ${req.url} ${req.headers.authorization ?? "-"}`);
            res.writeHead(state.status, { "Content-Type": "application/json" });
            setTimeout(() => res.end(JSON.stringify({ replica: name })), 20);
        });
    });
    return { server, state };
}

function request(port: number, method: string, url: string, key?: string): Promise<{ status: number; body: string }> {
    return new Promise(resolve => {
        const body = method === "POST" ? JSON.stringify({ model: "m", prompt: "hi" }) : undefined;
        const req = http.request({ host: "127.0.0.1", port, method, path: url, agent: false,
            headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(body ? { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } : {}) } }, res => {
            let text = "";
            res.on("data", d => (text += d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        });
        req.on("error", e => resolve({ status: 0, body: String(e) }));
        req.end(body);
    });
}

/** `n` POSTs with the key, `concurrency` at a time; the statuses and which replica answered each. */
async function load(port: number, n: number, concurrency: number) {
    const results: Array<{ status: number; replica?: string }> = [];
    let next = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next < n) {
            next++;
            const r = await request(port, "POST", "/v1/completions", KEY);
            results.push({ status: r.status, replica: r.status === 200 ? JSON.parse(r.body).replica : undefined });
        }
    }));
    return results;
}

describe("the front proxy of two replicas, run by the real nginx on loopback", () => {
    let port = 0;
    let running: RunningNginx | undefined;
    const seen: string[] = [];
    const one = replica("one", seen), two = replica("two", seen);

    before(async () => {
        port = await freePort();
        const [p1, p2] = [await freePort(), await freePort()];
        await new Promise<void>(r => one.server.listen(p1, "127.0.0.1", r));
        await new Promise<void>(r => two.server.listen(p2, "127.0.0.1", r));
        const spec = parseSpec({ ...rawConfig(1), vllm: { ...rawConfig(1).vllm, port, internalPort: p1 } });
        const servers = [`127.0.0.1:${p1}`, `127.0.0.1:${p2}`];
        running = startNginx(nginxConf(spec, { replicas: servers }), KEY, "spark-vllm-nginx-replicas-", { files: { [REPLICAS_FILE]: replicasFile(servers) } });
        const nginx = running.process;
        for (let i = 0; i < 100 && (await request(port, "GET", "/health")).status !== 200; i++) {
            assert.equal(nginx.exitCode, null, `nginx exited: ${running.stderr()}`);
            await new Promise(r => setTimeout(r, 50));
        }
    });

    after(async () => {
        await running?.stop();
        for (const r of [one, two]) if (r.server.listening) await new Promise(res => r.server.close(res));
    });

    test("with the key, requests reach both replicas, each with the client's Authorization header; without it, none", async () => {
        seen.length = 0;
        const results = await load(port, 60, 4);
        assert.deepEqual(results.filter(r => r.status !== 200), []);
        const counts = { one: results.filter(r => r.replica === "one").length, two: results.filter(r => r.replica === "two").length };
        assert.ok(counts.one >= 10 && counts.two >= 10, `least_conn spreads the load: ${JSON.stringify(counts)}`);
        assert.ok(seen.every(s => s.endsWith(`Bearer ${KEY}`)), seen.join("\n"));
        seen.length = 0;
        assert.equal((await request(port, "POST", "/v1/completions")).status, 401);
        assert.deepEqual(seen, []);
    });

    test("a replica answering 502 (its proxy without vLLM) is passed over, POSTs included: no request fails", async () => {
        two.state.status = 502;
        const results = await load(port, 40, 4);
        two.state.status = 200;
        assert.deepEqual(results.filter(r => r.status !== 200), []);
        assert.ok(results.every(r => r.replica === "one"));
    });

    test("a replica that refuses connections is passed over; /health answers while one replica does, 502 when none", async () => {
        await new Promise(r => two.server.close(r));
        const results = await load(port, 40, 4);
        assert.deepEqual(results.filter(r => r.status !== 200), []);
        assert.equal((await request(port, "GET", "/health")).status, 200);
        await new Promise(r => one.server.close(r));
        assert.equal((await request(port, "GET", "/health")).status, 502);
    });
});
