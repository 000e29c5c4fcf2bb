// spec → plan: every container, environment, command line and probe as plain data.
// Pure and deterministic: no Pulumi, no clock, no randomness. Components consume it.
import * as zlib from "zlib";
import { ClusterSpec, HostSpec } from "../spec/spec";
import { argvLine, dockerExec, dockerExecScript, detachedLaunch, ifContainerRunning, pidFromFile, script, shq, stopByPidFile, withTimeout } from "./scripts";
import { findModel } from "../knowledge/catalog";
import { MEMORY_DEFAULTS } from "./memory";
import { TOOLS_FILE, toolsProgram } from "./toolsProgram";
import { containerName } from "./naming";
import { pinTools } from "./verifiedRun";
import { RAY_NON_CARRY_OVER, RAY_TOKEN_FILE, installRayToken, rayAuthEnv } from "./rayAuth";
import { proxyConfig, proxyContainer, proxyDir, proxyTls } from "./proxyPlan";
import { OWNER_LABELS, Owner, ownerArgs, ownerEnv, ownerLabels, proxyOwnerLabels } from "./ownership";
import { memoryGateUrns, replaceCommand } from "./relaunch";
import { API_KEY_FILE, LaunchRecord, RECORDS_DIR, commRunning, keepIfSame, pidFileRunning, withoutLock, installApiKey, lockRecords, removeRecord, supervisorEntrypoint, writeRecord } from "./launches";

export { containerName, toolsProgram };

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
    mounts: Array<{ hostPath: string; containerPath: string }>;
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
    /** Ray backend only: the exact `ray start` argv, and the command that runs it in the container. */
    rayStartArgv?: string[];
    rayLaunch?: CommandPlan;
    /** mp backend, workers only: this host's `vllm serve --headless` argv and its launch. */
    vllmServeArgv?: string[];
    vllmLaunch?: CommandPlan;
    /**
     * Two or more hosts, unless `probes.fabric` is false: this host's rank of the NCCL all-reduce across the hosts
     * (components/remote/spark_vllm/fabric.py), run in its container before any launch. Every rank runs at once.
     */
    fabricRank?: CommandPlan;
    /**
     * Before every vLLM launch: drops the page cache on the host, then compares free memory as CUDA sees it
     * in the container with what vLLM will ask for (unified memory; components/remote/spark_vllm/memory.py).
     */
    memoryGate: CommandPlan;
    /**
     * Once the endpoint answered: free memory left in this host's container with vLLM loaded (CUDA free, MemAvailable),
     * a warning below LOW_AFTER_LOAD_GIB (components/remote/spark_vllm/memory.py memory-after-load; docs/memory.md).
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

/** Environment of one host's container: Ray cannot forward it at serve time, so it is set at start. */
export function containerEnv(spec: ClusterSpec, host: HostSpec): Array<[string, string]> {
    const iface = host.fabric.interface;
    const env: Array<[string, string]> = [
        ["VLLM_HOST_IP", host.fabric.address],
        ["RAY_NODE_IP_ADDRESS", host.fabric.address],
        ["NCCL_SOCKET_IFNAME", iface],
        ["GLOO_SOCKET_IFNAME", iface],
        ["TP_SOCKET_IFNAME", iface],
        ["UCX_NET_DEVICES", iface],
        ["OMPI_MCA_btl_tcp_if_include", iface],
    ];
    if (host.fabric.hcas.length > 0) env.push(["NCCL_IB_HCA", host.fabric.hcas.join(",")], ["NCCL_IB_DISABLE", "0"]);
    else env.push(["NCCL_IB_DISABLE", "1"]);
    env.push(
        ["HF_HOME", spec.model.cacheDir],
        // Weights are on every host before launch; never let a rank reach for the hub mid-load.
        ["HF_HUB_OFFLINE", spec.model.weights === "present" ? "1" : "0"],
        // Ray's memory monitor misreads unified memory and kills workers during load.
        ["RAY_memory_monitor_refresh_ms", "0"],
        ["SPARK_VLLM_HOST", host.name],
        // Compile caches kept on the host, inside the mounted HF cache, so a relaunch or a second `up` loads instead
        // of compiling again: vLLM's torch.compile cache (VLLM_CACHE_ROOT, vllm/envs.py), Triton's
        // (TRITON_CACHE_DIR, triton/runtime/cache.py) and Inductor's (TORCHINDUCTOR_CACHE_DIR, torch/_inductor).
        ["VLLM_CACHE_ROOT", `${spec.model.cacheDir}/spark-vllm-compile/vllm`],
        ["TRITON_CACHE_DIR", `${spec.model.cacheDir}/spark-vllm-compile/triton`],
        ["TORCHINDUCTOR_CACHE_DIR", `${spec.model.cacheDir}/spark-vllm-compile/inductor`],
    );
    // Ray token authentication for every Ray process in the container; a Ray older than 2.52 ignores it (rayAuth.ts).
    if (spec.vllm.backend === "ray") env.push(...rayAuthEnv());
    return env;
}

/**
 * The names of containerEnv whose value differs between any two hosts of the plan (VLLM_HOST_IP, and NCCL_SOCKET_IFNAME,
 * NCCL_IB_HCA, UCX_NET_DEVICES, GLOO_SOCKET_IFNAME, … whenever the hosts' ports or HCAs are named differently), sorted.
 * vLLM's Ray executor would send the head's values of the NCCL_/UCX_/VLLM_/HF_… ones to every worker, overwriting
 * the worker's own (vllm/ray/ray_env.py get_env_vars_to_copy, vllm-project/vllm#14099): each stays on its host.
 */
