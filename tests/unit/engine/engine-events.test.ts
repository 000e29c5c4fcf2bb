// The test engine's optional progress hook: a command's output reaches `onLine` line by line while it runs, as
// @pulumi/command logs it (tests/engine/operations.ts runRemote), with an unterminated last line passed on at the end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { exec } from "../../engine/operations";

test("exec's onLine: whole lines as they come from stdout and stderr, split across chunks, the last one flushed", async () => {
    const seen: Array<[string, number]> = [];
    const t0 = Date.now();
    // The sleeps are the subject: output in pieces with gaps, so a line is seen to arrive before the command goes on.
    const r = await exec(["bash", "-c", "printf 'one\\ntw'; sleep 0.5; printf 'o\\n'; echo err >&2; sleep 0.3; printf 'tail'"], {
        onLine: line => seen.push([line, Date.now() - t0]),
    });
    assert.equal(r.code, 0);
    assert.equal(r.stdout, "one\ntwo\ntail");
    assert.deepEqual(seen.map(([l]) => l), ["one", "two", "err", "tail"]);
    assert.ok(seen[0][1] < seen[1][1] - 300, `"one" arrived before the command went on (${JSON.stringify(seen)})`);
});
