// Child process: one `pulumi up` or `pulumi destroy` of the real program against real hosts.
// argv[2]: JSON request. Writes one JSON Report to argv[2].report (a file: a failing program may exit
// before a large stdout write is flushed).
import * as fs from "fs";
import * as pulumi from "@pulumi/pulumi";
import { evaluate } from "../harness/evaluate";
import { DockerTarget, Transport, commandError, createContainer, dialError, pullImage, randomPassword, removeContainer, removeImage, runRemote } from "./operations";
import { Entry, Op, OpKind, State, diff, keyOf, loadState, saveState } from "./state";

export interface Request {
    mode: "up" | "destroy";
    stack: string;
    config: Record<string, unknown>;
    secretKeys?: string[];
    statePath: string;
    transport: Transport;
    /** Send an EngineEvent per step and per line a command prints, over the IPC channel (engine.ts `onEvent`). */
    progress?: boolean;
}

/**
 * What the engine is doing, for a display like `pulumi up`'s: a step starts; a remote command prints a line while
 * it runs (the provider logs them as they come, see operations.ts runRemote); a step ends, with a command's stdout.
 */
export type EngineEvent =
    | { kind: "start"; op: OpKind; type: string; name: string }
    | { kind: "line"; name: string; line: string }
    | { kind: "end"; op: OpKind; type: string; name: string; ms: number; stdout?: string; error?: string };

export interface Report {
    ops: Op[];
    outputs?: Record<string, unknown>;
    /** The first resource error, as `pulumi up` prints it. */
    error?: string;
    errors: string[];
    /** What the program logged with pulumi.log.warn (the engine's stderr lines "warning: …"), as `pulumi up` shows it. */
    warnings?: string[];
    wallMs: number;
    /** Epoch ms the run started; ops' startMs/endMs count from here. */
    startedAt: number;
}

/** A provider's warning, where `pulumi up` shows it (engine.ts reads the child's "warning: " lines). */
const warn = (warnings: string[]) => warnings.forEach(w => console.error(`warning: ${w}`));

const SECRET_SIG = "4dabf18193072939515e22adb298388d";
function plain(value: any): any {
    if (Array.isArray(value)) return value.map(plain);
    if (value && typeof value === "object") {
        if (value[SECRET_SIG]) return plain(value.value);
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
    }
    return value;
}

/** A Docker provider's inputs as the engine receives them: the Pulumi engine sends a provider's list inputs as JSON text. */
function providerTarget(inputs: Record<string, any>): DockerTarget {
    const sshOpts = typeof inputs.sshOpts === "string" ? JSON.parse(inputs.sshOpts) : inputs.sshOpts;
    return { host: inputs.host, ...(Array.isArray(sshOpts) ? { sshOpts } : {}) };
}

/**
 * A step the engine did not start because an earlier one failed. The Pulumi engine cancels at the first failed step
 * (pkg/resource/deploy/step_executor.go: executeChain → cancelDueToError → `if !se.continueOnError { se.cancel() }`;
 * a chain checks the canceled context before each step), while steps already executing run to completion and are
 * recorded, so what they created is in the state and the next `up` or `destroy` finds it.
 */
const NOT_STARTED = "not started: an earlier step failed";

class Engine {
    readonly ops: Op[] = [];
    readonly errors: string[] = [];
    /** Steps running now: after a failure, the run ends only once they have finished and are in the state. */
    private readonly running = new Set<Promise<unknown>>();
    private canceled = false;
    private readonly seen = new Set<string>();
    private readonly providers = new Map<string, DockerTarget>();
    private seq = 0;
    readonly t0 = Date.now();

    constructor(private readonly state: State, private readonly statePath: string, private readonly t: Transport,
        private readonly emit: (e: EngineEvent) => void = () => undefined) {
        for (const e of Object.values(state.resources))
            if (e.type === "pulumi:providers:docker") this.providers.set(e.id, providerTarget(e.inputs));
    }

    private save(): void {
        saveState(this.statePath, this.state);
    }