export function perHostEnvNames(spec: ClusterSpec): string[] {
    const values = new Map<string, Set<string>>();
    const envs = spec.hosts.map(h => new Map(containerEnv(spec, h)));
    for (const env of envs) for (const name of env.keys()) values.set(name, new Set());
    for (const [name, seen] of values) for (const env of envs) seen.add(env.get(name) ?? "\u0000unset");
    return [...values].filter(([, seen]) => seen.size > 1).map(([name]) => name).sort();
}

/** What the head lists in vLLM's ray_non_carry_over_env_vars.json: the API key and every per-host variable. */
export function rayNonCarryOver(spec: ClusterSpec): string[] {
    return [...new Set([...RAY_NON_CARRY_OVER, ...perHostEnvNames(spec)])].sort();
}

function containerPlan(spec: ClusterSpec, host: HostSpec, role: Role, owner?: Owner): ContainerPlan {
    const sameDir = (p: string) => ({ hostPath: p, containerPath: p });
    return {
        name: containerName(host.name),
        image: spec.image.reference,
        platform: host.platform,
        // The owner in every process docker exec starts there (components/plan/ownership.ts).
        env: [...containerEnv(spec, host), ...(owner ? [ownerEnv(owner)] : [])],
        mounts: [sameDir(spec.model.cacheDir), sameDir(spec.logDir)],
        devices: host.fabric.hcas.length > 0 ? [sameDir("/dev/infiniband")] : [],
        ulimits: [
            { name: "memlock", soft: -1, hard: -1 },
            { name: "stack", soft: 67108864, hard: 67108864 },
        ],
        // As dockerd stores and reports it (docker/docker v28.3.0 oci/caps/utils.go NormalizeLegacyCapabilities adds the
        // CAP_ prefix): the docker provider's Read takes HostConfig.CapAdd as it is (kreuzwerker/terraform-provider-docker
        // v4.5.0 resource_docker_container_funcs.go), so "IPC_LOCK" read back as "CAP_IPC_LOCK" after a refresh and
        // replaced every container on the next up (issue 37).
        capabilities: ["CAP_IPC_LOCK"],
        // Moot while ipcMode is host: /dev/shm is then the host's and Docker ignores --shm-size (docker run reference,
        // --ipc). Kept so the container is still sound if IPC is ever made private (Docker's default is only 64 MB).
        shmSizeMb: spec.shmSizeMb,
        networkMode: "host",
        ipcMode: "host",
        gpus: "all",
        init: true,
        // The main process is the supervisor (components/plan/launches.ts): Ray and vLLM are started by docker exec, each
        // its own declared command, and the supervisor runs them again from their records after a reboot or a crash.
        ...supervisorEntrypoint(toolsPath(spec)),
        labels: [
            ["spark-vllm.host", host.name],
            ["spark-vllm.role", role],
            ["spark-vllm.gpus", String(host.gpus)],
            ...(owner ? ownerLabels(owner, spec) : []),
        ],
    };
}

export const toolsPath = (spec: ClusterSpec) => `${spec.logDir}/${TOOLS_FILE}`;
const servingResultFile = (spec: ClusterSpec) => `${spec.logDir}/serving-proof.json`;
const weightsSourcePidFile = (spec: ClusterSpec) => `${spec.logDir}/weights-source.pid`;
/** Which workers received which revision from the copy server (weights_source.py), so a re-run serves one that failed. */
const weightsCopiedRecord = (spec: ClusterSpec) => `${spec.logDir}/weights-copied.json`;

/**
 * What a stack leaves under logDir once its processes are gone: the vLLM log and pid, the serving proof's figures (the
 * next deploy's baseline), the head-then-copy server's pid, the proxy's directory. Removed when the helper program
 * goes (destroy) and no container of the stack is left on the host, so a variant switch starts clean; kept on a
 * program upgrade (the containers are there), so a running vLLM keeps its log and pid.
 */
function stackFiles(spec: ClusterSpec): string[] {
    const { log, pidFile } = vllmFiles(spec);
    const result = servingResultFile(spec);
    return [log, `${log}.prev`, pidFile, result, `${result}.tmp`, weightsSourcePidFile(spec), weightsCopiedRecord(spec), proxyDir(spec)];
}

function tools(spec: ClusterSpec, args: readonly string[]): string[] {
    return ["python3", toolsPath(spec), ...args];
}

function json(value: unknown): string {
    return JSON.stringify(value);
}

/** The helper program's install: its text, and what goes on stdin (packTools). */
export interface ToolsInstall extends CommandPlan {
    content: string;
    packed: string;
}

/**
 * The helper program as it travels on the tools command's stdin: zlib-compressed, base64 (52 KB for 123 KB).
 * Every host's registration and state carry it, three times over in the program: the request, the response (a
 * command's outputs echo its inputs) and the SDK's debug log of that response (@pulumi/pulumi 3.276.0
 * runtime/resource.js: `RegisterResource RPC finished: ...resp: ${innerResponse}`), each encoded through a plain
 * array, one element per byte (google-protobuf 3.21.4 jspb.BinaryEncoder writeString). At 64 hosts the plain
 * text was the largest part of the program's allocations (bench/evaluate/results.md).
 */
export function packTools(content: string): string {
    return zlib.deflateSync(Buffer.from(content, "utf8"), { level: 9 }).toString("base64");
}
/** Undoes packTools on the host, with the python3 the helper program needs anyway (stdlib base64 and zlib). */
const UNPACK_TOOLS = "import base64, sys, zlib; sys.stdout.buffer.write(zlib.decompress(base64.b64decode(sys.stdin.buffer.read())))";

