import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import * as remote from "@pulumi/command/remote";
import { ClusterSpec } from "./spec";
import { ClusterPlan, planCluster } from "./plan";
import { deferred } from "./connection";
import { sameImage, sameWeights } from "./checks";
import { SparkHost } from "./sparkHost";
import { VllmContainer } from "./vllmContainer";
import { RayHead } from "./rayHead";
import { RayWorker } from "./rayWorker";
import { ModelEndpoint } from "./modelEndpoint";

export interface SparkClusterArgs {
    /** The validated stack config (from `parseSpec`). */
    spec: ClusterSpec;
    /** SSH private key for remote commands. Default: the ssh-agent at SSH_AUTH_SOCK. */
    sshPrivateKey?: pulumi.Input<string>;
    /** API key the endpoint requires. Default: a generated 40-character RandomPassword. */
    apiKey?: pulumi.Input<string>;
    /** Keep the image on the hosts when the stack is destroyed. Default: true. */
    keepImage?: boolean;
    /** Hugging Face token for gated models (downloads only; through stdin). Default: none. */
    hfToken?: pulumi.Input<string>;
}

/** Two or more DGX Sparks serving one model through vLLM over Ray. */
export class SparkCluster extends pulumi.ComponentResource {
    readonly plan: ClusterPlan;
    readonly hosts: SparkHost[];
    readonly containers: VllmContainer[];
    readonly rayHead: RayHead;
    readonly rayWorkers: RayWorker[];
    readonly model: ModelEndpoint;
    /** http://<head ssh host>:<port>/v1 */
    readonly endpoint: pulumi.Output<string>;
    readonly modelName: pulumi.Output<string>;
    readonly apiKey: pulumi.Output<string>;
    /** Preflight facts per host name. */
    readonly hostFacts: pulumi.Output<Record<string, Record<string, unknown>>>;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:SparkCluster", name, {}, opts);
        const plan = (this.plan = planCluster(args.spec, undefined, { hfToken: args.hfToken !== undefined }));
        const apiKey = args.apiKey ?? new random.RandomPassword(`${name}-api-key`, { length: 40, special: false }, { parent: this }).result;
        this.apiKey = pulumi.secret(pulumi.output(apiKey));

        this.hosts = plan.hosts.map(h => new SparkHost(`${name}-${h.host.name}`, { plan: h, sshPrivateKey: args.sshPrivateKey }, { parent: this }));
        const head = this.hosts[0];
        // Hosts are checked in parallel; no host changes until every host has passed.
        const preflights = this.hosts.map(h => h.preflight);
        // No container starts until every host holds the same image (by repo digest).
        const agreed = deferred<pulumi.Output<string>>();
        const weightsSource = deferred<remote.Command[]>();
        this.containers = plan.hosts.map((h, i) => new VllmContainer(`${name}-${h.host.name}`, {
            plan: h.container,
            provider: this.hosts[i].provider,
            connection: this.hosts[i].connection,
            weights: h.weights,
            hfToken: args.hfToken,
            weightsAfter: i === 0 ? [] : weightsSource.promise,
            imageFromHead: h.imageFromHead && { command: h.imageFromHead, headConnection: head.connection },
            keepImage: args.keepImage,
            imageAgreement: pulumi.output(agreed.promise),
        }, { parent: this, dependsOn: preflights }));
        agreed.resolve(pulumi.all(this.containers.map(c => c.imageIdentity)).apply(digests =>
            sameImage(plan.spec.image.reference, plan.hosts.map((h, i) => [h.host.name, digests[i]]))));

        const headContainer = this.containers[0].container;
        // head-then-copy: the head serves its weights on the fabric once it holds them; workers copy.
        const source = plan.weightsSource;
        weightsSource.resolve(source ? [new remote.Command(`${name}-weights-source`, {
            connection: head.connection,
            create: source.create,
            delete: source.delete,
            triggers: [source.create, headContainer.id],
        }, { parent: this, dependsOn: [this.containers[0].weights], deleteBeforeReplace: true })] : []);
        // Nothing launches until every host holds the same weights at the same path.
        const weightsAgreement = pulumi.all(this.containers.map(c => c.manifest)).apply(ms => sameWeights(plan.spec.model.id, ms));
        const workers = deferred<remote.Command[]>();
        const rayReady = deferred<remote.Command>();
        this.model = new ModelEndpoint(`${name}-model`, {
            plan,
            connection: head.connection,
            container: headContainer,
            weights: { ready: weightsAgreement, commands: this.containers.map(c => c.weights) },
            apiKey: this.apiKey,
            rayReady: rayReady.promise,
        }, { parent: this });
        this.rayHead = new RayHead(`${name}-ray-head`, {
            plan: plan.head,
            probe: plan.rayProbe,
            connection: head.connection,
            container: headContainer,
            after: [this.model.compat],
            workers: workers.promise,
        }, { parent: this });
        this.rayWorkers = plan.hosts.slice(1).map((h, i) => new RayWorker(`${name}-ray-${h.host.name}`, {
            plan: h,
            connection: this.hosts[i + 1].connection,
            container: this.containers[i + 1].container,
            head: this.rayHead.launch,
        }, { parent: this }));
        workers.resolve(this.rayWorkers.map(w => w.launch));
        rayReady.resolve(this.rayHead.probe);

        // Resolve only once the endpoint probe has proven a completion works.
        this.endpoint = this.model.probe.stdout.apply(() => plan.endpoint);
        this.modelName = this.model.probe.stdout.apply(() => plan.modelName);
        this.hostFacts = pulumi.all(this.hosts.map(h => h.facts)).apply(facts =>
            Object.fromEntries(plan.hosts.map((h, i) => [h.host.name, facts[i]])));
        this.registerOutputs({ endpoint: this.endpoint, modelName: this.modelName, apiKey: this.apiKey, hosts: this.hostFacts });
    }
}
