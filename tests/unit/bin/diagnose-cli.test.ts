import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const ROOT = path.join(__dirname, "..", "..", "..");
const FIXTURES = path.join(ROOT, "tests", "fixtures", "logs");

function cli(args: string[], input?: string) {
    const run = spawnSync(path.join(ROOT, "node_modules", ".bin", "node"), ["bin/spark-vllm.js", "diagnose", ...args], {
        cwd: ROOT,
        input,
        encoding: "utf8",
    });
    return { code: run.status, out: run.stdout, err: run.stderr };
}

test("diagnose FILE prints kind, root cause, hint and context; exit 0", () => {
    const r = cli([path.join(FIXTURES, "kv-cache-insufficient.log")]);
    assert.equal(r.code, 0, r.err);
    const lines = r.out.split("\n");
    assert.equal(lines[0], "kind: kv-cache-insufficient");
    assert.match(lines[1], /^root cause: ValueError: To serve at least one request with the models's max seq len \(262144\)/);
    assert.match(lines[2], /^hint: .*spark-vllm:vllm\.maxModelLen/);
    assert.equal(lines[3], "context:");
    const context = lines.slice(4).filter(l => l !== "");
    assert.equal(context.length, 15);
    assert.match(context[10], /^> ERROR [0-9 :-]+ \[core\.py:708\] ValueError: To serve at least one request/);
    assert.ok(context.every(l => !l.includes("(EngineCore_DP0 pid=")));
});

test("diagnose - reads stdin (CRLF log)", () => {
    const r = cli(["-"], readFileSync(path.join(FIXTURES, "port-in-use.log"), "utf8"));
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^kind: port-in-use\nroot cause: OSError: \[Errno 98\] Address already in use\nhint: .*spark-vllm:vllm\.port/);
    assert.ok(!r.out.includes("\r"));
});

test("diagnose --json prints the Diagnosis", () => {
    const r = cli(["--json", path.join(FIXTURES, "gated-repo.log")]);
    assert.equal(r.code, 0, r.err);
    const d = JSON.parse(r.out);
    assert.deepEqual(Object.keys(d).sort(), ["hint", "kind", "line"]);
    assert.equal(d.kind, "gated-repo");
    assert.match(d.line, /^huggingface_hub\.errors\.GatedRepoError: 401 Client Error\./);
});

test("no diagnosis: exit 1 with the line count", () => {
    const log = readFileSync(path.join(FIXTURES, "clean-startup.log"), "utf8");
    const r = cli(["-"], log);
    assert.equal(r.code, 1);
    assert.equal(r.out, "");
    assert.match(r.err, /^no known root cause found in \d+ lines; read the full log\n$/);
    const json = cli(["--json", "-"], log);
    assert.equal(json.code, 1);
    assert.equal(json.out.trim(), "null");
});

test("usage errors and unreadable files: exit 2", () => {
    const none = cli([]);
    assert.equal(none.code, 2);
    assert.match(none.err, /usage: spark-vllm diagnose FILE\|-/);
    assert.equal(cli(["a.log", "b.log"]).code, 2);
    const bad = cli(["--verbose", "a.log"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /unknown option --verbose/);
    const missing = cli(["/nonexistent/vllm.log"]);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /cannot read \/nonexistent\/vllm\.log: ENOENT/);
});

test("diagnose on owners' logs (tests/fixtures/logs/field): each class of issue 47 with its root cause and the fix", () => {
    const FIELD = path.join(FIXTURES, "field");
    const index = JSON.parse(readFileSync(path.join(FIELD, "index.json"), "utf8")).fixtures as Record<string, { kind: string; line: string; fix: string[] }>;
    const seen = new Set<string>();
    for (const [file, f] of Object.entries(index)) {
        if (seen.has(f.kind)) continue;
        seen.add(f.kind);
        const r = cli([path.join(FIELD, file)]);
        assert.equal(r.code, 0, `${file}: ${r.err}`);
        const [kind, cause, hint] = r.out.split("\n");
        assert.equal(kind, `kind: ${f.kind}`, file);
        assert.ok(cause.startsWith("root cause: ") && cause.includes(f.line), `${file}: ${cause}`);
        for (const fix of f.fix) assert.ok(hint.startsWith("hint: ") && hint.includes(fix), `${file}: ${fix}`);
    }
    assert.deepEqual([...seen].sort(), ["driver-oom", "mp-across-nodes", "rdma-kernel-regression", "roce-gid-index", "socket-iface-missing", "worker-died"]);
});

test("diagnose --stack: its usage, a missing value and a missing stack file are refused before any host is asked", () => {
    const help = cli(["--stack", "x", "--help"]);
    assert.equal(help.code, 0);
    assert.match(help.out, /spark-vllm diagnose --stack NAME \[--json\] \[--dir DIR\]/);
    const noValue = cli(["--stack"]);
    assert.equal(noValue.code, 2);
    assert.match(noValue.err, /--stack needs a value/);
    const dir = mkdtempSync(path.join(tmpdir(), "spark-vllm-diagnose-stack-"));
    try {
        const missing = cli(["--stack", "nosuch", "--dir", dir]);
        assert.equal(missing.code, 3, missing.err);
        assert.match(missing.err, /Pulumi\.nosuch\.yaml/);
        assert.equal(missing.out, "");
    } finally {
        rmSync(dir, { recursive: true, force: true });
    }
});