/**
 * Issue 30: every directory above logDir, up to `/`, must be owned by root or the SSH user and writable by no
 * one else, or their owner could rename logDir away and put a program of their own in its place, which the SSH user and
 * container root would then run. Checked on the literal path (each prefix followed, `stat -L`) and on its resolved one
 * (`realpath`), so a link on the way counts both for where it sits and where it leads. A world- or group-writable
 * directory with the sticky bit (`/tmp`, `/var/tmp`) is accepted: there only an entry's owner (or the directory's, or
 * root) may rename or remove it (unlink(2), rename(2) EACCES/EPERM with S_ISVTX), and the entry below it is itself
 * checked, so a name someone else made first there is refused by its owner. Every bad directory is named, with its
 * owner, mode and fix, before any file is written (mkdir -p only adds the missing directories, as the SSH user). logDir itself must be the SSH user's own and
 * writable by no one else, sticky or not (checked right after).
 */
function logDirChainCheck(logDir: string): string[] {
    const dir = shq(logDir);
    return [
        `me=$(id -u); owners=root; [ "$me" = 0 ] || owners="root or $(id -un)"; chain_bad=; seen=; real=$(realpath -e ${dir}) || exit 1`,
        `for top in "$real" ${dir}; do`,
        `  d=$(dirname "$top")`,
        `  while :; do`,
        `    info=$(stat -L -c '%u %U %a %A' "$d") || exit 1`,
        `    set -- $info`,
        `    what="$d (above logDir $top)"`,
        `    case "$seen" in *"|$d|"*) set -- 0 root 755 seen ;; esac; seen="$seen|$d|"`,
        `    if [ "$1" != 0 ] && [ "$1" != "$me" ]; then`,
        `      echo "spark-vllm: $what is owned by uid $1 ($2), mode $4: only $owners may own logDir and the directories above it, since their owner could swap the programs spark-vllm runs there as root; fix: sudo chown root $d && sudo chmod go-w $d, or set spark-vllm:logDir to a directory of your own" >&2; chain_bad=1`,
        `    elif [ $(( 0$3 & 022 )) -ne 0 ] && [ $(( 0$3 & 01000 )) -eq 0 ]; then`,
        `      echo "spark-vllm: $what is writable by others (owner $2, mode $4) without the sticky bit: anyone who can write it could rename logDir away and plant programs; fix: sudo chmod go-w $d, or set spark-vllm:logDir to a directory of your own" >&2; chain_bad=1`,
        `    fi`,
        `    [ "$d" = / ] && break`,
        `    d=$(dirname "$d")`,
        `  done`,
        `  [ "$real" = ${dir} ] && break`,
        `done`,
        `[ -z "$chain_bad" ] || exit 1`,
    ];
}

/**
 * Writes the helper program, which the SSH user and container root then run, into logDir. The default logDir sits in
 * world-writable /var/tmp, so a local user who made it first could replace the program: logDir must be the SSH
 * user's own and not writable by others (else refused, naming the owner and the fix), is made private (700), and
 * the program goes in under a name mktemp picks, then renamed over the old one (a planted file or link is replaced,
 * never written through).
 */
function toolsInstall(spec: ClusterSpec, host: HostSpec, content: string, packed: string, owner?: Owner): ToolsInstall {
    const dir = shq(spec.logDir);
    const refuse = (why: string) => `{ echo ${shq(`spark-vllm: ${spec.logDir} `)}"${why}"${shq(`; remove it or set spark-vllm:logDir to a directory of your own`)} >&2; exit 1; }`;
    // vLLM imports the key guard from logDir (withPythonPath), so Python leaves its bytecode cache there too.
    const removeTools = `rm -rf ${shq(toolsPath(spec))} ${shq(`${spec.logDir}/__pycache__`)}`;
    return {
        content,
        packed,
        create: script([
            "umask 077",
            `mkdir -p ${dir} || exit 1`,
            ...logDirChainCheck(spec.logDir),
            `owner=$(stat -c %u ${dir}) && mode=$(stat -c %A ${dir}) || exit 1`,
            `[ "$owner" = "$(id -u)" ] || ${refuse("is owned by uid $owner, not by $(id -un): another user could replace the programs spark-vllm runs there")}`,
            `case "$mode" in ?????w????|????????w?) ${refuse("is writable by others ($mode): files in it could have been planted")};; esac`,
            `chmod 700 ${dir} || exit 1`,
            `tmp=$(mktemp ${shq(`${spec.logDir}/.${TOOLS_FILE}.XXXXXX`)}) || exit 1`,
            // A host another stack holds is refused before its logDir gets our program (components/plan/ownership.ts).
            `python3 -c ${shq(UNPACK_TOOLS)} > "$tmp" && chmod 755 "$tmp" && ${owner ? `python3 "$tmp" ${argvLine(["host-owner", json({ host: host.name, owner: ownerArgs(owner) })])} && ` : ""}sum=$(sha256sum "$tmp" | cut -d' ' -f1) && mv -f "$tmp" ${shq(toolsPath(spec))} || { rm -f "$tmp"; exit 1; }`,
            // The container's supervisor runs only the program whose sha256 is pinned in it (components/plan/verifiedRun.ts).
            ...pinTools(containerName(host.name), "sum"),
        ]),
        delete: owner ? script([
            removeTools,
            `ids=$(${argvLine(["docker", "ps", "-aq", "--filter", `label=${OWNER_LABELS.project}=${owner.project}`, "--filter", `label=${OWNER_LABELS.stack}=${owner.stack}`])}) || exit 0`,
            `[ -n "$ids" ] || rm -rf ${stackFiles(spec).map(shq).join(" ")}`,
        ]) : removeTools,
        timeoutSeconds: 30,
    };
}

