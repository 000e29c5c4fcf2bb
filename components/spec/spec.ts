// What a validated stack config is (ClusterSpec and its parts, parseSpec fills every default) and the bounds every
// value is held to. Pure: no Pulumi. Reading the stack's config is stackConfig.ts; checking it, parseSpec.ts.
import type { FabricSetupSpec } from "./fabricConfig";

/** How to reach a host over SSH. */
export interface SshSpec {
    host: string;
    user: string;
    /** Default 22. */
    port: number;
    /** The host's pinned public key, `<type> <base64>` (components/spec/hostKeys.ts); unset: any key is accepted. */
    hostKey?: string;
}

/** The host's ConnectX-7 fabric: the interface and address NCCL, Gloo, UCX and Ray use, and the HCAs. */
export interface FabricSpec {
    /** NCCL/Gloo/UCX/TP socket interface, e.g. enp1s0f1np1. */
    interface: string;
    /** This host's fabric IPv4 address: VLLM_HOST_IP and Ray node IP. */
    address: string;
    /** RDMA HCAs for NCCL_IB_HCA; empty means TCP only. */
    hcas: string[];
}

/** One DGX Spark (the first is the head). */
export interface HostSpec {
    name: string;
    ssh: SshSpec;
    fabric: FabricSpec;
    /** Default 1 (one GB10 per Spark). */
    gpus: number;
    /** Docker platform of the host; default linux/arm64 (DGX Spark is aarch64). Preflight checks it. */
    platform: string;
}

/** The image reference, parsed. */
export interface ImageRef {
    /** The reference as written in config. */
    reference: string;
    /** Registry host and repository path, e.g. nvcr.io/nvidia/vllm. */
    repository: string;
    tag?: string;
    /** sha256:<64 hex> when pinned. */
    digest?: string;
}

/** How weights reach every host: verify only (default), download, or copy from the head. */
export type WeightsStrategy = "present" | "download" | "head-then-copy";

/** The model and where its weights live. */
export interface ModelSpec {
    /** Hugging Face repository id. */
    id: string;
    /** Name the endpoint serves; default the id. */
    servedName: string;
    /** Hugging Face cache directory, the same path on every host. */
    cacheDir: string;
    /** Default false. */
    trustRemoteCode: boolean;
    /** Default "present": verify only. */
    weights: WeightsStrategy;
    /** head-then-copy: port on the head's fabric address the workers copy from; default 20080 (outside Ray's worker ports). */
    copyPort: number;
}

/** How vLLM serves the model across the hosts. */
export interface VllmSpec {
    tensorParallelSize: number;
    /** Default 1. */
    pipelineParallelSize: number;
    /** The endpoint's port on the head, published by the proxy; default 8000. */
    port: number;
    /** Where vLLM itself listens, on the head's loopback only, behind the proxy; default 8001. */
    internalPort: number;
    /** Default 0.85: the unified memory is shared with the OS, Docker and Ray. */
    gpuMemoryUtilization: number;
    /** Default: the model's own maximum. */
    maxModelLen?: number;
    /** Passed through, shell-quoted. Default []. */
    extraArgs: string[];
    /** The image's vLLM version if known (used by policies at preview); default unknown. */
    version?: string;
    /**
     * How the hosts run one model: `ray` (Ray head and workers, `--distributed-executor-backend ray`) or `mp`
     * (vLLM's own multi-node launch, one `vllm serve` per host with `--nnodes/--node-rank/--master-addr/--master-port`,
     * `--headless` but on the head; vLLM >= 0.11.1, and no Ray). Default for two or more hosts: `mp` when the image is
     * known to ship no Ray, else `ray` (components/knowledge/images.ts defaultBackend). One host is always `single`: plain
     * `vllm serve`, no Ray and no executor flag.
     */
    backend: "ray" | "mp" | "single";
    /** mp: the head's rendezvous port on its fabric address; default 29501 (vLLM's own, vllm/config/parallel.py). */
    masterPort: number;
}

