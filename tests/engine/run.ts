// Child process: one `pulumi up` or `pulumi destroy` of the real program against real hosts.
// argv[2]: JSON request. Writes one JSON Report to argv[2].report (a file: a failing program may exit
// before a large stdout write is flushed).
import * as fs from "fs";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import { evaluate } from "../harness/evaluate";
import { REPO, deploy, mandatory } from "../grpc/deploy";
import { Registration, urnOf } from "../grpc/monitor";
import { uniqueHex } from "../grpc/previews";
import { Secret, encode, plain as plainWire } from "../grpc/wire";
import { DockerTarget, Transport, commandError, createContainer, dialError, inspectContainer, inspectImage, pullImage, randomPassword, removeContainer, removeImage, runRemote, updateContainer } from "./operations";
import { RefreshStep, readContainer, readImage, readKind, refreshOp } from "./refresh";
import { Workers, commandText, defaultParallel, deleteOrder, dependentReplacements } from "./rules";
import { Entry, Op, OpKind, State, diff, loadState, saveState } from "./state";

/**
 * How the program runs: "grpc" (default) as the CLI runs it, through @pulumi/pulumi's cmd/run against our
 * ResourceMonitor with the policy pack's analyzer server (tests/grpc/deploy.ts); "mocks" in-process under
 * pulumi.runtime.setMocks (tests/harness/evaluate.ts). Chosen by SPARK_VLLM_ENGINE.
 */
export type EngineMode = "grpc" | "mocks";
export function engineMode(env: NodeJS.ProcessEnv = process.env): EngineMode {
    const v = env.SPARK_VLLM_ENGINE ?? "grpc";
    if (v !== "grpc" && v !== "mocks") throw new Error(`SPARK_VLLM_ENGINE=${v}: expected grpc or mocks`);
    return v;
}

export interface Request {
    mode: "up" | "destroy";
    stack: string;
    config: Record<string, unknown>;
    secretKeys?: string[];
    statePath: string;
    transport: Transport;
    /** Send an EngineEvent per step and per line a command prints, over the IPC channel (engine.ts `onEvent`). */
    progress?: boolean;
    /** How the program runs (default: SPARK_VLLM_ENGINE, else grpc). */
    engine?: EngineMode;
    /** Steps at once (default: the CLI's `--parallel` default, rules.ts defaultParallel). */
    parallel?: number;
    /** The policy pack to analyze every resource with in grpc mode (default: the repository's policies/; "" for none). */
    packDir?: string;
    /** `pulumi up --refresh`: every resource in the state is read by its provider before the program runs (refresh.ts). */
    refresh?: boolean;
    /** `pulumi up --replace URN` (repeatable): these resources are replaced whatever their inputs. */
    replace?: string[];
}

/** One registration as the engine sees it: its URN, plain inputs and options. */
export interface Registered {
    urn: string;
    type: string;
    name: string;
    custom: boolean;
    inputs: Record<string, any>;
    /** The provider reference, `<provider urn>::<provider id>`. */
    provider?: string;
    dependencies: string[];
    propertyDependencies: Record<string, string[]>;
    deleteBeforeReplace: boolean;
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
    /** `up --refresh`: each refresh step's result, as `pulumi up --refresh` lists them before the update's steps. */
    refresh?: RefreshStep[];
    /** Policy pack verdicts (grpc mode): `[level] policy (resource name): message`. */
    policy?: string[];
    engine?: EngineMode;
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
    /** Dependents deleted ahead of a delete-before-replace resource, by URN: their old entry and what the delete did. */
    private readonly deletedAhead = new Map<string, { entry: Entry; actions: number; startMs: number }>();
    private readonly deletingAhead = new Map<string, Promise<void>>();
    private readonly providers = new Map<string, DockerTarget>();
    private seq = 0;
    readonly t0 = Date.now();
    readonly workers: Workers;

    /** `--replace` targets: replaced whatever their diff (step_generator.go isTargetedReplace, diff). */
    private readonly replaceTargets = new Set<string>();

