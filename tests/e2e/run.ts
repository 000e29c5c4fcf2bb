// `npm run test:e2e [-- FILE...]`: the end-to-end files (all of them, or those named) through node's test runner,
// LANES at a time, longest first (tests/e2e/order.ts). Needs root, as the files do.
//
// Three lanes on the 2-core CI machine: the files are CPU-bound only part of the time (a supervisor's back-off, a
// probe's timeout, vLLM's load), so a third lane fills what two leave idle; docs/testing.md "Test durations" has the runs.
// SPARK_VLLM_E2E_LANES overrides it.
import { run } from "node:test";
import { spec, tap } from "node:test/reporters";
import * as path from "path";
import { e2eFiles } from "./order";
import { engineLine, findRealPulumi } from "../engine/real";

const ROOT = path.join(__dirname, "..", "..");
const lanes = process.env.SPARK_VLLM_E2E_LANES ?? "3";
if (!/^[1-9][0-9]*$/.test(lanes)) {
    console.error(`SPARK_VLLM_E2E_LANES=${lanes}: expected a whole number of files at a time, e.g. 3`);
    process.exit(2);
}
const named = process.argv.slice(2).map(f => path.resolve(f));
// The real Pulumi when its CLI, Node.js language host and providers are installed (tests/engine/real.ts), else the
// test engine; SPARK_VLLM_ENGINE chooses (real, grpc, mocks). The files' processes inherit the choice.
if (process.env.SPARK_VLLM_ENGINE === undefined) {
    const { found, missing } = findRealPulumi();
    process.env.SPARK_VLLM_ENGINE = found ? "real" : "grpc";
    if (!found) console.log(`# the real Pulumi is not installed here (${missing.join("; ")})`);
}
const engine = `# end-to-end files run on ${engineLine()}`;
console.log(engine);
// V8's code cache for every node process of the run (the test files, the test engine, the program, the policy pack,
// each `up` starting three), kept in the git-ignored .sim/; the files' processes inherit it.
process.env.NODE_COMPILE_CACHE ??= path.join(ROOT, ".sim", "node-compile-cache");
// run() and not `node --test FILES`: the command line starts its files sorted by name whatever their order (node
// 22.23, given d c a b, started a b c d), run() in the order given. Each file's process gets this one's `--import tsx`.
const stream = run({
    files: named.length ? named : e2eFiles(ROOT).map(f => path.join(ROOT, f)),
    concurrency: Number(lanes),
    timeout: 30 * 60_000,
});
stream.on("test:fail", () => { process.exitCode = 1; });
// Once more at the end, beside the summary CI reads.
stream.on("end", () => console.log(engine));
// The reporter `node --test` picks: spec on a terminal, TAP otherwise (CI's log).
(process.stdout.isTTY ? stream.compose(new spec()) : stream.compose(tap)).pipe(process.stdout);
