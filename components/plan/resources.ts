// Every provider resource the program registers, as plain data: its name (from naming.ts), its
// provider-ready inputs (from the plan) and its wiring (what it waits for, what replaces it). Pure.
// This is the one place inputs and wiring are decided: the components build their resources from these
// entries (components/wiring.ts resolves the names), and the offline view (`spark-vllm diff`, the
// policies' offline verdicts) reads the same entries.
import * as crypto from "crypto";
import { ClusterPlan, CommandPlan, ContainerPlan, ReplicaRollout } from "./clusterPlan";
import { HostSpec } from "../spec/spec";
import { SshConnection, dockerSshOpts, sshConnection, sshTarget } from "./connection";
import { CLUSTER, ResourceNames, resourceNames } from "./naming";

export { CLUSTER };
export const COMMAND = "command:remote:Command";
export const CONTAINER = "docker:index/container:Container";
export const IMAGE = "docker:index/remoteImage:RemoteImage";
export const DOCKER_PROVIDER = "pulumi:providers:docker";
export const PASSWORD = "random:index/randomPassword:RandomPassword";
/**
 * Not a resource: a point every host contributes to (all preflights passed, the agreed image, the agreed
 * weights) or a value that is not ours (an API key the caller passes). It is wired like a resource so that
 * what follows it waits for it (its `dependsOn`) and is replaced with it (its `replacedBy`), but nothing is
 * registered for it. A gate is where the edges from every host meet: N edges in, one edge out per follower,
 * so no follower's own lists grow with the number of hosts (tests/unit/scale-shape.test.ts).
 */
export const GATE = "spark-vllm:gate";

export interface CommandInputs {
    /** Where it runs (the component adds the private key, when one is configured). */
    connection: SshConnection;
    create: string;
    delete?: string;
    /** What an update runs instead of `create` again. */
    update?: string;
    /** Plain stdin (the helper program's text); a secret's line is `secretStdin`. */
    stdin?: string;
    /** Its own part; the component appends what `replacedBy` names. */
    triggers: unknown[];
}

export interface InputsByType {
    [COMMAND]: CommandInputs;
    [CONTAINER]: ReturnType<typeof containerInputs> | ProxyContainerInputs;
    [IMAGE]: { name: string; platform: string; keepLocally: boolean };
    [DOCKER_PROVIDER]: { host: string; sshOpts: string[]; disableDockerDaemonCheck: boolean };
    [PASSWORD]: { length: number; special: boolean };
    [GATE]: Record<string, never>;
}

export type PlannedType = keyof InputsByType;

interface PlannedCommon {
    name: string;
    /** The host whose Docker provider (docker types) or SSH connection (commands) it uses. */
    host?: string;
    /** Names that must have been created (or updated) before this one starts. */
    dependsOn: string[];
    /** Names whose replacement replaces this one: in its triggers (commands), or in its image input (containers). */
    replacedBy: string[];
    /** The secret piped to this command's stdin; never plain data. */
    secretStdin?: CommandPlan["stdin"];
    /** A gate whose value is this secret's digest (the component sets it): a new secret replaces what follows it. */
    secretDigest?: CommandPlan["stdin"];
    /** Delete the old copy before creating the new one (it holds GPUs, ports or a process). */
    deleteBeforeReplace?: boolean;
}

/**
 * One planned resource. `inputs` are provider-ready, as plain data: a command's `triggers` hold only its
 * own part (the ids or values of `replacedBy` are appended by the component); a container's `image` is
 * the repo digest the pull reports (the component passes the pull's own output, gated on every host's
 * agreement).
 */
export type PlannedResource<T extends PlannedType = PlannedType> = { [K in T]: PlannedCommon & { type: K; inputs: InputsByType[K] } }[T];

/** How the caller builds the cluster, where that changes the resources (every field has a default). */
export interface PlannedResourcesOptions {
    /** The SparkCluster's name; default "spark" (index.ts). */
    cluster?: string;
    /** The API key is a generated RandomPassword (default) or given by the caller (a gate). */
    apiKey?: "generated" | "given";
    /** RemoteImage keepLocally; default true. */
    keepImage?: boolean;
}

