// endpoint.tls "given" (components/spec/givenTls.ts): the certificate chain and key from the secrets tlsCertificate and
// tlsPrivateKey, checked with every other problem at once, never shown, and written on the head from stdin (the
// script run here for real) into 0600 files; the plan's wiring (a rotated certificate rewrites the files, restarts
// the proxy through its configuration, and proves the endpoint again).
import { before, test } from "node:test";
import * as assert from "node:assert/strict";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execFileSync, spawnSync } from "node:child_process";
import { SECRET_IN_PLAIN_TEXT, SECRET_SET, rawConfigFromStack } from "../../../components/spec/stackConfig";
import { SpecError } from "../../../components/spec/spec";
import { parseSpec } from "../../../components/spec/parseSpec";
import { planCluster } from "../../../components/plan/plan";
import { COMMAND, GATE, plannedResources } from "../../../components/plan/resources";
import { resourceNames } from "../../../components/plan/naming";
import { proxyTls } from "../../../components/plan/proxyPlan";
import { chainCertificates, givenTlsProblems, givenTlsStdin } from "../../../components/spec/givenTls";
import { clusterConfig, rawConfig, specProblems } from "../../fixtures";
import { evaluateWithMocks } from "../../harness/mocks";

const n = resourceNames();
/** A CA, a server certificate it signed, another key, and a self-signed certificate, made with openssl. */
const pki: Record<string, string> = {};
before(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-given-tls-"));
    const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
    try {
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.crt");
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=198.18.0.2", "-keyout", "server.key", "-out", "server.csr");
        fs.writeFileSync(path.join(dir, "ext"), "subjectAltName=IP:198.18.0.2\n");
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1", "-extfile", "ext", "-out", "server.crt");
        openssl("genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", "other.key");
        openssl("pkey", "-in", "server.key", "-aes256", "-passout", "pass:secret", "-out", "encrypted.key");
        for (const f of ["ca.crt", "server.crt", "server.key", "other.key", "encrypted.key"]) pki[f] = fs.readFileSync(path.join(dir, f), "utf8");
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
});
const chain = () => pki["server.crt"] + pki["ca.crt"];
const paths = (problems: Array<[string, string]>) => problems.map(([p]) => p);

test("a CA-signed chain, server certificate first, with its key: no problems", () => {
    assert.deepEqual(givenTlsProblems({ tlsCertificate: chain(), tlsPrivateKey: pki["server.key"] }), []);
    assert.deepEqual(givenTlsProblems({ tlsCertificate: pki["server.crt"], tlsPrivateKey: pki["server.key"] }), [], "the server's certificate alone");
});

