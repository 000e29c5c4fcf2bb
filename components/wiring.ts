// Turns planned resources (components/plan/resources.ts) into Pulumi resources. The components create their
// resources in plan order, so every name an entry waits for or follows is already built.
//
// Gates (resources.ts GATE) are where every host's edges meet, and their realization stays linear in hosts:
// a gate is built once from its N resources (one promise that settles when all have been created, one value),
// and each follower then holds one promise and one value, not N resources. Pulumi would otherwise copy the N
// resources into every follower: an Output carries the resources it was computed from and they become the
// follower's dependencies, and `dependsOn` on a component expands to its children (@pulumi/pulumi 3.276.0
// runtime/dependsOn.js getAllTransitivelyReferencedResources, output.js OutputImpl.allResources).
import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import * as remote from "@pulumi/command/remote";
import { COMMAND, GATE, PASSWORD, PlannedResource, PlannedType } from "./plan/resources";

/**
 * The same value, and as secret as it is, once it is known; while unknown (a preview of a stack whose secret is
 * generated, or comes from a resource not created yet), an unknown that is not marked secret. An unknown holds no
 * value to hide, and the marker on it breaks the real preview: @pulumi/pulumi 3.276.0 sends a secret unknown as a
 * secret wrapping the unknown (runtime/rpc.js serializeProperty: "Preserve the secret marker even when the value is
 * unknown"); pulumi-command 1.2.1's Check (pulumi-go-provider v1.3.0) answers that as a secret with no value inside
 * `triggers`, which the CLI refuses (`triggers[1]: malformed secret: missing value`, pulumi/pulumi
 * sdk/go/propertyrpc/unmarshal.go), and as a secret "" for a string such as `stdin`, which the policy pack is then
 * given instead of an unknown. Once the value is known (every `up` step: a resource registers after what its inputs
 * come from was created) it is sent as a secret again. Built as @pulumi/pulumi's own `secret`/`unsecret` build
 * theirs (output.js: `new Output(resources, promise(true), isKnown, isSecret, allResources)`).
 */
export function unknownNotSecret<T>(value: pulumi.Input<T>): pulumi.Output<T> {
    const o = pulumi.output(value);
    const parts = o as unknown as OutputParts<T>;
    const isKnown = internals(o).isKnown;
    const isSecret = Promise.all([isKnown, parts.isSecret]).then(([known, secret]) => known && secret);
    return new (pulumi.Output as unknown as OutputConstructor)(parts.resources(), parts.promise(true), isKnown, isSecret, parts.allResources()) as pulumi.Output<T>;
}
/** The members of @pulumi/pulumi 3.276.0's OutputImpl that `secret`/`unsecret` read (output.js), and its constructor. */
interface OutputParts<T> {
    resources(): Set<pulumi.Resource>;
    allResources(): Promise<Set<pulumi.Resource>>;
    promise(withUnknowns?: boolean): Promise<T>;
    isSecret: Promise<boolean>;
}
type OutputConstructor = new (resources: Set<pulumi.Resource>, promise: Promise<unknown>, isKnown: Promise<boolean>, isSecret: Promise<boolean>, allResources: Promise<Set<pulumi.Resource>>) => unknown;

/** A secret as a command's stdin: its first line, secret (an unknown one unmarked: unknownNotSecret). */
export function stdinLine(secret: pulumi.Input<string>): pulumi.Output<string> {
    return unknownNotSecret(pulumi.secret(pulumi.output(secret).apply(s => `${s}\n`)));
}

/**
 * A short digest (sha256, 16 hex) of a value that is no secret: what a follower's triggers carry instead of a list that
 * grows with the hosts (the containers' ids). A secret's digest is secretDigest's.
 */
export function digest(value: pulumi.Input<string>): pulumi.Output<string> {
    return unknownNotSecret(pulumi.output(value).apply(s => crypto.createHash("sha256").update(s).digest("hex").slice(0, 16)));
}

/**
 * What a follower's triggers carry instead of a secret (the API key, Ray's token, a given certificate and key): an
 * HMAC-SHA256 (RFC 2104, Node's crypto.createHmac) keyed with `salt`, 16 hex, and always a secret, so neither the state
 * nor a preview shows it, and no table of common keys' digests matches it (issue 50: `sha256("hunter2")` was in the
 * state in the clear when the key was given as a plain input). The salt names the project, the stack and the resource,
 * so the same key in two stacks has two digests; it is stable, so an unchanged key keeps its digest and replaces
 * nothing. An unknown one is unmarked (unknownNotSecret).
 */
export function secretDigest(secret: pulumi.Input<string>, salt: string): pulumi.Output<string> {
    return unknownNotSecret(pulumi.secret(pulumi.output(secret).apply(s => crypto.createHmac("sha256", salt).update(s).digest("hex").slice(0, 16))));
}

/** secretDigest's salt for the secret NAME (a resource name) of this program's project and stack. */
export const digestSalt = (name: string) => `spark-vllm trigger digest\0${pulumi.getProject()}\0${pulumi.getStack()}\0${name}`;

