import * as pulumi from "@pulumi/pulumi";
import * as remote from "@pulumi/command/remote";
import { ClusterSpec } from "./spec/spec";
import { linkLocalNotes } from "./spec/parseSpec";
import { ClusterPlan } from "./plan/clusterPlan";
import { cpuVllmSkips } from "./plan/hostCommands";
import { planCluster } from "./plan/plan";
import { plannedResources } from "./plan/resources";
import { ResourceNames, resourceNames } from "./plan/naming";
import { Wiring, checked, digest, digestSalt, secretDigest, stdinLine } from "./wiring";
import { apiKeyError } from "./spec/apiKey";
import { SparkHost, lastJsonLine, lastLineWarnings } from "./sparkHost";
import { ClusterImage } from "./clusterImage";
import { VllmContainer } from "./vllmContainer";
import { ModelWeights } from "./modelWeights";
import { FabricCheck } from "./fabricCheck";
import { RayCluster } from "./rayCluster";
import { ModelEndpoint } from "./modelEndpoint";
import { EndpointProxy, GivenCertificate } from "./endpointProxy";

/** What SparkCluster needs: the parsed spec; everything else has a default. */
export interface SparkClusterArgs {
    /** The validated stack config (from `parseSpec`). */
    spec: ClusterSpec;
    /** SSH private key for remote commands. Default: the ssh-agent at SSH_AUTH_SOCK. */
    sshPrivateKey?: pulumi.Input<string>;
    /** API key the endpoint requires: 32 to 512 characters of RFC 6750's b64token (components/spec/apiKey.ts). Default: a generated 40-character RandomPassword. */
    apiKey?: pulumi.Input<string>;
    /** Keep the image on the hosts when the stack is destroyed. Default: true (vLLM images are tens of GB). */
    keepImage?: boolean;
    /** Hugging Face token for gated models (downloads only; through stdin). Default: none. */
    hfToken?: pulumi.Input<string>;
    /** endpoint.tls "given" (required then): the PEM certificate chain, the server's certificate first, and its private key; through stdin. */
    tls?: GivenCertificate;
}

/**
 * DGX Sparks serving one model through vLLM: over Ray, vLLM's own multi-node launch (mp), or on one host.
 * Builds its parts in the order they run: hosts → image → containers → weights → compatibility check → fabric check →
 * Ray (ray backend) → memory gates, vLLM and its probe. Names come from
 * naming.ts; inputs and wiring from resources.ts (the same entries `spark-vllm diff` reads).
 */
