// End to end on simulated Sparks (needs root): head-then-copy hardened (issues 13, 30). The real copy with its generated
// token (each worker presents its own, derived from it), the head's server gone after `up`; the real server refusing requests without the token, listings, bad
// ranges and a snapshot that links out of the model's folder; and the worker's planned copy command (over real ssh,
// in its real container) against a malicious head (tests/sim/weights/fake-head.py on the head's fabric address):
// names with `../`, a revision that is a path, bytes that do not match their sha256. The worker refuses each, naming
// the host and what was wrong, and writes nothing outside its cache. Issue 41: a snapshot whose names share blobs
// (a duplicated config, empty __init__.py files) is copied whole, every blob's content matching its sha256 name; and
// a keyless client on the fabric holding more connections than the server lets wait, each reopened as it is closed,
// does not make the copy fail.
import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { leftovers } from "../sim/stacks";
import { modelCacheName, modelRevision } from "../sim/hosts";
import { esc, simSuite } from "./suite";
import { Stack, destroy, up } from "../engine/engine";
import { resourceNames } from "../../components/plan/naming";
import { parseSpec } from "../../components/spec/parseSpec";
import { planCluster } from "../../components/plan/plan";
import { COMMAND, plannedResources } from "../../components/plan/resources";
import { workerCopyToken } from "../../components/plan/copyToken";

const N = resourceNames();
const suite = simSuite("e2e-weights", { weights: "head-then-copy" });
const MODEL = "Qwen/Qwen3.5-122B-A10B-FP8";
const CACHE = "/root/.cache/huggingface";
const REPO = `${CACHE}/hub/${modelCacheName(MODEL)}`;
const PORT = 20080;
const TOKEN = "e2e-copy-token-0123456789";
/** What spark-b's copy receives and presents: its own token, derived from the stack's (issue 30, components/plan/copyToken.ts). */
const WORKER = workerCopyToken(TOKEN, "spark-b");
const FAKE_DIR = "/var/tmp/fake-head";
/** From the worker's snapshot folder (7 levels below /) to the host-mounted logDir: outside the cache, seen on the host. */
const ESCAPE = "../../../../../../../var/tmp/spark-vllm";

const sha256 = (b: Buffer | string) => crypto.createHash("sha256").update(b).digest("hex");

/** The planned create command of one resource of the stack (exactly what up runs there). */
function plannedCreate(stack: Stack, name: string): string {
    const raw = Object.fromEntries(Object.entries(stack.config).map(([k, v]) => [k.replace(/^spark-vllm:/, ""), v]));
    const entry = plannedResources(planCluster(parseSpec(raw))).find(p => p.name === name);
    assert.ok(entry && entry.type === COMMAND, `no planned command ${name}`);
    return entry.inputs.create;
}

async function http(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: string }> {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
    return { status: res.status, headers: res.headers, body: await res.text() };
}

async function listening(host: string, port: number): Promise<boolean> {
    const r = await suite.sim.exec(host, `ss -Hltn '( sport = :${port} )'`);
    return r.stdout.trim() !== "";
}

async function waitListening(host: string, port: number): Promise<void> {
    for (let i = 0; i < 100; i++) {
        if (await listening(host, port)) return;
        await new Promise(r => setTimeout(r, 100)); // poll interval of this wait for the listener
    }
    throw new Error(`nothing listens on ${host}:${port}`);
}

/** Every path under the worker's HF cache and logDir, and the container's /tmp: what a copy may have written. */
async function footprint(): Promise<string> {
    const host = await suite.sim.exec("spark-b", `find ${CACHE} /var/tmp/spark-vllm | sort`);
    const tmp = await suite.sim.docker("spark-b", ["exec", "spark-vllm-spark-b", "sh", "-c", "ls -A /tmp"]);
    return `${host.stdout}\n--- container /tmp\n${tmp.stdout}`;
}

