// Turns planned resources (components/resources.ts) into Pulumi resources. The components create their
// resources in plan order, so every name an entry waits for or follows is already built: no deferred
// promises and no dependsOn computed from Outputs.
import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { COMMAND, PlannedResource, PlannedType } from "./resources";

interface Built {
    resource?: pulumi.Resource;
    /** What a follower puts in its triggers: the resource's id, or a gate's value. */
    trigger: pulumi.Input<unknown>;
}

/** @internal The planned entries by name, and what has been built for each so far. */
export class Wiring {
    private readonly planned: Map<string, PlannedResource>;
    private readonly built = new Map<string, Built>();

    /** @param privateKey SSH private key for every command; default the ssh-agent at SSH_AUTH_SOCK. */
    constructor(planned: PlannedResource[], private readonly privateKey?: pulumi.Input<string>) {
        this.planned = new Map(planned.map(p => [p.name, p]));
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

    private get(name: string, by: string): Built {
        const b = this.built.get(name);
        if (!b) throw new Error(`spark-vllm: ${by} needs ${name}, which is not built yet (components must follow the plan's order)`);
        return b;
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
        const { connection, create, delete: del, stdin: plainStdin } = p.inputs;
        if (p.secretStdin && stdin === undefined) throw new Error(`spark-vllm: ${name} reads its ${p.secretStdin} on stdin, and none was given`);
        const cmd = new remote.Command(name, {
            connection: { ...connection, ...(this.privateKey !== undefined ? { privateKey: this.privateKey } : {}) },
            create,
            ...(del !== undefined ? { delete: del } : {}),
            ...(plainStdin !== undefined ? { stdin: plainStdin } : stdin !== undefined ? { stdin } : {}),
            triggers: this.triggers(p),
        }, { ...opts, dependsOn: this.dependsOn(p), ...(p.deleteBeforeReplace ? { deleteBeforeReplace: true } : {}) });
        return this.set(name, cmd);
    }
}
