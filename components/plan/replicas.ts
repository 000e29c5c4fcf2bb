// spark-vllm:replicas: the hosts, in order, form N groups of equal size, each one complete deployment of the model (its
// own head: Ray head or mp master on its first host; its fabric check, memory gates, launch, probe and serving proof),
// behind the one endpoint on the first host. Each group is planned as today's cluster over its own hosts. Pure: no Pulumi.
import { ClusterSpec, HostSpec } from "../spec/spec";

/** The container label that names a host's replica (1-based), with several replicas only (policies/rules.ts reads it). */
export const REPLICA_LABEL = "spark-vllm.replica";

/** One replica: its place (1-based, the order a rolling update takes), its hosts, and the spec its deployment is planned from. */
export interface ReplicaGroup {
    index: number;
    hosts: HostSpec[];
    /** The whole spec with only this group's hosts, as one replica: its first host is its head. */
    spec: ClusterSpec;
}

/** The replica groups of a spec: hosts 1…k the first, and so on (parseSpec has checked that they divide evenly). */
export function replicaGroups(spec: ClusterSpec): ReplicaGroup[] {
    const size = spec.hosts.length / spec.replicas;
    return Array.from({ length: spec.replicas }, (_, k) => {
        const hosts = spec.hosts.slice(k * size, (k + 1) * size);
        return { index: k + 1, hosts, spec: { ...spec, hosts, replicas: 1 } };
    });
}

/** Which replica a host serves in (1-based). */
export function replicaOf(spec: ClusterSpec, host: string): number {
    return replicaGroups(spec).find(g => g.hosts.some(h => h.name === host))!.index;
}

/** What `spark-vllm plan` shows of one replica: its hosts, its head, and what leads it there. */
export interface ReplicaSummary {
    replica: number;
    hosts: string[];
    head: string;
    /** Ray: the Ray head on its first host; mp: vLLM's rendezvous (master) there; single: one host, plain vllm serve. */
    leader: string;
}

/** Each replica of a plan (one entry with one replica), from its own plan: the head and leader its launches name. */
export function replicaSummaries(plan: { spec: ClusterSpec; replicas?: ReadonlyArray<ReplicaPlanLike> } & ReplicaPlanLike): ReplicaSummary[] {
    return (plan.replicas ?? [plan]).map((r, k) => {
        const head = r.head.host;
        const leader = r.backend === "ray" ? `Ray head on ${head.name} (${head.fabric.address}:${r.spec.ray.port})`
            : r.backend === "mp" ? `mp master on ${head.name} (${head.fabric.address}:${r.spec.vllm.masterPort})`
            : `one host, ${head.name}: plain vllm serve`;
        return { replica: k + 1, hosts: r.hosts.map(h => h.host.name), head: head.name, leader };
    });
}

/** The parts of a ClusterPlan a summary reads (kept structural: clusterPlan.ts imports nothing from here). */
interface ReplicaPlanLike {
    spec: ClusterSpec;
    backend: ClusterSpec["vllm"]["backend"];
    head: { host: HostSpec };
    hosts: ReadonlyArray<{ host: HostSpec }>;
}

/**
 * What a change that relaunches vLLM does to the endpoint, in words. Several replicas relaunch one at a time
 * (components/plan/rollout.ts), but a new image or container setting replaces every container at once.
 */
export function rollingUpdateText(summaries: ReplicaSummary[], drainSeconds: number): string {
    if (summaries.length === 1)
        return "one replica: a new image is first proven on every host while the old version serves (a refused one changes nothing); a change " +
            "that relaunches vLLM (image, flags, weights) then interrupts serving until the model has loaded again and is proven";
    return `${summaries.length} replicas, one at a time in this order: the front proxy stops sending the replica new requests and gives ` +
        `its running ones up to ${drainSeconds} s (rollout.drainSeconds), then it relaunches and is proven (probe, serving proof) and ` +
        `taken back before the next; the others serve meanwhile. A failed relaunch stops the roll, the rest keep the old version. ` +
        `A new image is first proven on every host while the old version serves (a refused one changes nothing), then rolls the same ` +
        `way: each replica's containers are replaced while it is out of the proxy. Also on the first up: each replica's containers ` +
        `(and so its weights and launch) follow the one before, once it is proven`;
}
