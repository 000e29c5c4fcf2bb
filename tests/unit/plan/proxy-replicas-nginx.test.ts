// The front proxy of several replicas (components/plan/proxyPlan.ts nginxConf with `replicas`), run by the real nginx on
// loopback in front of two upstreams standing in for the replicas (the first replica's vLLM, the second replica's proxy):
// requests with the key reach both (least_conn) with the client's Authorization header; a replica that refuses the
// connection, or answers 502 as a replica proxy without its vLLM does, is passed over, for POSTs too; /health answers
// while one replica does. Needs an nginx binary as proxy-nginx.test.ts does ($SPARK_VLLM_NGINX, else /usr/sbin/nginx).
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { ChildProcess, spawn } from "node:child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { PROXY_MOUNT, nginxConf } from "../../../components/plan/proxyPlan";
import { rawConfig } from "../../fixtures";

const NGINX = process.env.SPARK_VLLM_NGINX ?? "/usr/sbin/nginx";
const KEY = "k3yForReplicas";

function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => { const p = (s.address() as net.AddressInfo).port; s.close(() => resolve(p)); });
    });
}

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
    let dir = "", stderr = "", port = 0;
    let nginx: ChildProcess | undefined;
    const seen: string[] = [];
    const one = replica("one", seen), two = replica("two", seen);

    before(async () => {
        assert.ok(fs.existsSync(NGINX), `no nginx at ${NGINX}: install Debian's nginx (apt-get install nginx) or set SPARK_VLLM_NGINX`);
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-nginx-replicas-"));
        fs.chmodSync(dir, 0o755);
        port = await freePort();
        const [p1, p2] = [await freePort(), await freePort()];
        await new Promise<void>(r => one.server.listen(p1, "127.0.0.1", r));
        await new Promise<void>(r => two.server.listen(p2, "127.0.0.1", r));
        const spec = parseSpec({ ...rawConfig(1), vllm: { ...rawConfig(1).vllm, port, internalPort: p1 } });
        let conf = nginxConf(spec, { replicas: [`127.0.0.1:${p1}`, `127.0.0.1:${p2}`] });
        const move = (from: string, to: string) => { assert.ok(conf.includes(from), from); conf = conf.split(from).join(to); };
        move(PROXY_MOUNT, dir);
        move("pid /tmp/nginx.pid;", `pid ${dir}/nginx.pid;`);
        move("    server_tokens off;", `    server_tokens off;\n` +
            ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(t => `    ${t}_temp_path ${dir}/${t};\n`).join(""));
        fs.writeFileSync(path.join(dir, "nginx.conf"), conf);
        fs.writeFileSync(path.join(dir, "api-key.map"), `"~^[Bb][Ee][Aa][Rr][Ee][Rr] ${KEY}$" 1;\n`);
        nginx = spawn(NGINX, ["-e", "stderr", "-p", dir, "-c", path.join(dir, "nginx.conf")], { stdio: ["ignore", "ignore", "pipe"] });
        nginx.stderr!.on("data", d => (stderr += d));
        for (let i = 0; i < 100 && (await request(port, "GET", "/health")).status !== 200; i++) {
            assert.equal(nginx.exitCode, null, `nginx exited: ${stderr}`);
            await new Promise(r => setTimeout(r, 50));
        }
    });

    after(async () => {
        if (nginx && nginx.exitCode === null) {
            nginx.kill("SIGTERM");
            await new Promise(r => nginx!.once("exit", r));
        }
        for (const r of [one, two]) if (r.server.listening) await new Promise(res => r.server.close(res));
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
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
