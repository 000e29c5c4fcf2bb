// The plan as data: every container, environment, command line and probe of a cluster, which planCluster (plan.ts)
// builds from the spec and the components turn into resources. Pure: no Pulumi.
import { HostSpec, ClusterSpec } from "../spec/spec";
import { proxyContainer } from "./proxyPlan";

/** A host's part in the cluster: the head (Ray head, API server, rendezvous) or a worker. */
export type Role = "head" | "worker";

/** What a remote command does; the component makes one remote.Command from it. */
export interface CommandPlan {
    /** Runs on create (and on replacement). */
    create: string;
    /** Runs on destroy or before a replacement; stops what create started. */
    delete?: string;
    /** Runs on an update instead of `create` again (pulumi-command v1.2.1 remote/commandController.go Update). */
    update?: string;
    /**
     * Which secret, if any, is piped to the command's stdin (its first line; weightsToken: head-then-copy's copy token;
     * tlsFiles: endpoint.tls "given"'s chain and key, two base64 lines, components/spec/givenTls.ts).
     */
    stdin?: "apiKey" | "hfToken" | "rayToken" | "weightsToken" | "tlsFiles";
    /** Upper bound enforced with `timeout` on the host, in seconds. */
    timeoutSeconds: number;
}

/** One host's idle container as plain data (resources.ts turns it into docker.Container inputs). */
export interface ContainerPlan {
    name: string;
    image: string;
    platform: string;
    /** Environment in a stable order. */
    env: Array<[string, string]>;
    /** Bind mounts; `readOnly`: the container may read, never write, what is there (Docker's `readonly` bind option). */
    mounts: Array<{ hostPath: string; containerPath: string; readOnly?: boolean }>;
    devices: Array<{ hostPath: string; containerPath: string }>;
    ulimits: Array<{ name: string; soft: number; hard: number }>;
    capabilities: string[];
    shmSizeMb: number;
    networkMode: "host";
    ipcMode: "host";
    gpus: "all";
    /** Run an init as PID 1 so exited launches are reaped and probes see them gone. */
    init: true;
    entrypoint: string[];
    command: string[];
    labels: Array<[string, string]>;
}

/** Everything that runs on one host, as plain data. */
export interface HostPlan {
    host: HostSpec;
    role: Role;
    container: ContainerPlan;
    /** Writes the helper program to the host: `packed` (the content, compressed) on stdin. */
    tools: ToolsInstall;
    /** Facts as JSON; fails with one line per problem. */
    preflight: CommandPlan;
    /** Puts the weights in place per the strategy (in the container) and prints the file manifest. */
    weights: CommandPlan;
    /**
     * imageSource "head" only: runs on the HEAD and prints this host's image ID — the head inspects
     * its own image, and copies it to a worker (docker save | ssh docker load) unless it is there.
     */
    imageFromHead?: CommandPlan;
    /**
     * The image proof: compat in a throw-away container of the pulled image on this host, before any container of the
     * cluster is created or replaced (hostCommands.ts imageCheck); an image change is checked while the old one serves.
     */
    imageCheck: CommandPlan;
    /** Ray backend only: the exact `ray start` argv, and the command that runs it in the container. */
    rayStartArgv?: string[];
    rayLaunch?: CommandPlan;
    /** mp backend, workers only: this host's `vllm serve --headless` argv and its launch. */
    vllmServeArgv?: string[];
    vllmLaunch?: CommandPlan;
    /**
     * Two or more hosts, unless `probes.fabric` is false: this host's rank of the NCCL all-reduce across the hosts
     * (components/hostProgram/spark_vllm/fabric.py), run in its container before any launch. Every rank runs at once.
     */
    fabricRank?: CommandPlan;
    /**
     * Before every vLLM launch: drops the page cache on the host, then compares free memory as CUDA sees it
     * in the container with what vLLM will ask for (unified memory; components/hostProgram/spark_vllm/memory.py).
     */
    memoryGate: CommandPlan;
    /**
     * Once the endpoint answered: free memory left in this host's container with vLLM loaded (CUDA free, MemAvailable),
     * a warning below LOW_AFTER_LOAD_GIB (components/hostProgram/spark_vllm/memory.py memory-after-load; docs/memory.md).
     */
    memoryAfterLoad: CommandPlan;
}

/** The whole plan: every container, environment, command line and probe as plain data. No Pulumi. */
export interface ClusterPlan {
    spec: ClusterSpec;
    hosts: HostPlan[];
    head: HostPlan;
    /** How the hosts run the model (spec.vllm.backend): Ray, vLLM's own multi-node launch, or one host. */
    backend: ClusterSpec["vllm"]["backend"];
    /** Ray backend only. */
    rayProbe?: CommandPlan;
    compat: CommandPlan;
    /** head-then-copy only: serves the head's weights to the workers over the fabric. */
    weightsSource?: CommandPlan;
    /** The exact `vllm serve` argv (no secrets in it: the API key travels in VLLM_API_KEY from stdin). */
    vllmServeArgv: string[];
    vllmLaunch: CommandPlan;
    endpointProbe: CommandPlan;
    /** After the endpoint probe, a short streamed load on the head (probes.serving); undefined when skipped. */
    servingProof?: CommandPlan;
    /** The reverse proxy on the head that publishes vllm.port (components/plan/proxyPlan.ts). */
    proxy: ProxyPlan;
    /** http(s)://<head ssh host>:<port>/v1: the proxy's address; https when endpoint.tls is set. */
    endpoint: string;
    modelName: string;
    /** Where the head keeps the vLLM log and pid. */
    vllmLog: string;
    vllmPidFile: string;
    /**
     * spark-vllm:replicas above 1 only: each replica's own plan, over its hosts (components/plan/replicas.ts), in the
     * order a rolling update takes them. The plan's own fields are then the first replica's (the front, with the proxy),
     * but `spec` (the whole config) and `hosts` (every replica's hosts, in order).
     */
    replicas?: ClusterPlan[];
    /**
     * With replicas: per replica, in order, the commands on the first host that take it out of the front proxy before it
     * relaunches and put it back once it is proven (components/plan/rollout.ts).
     */
    rollouts?: ReplicaRollout[];
}

/** One replica's drain and undrain, run on the front proxy's host (components/plan/rollout.ts). */
export interface ReplicaRollout {
    drain: CommandPlan;
    undrain: CommandPlan;
}

/** The endpoint proxy on the head: its image, its optional certificate, its configuration and its container. */
export interface ProxyPlan {
    image: string;
    platform: string;
    /** tls "generated": makes the self-signed certificate on the head and prints it; "given": writes the given one from stdin. */
    tls?: CommandPlan;
    /** Writes nginx.conf and the key's map file (the key from stdin); restarts a running proxy. */
    config: CommandPlan;
    /** docker.Container inputs but the image. */
    container: ReturnType<typeof proxyContainer>;
}

/** The helper program's install: its text, and what goes on stdin (packTools). */
export interface ToolsInstall extends CommandPlan {
    content: string;
    packed: string;
}