function preflight(spec: ClusterSpec, host: HostSpec, owner?: Owner): CommandPlan {
    const args = {
        host: host.name,
        platform: host.platform,
        gpus: host.gpus,
        fabric: host.fabric,
        cacheDir: spec.model.cacheDir,
        ...(owner ? { owner: ownerArgs(owner) } : {}),
    };
    return { create: withTimeout(60, argvLine(tools(spec, ["preflight", json(args)]))), timeoutSeconds: 60 };
}

const copySource = (spec: ClusterSpec) => `http://${spec.hosts[0].fabric.address}:${spec.model.copyPort}`;

/** head-then-copy: how long the head's server waits with no request before it stops, and a worker for the server. */
export const COPY_IDLE_SECONDS = 300;
const COPY_SECONDS = 4 * 3600;

/** What the weights command compares the model's real size with: memory.ts planMemory's figures per GPU. */
export function weightsFitArgs(spec: ClusterSpec) {
    return {
        tensorParallelSize: spec.vllm.tensorParallelSize,
        pipelineParallelSize: spec.vllm.pipelineParallelSize,
        gpuMemoryUtilization: spec.vllm.gpuMemoryUtilization,
        usableGiB: MEMORY_DEFAULTS.usableGiB,
        reserveGiB: MEMORY_DEFAULTS.reserveGiB,
    };
}

function weights(spec: ClusterSpec, host: HostSpec, hasToken: boolean): CommandPlan {
    const isHead = host === spec.hosts[0];
    const strategy = spec.model.weights === "present" ? "present"
        : spec.model.weights === "download" || isHead ? "download" : "copy";
    const entry = findModel(spec.model.id);
    // The first stdin line is the secret the strategy needs: the HF token (download), the copy token (copy).
    const stdin = strategy === "copy" ? "weightsToken" as const : strategy === "download" && hasToken ? "hfToken" as const : undefined;
    const args = {
        host: host.name,
        model: spec.model.id,
        cacheDir: spec.model.cacheDir,
        strategy,
        ...(stdin ? { tokenOnStdin: true } : {}),
        ...(strategy === "download" && entry ? { expectedBytes: entry.weightBytes } : {}),
        // The real size (hub listing before a download, safetensors headers on disk) against this much memory per GPU:
        // refused with the figures before any download or launch (spark_vllm/weights_size.py; docs/memory.md).
        fit: weightsFitArgs(spec),
        ...(strategy === "copy" ? { source: copySource(spec), waitSeconds: COPY_IDLE_SECONDS / 2 } : {}),
    };
    const seconds = strategy === "present" ? 120 : COPY_SECONDS;
    return {
        create: withTimeout(seconds, dockerExec(containerName(host.name), tools(spec, ["weights", json(args)]), { stdin: !!stdin })),
        ...(stdin ? { stdin } : {}),
        timeoutSeconds: seconds,
    };
}

/**
 * head-then-copy: the head's file server for its snapshot, on its fabric address, run in the foreground of this
 * command while the workers copy (components/remote/spark_vllm/weights_source.py): it needs the copy token (stdin),
 * and it ends once every worker has reported its copy, so nothing serves the weights after `up`. A server left by an
 * interrupted run is stopped first, and by delete (its pid file).
 */
function weightsSource(spec: ClusterSpec): CommandPlan | undefined {
    if (spec.model.weights !== "head-then-copy" || spec.hosts.length < 2) return undefined;
    const head = spec.hosts[0];
    const pidFile = weightsSourcePidFile(spec);
    const record = weightsCopiedRecord(spec);
    const args = {
        host: head.name, model: spec.model.id, cacheDir: spec.model.cacheDir, bind: head.fabric.address, port: spec.model.copyPort,
        workers: spec.hosts.slice(1).map(h => h.name), idleSeconds: COPY_IDLE_SECONDS, pidFile,
        // Which workers received the weights in an earlier run: a worker that failed before it asked fails this
        // command, so a re-run of `up` serves it again while those keep their copies (weights_source.py CopyState).
        record,
    };
    const stop = stopByPidFile(pidFile, 10);
    const seconds = COPY_SECONDS + 60;
    return {
        create: withTimeout(seconds, dockerExecScript(containerName(head.name), script([
            ...stop,
            `exec ${argvLine(tools(spec, ["serve-weights", json(args)]))}`,
        ]), { stdin: true })),
        // The record goes with the server (destroy, or a replacement that runs every worker's copy again), container or not.
        delete: `rm -f ${shq(record)}; ${ifContainerRunning(containerName(head.name), withTimeout(60, dockerExecScript(containerName(head.name), script(stop))))}`,
        stdin: "weightsToken",
        timeoutSeconds: seconds,
    };
}

function imageFromHead(spec: ClusterSpec, host: HostSpec): CommandPlan | undefined {
    if (spec.imageSource !== "head") return undefined;
    const ref = spec.image.reference;
    if (host === spec.hosts[0])
        return { create: withTimeout(60, argvLine(["docker", "image", "inspect", "--format", "{\"imageId\":\"{{.Id}}\"}", ref])), timeoutSeconds: 60 };
    const args = { host: spec.hosts[0].name, image: ref, target: { name: host.name, user: host.ssh.user, address: host.fabric.address, ...(host.ssh.hostKey ? { hostKey: host.ssh.hostKey } : {}) } };
    return { create: withTimeout(7200, argvLine(tools(spec, ["image-transfer", json(args)]))), timeoutSeconds: 7200 };
}

function rayStartArgv(spec: ClusterSpec, host: HostSpec, role: Role, head: HostSpec): string[] {
    const common = [`--node-ip-address=${host.fabric.address}`, `--num-gpus=${host.gpus}`, "--disable-usage-stats"];
    if (role === "head")
        return ["ray", "start", "--head", `--port=${spec.ray.port}`, ...common,
            // Without token authentication (Ray < 2.52) the dashboard runs anyone's jobs: it stays on loopback either way.
            "--dashboard-host=127.0.0.1", `--dashboard-port=${spec.ray.dashboardPort}`];
    return ["ray", "start", `--address=${head.fabric.address}:${spec.ray.port}`, ...common];
}

