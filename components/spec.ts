// Stack config → typed, validated spec. Pure: no Pulumi in this file.
// Every problem is collected and reported at once, each naming its key path.

export const CONFIG_NAMESPACE = "spark-vllm";

export interface SshSpec {
    host: string;
    user: string;
    /** Default 22. */
    port: number;
}

export interface FabricSpec {
    /** NCCL/Gloo/UCX/TP socket interface, e.g. enp1s0f1np1. */
    interface: string;
    /** This host's fabric IPv4 address: VLLM_HOST_IP and Ray node IP. */
    address: string;
    /** RDMA HCAs for NCCL_IB_HCA; empty means TCP only. */
    hcas: string[];
}

export interface HostSpec {
    name: string;
    ssh: SshSpec;
    fabric: FabricSpec;
    /** Default 1 (one GB10 per Spark). */
    gpus: number;
    /** Docker platform of the host; default linux/arm64 (DGX Spark is aarch64). Preflight checks it. */
    platform: string;
}

export interface ImageRef {
    /** The reference as written in config. */
    reference: string;
    /** Registry host and repository path, e.g. nvcr.io/nvidia/vllm. */
    repository: string;
    tag?: string;
    /** sha256:<64 hex> when pinned. */
    digest?: string;
}

export type WeightsStrategy = "present" | "download" | "head-then-copy";

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
    /** head-then-copy: port on the head's fabric address the workers copy from; default 18080. */
    copyPort: number;
}

export interface VllmSpec {
    tensorParallelSize: number;
    /** Default 1. */
    pipelineParallelSize: number;
    /** Default 8000. */
    port: number;
    /** Default 0.85: the unified memory is shared with the OS, Docker and Ray. */
    gpuMemoryUtilization: number;
    /** Default: the model's own maximum. */
    maxModelLen?: number;
    /** Passed through, shell-quoted. Default []. */
    extraArgs: string[];
    /** The image's vLLM version if known (used by policies at preview); default unknown. */
    version?: string;
}

export interface RaySpec {
    /** GCS port on the head; default 6379. */
    port: number;
    /** Dashboard port, bound to 127.0.0.1 only; default 8265. */
    dashboardPort: number;
}

export interface ProbeSpec {
    /** Seconds between polls; default 2. */
    intervalSeconds: number;
    /** Seconds for all Ray nodes and GPUs to join; default 180. */
    rayTimeoutSeconds: number;
    /** Seconds for vLLM to load and answer; default 1800 (large models load for many minutes). */
    endpointTimeoutSeconds: number;
}

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
}

/** Raw config values by key (without the namespace), as read from the stack. */
export type RawConfig = Record<string, unknown>;

export class SpecError extends Error {
    constructor(public readonly problems: string[]) {
        super(
            `invalid stack config (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n` +
                problems.map(p => `  - ${p}`).join("\n"),
        );
        this.name = "SpecError";
    }
}

const KNOWN_KEYS = ["hosts", "image", "imageSource", "model", "vllm", "ray", "probes", "logDir", "shmSizeMb", "sshPrivateKey", "hfToken"];

/** The flags spark-vllm sets itself; extraArgs may not repeat them. */
export const MANAGED_VLLM_FLAGS: Record<string, string> = {
    "--tensor-parallel-size": "vllm.tensorParallelSize",
    "-tp": "vllm.tensorParallelSize",
    "--pipeline-parallel-size": "vllm.pipelineParallelSize",
    "-pp": "vllm.pipelineParallelSize",
    "--port": "vllm.port",
    "--host": "vllm.port (vLLM listens on all interfaces of the head)",
    "--gpu-memory-utilization": "vllm.gpuMemoryUtilization",
    "--max-model-len": "vllm.maxModelLen",
    "--served-model-name": "model.servedName",
    "--api-key": "the generated apiKey output (never put a key in extraArgs)",
    "--distributed-executor-backend": "spark-vllm (always ray)",
    "--trust-remote-code": "model.trustRemoteCode",
};