    private async step<T>(op: OpKind, type: string, name: string, fn: () => Promise<{ actions: number; value: T }>): Promise<T> {
        const startMs = Date.now() - this.t0;
        this.emit({ kind: "start", op, type, name });
        try {
            const { actions, value } = await fn();
            this.ops.push({ op, type, name, actions, startMs, endMs: Date.now() - this.t0 });
            const stdout = (value as Partial<Entry> | undefined)?.outputs?.stdout;
            this.emit({ kind: "end", op, type, name, ms: Date.now() - this.t0 - startMs, stdout: typeof stdout === "string" ? stdout : undefined });
            return value;
        } catch (err) {
            this.ops.push({ op, type, name, actions: 1, startMs, endMs: Date.now() - this.t0, failed: true });
            this.emit({ kind: "end", op, type, name, ms: Date.now() - this.t0 - startMs, error: err instanceof Error ? err.message : String(err) });
            throw err;
        }
    }

    async register(args: pulumi.runtime.MockResourceArgs): Promise<pulumi.runtime.MockResourceResult> {
        const inputs = plain(args.inputs);
        const key = keyOf(args.type, args.name);
        this.seen.add(key);
        if (!args.custom && !args.type.startsWith("pulumi:providers:")) return { id: undefined, state: {} };
        const old = this.state.resources[key];
        const kind = diff(args.type, old, inputs);
        if (this.canceled && kind !== "same") throw new Error(`${args.type} ${args.name}: ${NOT_STARTED}`);
        const target = args.provider ? this.providers.get(args.provider.split("::").pop()!) : undefined;
        const running = this.step(kind, args.type, args.name, () => this.apply(kind, args.type, args.name, old, inputs, target));
        this.running.add(running);
        try {
            const entry = await running;
            entry.seq = this.seq++;
            this.state.resources[key] = entry;
            if (entry.type === "pulumi:providers:docker") this.providers.set(entry.id, providerTarget(entry.inputs));
            this.save();
            return { id: entry.id, state: entry.outputs };
        } catch (err) {
            const message = `${args.type} ${args.name}: ${err instanceof Error ? err.message : String(err)}`;
            this.errors.push(message);
            this.canceled = true;
            this.save();
            throw new Error(message);
        } finally {
            this.running.delete(running);
        }
    }

    /** Waits until no step runs (each records itself in the state as it finishes). */
    async settle(): Promise<void> {
        while (this.running.size) await Promise.allSettled([...this.running]);
    }

    private async apply(kind: OpKind, type: string, name: string, old: Entry | undefined, inputs: Record<string, any>, target?: DockerTarget): Promise<{ actions: number; value: Entry }> {
        const base = { type, name, dockerHost: target?.host, dockerSshOpts: target?.sshOpts, seq: 0 };
        // A provider whose config changed is updated in place (diff): what it manages goes through its new sshOpts.
        if (kind === "same") return { actions: 0, value: { ...old!, dockerHost: old!.dockerHost ?? target?.host, dockerSshOpts: target?.sshOpts ?? old!.dockerSshOpts } };
        let actions = 0;
        if (kind === "replace" && old) {
            actions += await this.remove(old);
            delete this.state.resources[keyOf(type, name)];
            this.save();
        }
        switch (type) {
            case "pulumi:providers:docker":
                return { actions, value: { ...base, id: `${name}-provider`, inputs, outputs: inputs } };
            case "random:index/randomPassword:RandomPassword": {
                const result = randomPassword(inputs.length ?? 16);
                return { actions, value: { ...base, id: "none", inputs, outputs: { ...inputs, result } } };
            }
            case "docker:index/remoteImage:RemoteImage": {
                const outputs = kind === "update" ? { ...old!.outputs, ...inputs } : await pullImage(this.t, target!, inputs);
                return { actions: actions + (kind === "update" ? 0 : 1), value: { ...base, id: outputs.imageId as string, inputs, outputs } };
            }
            case "docker:index/container:Container": {
                const id = await createContainer(this.t, target!, inputs);
                return { actions: actions + 1, value: { ...base, id, inputs, outputs: { ...inputs, id } } };
            }
            case "command:remote:Command": {
                const text: string | undefined = kind === "update" ? inputs.update ?? inputs.create : inputs.create;
                let outputs: Record<string, unknown> = { ...inputs, stdout: "", stderr: "" };
                if (text) {
                    const r = await runRemote(this.t, inputs.connection, text, inputs.stdin, inputs.environment, line => this.emit({ kind: "line", name, line }),
                        kind === "update" ? old!.outputs as { stdout?: string; stderr?: string } : undefined);
                    warn(r.warnings);
                    actions++;
                    if (r.code !== 0) throw dialError(inputs.connection, r) ?? commandError(text, r);
                    outputs = { ...inputs, stdout: r.stdout, stderr: r.stderr };
                }
                const id = kind === "update" ? old!.id : `${name}-${randomPassword(8)}`;
                return { actions, value: { ...base, id, inputs, outputs } };
            }
            default:
                throw new Error(`the test engine does not know how to create ${type}`);
        }
    }

