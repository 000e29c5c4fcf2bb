// The held-out owners' logs (tests/fixtures/logs/heldout): not tuned on; scored once (index.json `scored`,
// docs/troubleshooting.md). This keeps that score from sliding: a catalog change that loses one fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { diagnoseWithNccl } from "../../../components/knowledge/nccl";

const HELDOUT = path.join(__dirname, "..", "..", "fixtures", "logs", "heldout");
const INDEX = JSON.parse(readFileSync(path.join(HELDOUT, "index.json"), "utf8")) as {
    fixtures: Record<string, { source: string; kind: string; line: string; fix: string[] }>;
    scored: { first: string };
};

test("held-out owners' logs: kind, root-cause line and the fix in the hint for every one (the documented score)", () => {
    assert.deepEqual(Object.keys(INDEX.fixtures).sort(), readdirSync(HELDOUT).filter(f => f.endsWith(".log")).sort());
    const failed: string[] = [];
    for (const [file, f] of Object.entries(INDEX.fixtures)) {
        const d = diagnoseWithNccl(readFileSync(path.join(HELDOUT, file), "utf8"));
        const ok = d?.kind === f.kind && d.line.includes(f.line) && f.fix.every(w => d.hint.includes(w));
        if (!ok) failed.push(`${file} (${f.source}): ${d?.kind} ${JSON.stringify(d?.line)}`);
    }
    const n = Object.keys(INDEX.fixtures).length;
    assert.deepEqual(failed, []);
    assert.ok(INDEX.scored.first.startsWith(`${n}/${n} `), INDEX.scored.first);
    const doc = readFileSync(path.join(__dirname, "..", "..", "..", "docs", "troubleshooting.md"), "utf8");
    assert.match(doc, new RegExp(`held-out set[\\s\\S]{0,300}\\*\\*${n}/${n}\\*\\*`));
});
