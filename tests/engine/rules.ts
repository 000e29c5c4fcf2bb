// The real engine's rules that need no host, as pure functions (each cited; tests/engine/README.md lists them).
import * as os from "os";

/**
 * `--parallel`'s default: GOMAXPROCS × 4, or PULUMI_PARALLEL when set above 0 (pulumi/pulumi@1b59498
 * pkg/cmd/pulumi/operations/up.go defaultParallel); the step executor starts that many workers, each running one
 * step at a time (pkg/resource/deploy/step_executor.go newStepExecutor: `fanout := DegreeOfParallelism()`).
 * Go's GOMAXPROCS defaults to the CPUs the process may use, as Node's availableParallelism does.
 */
export function defaultParallel(env: NodeJS.ProcessEnv = process.env, cpus = os.availableParallelism()): number {
    const p = Number(env.PULUMI_PARALLEL);
    if (Number.isInteger(p) && p > 0) return Math.min(p, 2 ** 31 - 1);
    return cpus * 4;
}

/** At most `limit` of the functions it runs are running at once; the rest wait in arrival order. */
export class Workers {
    private running = 0;
    private readonly waiting: Array<() => void> = [];
    peak = 0;

    constructor(readonly limit: number) {}

    async run<T>(fn: () => Promise<T>): Promise<T> {
        if (this.running >= this.limit) await new Promise<void>(go => this.waiting.push(go));
        this.running++;
        this.peak = Math.max(this.peak, this.running);
        try {
            return await fn();
        } finally {
            this.running--;
            this.waiting.shift()?.();
        }
    }
}

/** What the replacement order needs of a state entry. */
export interface Node {
    urn: string;
    type: string;
    inputs: Record<string, any>;
    dependencies: string[];
    propertyDependencies?: Record<string, string[]>;
    /** Provider reference `<urn>::<id>`. */
    provider?: string;
    /** Registration order: the state is in dependency order, as a snapshot is. */
    seq: number;
}

/** An input whose value would change because what it came from is replaced (resource.MakeComputed in the engine). */
export const WILL_CHANGE = "\u0000<unknown: its dependency is replaced>";

/**
 * The resources that must be deleted with `root` when it is replaced delete-before-replace, in dependency order (the
 * engine deletes them in reverse), as pulumi/pulumi@1b59498 pkg/resource/deploy/step_generator.go
 * calculateDependentReplacements computes them: walk root's transitive dependents in snapshot order
 * (pkg/resource/graph/dependency_graph.go DependingOn: dependencies, property dependencies and provider; not
 * parents), skipping those already registered in this run; one is replaced when its provider is, or when the
 * provider's diff says replace once every input that depends on a replaced resource is unknown.
 * `wouldReplace` is that provider diff (state.ts diff).
 */
export function dependentReplacements<N extends Node>(root: N, state: N[], registered: Set<string>, wouldReplace: (n: N, inputs: Record<string, any>) => boolean): N[] {
    const ordered = [...state].sort((a, b) => a.seq - b.seq);
    const dependents = new Set([root.urn]);
    const replaced = new Set([root.urn]);
    const toReplace: N[] = [];
    const providerUrn = (ref?: string) => ref?.split("::").slice(0, -1).join("::");
    for (const n of ordered.slice(ordered.findIndex(n => n.urn === root.urn) + 1)) {
        if (registered.has(n.urn)) continue;
        const deps = [...n.dependencies, ...Object.values(n.propertyDependencies ?? {}).flat()];
        const provider = providerUrn(n.provider);
        if (!deps.some(d => dependents.has(d)) && !(provider && dependents.has(provider))) continue;
        dependents.add(n.urn);
        let replace = provider !== undefined && replaced.has(provider);
        if (!replace) {
            let changes = false;
            const inputs: Record<string, any> = {};
            for (const [k, v] of Object.entries(n.inputs)) {
                const changed = (n.propertyDependencies?.[k] ?? []).some(d => replaced.has(d));
                changes ||= changed;
                inputs[k] = changed ? WILL_CHANGE : v;
            }
            replace = changes && wouldReplace(n, inputs);
        }
        if (replace) {
            replaced.add(n.urn);
            toReplace.push(n);
        }
    }
    return toReplace;
}

/**
 * The order deletes run in at the end of an update (old copies of resources replaced create-before-delete, then what
 * the program no longer registers): dependents before what they depend on (step_generator.go GenerateDeletes →
 * ScheduleDeletes, which antichains them by the dependency graph in reverse). Here: reverse snapshot order.
 */
export function deleteOrder<N extends Node>(entries: N[]): N[] {
    return [...entries].sort((a, b) => b.seq - a.seq);
}

/**
 * The script a remote.Command step runs (pulumi-command v1.2.1 provider/pkg/provider/remote/commandController.go):
 * Create runs `create`; Update runs `news.Update`, else `news.Create` again; Delete runs the old state's `delete`, if
 * any; in a preview (`req.DryRun`) nothing runs.
 */
export function commandText(op: "create" | "update" | "replace" | "delete" | "same", inputs: { create?: string; update?: string; delete?: string }): string | undefined {
    switch (op) {
        case "create": case "replace": return inputs.create;
        case "update": return inputs.update ?? inputs.create;
        case "delete": return inputs.delete;
        default: return undefined;
    }
}
