import * as pulumi from "@pulumi/pulumi";
import { types } from "@pulumi/command";
import * as remote from "@pulumi/command/remote";
import { CommandPlan, HostPlan } from "./plan";
import { sshTarget } from "./connection";

export interface RayHeadArgs {
    /** The head host's plan (from `planCluster`); its `rayLaunch` starts `ray start --head`. */
    plan: HostPlan;
    /** The formation probe (from `planCluster`). */
    probe: CommandPlan;
    /** SSH connection to the head (from `SparkHost`). */
    connection: types.input.remote.ConnectionArgs;
    /** The head's container; replacing it relaunches Ray. */
    container: pulumi.Resource & { id: pulumi.Output<string> };
    /** What must succeed before Ray starts, e.g. the compatibility check. Default: none. */
    after?: pulumi.Input<pulumi.Resource>[];
    /**
     * The workers' launches: the probe waits for them and is rerun when any is replaced.
     * May resolve after this component is constructed (workers need the head's launch first).
     */
    workers: pulumi.Input<remote.Command[]>;
}

/** `ray start --head` on the head's container, and the probe that waits for every node and GPU. */
export class RayHead extends pulumi.ComponentResource {
    readonly launch: remote.Command;
    readonly probe: remote.Command;

    constructor(name: string, args: RayHeadArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:RayHead", name, {}, opts);
        const { rayLaunch } = args.plan;
        this.launch = new remote.Command(`${name}-launch`, {
            connection: args.connection,
            create: rayLaunch.create,
            delete: rayLaunch.delete,
            triggers: [rayLaunch.create, sshTarget(args.plan.host), args.container.id],
        }, { parent: this, dependsOn: [args.container, ...(args.after ?? [])], deleteBeforeReplace: true });
        const workers = pulumi.output(args.workers);
        this.probe = new remote.Command(`${name}-probe`, {
            connection: args.connection,
            create: args.probe.create,
            triggers: [args.probe.create, this.launch.id, workers.apply(ws => pulumi.all(ws.map(w => w.id)))],
        }, { parent: this, dependsOn: workers.apply(ws => [this.launch as pulumi.Resource, ...ws]) });
        this.registerOutputs({ probe: this.probe.stdout });
    }
}
