// End to end: the endpoint proxy (issue 13) on simulated Sparks: Debian's real nginx in front of a vLLM that listens on
// the head's loopback only. The key is required on every path but /health, only the OpenAI API is forwarded, vLLM's
// own port is out of reach from another host, TLS when configured, and the key in no argv, container or readable file.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync } from "node:child_process";
import { SimStackOptions, leftovers } from "../sim/stacks";
import { simSuite } from "./suite";
import { Stack, destroy, up } from "../engine/engine";
import { findEntry } from "../engine/state";
import { proxyContainerName, resourceNames } from "../../components/plan/naming";

const N = resourceNames();
const suite = simSuite("proxy");

/**
 * One host is enough for the proxy. The catalog's Qwen3.5-122B does not fit one Spark, so with the pack the mandatory
 * model-weights-fit refuses such a stack (rightly); on the sim's small stand-in weights these run without --policy-pack.
 */
function oneHost(name: string, endpoint: SimStackOptions["endpoint"]): Stack {
    const s = suite.stack(name, { hosts: 1, endpoint });
    s.policyPack = false;
    return s;
}
const PROXY_DIR = "/var/tmp/spark-vllm/proxy";

async function http(url: string, init: RequestInit = {}): Promise<{ status: number; body: string; headers: Headers }> {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: await res.text(), headers: res.headers };
}
const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
const chat = (stream: boolean) => JSON.stringify({ model: "qwen3.5-122b", messages: [{ role: "user", content: "hello" }], max_tokens: 6, stream });