export class SparkCluster extends pulumi.ComponentResource {
    readonly plan: ClusterPlan;
    readonly hosts: SparkHost[];
    readonly image: ClusterImage;
    readonly containers: VllmContainer[];
    /** Two or more hosts, unless probes.fabric is false. */
    readonly fabricCheck?: FabricCheck;
    readonly weights: ModelWeights;
    /** The image's vLLM (and transformers) against the model's architectures, in the head's container. */
    readonly compat: remote.Command;
    /** The Ray backend's head, workers and formation probe; undefined for mp and one host. */
    readonly ray?: RayCluster;
    readonly model: ModelEndpoint;
    /** Each replica's deployment, in order (one with spark-vllm:replicas 1); the singular fields above are the first's. */
    readonly replicas: ReplicaParts[];
    /** Several replicas: each one's hosts, head, fabric verdict and serving figures; undefined with one. */
    readonly replicaOutputs: pulumi.Output<Array<Record<string, unknown>> | undefined>;
    /** The reverse proxy on the head that publishes vllm.port and requires the key (vLLM listens on loopback only). */
    readonly proxy: EndpointProxy;
    /** endpoint.tls "generated" or "given": the certificate the proxy serves (PEM) and its SHA-256 fingerprint, for clients to pin. */
    readonly endpointCertificate: pulumi.Output<string | undefined>;
    readonly endpointCertificateSha256: pulumi.Output<string | undefined>;
    /** http(s)://<head ssh host>:<port>/v1 (https with endpoint.tls), once the endpoint probe has proven a completion works through the proxy. */
    readonly endpoint: pulumi.Output<string>;
    readonly modelName: pulumi.Output<string>;
    readonly apiKey: pulumi.Output<string>;
    /** The fabric check's verdict (transport, bus bandwidth per size); undefined with one host or probes.fabric false. */
    readonly fabric: pulumi.Output<Record<string, unknown> | undefined>;
    /** The serving proof's figures (time to first token p50/p95, output tokens/s per concurrency); undefined when probes.serving is false. */
    readonly serving: pulumi.Output<Record<string, unknown> | undefined>;
    /** Preflight facts per host name. */
    readonly hostFacts: pulumi.Output<Record<string, Record<string, unknown>>>;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:SparkCluster", name, {}, opts);
        // The stack it belongs to: on every container and process, and what each host's preflight checks (components/plan/ownership.ts).
        const owner = { project: pulumi.getProject(), stack: pulumi.getStack() };
        const plan = (this.plan = planCluster(args.spec, undefined, { hfToken: args.hfToken !== undefined, owner }));
        // A link-local fabric address works until the next boot picks another (components/spec/parseSpec.ts linkLocalNotes).
        for (const note of linkLocalNotes(args.spec)) pulumi.log.warn(note, this);
        // testBed.cpuVllm (a CPU vLLM on one test machine, never a Spark): what the plan leaves out, said in preview and up.
        for (const skip of cpuVllmSkips(args.spec))
            pulumi.log.warn(`spark-vllm:testBed.cpuVllm: ${skip.step} skipped: ${skip.why}`, this);
        const names = resourceNames(name);
        const wiring = new Wiring(plannedResources(plan, { cluster: name, apiKey: args.apiKey === undefined ? "generated" : "given", keepImage: args.keepImage }), args.sshPrivateKey);
        const parent = { parent: this };

        // A new key must relaunch vLLM; its digest carries the change without the key itself.
        const keyName = names.of("api-key");
        if (args.apiKey === undefined) this.apiKey = wiring.generatedSecret(keyName, parent);
        else {
            // A given key must meet the rule (components/spec/apiKey.ts): a plain string before any resource is made, an
            // Output once it is known (whatever waits for the key then fails with the same words).
            const valid = (k: string) => checked(() => { const e = apiKeyError(k); if (e) throw e; return k; });
            if (typeof args.apiKey === "string") valid(args.apiKey);
            const given = pulumi.output(args.apiKey).apply(valid);
            this.apiKey = pulumi.secret(given);
            wiring.set(keyName, undefined, secretDigest(given, digestSalt(keyName)));
        }
        const key = this.apiKey;
        // Ray backend: the cluster's Ray token, generated; a new one restarts Ray (its digest, as the key's).
        const rayToken = plan.backend === "ray" ? wiring.generatedSecret(names.of("ray-token"), parent) : undefined;