test("a key that is not the certificate's is refused at tlsPrivateKey, naming the certificate and the fix, and showing neither text", () => {
    const problems = givenTlsProblems({ tlsCertificate: chain(), tlsPrivateKey: pki["other.key"] });
    assert.deepEqual(paths(problems), ["tlsPrivateKey"]);
    assert.match(problems[0][1], /^does not belong to the server's certificate in spark-vllm:tlsCertificate \(CN=198\.18\.0\.2\); set the key the certificate was issued for/);
    assert.ok(!JSON.stringify(problems).includes("PRIVATE KEY-----"), "no key text in the message");
    // The chain in the wrong order has the CA's certificate first: its key is not the server's either.
    const reversed = givenTlsProblems({ tlsCertificate: pki["ca.crt"] + pki["server.crt"], tlsPrivateKey: pki["server.key"] });
    assert.deepEqual(paths(reversed), ["tlsCertificate", "tlsPrivateKey"]);
    assert.match(reversed[0][1], /^is not a chain in order: certificate 2 \(CN=198\.18\.0\.2\) did not issue certificate 1 \(CN=test CA\); put the server's certificate first/);
});

test("every shape problem is reported, at its key", () => {
    const at = (tlsCertificate: string | undefined, tlsPrivateKey: string | undefined, now?: Date) => givenTlsProblems({ tlsCertificate, tlsPrivateKey }, now);
    assert.deepEqual(at(undefined, undefined).map(([p, m]) => `${p}: ${m.split(";")[0]}`), ["tlsCertificate: missing", "tlsPrivateKey: missing"]);
    assert.match(at("not a certificate", pki["server.key"])[0][1], /^holds no PEM certificate/);
    assert.match(at(chain() + pki["server.key"], pki["server.key"])[0][1], /^holds a private key; put only certificates here and the key in spark-vllm:tlsPrivateKey/);
    assert.match(at("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", pki["server.key"])[0][1], /^certificate 1 of 1 cannot be parsed/);
    assert.match(at(chain(), pki["encrypted.key"])[0][1], /^is encrypted, and the proxy cannot ask for its passphrase/);
    assert.match(at(chain(), pki["server.key"] + pki["other.key"])[0][1], /^must be exactly one PEM private key/);
    assert.match(at(chain(), pki["server.crt"])[0][1], /^must be exactly one PEM private key \(-----BEGIN PRIVATE KEY-----\), found 0 keys/);
    assert.match(at(chain(), "x".repeat(70_000))[0][1], /^is 70000 characters long; at most 65536/);
    const later = new Date(Date.now() + 3 * 86_400_000);
    assert.match(at(chain(), pki["server.key"], later)[0][1], /^the server's certificate expired on .*; renew it and set the new chain/);
});

test("parseSpec: endpoint.tls given checks the texts with every other problem at once; without texts, only that both secrets are set", () => {
    const raw = { ...rawConfig(2), endpoint: { tls: "given" }, vllm: { ...rawConfig(2).vllm, port: 99999 } };
    let problems: string[] = [];
    try {
        parseSpec(raw, { tlsCertificate: chain(), tlsPrivateKey: pki["other.key"] });
    } catch (e) {
        assert.ok(e instanceof SpecError);
        problems = e.problems;
    }
    assert.ok(problems.some(p => p.startsWith("spark-vllm:vllm.port:")), problems.join("\n"));
    assert.ok(problems.some(p => p.startsWith("spark-vllm:tlsPrivateKey: does not belong to the server's certificate")), problems.join("\n"));
    // spark-vllm plan: the stack file holds secure: values it cannot read.
    assert.deepEqual(specProblems({ ...rawConfig(2), endpoint: { tls: "given" } }).filter(p => p.includes("tls")), [
        "spark-vllm:tlsCertificate: missing; endpoint.tls given needs it as a secret: `cat chain.pem | pulumi config set --secret spark-vllm:tlsCertificate`",
        "spark-vllm:tlsPrivateKey: missing; endpoint.tls given needs it as a secret: `cat key.pem | pulumi config set --secret spark-vllm:tlsPrivateKey`",
    ]);
    const set = parseSpec({ ...rawConfig(2), endpoint: { tls: "given" }, tlsCertificate: SECRET_SET, tlsPrivateKey: SECRET_SET });
    assert.equal(set.endpoint.tls, "given");
    assert.ok(!JSON.stringify(parseSpec({ ...rawConfig(2), endpoint: { tls: "given" } }, { tlsCertificate: chain(), tlsPrivateKey: pki["server.key"] })).includes("BEGIN"),
        "the texts do not end up in the spec");
    assert.ok(specProblems({ ...rawConfig(2), endpoint: { tls: "self" } }).includes('spark-vllm:endpoint.tls: must be none, generated or given, got "self"'));
});

test("a private key (or chain) in plain text in the stack file is refused like every secret, without its text", () => {
    const raw = rawConfigFromStack({ "spark-vllm:tlsPrivateKey": pki["server.key"], "spark-vllm:tlsCertificate": { secure: "AAEC" } },
        { plainText: v => typeof v === "string" });
    assert.equal(raw.tlsPrivateKey, SECRET_IN_PLAIN_TEXT);
    assert.equal(raw.tlsCertificate, SECRET_SET);
    const problems = specProblems({ ...rawConfig(2), endpoint: { tls: "given" }, ...raw });
    assert.ok(problems.includes("spark-vllm:tlsPrivateKey: is in plain text in the stack file; encrypt it with `pulumi config set --secret spark-vllm:tlsPrivateKey` (the file then holds secure: …)"), problems.join("\n"));
    assert.ok(!problems.join("\n").includes("BEGIN"));
});

test("plan: the proxy-tls command reads the files on stdin, follows the certificate's digest, and the probe follows the configuration", () => {
    const plan = planCluster(parseSpec({ ...rawConfig(2), endpoint: { tls: "given" }, tlsCertificate: SECRET_SET, tlsPrivateKey: SECRET_SET }), "x");
    assert.equal(plan.endpoint, "https://198.18.0.2:8000/v1");
    assert.match(plan.endpointProbe.create, /"scheme":"https","certificate":"\/var\/tmp\/spark-vllm\/proxy\/tls\.crt"/);
    const planned = plannedResources(plan);
    const by = (name: string) => planned.find(p => p.name === name)!;
    assert.equal(by(n.of("proxy-cert")).type, GATE);
    const tls = by(n.of("proxy-tls"));
    assert.equal(tls.type, COMMAND);
    assert.equal(tls.secretStdin, "tlsFiles");
    assert.deepEqual(tls.replacedBy, [n.of("proxy-pull"), n.of("proxy-cert")]);
    assert.ok(tls.deleteBeforeReplace);
    assert.deepEqual(by(n.of("proxy-conf")).replacedBy, [n.of("api-key"), n.of("proxy-tls")], "the configuration (and its proxy restart) follows the files");
    assert.ok(by(n.of("endpoint-probe")).replacedBy.includes(n.of("proxy-conf")), "the endpoint is proven again, its certificate pinned");
    assert.doesNotMatch(plan.proxy.tls!.create, /docker|openssl/, "nothing made on the head");
    const generated = plannedResources(planCluster(parseSpec({ ...rawConfig(2), endpoint: { tls: "generated" } }), "x"));
    assert.equal(generated.find(p => p.name === n.of("proxy-cert")), undefined);
    assert.equal(generated.find(p => p.name === n.of("proxy-tls"))!.secretStdin, undefined);
});

/** Runs the given-certificate script with `stdin` in a private logDir of its own. */
function runGiven(stdin: string) {
    const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-given-"));
    try {
        const s = parseSpec({ ...rawConfig(2), logDir, endpoint: { tls: "given" }, tlsCertificate: SECRET_SET, tlsPrivateKey: SECRET_SET });
        const create = proxyTls(s).create;
        const r = spawnSync("sh", ["-c", create], { input: stdin, encoding: "utf8", env: { PATH: "/usr/bin:/bin" } });
        const dir = path.join(logDir, "proxy");
        const files = fs.existsSync(dir) ? Object.fromEntries(fs.readdirSync(dir).map(f => [f, { mode: fs.statSync(path.join(dir, f)).mode & 0o777, text: fs.readFileSync(path.join(dir, f), "utf8") }])) : {};
        return { status: r.status, stderr: r.stderr, create, dirMode: fs.existsSync(dir) ? fs.statSync(dir).mode & 0o777 : 0, files };
    } finally {
        fs.rmSync(logDir, { recursive: true, force: true });
    }
}

test("the script writes the chain and key from stdin into 0600 files in the 0700 proxy directory, neither in its text", () => {
    const stdin = givenTlsStdin({ tlsCertificate: `subject=CN=198.18.0.2\n${chain()}`, tlsPrivateKey: pki["server.key"] });
    assert.equal(stdin.split("\n").length, 3, "two lines of base64, each ended");
    const r = runGiven(stdin);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.dirMode, 0o700);
    assert.deepEqual(Object.keys(r.files).sort(), ["tls.crt", "tls.key"], "no temporary file left");
    assert.equal(r.files["tls.crt"].mode, 0o600);
    assert.equal(r.files["tls.key"].mode, 0o600);
    assert.equal(r.files["tls.crt"].text, chainCertificates(chain()).join(""), "the certificates only, server's first");
    assert.equal(r.files["tls.key"].text, pki["server.key"]);
    for (const secret of [pki["server.key"], stdin.split("\n")[1]]) assert.ok(!r.create.includes(secret.trim().split("\n")[1]), "no key text in the command");
});

test("stdin that is not two base64 lines writes nothing", () => {
    for (const stdin of ["", "abc\n", "a b\nc\n", "$(id)\nx\n"]) {
        const r = runGiven(stdin);
        assert.equal(r.status, 1, JSON.stringify(stdin));
        assert.match(r.stderr, /^spark-vllm: the given certificate and key (did not arrive on stdin|on stdin are not two lines of base64)/);
        assert.deepEqual(Object.keys(r.files), []);
    }
});

test("the program: the chain and key reach only proxy-tls's stdin; the outputs report the chain; a mismatched key fails before any resource", () => {
    const config = (key: string) => ({ ...clusterConfig(2), "spark-vllm:endpoint": { tls: "given" }, "spark-vllm:tlsCertificate": chain(), "spark-vllm:tlsPrivateKey": key });
    const { resources, outputs, error } = evaluateWithMocks(config(pki["server.key"]));
    assert.equal(error, undefined);
    const keyLine = pki["server.key"].split("\n")[1];
    for (const r of resources) {
        const { stdin, ...rest } = r.inputs;
        assert.ok(!JSON.stringify(rest).includes(keyLine), `${r.name} has the key outside stdin`);
        if (r.name === n.of("proxy-tls")) assert.equal(stdin, givenTlsStdin({ tlsCertificate: chain(), tlsPrivateKey: pki["server.key"] }));
        else assert.ok(!JSON.stringify(stdin ?? "").includes(Buffer.from(pki["server.key"]).toString("base64").slice(0, 40)), `${r.name} gets the key on stdin`);
    }
    assert.equal(outputs?.endpoint, "https://198.18.0.2:8000/v1");
    assert.equal(outputs?.endpointCertificate, chain());
    assert.equal(outputs?.endpointCertificateSha256, new crypto.X509Certificate(pki["server.crt"]).fingerprint256);
    const wrong = evaluateWithMocks(config(pki["other.key"]));
    assert.match(wrong.error ?? "", /spark-vllm:tlsPrivateKey: does not belong to the server's certificate/);
    assert.deepEqual(wrong.resources.filter(r => r.type !== "pulumi:pulumi:Stack"), [], "nothing is registered");
});
