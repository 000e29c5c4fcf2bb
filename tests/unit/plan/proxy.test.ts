// The endpoint proxy's plan (components/plan/proxyPlan.ts): vLLM on loopback, the proxy's wiring, its configuration
// script run for real (the key from stdin into a 0600 file), and the config keys.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { plannedResources, COMMAND } from "../../../components/plan/resources";
import { resourceNames } from "../../../components/plan/naming";
import { PLAIN_REQUEST_LINE, forwardedPathsRegex, nginxConf, proxyConfig, subjectAltName } from "../../../components/plan/proxyPlan";
import { rawConfig, specProblems } from "../../fixtures";

const n = resourceNames();
const spec = (edit: (r: Record<string, any>) => void = () => {}) => {
    const r = rawConfig(2);
    edit(r);
    return parseSpec(r);
};

test("vLLM listens on 127.0.0.1:vllm.internalPort; the endpoint (the proxy) keeps vllm.port, https with tls", () => {
    const p = planCluster(spec(r => (r.vllm.internalPort = 9001)), "x");
    const argv = p.vllmServeArgv.join(" ");
    assert.match(argv, / --host 127\.0\.0\.1 --port 9001 /);
    assert.doesNotMatch(argv, /0\.0\.0\.0|--port 8000/);
    assert.equal(p.endpoint, "http://198.18.0.2:8000/v1");
    assert.match(p.endpointProbe.create, /"port":8000,"internalPort":9001,"scheme":"http"/);
    const tls = planCluster(spec(r => (r.endpoint = { tls: "generated" })), "x");
    assert.equal(tls.endpoint, "https://198.18.0.2:8000/v1");
    assert.match(tls.endpointProbe.create, /"scheme":"https","certificate":"\/var\/tmp\/spark-vllm\/proxy\/tls\.crt"/);
    assert.match(tls.proxy.tls!.create, /docker run --user "\$\(id -u\):\$\(id -g\)" --rm --network none --entrypoint openssl .*subjectAltName=IP:198\.18\.0\.2/);
    assert.equal(subjectAltName("spark-a.local"), "DNS:spark-a.local");
});

test("config: internalPort collides like any port, endpoint.tls and endpoint.image are checked", () => {
    assert.ok(specProblems({ ...rawConfig(2), vllm: { ...rawConfig(2).vllm, internalPort: 8000 } })
        .some(p => p.startsWith("spark-vllm:vllm.internalPort: 8000 is also vllm.port")));
    assert.ok(specProblems({ ...rawConfig(2), vllm: { ...rawConfig(2).vllm, internalPort: 6379 } })
        .some(p => p.startsWith("spark-vllm:vllm.internalPort: 6379 is also ray.port") || p.startsWith("spark-vllm:ray.port: 6379 is also vllm.internalPort")));
    assert.ok(specProblems({ ...rawConfig(2), endpoint: { tls: "yes" } }).includes("spark-vllm:endpoint.tls: must be none, generated or given, got \"yes\""));
    assert.ok(specProblems({ ...rawConfig(2), endpoint: { image: "nginx:latest" } }).some(p => p.startsWith("spark-vllm:endpoint.image: \"nginx:latest\" is not an image reference pinned by digest")));
    assert.ok(specProblems({ ...rawConfig(2), endpoint: { tsl: "generated" } }).some(p => p.startsWith("spark-vllm:endpoint.tsl: unknown key; did you mean tls?")));
    assert.equal(spec().endpoint.image, "nginx:1.30.5@sha256:e9f347c65f318767714e8b0eccfd6b558d00fb92630791fb6cd901fcdf7f6fdd");
});

