// The stack config's schema as data: every key path under the `spark-vllm` namespace, its type, its
// default and what it means. Pure: no Pulumi, no parsing. docs/configuration.md is generated from it
// (`npm run docs`), and tests/unit/docs-config.test.ts holds it against the real parser (parseSpec in
// spec.ts): the keys parseSpec accepts, its defaults, required keys, types and ranges.
// When spec.ts gains or changes a key, change it here too, then run `npm run docs`.

/** How a value is written in the stack file. */
export type ConfigType = "string" | "integer" | "number" | "boolean" | "list of strings" | "object" | "list of objects";

export interface ConfigKey {
    /** Key path under the namespace: `vllm.port`; `hosts[]` stands for every entry of the list. */
    path: string;
    type: ConfigType;
    /** parseSpec reports it missing when absent. An optional key inside a required object is optional. */
    required: boolean;
    /** The value parseSpec uses when the key is absent, exactly as it appears in the parsed spec. */
    default?: string | number | boolean | readonly string[];
    /** The default in words, where it is computed or means "unset" (then `default` is absent). */
    defaultText?: string;
    /** The only values accepted. */
    values?: readonly string[];
    /** Inclusive bounds of a number. */
    min?: number;
    max?: number;
    /** A secret: set with `pulumi config set --secret`, never in plain text. */
    secret?: boolean;
    /** Read by the program (index.ts) and handed to SparkCluster, not part of the parsed spec. */
    program?: boolean;
    /**
     * A valid value. The tests and the reference build configs of two hosts from these (the required keys'
     * examples make the minimal config), so each must be valid in a cluster of two Sparks.
     */
    example: unknown;
    /** For a key of a list entry that must differ between entries (a name, an address): the second entry's value. */
    example2?: unknown;
    /** What it means, one or two sentences of Markdown. */
    description: string;
}

/** The config namespace (also `CONFIG_NAMESPACE` in spec.ts). */
export const SCHEMA_NAMESPACE = "spark-vllm";

