import * as pulumi from "@pulumi/pulumi";
import * as docker from "@pulumi/docker";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan/clusterPlan";
import { sameImage } from "./plan/checks";
import { ResourceNames } from "./plan/naming";
import { Wiring, checked } from "./wiring";
import { IMAGE } from "./plan/resources";
import { SparkHost, lastJsonLine } from "./sparkHost";
import { pullCustomTimeouts } from "./knowledge/imagePull";

/** @internal Built only by SparkCluster. */
export interface ClusterImageArgs {
    plan: ClusterPlan;
    names: ResourceNames;
    wiring: Wiring;
    /** Every host, in plan order (the first is the head). */
    hosts: SparkHost[];
}

/**
 * @internal The pinned image on every host: a registry pull per host (imageSource "registry"), or the
 * head's copy to each worker (imageSource "head"); then every host's image must be the same.
 */
export class ClusterImage extends pulumi.ComponentResource {
    readonly images: Array<docker.RemoteImage | remote.Command>;
    /** Per host, what identifies its image: the repo digest, or the image ID when copied from the head. */
    readonly identities: pulumi.Output<string>[];
    /** Resolves to the common digest once every host holds the same image; fails naming the hosts that differ. */
    readonly agreed: pulumi.Output<string>;
    /** Per host, the image's proof in a throw-away container: compat before any container is created or replaced. */
    readonly checks: remote.Command[];

    constructor(name: string, args: ClusterImageArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:ClusterImage", name, {}, opts);
        const { plan, names, wiring, hosts } = args;
        this.images = [];
        this.identities = [];
        plan.hosts.forEach((h, i) => {
            const imageName = names.host(h.host.name, "image");
            if (h.imageFromHead) {
                const copy = wiring.command(imageName, { parent: this });
                this.images.push(copy);
                this.identities.push(copy.stdout.apply(out => String(lastJsonLine(out).imageId ?? "")));
            } else {
                const entry = wiring.entry(imageName, IMAGE);
                // Sized from the image (components/knowledge/imagePull.ts): the provider's own 20 minutes fail a slow first pull.
                const pull = wiring.set(imageName, new docker.RemoteImage(imageName, entry.inputs,
                    { parent: this, provider: hosts[i].provider, dependsOn: wiring.dependsOn(entry), customTimeouts: pullCustomTimeouts(entry.inputs.name) }));
                this.images.push(pull);
                this.identities.push(pull.repoDigest);
            }
        });
        this.agreed = pulumi.all(this.identities).apply(ids =>
            checked(() => sameImage(plan.spec.image.reference, plan.hosts.map((h, i) => [h.host.name, ids[i]]))));
        wiring.gate(names.of("images"), { parent: this }, this.agreed);
        // The image proven on every host before any container is created or replaced (components/plan/hostCommands.ts imageCheck).
        // Its warnings (a Ray without token authentication) are not repeated here: compat says them once, from the head's container.
        this.checks = plan.hosts.map(h => wiring.command(names.host(h.host.name, "image-check"), { parent: this }));
        wiring.gate(names.of("image-checks"), { parent: this });
        this.registerOutputs({ image: this.agreed });
    }
}
