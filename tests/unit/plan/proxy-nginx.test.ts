// The generated nginx configuration (components/plan/proxyPlan.ts nginxConf), run by the real nginx on loopback in front of
// an upstream that records what reaches it (standing in for vLLM, with vLLM's prefix-mounted /metrics). Requests go out
// on raw sockets (node:net), so the exact request target is sent: dot segments, encoded "/" and ".", "//", the absolute
// form, bodies that must not be buffered.
//
// Needs an nginx binary and root (tests/unit/plan/realNginx.ts).
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as path from "node:path";
import { parseSpec } from "../../../components/spec/parseSpec";
import { nginxConf } from "../../../components/plan/proxyPlan";
import { RunningNginx, freePort, startNginx } from "./realNginx";
import { rawConfig } from "../../fixtures";

const KEY = "Kx7.q+Z/09_~-=";

interface Seen { method: string; url: string; authorization?: string; bodyBytes: number }

/**
 * What vLLM would do with a path, as far as these tests need: /metrics is a mounted ASGI app
 * (vllm/entrypoints/serve/instrumentator/metrics.py: `Mount("/metrics", make_asgi_app())`), so every path under it
 * answers Prometheus text; anything else answers JSON naming the path.
 */
function upstream(seen: Seen[]): http.Server {
    return http.createServer((req, res) => {
        let bodyBytes = 0;
        req.on("data", d => (bodyBytes += d.length));
        req.on("end", () => {
            seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization, bodyBytes });
            if (req.url!.startsWith("/metrics")) {
                res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
                res.end("# HELP vllm:num_requests_running Number of requests in model execution batches.\n");
            } else {
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end(JSON.stringify({ path: req.url }));
            }
        });
    });
}

interface Answer { status: number; head: string; body: string; raw: string }

/** Sends `request` (exact bytes) on a fresh connection and reads the answer until the server closes or `ms` pass. */
function send(port: number, request: string | Buffer, opts: { ms?: number; then?: (s: net.Socket) => void } = {}): Promise<Answer> {
    return new Promise(resolve => {
        const s = net.connect(port, "127.0.0.1");
        let raw = "";
        const done = () => {
            s.destroy();
            const [head, ...rest] = raw.split("\r\n\r\n");
            const m = /^HTTP\/1\.[01] (\d{3})/.exec(raw);
            resolve({ status: m ? Number(m[1]) : 0, head, body: rest.join("\r\n\r\n"), raw });
        };
        const timer = setTimeout(done, opts.ms ?? 3000);
        s.on("data", d => (raw += d.toString("latin1")));
        s.on("error", () => {});
        s.on("close", () => { clearTimeout(timer); done(); });
        s.write(request, () => opts.then?.(s));
    });
}

/** What one connection saw: every byte the server sent, whether the server ended the connection (FIN or RST) before the
 * test gave up, and how many body bytes the client's kernel accepted (counted in write callbacks, so at most one piece
 * short of it): an upper bound of what nginx can have read of the body. */
interface Exchange { raw: string; status: number; head: string; closedByServer: boolean; accepted: number; ms: number; error: string }

/**
 * Opens a connection, sends `head`, then (unless `piece` is absent) the body as `pieces` pieces, each once the kernel
 * took the previous one and `pauseMs` more passed, until the server closes the connection, the body is sent, or
 * `limitMs` pass. With `continueWith`, the client waits for the first response head and sends that body only after an
 * interim `100 Continue`, as an HTTP client that sent `Expect: 100-continue` does (RFC 9110 section 10.1.1).
 */
function exchange(port: number, head: string, opts: { piece?: Buffer; pieces?: number; pauseMs?: number; end?: Buffer; limitMs: number; continueWith?: Buffer }): Promise<Exchange> {
    return new Promise(resolve => {
        const s = net.connect(port, "127.0.0.1");
        const started = Date.now();
        let raw = "", accepted = 0, sentPieces = 0, error = "", continued = false, finished = false;
        const finish = (closedByServer: boolean) => {
            if (finished) return;
            finished = true;
            clearTimeout(timer);
            s.destroy();
            const m = /^HTTP\/1\.[01] (\d{3})/.exec(raw);
            resolve({ raw, status: m ? Number(m[1]) : 0, head: raw.split("\r\n\r\n")[0], closedByServer, accepted, ms: Date.now() - started, error });
        };
        const timer = setTimeout(() => finish(false), opts.limitMs);
        s.on("data", d => {
            raw += d.toString("latin1");
            if (opts.continueWith && !continued && /^HTTP\/1\.1 100 Continue\r\n\r\n/.test(raw)) {
                continued = true;
                s.write(opts.continueWith);
            }
        });
        s.on("error", e => (error = String(e)));
        s.on("close", () => finish(true));
        const more = () => {
            if (s.destroyed || finished) return;
            if (sentPieces >= (opts.pieces ?? 0)) { if (opts.end) s.write(opts.end); return; }
            sentPieces++;
            s.write(opts.piece!, e => {
                if (e) return;
                accepted += opts.piece!.length;
                if (opts.pauseMs) setTimeout(more, opts.pauseMs); else more();
            });
        };
        s.write(head, () => { if (opts.piece) more(); });
    });
}

