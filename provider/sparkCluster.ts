// SparkCluster for Pulumi programs in Python, Go and YAML: the component package's face of the library's SparkCluster.
// Its args are the stack config's shape (docs/configuration.md; components/spec/configSchema.ts lists every key), so a
// program passes what it read from its own config; they are checked by the same parseSpec the TypeScript program uses
// (every problem at once, each with its key path), and the cluster is the library's SparkCluster, built inside this one
// with the same name: the same resources, with the same names, as index.ts builds.
//
// What the schema can say follows @pulumi/pulumi 3.276.0 provider/experimental/analyzer.js: args must be an interface,
// properties of string, number, boolean, arrays, string-keyed maps, interfaces and Input<T> (no unions, so a key with a
// fixed set of values is a string here and parseSpec names the accepted values); a property without Input<> is plain
// in every generated SDK; outputs are the class's Output<T> properties.
import * as pulumi from "@pulumi/pulumi";
import { SECRET_SET, parseSpec, RawConfig, dropPromiseStacks } from "../components/index";
import { SparkCluster as LibrarySparkCluster } from "../components/sparkCluster";

/** An SSH destination (`hosts[].ssh`). */
export interface HostSsh {
    /** Hostname or address the program connects to. Required. */
    host: string;
    /** SSH user (in the docker group, sudo without a password). Required. */
    user: string;
    /** SSH port. Default: 22. */
    port?: number;
    /** The host's SSH public key (`ssh-ed25519 AAAA…`), pinned for every remote command. Default: unset, any host key is accepted. */
    hostKey?: string;
}

/** A host's ConnectX-7 fabric port (`hosts[].fabric`). */
export interface HostFabric {
    /** Interface name (e.g. enp1s0f1np1). Required. */
    interface: string;
    /** The interface's IPv4 address, what Ray and NCCL use. Required. */
    address: string;
    /** RDMA devices (HCAs) for NCCL_IB_HCA. Default: every HCA the preflight finds. */
    hcas?: string[];
}

/** One DGX Spark (`hosts[]`). The first is the Ray head and serves the endpoint. */
export interface Host {
    /** Short name: a-z, 0-9 and -, unique. Part of every resource and container name of the host. Required. */
    name: string;
    /** How to reach it. Required. */
    ssh: HostSsh;
    /** Its fabric port. Required. */
    fabric: HostFabric;
    /** GPUs on the host. Default: 1. */
    gpus?: number;
    /** Image platform: linux/arm64 or linux/amd64. Default: linux/arm64. */
    platform?: string;
}

/** The model (`model`). */
export interface Model {
    /** Hugging Face model id. Required. */
    id: string;
    /** The name clients ask for. Default: the model id. */
    servedName?: string;
    /** Hugging Face cache on every host. Required. */
    cacheDir: string;
    /** Pass --trust-remote-code to vLLM. Default: false. */
    trustRemoteCode?: boolean;
    /** Where the weights come from: present, download or head-then-copy. Default: present. */
    weights?: string;
    /** Port of the head-then-copy transfer. Default: 20080. */
    copyPort?: number;
}

/** vLLM (`vllm`). */
export interface Vllm {
    /** Tensor parallel size. Default: the GPUs of all hosts ÷ pipelineParallelSize. */
    tensorParallelSize?: number;
    /** Pipeline parallel size. Default: 1. */
    pipelineParallelSize?: number;
    /** The endpoint's port (the proxy's). Default: 8000. */
    port?: number;
    /** vLLM's own port, on loopback behind the proxy. Default: 8001. */
    internalPort?: number;
    /** --gpu-memory-utilization. Default: 0.85. */
    gpuMemoryUtilization?: number;
    /** --max-model-len. Default: the model's own maximum. */
    maxModelLen?: number;
    /** More vLLM arguments. Default: none. */
    extraArgs?: string[];
    /** The image's vLLM version, for the compatibility check. Default: unknown (read from the image). */
    version?: string;
    /** ray or mp. Default: mp when the image is known to ship no Ray, else ray (two or more hosts). */
    backend?: string;
    /** The mp backend's master port. Default: 29501. */
    masterPort?: number;
}

/** The endpoint's reverse proxy (`endpoint`). */
export interface Endpoint {
    /** The proxy's image, pinned by digest. Default: nginx 1.30.5 (components/spec/spec.ts DEFAULT_PROXY_IMAGE). */
    image?: string;
    /** none, generated or given (then tlsCertificate and tlsPrivateKey are required). Default: none. */
    tls?: string;
}

