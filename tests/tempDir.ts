// Temporary folders for tests: named spark-vllm-<name>-… (the names CI's leftover check judges, tests/sim/leftovers.ts)
// and removed when the test process exits, whether its tests passed or failed (node --test runs each file in its own
// process). A test that is killed leaves its folder; the leftover check then names it.
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

const made: string[] = [];

export function testTempDir(name: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `spark-vllm-${name}-`));
    if (!made.length) process.once("exit", () => { for (const d of made) fs.rmSync(d, { recursive: true, force: true }); });
    made.push(dir);
    return dir;
}
