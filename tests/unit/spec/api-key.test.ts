// Issue 50, finding 6: a caller-given apiKey must be long enough (components/spec/apiKey.ts), and no digest of a secret
// in the relaunch triggers is unsalted or in the clear (components/wiring.ts secretDigest).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as crypto from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import { API_KEY_MIN_CHARS, apiKeyError, apiKeyProblems } from "../../../components/spec/apiKey";
import { digestSalt, secretDigest } from "../../../components/wiring";
import { SparkCluster } from "../../../components/sparkCluster";
import { parseSpec } from "../../../components/spec/parseSpec";
import { rawConfig } from "../../fixtures";

const value = <T>(o: pulumi.Output<T>) => new Promise<T>(resolve => o.apply(v => { resolve(v); return v; }));
const isSecret = (o: pulumi.Output<unknown>) => (o as unknown as { isSecret: Promise<boolean> }).isSecret;

test("a given key shorter than 32 characters is refused at the key path, with the rule and the fix, never the key", () => {
    assert.equal(API_KEY_MIN_CHARS, 32);
    for (const key of ["=", "-n", "x+", "hunter2", "a".repeat(31)]) {
        const e = apiKeyError(key);
        assert.ok(e, `${JSON.stringify(key)} was accepted`);
        assert.match(e.message, /^invalid API key:\n {2}- apiKey: is \d+ characters? long; an API key must be at least 32 \(a short key can be guessed\); generate one with `openssl rand -hex 32`, or leave apiKey unset/);
        if (key.length > 2) assert.ok(!e.message.includes(key), "the message shows the key");
    }
});

test("32 characters of RFC 6750's b64token pass; other characters, and no string, do not", () => {
    assert.deepEqual(apiKeyProblems(crypto.randomBytes(16).toString("hex")), []);
    assert.deepEqual(apiKeyProblems("EXAMPLE-KEY-from-a-secret-config-value-0123"), []);
    assert.deepEqual(apiKeyProblems("Kx7.q+Z/09_~-Kx7.q+Z/09_~-Kx7.q+Z/=="), []);
    assert.match(apiKeyProblems("a key with spaces in it, long enough")[0], /outside RFC 6750's b64token/);
    assert.match(apiKeyProblems("abc=def" + "x".repeat(30))[0], /= only at the end/);
    assert.match(apiKeyProblems("x".repeat(513))[0], /at most 512/);
    assert.match(apiKeyProblems(42)[0], /must be a string/);
});

test("SparkCluster refuses a short plain apiKey before it makes any resource", async () => {
    const made: string[] = [];
    await pulumi.runtime.setMocks({
        newResource: a => { made.push(a.type); return { id: `${a.name}-id`, state: a.inputs }; },
        call: a => a.inputs,
    }, "spark-vllm", "test", false);
    const spec = parseSpec(rawConfig(1));
    assert.throws(() => new SparkCluster("spark", { spec, apiKey: "hunter2" }), (e: Error) =>
        /^invalid API key:\n {2}- apiKey: is 7 characters long; an API key must be at least 32/.test(e.message) && !e.message.includes("hunter2"));
    await new Promise(r => setTimeout(r, 100));
    assert.deepEqual(made.filter(t => !t.startsWith("spark-vllm:index:")), [], "no resource but the component itself");
});

test("a secret's digest is an HMAC salted with project, stack and name, and always secret (a plain input's too)", async () => {
    const plain = "hunter2";
    const d = secretDigest(plain, digestSalt("spark-api-key"));
    assert.equal(await isSecret(d), true, "the digest of a plain input is secret");
    const got = await value(d);
    assert.match(got, /^[0-9a-f]{16}$/);
    assert.notEqual(got, crypto.createHash("sha256").update(plain).digest("hex").slice(0, 16), "not sha256(key)");
    assert.equal(got, crypto.createHmac("sha256", `spark-vllm trigger digest\0${pulumi.getProject()}\0${pulumi.getStack()}\0spark-api-key`).update(plain).digest("hex").slice(0, 16));
    assert.notEqual(await value(secretDigest(plain, digestSalt("other-api-key"))), got, "another name, another digest");
    assert.equal(await value(secretDigest(plain, digestSalt("spark-api-key"))), got, "stable: an unchanged key replaces nothing");
});