/** Ray (`ray`). */
export interface Ray {
    /** The head's port. Default: 6379. */
    port?: number;
    /** The dashboard's port. Default: 8265. */
    dashboardPort?: number;
}

/** The probes (`probes`). */
export interface Probes {
    /** Seconds between polls. Default: 2. */
    intervalSeconds?: number;
    /** Ray formation timeout. Default: 180. */
    rayTimeoutSeconds?: number;
    /** Endpoint timeout. Default: 1800. */
    endpointTimeoutSeconds?: number;
    /** Run the fabric check (all-reduce) before launches. Default: true. */
    fabric?: boolean;
    /** Fabric check timeout. Default: 120. */
    fabricTimeoutSeconds?: number;
    /** Run the serving proof. Default: true. */
    serving?: boolean;
    /** Serving proof concurrency. Default: 4. */
    servingConcurrency?: number;
    /** Serving proof requests. Default: 8. */
    servingRequests?: number;
    /** Serving proof max tokens. Default: 64. */
    servingMaxTokens?: number;
    /** Warn when throughput drops by more than this percentage. Default: 20. */
    servingDropWarnPercent?: number;
}

/** spark-vllm's own CPU-vLLM test bed (`testBed`; docs/real-vllm.md). */
export interface TestBed {
    /** Skip what needs a GPU. Default: false. */
    cpuVllm?: boolean;
}

/** How a rolling update of several replicas drains one (`rollout`). */
export interface Rollout {
    /** Seconds a drained replica is given to finish its running requests. Default: 120. */
    drainSeconds?: number;
}

/** Every host's memory guard (`memoryGuard`; docs/operations.md#the-memory-guard). */
export interface MemoryGuard {
    /** MemAvailable floor in GiB below which a host's supervisor stops vLLM and Ray; 0 turns it off. Default: 4. */
    floorGiB?: number;
}

/** The ConnectX-7 fabric the program plans itself (`fabric`; docs/deploy.md#the-fabric-declared-in-the-stack). */
export interface Fabric {
    /** Plan the fabric and fill every host's fabric from it (not applied by spark-vllm yet). Default: false. */
    setup?: boolean;
    /** direct, ring or switch. Default: direct. */
    topology?: string;
    /** static or link-local. Default: static. */
    addressing?: string;
    /** The QSFP port direct and switch use, 0 or 1. Default: 1. */
    port?: number;
    /** Static addressing: one subnet per twin (per twin of every cable in a ring). Default: 192.168.100.0/24, 192.168.101.0/24, …. */
    subnets?: string[];
    /** MTU of every fabric interface. Default: 9000. */
    mtu?: number;
}

/**
 * The stack config's `spark-vllm:` keys, the same names and shape (docs/configuration.md has every default), plus
 * the program's secrets and the component's own options.
 */
export interface SparkClusterArgs {
    /** The DGX Sparks, at least one. Required. */
    hosts: Host[];
    /** The vLLM image, pinned by digest. Required. */
    image: string;
    /** registry or head. Default: registry. */
    imageSource?: string;
    /** The model. Required. */
    model: Model;
    /** vLLM. Default: every key's default. */
    vllm?: Vllm;
    /** The reverse proxy. Default: every key's default. */
    endpoint?: Endpoint;
    /** Ray. Default: every key's default. */
    ray?: Ray;
    /** The probes. Default: every key's default. */
    probes?: Probes;
    /** spark-vllm's own test bed. Default: off. */
    testBed?: TestBed;
    /** Copies of the model behind the one endpoint; the hosts, in order, form this many equal groups. Default: 1. */
    replicas?: number;
    /** Rolling updates of several replicas. Default: every key's default. */
    rollout?: Rollout;
    /** The fabric the program plans. Default: setup off (the hosts' fabric is addressed already). */
    fabric?: Fabric;
    /** Every host's memory guard. Default: a 4 GiB floor. */
    memoryGuard?: MemoryGuard;
    /** Where logs go on the hosts. Default: /var/tmp/spark-vllm. */
    logDir?: string;
    /** The containers' /dev/shm in MB. Default: 10240. */
    shmSizeMb?: number;
    /** SSH private key for the remote commands (a secret). Default: the ssh-agent at SSH_AUTH_SOCK. */
    sshPrivateKey?: pulumi.Input<string>;
    /** Hugging Face token for gated models (a secret; downloads only, on stdin). Default: none. */
    hfToken?: pulumi.Input<string>;
    /** endpoint.tls given: the PEM certificate chain, the server's first (a secret). Default: none. */
    tlsCertificate?: pulumi.Input<string>;
    /** endpoint.tls given: the certificate's private key (a secret). Default: none. */
    tlsPrivateKey?: pulumi.Input<string>;
    /** The key the endpoint requires. Default: a generated 40-character RandomPassword. */
    apiKey?: pulumi.Input<string>;
    /** Keep the image on the hosts when the stack is destroyed. Default: true (vLLM images are tens of GB). */
    keepImage?: boolean;
}

