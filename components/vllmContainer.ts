import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import * as remote from "@pulumi/command/remote";
import { types } from "@pulumi/command";
import { CommandPlan, ContainerPlan } from "./plan";
import { WeightsManifest } from "./checks";

export interface VllmContainerArgs {
    /** The container's plan (from `planCluster`). */
    plan: ContainerPlan;
    /** The host's Docker provider (from `SparkHost`). */
    provider: docker.Provider;
    /** SSH connection to the host (from `SparkHost`), for the weights command. */
    connection: types.input.remote.ConnectionArgs;
    /** Puts the model's weights in place and lists them (from `planCluster`). */
    weights: CommandPlan;
    /**
     * What the weights command waits for and reruns after, e.g. the head's weights server for
     * head-then-copy. May resolve after this component is constructed. Default: nothing.
     */
    weightsAfter?: pulumi.Input<remote.Command[]>;
    /** Hugging Face token for downloads; travels only through stdin. Default: none (public models). */
    hfToken?: pulumi.Input<string>;
    /**
     * imageSource "head": the command (run on the head) that puts the image on this host and prints
     * its image ID, instead of a registry pull. Default: pull from the registry.
     */
    imageFromHead?: { command: CommandPlan; headConnection: types.input.remote.ConnectionArgs };
    /** Keep the image on the host when the stack is destroyed. Default: true (vLLM images are tens of GB). */
    keepImage?: boolean;
    /**
     * Resolves once every host holds the same image, or fails naming the hosts that differ; the
     * container waits for it. May resolve after this component is constructed. Default: no check.
     */
    imageAgreement?: pulumi.Input<string>;
}

/** The pinned image and the idle container that holds one host's GPUs, fabric and environment. */
export class VllmContainer extends pulumi.ComponentResource {
    /** The registry pull (imageSource "registry"), or the head's copy command (imageSource "head"). */
    readonly image: docker.RemoteImage | remote.Command;
    /** What identifies this host's image: its repo digest, or its image ID when copied from the head. */
    readonly imageIdentity: pulumi.Output<string>;
    readonly container: docker.Container;
    readonly weights: remote.Command;
    /** The weights this host holds, as listed after the weights command. */
    readonly manifest: pulumi.Output<WeightsManifest>;

    constructor(name: string, args: VllmContainerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:VllmContainer", name, {}, opts);
        const { plan, provider } = args;
        let runImage: pulumi.Output<string>;
        if (args.imageFromHead) {
            const { command, headConnection } = args.imageFromHead;
            const copy = new remote.Command(`${name}-image`, {
                connection: headConnection,
                create: command.create,
                triggers: [command.create],
            }, { parent: this });
            this.image = copy;
            this.imageIdentity = copy.stdout.apply(out => JSON.parse(out.trim().split("\n").pop() || "{}").imageId as string);
            runImage = pulumi.output(plan.image);
        } else {
            const pull = new docker.RemoteImage(`${name}-image`, {
                name: plan.image,
                platform: plan.platform,
                keepLocally: args.keepImage ?? true,
            }, { parent: this, provider });
            this.image = pull;
            this.imageIdentity = runImage = pull.repoDigest;
        }
        this.container = new docker.Container(`${name}-container`, {
            name: plan.name,
            image: pulumi.all([runImage, args.imageAgreement]).apply(([own]) => own),
            entrypoints: plan.entrypoint,
            command: plan.command,
            envs: plan.env.map(([k, v]) => `${k}=${v}`),
            networkMode: plan.networkMode,
            ipcMode: plan.ipcMode,
            gpus: plan.gpus,
            init: plan.init,
            shmSize: plan.shmSizeMb,
            ulimits: plan.ulimits,
            capabilities: { adds: plan.capabilities },
            devices: plan.devices,
            mounts: plan.mounts.map(m => ({ type: "bind", source: m.hostPath, target: m.containerPath })),
            labels: plan.labels.map(([label, value]) => ({ label, value })),
            restart: "no",
            mustRun: true,
            // Ray and vLLM run under docker exec; stop them quickly when the container goes.
            destroyGraceSeconds: 30,
        }, { parent: this, provider, deleteBeforeReplace: true });
        const { weights } = args;
        const after = pulumi.output(args.weightsAfter ?? []);
        this.weights = new remote.Command(`${name}-weights`, {
            connection: args.connection,
            create: weights.create,
            ...(weights.stdin === "hfToken" && args.hfToken !== undefined ? { stdin: pulumi.secret(pulumi.output(args.hfToken).apply(t => `${t}\n`)) } : {}),
            triggers: [weights.create, this.container.id, after.apply(cs => pulumi.all(cs.map(c => c.id)))],
        }, { parent: this, dependsOn: after.apply(cs => [this.container as pulumi.Resource, ...cs]) });
        this.manifest = this.weights.stdout.apply(out => JSON.parse(out.trim().split("\n").pop() || "{}") as WeightsManifest);
        this.registerOutputs({ image: this.imageIdentity, containerId: this.container.id });
    }
}