const sha256 = (text: string) => crypto.createHash("sha256").update(text).digest("hex");
/** The endpoint proxy's docker.Container inputs (components/plan/proxyPlan.ts), with the pull's repo digest as image. */
export type ProxyContainerInputs = ClusterPlan["proxy"]["container"] & { image: string };

/** The repo digest a pull of the reference reports: repository@digest. */
export const repoDigest = (reference: string) => reference.replace(/:[^/@]*@/, "@");

/** docker.Container inputs for a container plan (the `image` is the repo digest; see PlannedResource.inputs). */
export function containerInputs(c: ContainerPlan, image: string) {
    return {
        name: c.name,
        image,
        entrypoints: c.entrypoint,
        command: c.command,
        envs: c.env.map(([k, v]) => `${k}=${v}`),
        networkMode: c.networkMode,
        ipcMode: c.ipcMode,
        gpus: c.gpus,
        init: c.init,
        shmSize: c.shmSizeMb,
        ulimits: c.ulimits,
        capabilities: { adds: c.capabilities },
        devices: c.devices,
        mounts: c.mounts.map(m => ({ type: "bind", source: m.hostPath, target: m.containerPath, ...(m.readOnly ? { readOnly: true } : {}) })),
        labels: c.labels.map(([label, value]) => ({ label, value })),
        // Started again when the host's dockerd starts (a reboot), unless someone stopped it; its main process, the
        // supervisor, then relaunches Ray and vLLM (components/plan/launches.ts). Updates in place (DESIGN.md, "Facts learned
        // from real sources": init, restart, mustRun, destroyGraceSeconds update in place).
        restart: "unless-stopped",
        mustRun: true,
        // Ray and vLLM run under docker exec; stop them quickly when the container goes.
        destroyGraceSeconds: 30,
    };
}

