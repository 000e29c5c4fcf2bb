// Program evaluation as `pulumi preview` runs it: index.ts for N hosts (tests/harness/many-hosts.ts) run by
// @pulumi/pulumi's own cmd/run, with the language host's arguments and environment, against the test gRPC engine
// (tests/grpc/runner.ts), in two ways a user can run the project:
//   js       compiled first (tsc, as `npm run build` compiles) and run with Pulumi.yaml `typescript: false`;
//   ts-node  the committed Pulumi.yaml (`typescript: true`): cmd/run registers the SDK's vendored ts-node 7.0.1, which
//            type-checks unless PULUMI_NODEJS_TRANSPILE_ONLY=true or tsconfig's noCheck (cmd/run/run.js; vendor
//            ts-node@7.0.1/index.js: `typeCheck = options.typeCheck === true || options.transpileOnly !== true`).
// Either way cmd/run loads source-map-support first (@pulumi/pulumi 3.276.0 cmd/run/index.js:
// `require("source-map-support/register")`), so every `new Error().stack` the SDK takes is source-mapped, as in a
// real run. The program's process is measured from inside (bench/measure-preload.mjs: getrusage at exit), so the
// CPU time is what the program cost, whatever else this machine runs.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { spawnSync } from "node:child_process";
import { manyHostConfig } from "../tests/harness/many-hosts";
import { runProgram } from "../tests/grpc/runner";
import { FloorResource, containersOnly, floorGraph, floorProject } from "./floor";

const ROOT = path.join(__dirname, "..");

export { manyHostConfig };

//   floor    the SDK floor (bench/floor.ts): the resource graph the js run of the same host count registered, with
//            the smallest inputs and no spark-vllm code; what the SDKs alone charge for those registrations.
//   floor-containers  the same with the graph's docker.Containers alone: the least a design with a container per host
//            registers.
export type EvalMode = "js" | "ts-node" | "floor" | "floor-containers";
export const EVAL_MODES: EvalMode[] = ["js", "ts-node", "floor", "floor-containers"];
const isFloor = (mode: EvalMode) => mode === "floor" || mode === "floor-containers";

export interface Evaluation {
    hosts: number;
    mode: EvalMode;
    resources: number;
    /** Spawn to exit of the program's process (node start, the SDK, ts-node if any, the program, every registration). */
    wallSeconds: number;
    /** user + system CPU of the program's process (all its threads, GC included). */
    cpuSeconds: number;
    userSeconds: number;
    systemSeconds: number;
    peakRssMiB: number;
    /** The machine's 1-minute load average when it ended (the bench adds it). */
    loadAverage?: number;
    /** What it registered, as the floor mode registers it again (js mode only). */
    graph?: FloorResource[];
}

/**
 * The program compiled into a temporary project directory: index.ts and components/ by tsc with the package build's
 * options (tsconfig.build.json: no source maps), the helper program where plan/toolsProgram.js finds it, as the build copies it, and a
 * Pulumi.yaml that runs index.js as JavaScript. Returns the directory; the caller removes it.
 */
export function compileProgram(): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-js-"));
    const tsconfig = path.join(dir, "tsconfig.bench.json");
    fs.writeFileSync(tsconfig, JSON.stringify({
        extends: path.join(ROOT, "tsconfig.build.json"),
        compilerOptions: { rootDir: ROOT, outDir: dir, declaration: false, typeRoots: [path.join(ROOT, "node_modules", "@types")] },
        include: [path.join(ROOT, "index.ts"), path.join(ROOT, "components", "**", "*.ts")],
        exclude: [path.join(ROOT, "node_modules")],
    }));
    const tsc = require.resolve("typescript/bin/tsc", { paths: [ROOT] });
    const r = spawnSync(process.execPath, [tsc, "-p", tsconfig], { cwd: ROOT, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`compiling the program for the bench failed: ${r.stdout}${r.stderr}`);
    fs.cpSync(path.join(ROOT, "components", "hostProgram"), path.join(dir, "components", "hostProgram"), { recursive: true });
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "spark-vllm-bench-compiled", private: true }));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: spark-vllm\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: index.js\n");
    return dir;
}

/**
 * One `pulumi preview` evaluation of n hosts; `compiled` is compileProgram's directory (js mode), `floor` the graph a
 * js evaluation of n hosts returned (floor mode).
 */
export async function evaluateOnce(n: number, mode: EvalMode, compiled?: string, floor?: FloorResource[]): Promise<Evaluation> {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-eval-"));
    const graph = mode === "floor-containers" ? containersOnly(floor ?? []) : floor ?? [];
    const floorRun = isFloor(mode) && compiled ? floorProject(graph, compiled) : undefined;
    try {
        const measure = path.join(tmp, "measure.json");
        const dir = mode === "js" ? compiled : isFloor(mode) ? floorRun?.dir : ROOT;
        if (!dir) throw new Error(`${mode} mode needs the compiled program (compileProgram)`);
        if (isFloor(mode) && !graph.length) throw new Error(`${mode} mode needs the graph of a js evaluation of the same host count`);
        const t0 = process.hrtime.bigint();
        const run = await runProgram({
            dir, stack: "bench", config: manyHostConfig(n), dryRun: true,
            nodeArgs: ["--import", path.join(__dirname, "measure-preload.mjs")],
            env: { BENCH_MEASURE_OUT: measure, ...floorRun?.env },
        });
        const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
        if (run.exitCode !== 0 || run.engineError) throw new Error(`evaluation of ${n} hosts (${mode}) failed (exit ${run.exitCode}): ${run.engineError ?? ""}${run.stderr.slice(-4000)}`);
        const m = JSON.parse(fs.readFileSync(measure, "utf8")) as { maxRssKiB: number; userMicros: number; systemMicros: number };
        return {
            hosts: n,
            mode,
            // The stack resource is the engine's root, not the program's: count what the program registered.
            resources: run.registrations.length,
            wallSeconds: wallMs / 1000,
            cpuSeconds: (m.userMicros + m.systemMicros) / 1e6,
            userSeconds: m.userMicros / 1e6,
            systemSeconds: m.systemMicros / 1e6,
            peakRssMiB: m.maxRssKiB / 1024,
            ...(mode === "js" ? { graph: floorGraph(run.registrations) } : {}),
        };
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
        if (floorRun) fs.rmSync(floorRun.dir, { recursive: true, force: true });
    }
}