/**
 * A worker's `ray start` that cannot reach the head's GCS retries for minutes, logging only "Failed to connect to GCS at
 * address H:P within 5 seconds." (measured on Ray 2.52 and 2.60): the launch checks the port first and fails in seconds
 * with the address and what to check.
 */
function gcsReachable(head: string, port: number): string[] {
    const message = `spark-vllm: cannot reach the head's Ray GCS at ${head}:${port} from this host within 10 s: check that the head's Ray ` +
        `launch succeeded and that nothing between the hosts drops TCP port ${port} (spark-vllm:ray.port) on the fabric`;
    return [`timeout 10 bash -c ${shq(`exec 3<>/dev/tcp/${head}/${port}`)} 2>/dev/null || { echo ${shq(message)} >&2; exit 1; }`];
}

/**
 * Starts Ray in a host's container. The cluster's token comes on stdin and goes into a private file in the container
 * before `ray start` (rayAuth.ts), which the container's RAY_AUTH_MODE/RAY_AUTH_TOKEN_PATH point every Ray process at.
 * Under the records' lock: the old record goes, a Ray left by a failed earlier `up` is stopped (create is repeatable),
 * Ray starts, and the record the supervisor relaunches from is written (components/plan/launches.ts).
 */
function rayLaunch(spec: ClusterSpec, container: string, argv: string[], role: Role): CommandPlan {
    const stop = ifContainerRunning(container, withTimeout(60, dockerExecScript(container, script([
        ...lockRecords(), ...removeRecord("ray"), "ray stop --force", `rm -f ${shq(RAY_TOKEN_FILE)}`]))));
    const head = spec.hosts[0].fabric.address;
    const record: LaunchRecord = {
        name: "ray", argv, log: `${spec.logDir}/ray-start.log`,
        // The daemon whose absence means Ray is down here: the head's GCS, a worker's raylet (the executables
        // GCS_SERVER_EXECUTABLE and RAYLET_EXECUTABLE, ray-project/ray python/ray/_private/services.py).
        process: role === "head" ? "gcs_server" : "raylet",
        before: [["ray", "stop", "--force"]],
        ...(role === "worker" ? { gate: { tcp: `${head}:${spec.ray.port}` } } : {}),
    };
    return {
        create: withTimeout(180, dockerExecScript(container, script([
            "set -e", ...lockRecords(),
            `old_token=$(cat ${shq(RAY_TOKEN_FILE)} 2>/dev/null || true)`,
            ...installRayToken(),
            // Idempotent by content: the same Ray, running, with the same token, is kept (components/plan/launches.ts).
            ...keepIfSame(record, { running: commRunning(record.process!), secret: { variable: "old_token", file: RAY_TOKEN_FILE } }),
            ...removeRecord("ray"),
            "ray stop --force >/dev/null 2>&1 || true",
            ...(role === "worker" ? gcsReachable(head, spec.ray.port) : []),
            // `ray start` leaves daemons behind: they must not hold docker exec's stdin, nor the lock.
            withoutLock(argv),
            ...writeRecord(record),
        ]), { stdin: true })),
        delete: stop,
        stdin: "rayToken",
        timeoutSeconds: 180,
    };
}

/**
 * The exact `vllm serve` argv of host `rank` (0 is the head, the only one serving the API). Ray: the executor
 * flag, and vLLM places its workers through Ray. mp: vLLM's own multi-node launch (vllm-project/vllm#23691,
 * docs/serving/parallelism_scaling.md): every host runs `vllm serve` with `--nnodes/--node-rank/--master-addr/
 * --master-port`, all but the head `--headless`. One host: neither.
 */
export function vllmServeArgv(spec: ClusterSpec, rank = 0): string[] {
    const { vllm, model } = spec;
    const multiNode = vllm.backend !== "mp" ? [] : [
        "--nnodes", String(spec.hosts.length), "--node-rank", String(rank),
        "--master-addr", spec.hosts[0].fabric.address, "--master-port", String(vllm.masterPort),
        ...(rank > 0 ? ["--headless"] : []),
    ];
    return [
        "vllm", "serve", model.id,
        "--served-model-name", model.servedName,
        "--tensor-parallel-size", String(vllm.tensorParallelSize),
        "--pipeline-parallel-size", String(vllm.pipelineParallelSize),
        ...(vllm.backend === "ray" ? ["--distributed-executor-backend", "ray"] : []),
        ...multiNode,
        // vLLM answers only on the head's loopback; the endpoint proxy publishes vllm.port and guards every path
        // (components/plan/proxyPlan.ts). extraArgs cannot move either (components/spec/extraArgs.ts MANAGED_VLLM_FLAGS).
        "--host", "127.0.0.1",
        "--port", String(vllm.internalPort),
        // The API key on every path but /health, for the head's own accounts too (vLLM's --api-key guards only /v1):
        // components/remote/spark_vllm/keyguard.py, imported from the helper program (vllmLaunch puts logDir on PYTHONPATH).
        ...(rank === 0 ? ["--middleware", KEYGUARD_MIDDLEWARE] : []),
        "--gpu-memory-utilization", String(vllm.gpuMemoryUtilization),
        ...(vllm.maxModelLen !== undefined ? ["--max-model-len", String(vllm.maxModelLen)] : []),
        ...(model.trustRemoteCode ? ["--trust-remote-code"] : []),
        ...vllm.extraArgs,
    ];
}