/** The Ray cluster (ray backend only). */
export interface RaySpec {
    /** GCS port on the head; default 6379. */
    port: number;
    /** Dashboard port, bound to 127.0.0.1 only; default 8265. */
    dashboardPort: number;
}

/** How long and how often up waits, and whether the fabric check runs. */
export interface ProbeSpec {
    /** Seconds between polls; default 2. */
    intervalSeconds: number;
    /** Seconds for all Ray nodes and GPUs to join; default 180. */
    rayTimeoutSeconds: number;
    /** Seconds for vLLM to load and answer; default 1800 (large models load for many minutes). */
    endpointTimeoutSeconds: number;
    /** Two or more hosts: an NCCL all-reduce across the hosts before any launch; default true. */
    fabric: boolean;
    /** Seconds for the fabric check's ranks to meet and finish; default 120. */
    fabricTimeoutSeconds: number;
    /** After the endpoint answers, a short streamed load measures time to first token and output tokens/s; default true. */
    serving: boolean;
    /** The serving proof's higher concurrency (it always measures 1 too); default 4. */
    servingConcurrency: number;
    /** Requests per concurrency level (at least the concurrency); default 8. */
    servingRequests: number;
    /** Output tokens per request; default 64. */
    servingMaxTokens: number;
    /** Warn when output tokens/s falls by more than this percentage against the previous deploy; default 20. */
    servingDropWarnPercent: number;
}

/** The validated stack config (parseSpec); every default filled in. */
export interface ClusterSpec {
    /** The first host is the Ray head. */
    hosts: HostSpec[];
    image: ImageRef;
    model: ModelSpec;
    vllm: VllmSpec;
    ray: RaySpec;
    probes: ProbeSpec;
    /** Host directory for logs and pid files, mounted into every container; default /var/tmp/spark-vllm. */
    logDir: string;
    /** Shared memory for each container in MiB; default 10240. */
    shmSizeMb: number;
    /**
     * Where the hosts get the image: "registry" (each host pulls it; default) or "head" (it exists only
     * on the head, which copies it to the workers over the fabric with docker save | docker load).
     */
    imageSource: "registry" | "head";
    /** The reverse proxy in front of vLLM on the head (components/plan/proxyPlan.ts). */
    endpoint: EndpointSpec;
    /** The project's own CPU-vLLM test bed (testBed.cpuVllm); parseSpec always fills it, off by default. */
    testBed?: TestBedSpec;
    /**
     * `spark-vllm:fabric`: whether the program sets up the ConnectX-7 fabric (components/spec/fabricConfig.ts); parseSpec
     * always fills it, setup off by default.
     */
    fabric?: FabricSetupSpec;
    /**
     * Copies of the model behind the one endpoint; default 1. The hosts, in order, form this many groups of equal size,
     * each a complete deployment of TP × PP GPUs (components/plan/replicas.ts).
     */
    replicas: number;
    /** How a rolling update of several replicas drains one (spark-vllm:rollout). */
    rollout: RolloutSpec;
    /** When every host's supervisor stops what it runs to save the host (spark-vllm:memoryGuard). */
    memoryGuard: MemoryGuardSpec;
}

/** `spark-vllm:memoryGuard`: the floor of MemAvailable below which a host's supervisor stops vLLM and Ray (supervise.py). */
export interface MemoryGuardSpec {
    /** MemAvailable floor in GiB; 0 turns the guard off; default 4 (configSchema.ts says where it comes from). */
    floorGiB: number;
}

/** `spark-vllm:rollout`: how a rolling update takes a replica out of the endpoint. */
export interface RolloutSpec {
    /** The longest a drained replica is given to finish its running requests before it is relaunched; default 120. */
    drainSeconds: number;
}

/**
 * `spark-vllm:testBed`: only for spark-vllm's own end-to-end test of a real vLLM CPU build on one x86_64 machine
 * (tests/e2e/real-vllm.test.ts, docs/real-vllm.md). With `cpuVllm` the plan skips what needs a GPU (cpuVllmSkips in
 * components/plan/hostCommands.ts); parseSpec refuses it on anything that looks like a Spark.
 */
