// The one place resource and container names are made (as awsx's ec2/subnetNaming.ts is for subnets).
// Components, the offline view (`spark-vllm diff`, the policies' offline verdicts) and the tests all
// ask this module; nothing else templates a name. Pure: no Pulumi.
//
// Shape: cluster-wide resources are `<cluster>-<role>`, per-host ones `<cluster>-<host>-<role>`. No cluster
// role ends with a host role, so no host name can make two names equal (tests/unit/plan/naming.test.ts).

/** The name index.ts gives its SparkCluster; every resource name of the program starts with it. */
export const CLUSTER = "spark";

export const HOST_ROLES = ["docker", "tools", "preflight", "image", "image-check", "container", "weights", "fabric", "ray", "memory", "vllm", "loaded"] as const;
export type HostRole = (typeof HOST_ROLES)[number];

export const CLUSTER_ROLES = [
    "api-key", "ray-token", "preflights", "images", "image-checks", "containers", "fabric", "weights", "weights-source", "weights-token", "compat", "ray", "ray-head", "ray-probe", "model", "vllm-launch", "endpoint-probe", "serving-proof",
    // The endpoint proxy on the head: its component, its container, its image, its certificate, its configuration; and a
    // given certificate (endpoint.tls "given"), whose digest replaces the certificate's files when it changes.
    "endpoint-proxy", "proxy", "proxy-pull", "proxy-tls", "proxy-conf", "proxy-cert",
    // Several replicas: a rolling update takes each replica out of the front proxy, then puts it back (components/plan/rollout.ts).
    "drain", "undrain",
] as const;
export type ClusterRole = (typeof CLUSTER_ROLES)[number];

/**
 * The cluster roles each replica has its own of when `spark-vllm:replicas` is above 1 (components/plan/replicas.ts): what
 * one complete deployment of the model runs (its weights, compat check, fabric check, Ray, vLLM, probe and proof). The
 * rest stays one per cluster: the API key, the front proxy on the first host (and its certificate), the preflights' and
 * images' gates.
 */
export const REPLICA_ROLES: readonly ClusterRole[] = [
    "containers", "fabric", "weights", "weights-source", "weights-token", "compat", "ray", "ray-head", "ray-probe", "model", "vllm-launch", "endpoint-probe", "serving-proof",
    // Each replica but the first has its own proxy on its head (the first's is the front, named as the one proxy is).
    "endpoint-proxy", "proxy", "proxy-pull", "proxy-conf",
    "drain", "undrain",
];

/** Name makers for one cluster (see resourceNames). */
export interface ResourceNames {
    cluster: string;
    /** A per-host resource or component: `<cluster>-<host>-<role>`; the host's component itself is `<cluster>-<host>`. */
    host(host: string, role?: HostRole): string;
    /** A cluster-wide resource or component: `<cluster>-<role>`. */
    of(role: ClusterRole): string;
}

/**
 * The names of one SparkCluster's resources; `cluster` defaults to "spark", the name index.ts gives it. `replica`
 * (1-based), with several replicas only: a REPLICA_ROLES role is `<cluster>-replica.<k>-<role>`. The dot is in no host
 * name (`[a-z0-9-]`), so no host's `<cluster>-<host>-<role>` can equal it; with one replica no name changes.
 */
export function resourceNames(cluster: string = CLUSTER, replica?: number): ResourceNames {
    return {
        cluster,
        host: (host, role) => (role ? `${cluster}-${host}-${role}` : `${cluster}-${host}`),
        of: role => (replica !== undefined && REPLICA_ROLES.includes(role) ? `${cluster}-replica.${replica}-${role}` : `${cluster}-${role}`),
    };
}

/** The Docker container on a host (one per host; the host's name keeps it unique on that daemon). */
export function containerName(host: string): string {
    return `spark-vllm-${host}`;
}

/**
 * The endpoint proxy's container on the head. The dot keeps it apart from every `containerName(host)`: host names
 * are `[a-z0-9-]` only, and Docker allows `[a-zA-Z0-9][a-zA-Z0-9_.-]` in container names.
 */
export function proxyContainerName(): string {
    return "spark-vllm.proxy";
}