/** Every key, in the order the reference lists them. */
export const CONFIG_SCHEMA: readonly ConfigKey[] = [
    {
        path: "hosts",
        type: "list of objects",
        required: true,
        example: [],
        description: "The DGX Sparks, at least one. The first is the Ray head and serves the endpoint.",
    },
    {
        path: "hosts[].name",
        type: "string",
        required: true,
        example: "spark-a",
        example2: "spark-b",
        description: "Short name: `a-z`, `0-9` and `-`, starting and ending with a letter or digit; unique. Part of every resource and container name of the host.",
    },
    {
        path: "hosts[].ssh",
        type: "object",
        required: true,
        example: {},
        description: "How Pulumi reaches the host: remote commands over SSH and the Docker provider over `ssh://user@host`.",
    },
    {
        path: "hosts[].ssh.host",
        type: "string",
        required: true,
        example: "198.18.0.11",
        example2: "198.18.0.12",
        description: "SSH host name or address. The endpoint URL uses the head's. Two hosts may not be the same `host:port`.",
    },
    {
        path: "hosts[].ssh.user",
        type: "string",
        required: true,
        example: "nvidia",
        description: "SSH user; must be in the host's `docker` group.",
    },
    {
        path: "hosts[].ssh.port",
        type: "integer",
        required: false,
        default: 22,
        min: 1,
        max: 65535,
        example: 22,
        description: "SSH port.",
    },
    {
        path: "hosts[].fabric",
        type: "object",
        required: true,
        example: {},
        description: "The host's ConnectX-7 fabric: what NCCL, Gloo, UCX, Ray and vLLM use between the hosts.",
    },
    {
        path: "hosts[].fabric.interface",
        type: "string",
        required: true,
        example: "enp1s0f1np1",
        description: "Network interface for NCCL/Gloo/UCX/TP sockets (`NCCL_SOCKET_IFNAME` and friends), e.g. `enp1s0f1np1`; not the 10 GbE `enP7s7`.",
    },
    {
        path: "hosts[].fabric.address",
        type: "string",
        required: true,
        example: "198.19.100.10",
        example2: "198.19.100.11",
        description: "This host's IPv4 address on that interface: its `VLLM_HOST_IP` and Ray node IP. Unique across hosts.",
    },
    {
        path: "hosts[].fabric.hcas",
        type: "list of strings",
        required: false,
        default: [],
        example: ["rocep1s0f1", "roceP2p1s0f1"],
        description: "RDMA HCAs for `NCCL_IB_HCA`, e.g. `[rocep1s0f1, roceP2p1s0f1]`. `[]` means TCP sockets only.",
    },
    {
        path: "hosts[].gpus",
        type: "integer",
        required: false,
        default: 1,
        min: 1,
        max: 16,
        example: 1,
        description: "GPUs on the host (a DGX Spark has one GB10). TP × PP must equal the sum over all hosts.",
    },
    {
        path: "hosts[].platform",
        type: "string",
        required: false,
        default: "linux/arm64",
        values: ["linux/arm64", "linux/amd64"],
        example: "linux/arm64",
        description: "Docker platform the image is pulled for. The preflight checks the host's architecture against it.",
    },
    {
        path: "image",
        type: "string",
        required: true,
        example: "vllm/vllm-openai:v0.17.1@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        description: "`<repo>[:tag]@sha256:<digest>`: one image for all hosts, pinned by digest. Its vLLM must know the model's architecture (checked before launch).",
    },
    {
        path: "imageSource",
        type: "string",
        required: false,
        default: "registry",
        values: ["registry", "head"],
        example: "registry",
        description: "`registry`: every host pulls `image`. `head`: the image exists only on the head (built there), which copies it to each worker over the fabric (`docker save | ssh docker load`; needs SSH from the head to the workers).",
    },
    {
        path: "model",
        type: "object",
        required: true,
        example: {},
        description: "The model to serve.",
    },
    {
        path: "model.id",
        type: "string",
        required: true,
        example: "Qwen/Qwen3.5-122B-A10B-FP8",
        description: "Hugging Face repository id (`owner/name`).",
    },
    {
        path: "model.servedName",
        type: "string",
        required: false,
        defaultText: "`model.id`",
        example: "qwen3.5-122b",
        description: "The model name clients ask for (`--served-model-name`); letters, digits and `._/:-`.",
    },
    {
        path: "model.cacheDir",
        type: "string",
        required: true,
        example: "/home/nvidia/.cache/huggingface",
        description: "Hugging Face cache directory, an absolute path, the same on every host; mounted into every container.",
    },
    {
        path: "model.trustRemoteCode",
        type: "boolean",
        required: false,
        default: false,
        example: false,
        description: "Let vLLM run Python code shipped in the model repository (`--trust-remote-code`).",
    },
    {
        path: "model.weights",
        type: "string",
        required: false,
        default: "present",
        values: ["present", "download", "head-then-copy"],
        example: "present",
        description: "`present`: verify the weights are in `cacheDir` on every host. `download`: each host downloads them (with `hfToken` for gated models). `head-then-copy`: the head downloads, the workers copy from it over the fabric, resumably.",
    },
    {
        path: "model.copyPort",
        type: "integer",
        required: false,
        default: 20080,
        min: 1,
        max: 65535,
        example: 20080,
        description: "`head-then-copy` only: the port on the head's fabric address the workers copy from (the default is outside Ray's worker ports); not `vllm.port` or `ray.port`.",
    },
    {
        path: "vllm",
        type: "object",
        required: false,
        example: {},
        description: "How `vllm serve` runs.",
    },
    {
        path: "vllm.tensorParallelSize",
        type: "integer",
        required: false,
        defaultText: "the GPUs of all hosts ÷ `pipelineParallelSize`",
        min: 1,
        max: 64,
        example: 2,
        description: "Tensor parallelism. TP × PP must equal the GPUs of all hosts.",
    },
    {
        path: "vllm.pipelineParallelSize",
        type: "integer",
        required: false,
        default: 1,
        min: 1,
        max: 64,
        example: 1,
        description: "Pipeline parallelism.",
    },
    {
        path: "vllm.port",
        type: "integer",
        required: false,
        default: 8000,
        min: 1,
        max: 65535,
        example: 8000,
        description: "Endpoint port on the head, published by the endpoint proxy (nginx) on all of its addresses; not `ray.port`.",
    },
    {
        path: "vllm.internalPort",
        type: "integer",
        required: false,
        default: 8001,
        min: 1,
        max: 65535,
        example: 8001,
        description: "Where vLLM itself listens: `127.0.0.1` on the head only, behind the endpoint proxy (vLLM's `--api-key` guards only `/v1`). Not `vllm.port` or another configured port.",
    },
    {
        path: "vllm.gpuMemoryUtilization",
        type: "number",
        required: false,
        default: 0.85,
        min: 0,
        max: 1,
        example: 0.85,
        description: "vLLM's share of GPU memory, in (0, 1]. A GB10's memory is unified and shared with the OS, Docker and Ray: leave headroom.",
    },
    {
        path: "vllm.maxModelLen",
        type: "integer",
        required: false,
        defaultText: "the model's own maximum",
        min: 1,
        max: 16777216,
        example: 32768,
        description: "Context length (`--max-model-len`). The memory plan (`spark-vllm plan`) says whether it fits.",
    },
    {
        path: "vllm.extraArgs",
        type: "list of strings",
        required: false,
        default: [],
        example: ["--enable-prefix-caching"],
        description: "More `vllm serve` arguments, shell-quoted. Flags spark-vllm sets itself (`--port`, `--tensor-parallel-size`, `--api-key`, …) are refused with the key to use instead.",
    },
    {
        path: "vllm.version",
        type: "string",
        required: false,
        defaultText: "unknown",
        example: "0.17.1",
        description: "The image's vLLM version, e.g. `0.17.1`, so the policies can check the model's architecture at preview, before any host is touched.",
    },
    {
        path: "vllm.backend",
        type: "string",
        required: false,
        defaultText: "ray for two or more hosts; one host is always plain `vllm serve`",
        values: ["ray", "mp"],
        example: "mp",
        description: "How the hosts run one model. `ray`: a Ray head and workers, `--distributed-executor-backend ray` (the image must ship Ray; vLLM images dropped it from 0.18). `mp`: vLLM's own multi-node launch, one `vllm serve` per host with `--nnodes/--node-rank/--master-addr/--master-port`, `--headless` on all but the head, no Ray (vLLM 0.11.0 or newer). Not allowed with one host.",
    },
    {
        path: "vllm.masterPort",
        type: "integer",
        required: false,
        default: 29501,
        min: 1,
        max: 65535,
        example: 29501,
        description: "`mp` only: the rendezvous port on the head's fabric address (`--master-port`; 29501 is vLLM's own default).",
    },
    {
        path: "endpoint",
        type: "object",
        required: false,
        example: {},
        description: "The reverse proxy (nginx, in its own container on the head) that publishes `vllm.port`: `/health` without the key, the OpenAI API (`/v1/models`, `/v1/completions`, `/v1/chat/completions`, `/v1/embeddings`, `/v1/responses`, `/v1/audio/*`) with it, every other path 401 without the key and 404 with it. See docs/security.md.",
    },
    {
        path: "endpoint.image",
        type: "string",
        required: false,
        default: "nginx:1.30.5@sha256:e9f347c65f318767714e8b0eccfd6b558d00fb92630791fb6cd901fcdf7f6fdd",
        example: "nginx:1.30.5@sha256:e9f347c65f318767714e8b0eccfd6b558d00fb92630791fb6cd901fcdf7f6fdd",
        description: "The proxy's image, pinned by digest: an nginx image with `openssl` (for `tls: generated`) and the `nobody` user and `nogroup` group. The default is the official image's multi-arch index.",
    },
    {
        path: "endpoint.tls",
        type: "string",
        required: false,
        default: "none",
        values: ["none", "generated"],
        example: "generated",
        description: "`generated`: a self-signed certificate made on the head (its private key stays there, 0600), served over https; the `endpoint` output becomes `https://…` and `endpointCertificate` / `endpointCertificateSha256` let clients pin it.",
    },
    {
        path: "ray",
        type: "object",
        required: false,
        example: {},
        description: "The Ray cluster.",
    },
    {
        path: "ray.port",
        type: "integer",
        required: false,
        default: 6379,
        min: 1,
        max: 65535,
        example: 6379,
        description: "GCS port on the head's fabric address; not `vllm.port`.",
    },
    {
        path: "ray.dashboardPort",
        type: "integer",
        required: false,
        default: 8265,
        min: 1,
        max: 65535,
        example: 8265,
        description: "Ray dashboard port, bound to 127.0.0.1 on the head only.",
    },
    {
        path: "probes",
        type: "object",
        required: false,
        example: {},
        description: "How the probes wait. They poll, notice a dead process at once and fail with the root cause.",
    },
    {
        path: "probes.intervalSeconds",
        type: "integer",
        required: false,
        default: 2,
        min: 1,
        max: 2,
        example: 2,
        description: "Seconds between polls.",
    },
    {
        path: "probes.rayTimeoutSeconds",
        type: "integer",
        required: false,
        default: 180,
        min: 5,
        max: 3600,
        example: 180,
        description: "How long every Ray node and GPU may take to join.",
    },
    {
        path: "probes.endpointTimeoutSeconds",
        type: "integer",
        required: false,
        default: 1800,
        min: 5,
        max: 14400,
        example: 1800,
        description: "How long vLLM may take to load and answer a completion (large models load for many minutes).",
    },
    {
        path: "probes.fabric",
        type: "boolean",
        required: false,
        default: true,
        example: true,
        description: "Two or more hosts: before any Ray or vLLM launch, a short NCCL all-reduce with one rank per host inside the containers (the image's own PyTorch and NCCL, the containers' environment, `NCCL_DEBUG=INFO`). `up` fails when HCAs are configured but NCCL used sockets, or the ranks cannot meet; the transport and bus bandwidth become the `fabric` output.",
    },
    {
        path: "probes.fabricTimeoutSeconds",
        type: "integer",
        required: false,
        default: 120,
        min: 10,
        max: 3600,
        example: 120,
        description: "Seconds for the fabric check's ranks to meet and finish.",
    },
    {
        path: "logDir",
        type: "string",
        required: false,
        default: "/var/tmp/spark-vllm",
        example: "/var/tmp/spark-vllm",
        description: "Host directory for logs, pid files and the helper program, an absolute path; mounted in every container.",
    },
    {
        path: "shmSizeMb",
        type: "integer",
        required: false,
        default: 10240,
        min: 64,
        max: 1048576,
        example: 10240,
        description: "Shared memory of each container, MiB.",
    },
    {
        path: "sshPrivateKey",
        type: "string",
        required: false,
        defaultText: "the ssh-agent (`SSH_AUTH_SOCK`)",
        secret: true,
        program: true,
        example: "-----BEGIN OPENSSH PRIVATE KEY-----",
        description: "Private key for the remote commands. The Docker provider always uses the local `ssh` client (agent or `~/.ssh/config`).",
    },
    {
        path: "hfToken",
        type: "string",
        required: false,
        defaultText: "none",
        secret: true,
        program: true,
        example: "hf_example",
        description: "Hugging Face token for gated models; used to download, and only ever on a command's stdin.",
    },
];