export interface TestBedSpec {
    cpuVllm: boolean;
}

/** The endpoint: the reverse proxy that publishes vLLM (which listens on loopback only) and guards it with the key. */
export interface EndpointSpec {
    /** The proxy's image (nginx): a reference pinned by digest. */
    image: string;
    /**
     * "none": plain HTTP (default); "generated": a self-signed certificate made on the head, its key never leaving it;
     * "given": the secrets tlsCertificate and tlsPrivateKey (components/spec/givenTls.ts), on the proxy-tls command's stdin.
     */
    tls: "none" | "generated" | "given";
}

/** nginx 1.30.5, the official image's multi-arch index (amd64, arm64 v8, …): docker-library/repo-info
 * repos/nginx/remote/1.30.5.md (commit 08b3b898fc18da523d5d6e30a868c60805acb3bc), "Manifest MIME:
 * application/vnd.oci.image.index.v1+json". Debian-based, with openssl (ca-certificates depends on it). */
export const DEFAULT_PROXY_IMAGE = "nginx:1.30.5@sha256:e9f347c65f318767714e8b0eccfd6b558d00fb92630791fb6cd901fcdf7f6fdd";

/** Every config problem at once, each naming its key path (`spark-vllm:hosts[1].fabric.address: …`). */
export class SpecError extends Error {
    constructor(public readonly problems: string[]) {
        super(
            `invalid stack config (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n` +
                problems.map(p => `  - ${p}`).join("\n"),
        );
        this.name = "SpecError";
    }
}

// ---------------------------------------------------------------- bounds

/**
 * What config may contribute, bounded so that every value fits the places it lands (command lines, container
 * names, error messages) and a mistake fails here with a clear message, not later on a host.
 */
export const LIMITS = {
    /** Any one string value not bounded more tightly below. */
    valueChars: 1024,
    /** Hosts in one cluster (the probes and the copy list every host in one command). */
    hosts: 256,
    hcas: 16,
    /** DNS: 253 characters for a name, 63 for a label (RFC 1035, 2.3.4). */
    sshHostChars: 253,
    hostNameChars: 63,
    /** useradd's limit on Linux user names. */
    userChars: 32,
    pathChars: 1024,
    /** vllm.extraArgs: the only free text that lands in a command line; see MAX_ARG_STRLEN. */
    extraArgs: 128,
    extraArgChars: 4096,
    extraArgsBytes: 16 * 1024,
    /** Unknown keys named per object, and problems listed in all, before "and N more". */
    unknownKeysReported: 20,
    problems: 200,
} as const;

/**
 * Linux refuses an exec argument longer than MAX_ARG_STRLEN, 32 pages: 128 KiB with 4 KiB pages
 * (include/uapi/linux/binfmts.h `#define MAX_ARG_STRLEN (PAGE_SIZE * 32)`; fs/exec.c copy_strings fails with
 * E2BIG, which surfaces as a cryptic "Argument list too long" or a dropped SSH session). sshd runs a remote
 * command as one argument of the user's shell (OpenSSH session.c do_child: `execve(shell, [shell0, "-c",
 * command])`), so every command text, with its terminating NUL, must fit in one.
 */
export const MAX_ARG_STRLEN = 128 * 1024;

/** UTF-8 length of a string, without allocating. */
export function utf8Length(s: string): number {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
        const c = s.charCodeAt(i);
        if (c < 0x80) n += 1;
        else if (c < 0x800) n += 2;
        else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) (n += 4), i++;
        else n += 3;
    }
    return n;
}

/** A problem when a command text does not fit in one exec argument (see MAX_ARG_STRLEN); undefined when it does. */
export function commandLengthProblem(label: string, text: string): string | undefined {
    const bytes = utf8Length(text) + 1;
    if (bytes <= MAX_ARG_STRLEN) return undefined;
    return `${label}: its command text is ${bytes} bytes, and Linux runs a remote command as one argument of at most ` +
        `${MAX_ARG_STRLEN} bytes (MAX_ARG_STRLEN); shorten spark-vllm:vllm.extraArgs or the host list`;
}