    constructor(private readonly state: State, private readonly statePath: string, private readonly t: Transport,
        private readonly emit: (e: EngineEvent) => void = () => undefined, parallel = defaultParallel()) {
        this.workers = new Workers(parallel);
        for (const e of Object.values(state.resources))
            if (e.type === "pulumi:providers:docker") this.providers.set(e.id, providerTarget(e.inputs));
    }

    private save(): void {
        saveState(this.statePath, this.state);
    }

    private async step<T>(op: OpKind, type: string, name: string, fn: () => Promise<{ actions: number; value: T }>, urn?: string): Promise<T> {
        const startMs = Date.now() - this.t0;
        this.emit({ kind: "start", op, type, name });
        try {
            const { actions, value } = await fn();
            // A replacement whose old copy was deleted earlier (with a delete-before-replace resource it depends on) is one step.
            const ahead = urn ? this.deletedAhead.get(urn) : undefined;
            this.ops.push({ op, urn, type, name, actions: actions + (ahead?.actions ?? 0), startMs: ahead?.startMs ?? startMs, endMs: Date.now() - this.t0 });
            const stdout = (value as Partial<Entry> | undefined)?.outputs?.stdout;
            this.emit({ kind: "end", op, type, name, ms: Date.now() - this.t0 - startMs, stdout: typeof stdout === "string" ? stdout : undefined });
            return value;
        } catch (err) {
            this.ops.push({ op, urn, type, name, actions: 1, startMs, endMs: Date.now() - this.t0, failed: true });
            this.emit({ kind: "end", op, type, name, ms: Date.now() - this.t0 - startMs, error: err instanceof Error ? err.message : String(err) });
            throw err;
        }
    }

    async register(args: Registered): Promise<{ id?: string; outputs: Record<string, any> }> {
        const inputs = args.inputs;
        const key = args.urn;
        this.seen.add(key);
        if (!args.custom && !args.type.startsWith("pulumi:providers:")) return { id: undefined, outputs: {} };
        const ahead = this.deletedAhead.get(key);
        const old = this.state.resources[key] ?? ahead?.entry;
        // Deleted with a delete-before-replace resource it depends on: created again whatever its inputs
        // (step_generator.go generateSteps, "re-create replaced resource ... deleted due to dependent DBR").
        // A `--replace` target: "a replace diff that blames the id" (step_generator.go diff, isTargetedReplace).
        const kind = ahead || (old && this.replaceTargets.has(key)) ? "replace" : diff(args.type, old, inputs);
        if (this.canceled && kind !== "same") throw new Error(`${args.type} ${args.name}: ${NOT_STARTED}`);
        const target = args.provider ? this.providers.get(args.provider.split("::").pop()!) : undefined;
        // A step waits for a free worker (the CLI's --parallel); a step queued when an earlier one fails never starts.
        const running = this.workers.run(() => {
            if (this.canceled && kind !== "same") throw new Error(`${args.type} ${args.name}: ${NOT_STARTED}`);
            return this.step(kind, args.type, args.name, async () => {
                const deleted = kind === "replace" && old && !ahead ? await this.replaceOld(old, args.deleteBeforeReplace) : 0;
                const r = await this.apply(kind, args.type, args.name, old, inputs, target);
                return { actions: r.actions + deleted, value: r.value };
            }, key);
        });
        this.running.add(running);
        try {
            const entry = await running;
            entry.seq = this.seq++;
            Object.assign(entry, { urn: key, dependencies: args.dependencies, propertyDependencies: args.propertyDependencies, deleteBeforeReplace: args.deleteBeforeReplace || undefined, provider: args.provider });
            this.deletedAhead.delete(key);
            this.state.resources[key] = entry;
            if (entry.type === "pulumi:providers:docker") this.providers.set(entry.id, providerTarget(entry.inputs));
            this.save();
            return { id: entry.id, outputs: entry.outputs };
        } catch (err) {
            const text = err instanceof Error ? err.message : String(err);
            if (text.includes(NOT_STARTED)) throw err;
            const message = `${args.type} ${args.name}: ${text}`;
            this.errors.push(message);
            this.canceled = true;
            this.save();
            throw new Error(message);
        } finally {
            this.running.delete(running);
        }
    }