const HOST_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const IFACE = /^[A-Za-z0-9_.:-]{1,15}$/;
const HCA = /^[A-Za-z0-9_.-]{1,64}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const REPO_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const REGISTRY_HOST = /^(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$/;
const TAG = /^[\w][\w.-]{0,127}$/;

export function parseIPv4(s: string): number[] | undefined {
    const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
    if (!m) return undefined;
    const parts = m.slice(1).map(Number);
    return parts.every(p => p <= 255) && m.slice(1).every(p => p === "0" || !p.startsWith("0")) ? parts : undefined;
}

/** Parses `[registry/]repo[:tag][@sha256:digest]`; undefined when it cannot be parsed. */
export function parseImageRef(reference: string): ImageRef | undefined {
    let rest = reference.trim();
    if (rest !== reference || rest === "") return undefined;
    let digest: string | undefined;
    const at = rest.indexOf("@");
    if (at >= 0) {
        digest = rest.slice(at + 1);
        rest = rest.slice(0, at);
        if (!DIGEST.test(digest)) return undefined;
    }
    let tag: string | undefined;
    const lastSlash = rest.lastIndexOf("/");
    const colon = rest.lastIndexOf(":");
    if (colon > lastSlash) {
        tag = rest.slice(colon + 1);
        rest = rest.slice(0, colon);
        if (!TAG.test(tag)) return undefined;
    }
    const parts = rest.split("/");
    const first = parts[0];
    const hasRegistry = parts.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost");
    if (hasRegistry && !REGISTRY_HOST.test(first)) return undefined;
    const path = hasRegistry ? parts.slice(1) : parts;
    if (path.length === 0 || !path.every(p => REPO_COMPONENT.test(p))) return undefined;
    return { reference, repository: rest, tag, digest };
}

type Obj = Record<string, unknown>;

/** Collects problems while reading one key path at a time. */
class Reader {
    readonly problems: string[] = [];

    problem(path: string, message: string): void {
        this.problems.push(`${CONFIG_NAMESPACE}:${path}: ${message}`);
    }

    object(value: unknown, path: string, required: boolean): Obj | undefined {
        if (value === undefined || value === null) {
            if (required) this.problem(path, "missing; it is required");
            return undefined;
        }
        if (typeof value !== "object" || Array.isArray(value)) {
            this.problem(path, `must be an object, got ${describe(value)}`);
            return undefined;
        }
        return value as Obj;
    }

    unknownKeys(obj: Obj, path: string, known: string[]): void {
        for (const key of Object.keys(obj)) {
            if (!known.includes(key)) {
                const near = known.find(k => k.toLowerCase() === key.toLowerCase() || editDistance(k, key) <= 2);
                this.problem(`${path}.${key}`, `unknown key${near ? `; did you mean ${near}?` : `; known keys: ${known.join(", ")}`}`);
            }
        }
    }

    string(obj: Obj | undefined, key: string, path: string, fallback?: string): string | undefined {
        const value = obj?.[key];
        if (value === undefined || value === null) {
            if (fallback === undefined) this.problem(`${path}.${key}`, "missing; it is required");
            return fallback;
        }
        if (typeof value !== "string" || value.trim() === "") {
            this.problem(`${path}.${key}`, `must be a non-empty string, got ${describe(value)}`);
            return undefined;
        }
        return value;
    }

    integer(obj: Obj | undefined, key: string, path: string, min: number, max: number, fallback?: number): number | undefined {
        const value = obj?.[key];
        if (value === undefined || value === null) {
            if (fallback === undefined) this.problem(`${path}.${key}`, "missing; it is required");
            return fallback;
        }
        const n = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
        if (typeof n !== "number" || !Number.isInteger(n)) {
            this.problem(`${path}.${key}`, `must be a whole number, got ${describe(value)}`);
            return undefined;
        }
        if (n < min || n > max) {
            this.problem(`${path}.${key}`, `must be between ${min} and ${max}, got ${n}`);
            return undefined;
        }
        return n;
    }

    stringList(obj: Obj | undefined, key: string, path: string, fallback: string[]): string[] | undefined {
        const value = obj?.[key];
        if (value === undefined || value === null) return fallback;
        if (!Array.isArray(value)) {
            this.problem(`${path}.${key}`, `must be a list of strings, got ${describe(value)}`);
            return undefined;
        }
        const bad = value.findIndex(v => typeof v !== "string");
        if (bad >= 0) {
            this.problem(`${path}.${key}[${bad}]`, `must be a string, got ${describe(value[bad])}`);
            return undefined;
        }
        return value as string[];
    }

    boolean(obj: Obj | undefined, key: string, path: string, fallback: boolean): boolean {
        const value = obj?.[key];
        if (value === undefined || value === null) return fallback;
        if (value === "true" || value === "false") return value === "true";
        if (typeof value !== "boolean") {
            this.problem(`${path}.${key}`, `must be true or false, got ${describe(value)}`);
            return fallback;
        }
        return value;
    }
}

function describe(value: unknown): string {
    if (Array.isArray(value)) return "a list";
    if (typeof value === "string") return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "…" : value);
    if (value === null) return "null";
    return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}

