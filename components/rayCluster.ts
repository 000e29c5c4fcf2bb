import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan/clusterPlan";
import { ResourceNames } from "./plan/naming";
import { Wiring, stdinLine } from "./wiring";

/** @internal Built only by SparkCluster. */
export interface RayClusterArgs {
    plan: ClusterPlan;
    names: ResourceNames;
    wiring: Wiring;
    /** The cluster's Ray token; it only ever travels on the launches' stdin. */
    token: pulumi.Input<string>;
}

/**
 * @internal Ray over the fabric: `ray start --head` in the head's container, `ray start --address=<head
 * fabric address>:<port>` in each worker's, then the probe that waits until every node and GPU has joined.
 */
export class RayCluster extends pulumi.ComponentResource {
    readonly head: remote.Command;
    readonly workers: remote.Command[];
    /** Succeeds once every node and GPU has joined; fails naming the hosts that have not. */
    readonly probe: remote.Command;

    constructor(name: string, args: RayClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:RayCluster", name, {}, opts);
        const { plan, names, wiring } = args;
        const tokenLine = stdinLine(args.token);
        this.head = wiring.command(names.of("ray-head"), { parent: this }, tokenLine);
        this.workers = plan.hosts.slice(1).map(h => wiring.command(names.host(h.host.name, "ray"), { parent: this }, tokenLine));
        this.probe = wiring.command(names.of("ray-probe"), { parent: this });
        this.registerOutputs({ probe: this.probe.stdout });
    }
}