    /**
     * `pulumi up --refresh` before the program runs (deployment_executor.go refresh): one refresh step per resource in
     * the state, pending deletes included, in parallel under the same `--parallel` cap; each entry becomes what its
     * provider's Read says (refresh.ts), a resource Read finds gone leaves the state (rebuildBaseState), so the update
     * creates it again. A failed Read fails the update before the program starts ("step executor errored").
     */
    /**
     * `pulumi up --replace`: every target must be in the stack, else each is an error and the up ends before the
     * program runs (deployment_executor.go checkTargets, after the refresh; diag/errors.go 2010 and 2011).
     */
    setReplaceTargets(urns: string[]): void {
        const missing = urns.filter(u => !this.state.resources[u]);
        for (const u of missing)
            this.errors.push(u.includes("$") ? `Target '${u}' could not be found in the stack.`
                : `Target '${u}' could not be found in the stack. Did you forget to escape $ in your shell?`);
        if (missing.length) this.errors.push("one or more targets could not be found in the stack");
        for (const u of urns) this.replaceTargets.add(u);
    }

    async refresh(): Promise<RefreshStep[]> {
        const read = async (e: Entry): Promise<Entry | undefined> => {
            const target = { host: e.dockerHost!, sshOpts: e.dockerSshOpts };
            switch (readKind(e)) {
                case "container": return readContainer(e, await inspectContainer(this.t, target, e.id));
                case "image": return readImage(e, await inspectImage(this.t, target, e.inputs.name));
                default: return e;
            }
        };
        const results: RefreshStep[] = [];
        const entries = [...Object.values(this.state.resources), ...(this.state.pendingDeletes ?? [])];
        const refreshed = await Promise.allSettled(entries.map(e => this.workers.run(async () => {
            const after = await read(e);
            results.push({ urn: e.urn, type: e.type, name: e.name, op: refreshOp(e, after) });
            return after;
        })));
        const failed = refreshed.flatMap((r, i) => r.status === "rejected" ? [`${entries[i].type} ${entries[i].name}: refresh failed: ${r.reason instanceof Error ? r.reason.message : String(r.reason)}`] : []);
        if (failed.length) {
            this.errors.push(...failed);
            return results;
        }
        refreshed.forEach((r, i) => {
            const before = entries[i], after = (r as PromiseFulfilledResult<Entry | undefined>).value;
            if (this.state.resources[before.urn] === before) {
                if (after) this.state.resources[before.urn] = after;
                else delete this.state.resources[before.urn];
            } else if (this.state.pendingDeletes) {
                this.state.pendingDeletes = this.state.pendingDeletes.flatMap(p => p !== before ? [p] : after ? [after] : []);
            }
        });
        if (this.state.pendingDeletes?.length === 0) delete this.state.pendingDeletes;
        this.save();
        return results;
    }

    markSeen(urn: string): void {
        this.seen.add(urn);
    }

    /** Waits until no step runs (each records itself in the state as it finishes). */
    async settle(): Promise<void> {
        while (this.running.size) await Promise.allSettled([...this.running]);
    }