/** The Ray probe's arguments: every host's node and GPUs joined the head within timeoutSeconds. */
function rayProbeArgs(spec: ClusterSpec, timeoutSeconds: number) {
    const head = spec.hosts[0];
    return {
        address: `${head.fabric.address}:${spec.ray.port}`,
        nodes: spec.hosts.map(h => ({ name: h.name, address: h.fabric.address, gpus: h.gpus })),
        gpus: spec.hosts.reduce((n, h) => n + h.gpus, 0),
        timeoutSeconds,
        intervalSeconds: spec.probes.intervalSeconds,
    };
}

/** The ASGI middleware (`--middleware` import path) that asks the API key on every path of vLLM's port but /health. */
export const KEYGUARD_MIDDLEWARE = `${TOOLS_FILE.replace(/\.py$/, "")}.SparkVllmKeyGuard`;

/**
 * ARGV run with DIR first on Python's import path, the image's own PYTHONPATH (if any) kept after it, as the same
 * process (`exec`: the pid file's pid and start time stay vLLM's). sh's `$0` is DIR; nothing is pasted into the script.
 */
export function withPythonPath(dir: string, argv: readonly string[]): string[] {
    return ["sh", "-c", 'PYTHONPATH="$0${PYTHONPATH:+:$PYTHONPATH}" exec "$@"', dir, ...argv];
}

const vllmFiles = (spec: ClusterSpec) => ({ log: `${spec.logDir}/vllm-serve.log`, pidFile: `${spec.logDir}/vllm-serve.pid` });

/**
 * Starts `vllm serve` detached in a host's container. The head's reads the API key from stdin (never in command
 * text, diffs or errors) into a 0600 file in the container, which a relaunch reads it from; an mp worker's is headless
 * and serves no API. Under the records' lock: the old record goes, a server left by a failed earlier `up` is stopped
 * (the port is free and create is repeatable), vLLM starts, and the record is written (components/plan/launches.ts).
 */
function vllmLaunch(spec: ClusterSpec, host: HostSpec, serveArgv: string[], serves: boolean): CommandPlan {
    const { log, pidFile } = vllmFiles(spec);
    // The head's vLLM imports its key guard (KEYGUARD_MIDDLEWARE) from the helper program in logDir.
    const argv = serves ? withPythonPath(spec.logDir, serveArgv) : serveArgv;
    const container = containerName(host.name);
    const stop = stopByPidFile(pidFile, 60);
    const ray = spec.vllm.backend === "ray";
    const record: LaunchRecord = {
        name: "vllm", argv, log, pidFile,
        ...(serves ? { secretEnv: { VLLM_API_KEY: API_KEY_FILE } } : {}),
        ...(ray ? { after: ["ray" as const], gate: { argv: tools(spec, ["ray-probe", json(rayProbeArgs(spec, 10))]), timeoutSeconds: 40 } } : {}),
        // /health answers without the API key (the key guard and vLLM's own check leave it open).
        ...(serves ? { healthUrl: `http://127.0.0.1:${spec.vllm.internalPort}/health` } : { provenAfterSeconds: 60 }),
    };
    const body = script([
        "set -e",
        ...lockRecords(),
        ...(serves ? [`old_key=$(cat ${API_KEY_FILE} 2>/dev/null || true)`, ...installApiKey()] : []),
        // Idempotent by content: the same vLLM, running and healthy, with the same key, is kept (components/plan/launches.ts).
        ...keepIfSame(record, { running: pidFileRunning(pidFile), ...(serves ? { secret: { variable: "old_key", file: API_KEY_FILE } } : {}) }),
        ...removeRecord("vllm"),
        // vLLM would copy VLLM_API_KEY and the head's per-host fabric settings to every Ray worker: list them in vLLM's
        // non-carry-over file first (rayAuth.ts, rayNonCarryOver).
        ...(serves && ray ? [argvLine(tools(spec, ["ray-env", json({ nonCarryOver: rayNonCarryOver(spec) })]))] : []),
        ...stop,
        ...detachedLaunch(argv, log, pidFile),
        ...writeRecord(record),
        `echo "vllm serve started, pid ${pidFromFile(pidFile)}, log ${shq(log)} on ${shq(host.name)}"`,
    ]);
    return {
        create: withTimeout(90, dockerExecScript(container, body, { stdin: serves })),
        delete: ifContainerRunning(container, withTimeout(90, dockerExecScript(container, script([
            ...lockRecords(), ...removeRecord("vllm"), ...stop, ...(serves ? [`rm -f ${API_KEY_FILE}`] : [])])))),
        ...(serves ? { stdin: "apiKey" as const } : {}),
        timeoutSeconds: 90,
    };
}

/**
 * Shell test, on the host: what this cluster runs on HOST's GPU and fabric is running (its launch's record is there and
 * its process runs): its `vllm serve` (the head's, an mp worker's headless one), or on a Ray worker the Ray that runs
 * vLLM's workers as its actors.
 */
function clusterOnHost(spec: ClusterSpec, host: HostSpec): { what: string; running: string } {
    const servesHere = host === spec.hosts[0] || spec.vllm.backend === "mp";
    const test = servesHere ? `[ -f ${shq(`${RECORDS_DIR}/vllm.json`)} ] && ${pidFileRunning(vllmFiles(spec).pidFile)}`
        : `[ -f ${shq(`${RECORDS_DIR}/ray.json`)} ] && ${commRunning("raylet")}`;
    return { what: servesHere ? "vLLM" : "Ray, which runs vLLM's workers here,", running: withTimeout(30, dockerExecScript(containerName(host.name), test)) };
}