interface Built {
    resource?: pulumi.Resource;
    /** What a follower puts in its triggers: the resource's id, or a gate's value. */
    trigger: pulumi.Input<unknown>;
    /** A gate's: settles once every resource it waits for has been created (rejects when one failed). */
    ready?: Promise<unknown>;
}

/** The Output's value as a promise; `withUnknowns` gives `pulumi.unknown` for an unknown value. */
interface OutputInternals<T> {
    promise(withUnknowns?: boolean): Promise<T>;
    isKnown: Promise<boolean>;
}
/**
 * The SDK's own accessors (@internal in output.d.ts, present in output.js of @pulumi/pulumi 3.276.0:
 * OutputImpl.promise and isKnown); runtime/dependsOn.js waits on a dependency the same way, with
 * `r.urn.promise()`. Checked at start-up so an SDK without them fails loudly, not by ordering nothing.
 */
function internals<T>(o: pulumi.Output<T>): OutputInternals<T> {
    const i = o as unknown as OutputInternals<T>;
    if (typeof i.promise !== "function" || !(i.isKnown instanceof Promise)) throw new Error("spark-vllm: this @pulumi/pulumi has no Output.promise/isKnown; gates cannot wait on it");
    return i;
}

/** Settles once the resource has been registered (in `up`: created or updated), as Pulumi's own dependsOn waits. */
export function registered(r: pulumi.Resource): Promise<unknown> {
    return internals(r.urn).promise();
}

/**
 * The same value (known or unknown) without the resources it was computed from. A follower that puts it in its
 * inputs still waits for it (the SDK resolves every input before registering), but gets no dependency on each of
 * them: a gate's followers name their own host's resources in `dependsOn` instead. For gate values only (digests,
 * ids, fingerprints): secretness is not carried over.
 */
export function detached<T>(value: pulumi.Output<T>): pulumi.Output<T> {
    const i = internals(value);
    return pulumi.output(Promise.all([i.isKnown, i.promise(true)]).then(([known, v]) => (known ? v : pulumi.unknown))) as pulumi.Output<T>;
}

/**
 * Runs a cross-host check inside an apply; its failure becomes a pulumi.RunError, which the CLI's runner prints as
 * its message alone (@pulumi/pulumi 3.276.0 cmd/run/run.js uncaughtHandler: `log.error(err.message)`), with no stack
 * frames. The runner also formats every uncaught error for its trace span (`span.addEvent(defaultErrorMessage(err))`,
 * cmd/run/error.js: util.inspect with colors when there is a stack), and on Node 20.20.2 and 22.23.3 util.inspect
 * never returns for the SDK's source-mapped `node_modules/@pulumi/output.ts` frames that any apply's stack has
 * (nodejs/node#64011): with a stack, `pulumi up` would hang exactly when the hosts disagree.
 */
export function checked<T>(check: () => T): T {
    try {
        return check();
    } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const e = new pulumi.RunError(message);
        e.stack = undefined;
        // Every resource that waits on the check fails serializing its inputs with this same error object, and the SDK
        // prepends to its message each time (rpc.js serializeProperties: `err.message = \`error serializing property
        // "${k}": ...\``, rethrown as the same object so the runner reports it once): the message read dozens of
        // prefixes before the check's words. The message stays as the check wrote it; those writes are ignored.
        Object.defineProperty(e, "message", { get: () => message, set: () => undefined, enumerable: false, configurable: true });
        throw e;
    }
}

/** @internal The planned entries by name, and what has been built for each so far. */
export class Wiring {
    private readonly planned: Map<string, PlannedResource>;
    private readonly built = new Map<string, Built>();
    /** Names some entry lists in its `dependsOn`. */
    private readonly awaited: Set<string>;

    /** @param privateKey SSH private key for every command; default the ssh-agent at SSH_AUTH_SOCK. */
    constructor(planned: PlannedResource[], private readonly privateKey?: pulumi.Input<string>) {
        this.planned = new Map(planned.map(p => [p.name, p]));
        this.awaited = new Set(planned.flatMap(p => p.dependsOn));
    }

    entry<T extends PlannedType>(name: string, type?: T): PlannedResource<T> {
        const p = this.planned.get(name);
        if (!p) throw new Error(`spark-vllm: no planned resource named ${name}`);
        if (type !== undefined && p.type !== type) throw new Error(`spark-vllm: ${name} is planned as ${p.type}, not ${type}`);
        return p as PlannedResource<T>;
    }

    /** Records what was built for a name; a follower's trigger is its id unless given. */
    set<R extends pulumi.Resource>(name: string, resource: R | undefined, trigger?: pulumi.Input<unknown>): R {
        this.entry(name);
        const id = resource && "id" in resource ? (resource as unknown as pulumi.CustomResource).id : undefined;
        this.built.set(name, { resource, trigger: trigger ?? id });
        return resource as R;
    }

