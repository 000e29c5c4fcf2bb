import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import { HostPlan } from "./plan/clusterPlan";
import { ResourceNames } from "./plan/naming";
import { Wiring } from "./wiring";
import { CONTAINER } from "./plan/resources";
import { SparkHost } from "./sparkHost";
import { ClusterImage } from "./clusterImage";

/** @internal Built only by SparkCluster. */
export interface VllmContainerArgs {
    plan: HostPlan;
    names: ResourceNames;
    wiring: Wiring;
    host: SparkHost;
    /** Every host's image; the container starts only once they agree. */
    image: ClusterImage;
    /** This host's index in the plan (0 is the head). */
    index: number;
}

/**
 * @internal The idle container that holds one host's GPU, fabric and environment. Ray and vLLM run in it
 * under `docker exec`, each as its own declared command, so the container only holds what they share.
 */
export class VllmContainer extends pulumi.ComponentResource {
    readonly container: docker.Container;

    constructor(name: string, args: VllmContainerArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:VllmContainer", name, {}, opts);
        const { names, wiring, plan } = args;
        const containerName = names.host(plan.host.name, "container");
        const entry = wiring.entry(containerName, CONTAINER);
        // The pull's own output (not the planned text); the container waits (dependsOn, through the images gate)
        // until every host holds the same image.
        const image = plan.imageFromHead ? pulumi.output(plan.container.image) : args.image.identities[args.index];
        this.container = wiring.set(containerName, new docker.Container(containerName,
            { ...entry.inputs, image },
            { parent: this, provider: args.host.provider, dependsOn: wiring.dependsOn(entry), deleteBeforeReplace: entry.deleteBeforeReplace }));
        this.registerOutputs({ containerId: this.container.id });
    }
}