function memoryAfterLoad(spec: ClusterSpec, host: HostSpec): CommandPlan {
    if (spec.testBed?.cpuVllm) return skippedCommand(spec, host, "memory after load");
    return { create: withTimeout(60, dockerExec(containerName(host.name), tools(spec, ["memory-after-load", json({ host: host.name })]))), timeoutSeconds: 60 };
}

/**
 * What testBed.cpuVllm (a CPU build of vLLM on one x86_64 test machine, components/spec/parseSpec.ts parseTestBed) leaves out, and why: the
 * steps that read or use a GPU. Empty for every real stack. The fabric check needs two hosts, which the test bed never has.
 */
export function cpuVllmSkips(spec: ClusterSpec): Array<{ step: string; why: string }> {
    if (!spec.testBed?.cpuVllm) return [];
    return [
        { step: "memory gate", why: "no GPU memory to flush or read: a CPU vLLM takes the KV cache vllm.extraArgs' --kv-cache-memory-bytes sets from the machine's memory" },
        { step: "memory after load", why: "CUDA's free memory does not exist on a CPU" },
        { step: "compat's CUDA checks", why: "no CUDA device: the image's kernels for the GPU and a first CUDA kernel are not run (vLLM's version, the architecture and the model's config are still checked)" },
        { step: "fabric check", why: "one host: there is no fabric between hosts to prove" },
    ];
}

/** A command that only says it was skipped (testBed.cpuVllm), and prints what it would have, as JSON, with `skipped`. */
function skippedCommand(spec: ClusterSpec, host: HostSpec, step: string): CommandPlan {
    const skip = cpuVllmSkips(spec).find(s => s.step === step)!;
    const line = `echo ${shq(`${host.name}: ${step} skipped (spark-vllm:testBed.cpuVllm): ${skip.why}`)}; echo ${shq(json({ host: host.name, skipped: `testBed.cpuVllm: ${skip.why}`, warnings: [] }))}`;
    return { create: line, update: line, timeoutSeconds: 10 };
}

/**
 * The memory gate (components/remote/spark_vllm/memory.py): on the host, drop the page cache (with root, sudo -n,
 * or a throw-away privileged container of the pinned image); then, in this host's container, free memory as
 * CUDA reports it against gpuMemoryUtilization x total, which is what vLLM itself asks for at start-up.
 */
function memoryGate(spec: ClusterSpec, host: HostSpec, owner?: Owner): CommandPlan {
    if (spec.testBed?.cpuVllm) return skippedCommand(spec, host, "memory gate");
    // The throw-away container (when neither root nor sudo) carries the owner's labels too.
    const flush = { host: host.name, image: spec.image.reference, ...(owner ? { labels: Object.fromEntries(ownerLabels(owner, spec)) } : {}) };
    const check = { host: host.name, gpuMemoryUtilization: spec.vllm.gpuMemoryUtilization };
    const container = containerName(host.name);
    const flushLine = withTimeout(150, argvLine(tools(spec, ["flush-page-cache", json(flush)])));
    const checkLine = withTimeout(60, dockerExec(container, tools(spec, ["memory-check", json(check)])));
    const holder = clusterOnHost(spec, host);
    return {
        create: script([flushLine, checkLine]),
        // An update (a new SSH key or connection: pulumi-command v1.2.1 remote/commandController.go Update runs `update`
        // when set, else `create` again) relaunches nothing: the launches follow this gate's id, which an update keeps, and
        // keep what runs (launches.ts keepIfSame). A running vLLM holds the memory this would measure, and the check would
        // refuse the very server it gates: it is measured only when nothing of this cluster holds it here.
        update: script([
            flushLine,
            `if ${holder.running} 2>/dev/null; then echo ${shq(`${host.name}: ${holder.what} runs and holds its memory: not measured again (an update relaunches nothing)`)}; else ${checkLine}; fi`,
        ]),
        timeoutSeconds: 240,
    };
}

/**
 * One rank of the fabric check: the image's own PyTorch and NCCL, with exactly the container's environment and
 * NCCL_DEBUG=INFO; it fails when HCAs are configured but NCCL used sockets (its own lines quoted), or when the ranks
 * cannot meet. The rendezvous is the head's fabric address on vllm.masterPort, free before any launch.
 */
function fabricRank(spec: ClusterSpec, host: HostSpec, rank: number): CommandPlan {
    const args = {
        rank, worldSize: spec.hosts.length, masterAddr: spec.hosts[0].fabric.address, masterPort: spec.vllm.masterPort,
        host: host.name, hcas: host.fabric.hcas, timeoutSeconds: spec.probes.fabricTimeoutSeconds, logDir: spec.logDir,
    };
    const seconds = spec.probes.fabricTimeoutSeconds + 60;
    const create = withTimeout(seconds, dockerExec(containerName(host.name), tools(spec, ["fabric-check", json(args)])));
    const verdict = shq(`${spec.logDir}/fabric-rank${rank}.json`);
    const holder = clusterOnHost(spec, host);
    return {
        create,
        // An update (a new SSH key: pulumi-command v1.2.1 remote/commandController.go Update runs `update` when set) comes
        // after the launches, which it does not relaunch: vLLM's mp rendezvous holds vllm.masterPort on the head, and the
        // fabric carries vLLM's traffic. The fabric proven before is reported again (fabric.py keeps the verdict in logDir,
        // under the same path in the container); without one (a cluster launched by a spark-vllm that kept none) while
        // the cluster runs here, it is not measured; otherwise the check runs.
        update: script([
            `if [ -s ${verdict} ]; then echo ${shq(`fabric: ${host.name}: proven when the cluster was launched; an update relaunches nothing, so the same verdict:`)}; cat ${verdict}`,
            `elif ${holder.running} 2>/dev/null; then echo ${shq(json({ host: host.name, rank, notMeasured: `${holder.what} runs on the fabric; an update relaunches nothing` }))}`,
            `else ${create}; fi`,
        ]),
        delete: `rm -f ${shq(`${spec.logDir}/fabric-rank${rank}.log`)} ${shq(`${spec.logDir}/fabric-rank${rank}.nccl.log`)} ${verdict}`,
        timeoutSeconds: seconds,
    };
}