    /**
     * A generated secret (a planned RandomPassword): built from its entry, recorded with its digest (secretDigest) as the trigger its
     * followers carry (a new secret replaces them, without the secret in any trigger), returned as a secret.
     */
    generatedSecret(name: string, opts: pulumi.CustomResourceOptions): pulumi.Output<string> {
        const password = new random.RandomPassword(name, this.entry(name, PASSWORD).inputs, opts);
        this.set(name, password, secretDigest(password.result, digestSalt(name)));
        return pulumi.secret(password.result);
    }

    private get(name: string, by: string): Built {
        const b = this.built.get(name);
        if (!b) throw new Error(`spark-vllm: ${by} needs ${name}, which is not built yet (components must follow the plan's order)`);
        return b;
    }

    /**
     * Builds a gate from what it waits for (its entry's `dependsOn`, all built by now) and its value (an agreement,
     * which throws when the hosts disagree). What followers put in their triggers is the value without the
     * resources behind it. A gate some entry waits for (`dependsOn`) is also a component resource that completes
     * once each of those has been registered and the value has resolved: Pulumi's `dependsOn` on a component waits
     * for its construction (`initialize`) and then adds only its children's URNs, and a gate has none
     * (@pulumi/pulumi 3.276.0 runtime/dependsOn.js addTransitivelyReferencedChildResourcesOfComponentResources
     * awaits `resource.__data`; resource.js ComponentResource.initialize). A promise or Output as `dependsOn`
     * would do the same, but the providers' SDKs pass options through `mergeOptions`, which wraps it in an Output
     * and walks every resource it resolves to (resource.js merge, output.js containsUnknowns): slower than the
     * quadratic lists it replaces. The N resources are visited here, once; a follower holds one component.
     */
    gate(name: string, opts: pulumi.ComponentResourceOptions, value?: pulumi.Output<unknown>): void {
        const p = this.entry(name, GATE);
        const awaited = [
            ...p.dependsOn.map(d => {
                const b = this.get(d, name);
                return b.ready ?? (b.resource ? registered(b.resource) : undefined);
            }),
            ...(value === undefined ? [] : [internals(value).promise()]),
        ];
        const ready = Promise.all(awaited);
        // A failure rejects `ready`; the followers report it (and the failed resource itself). Handled here so a
        // gate whose followers have not started yet is not an unhandled rejection that hides that error.
        ready.catch(() => undefined);
        const resource = this.awaited.has(name) ? new Gate(name, ready, opts) : undefined;
        this.built.set(name, { resource, trigger: value === undefined ? undefined : detached(value), ready });
    }

    dependsOn(p: PlannedResource): pulumi.Resource[] {
        return p.dependsOn.map(d => this.get(d, p.name).resource).filter((r): r is pulumi.Resource => r !== undefined);
    }

    /** The entry's own triggers, then each resource it follows. */
    triggers(p: PlannedResource): pulumi.Input<unknown>[] {
        return [...(p.type === COMMAND ? p.inputs.triggers : []), ...p.replacedBy.map(r => this.get(r, p.name).trigger)];
    }

    /** A remote.Command from its entry. `stdin` carries the entry's secret, if it has one. */
    command(name: string, opts: pulumi.CustomResourceOptions, stdin?: pulumi.Input<string>): remote.Command {
        const p = this.entry(name, COMMAND);
        const { connection, create, delete: del, update, stdin: plainStdin } = p.inputs;
        if (p.secretStdin && stdin === undefined) throw new Error(`spark-vllm: ${name} reads its ${p.secretStdin} on stdin, and none was given`);
        const cmd = new remote.Command(name, {
            connection: { ...connection, ...(this.privateKey !== undefined ? { privateKey: this.privateKey } : {}) },
            create,
            ...(del !== undefined ? { delete: del } : {}),
            ...(update !== undefined ? { update } : {}),
            ...(plainStdin !== undefined ? { stdin: plainStdin } : stdin !== undefined ? { stdin } : {}),
            triggers: this.triggers(p),
        }, { ...opts, dependsOn: this.dependsOn(p), ...(p.deleteBeforeReplace ? { deleteBeforeReplace: true } : {}) });
        return this.set(name, cmd);
    }
}

/**
 * @internal A gate that something waits for (components/plan/resources.ts GATE): completes once `ready` has settled; no
 * children and no outputs. A failure rejects its construction, and so fails whatever waits for it.
 */
class Gate extends pulumi.ComponentResource {
    constructor(name: string, ready: Promise<unknown>, opts: pulumi.ComponentResourceOptions) {
        // ComponentResource calls initialize() synchronously from its own constructor, before this class' fields
        // exist: `ready` reaches it through `pending`, not through args (which the engine records as inputs).
        Gate.pending = ready;
        super("spark-vllm:index:Gate", name, {}, opts);
        // Followers see a failure through their dependsOn; this only keeps it from being an unhandled rejection.
        this.getData().catch(() => undefined);
    }
    private static pending?: Promise<unknown>;
    protected async initialize(): Promise<Record<string, never>> {
        const ready = Gate.pending;
        Gate.pending = undefined;
        await ready;
        return {};
    }
}
