// Profiles one `pulumi preview` evaluation of N hosts (js mode, as bench/evaluate.ts runs it) with V8's own
// profilers on the program's process: `node --import tsx bench/profile.ts N OUTDIR [cpu|heap|gc]...`.
// cpu: --cpu-prof (a .cpuprofile per process); heap: V8's sampling allocation profile, collected objects included
// (bench/heap-preload.mjs); gc: --trace-gc to OUTDIR/gc.log. Also writes OUTDIR/registrations.json: per resource type, the count and
// the bytes of the inputs the program registered (JSON of each registration's inputs).
import * as fs from "node:fs";
import * as path from "node:path";
import { compileProgram } from "./evaluate";
import { manyHostConfig } from "../tests/harness/many-hosts";
import { runProgram } from "../tests/grpc/runner";

async function main() {
    const [nArg, outArg, ...rest] = process.argv.slice(2);
    // --node=FLAG: a node flag for the program's process (as Pulumi.yaml's runtime option nodeargs passes them).
    const kinds = rest.filter(a => !a.startsWith("--node=")), extra = rest.filter(a => a.startsWith("--node=")).map(a => a.slice(7));
    const n = Number(nArg), out = path.resolve(outArg);
    fs.mkdirSync(out, { recursive: true });
    const compiled = compileProgram();
    try {
        const nodeArgs = [...extra, "--import", path.join(__dirname, "measure-preload.mjs")];
        if (kinds.includes("cpu")) nodeArgs.push("--cpu-prof", `--cpu-prof-dir=${out}`);
        if (kinds.includes("heap")) nodeArgs.push("--import", path.join(__dirname, "heap-preload.mjs"));
        if (kinds.includes("gc")) nodeArgs.push("--trace-gc");
        const measure = path.join(out, "measure.json");
        const run = await runProgram({ dir: compiled, stack: "bench", config: manyHostConfig(n), dryRun: true, nodeArgs, env: { BENCH_MEASURE_OUT: measure, BENCH_HEAP_OUT: path.join(out, "alloc.heapprofile") } });
        if (run.exitCode !== 0 || run.engineError) throw new Error(`failed: ${run.engineError ?? ""}${run.stderr.slice(-4000)}`);
        if (kinds.includes("gc")) fs.writeFileSync(path.join(out, "gc.log"), run.stdout);
        const byType: Record<string, { count: number; inputBytes: number }> = {};
        const byName: Array<{ name: string; type: string; bytes: number }> = [];
        for (const r of run.registrations as any[]) {
            const bytes = JSON.stringify(r.inputs ?? r.object ?? {}).length;
            const t = (byType[r.type] ??= { count: 0, inputBytes: 0 });
            t.count++; t.inputBytes += bytes;
            byName.push({ name: r.name, type: r.type, bytes });
        }
        // One host's registrations in full (the third host: neither the head nor the last), to read what they carry.
        const sample = (run.registrations as any[]).filter(r => /-002-[a-z]+$/.test(r.name) || !/-\d+(-|$)/.test(r.name)).map(r => ({ name: r.name, type: r.type, inputs: r.inputs, dependencies: r.dependencies }));
        fs.writeFileSync(path.join(out, "registrations.json"), JSON.stringify({ byType, byName, sample }, null, 1));
        console.log(JSON.stringify(JSON.parse(fs.readFileSync(measure, "utf8"))), run.registrations.length, "resources");
    } finally {
        fs.rmSync(compiled, { recursive: true, force: true });
    }
}
main().catch(e => { console.error(e); process.exit(1); });