/** A CA and, per call, a new server key and certificate it signs for an IP address, made with openssl in `dir`. */
function testPki(dir: string) {
    const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
    const read = (f: string) => fs.readFileSync(path.join(dir, f), "utf8");
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl("req", "-x509", ...ec, "-days", "2", "-subj", "/CN=spark-vllm e2e CA", "-keyout", "ca.key", "-out", "ca.crt");
    let serial = 0;
    return {
        ca: read("ca.crt"),
        caFile: path.join(dir, "ca.crt"),
        server(ip: string): { chain: string; key: string } {
            const name = `server${++serial}`;
            openssl("req", ...ec, "-subj", `/CN=${ip}`, "-keyout", `${name}.key`, "-out", `${name}.csr`);
            fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=IP:${ip}\n`);
            openssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", String(serial), "-days", "1", "-extfile", `${name}.ext`, "-out", `${name}.crt`);
            return { chain: read(`${name}.crt`) + read("ca.crt"), key: read(`${name}.key`) };
        },
    };
}

/** The lines of a PEM text that give it away (its base64 body), and the base64 of the whole text (the stdin framing). */
const telltales = (pem: string) => [...pem.split("\n").filter(l => /^[A-Za-z0-9+/=]{40,}$/.test(l)), Buffer.from(pem).toString("base64").slice(0, 60)];

/** GET/POST over https, trusting only `ca` (the certificate the stack output gives), with the served certificate. */
function httpsRequest(url: string, ca: string, key?: string): Promise<{ status: number; body: string; fingerprint256: string }> {
    return new Promise((resolve, reject) => {
        const req = https.request(url, { ca, headers: key ? bearer(key) : {}, timeout: 10_000 }, res => {
            const fingerprint256 = (res.socket as import("tls").TLSSocket).getPeerCertificate().fingerprint256;
            let body = "";
            res.on("data", d => (body += d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body, fingerprint256 }));
        });
        req.on("error", reject);
        req.end();
    });
}

describe("the endpoint proxy on two simulated Sparks", () => {
    let stack: Stack;
    let apiKey = "";
    let endpoint = "";
    const head = () => suite.sim.hosts[0];

    test("up: the endpoint is the proxy; without the key vLLM's other routes answer 401, with it only the OpenAI API is forwarded", async () => {
        stack = suite.stack("proxied");
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        apiKey = r.outputs?.apiKey as string;
        endpoint = r.outputs?.endpoint as string;
        assert.equal(endpoint, `http://${head().address}:8000/v1`);
        assert.equal(r.outputs?.endpointCertificate, undefined);
        const base = `http://${head().address}:8000`;
        for (const p of ["/invocations", "/tokenize", "/metrics", "/v1/models", "/pooling", "/score", "/v1/rerank"]) {
            const denied = await http(base + p, { method: p === "/v1/models" || p === "/metrics" ? "GET" : "POST", body: p === "/v1/models" || p === "/metrics" ? undefined : "{}" });
            assert.equal(denied.status, 401, `${p} without the key`);
            assert.equal(denied.headers.get("www-authenticate"), "Bearer", `${p}: RFC 6750's challenge`);
        }
        assert.equal((await http(base + "/v1/models", { headers: { Authorization: `Bearer ${apiKey}x` } })).status, 401, "a wrong key");
        assert.equal((await http(base + "/v1/models", { headers: { Authorization: `Bearer ${apiKey.toLowerCase()}` } })).status, 401, "the key in the wrong case");
        for (const p of ["/invocations", "/tokenize", "/version"])
            assert.equal((await http(base + p, { headers: bearer(apiKey) })).status, 404, `${p} with the key: not forwarded`);
        // Prometheus scraping with the key as a bearer token.
        const metrics = await http(base + "/metrics", { headers: bearer(apiKey) });
        assert.equal(metrics.status, 200, metrics.body);
        assert.match(metrics.body, /^# (HELP|TYPE) vllm:/m);
        const models = await http(`${endpoint}/models`, { headers: bearer(apiKey) });
        assert.equal(models.status, 200, models.body);
        assert.deepEqual(JSON.parse(models.body).data.map((m: { id: string }) => m.id), ["qwen3.5-122b"]);
        // The scheme in any case passes the proxy and vLLM, as vLLM's verify_token takes it (the stand-in does the same).
        assert.equal((await http(`${endpoint}/models`, { headers: { Authorization: `bEARER ${apiKey}` } })).status, 200, "the scheme in another case");
        const health = await http(base + "/health");
        assert.equal(health.status, 200, "/health needs no key");
    });

    test("raw request targets through the deployed proxy (curl --path-as-is from another host): refused before vLLM, bodies never buffered", async () => {
        const b = suite.sim.hosts[1].name;
        const base = `http://${head().address}:8000`;
        /** curl from spark-b; the key, when given, on stdin as a header file (never in argv). */
        const curl = async (args: string, key?: string) => {
            const r = await suite.sim.exec(b, `curl -sS -m 30 -o /tmp/spark-vllm-proxy-body -w '%{http_code}' ${key ? "-H @- " : ""}${args}; echo; cat /tmp/spark-vllm-proxy-body; rm -f /tmp/spark-vllm-proxy-body`,
                key ? { input: `Authorization: Bearer ${key}\n` } : {});
            const [code, ...body] = r.stdout.split("\n");
            return { code: code.trim(), body: body.join("\n") };
        };
        for (const target of ["/metrics/../health", "/metrics/..%2Fhealth", "/metrics%2F..%2Fhealth", "/metrics%2f..%2fhealth", "/metrics/%2E%2E/health", "//metrics", "/./metrics"]) {
            const r = await curl(`--path-as-is '${base}${target}'`);
            assert.equal(r.code, "400", `${target} without the key: ${r.body}`);
            assert.doesNotMatch(r.body, /# (HELP|TYPE)/, `${target}: no metrics without the key`);
        }
        // The absolute form (RFC 9112 section 3.2.2), which nginx accepts and used to forward as its raw path.
        assert.equal((await curl(`--request-target 'http://${head().address}/metrics/../health' '${base}/'`)).code, "400", "absolute form");
        const other = await curl(`--path-as-is '${base}/metricsX/../v1/models'`, apiKey);
        assert.equal(other.code, "400", `with the key, a path that normalises elsewhere: ${other.body}`);
        // A keyless 60 MiB POST /health is refused before its body is read; nginx says when it buffers a body to disk.
        const since = Math.floor(Date.now() / 1000) - 1;
        const big = await suite.sim.exec(b, `head -c 62914560 /dev/zero | curl -sS -m 30 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @- '${base}/health' || true`);
        // 413: nginx's client_max_body_size (1m outside the keyed routes) refuses it on its Content-Length alone;
        // 000: curl saw the connection closed while it was still sending.
        assert.ok(["413", "000"].includes(big.stdout.trim()), `keyless 60 MiB POST /health: ${big.stdout} ${big.stderr}`);
        const logs = await suite.sim.docker(head().name, ["logs", "--since", String(since), proxyContainerName()]);
        assert.doesNotMatch(logs.stdout + logs.stderr, /buffered to a temporary file/, "nginx buffered a keyless body to disk");
        // The routes real clients use answer with the key (vLLM's stand-in answers 404 on those it does not implement: forwarded).
        for (const route of ["/v1/rerank", "/v1/score", "/v2/rerank", "/v1/messages", "/v1/messages/count_tokens"]) {
            const r = await curl(`-X POST -H 'Content-Type: application/json' -d '{}' '${base}${route}'`, apiKey);
            assert.notEqual(r.code, "401", `${route} with the key reaches vLLM`);
            assert.doesNotMatch(r.body, /"error": "Not Found"/, `${route} with the key: not the proxy's own 404`);
        }
    });

    test("a chat completion, and a streamed one whose server-sent events come through the proxy one by one", async () => {
        const plain = await http(`${endpoint}/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json", ...bearer(apiKey) }, body: chat(false) });
        assert.equal(plain.status, 200, plain.body);
        assert.equal(JSON.parse(plain.body).choices[0].message.role, "assistant");
        const streamed = await http(`${endpoint}/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json", ...bearer(apiKey) }, body: chat(true) });
        assert.equal(streamed.status, 200, streamed.body);
        assert.match(streamed.headers.get("content-type") ?? "", /^text\/event-stream/);
        const events = streamed.body.split("\n\n").filter(e => e.startsWith("data: "));
        assert.ok(events.length >= 7, `role chunk, six tokens, [DONE]: ${streamed.body}`);
        assert.equal(events[events.length - 1], "data: [DONE]");
    });

    test("vLLM listens on the head's loopback only: its port is closed to another host, the proxy's is open", async () => {
        const listening = await suite.sim.exec(head().name, "ss -Hltn 'sport = :8001'");
        assert.match(listening.stdout, /127\.0\.0\.1:8001/);
        assert.doesNotMatch(listening.stdout, /(0\.0\.0\.0|\*|\[::\]):8001/);
        const code = (url: string) => suite.sim.exec(suite.sim.hosts[1].name, `curl -s -o /dev/null -m 5 -w '%{http_code}' ${url} || true`);
        assert.equal((await code(`http://${head().address}:8001/v1/models`)).stdout.trim(), "000", "vLLM's port from spark-b");
        assert.equal((await code(`http://${head().address}:8000/health`)).stdout.trim(), "200", "the proxy from spark-b");
    });

    test("a local account on the head (uid 65534, not root) gets nothing from vLLM's loopback port without the key but /health", async () => {
        const h = head().name;
        const vllm = "http://127.0.0.1:8001";
        /** curl on the head as nobody:nogroup with no supplementary groups; the key, when given, on stdin as a header file. */
        const asNobody = async (args: string, key?: string) => {
            const r = await suite.sim.exec(h, `setpriv --reuid 65534 --regid 65534 --clear-groups -- curl -sS -m 10 -o /dev/null -w '%{http_code}' ${key ? "-H @- " : ""}${args} || true`,
                key ? { input: `Authorization: Bearer ${key}\n` } : {});
            return r.stdout.trim();
        };
        assert.equal((await suite.sim.exec(h, "setpriv --reuid 65534 --regid 65534 --clear-groups -- id -u")).stdout.trim(), "65534");
        assert.equal(await asNobody(`${vllm}/health`), "200", "/health needs no key");
        for (const p of ["/metrics", "/metrics/", "/metricsX", "/version", "/v1/models", "/load", "/ping", "/docs", "/openapi.json", "/is_sleeping", "/server_info"])
            assert.equal(await asNobody(`${vllm}${p}`), "401", `GET ${p} as a local user without the key`);
        for (const p of ["/invocations", "/tokenize", "/detokenize", "/pooling", "/classify", "/score", "/rerank", "/v1/completions", "/v2/rerank", "/inference/v1/generate", "/ping"])
            assert.equal(await asNobody(`-X POST -H 'Content-Type: application/json' -d '{}' ${vllm}${p}`), "401", `POST ${p} as a local user without the key`);
        for (const p of ["/health/../metrics", "/health/%2e%2e/metrics", "/metrics%2F", "//metrics"])
            assert.equal(await asNobody(`--path-as-is '${vllm}${p}'`), "401", `raw ${p}`);
        // The key, not the account, is what opens it: the same user with the key gets the metrics.
        assert.equal(await asNobody(`${vllm}/metrics`, apiKey), "200", "with the key");
        assert.equal(await asNobody(`${vllm}/metrics`, `${apiKey}x`), "401", "with a wrong key");
    });

    test("the key is in no argv, no docker inspect, no file others can read; the proxy's files are private", async () => {
        const argv = await suite.sim.exec(head().name, "ps -eo args");
        assert.ok(argv.stdout.length > 0);
        assert.ok(!argv.stdout.includes(apiKey), "the key in a process's argv");
        const inspect = await suite.sim.docker(head().name, ["inspect", proxyContainerName(), `spark-vllm-${head().name}`]);
        assert.equal(inspect.code, 0, inspect.stderr);
        assert.ok(!inspect.stdout.includes(apiKey), "the key in docker inspect (env, labels, args, mounts)");
        const modes = await suite.sim.exec(head().name, `stat -c '%a %n' ${PROXY_DIR} ${PROXY_DIR}/api-key.map ${PROXY_DIR}/nginx.conf`);
        assert.deepEqual(modes.stdout.trim().split("\n"), [`700 ${PROXY_DIR}`, `600 ${PROXY_DIR}/api-key.map`, `600 ${PROXY_DIR}/nginx.conf`]);
        const readable = await suite.sim.exec(head().name,
            `find /var/tmp /root -xdev -type f -perm -004 -size -4M -print0 2>/dev/null | xargs -0 -r grep -l -F -- ${JSON.stringify(apiKey)} || true`);
        assert.equal(readable.stdout.trim(), "", "a world-readable file holds the key");
        // The proxy mounts its directory read-only.
        const mounts = JSON.parse(inspect.stdout)[0].Mounts as Array<{ Source: string; RW: boolean }>;
        assert.deepEqual(mounts.map(m => [m.Source.endsWith("/vartmp/spark-vllm/proxy") || m.Source === PROXY_DIR, m.RW]), [[true, false]]);
    });

    test("a new key (the api-key replaced) rewrites the key file and restarts the proxy: the old key is refused, the new one accepted", async () => {
        // `pulumi up --replace` of the generated key: a new RandomPassword, as a rotation would make.
        const state = JSON.parse(fs.readFileSync(stack.statePath, "utf8"));
        const r = await up(stack, { replace: [findEntry(state, "random:index/randomPassword:RandomPassword", N.of("api-key"))!.urn] });
        assert.equal(r.error, undefined, r.error);
        const newKey = r.outputs?.apiKey as string;
        assert.notEqual(newKey, apiKey);
        assert.ok(r.ops.some(o => o.name === N.of("proxy-conf") && o.op === "replace"), "the proxy configuration follows the key");
        assert.ok(!r.ops.some(o => o.name === N.of("proxy") && o.op !== "same"), "the proxy container is restarted, not replaced");
        assert.equal((await http(`${endpoint}/models`, { headers: bearer(apiKey) })).status, 401, "the old key");
        assert.equal((await http(`${endpoint}/models`, { headers: bearer(newKey) })).status, 200, "the new key");
        apiKey = newKey;
    });

    test("destroy removes the proxy with everything else", async () => {
        const r = await destroy(stack);
        assert.deepEqual(r.errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
        const files = await suite.sim.exec(head().name, `ls -A ${PROXY_DIR} 2>/dev/null || true`);
        assert.equal(files.stdout.trim(), "", "the key and configuration are gone from the head");
    });

    test("tls generated: an https endpoint whose certificate is the output's, made on the head with its key private there", async () => {
        const tls = oneHost("tls", { tls: "generated" });
        const r = await up(tls);
        try {
            assert.equal(r.error, undefined, r.error);
            const url = r.outputs?.endpoint as string;
            assert.equal(url, `https://${head().address}:8000/v1`);
            const pem = r.outputs?.endpointCertificate as string;
            const sha = r.outputs?.endpointCertificateSha256 as string;
            assert.match(pem, /^-----BEGIN CERTIFICATE-----/);
            assert.equal(sha, new crypto.X509Certificate(pem).fingerprint256);
            assert.ok(new crypto.X509Certificate(pem).checkIP(head().address), "the certificate names the head's address");
            const key = r.outputs?.apiKey as string;
            const models = await httpsRequest(`${url}/models`, pem, key);
            assert.equal(models.status, 200, models.body);
            assert.equal(models.fingerprint256, sha, "the served certificate is the output's");
            assert.equal((await httpsRequest(`${url}/models`, pem)).status, 401);
            // nginx answers plain HTTP on an ssl port with 400 ("The plain HTTP request was sent to HTTPS port").
            assert.equal((await http(`http://${head().address}:8000/health`)).status, 400, "no plain http beside https");
            const modes = await suite.sim.exec(head().name, `stat -c '%a %n' ${PROXY_DIR}/tls.key ${PROXY_DIR}/tls.crt`);
            assert.deepEqual(modes.stdout.trim().split("\n"), [`600 ${PROXY_DIR}/tls.key`, `644 ${PROXY_DIR}/tls.crt`]);
        } finally {
            const d = await destroy(tls);
            assert.deepEqual(d.errors, []);
        }
        assert.deepEqual(await leftovers(suite.sim), []);
    });

    test("tls given: a mismatched key is refused before anything starts; a CA-signed chain is served, verified by curl, never in argv or inspect; rotating it restarts only the proxy", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-given-"));
        const pki = testPki(dir);
        const first = pki.server(head().address);
        const other = pki.server(head().address);
        const given = (name: string, chain: string, key: string) => {
            const s = oneHost(name, { tls: "given" });
            s.config["spark-vllm:tlsCertificate"] = chain;
            s.config["spark-vllm:tlsPrivateKey"] = key;
            s.secretKeys = ["spark-vllm:tlsCertificate", "spark-vllm:tlsPrivateKey"];
            return s;
        };

        // The other server's key with the first's chain: refused by parseSpec, naming the key and the fix; nothing created.
        const wrong = await up(given("given-wrong", first.chain, other.key));
        assert.ok(wrong.error, "up with a mismatched key must fail");
        assert.match(wrong.error, /spark-vllm:tlsPrivateKey: does not belong to the server's certificate in spark-vllm:tlsCertificate \(CN=[\d.]+\); set the key the certificate was issued for/);
        assert.ok(!telltales(other.key).some(t => wrong.error!.includes(t)), "the key is not in the error");
        assert.deepEqual(wrong.ops.filter(o => o.op !== "same").map(o => o.name), [], "no resource was created");
        assert.deepEqual(await leftovers(suite.sim), []);
        const noProxy = await suite.sim.docker(head().name, ["ps", "-a", "--filter", `name=${proxyContainerName()}`, "--format", "{{.Names}}"]);
        assert.equal(noProxy.stdout.trim(), "", "no proxy container");

        const stack = given("given", first.chain, first.key);
        let r = await up(stack);
        try {
            assert.equal(r.error, undefined, r.error);
            const url = r.outputs?.endpoint as string;
            assert.equal(url, `https://${head().address}:8000/v1`);
            assert.equal(r.outputs?.endpointCertificate, first.chain, "the output is the given chain");
            const leaf = new crypto.X509Certificate(first.chain);
            assert.equal(r.outputs?.endpointCertificateSha256, leaf.fingerprint256);
            const key = r.outputs?.apiKey as string;
            // A client that trusts only the CA (not the certificate itself) verifies the served chain, host address included.
            const curl = await suite.sim.exec(suite.sim.hosts[1].name,
                `curl -sS --cacert ${pki.caFile} -o /dev/null -w '%{http_code} %{ssl_verify_result}' -H @- ${url}/models`, { input: `Authorization: Bearer ${key}\n` });
            assert.equal(curl.stdout.trim(), "200 0", curl.stderr);
            assert.equal((await httpsRequest(`${url}/models`, pki.ca, key)).fingerprint256, leaf.fingerprint256, "the served certificate is the given one");
            // Neither text in any argv, in docker inspect of the proxy or vLLM, or in a file others can read; the files are 0600.
            const argv = await suite.sim.exec(head().name, "ps -eo args");
            const inspect = await suite.sim.docker(head().name, ["inspect", proxyContainerName(), `spark-vllm-${head().name}`]);
            assert.equal(inspect.code, 0, inspect.stderr);
            for (const t of [...telltales(first.key), ...telltales(first.chain)]) {
                assert.ok(!argv.stdout.includes(t), "a given text in a process's argv");
                assert.ok(!inspect.stdout.includes(t), "a given text in docker inspect");
            }
            const modes = await suite.sim.exec(head().name, `stat -c '%a %n' ${PROXY_DIR} ${PROXY_DIR}/tls.key ${PROXY_DIR}/tls.crt`);
            assert.deepEqual(modes.stdout.trim().split("\n"), [`700 ${PROXY_DIR}`, `600 ${PROXY_DIR}/tls.key`, `600 ${PROXY_DIR}/tls.crt`]);
            const keyBody = telltales(first.key)[0];
            const readable = await suite.sim.exec(head().name,
                `find /var/tmp /root -xdev -type f -perm -004 -size -4M -print0 2>/dev/null | xargs -0 -r grep -l -F -- ${JSON.stringify(keyBody)} || true`);
            assert.equal(readable.stdout.trim(), "", "a world-readable file holds the key");

            // Rotation: the other server's chain and key. The files are rewritten and the proxy restarted, nothing else.
            const rotated = given("given", other.chain, other.key);
            r = await up(rotated);
            assert.equal(r.error, undefined, r.error);
            const changed = r.ops.filter(o => o.op !== "same").map(o => `${o.name} ${o.op}`).sort();
            assert.ok(changed.includes(`${N.of("proxy-tls")} replace`) && changed.includes(`${N.of("proxy-conf")} replace`), changed.join(", "));
            assert.ok(!r.ops.some(o => (o.name === N.of("proxy") || o.name === N.of("vllm-launch")) && o.op !== "same"), `the proxy container and vLLM stay: ${changed.join(", ")}`);
            const newLeaf = new crypto.X509Certificate(other.chain);
            assert.equal(r.outputs?.endpointCertificateSha256, newLeaf.fingerprint256);
            assert.equal((await httpsRequest(`${url}/models`, pki.ca, key)).fingerprint256, newLeaf.fingerprint256, "the new certificate is served");
        } finally {
            const d = await destroy(stack);
            assert.deepEqual(d.errors, []);
            fs.rmSync(dir, { recursive: true, force: true });
        }
        assert.deepEqual(await leftovers(suite.sim), []);
        const files = await suite.sim.exec(head().name, `ls -A ${PROXY_DIR} 2>/dev/null || true`);
        assert.equal(files.stdout.trim(), "", "the certificate and key are gone from the head");
    });
});