/** Every resource the program registers for a plan, in the order the components create them. */
export function plannedResources(plan: ClusterPlan, opts: PlannedResourcesOptions = {}): PlannedResource[] {
    const n: ResourceNames = resourceNames(opts.cluster);
    const out: PlannedResource[] = [];
    const add = <T extends PlannedType>(r: Omit<PlannedResource<T>, "dependsOn" | "replacedBy"> & Partial<PlannedCommon>) =>
        out.push({ dependsOn: [], replacedBy: [], ...r } as PlannedResource);
    type CommandWiring = { dependsOn?: string[]; replacedBy?: string[]; triggers?: unknown[]; stdin?: string; deleteBeforeReplace?: boolean };
    const command = (name: string, host: HostSpec, c: CommandPlan, wiring: CommandWiring = {}) =>
        add({
            name, type: COMMAND, host: host.name,
            inputs: {
                connection: sshConnection(host),
                create: c.create,
                ...(c.delete ? { delete: c.delete } : {}),
                ...(c.update ? { update: c.update } : {}),
                ...(wiring.stdin !== undefined ? { stdin: wiring.stdin } : {}),
                // A pinned key changes the connection, which @pulumi/command answers with an update that runs `create`
                // again (v1.2.1 commandController.go Update) beside a running launch: in the triggers, it replaces instead.
                triggers: [c.create, ...(wiring.triggers ?? []), ...(host.ssh.hostKey !== undefined ? [host.ssh.hostKey] : [])],
            },
            dependsOn: wiring.dependsOn ?? [], replacedBy: wiring.replacedBy ?? [],
            ...(c.stdin ? { secretStdin: c.stdin } : {}),
            // Anything with a delete stops a process or removes a file: the old one goes first.
            ...(c.delete || wiring.deleteBeforeReplace ? { deleteBeforeReplace: true } : {}),
        });
    // A launch also carries its SSH target: @pulumi/command only updates on a connection change, which
    // would run create beside the process already running (components/plan/connection.ts sshTarget).
    const launch = (host: HostSpec) => [sshTarget(host)];

    const head = plan.head.host;
    const hosts = plan.hosts;
    const replicas = plan.replicas ?? [plan];
    // Several replicas: the front proxy's host (the first) and its container, where each replica's drain and undrain run.
    const front = head, frontProxy = n.of("proxy");
    const preflights = hosts.map(h => n.host(h.host.name, "preflight"));

    if (opts.apiKey === "given") add({ name: n.of("api-key"), type: GATE, inputs: {}, secretDigest: "apiKey" });
    else add({ name: n.of("api-key"), type: PASSWORD, inputs: { length: 40, special: false } });
    // Ray backend: the cluster's Ray token (components/plan/rayAuth.ts), only ever on the Ray launches' stdin.
    if (plan.backend === "ray") add({ name: n.of("ray-token"), type: PASSWORD, inputs: { length: 40, special: false } });

    // 1. Hosts: Docker provider, helper program, facts. Checked in parallel; nothing else starts before all pass.
    for (const h of hosts) {
        const name = h.host.name, ssh = h.host.ssh;
        add({ name: n.host(name, "docker"), type: DOCKER_PROVIDER, host: name, inputs: {
            host: `ssh://${ssh.user}@${ssh.host}:${ssh.port}`, sshOpts: dockerSshOpts(h.host), disableDockerDaemonCheck: true } });
        // The program's digest, not its text, in the triggers: the same replacement, without a second copy of the
        // program in every host's registration and state.
        command(n.host(name, "tools"), h.host, h.tools, { stdin: h.tools.packed, triggers: [sha256(h.tools.content)] });
        command(n.host(name, "preflight"), h.host, h.preflight, { dependsOn: [n.host(name, "tools")] });
    }

    // Every preflight passes before any image is pulled: one edge per host into the gate, one from it per image.
    add({ name: n.of("preflights"), type: GATE, inputs: {}, dependsOn: preflights });

    // 2. One image on every host: pulled (or copied from the head), then compared across hosts.
    const images = hosts.map(h => n.host(h.host.name, "image"));
    hosts.forEach((h, i) => {
        const after = [n.host(h.host.name, "preflight"), n.of("preflights")];
        if (h.imageFromHead) command(images[i], head, h.imageFromHead, { dependsOn: after });
        else add({ name: images[i], type: IMAGE, host: h.host.name, dependsOn: after,
            inputs: { name: h.container.image, platform: h.container.platform, keepLocally: opts.keepImage ?? true } });
    });
    add({ name: n.of("images"), type: GATE, inputs: {}, dependsOn: images, replacedBy: images });

    // 2b. The image proven on every host (a throw-away container: hostCommands.ts imageCheck) before any container is
    // created or replaced: a container registers only once every proof passed, and the real engine stops what depends
    // on a replaced container only when that container registers (pulumi/pulumi pkg/resource/deploy/step_generator.go:
    // a delete-before-replace deletes its dependents in the replacement's own steps). So a refused image fails `up` here,
    // with the old containers, vLLM and the endpoint untouched (issue 46). Again for every new image (the gate's digest).
    const imageChecks = hosts.map(h => n.host(h.host.name, "image-check"));
    hosts.forEach((h, i) => command(imageChecks[i], h.host, h.imageCheck, { dependsOn: [images[i], n.of("images")], replacedBy: [n.of("images")] }));
    add({ name: n.of("image-checks"), type: GATE, inputs: {}, dependsOn: imageChecks });

    // The endpoint proxy goes before the replicas with several (every replica's probe and drain follows it); with one, where it always was.
    // Several replicas: the first's proxy is the front (named as the one proxy is); each other replica's own proxy on
    // its head comes with that replica, and its probe goes through it.
    const single = replicas.length === 1;
    if (!single) endpointProxy(plan, n);
    replicas.forEach((replica, k) => {
        const rn = single ? n : resourceNames(opts.cluster, k + 1);
        const proxyNames = k === 0 ? n : rn;
        const rollout = plan.rollouts?.[k] && { ...plan.rollouts[k], after: k > 0 ? resourceNames(opts.cluster, k).of("undrain") : undefined };
        replicaResources(replica, rn, proxyNames, single ? () => endpointProxy(plan, n) : k === 0 ? () => {} : () => endpointProxy(replica, rn), rollout);
    });
    return out;

    /**
     * One replica's deployment: its weights, compat and fabric checks, Ray, memory gates, vLLM, probe and proof. With a
     * rollout (several replicas), its relaunch goes between its drain and its undrain on the front's host (rollout.ts),
     * and its drain after the previous replica's undrain (`after`).
     */
    function replicaResources(plan: ClusterPlan, n: ResourceNames, proxyNames: ResourceNames, proxyHere: () => void,
        rollout?: ReplicaRollout & { after?: string }): void {
        const head = plan.head.host;
        const hosts = plan.hosts;
        const workers = hosts.slice(1);
        const containers = hosts.map(h => n.host(h.host.name, "container"));
        // What every vLLM launch follows: Ray formed (ray), else the head's container (mp, one host).
        const formed = plan.backend === "ray" ? n.of("ray-probe") : containers[0];

        // 3a. Several replicas: this replica out of the front proxy before anything of it stops: before its containers are
        // replaced (a new image or container setting) and before it relaunches. Whenever one of them would: the digest of
        // what its containers and launches are made from (their planned inputs, launch texts, SSH targets), a new image
        // (the images gate), Ray's token, the key. Only what comes before its containers: they follow it.
        const drain = n.of("drain");
        if (rollout) command(drain, front, rollout.drain, {
            triggers: [sha256(JSON.stringify(hosts.map(h => [
                containerInputs(h.container, h.container.image), h.vllmLaunch?.create ?? null, h.rayLaunch?.create ?? null, sshTarget(h.host), h.host.ssh.hostKey ?? null,
            ]).concat([plan.vllmLaunch.create])))],
            dependsOn: [frontProxy, ...(rollout.after ? [rollout.after] : [])],
            replacedBy: [n.of("images"), n.of("api-key"), ...(plan.backend === "ray" ? [n.of("ray-token")] : [])] });

        // 3. Containers, once every host has passed and holds the agreed, proven image (through the gates). The other
        // hosts' containers wait for the head's: replaced together (a new image), the real engine deletes the launches they
        // share (vLLM, the Ray head) in the chain of the first to register only (pulumi/pulumi step_generator.go,
        // sg.pendingDeletes), so a worker's container registering first stopped the head's container while vLLM's delete
        // still ran in it (`Process exited with status 137`, issue 37). Registering the head's first, its chain stops
        // every launch that depends on it before any container goes.
        // Several replicas: each replica's containers wait for its drain, so a new image rolls replica by replica as a
        // relaunch does (issue 46): replica k's containers go only once replica k-1 is proven and back in the front.
        hosts.forEach((h, i) => {
            add({ name: containers[i], type: CONTAINER, host: h.host.name, deleteBeforeReplace: true,
                inputs: containerInputs(h.container, h.imageFromHead ? h.container.image : repoDigest(h.container.image)),
                dependsOn: [n.host(h.host.name, "image"), n.of("images"), n.of("image-checks"), ...(i > 0 ? [containers[0]] : []), ...(rollout ? [drain] : [])],
                replacedBy: [n.of("images")] });
        });
        add({ name: n.of("containers"), type: GATE, inputs: {}, dependsOn: containers, replacedBy: containers });

        // 4. Weights: the head's first, then the workers'; all must agree. head-then-copy: the head's server runs in the
        // foreground of its command beside the workers' copies (both start once the head holds the weights; a worker must
        // not wait on it, or neither ends) and stops when each has reported. So the server and every worker's copy re-run
        // together: the same changes replace them (the head's weights, any worker's container or copy command, the token).
        const container = (h: HostSpec) => n.host(h.name, "container");
        const weights = (h: HostSpec) => n.host(h.name, "weights");
        command(weights(head), head, plan.head.weights, { dependsOn: [container(head)], replacedBy: [container(head)] });
        const copy = plan.weightsSource;
        if (copy) {
            add({ name: n.of("weights-token"), type: PASSWORD, inputs: { length: 40, special: false } });
            // Through the containers gate and one digest of every copy's text, not a list per host (issue 17: linear).
            const together = {
                replacedBy: [weights(head), n.of("weights-token"), n.of("containers")],
                triggers: [sha256(workers.map(w => w.weights.create).join("\n"))],
            };
            command(n.of("weights-source"), head, copy, { dependsOn: [weights(head)], ...together });
            for (const w of workers) command(weights(w.host), w.host, w.weights, { dependsOn: [container(w.host), weights(head)], ...together });
        } else for (const w of workers)
            command(weights(w.host), w.host, w.weights, { dependsOn: [container(w.host)], replacedBy: [container(w.host)] });
        add({ name: n.of("weights"), type: GATE, inputs: {}, dependsOn: hosts.map(h => weights(h.host)), replacedBy: hosts.map(h => weights(h.host)) });
        const copied = copy ? [n.of("weights-source")] : [];

        // 5. The image's vLLM against the model, in seconds, before anything launches.
        command(n.of("compat"), head, plan.compat, {
            dependsOn: [container(head), ...hosts.map(h => weights(h.host)), ...copied], replacedBy: [container(head), n.of("weights")] });

        // 6. The fabric, proven before anything launches: one all-reduce rank per host, all at once, after the compat
        // check (an image that cannot run here gets its clear verdict there, not a CUDA error from the all-reduce). Every rank follows
        // every container (through the gate), so a replaced container re-runs all of them together.
        const fabric = hosts.filter(h => h.fabricRank).map(h => {
            const name = n.host(h.host.name, "fabric");
            command(name, h.host, h.fabricRank!, { dependsOn: [n.host(h.host.name, "container"), n.of("compat")], replacedBy: [n.of("containers")] });
            return name;
        });

        // 7. Ray backend: head, workers, then the probe that waits for every node and GPU.
        const rays = plan.backend !== "ray" ? [] : [n.of("ray-head"), ...workers.map(w => n.host(w.host.name, "ray"))];
        if (plan.backend === "ray") {
            command(n.of("ray-head"), head, plan.head.rayLaunch!, {
                triggers: launch(head), dependsOn: [container(head), n.of("compat"), ...fabric], replacedBy: [container(head), n.of("ray-token")] });
            for (const w of workers)
                command(n.host(w.host.name, "ray"), w.host, w.rayLaunch!, {
                    triggers: launch(w.host), dependsOn: [container(w.host), n.of("ray-head")], replacedBy: [container(w.host), n.of("ray-head"), n.of("ray-token")] });
            command(n.of("ray-probe"), head, plan.rayProbe!, { dependsOn: rays, replacedBy: rays });
    }

    proxyHere();

    // 8. vLLM: on every host, drop the page cache and check free memory; then the launches; then the probe.
    // A gate re-runs whenever vLLM is launched again (it follows what the launches follow, and their text's digest is
    // in its triggers), and goes before it: replacing it first stops vLLM (deleteBeforeReplace), so it never measures
    // a running vLLM's memory. The digest, not the text: the head's launch names every Ray node (its gate), so its
    // text in every host's triggers was N copies of a list of N (issue 17).
    // The other hosts' gates wait for the head's: when several gates are replaced, the real engine deletes the
    // launches they share in the chain of the first to register only ("If we already deleted this resource due to some
    // other DBR, don't do it again", pulumi/pulumi pkg/resource/deploy/step_generator.go, sg.pendingDeletes), so a
    // second host's gate measured while the old vLLM was still stopping (issue 37; tests/e2e/cluster.test.ts). The
    // head's gate registers first and its chain stops vLLM before it is created again; what the head's gate waits
    // for (compat, Ray formed), the others wait for through it.
    const memory = hosts.map(h => n.host(h.host.name, "memory"));
    hosts.forEach((h, i) => command(memory[i], h.host, h.memoryGate, {
        triggers: [plan.vllmLaunch.create, ...(h.vllmLaunch ? [h.vllmLaunch.create] : [])].map(sha256),
        dependsOn: [container(h.host), ...(h.fabricRank ? [n.host(h.host.name, "fabric")] : []),
            ...(i === 0 ? [n.of("compat"), ...(plan.backend === "ray" ? [formed] : []), ...(rollout ? [drain] : [])] : [memory[0]])],
        replacedBy: [...new Set([container(h.host), formed]), n.of("api-key")], deleteBeforeReplace: true }));
    command(n.of("vllm-launch"), head, plan.vllmLaunch, {
        triggers: launch(head), dependsOn: [formed, n.of("compat"), ...memory], replacedBy: [formed, n.of("api-key"), ...memory] });
    // mp: every worker's `vllm serve --headless` joins the head's rendezvous.
    const headless = workers.filter(w => w.vllmLaunch).map(w => {
        const name = n.host(w.host.name, "vllm");
        command(name, w.host, w.vllmLaunch!, {
            triggers: launch(w.host), dependsOn: [container(w.host), n.of("vllm-launch")], replacedBy: [container(w.host), n.of("vllm-launch")] });
        return name;
    });
    const launches = [n.of("vllm-launch"), ...headless];
    // Again after the proxy's configuration or certificate changed (it restarted the proxy): the probe pins the served certificate.
    command(n.of("endpoint-probe"), head, plan.endpointProbe, { dependsOn: [...launches, proxyNames.of("proxy")], replacedBy: [...launches, proxyNames.of("proxy"), proxyNames.of("proxy-conf")] });
    // Free memory on every host with vLLM loaded: again whenever the endpoint is proven again.
    hosts.forEach(h => command(n.host(h.host.name, "loaded"), h.host, h.memoryAfterLoad, {
        dependsOn: [n.of("endpoint-probe")], replacedBy: [n.of("endpoint-probe")] }));
    // 9. The serving proof: again whenever the endpoint is proven again (vLLM relaunched).
    if (plan.servingProof)
        command(n.of("serving-proof"), head, plan.servingProof, { dependsOn: [n.of("endpoint-probe")], replacedBy: [n.of("endpoint-probe")] });
    // 10. Several replicas: back into the front proxy once proven; the next replica's drain follows this.
    if (rollout) command(n.of("undrain"), front, rollout.undrain, {
        dependsOn: [n.of("endpoint-probe"), ...hosts.map(h => n.host(h.host.name, "loaded")), ...(plan.servingProof ? [n.of("serving-proof")] : [])],
        replacedBy: [drain, n.of("endpoint-probe")] });
    }

    /**
     * 7b. The endpoint proxy on the head (components/plan/proxyPlan.ts): its image, the generated certificate (tls
     * "generated"), the configuration with the key (from stdin; re-written and the proxy restarted when the key
     * changes), then nginx. It needs nothing of vLLM: it answers 502 until vLLM listens.
     */
    function endpointProxy(plan: ClusterPlan, n: ResourceNames): void {
        const proxy = plan.proxy;
        const head = plan.head.host;
        const headTools = n.host(head.name, "tools");
        add({ name: n.of("proxy-pull"), type: IMAGE, host: head.name, dependsOn: [n.host(head.name, "preflight"), n.of("preflights")],
            inputs: { name: proxy.image, platform: proxy.platform, keepLocally: opts.keepImage ?? true } });
        const tls = proxy.tls ? n.of("proxy-tls") : undefined;
        // tls "given": the certificate's digest (a gate, as a given API key's) replaces its files when it is rotated.
        const given = proxy.tls?.stdin === "tlsFiles";
        if (given) add({ name: n.of("proxy-cert"), type: GATE, inputs: {}, secretDigest: "tlsFiles" });
        if (proxy.tls) command(n.of("proxy-tls"), head, proxy.tls, { dependsOn: [headTools, n.of("proxy-pull")], replacedBy: [n.of("proxy-pull"), ...(given ? [n.of("proxy-cert")] : [])] });
        command(n.of("proxy-conf"), head, proxy.config, {
            dependsOn: [headTools, ...(tls ? [tls] : [])], replacedBy: [n.of("api-key"), ...(tls ? [tls] : [])] });
        add({ name: n.of("proxy"), type: CONTAINER, host: head.name, deleteBeforeReplace: true,
            inputs: { ...proxy.container, image: repoDigest(proxy.image) },
            dependsOn: [n.of("proxy-pull"), n.of("proxy-conf")], replacedBy: [n.of("proxy-pull")] });
    }
}
