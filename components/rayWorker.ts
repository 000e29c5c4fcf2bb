import * as pulumi from "@pulumi/pulumi";
import { types } from "@pulumi/command";
import * as remote from "@pulumi/command/remote";
import { HostPlan } from "./plan";
import { sshTarget } from "./connection";

export interface RayWorkerArgs {
    /** The worker host's plan (from `planCluster`); its `rayLaunch` joins the head's fabric address. */
    plan: HostPlan;
    /** SSH connection to the worker (from `SparkHost`). */
    connection: types.input.remote.ConnectionArgs;
    /** The worker's container; replacing it relaunches the worker. */
    container: pulumi.Resource & { id: pulumi.Output<string> };
    /** The head's launch; replacing it makes every worker join again. */
    head: remote.Command;
}

/** `ray start --address=<head fabric ip>:<port>` on one worker's container. */
export class RayWorker extends pulumi.ComponentResource {
    readonly launch: remote.Command;

    constructor(name: string, args: RayWorkerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:RayWorker", name, {}, opts);
        const { rayLaunch } = args.plan;
        this.launch = new remote.Command(`${name}-launch`, {
            connection: args.connection,
            create: rayLaunch.create,
            delete: rayLaunch.delete,
            triggers: [rayLaunch.create, sshTarget(args.plan.host), args.container.id, args.head.id],
        }, { parent: this, dependsOn: [args.container, args.head], deleteBeforeReplace: true });
        this.registerOutputs({ launch: this.launch.stdout });
    }
}
