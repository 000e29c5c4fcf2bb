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