test("wiring: the proxy's configuration reads the key on stdin and follows it; the probe follows the proxy", () => {
    const planned = plannedResources(planCluster(spec(r => (r.endpoint = { tls: "generated" })), "x"));
    const by = (name: string) => planned.find(p => p.name === name)!;
    const conf = by(n.of("proxy-conf"));
    assert.equal(conf.type, COMMAND);
    assert.equal(conf.secretStdin, "apiKey");
    assert.deepEqual(conf.replacedBy, [n.of("api-key"), n.of("proxy-tls")]);
    assert.deepEqual(by(n.of("proxy")).dependsOn, [n.of("proxy-pull"), n.of("proxy-conf")]);
    assert.ok(by(n.of("endpoint-probe")).dependsOn.includes(n.of("proxy")));
    assert.ok(by(n.of("endpoint-probe")).replacedBy.includes(n.of("proxy")));
    const container = by(n.of("proxy")).inputs as Record<string, any>;
    assert.deepEqual(container.mounts, [{ type: "bind", source: "/var/tmp/spark-vllm/proxy", target: "/etc/spark-vllm/proxy", readOnly: true }]);
    assert.equal(container.envs, undefined, "no environment: nothing secret to inspect");
});

test("nginx.conf: the key from the map file, only the allow-listed routes forwarded, plain targets only, SSE unbuffered, long reads, large bodies", () => {
    const conf = nginxConf(spec());
    for (const line of ["include /etc/spark-vllm/proxy/api-key.map;", "listen 8000;", "proxy_pass http://127.0.0.1:8001;", "proxy_buffering off;",
        "proxy_read_timeout 3600s;", "client_max_body_size 64m;", "location = /health {", "return 401 '{\"error\": \"Unauthorized\"}';", "return 404 '{\"error\": \"Not Found\"}';"])
        assert.ok(conf.includes(line), line);
    const re = new RegExp(forwardedPathsRegex());
    for (const p of ["/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/v1/responses/resp_1", "/v1/responses/resp_1/cancel", "/v1/audio/transcriptions",
        "/v1/rerank", "/v1/score", "/v2/rerank", "/rerank", "/score", "/v1/messages", "/v1/messages/count_tokens", "/metrics"])
        assert.ok(re.test(p), p);
    for (const p of ["/invocations", "/tokenize", "/metrics/", "/metricsX", "/metrics/x", "/v1/modelsX", "/v1/load_lora_adapter", "/v1/responses/a/b", "/v1/models/../../metrics", "/v1/responses/../models"])
        assert.ok(!re.test(p), p);
    // Only plain origin-form request lines get past the server-level check (tests/unit/plan/proxy-nginx.test.ts runs it in nginx).
    const plain = new RegExp(PLAIN_REQUEST_LINE);
    for (const l of ["GET /v1/models HTTP/1.1", "POST /v1/chat/completions?x=%2F.. HTTP/1.1", "HEAD /health HTTP/1.0"]) assert.ok(plain.test(l), l);
    for (const l of ["GET /metrics/../health HTTP/1.1", "GET /metrics%2F..%2Fhealth HTTP/1.1", "GET http://h/health HTTP/1.1", "GET //v1/models HTTP/1.1",
        "GET /v1/./models HTTP/1.1", "GET / HTTP/1.1", "GET /v1/models/ HTTP/1.1", "GET /v1/models HTTP/2.0", "get /health HTTP/1.1"]) assert.ok(!plain.test(l), l);
});