    /** Deletes one resource as its provider would; returns the number of actions run. */
    async remove(e: Entry): Promise<number> {
        switch (e.type) {
            case "command:remote:Command": {
                if (!e.inputs.delete) return 0;
                const r = await runRemote(this.t, e.inputs.connection, e.inputs.delete, e.inputs.stdin, e.inputs.environment, undefined, e.outputs as { stdout?: string; stderr?: string });
                warn(r.warnings);
                if (r.code !== 0) throw dialError(e.inputs.connection, r) ?? commandError(e.inputs.delete, r);
                return 1;
            }
            case "docker:index/container:Container":
                await removeContainer(this.t, { host: e.dockerHost!, sshOpts: e.dockerSshOpts }, e.inputs);
                return 1;
            case "docker:index/remoteImage:RemoteImage":
                await removeImage(this.t, { host: e.dockerHost!, sshOpts: e.dockerSshOpts }, { ...e.inputs, ...e.outputs });
                return e.inputs.keepLocally ? 0 : 1;
            default:
                return 0;
        }
    }

    /** Deletes, in reverse dependency order, what is in state but was not registered (all of it on destroy). */
    async deleteUnseen(): Promise<void> {
        const stale = Object.entries(this.state.resources).filter(([k]) => !this.seen.has(k)).sort(([, a], [, b]) => b.seq - a.seq);
        for (const [key, entry] of stale) {
            try {
                await this.step("delete", entry.type, entry.name, async () => ({ actions: await this.remove(entry), value: undefined }));
                delete this.state.resources[key];
                this.save();
            } catch (err) {
                this.errors.push(`${entry.type} ${entry.name}: delete failed: ${err instanceof Error ? err.message : String(err)}`);
                return;
            }
        }
    }
}

async function main(): Promise<void> {
    const request: Request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
    const emit = request.progress && process.send ? (e: EngineEvent) => { process.send!(e); } : undefined;
    const engine = new Engine(loadState(request.statePath), request.statePath, request.transport, emit);
    const report: Report = { ops: engine.ops, errors: engine.errors, wallMs: 0, startedAt: engine.t0 };
    // As the Pulumi CLI's runner does (@pulumi/pulumi cmd/run/run.js: process.on("unhandledRejection", uncaughtHandler)):
    // a failed resource's rejected promise that nothing awaited is logged once as an error, not a crash.
    const uncaught = (err: unknown) => {
        const message = err instanceof Error ? err.message : String(err);
        if (message.includes(NOT_STARTED)) return;
        if (!engine.errors.some(e => message.includes(e) || e.includes(message))) engine.errors.push(message);
    };
    process.on("unhandledRejection", uncaught);
    process.on("uncaughtException", uncaught);
    const t0 = Date.now();
    if (request.mode === "destroy") {
        await engine.deleteUnseen();
    } else {
        try {
            report.outputs = await evaluate({
                stack: request.stack,
                config: request.config,
                secretKeys: request.secretKeys,
                mocks: { newResource: args => engine.register(args), call: args => args.inputs },
            });
        } catch (err) {
            const message = err instanceof Error ? err.message : String(err);
            if (engine.errors.length === 0 && !message.includes(NOT_STARTED)) engine.errors.push(message);
        }
        await engine.settle();
        // Like the real engine, a failed update deletes nothing it did not replace.
        if (engine.errors.length === 0) await engine.deleteUnseen();
    }
    report.error = engine.errors[0];
    report.wallMs = Date.now() - t0;
    fs.writeFileSync(`${process.argv[2]}.report`, JSON.stringify(report));
    // Messages go out in order: once this one is sent, every event before it is too (process.exit would drop them).
    if (emit) await new Promise(done => process.send!({ kind: "flush" }, () => done(undefined)));
    process.exit(0);
}

main();
