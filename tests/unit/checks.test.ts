import { test } from "node:test";
import * as assert from "node:assert/strict";
import { digestOf, sameImage } from "../../components/checks";

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
