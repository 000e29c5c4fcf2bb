import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import { types } from "@pulumi/command";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan";
import { sshTarget } from "./connection";

export interface ModelEndpointArgs {
    /** The cluster plan (from `planCluster`): compat check, `vllm serve` launch and endpoint probe. */
    plan: ClusterPlan;
    /** SSH connection to the head (from `SparkHost`). */
    connection: types.input.remote.ConnectionArgs;
    /** The head's container; the compat check runs inside it. */
    container: pulumi.Resource & { id: pulumi.Output<string> };
    /** The weights on every host: the check waits for them and reruns when they change. */
    weights: { ready: pulumi.Input<string>; commands: pulumi.Resource[] };
    /** The API key vLLM requires; it only ever travels through stdin. */
    apiKey: pulumi.Input<string>;
    /**
     * The Ray formation probe: `vllm serve` waits for it and is relaunched when it is replaced.
     * May resolve after this component is constructed (Ray starts after the compat check).
     */
    rayReady: pulumi.Input<remote.Command>;
}

/** Checks the image's vLLM against the model, launches `vllm serve` and proves the endpoint answers. */
export class ModelEndpoint extends pulumi.ComponentResource {
    readonly compat: remote.Command;
    readonly launch: remote.Command;
    readonly probe: remote.Command;

    constructor(name: string, args: ModelEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:ModelEndpoint", name, {}, opts);
        const { plan, connection } = args;
        const keyLine = pulumi.secret(pulumi.output(args.apiKey).apply(k => `${k}\n`));
        // A new key must relaunch vLLM; a digest carries that change without the key itself.
        const keyDigest = pulumi.output(args.apiKey).apply(k => crypto.createHash("sha256").update(k).digest("hex").slice(0, 16));
        this.compat = new remote.Command(`${name}-compat`, {
            connection,
            create: plan.compat.create,
            triggers: [plan.compat.create, args.container.id, args.weights.ready],
        }, { parent: this, dependsOn: [args.container, ...args.weights.commands] });
        const rayReady = pulumi.output(args.rayReady);
        this.launch = new remote.Command(`${name}-launch`, {
            connection,
            create: plan.vllmLaunch.create,
            delete: plan.vllmLaunch.delete,
            stdin: keyLine,
            triggers: [plan.vllmLaunch.create, sshTarget(plan.head.host), rayReady.apply(r => r.id), keyDigest],
        }, { parent: this, dependsOn: rayReady.apply(r => [r, this.compat]), deleteBeforeReplace: true });
        this.probe = new remote.Command(`${name}-probe`, {
            connection,
            create: plan.endpointProbe.create,
            stdin: keyLine,
            triggers: [plan.endpointProbe.create, this.launch.id],
        }, { parent: this, dependsOn: [this.launch] });
        this.registerOutputs({ probe: this.probe.stdout });
    }
}