        // 1. Every host checked, in parallel.
        this.hosts = plan.hosts.map(h => new SparkHost(names.host(h.host.name), { plan: h, names, wiring }, parent));
        wiring.gate(names.of("preflights"), parent);
        // 2. The same image on every host.
        this.image = new ClusterImage(names.of("images"), { plan, names, wiring, hosts: this.hosts }, parent);
        // 3. One idle container per host, built with its replica (after its drain, with several: resources.ts).
        const containers: VllmContainer[] = [];
        const containersOf = (rp: ClusterPlan) => rp.hosts.map(h => {
            const i = plan.hosts.findIndex(p => p.host.name === h.host.name);
            return (containers[i] = new VllmContainer(names.host(h.host.name), { plan: h, names, wiring, host: this.hosts[i], image: this.image, index: i }, parent));
        });
        const keyLine = stdinLine(key);
        const frontProxy = () => new EndpointProxy(names.of("endpoint-proxy"), { plan, names, wiring, head: this.hosts[0], keyLine, given: args.tls }, parent);
        // Several replicas (components/plan/replicas.ts): the front proxy first, then each replica's deployment, in the
        // order resources.ts plans them; each other replica's own proxy on its head comes with it.
        const replicaPlans = plan.replicas ?? [plan];
        const front = plan.replicas ? frontProxy() : undefined;
        const hostIndex = (host: string) => plan.hosts.findIndex(h => h.host.name === host);
        this.replicas = replicaPlans.map((rp, k) => {
            const rn = plan.replicas ? resourceNames(name, k + 1) : names;
            const proxyHere = !plan.replicas ? frontProxy : k === 0 ? () => undefined
                : () => new EndpointProxy(rn.of("endpoint-proxy"), { plan: rp, names: rn, wiring, head: this.hosts[hostIndex(rp.head.host.name)], keyLine }, parent);
            return this.replica(rp, rn, wiring, { containers: () => containersOf(rp),
                rayToken, apiKey: key, hfToken: args.hfToken, proxyHere, rolling: plan.rollouts !== undefined }, parent);
        });
        this.containers = containers;
        ({ weights: this.weights, compat: this.compat, fabricCheck: this.fabricCheck, ray: this.ray, model: this.model } = this.replicas[0]);
        this.proxy = front ?? this.replicas[0].proxy!;
        this.endpointCertificate = this.proxy.certificate;
        this.endpointCertificateSha256 = this.proxy.certificateSha256;