/** The worker's blobs whose content does not hash to their name, and any partial file left: [] when all are sound. */
async function unsoundBlobs(): Promise<string[]> {
    const r = await suite.sim.exec("spark-b", `cd ${REPO}/blobs && for b in *; do s=$(sha256sum "$b" | cut -d' ' -f1); [ "$s" = "$b" ] || echo "$b holds $s"; done`);
    return r.stdout.trim().split("\n").filter(Boolean);
}

/**
 * A client without the token holding `count` connections to the head's copy server, each reopened the moment the
 * server closes it (issue 41's attack on the old cap: it held every slot, 5 s at a time). `opened` counts them.
 */
function keylessHolder(host: string, port: number, count: number): { opened: () => number; stop: () => void } {
    let opened = 0;
    let stopped = false;
    const sockets = new Set<net.Socket>();
    const hold = () => {
        if (stopped) return;
        const s = net.connect({ host, port });
        let connected = false;
        sockets.add(s);
        s.on("connect", () => { connected = true; opened++; });
        s.on("data", () => undefined);
        s.on("error", () => undefined);
        // Reopened at once when the server closed it; a refused one (the server gone) is tried again 50 ms later.
        s.on("close", () => { sockets.delete(s); if (connected) setImmediate(hold); else setTimeout(hold, 50); });
    };
    for (let i = 0; i < count; i++) hold();
    return { opened: () => opened, stop: () => { stopped = true; for (const s of sockets) s.destroy(); } };
}