test("nginx.conf: refusals invite no body and end the connection: `return CODE` without text outside named locations, bounded lingering", () => {
    const conf = nginxConf(spec());
    // The blocks of the server: a named location's lines apart from the rest.
    const lines = conf.split("\n");
    const named = new Map<string, string[]>();
    let current: string[] | undefined;
    const outside: string[] = [];
    for (const l of lines) {
        const m = /^ {8}location (@\w+) \{$/.exec(l);
        if (m) { current = []; named.set(m[1], current); continue; }
        if (current && l === "        }") { current = undefined; continue; }
        (current ?? outside).push(l.trim());
    }
    // A `return` with text answers through ngx_http_send_response, whose body discard sends "100 Continue": only named
    // locations (reached by error_page, which sets expect_tested first) may answer with text.
    const returns = outside.filter(l => l.startsWith("return "));
    assert.ok(returns.length >= 6, returns.join("\n"));
    for (const r of returns) assert.match(r, /^return (400|401|404|405);$/, `outside a named location, no text: ${r}`);
    assert.deepEqual([...named.keys()], ["@unauthorized", "@not_found", "@too_many_requests", "@method_not_allowed"]);
    for (const [name, body] of named) {
        assert.equal(body[0], "keepalive_timeout 0;", `${name} closes the connection`);
        assert.match(body[body.length - 1], /^return (40[145]|429) '\{"error": "[A-Za-z ]+"\}';$/, name);
    }
    assert.deepEqual(named.get("@unauthorized"), ["keepalive_timeout 0;", "add_header WWW-Authenticate Bearer always;", "return 401 '{\"error\": \"Unauthorized\"}';"]);
    assert.deepEqual(named.get("@method_not_allowed"), ["keepalive_timeout 0;", 'add_header Allow "GET, HEAD" always;', "return 405 '{\"error\": \"Method Not Allowed\"}';"]);
    // error_page without "=": ngx_http_send_error_page sets expect_tested only when overwrite is neither 0 nor 200.
    const errorPages = outside.filter(l => l.startsWith("error_page "));
    // limit_conn's 429 (issue 50) at server level and again in /health, whose own error_page stops the server's inheriting.
    assert.deepEqual(errorPages, ["error_page 401 @unauthorized;", "error_page 404 @not_found;", "error_page 429 @too_many_requests;",
        "error_page 405 @method_not_allowed;", "error_page 429 @too_many_requests;"]);
    // 400 has no error_page: nginx's own 400s may come before there is a URI, and a named location needs one.
    assert.ok(!conf.includes("error_page 400"));
    for (const line of ["        lingering_time 2s;", "        lingering_timeout 1s;"]) assert.ok(lines.includes(line), `server-wide: ${line}`);
    // keep-alive is nginx's default everywhere else.
    assert.equal(conf.match(/keepalive_timeout/g)?.length, 4);
});

/** Runs the configuration script with `key` on stdin in a fresh logDir; the exit status, stderr and the files. */
function runConfig(key: string) {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-proxy-"));
    try {
        const s = spec(r => (r.logDir = logDir));
        // No docker on PATH: the restart of a running proxy is skipped, as when none runs yet.
        const noDocker = path.join(logDir, "bin");
        fs.mkdirSync(noDocker);
        fs.symlinkSync("/bin/false", path.join(noDocker, "docker"));
        const r = spawnSync("sh", ["-c", proxyConfig(s).create], { input: `${key}\n`, encoding: "utf8", env: { PATH: `${noDocker}:/usr/bin:/bin` } });
        const dir = path.join(logDir, "proxy");
        const files = fs.existsSync(dir) ? Object.fromEntries(fs.readdirSync(dir).map(f => [f, { mode: fs.statSync(path.join(dir, f)).mode & 0o777, text: fs.readFileSync(path.join(dir, f), "utf8") }])) : {};
        return { status: r.status, stderr: r.stderr, dirMode: fs.existsSync(dir) ? fs.statSync(dir).mode & 0o777 : 0, files, text: proxyConfig(s).create };
    } finally {
        fs.rmSync(logDir, { recursive: true, force: true });
    }
}

test("the configuration script writes the key from stdin into a 0600 map file as a case-sensitive, escaped regex", () => {
    const key = "Ab3.x+y/Z_~-=";
    const r = runConfig(key);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(!r.text.includes(key), "the key is not in the command text");
    assert.equal(r.dirMode, 0o700);
    assert.deepEqual(Object.keys(r.files).sort(), ["api-key.map", "nginx.conf"]);
    assert.equal(r.files["api-key.map"].mode, 0o600);
    assert.equal(r.files["api-key.map"].text, '"~^[Bb][Ee][Aa][Rr][Ee][Rr] Ab3[.]x[+]y/Z_~-=$" 1;\n');
    assert.equal(r.files["nginx.conf"].text, nginxConf(spec()));
    // What nginx will do with it: the regex matches exactly the header vLLM accepts.
    const re = new RegExp(r.files["api-key.map"].text.split('"')[1].slice(1));
    assert.ok(re.test(`Bearer ${key}`) && re.test(`bearer ${key}`));
    assert.ok(!re.test(`Bearer ${key.toLowerCase()}`) && !re.test(`Bearer Ab3Xx+y/Z_~-=`) && !re.test(`Bearer  ${key}`) && !re.test(`Bearer ${key}x`));
});

test("the configuration's update (a new SSH key) restarts a running proxy only when a file changed; its create always", () => {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-proxy-"));
    try {
        const s = spec(r => (r.logDir = logDir));
        // A docker that answers as a running proxy does and logs every call.
        const bin = path.join(logDir, "bin"), calls = path.join(logDir, "calls");
        fs.mkdirSync(bin);
        fs.writeFileSync(path.join(bin, "docker"), `#!/bin/sh\necho "$*" >> ${calls}\n[ "$1" = inspect ] && echo true\nexit 0\n`, { mode: 0o755 });
        const restarts = (key: string, step: "create" | "update") => {
            fs.writeFileSync(calls, "");
            const r = spawnSync("sh", ["-c", proxyConfig(s)[step]], { input: `${key}\n`, encoding: "utf8", env: { PATH: `${bin}:/usr/bin:/bin` } });
            assert.equal(r.status, 0, r.stderr);
            return fs.readFileSync(calls, "utf8").split("\n").filter(l => l.startsWith("restart ")).length;
        };
        assert.equal(restarts("keyA", "create"), 1, "first written: the running proxy reads it");
        assert.equal(restarts("keyA", "update"), 0, "the same files: nothing restarted");
        assert.equal(restarts("keyA", "create"), 1, "a replacement (a new certificate beside the same key) restarts it");
        assert.equal(restarts("keyB", "update"), 1, "a changed file: restarted");
        assert.equal(fs.readFileSync(path.join(logDir, "proxy", "api-key.map"), "utf8"), '"~^[Bb][Ee][Aa][Rr][Ee][Rr] keyB$" 1;\n');
        assert.deepEqual(fs.readdirSync(path.join(logDir, "proxy")).sort(), ["api-key.map", "nginx.conf"], "no temporary file left");
    } finally {
        fs.rmSync(logDir, { recursive: true, force: true });
    }
});

test("the generated certificate's update (a new SSH key) keeps the pair clients pinned; a missing pair is made again and served", () => {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-proxy-"));
    try {
        const s = spec(r => { r.logDir = logDir; r.endpoint = { tls: "generated" }; });
        const tls = planCluster(s, "x").proxy.tls!;
        const dir = path.join(logDir, "proxy"), bin = path.join(logDir, "bin"), calls = path.join(logDir, "calls");
        fs.mkdirSync(bin);
        // A docker whose `run` (openssl in the proxy image) writes a new pair, numbered; a running proxy otherwise.
        fs.writeFileSync(path.join(bin, "docker"), `#!/bin/sh\necho "$1" >> ${calls}\ncase "$1" in run) n=$(grep -c '^run$' ${calls}); echo "key $n" > ${dir}/tls.key; echo "cert $n" > ${dir}/tls.crt;; inspect) echo true;; esac\nexit 0\n`, { mode: 0o755 });
        const step = (text: string) => {
            const r = spawnSync("sh", ["-c", text], { encoding: "utf8", env: { PATH: `${bin}:/usr/bin:/bin` } });
            assert.equal(r.status, 0, r.stderr);
            return r.stdout.trim();
        };
        assert.equal(step(tls.create), "cert 1");
        assert.equal(step(tls.update!), "cert 1", "kept");
        assert.doesNotMatch(fs.readFileSync(calls, "utf8"), /restart/);
        fs.rmSync(path.join(dir, "tls.crt"));
        assert.equal(step(tls.update!), "cert 2", "made again");
        assert.match(fs.readFileSync(calls, "utf8"), /^restart$/m, "and the running proxy serves it");
    } finally {
        fs.rmSync(logDir, { recursive: true, force: true });
    }
});

test("a key nginx cannot match safely is refused without writing anything, and without echoing it", () => {
    for (const key of ['a"b; } map $x $y {', "a b", ""]) {
        const r = runConfig(key);
        assert.equal(r.status, 1, key);
        assert.match(r.stderr, /RFC 6750's b64token/);
        if (key) assert.ok(!r.stderr.includes(key));
        assert.equal(r.files["api-key.map"], undefined);
    }
});