/** Builds the whole plan. Deterministic: the same spec gives the same plan, byte for byte. */
export function planCluster(spec: ClusterSpec, toolsContent: string = toolsProgram(), opts: { hfToken?: boolean; owner?: Owner } = {}): ClusterPlan {
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
            ...(ray ? { rayStartArgv: ray, rayLaunch: rayLaunch(spec, containerName(host.name), ray, role) } : {}),
            ...(headless ? { vllmServeArgv: headless, vllmLaunch: vllmLaunch(spec, host, headless, false) } : {}),
            memoryGate: memoryGate(spec, host, owner),
            memoryAfterLoad: memoryAfterLoad(spec, host),
            ...(spec.hosts.length > 1 && spec.probes.fabric ? { fabricRank: fabricRank(spec, host, i) } : {}),
        };
    });
    const head = hosts[0];
    const headContainer = head.container.name;

    const rayProbe: CommandPlan | undefined = spec.vllm.backend !== "ray" ? undefined : {
        create: withTimeout(spec.probes.rayTimeoutSeconds + 30, dockerExec(headContainer, tools(spec, ["ray-probe", json(rayProbeArgs(spec, spec.probes.rayTimeoutSeconds))]))),
        timeoutSeconds: spec.probes.rayTimeoutSeconds + 30,
    };

    const compatArgs = {
        model: spec.model.id,
        cacheDir: spec.model.cacheDir,
        trustRemoteCode: spec.model.trustRemoteCode,
        ...(spec.vllm.version ? { declaredVllmVersion: spec.vllm.version } : {}),
        // What the image must bring: Ray for the ray backend, vLLM's multi-node launch for mp.
        backend: spec.vllm.backend,
        // testBed.cpuVllm: no CUDA device, so no GPU kernel checks (compat.py image_checks).
        ...(spec.testBed?.cpuVllm ? { device: "cpu" } : {}),
    };
    const compat: CommandPlan = {
        create: withTimeout(120, dockerExec(headContainer, tools(spec, ["compat", json(compatArgs)]))),
        timeoutSeconds: 120,
    };

    const { log: vllmLog, pidFile: vllmPidFile } = vllmFiles(spec);
    const serveArgv = vllmServeArgv(spec);

    const scheme = spec.endpoint.tls === "none" ? "http" : "https";
    const probeArgs = {
        host: headSpec.name,
        // Through the proxy, as a client would reach it (on the head's loopback, where it listens too).
        port: spec.vllm.port,
        // vLLM itself, for its /version (not an OpenAI path, so the proxy does not forward it).
        internalPort: spec.vllm.internalPort,
        scheme,
        // https: the probe pins the certificate the proxy serves to the one in the proxy directory (under logDir,
        // which the head's container mounts at the same path).
        ...(scheme === "https" ? { certificate: `${proxyDir(spec)}/tls.crt` } : {}),
        servedName: spec.model.servedName,
        log: vllmLog,
        pidFile: vllmPidFile,
        timeoutSeconds: spec.probes.endpointTimeoutSeconds,
        intervalSeconds: spec.probes.intervalSeconds,
        // Pipeline parallelism over Ray has failed only once two requests ran at once (vllm-project/vllm#39900).
        concurrency: spec.vllm.pipelineParallelSize > 1 ? 2 : 1,
        // What relaunches a vLLM that died after its launch succeeded (a plain re-run runs only this probe again).
        ...(owner ? { relaunch: replaceCommand(owner, memoryGateUrns(owner, spec.hosts.map(h => h.name))) } : {}),
    };
    const endpointProbe: CommandPlan = {
        create: withTimeout(
            spec.probes.endpointTimeoutSeconds + 60,
            dockerExec(headContainer, tools(spec, ["endpoint-probe", json(probeArgs)]), { stdin: true }),
        ),
        stdin: "apiKey",
        timeoutSeconds: spec.probes.endpointTimeoutSeconds + 60,
    };

    const servingArgs = {
        host: headSpec.name,
        // vLLM itself on the head's loopback (it checks the key too): the figures are the model's, not the proxy's or TLS's.
        port: spec.vllm.internalPort,
        servedName: spec.model.servedName,
        concurrency: spec.probes.servingConcurrency,
        requests: spec.probes.servingRequests,
        maxTokens: spec.probes.servingMaxTokens,
        requestTimeoutSeconds: 120,
        warnDropFraction: spec.probes.servingDropWarnPercent / 100,
        resultFile: servingResultFile(spec),
    };
    // A bound for the whole load (each request also has its own): a healthy Spark streams 64 tokens in seconds.
    const servingSeconds = 900;
    const servingProof: CommandPlan | undefined = spec.probes.serving ? {
        create: withTimeout(servingSeconds, dockerExec(headContainer, tools(spec, ["serving-proof", json(servingArgs)]), { stdin: true })),
        stdin: "apiKey",
        timeoutSeconds: servingSeconds,
    } : undefined;

    return {
        spec,
        hosts,
        head,
        rayProbe,
        compat,
        weightsSource: weightsSource(spec),
        backend: spec.vllm.backend,
        vllmServeArgv: serveArgv,
        vllmLaunch: vllmLaunch(spec, headSpec, serveArgv, true),
        endpointProbe,
        ...(servingProof ? { servingProof } : {}),
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
