// The end-to-end runner's order (tests/e2e/order.ts): every file runs exactly once, longest first, a new file first.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { E2E_SECONDS, e2eFiles } from "../../e2e/order";
import { testTempDir } from "../../tempDir";

const ROOT = path.join(__dirname, "..", "..", "..");

test("every end-to-end file has its duration in E2E_SECONDS, and every entry is a file", () => {
    const files = e2eFiles(ROOT);
    assert.deepEqual([...files].sort(), Object.keys(E2E_SECONDS).sort(),
        "a new e2e file: add it to tests/e2e/order.ts E2E_SECONDS with its seconds from a run; a removed one: drop its entry");
    assert.equal(new Set(files).size, files.length);
    for (const f of files) assert.ok(fs.existsSync(path.join(ROOT, f)), f);
});

test("the runner starts the longest file first and the sim's own test among them", () => {
    const files = e2eFiles(ROOT);
    const seconds = files.map(f => E2E_SECONDS[f]);
    assert.deepEqual(seconds, [...seconds].sort((a, b) => b - a));
    assert.equal(files[0], Object.entries(E2E_SECONDS).sort((a, b) => b[1] - a[1])[0][0]);
    assert.ok(files.includes("tests/sim/sim.test.ts"));
});

test("a file not in the list yet runs first", () => {
    const root = testTempDir("e2e-order");
    fs.mkdirSync(path.join(root, "tests", "e2e"), { recursive: true });
    for (const f of ["cluster.test.ts", "rayless.test.ts", "brand-new.test.ts", "suite.ts"]) fs.writeFileSync(path.join(root, "tests", "e2e", f), "");
    const known = ["tests/e2e/cluster.test.ts", "tests/e2e/rayless.test.ts", "tests/sim/sim.test.ts"].sort((a, b) => E2E_SECONDS[b] - E2E_SECONDS[a]);
    assert.deepEqual(e2eFiles(root), ["tests/e2e/brand-new.test.ts", ...known]);
});