        // Once every replica's probe has proven it.
        const proven = pulumi.all(this.replicas.map(r => r.model.probe.stdout));
        this.endpoint = proven.apply(() => plan.endpoint);
        this.modelName = proven.apply(() => plan.modelName);
        // Preflight facts, the free memory each host's gate measured before vLLM started, and what was left once it loaded.
        const memory = this.replicas.flatMap(r => r.model.memory), memoryAfterLoad = this.replicas.flatMap(r => r.model.memoryAfterLoad);
        this.hostFacts = pulumi.all([pulumi.all(this.hosts.map(h => h.facts)), pulumi.all(memory), pulumi.all(memoryAfterLoad)]).apply(([facts, memory, afterLoad]) =>
            Object.fromEntries(plan.hosts.map((h, i) => [h.host.name, { ...facts[i], memory: memory[i] as Record<string, unknown>, memoryAfterLoad: afterLoad[i] as Record<string, unknown> }])) as Record<string, Record<string, unknown>>);
        this.fabric = this.fabricCheck ? this.fabricCheck.result : pulumi.output(undefined);
        this.serving = this.model.serving;
        // Several replicas: each one's hosts, head, fabric verdict and serving figures.
        this.replicaOutputs = plan.replicas ? pulumi.all(this.replicas.map((r, k) => pulumi.all([
            r.fabricCheck ? r.fabricCheck.result : pulumi.output(undefined), r.model.serving]).apply(([fabric, serving]) => ({
            replica: k + 1, hosts: replicaPlans[k].hosts.map(h => h.host.name), head: replicaPlans[k].head.host.name,
            ...(fabric ? { fabric } : {}), ...(serving ? { serving } : {}) })))) : pulumi.output(undefined);
        this.registerOutputs({ endpoint: this.endpoint, modelName: this.modelName, apiKey: this.apiKey, hosts: this.hostFacts, fabric: this.fabric,
            endpointCertificate: this.endpointCertificate, endpointCertificateSha256: this.endpointCertificateSha256, serving: this.serving, replicas: this.replicaOutputs });
    }

    /**
     * One replica's deployment, built in the order resources.ts plans it: its containers' gate, weights, compat check,
     * fabric check, Ray, its proxy where it has one, then memory gates, vLLM and its probe.
     */
    private replica(plan: ClusterPlan, names: ResourceNames, wiring: Wiring, args: ReplicaArgs, parent: pulumi.ComponentResourceOptions): ReplicaParts {
        // 3a. Several replicas: out of the front proxy before anything of it stops (components/plan/rollout.ts); its containers follow.
        const drain = args.rolling ? wiring.command(names.of("drain"), parent) : undefined;
        drain?.stdout.apply(out => {
            const d = lastJsonLine(out) as { replica: number; drainedAt: number; drainedUntil: number; stillRunning: number };
            const waited = (d.drainedUntil - d.drainedAt).toFixed(1);
            if (d.stillRunning > 0) pulumi.log.warn(`replica ${d.replica}: ${d.stillRunning} requests still running after the drain's ${waited} s (spark-vllm:rollout.drainSeconds); they end when it relaunches`, drain);
            else pulumi.log.info(`replica ${d.replica} out of the endpoint; its running requests finished within ${waited} s`, drain);
        });
        const containers = args.containers();
        // Its value, which the fabric ranks (and head-then-copy's weights) carry in their triggers, is one digest of every
        // container's id: the ids themselves were N per follower (issue 17).
        wiring.gate(names.of("containers"), parent, digest(pulumi.all(containers.map(c => c.container.id)).apply(ids => ids.join(","))));
        // 4. The same weights on every host.
        const weights = new ModelWeights(names.of("weights"), { plan, names, wiring, hfToken: args.hfToken }, parent);
        // 5. Does the image's vLLM know the model? Seconds, before anything launches. Its warnings (a Ray without token
        // authentication) are pulumi warnings, so `pulumi up` shows them.
        const compat = wiring.command(names.of("compat"), parent);
        compat.stdout.apply(out => lastLineWarnings(out).forEach(w => pulumi.log.warn(w, compat)));
        // 6. Two or more hosts: an NCCL all-reduce across them proves the fabric before anything launches.
        const fabricCheck = plan.hosts.some(h => h.fabricRank) ? new FabricCheck(names.of("fabric"), { plan, names, wiring }, parent) : undefined;
        // 7. Ray backend: head, workers, every node joined.
        const ray = plan.backend === "ray" ? new RayCluster(names.of("ray"), { plan, names, wiring, token: args.rayToken! }, parent) : undefined;
        // 7b. The proxy in front of vLLM on the head: the key on stdin, never in a command line.
        const proxy = args.proxyHere();
        // 8. Memory on every host, vLLM, and a completion proven to work (through the proxy).
        const model = new ModelEndpoint(names.of("model"), { plan, names, wiring, apiKey: args.apiKey }, parent);
        // 10. Several replicas: back into the front proxy once proven.
        const undrain = args.rolling ? wiring.command(names.of("undrain"), parent) : undefined;
        return { weights, compat, fabricCheck, ray, proxy, model, drain, undrain };
    }
}

/** What one replica's deployment is built from, besides its plan and names. */
interface ReplicaArgs {
    /** Builds the replica's containers (after its drain). */
    containers: () => VllmContainer[];
    rayToken?: pulumi.Output<string>;
    apiKey: pulumi.Output<string>;
    hfToken?: pulumi.Input<string>;
    /** Builds the proxy this replica brings (the one proxy with one replica; its own with several, but the first's). */
    proxyHere: () => EndpointProxy | undefined;
    /** Several replicas: the replica's drain and undrain on the front's host (a rolling update). */
    rolling: boolean;
}

/** One replica's parts. */
export interface ReplicaParts {
    weights: ModelWeights;
    compat: remote.Command;
    fabricCheck?: FabricCheck;
    ray?: RayCluster;
    proxy?: EndpointProxy;
    model: ModelEndpoint;
    /** Several replicas: the commands that take it out of the front proxy and put it back (components/plan/rollout.ts). */
    drain?: remote.Command;
    undrain?: remote.Command;
}