/** The config keys of SparkClusterArgs, as parseSpec reads them (components/spec/stackConfig.ts KNOWN_KEYS). */
const CONFIG_KEYS = ["hosts", "image", "imageSource", "model", "vllm", "ray", "probes", "logDir", "shmSizeMb", "endpoint", "testBed", "replicas", "rollout", "fabric", "memoryGuard"] as const;
/** Secrets: parseSpec sees only whether they are set (SECRET_SET), as it does for a stack's `secure:` values. */
const SECRET_ARGS = ["sshPrivateKey", "hfToken", "tlsCertificate", "tlsPrivateKey"] as const;

/** The raw config parseSpec reads, from the args: config keys as given, secrets as set or not, nothing else. */
export function rawConfigFromArgs(args: SparkClusterArgs): RawConfig {
    const raw: RawConfig = {};
    const given = (args ?? {}) as unknown as Record<string, unknown>;
    for (const key of CONFIG_KEYS) if (given[key] !== undefined && given[key] !== null) raw[key] = given[key];
    for (const key of SECRET_ARGS) if (given[key] !== undefined && given[key] !== null) raw[key] = SECRET_SET;
    return raw;
}

/**
 * DGX Sparks serving one model through vLLM (the library's SparkCluster, docs/library.md), for programs in any Pulumi
 * language. Fails before any resource exists when the args are wrong, listing every problem with its key path.
 */
export class SparkCluster extends pulumi.ComponentResource {
    /** http(s)://<head ssh host>:<port>/v1, once the endpoint probe has proven a completion through the proxy. */
    readonly endpoint: pulumi.Output<string>;
    /** The key the endpoint requires (a secret). */
    readonly apiKey: pulumi.Output<string>;
    /** The name clients ask for. */
    readonly modelName: pulumi.Output<string>;
    /** Preflight facts per host name. */
    readonly hosts: pulumi.Output<Record<string, any>>;
    /** The fabric check's verdict; absent with one host or probes.fabric false. */
    readonly fabric: pulumi.Output<Record<string, any> | undefined>;
    /** The serving proof's figures; absent when probes.serving is false. */
    readonly serving: pulumi.Output<Record<string, any> | undefined>;
    /** endpoint.tls generated or given: the certificate the proxy serves (PEM). */
    readonly endpointCertificate: pulumi.Output<string | undefined>;
    /** Its SHA-256 fingerprint, for clients to pin. */
    readonly endpointCertificateSha256: pulumi.Output<string | undefined>;
    /** replicas above 1: each replica's hosts, head, fabric verdict and serving figures; absent with one. */
    readonly replicas: pulumi.Output<Array<Record<string, any>> | undefined>;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super("spark-vllm:index:SparkCluster", name, {}, opts);
        // Throws SpecError ("invalid stack config (N problems): …" with every key path), which the engine shows as
        // the construct's error; no resource exists yet.
        const spec = parseSpec(rawConfigFromArgs(args));
        // As index.ts: without the SDK's per-promise debug stacks (components/debugStacks.ts).
        dropPromiseStacks();
        const cluster = new LibrarySparkCluster(name, {
            spec,
            sshPrivateKey: args.sshPrivateKey,
            hfToken: args.hfToken,
            apiKey: args.apiKey,
            keepImage: args.keepImage,
            tls: spec.endpoint.tls === "given" ? { certificate: args.tlsCertificate!, privateKey: args.tlsPrivateKey! } : undefined,
        }, { parent: this });
        this.endpoint = cluster.endpoint;
        this.apiKey = pulumi.secret(cluster.apiKey);
        this.modelName = cluster.modelName;
        this.hosts = cluster.hostFacts;
        this.fabric = cluster.fabric;
        this.serving = cluster.serving;
        this.endpointCertificate = cluster.endpointCertificate;
        this.endpointCertificateSha256 = cluster.endpointCertificateSha256;
        this.replicas = cluster.replicaOutputs;
        this.registerOutputs({
            endpoint: this.endpoint, apiKey: this.apiKey, modelName: this.modelName, hosts: this.hosts,
            fabric: this.fabric, serving: this.serving,
            endpointCertificate: this.endpointCertificate, endpointCertificateSha256: this.endpointCertificateSha256, replicas: this.replicas,
        });
    }
}