describe("head-then-copy, hardened", () => {
    let stack: Stack;
    let workerCopy: string;

    before(() => {
        stack = suite.stack("copy");
        workerCopy = plannedCreate(stack, N.host("spark-b", "weights"));
    });
    after(async () => {
        if (stack) await destroy(stack);
        assert.deepEqual(await leftovers(suite.sim), []);
    }, { timeout: 300_000 });

    test("up copies the head's weights with the generated token, then serves, and nothing serves the weights any more", async () => {
        await suite.sim.exec("spark-b", `rm -rf ${REPO}`);
        const r = await up(stack);
        assert.equal(r.error, undefined, r.error);
        const source = r.ops.find(o => o.name === N.of("weights-source"));
        const copy = r.ops.find(o => o.name === N.host("spark-b", "weights"));
        assert.ok(source && copy, "the server and the copy ran");
        assert.ok(copy.startMs < source.endMs, "the copy ran while the server did");
        const shard = (await suite.sim.exec("spark-b", `readlink ${REPO}/snapshots/*/model-00001-of-00001.safetensors`)).stdout.trim();
        assert.match(shard, /^\.\.\/\.\.\/blobs\/[0-9a-f]{64}$/, "the worker's snapshot links to blobs named by their sha256");
        assert.equal(await listening("spark-a", PORT), false, "the server stopped once spark-b held the weights");
        const ps = await suite.sim.exec("spark-a", "pgrep -af --ns $$ --nslist net '[s]erve-weights' || true");
        assert.equal(ps.stdout.trim(), "");
    });

    test("the head's server: the token on every path, no listings, 416 for bad ranges; it stops after the worker's report", async () => {
        const server = suite.sim.ssh("spark-a", plannedCreate(stack, N.of("weights-source")), { input: `${TOKEN}\n`, timeoutMs: 120_000 });
        await waitListening("spark-a", PORT);
        const base = `http://${suite.sim.hosts[0].address}:${PORT}`;
        const auth = { Authorization: `Bearer ${WORKER}` };
        for (const p of ["/manifest.json", "/files/config.json", "/"]) {
            assert.equal((await http(base + p)).status, 401, p);
            assert.equal((await http(base + p, { Authorization: "Bearer wrong" })).status, 401, p);
            // The stack's own token names no worker: refused too (a worker only ever holds its own).
            assert.equal((await http(base + p, { Authorization: `Bearer ${TOKEN}` })).status, 401, p);
        }
        for (const p of ["/", "/files/", "/files/..%2F..%2Frefs%2Fmain", "/config.json"]) assert.equal((await http(base + p, auth)).status, 404, p);
        const manifest = JSON.parse((await http(`${base}/manifest.json`, auth)).body);
        const size = manifest.files["config.json"].size as number;
        const partial = await http(`${base}/files/config.json`, { ...auth, Range: "bytes=0-9" });
        assert.equal(partial.status, 206);
        assert.equal(partial.body.length, 10);
        const beyond = await http(`${base}/files/config.json`, { ...auth, Range: `bytes=${size}-` });
        assert.equal(beyond.status, 416);
        assert.equal(beyond.headers.get("content-range"), `bytes */${size}`);
        assert.equal((await http(`${base}/files/config.json`, { ...auth, Range: "bytes=5-2" })).status, 416);
        const copy = await suite.sim.ssh("spark-b", workerCopy, { input: `${WORKER}\n`, timeoutMs: 120_000 });
        assert.equal(copy.code, 0, copy.stderr);
        const done = await server;
        assert.equal(done.code, 0, done.stderr);
        assert.match(done.stdout, /spark-a: every worker holds the weights \(spark-b\); stopped serving/);
    });

    describe("issue 41", () => {
        const snap = () => `${REPO}/snapshots/${modelRevision(suite.sim.models[0])}`;
        /** git's empty blob, as the hub names an empty non-LFS file's blob (its etag). */
        const EMPTY = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
        const ADDED = ["original/config.json", "__init__.py", "sub/__init__.py"];

        /** Runs the planned server on the head and spark-b's planned copy against it; both must succeed. */
        async function serveAndCopy(beside?: () => Promise<void>): Promise<{ copySeconds: number }> {
            await suite.sim.exec("spark-b", `rm -rf ${REPO}`);
            const server = suite.sim.ssh("spark-a", plannedCreate(stack, N.of("weights-source")), { input: `${TOKEN}\n`, timeoutMs: 180_000 });
            await waitListening("spark-a", PORT);
            if (beside) await beside();
            const started = Date.now();
            const copy = await suite.sim.ssh("spark-b", workerCopy, { input: `${WORKER}\n`, timeoutMs: 180_000 });
            const copySeconds = (Date.now() - started) / 1000;
            assert.equal(copy.code, 0, copy.stderr);
            const done = await server;
            assert.equal(done.code, 0, done.stderr);
            assert.match(done.stdout, /spark-a: every worker holds the weights \(spark-b\); stopped serving/);
            return { copySeconds };
        }

        test("names that share a blob (a duplicated config, empty __init__.py files): copied whole, each blob once, matching its name", async () => {
            // The head's snapshot as the hub lays such files out: several names linking to one blob.
            await suite.sim.exec("spark-a", [
                `cd ${snap()}`, "mkdir -p original sub", `: > ${REPO}/blobs/${EMPTY}`,
                `ln -s "../$(readlink config.json)" original/config.json`,
                `ln -s ../../blobs/${EMPTY} __init__.py`, `ln -s ../../../blobs/${EMPTY} sub/__init__.py`,
            ].join(" && "));
            try {
                await serveAndCopy();
                assert.deepEqual(await unsoundBlobs(), [], "every blob's content hashes to its name, no partial file");
                const sums = async (host: string) => (await suite.sim.exec(host, `cd ${snap()} && find . -type l -o -type f | sort | while read -r f; do sha256sum "$f"; done`)).stdout;
                const head = await sums("spark-a");
                for (const name of ADDED) assert.ok(head.includes(`./${name}`), `${name} is in the head's snapshot`);
                assert.equal(await sums("spark-b"), head, "every name on the worker reads what it reads on the head");
                const empties = (await suite.sim.exec("spark-b", `ls ${REPO}/blobs | grep -c ${sha256("")} || true`)).stdout.trim();
                assert.equal(empties, "1", "one blob for both empty files");
            } finally {
                await suite.sim.exec("spark-a", `cd ${snap()} && rm -rf original sub __init__.py && rm -f ${REPO}/blobs/${EMPTY}`);
            }
        });

        test("a keyless client holding more connections than the server lets wait, reopening each: the copy still succeeds", async () => {
            const head = suite.sim.host("spark-a").address;
            // More than the old cap (4 × workers + 8 = 12) and than the keyless budget now (32 + 8 × workers = 40).
            const count = 64;
            let holder: ReturnType<typeof keylessHolder> | undefined;
            try {
                const { copySeconds } = await serveAndCopy(async () => {
                    holder = keylessHolder(head, PORT, count);
                    for (let i = 0; i < 100 && holder.opened() < count; i++) await new Promise(r => setTimeout(r, 50)); // until all are open
                    assert.ok(holder.opened() >= count, `the keyless client holds ${count} connections (${holder.opened()} opened)`);
                });
                console.log(`# copy beside ${count} keyless connections held and reopened (${holder!.opened()} opened): ${copySeconds.toFixed(1)} s`);
                assert.deepEqual(await unsoundBlobs(), []);
            } finally {
                holder?.stop();
            }
        });
    });

    test("the head's server refuses a snapshot that links out of the model's folder", async () => {
        const snap = `${REPO}/snapshots/${modelRevision(suite.sim.models[0])}`;
        await suite.sim.exec("spark-a", `ln -s /etc/shadow ${snap}/stolen.json`);
        try {
            const r = await suite.sim.ssh("spark-a", plannedCreate(stack, N.of("weights-source")), { input: `${TOKEN}\n`, timeoutMs: 60_000 });
            assert.equal(r.code, 1);
            assert.match(r.stderr, new RegExp(`spark-a: refusing to serve ${snap}:\\n  stolen\\.json resolves outside ${REPO} \\(to /etc/shadow\\)`));
            assert.equal(await listening("spark-a", PORT), false);
        } finally {
            await suite.sim.exec("spark-a", `rm -f ${snap}/stolen.json`);
        }
    });

    describe("a malicious head", () => {
        const fakeHost = () => suite.sim.host("spark-a");
        async function withFakeHead(manifest: unknown, files: Record<string, Buffer | string>, run: () => Promise<void>): Promise<void> {
            const dir = path.join(fakeHost().root, "vartmp", "fake-head");
            fs.mkdirSync(dir, { recursive: true });
            fs.copyFileSync(path.join(__dirname, "..", "sim", "weights", "fake-head.py"), path.join(dir, "fake-head.py"));
            const b64 = Object.fromEntries(Object.entries(files).map(([k, v]) => [k, Buffer.from(v).toString("base64")]));
            fs.writeFileSync(path.join(dir, "spec.json"), JSON.stringify({ bind: fakeHost().address, port: PORT, token: WORKER, manifest, files: b64 }));
            await suite.sim.exec("spark-a", `setsid python3 ${FAKE_DIR}/fake-head.py ${FAKE_DIR}/spec.json > ${FAKE_DIR}/log 2>&1 < /dev/null & echo $! > ${FAKE_DIR}/pid`);
            try {
                await waitListening("spark-a", PORT);
                await suite.sim.exec("spark-b", `rm -rf ${REPO}`);
                await run();
            } finally {
                await suite.sim.exec("spark-a", `kill $(cat ${FAKE_DIR}/pid) 2>/dev/null; rm -rf ${FAKE_DIR}`);
                await suite.sim.exec("spark-b", `rm -rf ${REPO}`);
            }
        }
        const entry = (content: string) => ({ size: Buffer.byteLength(content), sha256: sha256(content) });
        const REV = "0123456789abcdef0123456789abcdef01234567";

        test("names that climb out of the snapshot: refused, nothing written anywhere", async () => {
            const evil = `${ESCAPE}/pwned-by-name`;
            await withFakeHead({ revision: REV, files: { "config.json": entry("{}"), [evil]: entry("owned"), "/tmp/abs": entry("x") } },
                { "config.json": "{}", [evil]: "owned", "/tmp/abs": "x" }, async () => {
                    const before = await footprint();
                    const r = await suite.sim.ssh("spark-b", workerCopy, { input: `${WORKER}\n`, timeoutMs: 60_000 });
                    console.log(`--- the worker refused as expected:\n${r.stderr}---`);
                    assert.equal(r.code, 1);
                    assert.match(r.stderr, new RegExp(`^spark-b: refusing the weights manifest from http://${esc(suite.sim.host("spark-a").address)}:20080; nothing was written:$`, "m"));
                    assert.ok(r.stderr.includes(`  file "${evil}" has an empty, '.' or '..' component`), r.stderr);
                    assert.ok(r.stderr.includes(`  file "/tmp/abs" is an absolute path`), r.stderr);
                    assert.equal(await footprint(), before);
                    assert.equal(fs.existsSync(path.join(suite.sim.host("spark-b").logDir, "pwned-by-name")), false);
                });
        });

        test("a revision that is a path: refused, nothing written", async () => {
            const revision = `${ESCAPE.replace(/^\.\.\//, "")}/pwned-rev`;
            await withFakeHead({ revision, files: { "config.json": entry("{}") } }, { "config.json": "{}" }, async () => {
                const before = await footprint();
                const r = await suite.sim.ssh("spark-b", workerCopy, { input: `${WORKER}\n`, timeoutMs: 60_000 });
                assert.equal(r.code, 1);
                assert.ok(r.stderr.includes(`  revision "${revision}" is not a 40-hex commit hash`), r.stderr);
                assert.equal(await footprint(), before);
                assert.equal(fs.existsSync(path.join(suite.sim.host("spark-b").logDir, "pwned-rev")), false);
            });
        });

        test("bytes that do not match their sha256: refused, the snapshot untouched, no partial file left", async () => {
            const files = { "config.json": entry("{}"), "model-00001-of-00001.safetensors": entry("the real weights") };
            await withFakeHead({ revision: REV, files }, { "config.json": "{}", "model-00001-of-00001.safetensors": "the EVIL weights" }, async () => {
                const r = await suite.sim.ssh("spark-b", workerCopy, { input: `${WORKER}\n`, timeoutMs: 60_000 });
                assert.equal(r.code, 1);
                assert.match(r.stderr, /^spark-b: refusing the head's copy of Qwen\/Qwen3\.5-122B-A10B-FP8; the snapshot was not changed:$/m);
                assert.ok(r.stderr.includes(`  model-00001-of-00001.safetensors: content does not match: sha256 ${sha256("the EVIL weights")}, ` +
                    `the manifest says ${sha256("the real weights")}`), r.stderr);
                const kept = (await suite.sim.exec("spark-b", `ls -A ${REPO}; ls -A ${REPO}/blobs; grep -rl EVIL ${CACHE} || true`)).stdout.trim().split("\n");
                assert.deepEqual(kept, ["blobs", sha256("{}")], "only the verified blob: no snapshot, no ref, no partial file, no evil bytes");
            });
        });

        test("a head without the token's match: the worker names the 401", async () => {
            await withFakeHead({ revision: REV, files: { "config.json": entry("{}") } }, { "config.json": "{}" }, async () => {
                const r = await suite.sim.ssh("spark-b", workerCopy, { input: "not-the-token\n", timeoutMs: 60_000 });
                assert.equal(r.code, 1);
                assert.match(r.stderr, new RegExp(`spark-b: the head's weights server at http://${esc(suite.sim.host("spark-a").address)}:20080 answered 401 to the manifest request: the copy token does not match`));
            });
        });
    });
});
