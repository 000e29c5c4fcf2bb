// What the Pulumi SDKs alone charge for a program's registrations: the resource graph a `pulumi preview` of the
// program registered (types, names, parents, providers, in order), registered again by bench/floor/index.js with the
// same SDK classes and the smallest inputs, run and measured exactly as bench/evaluate.ts runs the program. The
// program's figure minus this one is what spark-vllm's own code and inputs cost on top of the SDK.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Registration } from "../tests/grpc/monitor";

export interface FloorResource {
    type: string;
    name: string;
    custom: boolean;
    /** Index of its parent in the graph (absent: the stack). */
    parent?: number;
    /** Index of its explicit provider in the graph. */
    provider?: number;
}

/** The graph of a run's registrations, the stack itself left out (the SDK registers it in any program). */
export function floorGraph(registrations: Registration[]): FloorResource[] {
    const kept = registrations.filter(r => r.type !== "pulumi:pulumi:Stack");
    const index = new Map(kept.map((r, i) => [r.urn, i]));
    const at = (urn: string | undefined, what: string, of: string) => {
        if (!urn || !index.has(urn)) return undefined;
        const i = index.get(urn)!;
        if (i >= index.get(of)!) throw new Error(`${of}: its ${what} ${urn} registered after it`);
        return i;
    };
    return kept.map(r => ({
        type: r.type, name: r.name, custom: r.custom,
        parent: at(r.parent, "parent", r.urn),
        // A provider reference is "URN::ID" (pulumi/pulumi sdk/go/common/resource/providers/reference.go).
        provider: at(r.provider?.slice(0, r.provider.lastIndexOf("::")), "provider", r.urn),
    }));
}

/**
 * The least any design that runs vLLM in one Docker container per host registers: the graph's containers alone, with no
 * parent, no explicit provider and nothing else beside them.
 */
export function containersOnly(graph: FloorResource[]): FloorResource[] {
    return graph.filter(r => r.type === "docker:index/container:Container").map(({ type, name, custom }) => ({ type, name, custom }));
}

/**
 * A project directory that runs bench/floor/index.js as JavaScript, with `graph` in graph.json; `compiled` is
 * compileProgram's directory, whose components/debugStacks.js the floor uses as the program does. The caller removes it.
 */
export function floorProject(graph: FloorResource[], compiled: string): { dir: string; env: Record<string, string> } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-bench-floor-"));
    fs.copyFileSync(path.join(__dirname, "floor", "index.js"), path.join(dir, "index.js"));
    fs.symlinkSync(path.join(__dirname, "..", "node_modules"), path.join(dir, "node_modules"));
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "spark-vllm-bench-floor", private: true }));
    fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: spark-vllm\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: index.js\n");
    const graphFile = path.join(dir, "graph.json");
    fs.writeFileSync(graphFile, JSON.stringify(graph));
    return { dir, env: { BENCH_FLOOR_GRAPH: graphFile, BENCH_FLOOR_DEBUG_STACKS: path.join(compiled, "components", "debugStacks.js") } };
}
