// `npm run test:e2e [-- FILE...]`: the end-to-end files (all of them, or those named) through node's test runner,
// LANES at a time, longest first (tests/e2e/order.ts). Needs root, as the files do.
//
// Three lanes on the 2-core CI machine: the files are CPU-bound only part of the time (a supervisor's back-off, a
// probe's timeout, vLLM's load), so a third lane fills what two leave idle; README "Test durations" has the runs.
// SPARK_VLLM_E2E_LANES overrides it.
import { spawnSync } from "child_process";
import * as path from "path";
import { e2eFiles } from "./order";

const ROOT = path.join(__dirname, "..", "..");
const lanes = process.env.SPARK_VLLM_E2E_LANES ?? "3";
if (!/^[1-9][0-9]*$/.test(lanes)) {
    console.error(`SPARK_VLLM_E2E_LANES=${lanes}: expected a whole number of files at a time, e.g. 3`);
    process.exit(2);
}
const named = process.argv.slice(2);
const files = named.length ? named : e2eFiles(ROOT);
const r = spawnSync(process.execPath, ["--import", "tsx", "--test", `--test-concurrency=${lanes}`, "--test-timeout=1800000", ...files], {
    cwd: ROOT,
    stdio: "inherit",
    // V8's code cache for every node process of the run (the test files, the test engine, the program, the policy
    // pack), kept in the git-ignored .sim/: each `up` starts three of them.
    env: { ...process.env, NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? path.join(ROOT, ".sim", "node-compile-cache") },
});
process.exit(r.status ?? 1);
