import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { ClusterPlan } from "./plan/clusterPlan";
import { WeightsManifest, sameWeights } from "./plan/checks";
import { ResourceNames } from "./plan/naming";
import { Wiring, checked, stdinLine } from "./wiring";
import { lastJsonLine } from "./sparkHost";
import { workerCopyToken } from "./plan/copyToken";

/** @internal Built only by SparkCluster. */
export interface ModelWeightsArgs {
    plan: ClusterPlan;
    names: ResourceNames;
    wiring: Wiring;
    /** Hugging Face token for downloads; travels only through stdin. Default: none (public models). */
    hfToken?: pulumi.Input<string>;
}

/**
 * @internal The model's weights on every host, per `model.weights`: the head's first (head-then-copy: then
 * its read-only file server on the fabric), then the workers'; then every host must list the same files.
 */
export class ModelWeights extends pulumi.ComponentResource {
    /** Per host, in plan order. */
    readonly commands: remote.Command[];
    /** Resolves to a fingerprint of the agreed manifest; fails naming each host and what it lacks. */
    readonly agreed: pulumi.Output<string>;

    constructor(name: string, args: ModelWeightsArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:ModelWeights", name, {}, opts);
        const { plan, names, wiring } = args;
        const hfToken = args.hfToken === undefined ? undefined : stdinLine(args.hfToken);
        // head-then-copy: a copy token for this stack, generated; the head's server gets it on stdin, each worker's copy
        // only its own token derived from it (components/plan/copyToken.ts), which names that worker to the server.
        const copyToken = plan.weightsSource ? wiring.generatedSecret(names.of("weights-token"), { parent: this }) : undefined;
        const secrets = { hfToken, weightsToken: copyToken && stdinLine(copyToken), apiKey: undefined, rayToken: undefined, tlsFiles: undefined };
        const weights = (i: number) => {
            const h = plan.hosts[i];
            const stdin = h.weights.stdin === "weightsToken" && copyToken
                ? stdinLine(copyToken.apply(t => workerCopyToken(t, h.host.name)))
                : h.weights.stdin ? secrets[h.weights.stdin] : undefined;
            return wiring.command(names.host(h.host.name, "weights"), { parent: this }, stdin);
        };
        const head = weights(0);
        if (plan.weightsSource) wiring.command(names.of("weights-source"), { parent: this }, secrets.weightsToken);
        this.commands = [head, ...plan.hosts.slice(1).map((_, i) => weights(i + 1))];
        const manifests = this.commands.map((c, i) => c.stdout.apply(out => {
            const m = lastJsonLine(out);
            if (typeof m.files !== "object" || m.files === null)
                throw new Error(`the weights command on ${plan.hosts[i].host.name} printed no file manifest as its last line: ${String(out).trim().split("\n").pop()?.slice(0, 200)}`);
            return m as unknown as WeightsManifest;
        }));
        this.agreed = pulumi.all(manifests).apply(ms => checked(() => sameWeights(plan.spec.model.id, ms)));
        wiring.gate(names.of("weights"), { parent: this }, this.agreed);
        this.registerOutputs({ weights: this.agreed });
    }
}