function editDistance(a: string, b: string): number {
    const dp = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) dp[0][j] = j;
    for (let i = 1; i <= a.length; i++)
        for (let j = 1; j <= b.length; j++)
            dp[i][j] = Math.min(dp[i - 1][j] + 1, dp[i][j - 1] + 1, dp[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    return dp[a.length][b.length];
}

/** A host as far as it parsed: uniqueness and GPU checks still run on the parts that did. */
interface ParsedHost {
    index: number;
    host?: HostSpec;
    name?: string;
    address?: string;
    sshTarget?: string;
    gpus?: number;
}

function parseHost(r: Reader, raw: unknown, index: number): ParsedHost {
    const path = `hosts[${index}]`;
    const obj = r.object(raw, path, true);
    if (!obj) return { index };
    r.unknownKeys(obj, path, ["name", "ssh", "fabric", "gpus", "platform"]);
    const name = r.string(obj, "name", path);
    if (name !== undefined && !HOST_NAME.test(name)) r.problem(`${path}.name`, `"${name}" must use only a-z, 0-9 and -, and start and end with a letter or digit`);

    const sshPath = `${path}.ssh`;
    const ssh = r.object(obj.ssh, sshPath, true);
    if (ssh) r.unknownKeys(ssh, sshPath, ["host", "user", "port"]);
    const sshHost = r.string(ssh, "host", sshPath);
    if (sshHost !== undefined && !/^[A-Za-z0-9.:_-]+$/.test(sshHost)) r.problem(`${sshPath}.host`, `"${sshHost}" is not a host name or address`);
    const user = r.string(ssh, "user", sshPath);
    if (user !== undefined && !/^[a-z_][a-z0-9_.-]*$/i.test(user)) r.problem(`${sshPath}.user`, `"${user}" is not a valid user name`);
    const port = r.integer(ssh, "port", sshPath, 1, 65535, 22);

    const fabricPath = `${path}.fabric`;
    const fabric = r.object(obj.fabric, fabricPath, true);
    if (fabric) r.unknownKeys(fabric, fabricPath, ["interface", "address", "hcas"]);
    const iface = r.string(fabric, "interface", fabricPath);
    if (iface !== undefined && !IFACE.test(iface)) r.problem(`${fabricPath}.interface`, `"${iface}" is not a network interface name`);
    const address = r.string(fabric, "address", fabricPath);
    if (address !== undefined && !parseIPv4(address)) r.problem(`${fabricPath}.address`, `not an IPv4 address: "${address}"`);
    const hcas = r.stringList(fabric, "hcas", fabricPath, []);
    hcas?.forEach((h, i) => {
        if (!HCA.test(h)) r.problem(`${fabricPath}.hcas[${i}]`, `"${h}" is not an HCA name`);
    });

    const gpus = r.integer(obj, "gpus", path, 1, 16, 1);
    const platform = r.string(obj, "platform", path, "linux/arm64");
    if (platform !== undefined && !/^linux\/(arm64|amd64)$/.test(platform)) r.problem(`${path}.platform`, `must be linux/arm64 or linux/amd64, got "${platform}"`);

    const parsed: ParsedHost = { index, name, address, sshTarget: sshHost && `${sshHost}:${port ?? 22}`, gpus };
    if ([name, sshHost, user, port, iface, address, hcas, gpus, platform].some(v => v === undefined)) return parsed;
    return { ...parsed, host: { name: name!, ssh: { host: sshHost!, user: user!, port: port! }, fabric: { interface: iface!, address: address!, hcas: hcas! }, gpus: gpus!, platform: platform! } };
}

function parseAbsolutePath(r: Reader, obj: Obj | undefined, key: string, path: string, fallback?: string): string | undefined {
    const value = r.string(obj, key, path, fallback);
    if (value !== undefined && !/^\/[A-Za-z0-9._\/@+-]*$/.test(value)) {
        r.problem(`${path}.${key}`.replace(/^\./, ""), `must be an absolute path of letters, digits and ._/@+-, got "${value}"`);
        return undefined;
    }
    return value;
}

/** Parses and validates the stack config; throws SpecError listing every problem. */
export function parseSpec(raw: RawConfig): ClusterSpec {
    const r = new Reader();
    const root: Obj = raw;
    r.unknownKeys(root, "", KNOWN_KEYS);
    // unknownKeys names root keys as ":.key"; tidy that form.
    r.problems.forEach((p, i) => (r.problems[i] = p.replace(`${CONFIG_NAMESPACE}:.`, `${CONFIG_NAMESPACE}:`)));

    let parsedHosts: ParsedHost[] = [];
    const rawHosts = root.hosts;
    if (rawHosts === undefined || rawHosts === null) r.problem("hosts", "missing; list at least one host (the first is the Ray head)");
    else if (!Array.isArray(rawHosts)) r.problem("hosts", `must be a list of hosts, got ${describe(rawHosts)}`);
    else if (rawHosts.length === 0) r.problem("hosts", "is empty; list at least one host (the first is the Ray head)");
    else parsedHosts = rawHosts.map((h, i) => parseHost(r, h, i));
    const hosts = parsedHosts.flatMap(p => (p.host ? [p.host] : []));
    checkUnique(r, parsedHosts, p => p.name, "name", "host names must be unique");
    checkUnique(r, parsedHosts, p => p.address, "fabric.address", "every host needs its own fabric address");
    checkUnique(r, parsedHosts, p => p.sshTarget, "ssh.host", "two hosts reach the same machine over SSH");

    let image: ImageRef | undefined;
    const rawImage = root.image;
    if (rawImage === undefined || rawImage === null) r.problem("image", "missing; set it to <repo>[:tag]@sha256:<digest>, one image for all hosts");
    else if (typeof rawImage !== "string") r.problem("image", `must be a string, got ${describe(rawImage)}`);
    else {
        image = parseImageRef(rawImage);
        if (!image) r.problem("image", `cannot parse "${rawImage}" as an image reference; expected <repo>[:tag][@sha256:<64 hex digits>]`);
    }

    const model = r.object(root.model, "model", true);
    if (model) r.unknownKeys(model, "model", ["id", "servedName", "cacheDir", "trustRemoteCode", "weights", "copyPort"]);
    const modelId = r.string(model, "id", "model");
    if (modelId !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(modelId))
        r.problem("model.id", `"${modelId}" is not a Hugging Face repository id (owner/name)`);
    const servedName = r.string(model, "servedName", "model", modelId ?? "");
    if (servedName !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._\/:-]*$/.test(servedName))
        r.problem("model.servedName", `"${servedName}" may use only letters, digits and ._/:-`);
    const cacheDir = parseAbsolutePath(r, model, "cacheDir", "model");
    const trustRemoteCode = r.boolean(model, "trustRemoteCode", "model", false);
    const weights = r.string(model, "weights", "model", "present");
    if (weights !== undefined && !["present", "download", "head-then-copy"].includes(weights))
        r.problem("model.weights", `must be present, download or head-then-copy, got "${weights}"`);
    const copyPort = r.integer(model, "copyPort", "model", 1, 65535, 18080);

    const vllm = r.object(root.vllm, "vllm", false) ?? {};
    r.unknownKeys(vllm, "vllm", ["tensorParallelSize", "pipelineParallelSize", "port", "gpuMemoryUtilization", "maxModelLen", "extraArgs", "version"]);
    const gpusKnown = parsedHosts.length > 0 && parsedHosts.every(p => p.gpus !== undefined);
    const totalGpus = parsedHosts.reduce((n, p) => n + (p.gpus ?? 0), 0);
    const pp = r.integer(vllm, "pipelineParallelSize", "vllm", 1, 64, 1);
    const tp = r.integer(vllm, "tensorParallelSize", "vllm", 1, 64, pp && totalGpus ? Math.max(1, Math.floor(totalGpus / pp)) : 1);
    if (tp !== undefined && pp !== undefined && gpusKnown && tp * pp !== totalGpus)
        r.problem("vllm.tensorParallelSize", `TP × PP = ${tp} × ${pp} = ${tp * pp}, but the hosts have ${totalGpus} GPU${totalGpus === 1 ? "" : "s"} in all; set TP × PP to ${totalGpus} or change the hosts`);
    const port = r.integer(vllm, "port", "vllm", 1, 65535, 8000);
    let gmu: number | undefined = 0.85;
    if (vllm.gpuMemoryUtilization !== undefined) {
        const v = typeof vllm.gpuMemoryUtilization === "string" ? Number(vllm.gpuMemoryUtilization) : vllm.gpuMemoryUtilization;
        if (typeof v !== "number" || !Number.isFinite(v) || v <= 0 || v > 1) {
            r.problem("vllm.gpuMemoryUtilization", `must be a number in (0, 1], got ${describe(vllm.gpuMemoryUtilization)}`);
            gmu = undefined;
        } else gmu = v;
    }
    const maxModelLen = vllm.maxModelLen === undefined ? undefined : r.integer(vllm, "maxModelLen", "vllm", 1, 16_777_216);
    const extraArgs = r.stringList(vllm, "extraArgs", "vllm", []);
    extraArgs?.forEach((arg, i) => {
        const flag = arg.split("=")[0];
        if (MANAGED_VLLM_FLAGS[flag]) r.problem(`vllm.extraArgs[${i}]`, `${flag} is set by spark-vllm from ${MANAGED_VLLM_FLAGS[flag]}; remove it from extraArgs`);
    });
    const version = vllm.version === undefined ? undefined : r.string(vllm, "version", "vllm");
    if (version !== undefined && !/^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9.+-]*)?$/.test(version)) r.problem("vllm.version", `"${version}" is not a version such as 0.17.1`);

    const ray = r.object(root.ray, "ray", false) ?? {};
    r.unknownKeys(ray, "ray", ["port", "dashboardPort"]);
    const rayPort = r.integer(ray, "port", "ray", 1, 65535, 6379);
    const dashboardPort = r.integer(ray, "dashboardPort", "ray", 1, 65535, 8265);
    if (rayPort !== undefined && rayPort === port) r.problem("ray.port", `${rayPort} is also vllm.port; give Ray and vLLM different ports`);
    if (copyPort !== undefined && weights === "head-then-copy" && (copyPort === port || copyPort === rayPort))
        r.problem("model.copyPort", `${copyPort} is also ${copyPort === port ? "vllm.port" : "ray.port"}; pick a free port for the weights copy`);

    const probes = r.object(root.probes, "probes", false) ?? {};
    r.unknownKeys(probes, "probes", ["intervalSeconds", "rayTimeoutSeconds", "endpointTimeoutSeconds"]);
    const intervalSeconds = r.integer(probes, "intervalSeconds", "probes", 1, 2, 2);
    const rayTimeoutSeconds = r.integer(probes, "rayTimeoutSeconds", "probes", 5, 3600, 180);
    const endpointTimeoutSeconds = r.integer(probes, "endpointTimeoutSeconds", "probes", 5, 14400, 1800);

    const logDir = parseAbsolutePath(r, root, "logDir", "", "/var/tmp/spark-vllm");
    const shmSizeMb = r.integer(root, "shmSizeMb", "", 64, 1_048_576, 10240);
    const imageSource = r.string(root, "imageSource", "", "registry");
    if (imageSource !== undefined && imageSource !== "registry" && imageSource !== "head")
        r.problem("imageSource", `must be registry or head, got "${imageSource}"`);

    if (r.problems.length > 0) throw new SpecError(r.problems.map(p => p.replace(`${CONFIG_NAMESPACE}:.`, `${CONFIG_NAMESPACE}:`)));
    return {
        hosts,
        image: image!,
        model: { id: modelId!, servedName: servedName!, cacheDir: cacheDir!, trustRemoteCode, weights: weights as WeightsStrategy, copyPort: copyPort! },
        vllm: { tensorParallelSize: tp!, pipelineParallelSize: pp!, port: port!, gpuMemoryUtilization: gmu!, maxModelLen, extraArgs: extraArgs!, version },
        ray: { port: rayPort!, dashboardPort: dashboardPort! },
        probes: { intervalSeconds: intervalSeconds!, rayTimeoutSeconds: rayTimeoutSeconds!, endpointTimeoutSeconds: endpointTimeoutSeconds! },
        logDir: logDir!,
        shmSizeMb: shmSizeMb!,
        imageSource: imageSource as ClusterSpec["imageSource"],
    };
}

function checkUnique(r: Reader, hosts: ParsedHost[], key: (h: ParsedHost) => string | undefined, field: string, why: string): void {
    const seen = new Map<string, number>();
    for (const h of hosts) {
        const k = key(h);
        if (k === undefined) continue;
        const first = seen.get(k);
        if (first === undefined) seen.set(k, h.index);
        else r.problem(`hosts[${h.index}].${field}`, `"${k.replace(/:22$/, "")}" repeats hosts[${first}].${field}; ${why}`);
    }
}