/** One chunk of a chunked body (RFC 9112 section 7.1) holding `size` bytes. */
const chunkOf = (size: number) => Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), Buffer.alloc(size, "a"), Buffer.from("\r\n")]);
const MiB = 1024 * 1024;

const line = (method: string, target: string, headers: Record<string, string> = {}, body = "") =>
    `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n` +
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
    (body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : "") + `\r\n${body}`;
const withKey = { Authorization: `Bearer ${KEY}` };

describe("the generated nginx configuration, run by the real nginx on loopback", () => {
    let running: RunningNginx | undefined;
    let port = 0;
    let upstreamServer: http.Server;
    const seen: Seen[] = [];

    before(async () => {
        port = await freePort();
        const internalPort = await freePort();
        upstreamServer = upstream(seen);
        await new Promise<void>(r => upstreamServer.listen(internalPort, "127.0.0.1", r));
        const spec = parseSpec({ ...rawConfig(1), vllm: { ...rawConfig(1).vllm, port, internalPort } });
        running = startNginx(nginxConf(spec), KEY, "spark-vllm-nginx-");
        const nginx = running.process;
        for (let i = 0; i < 100; i++) {
            if ((await send(port, line("GET", "/health"), { ms: 500 })).status === 200) break;
            assert.equal(nginx.exitCode, null, `nginx exited: ${running.stderr()}`);
            await new Promise(r => setTimeout(r, 50));
        }
        seen.length = 0;
    });

    after(async () => {
        await running?.stop();
        await new Promise(r => upstreamServer?.close(r));
    });

    /** Asserts that `request` is refused (a 4xx) and that nothing reached the upstream. */
    async function refused(request: string, why: string) {
        seen.length = 0;
        const a = await send(port, request);
        assert.ok(a.status >= 400 && a.status < 500, `${why}: refused, got ${a.status} ${a.body}`);
        assert.doesNotMatch(a.body, /# HELP/, `${why}: no metrics`);
        assert.deepEqual(seen, [], `${why}: nothing reaches vLLM`);
        return a;
    }

    test("raw paths that normalise onto another location reach nothing, with or without the key", async () => {
        const targets = [
            "/metrics/../health", "/metrics/..%2Fhealth", "/metrics%2F..%2Fhealth", "/metrics%2f..%2fhealth", "/metrics/%2E%2E/health",
            "/metrics/%2e%2e/health", "/health/../metrics", "/health/%2e%2e/metrics", "/v1/models/../../metrics", "/metricsX/../v1/models",
            "/v1/x/../models", "/v1/./models", "//v1/models", "/v1//models", "/v1/models/", "/v1/models/.", "/v1/%6Dodels",
            "/./health", "/health/.", "/health%3F", "/health;x", "/v1/models%00", "/metrics/", "/metrics/x", "/", "/v1/models#x", "/v1/mod\\els",
        ];
        for (const t of targets) {
            await refused(line("GET", t), `GET ${t} without the key`);
            await refused(line("GET", t, withKey), `GET ${t} with the key`);
        }
    });

    test("the absolute-URI form is refused, with or without the key", async () => {
        for (const t of ["http://127.0.0.1/metrics/../health", "http://127.0.0.1/health", "http://127.0.0.1/v1/models", "http://h/metrics"]) {
            await refused(line("GET", t), `GET ${t}`);
            await refused(line("GET", t, withKey), `GET ${t} with the key`);
        }
    });

    test("the allowed routes answer with the key and reach vLLM on exactly that path; without it, 401 and nothing reaches vLLM", async () => {
        const routes: Array<[string, string]> = [
            ["GET", "/v1/models"], ["POST", "/v1/completions"], ["POST", "/v1/chat/completions"], ["POST", "/v1/embeddings"],
            ["POST", "/v1/responses"], ["GET", "/v1/responses/resp_0a1b2c"], ["POST", "/v1/responses/resp_0a1b2c/cancel"],
            ["POST", "/v1/audio/transcriptions"], ["POST", "/v1/audio/translations"],
            ["POST", "/v1/rerank"], ["POST", "/v1/score"], ["POST", "/v2/rerank"], ["POST", "/rerank"], ["POST", "/score"],
            ["POST", "/v1/messages"], ["POST", "/v1/messages/count_tokens"], ["GET", "/metrics"], ["GET", "/v1/models?x=1"],
        ];
        for (const [method, route] of routes) {
            const body = method === "POST" ? "{}" : "";
            seen.length = 0;
            const a = await send(port, line(method, route, { ...withKey, ...(body ? { "Content-Type": "application/json" } : {}) }, body));
            assert.equal(a.status, 200, `${method} ${route} with the key: ${a.raw}`);
            assert.deepEqual(seen.map(s => [s.method, s.url, s.authorization]), [[method, route, `Bearer ${KEY}`]], `${method} ${route}: forwarded as is`);
            const denied = await refused(line(method, route, {}, body), `${method} ${route} without the key`);
            assert.equal(denied.status, 401, `${method} ${route} without the key`);
            assert.match(denied.head, /^WWW-Authenticate: Bearer$/m);
        }
        // Prometheus with a bearer token (its scrape_config `authorization: { credentials: … }`, type Bearer by default).
        seen.length = 0;
        const metrics = await send(port, line("GET", "/metrics", { Authorization: `Bearer ${KEY}`, Accept: "text/plain" }));
        assert.equal(metrics.status, 200);
        assert.match(metrics.body, /^# HELP vllm:/m);
    });

    test("other paths: 401 without the key, 404 with it, nothing forwarded", async () => {
        for (const p of ["/invocations", "/tokenize", "/detokenize", "/pooling", "/classify", "/version", "/load", "/ping", "/v1/load_lora_adapter", "/v1/modelsX", "/inference/v1/generate"]) {
            assert.equal((await refused(line("POST", p, {}, "{}"), `${p} without the key`)).status, 401, p);
            assert.equal((await refused(line("POST", p, withKey, "{}"), `${p} with the key`)).status, 404, p);
        }
    });

    test("/health: GET and HEAD without a key; any other method or a body is refused", async () => {
        seen.length = 0;
        assert.equal((await send(port, line("GET", "/health"))).status, 200);
        assert.equal((await send(port, line("HEAD", "/health"))).status, 200);
        assert.deepEqual(seen.map(s => [s.method, s.url, s.bodyBytes]), [["GET", "/health", 0], ["HEAD", "/health", 0]]);
        for (const m of ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"]) await refused(line(m, "/health", {}, m === "DELETE" ? "" : "x"), `${m} /health`);
        await refused(line("GET", "/health", {}, "x"), "GET /health with a body");
        await refused(`GET /health HTTP/1.1\r\nHost: h\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n`, "GET /health with a chunked body");
        await refused(line("POST", "/health", withKey, "{}"), "POST /health with the key");
    });

    /** Sends the head of a request announcing a 60 MiB body, then up to 60 MiB; the answer and the temporary files nginx made. */
    async function bigBody(target: string, headers: Record<string, string>) {
        const size = 60 * 1024 * 1024;
        seen.length = 0;
        const before = running!.stderr().length;
        const bodyDir = path.join(running!.dir, "client_body");
        let peakTempBytes = 0;
        const watch = setInterval(() => {
            const bytes = fs.existsSync(bodyDir) ? fs.readdirSync(bodyDir, { recursive: true }).map(f => path.join(bodyDir, String(f)))
                .filter(f => fs.statSync(f, { throwIfNoEntry: false })?.isFile()).reduce((n, f) => n + (fs.statSync(f, { throwIfNoEntry: false })?.size ?? 0), 0) : 0;
            peakTempBytes = Math.max(peakTempBytes, bytes);
        }, 20);
        const head = `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n` +
            Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + `Content-Length: ${size}\r\n\r\n`;
        const chunk = Buffer.alloc(1024 * 1024, "a");
        const started = Date.now();
        const a = await send(port, head, {
            ms: 20_000,
            then: s => {
                let sent = 0;
                const more = () => { while (sent < size && !s.destroyed) { sent += chunk.length; if (!s.write(chunk)) { s.once("drain", more); return; } } };
                more();
            },
        });
        clearInterval(watch);
        return { answer: a, ms: Date.now() - started, peakTempBytes, buffered: /buffered to a temporary file/.test(running!.stderr().slice(before)) };
    }

    test("a keyless 60 MiB body is refused before it is buffered: no temporary file, nothing forwarded", async () => {
        for (const target of ["/health", "/v1/chat/completions", "/invocations"]) {
            const r = await bigBody(target, {});
            assert.ok(r.answer.status >= 400 && r.answer.status < 500, `${target}: refused, got ${r.answer.status}`);
            assert.equal(r.buffered, false, `${target}: nginx buffered the body to a temporary file`);
            assert.equal(r.peakTempBytes, 0, `${target}: a temporary body file of ${r.peakTempBytes} bytes`);
            assert.deepEqual(seen, [], `${target}: nothing reaches vLLM`);
        }
    });

    // Without the key, no body is wanted: nginx answers and closes. Every refusal (400, 401, 404, 405) is a `return`
    // without text; 401, 404 and 405 go through `error_page` to a named location (components/plan/proxyPlan.ts nginxConf).
    const refusals: Array<[string, string, Record<string, string>, number]> = [
        ["POST", "/v1/chat/completions", {}, 401], ["POST", "/invocations", {}, 401], ["POST", "/health", {}, 405],
        ["POST", "/v1/./chat/completions", {}, 400], ["GET", "/health", {}, 400], ["POST", "/invocations", withKey, 404],
    ];

    test("Expect: 100-continue: refusals answer without `100 Continue` and close; with the key the body is invited and forwarded", async () => {
        for (const [method, target, headers, status] of refusals) {
            seen.length = 0;
            const head = `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n` +
                Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "Content-Length: 1000\r\n\r\n";
            // The client never sends the body: nginx must neither invite it nor wait for it past its bounded lingering.
            const a = await exchange(port, head, { limitMs: 20_000 });
            assert.doesNotMatch(a.raw, /^HTTP\/1\.1 100/m, `${method} ${target}: no 100 Continue before the ${status}: ${a.raw.slice(0, 200)}`);
            assert.equal(a.status, status, `${method} ${target}: ${a.raw.slice(0, 200)}`);
            assert.match(a.head, /^Connection: close$/m, `${method} ${target}: the refusal closes the connection`);
            assert.ok(a.closedByServer, `${method} ${target}: nginx closed the connection (test gave up after ${a.ms} ms)`);
            assert.deepEqual(seen, [], `${method} ${target}: nothing reaches vLLM`);
        }
        // With the key: 100 Continue, then the body, forwarded whole.
        seen.length = 0;
        const body = Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "x".repeat(980) }] }));
        const a = await exchange(port, `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer ${KEY}\r\n` +
            `Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`, { limitMs: 20_000, continueWith: body });
        assert.match(a.raw, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /, a.raw.slice(0, 200));
        assert.deepEqual(seen.map(s => [s.url, s.bodyBytes]), [["/v1/chat/completions", body.length]]);
    });

    test("a refused request ends its connection: nothing after it on that connection is answered; keyed and /health connections stay open", async () => {
        // Two requests on one connection, the second with the key: after a refusal, nginx closes instead of reading on.
        const keyed = `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nConnection: close\r\n\r\n`;
        for (const [method, target, headers, status] of refusals) {
            seen.length = 0;
            const first = `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n` + Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
                "Content-Length: 2\r\n\r\n{}";
            const a = await exchange(port, first + keyed, { limitMs: 20_000 });
            assert.equal(a.status, status, `${method} ${target}: ${a.raw.slice(0, 200)}`);
            // (A body has no line end, so the next status line may follow it directly: counted unanchored.)
            assert.equal(a.raw.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `${method} ${target}: one answer, then the connection is closed: ${a.raw}`);
            assert.ok(a.closedByServer, `${method} ${target}: nginx closed the connection`);
            assert.deepEqual(seen, [], `${method} ${target}: nothing reaches vLLM`);
        }
        // With the key, and on /health without it, keep-alive is as before: both requests answered on one connection.
        for (const [target, headers] of [["/v1/models", withKey], ["/health", {}]] as Array<[string, Record<string, string>]>) {
            seen.length = 0;
            const req = (close: boolean) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n` + Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
                (close ? "Connection: close\r\n" : "") + "\r\n";
            const a = await exchange(port, req(false) + req(true), { limitMs: 20_000 });
            assert.deepEqual(a.raw.match(/HTTP\/1\.1 \d{3} /g), ["HTTP/1.1 200 ", "HTTP/1.1 200 "], `${target}: ${a.raw}`);
            assert.match(a.head, /^Connection: keep-alive$/m, target);
            assert.deepEqual(seen.map(s => s.url), [target, target]);
        }
    });

    test("a keyless body is read for a bounded time only: a paced body of 60 or 100 MiB is cut off far before its end", async t => {
        // 256 KiB every 50 ms (at most 5 MiB/s): nginx answers at once, then reads and discards for its bounded lingering
        // (a second or two) and closes. Before, it read on for nginx's default lingering_time (30 s): the whole body
        // here. The bound (40 MiB, with the socket buffers) leaves room for a slow machine: a slower client sends less.
        const piece = 256 * 1024;
        const cases: Array<[string, string, Record<string, string>, "chunked" | "length", number]> = [
            ["POST", "/v1/chat/completions", {}, "chunked", 401], ["POST", "/invocations", {}, "chunked", 401],
            ["POST", "/health", {}, "chunked", 405], ["POST", "/v1/./models", {}, "chunked", 400],
            ["POST", "/v1/chat/completions", {}, "length", 401],
            // Over client_max_body_size (64m there, 1m elsewhere): nginx refuses it (413) when it chooses the location,
            // before the key is checked.
            ["POST", "/v1/chat/completions", {}, "length", 413], ["POST", "/invocations", {}, "length", 413],
        ];
        for (const [method, target, headers, framing, status] of cases) {
            seen.length = 0;
            // 60 MiB where the key would admit it (under the 64m limit), else 100 MiB.
            const size = framing === "length" && status === 401 ? 60 * MiB : 100 * MiB;
            const head = `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
                Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
                (framing === "chunked" ? "Transfer-Encoding: chunked\r\n" : `Content-Length: ${size}\r\n`) + "\r\n";
            const a = await exchange(port, head, {
                piece: framing === "chunked" ? chunkOf(piece) : Buffer.alloc(piece, "a"), pieces: size / piece, pauseMs: 50,
                end: framing === "chunked" ? Buffer.from("0\r\n\r\n") : undefined, limitMs: 60_000,
            });
            const what = `${method} ${target} (${framing})`;
            t.diagnostic(`${what}: ${a.status}, ${(a.accepted / MiB).toFixed(1)} MiB accepted, ${a.closedByServer ? "closed by nginx" : "still open"} after ${a.ms} ms`);
            assert.equal(a.status, status, `${what}: ${a.raw.slice(0, 200)}`);
            assert.ok(a.accepted < 40 * MiB, `${what}: the connection took ${(a.accepted / MiB).toFixed(1)} of ${size / MiB} MiB of body ` +
                (a.closedByServer ? "before nginx closed it" : `and was still open after ${a.ms} ms`));
            assert.ok(a.closedByServer, `${what}: nginx closed the connection (test gave up after ${a.ms} ms, ${a.accepted} bytes accepted)`);
            assert.match(a.head, /^Connection: close$/m, what);
            assert.deepEqual(seen, [], `${what}: nothing reaches vLLM`);
        }
    });

    test("a keyless body sent as fast as the socket takes it: 401 first, then nginx closes; nothing forwarded", async t => {
        // At loopback speed nginx may discard all of it within its bounded lingering (the bound is in time: see
        // components/plan/proxyPlan.ts); what matters here is the answer and that nginx ends the connection by itself.
        seen.length = 0;
        const a = await exchange(port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            { piece: chunkOf(MiB), pieces: 100, limitMs: 60_000 });
        t.diagnostic(`${a.status}, ${(a.accepted / MiB).toFixed(1)} MiB accepted, ${a.closedByServer ? "closed by nginx" : "still open"} after ${a.ms} ms`);
        assert.equal(a.status, 401, a.raw.slice(0, 200));
        assert.doesNotMatch(a.raw, /100 Continue/);
        assert.match(a.head, /^Connection: close$/m);
        assert.ok(a.closedByServer, `nginx closed the connection (test gave up after ${a.ms} ms)`);
        assert.deepEqual(seen, []);
    });

    test("with the key, a large body is forwarded whole", async () => {
        const r = await bigBody("/v1/chat/completions", withKey);
        assert.equal(r.answer.status, 200, r.answer.raw.slice(0, 300));
        assert.deepEqual(seen.map(s => [s.url, s.bodyBytes]), [["/v1/chat/completions", 60 * 1024 * 1024]]);
    });
});
