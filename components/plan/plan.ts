// spec → plan: every container, environment, command line and probe as plain data (clusterPlan.ts), from each host's
// container (containers.ts) and the commands that run on the hosts (hostCommands.ts).
// Pure and deterministic: no Pulumi, no clock, no randomness. Components consume it.
import { ClusterSpec } from "../spec/spec";
import { toolsProgram } from "./toolsProgram";
import { containerName } from "./naming";
import { proxyConfig, proxyContainer, proxyTls } from "./proxyPlan";
import { Owner, proxyOwnerLabels } from "./ownership";
import { ClusterPlan, HostPlan, Role } from "./clusterPlan";
import { containerPlan } from "./containers";
import { REPLICA_LABEL, replicaGroups } from "./replicas";
import { replicaRollouts } from "./rollout";
import {
    compat, endpointProbe, endpointScheme, fabricRank, imageCheck, imageFromHead, memoryAfterLoad, memoryGate, packTools, preflight, rayLaunch, rayProbe,
    rayStartArgv, servingProof, toolsInstall, vllmFiles, vllmLaunch, vllmServeArgv, weights, weightsSource,
} from "./hostCommands";

/** Builds the whole plan. Deterministic: the same spec gives the same plan, byte for byte. */
export function planCluster(spec: ClusterSpec, toolsContent: string = toolsProgram(), opts: { hfToken?: boolean; owner?: Owner } = {}): ClusterPlan {
    // Several replicas: each group planned as one cluster over its own hosts (its head is its first host).
    if (spec.replicas > 1) {
        const groups = replicaGroups(spec);
        const servers = [`127.0.0.1:${spec.vllm.internalPort}`, ...groups.slice(1).map(o => `${o.hosts[0].fabric.address}:${spec.vllm.port}`)];
        const replicas = groups.map(g => {
            // The front (the first replica's proxy) balances over its loopback vLLM and every other replica's proxy, which
            // listens on its head's fabric address (and loopback, for its probe), plain HTTP: TLS ends at the front.
            const front = g.index === 1;
            const own = front ? g.spec : { ...g.spec, endpoint: { ...g.spec.endpoint, tls: "none" as const } };
            const plan = planCluster(own, toolsContent, opts);
            const shape = front ? { replicas: servers }
                // The front brings it every client's requests from its own fabric address: not counted per client.
                : { listen: [`127.0.0.1:${spec.vllm.port}`, `${g.hosts[0].fabric.address}:${spec.vllm.port}`], unlimited: [spec.hosts[0].fabric.address] };
            // Each container says which replica it serves (the policies judge each replica's parallelism and memory by it).
            const hosts = plan.hosts.map(h => ({ ...h, container: { ...h.container, labels: [...h.container.labels, [REPLICA_LABEL, String(g.index)] as [string, string]] } }));
            return { ...plan, hosts, head: hosts[0], proxy: { ...plan.proxy, config: { ...proxyConfig(own, shape), stdin: "apiKey" as const } },
                ...(front ? { endpointProbe: endpointProbe(own, opts.owner, { vllmItself: true }) } : {}) };
        });
        return { ...replicas[0], spec, hosts: replicas.flatMap(r => r.hosts), replicas, rollouts: replicaRollouts(spec, servers) };
    }
    // The stack this cluster belongs to: labels on its containers, the env of its processes, the hosts' ownership check.
    const owner = opts.owner;
    const headSpec = spec.hosts[0];
    const packedTools = packTools(toolsContent);
    const hosts: HostPlan[] = spec.hosts.map((host, i) => {
        const role: Role = i === 0 ? "head" : "worker";
        const ray = spec.vllm.backend === "ray" ? rayStartArgv(spec, host, role, headSpec) : undefined;
        const headless = spec.vllm.backend === "mp" && i > 0 ? vllmServeArgv(spec, i) : undefined;
        return {
            host,
            role,
            container: containerPlan(spec, host, role, owner),
            tools: toolsInstall(spec, host, toolsContent, packedTools, owner),
            preflight: preflight(spec, host, owner),
            weights: weights(spec, host, opts.hfToken ?? false),
            imageFromHead: imageFromHead(spec, host),
            imageCheck: imageCheck(spec, host, owner),
            ...(ray ? { rayStartArgv: ray, rayLaunch: rayLaunch(spec, containerName(host.name), ray, role) } : {}),
            ...(headless ? { vllmServeArgv: headless, vllmLaunch: vllmLaunch(spec, host, headless, false) } : {}),
            memoryGate: memoryGate(spec, host, owner),
            memoryAfterLoad: memoryAfterLoad(spec, host),
            ...(spec.hosts.length > 1 && spec.probes.fabric ? { fabricRank: fabricRank(spec, host, i) } : {}),
        };
    });
    const head = hosts[0];

    const { log: vllmLog, pidFile: vllmPidFile } = vllmFiles(spec);
    const serveArgv = vllmServeArgv(spec);

    const scheme = endpointScheme(spec);
    const servingProofPlan = servingProof(spec);

    return {
        spec,
        hosts,
        head,
        rayProbe: rayProbe(spec),
        compat: compat(spec),
        weightsSource: weightsSource(spec),
        backend: spec.vllm.backend,
        vllmServeArgv: serveArgv,
        vllmLaunch: vllmLaunch(spec, headSpec, serveArgv, true),
        endpointProbe: endpointProbe(spec, owner),
        ...(servingProofPlan ? { servingProof: servingProofPlan } : {}),
        proxy: {
            image: spec.endpoint.image,
            platform: headSpec.platform,
            ...(spec.endpoint.tls === "generated" ? { tls: proxyTls(spec) } : {}),
            ...(spec.endpoint.tls === "given" ? { tls: { ...proxyTls(spec), stdin: "tlsFiles" as const } } : {}),
            config: { ...proxyConfig(spec), stdin: "apiKey" },
            container: withOwnerLabels(proxyContainer(spec), owner ? proxyOwnerLabels(owner, spec) : []),
        },
        endpoint: `${scheme}://${headSpec.ssh.host}:${spec.vllm.port}/v1`,
        modelName: spec.model.servedName,
        vllmLog,
        vllmPidFile,
    };
}

/** The proxy's container with the owner's labels after its own. */
function withOwnerLabels<C extends { labels: Array<{ label: string; value: string }> }>(c: C, labels: Array<[string, string]>): C {
    return { ...c, labels: [...c.labels, ...labels.map(([label, value]) => ({ label, value }))] };
}