    private async apply(kind: OpKind, type: string, name: string, old: Entry | undefined, inputs: Record<string, any>, target?: DockerTarget): Promise<{ actions: number; value: Entry }> {
        const base = { urn: "", dependencies: [], type, name, dockerHost: target?.host, dockerSshOpts: target?.sshOpts, seq: 0 };
        // A provider whose config changed is updated in place (diff): what it manages goes through its new sshOpts.
        if (kind === "same") return { actions: 0, value: { ...old!, dockerHost: old!.dockerHost ?? target?.host, dockerSshOpts: target?.sshOpts ?? old!.dockerSshOpts } };
        let actions = 0;
        switch (type) {
            case "pulumi:providers:docker":
                return { actions, value: { ...base, id: `${name}-provider`, inputs, outputs: inputs } };
            case "random:index/randomPassword:RandomPassword": {
                const result = randomPassword(inputs.length ?? 16);
                return { actions, value: { ...base, id: "none", inputs, outputs: { ...inputs, result } } };
            }
            case "docker:index/remoteImage:RemoteImage": {
                const outputs = kind === "update" ? { ...old!.outputs, ...inputs } : await pullImage(this.t, target!, inputs);
                // The id is `<image id><name>` (terraform-provider-docker v4.5.0 resourceDockerImageCreate: SetId(apiImage.ID + name)).
                const id = kind === "update" ? old!.id : `${outputs.imageId}${inputs.name}`;
                return { actions: actions + (kind === "update" ? 0 : 1), value: { ...base, id, inputs, outputs } };
            }
            case "docker:index/container:Container": {
                if (kind === "update") {
                    // Only inputs without ForceNew changed (state.ts diff): the same container (operations.ts updateContainer).
                    const acted = await updateContainer(this.t, target!, old!.id, old!.inputs, inputs);
                    return { actions: actions + acted, value: { ...base, id: old!.id, inputs, outputs: { ...old!.outputs, ...inputs, id: old!.id } } };
                }
                const id = await createContainer(this.t, target!, inputs);
                return { actions: actions + 1, value: { ...base, id, inputs, outputs: { ...inputs, id } } };
            }
            case "command:remote:Command": {
                const text = commandText(kind, inputs);
                let outputs: Record<string, unknown> = { ...inputs, stdout: "", stderr: "" };
                if (text) {
                    const r = await runRemote(this.t, inputs.connection, text, inputs.stdin, inputs.environment, line => this.emit({ kind: "line", name, line }),
                        kind === "update" ? old!.outputs as { stdout?: string; stderr?: string } : undefined);
                    warn(r.warnings);
                    actions++;
                    if (r.code !== 0) throw dialError(inputs.connection, r) ?? commandError(text, r);
                    outputs = { ...inputs, stdout: r.stdout, stderr: r.stderr };
                }
                const id = kind === "update" ? old!.id : uniqueHex(name);
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

    /**
     * The old copy's part of a replacement (step_generator.go generateSteps). Delete-before-replace: the dependents that
     * must be replaced with it are deleted first, last-dependent first, with their old state (rules.ts
     * dependentReplacements), then the old copy itself; the new one is created after. Otherwise the new copy is created
     * first and the old one waits in pendingDeletes for the end of the update. Returns the actions run.
     */
    private async replaceOld(old: Entry, deleteBeforeReplace: boolean): Promise<number> {
        if (!deleteBeforeReplace) {
            (this.state.pendingDeletes ??= []).push(old);
            this.save();
            return 0;
        }
        const dependents = dependentReplacements(old, Object.values(this.state.resources), this.seen, (n, inputs) => diff(n.type, n, inputs) === "replace");
        for (const d of [...dependents].reverse()) {
            // Another replacement (a second host's container) deleting it already, or done: not waited for, as the real
            // engine does not ("If we already deleted this resource due to some other DBR, don't do it again",
            // pulumi/pulumi pkg/resource/deploy/step_generator.go, sg.pendingDeletes; seen on the real CLI: issue 37).
            if (this.deletingAhead.has(d.urn) || this.deletedAhead.has(d.urn)) continue;
            const done = (async () => {
                const startMs = Date.now() - this.t0;
                this.emit({ kind: "start", op: "delete", type: d.type, name: d.name });
                const actions = await this.remove(d);
                this.emit({ kind: "end", op: "delete", type: d.type, name: d.name, ms: Date.now() - this.t0 - startMs });
                this.deletedAhead.set(d.urn, { entry: d, actions, startMs });
                delete this.state.resources[d.urn];
                this.save();
            })();
            this.deletingAhead.set(d.urn, done);
            try { await done; } finally { this.deletingAhead.delete(d.urn); }
        }
        const actions = await this.remove(old);
        delete this.state.resources[old.urn];
        this.save();
        return actions;
    }

    /**
     * The deletes at the end of an update, in reverse dependency order (rules.ts deleteOrder): old copies of resources
     * replaced create-before-delete, and what is in state but was not registered (all of it on destroy). An old copy's
     * delete counts in its replacement's step.
     */
    async deleteUnseen(): Promise<void> {
        const pending = new Set(this.state.pendingDeletes ?? []);
        const stale = Object.values(this.state.resources).filter(e => !this.seen.has(e.urn));
        for (const [urn, { entry, actions, startMs }] of this.deletedAhead) {
            this.ops.push({ op: "delete", urn, type: entry.type, name: entry.name, actions, startMs, endMs: startMs });
            this.deletedAhead.delete(urn);
        }
        for (const entry of deleteOrder([...pending, ...stale])) {
            try {
                if (pending.has(entry)) {
                    const actions = await this.remove(entry);
                    const replaced = [...this.ops].reverse().find(o => o.urn === entry.urn && o.op === "replace");
                    if (replaced) replaced.actions += actions;
                    this.state.pendingDeletes = this.state.pendingDeletes!.filter(e => e !== entry);
                } else {
                    await this.step("delete", entry.type, entry.name, async () => ({ actions: await this.remove(entry), value: undefined }), entry.urn);
                    delete this.state.resources[entry.urn];
                }
                this.save();
            } catch (err) {
                this.errors.push(`${entry.type} ${entry.name}: delete failed: ${err instanceof Error ? err.message : String(err)}`);
                return;
            }
        }
        if (!this.state.pendingDeletes?.length) delete this.state.pendingDeletes;
        this.save();
    }
}

/** The registration a MockMonitor is answering; newResource is called synchronously inside its registerResource. */
interface MockRequest {
    getParent(): string; getDependenciesList(): string[]; getDeletebeforereplace(): boolean;
    getPropertydependenciesMap(): { forEach(fn: (deps: { getUrnsList(): string[] }, key: string) => void): void };
}

/**
 * The program in-process under setMocks. The mocks do not tell newResource the parent, the dependencies or the URN, and
 * their URN keeps only the parent's last type (@pulumi/pulumi runtime/mocks.js newUrn): the monitor is given urn.New's
 * URN (monitor.ts urnOf), and the request being answered is noted for newResource.
 */
async function runMocks(request: Request, engine: Engine, report: Report): Promise<void> {
    let current: MockRequest | undefined;
    const project = "spark-vllm";
    report.outputs = await evaluate({
        stack: request.stack,
        config: request.config,
        secretKeys: request.secretKeys,
        afterMocks: () => {
            const monitor = pulumi.runtime.getMonitor() as any;
            const registerResource = monitor.registerResource.bind(monitor);
            monitor.newUrn = (parent: string, type: string, name: string) => urnOf(request.stack, project, type, name, parent || undefined);
            monitor.registerResource = (req: MockRequest, callback: unknown) => {
                current = req;
                return registerResource(req, callback);
            };
        },
        mocks: {
            newResource: async args => {
                const req = current!;
                const propertyDependencies: Record<string, string[]> = {};
                req.getPropertydependenciesMap().forEach((deps, key) => { propertyDependencies[key] = deps.getUrnsList(); });
                const r = await engine.register({
                    urn: urnOf(request.stack, project, args.type, args.name, req.getParent() || undefined), type: args.type, name: args.name,
                    custom: !!args.custom, inputs: plain(args.inputs), provider: args.provider, dependencies: req.getDependenciesList(),
                    propertyDependencies, deleteBeforeReplace: req.getDeletebeforereplace(),
                });
                return { id: r.id, state: r.outputs };
            },
            call: args => args.inputs,
        },
    });
}

/**
 * The program as the CLI runs it (tests/grpc/deploy.ts): each registration analyzed by the policy pack, then its
 * step performed here. What the step returns goes back over the wire with the secretness the engine gives it: an
 * output is secret when the input of the same name was (the provider plugin's annotateSecrets,
 * pkg/resource/plugin/provider_plugin.go) or the registration listed it in additionalSecretOutputs (step_executor.go).
 */
async function runGrpc(request: Request, engine: Engine, report: Report): Promise<void> {
    const packDir = request.packDir ?? path.join(REPO, "policies");
    const result = await deploy({
        dir: REPO, stack: request.stack, config: request.config, secretKeys: request.secretKeys, dryRun: false,
        parallel: engine.workers.limit, packDir: packDir || undefined,
        // Each up transpiles only, as a user whose build runs tsc first does (@pulumi/pulumi 3.276.0 cmd/run/run.js:
        // PULUMI_NODEJS_TRANSPILE_ONLY). npm test type-checks the program (tsc, and Pulumi's own ts-node path in
        // tests/unit/grpc/grpc-runner.test.ts); type-checking again on every e2e up costs 15–25 s each. Set it to false to check.
        env: { PULUMI_NODEJS_TRANSPILE_ONLY: process.env.PULUMI_NODEJS_TRANSPILE_ONLY ?? "true" },
        onRegister: async (r: Registration) => {
            const { id, outputs } = await engine.register({
                urn: r.urn, type: r.type, name: r.name, custom: r.custom, inputs: plainWire(r.inputs), provider: r.provider,
                dependencies: r.dependencies, propertyDependencies: r.propertyDependencies, deleteBeforeReplace: r.deleteBeforeReplace,
            });
            const secret = new Set([...r.additionalSecretOutputs, ...Object.keys(r.inputs).filter(k => r.inputs[k] instanceof Secret)]);
            return { id, outputs: encode(Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, secret.has(k) ? new Secret(v) : v]))) };
        },
    });
    // Components register too (no step): they are in the real engine's state, and what is not registered is deleted.
    for (const r of result.run.registrations) if (!r.custom) engine.markSeen(r.urn);
    const { run } = result;
    report.outputs = run.stackOutputs ? plainWire(run.stackOutputs) : undefined;
    report.warnings = run.logs.filter(l => l.severity === "warning").map(l => l.message.trim());
    report.policy = [...result.diagnostics, ...(result.stackDiagnostics ?? [])]
        .map(d => `[${d.level}] ${d.policy}${d.urn ? ` (${d.urn.split("::").pop()})` : ""}: ${d.message.trim()}`);
    if (engine.errors.length) return;
    // A refused resource (mandatory policy), the program's own errors, or an exit the language host counts as failure.
    const refused = /^resource (\S+) is invalid/.exec(run.engineError ?? "")?.[1];
    // A refused resource's own violations; else every mandatory one, AnalyzeStack's included (it fails the update too).
    const violations = (refused ? mandatory(result.diagnostics).filter(d => d.urn === refused) : [...mandatory(result.diagnostics), ...mandatory(result.stackDiagnostics)])
        .map(d => `${d.policy}: ${d.message.trim()}`);
    if (run.engineError) engine.errors.push([run.engineError, ...violations].join("\n"));
    engine.errors.push(...run.logs.filter(l => l.severity === "error").map(l => l.message.trim()));
    if (!engine.errors.length && (run.exitCode !== 0 || result.failed))
        engine.errors.push(run.error || violations.join("\n") || `the program failed (exit ${run.exitCode}):\n${run.stderr}`);
}

async function main(): Promise<void> {
    const request: Request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
    const mode = request.engine ?? engineMode();
    const emit = request.progress && process.send ? (e: EngineEvent) => { process.send!(e); } : undefined;
    const engine = new Engine(loadState(request.statePath), request.statePath, request.transport, emit, request.parallel);
    const report: Report = { ops: engine.ops, errors: engine.errors, wallMs: 0, startedAt: engine.t0, engine: mode };
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
            if (request.refresh) report.refresh = await engine.refresh();
            if (request.replace?.length && engine.errors.length === 0) engine.setReplaceTargets(request.replace);
            if (engine.errors.length === 0) await (mode === "grpc" ? runGrpc : runMocks)(request, engine, report);
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

if (require.main === module) main();
