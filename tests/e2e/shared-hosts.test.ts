// End to end: two stacks on the same two simulated Sparks (needs root). Stack B is refused on the hosts stack A holds,
// before anything of B's is created, with a message naming A, its model, since when and the fix; then the variant
// switch the README documents: destroy A, up B, nothing of A left behind, B serves.
import { describe, test } from "node:test";
import * as assert from "node:assert/strict";
import { leftovers } from "../sim/stacks";
import { failure, simSuite } from "./suite";
import { Stack, destroy, up } from "../engine/engine";
import { containerName } from "../../components/plan/naming";

const suite = simSuite("e2e-shared-hosts");
const HOSTS = ["spark-a", "spark-b"];
const LOG_DIR = "/var/tmp/spark-vllm";

/** The same model served under another name: another variant of the same pair of Sparks. */
function variant(name: string, servedName: string): Stack {
    const stack = suite.stack(name);
    stack.config["spark-vllm:model"] = { ...(stack.config["spark-vllm:model"] as object), servedName };
    return stack;
}

async function http(url: string, init: RequestInit = {}): Promise<{ status: number; body: string }> {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: await res.text() };
}

async function chat(endpoint: string, apiKey: string, model: string) {
    return http(`${endpoint}/chat/completions`, {
        method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    });
}

/** Container name → its stack label and id, on one host. */
async function containers(host: string): Promise<Record<string, { stack: string; id: string }>> {
    const r = await suite.sim.docker(host, ["ps", "-a", "--format", '{{.Names}} {{.Label "spark-vllm.stack"}} {{.ID}}']);
    assert.equal(r.code, 0, r.stderr);
    return Object.fromEntries(r.stdout.trim().split("\n").filter(Boolean).map(l => l.split(" ")).map(([n, stack, id]) => [n, { stack, id }]));
}

/** PIDs on the machine whose environment names the stack (every process docker exec starts in our containers does). */
async function processesOf(owner: string): Promise<string[]> {
    // environ is NUL-separated: with -z each variable is one "line", -x matches it whole.
    const r = await suite.sim.exec(HOSTS[0], `grep -lzsxF -- 'SPARK_VLLM_STACK=${owner}' /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true`);
    return r.stdout.trim().split("\n").filter(Boolean);
}

describe("two stacks on one pair of Sparks", () => {
    // Made in the tests: the sim's hosts are there only once `before` has run.
    let a: Stack, b: Stack;

    test("B is refused on A's hosts, naming A, its model, since when and the fix; nothing of B is created and A keeps serving", async () => {
        a = variant("qwen-a", "qwen-a");
        b = variant("qwen-b", "qwen-b");
        const ra = await up(a);
        assert.equal(ra.error, undefined, ra.error);
        const before = Object.fromEntries(await Promise.all(HOSTS.map(async h => [h, await containers(h)] as const)));
        for (const h of HOSTS) assert.equal(before[h][containerName(h)]?.stack, "qwen-a", JSON.stringify(before[h]));
        assert.equal(before["spark-a"]["spark-vllm.proxy"]?.stack, "qwen-a");
        // Every process in A's containers carries the stack: vLLM, Ray, the init.
        assert.ok((await processesOf("spark-vllm/qwen-a")).length >= 3, "A's processes carry SPARK_VLLM_STACK");

        const rb = await up(b);
        failure(rb);
        // Each host's helper-program install refused (both start at once); its own message names the host.
        const refused = HOSTS.filter(h => rb.errors.some(e => e.includes(`${h}: held by`)));
        assert.ok(refused.length >= 1, rb.errors.join("\n"));
        const error = rb.errors.join("\n");
        for (const h of refused)
            // The served name is on the proxy's labels, so only the head's message has it.
            assert.match(error, new RegExp(`${h}: held by stack qwen-a \\(model Qwen/Qwen3\\.5-122B-A10B-FP8${h === HOSTS[0] ? ", served as qwen-a" : ""}\\) since ` +
                `\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC \\(containers [^)]*${containerName(h)}[^)]*\\): run \`pulumi destroy -s qwen-a\` first ` +
                `to switch this host to stack qwen-b, or give stack qwen-b other hosts`), error);
        // The refusal came first: B pulled, created and launched nothing, and did not replace A's helper program.
        assert.ok(rb.ops.some(o => o.failed && o.name.endsWith("-tools")), "refused at the helper program's install");
        const created = rb.ops.filter(o => o.op !== "same" && !o.failed && (o.type.startsWith("docker:index") || o.type === "command:remote:Command"));
        assert.deepEqual(created.map(o => `${o.op} ${o.name}`), []);
        for (const h of HOSTS) assert.deepEqual(await containers(h), before[h], `${h}: A's containers untouched`);
        const served = await chat(ra.outputs!.endpoint as string, ra.outputs!.apiKey as string, "qwen-a");
        assert.equal(served.status, 200, served.body);
        const d = await destroy(b);
        assert.deepEqual(d.errors, []);
        const tools = await suite.sim.exec(HOSTS[0], `test -f ${LOG_DIR}/spark_vllm_tools.py && echo present`);
        assert.equal(tools.stdout.trim(), "present", "destroying the refused stack leaves A's helper program");
    });

    test("variant switch: destroy A, up B: nothing of A is left (containers, processes, files), and B serves", async () => {
        const da = await destroy(a);
        assert.deepEqual(da.errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
        for (const h of HOSTS) {
            assert.deepEqual(Object.keys(await containers(h)).filter(n => n.startsWith("spark-vllm")), [], h);
            const files = await suite.sim.exec(h, `ls -A ${LOG_DIR} 2>/dev/null || true`);
            assert.deepEqual(files.stdout.trim().split("\n").filter(Boolean), [], `${h}: files A left under ${LOG_DIR}`);
        }
        assert.deepEqual(await processesOf("spark-vllm/qwen-a"), []);

        const rb = await up(b);
        assert.equal(rb.error, undefined, rb.error);
        assert.equal(rb.outputs?.modelName, "qwen-b");
        const served = await chat(rb.outputs!.endpoint as string, rb.outputs!.apiKey as string, "qwen-b");
        assert.equal(served.status, 200, served.body);
        for (const h of HOSTS) assert.equal((await containers(h))[containerName(h)]?.stack, "qwen-b");
        const db = await destroy(b);
        assert.deepEqual(db.errors, []);
        assert.deepEqual(await leftovers(suite.sim), []);
    });
});
