// The config boundary (issues 19 and 13): `pulumi up` reads every key of the namespace, so a misspelt key
// fails the program under mocks with exactly the words `spark-vllm plan` prints, and no resource registers.
// Secrets never reach the spec or a message.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { evaluateWithMocks } from "../harness/mocks";
import { clusterConfig } from "../fixtures";
import { SECRET_IN_PLAIN_TEXT, SECRET_SET, rawConfigFromStack } from "../../components/spec/stackConfig";
import { parseSpec } from "../../components/spec/parseSpec";

const ROOT = path.join(__dirname, "..", "..");
const TOKEN = "hf_TOPSECRETTOKEN0123456789";
const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAPRIVATEKEYMATERIAL\n-----END OPENSSH PRIVATE KEY-----\n";

/** `spark-vllm plan` on a stack file holding `config`: its exit code and stderr. */
function planOn(config: Record<string, unknown>, stack = "typo") {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "config-boundary-"));
    try {
        fs.writeFileSync(path.join(dir, `Pulumi.${stack}.yaml`), yaml.dump({ config }));
        const r = spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "plan", "--stack", stack, "--dir", dir], { cwd: ROOT, encoding: "utf8" });
        return { status: r.status, stderr: r.stderr };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

for (const [typo, right] of [["spark-vllm:vLLM", "vllm"], ["spark-vllm:modle", "model"]] as const) {
    test(`pulumi up refuses ${typo} with "did you mean ${right}?", as spark-vllm plan does, before any resource`, () => {
        const config: Record<string, unknown> = clusterConfig(2);
        const key = `spark-vllm:${right}`;
        config[typo] = config[key];
        delete config[key];
        if (right === "vllm") config[key] = { maxModelLen: 32768 }; // the typo is the only problem: TP defaults to the GPUs
        const { error, resources } = evaluateWithMocks(config);
        assert.ok(error, "the program must fail");
        const bare = typo.replace("spark-vllm:", "");
        assert.ok(error.includes(`spark-vllm:${bare}: unknown key; did you mean ${right}?`), error);
        assert.deepEqual(resources, [], "nothing registers: not even the stack's components");
        const plan = planOn(config);
        assert.equal(plan.stderr, `Pulumi.typo.yaml: ${error}\n`, "the same message, word for word");
        assert.equal(plan.status, 3);
    });
}

test("a key in a misspelt namespace or without one is named too (plan)", () => {
    const raw = rawConfigFromStack({ ...clusterConfig(1), "spark-vlm:logDir": "/var/tmp/x", "spark_vllm:probes": {}, hosts: [], "docker:host": "x" });
    assert.throws(() => parseSpec(raw), (e: Error) => {
        assert.ok(e.message.includes("spark-vlm:logDir: spark-vlm is not the spark-vllm namespace; did you mean spark-vllm:logDir?"), e.message);
        assert.ok(e.message.includes("spark_vllm:probes: spark_vllm is not the spark-vllm namespace; did you mean spark-vllm:probes?"), e.message);
        assert.ok(e.message.includes("hosts: has no namespace; write it as spark-vllm:hosts"), e.message);
        assert.ok(!e.message.includes("docker"), "other providers' namespaces are not ours to judge");
        return true;
    });
});

test("pulumi up: a nested value set without --path is named with the way to set it", () => {
    const config: Record<string, unknown> = { ...clusterConfig(1), "spark-vllm:vllm.port": "9000" };
    const { error, resources } = evaluateWithMocks(config);
    assert.match(error ?? "", /spark-vllm:vllm\.port: unknown key; a nested value is set with `pulumi config set --path spark-vllm:vllm\.port …`, under vllm/);
    assert.deepEqual(resources, []);
});

test("secrets never reach the raw config, the spec or an error, set right or misspelt", () => {
    const config: Record<string, unknown> = {
        ...clusterConfig(2),
        "spark-vllm:hfToken": TOKEN,
        "spark-vllm:sshPrivateKey": KEY,
        "spark-vllm:hftoken": TOKEN, // misspelt: refused, value unseen
        "spark-vllm:sshPrivatKey": KEY,
        "spark-vllm:modle": {},
    };
    const raw = rawConfigFromStack(Object.fromEntries(Object.entries(config).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)])), { text: true });
    assert.equal(raw.hfToken, SECRET_SET);
    assert.equal(raw.sshPrivateKey, SECRET_SET);
    assert.ok(!JSON.stringify(raw).includes(TOKEN) && !JSON.stringify(raw).includes("PRIVATEKEYMATERIAL"));
    const { error } = evaluateWithMocks(config);
    assert.match(error ?? "", /spark-vllm:hftoken: unknown key; did you mean hfToken\?/);
    assert.match(error ?? "", /spark-vllm:sshPrivatKey: unknown key; did you mean sshPrivateKey\?/);
    assert.ok(!error!.includes(TOKEN) && !error!.includes("PRIVATEKEYMATERIAL"), error);
    // Set right, they still travel to the program as secrets (the weights command gets the token on stdin).
    const ok: Record<string, any> = { ...clusterConfig(2), "spark-vllm:hfToken": TOKEN };
    ok["spark-vllm:model"].weights = "download";
    const good = evaluateWithMocks(ok);
    assert.equal(good.error, undefined);
    assert.ok(good.resources.some(r => r.inputs.stdin === `${TOKEN}\n`), "the token reaches stdin");
    const spec = parseSpec(rawConfigFromStack({ "spark-vllm:hfToken": TOKEN, ...Object.fromEntries(Object.entries(clusterConfig(1))) }));
    assert.ok(!JSON.stringify(spec).includes(TOKEN));
});

test("a stack file's secret must be secure:, not plain text", () => {
    const raw = rawConfigFromStack({ ...clusterConfig(1), "spark-vllm:hfToken": TOKEN, "spark-vllm:sshPrivateKey": { secure: "v1:abc" } }, {
        plainText: v => !(typeof v === "object" && v !== null && "secure" in v),
    });
    assert.equal(raw.hfToken, SECRET_IN_PLAIN_TEXT);
    assert.equal(raw.sshPrivateKey, SECRET_SET);
    assert.throws(() => parseSpec(raw), /spark-vllm:hfToken: is in plain text in the stack file; encrypt it with `pulumi config set --secret spark-vllm:hfToken`/);
});
