import { test } from "node:test";
import * as assert from "node:assert/strict";
import { digestOf, sameImage, sameWeights } from "../../../components/plan/checks";

const d = (c: string) => `sha256:${c.repeat(64)}`;

test("same repo digest on every host passes, whatever the repository spelling", () => {
    assert.equal(sameImage("r:1", [["a", `reg/r@${d("1")}`], ["b", `other/r@${d("1")}`]]), d("1"));
    assert.equal(digestOf(`198.18.0.1:5000/x@${d("2")}`), d("2"));
});

test("different digests fail naming every host and the fix", () => {
    assert.throws(() => sameImage("r:1", [["a", `r@${d("1")}`], ["b", `r@${d("2")}`], ["c", ""]]), (e: Error) =>
        e.message.includes(`a: r@${d("1")}`) && e.message.includes(`b: r@${d("2")}`) &&
        e.message.includes("c: no repo digest") && e.message.includes("pin spark-vllm:image by digest"));
});

test("weights: the same files everywhere agree; a missing or short file names the host", () => {
    const m = (host: string, files: Record<string, number>, revision = "r1") => ({ host, revision, files, totalBytes: 0 });
    const full = { "config.json": 10, "a.safetensors": 100, "b.safetensors": 100 };
    assert.equal(sameWeights("m/x", [m("a", full), m("b", { ...full })]), "r1:3:0");
    assert.throws(() => sameWeights("m/x", [m("a", full), m("b", { "config.json": 10, "a.safetensors": 50 }), m("c", full, "r2")]), (e: Error) =>
        /b: missing b\.safetensors/.test(e.message) && /b: different size from a: a\.safetensors/.test(e.message) &&
        /c: snapshot r2, but a has r1/.test(e.message) && /set spark-vllm:model\.weights: download/.test(e.message));
});
