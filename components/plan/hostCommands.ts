// Every command the plan runs on the hosts, as data (CommandPlan): the helper program's install, the preflight, the
// weights, the image copy, Ray, vLLM, the probes, the memory gates and the fabric check. Pure: no Pulumi.
import * as zlib from "zlib";
import { ClusterSpec, HostSpec } from "../spec/spec";
import { argvLine, dockerExec, dockerExecScript, detachedLaunch, ifContainerRunning, pidFromFile, script, shq, stopByPidFile, withTimeout } from "./scripts";
import { findModel } from "../knowledge/catalog";
import { MEMORY_DEFAULTS } from "./memory";
import { TOOLS_FILE, toolsPath } from "./toolsProgram";
import { containerName } from "./naming";
import { pinTools } from "./verifiedRun";
import { RAY_TOKEN_FILE, installRayToken } from "./rayAuth";
import { proxyDir } from "./proxyPlan";
import { OWNER_LABELS, Owner, ownerArgs, ownerLabels } from "./ownership";
import { memoryGateUrns, replaceCommand } from "./relaunch";
import { API_KEY_FILE, LaunchRecord, RECORDS_DIR, commRunning, keepIfSame, ncclGidExec, pidFileRunning, withoutLock, installApiKey, lockRecords, removeRecord, writeRecord } from "./launches";
import { CommandPlan, Role, ToolsInstall } from "./clusterPlan";
import { rayNonCarryOver } from "./containers";

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
export function toolsInstall(spec: ClusterSpec, host: HostSpec, content: string, packed: string, owner?: Owner): ToolsInstall {
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
            // The head's container mounts the proxy directory read-only over logDir's (components/plan/containers.ts): a
            // bind mount's source must exist when the container is made, before the proxy's configuration is written.
            // Only once the program is installed: a host another stack holds is left as it was.
            ...(host.name === spec.hosts[0].name ? [`mkdir -p ${shq(proxyDir(spec))} && chmod 700 ${shq(proxyDir(spec))} || exit 1`] : []),
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

export function preflight(spec: ClusterSpec, host: HostSpec, owner?: Owner): CommandPlan {
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

export function weights(spec: ClusterSpec, host: HostSpec, hasToken: boolean): CommandPlan {
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
 * command while the workers copy (components/hostProgram/spark_vllm/weights_source.py): it needs the copy token (stdin),
 * and it ends once every worker has reported its copy, so nothing serves the weights after `up`. A server left by an
 * interrupted run is stopped first, and by delete (its pid file).
 */
export function weightsSource(spec: ClusterSpec): CommandPlan | undefined {
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

export function imageFromHead(spec: ClusterSpec, host: HostSpec): CommandPlan | undefined {
    if (spec.imageSource !== "head") return undefined;
    const ref = spec.image.reference;
    if (host === spec.hosts[0])
        return { create: withTimeout(60, argvLine(["docker", "image", "inspect", "--format", "{\"imageId\":\"{{.Id}}\"}", ref])), timeoutSeconds: 60 };
    const args = { host: spec.hosts[0].name, image: ref, target: { name: host.name, user: host.ssh.user, address: host.fabric.address, ...(host.ssh.hostKey ? { hostKey: host.ssh.hostKey } : {}) } };
    return { create: withTimeout(7200, argvLine(tools(spec, ["image-transfer", json(args)]))), timeoutSeconds: 7200 };
}

export function rayStartArgv(spec: ClusterSpec, host: HostSpec, role: Role, head: HostSpec): string[] {
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
export function rayLaunch(spec: ClusterSpec, container: string, rayArgv: string[], role: Role): CommandPlan {
    const host = spec.hosts.find(h => containerName(h.name) === container);
    if (!host) throw new Error(`rayLaunch: no host of the spec has the container ${container}`);
    // Ray's workers (vLLM's, on this host) inherit its environment: this host's own NCCL_IB_GID_INDEX, read at each start.
    const argv = ncclGidExec(toolsPath(spec), host, rayArgv);
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
        // components/hostProgram/spark_vllm/keyguard.py, imported from the helper program (vllmLaunch puts logDir on PYTHONPATH).
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

/** Where the head (and an mp worker) keeps the vLLM log and pid. */
export const vllmFiles = (spec: ClusterSpec) => ({ log: `${spec.logDir}/vllm-serve.log`, pidFile: `${spec.logDir}/vllm-serve.pid` });

/**
 * Starts `vllm serve` detached in a host's container. The head's reads the API key from stdin (never in command
 * text, diffs or errors) into a 0600 file in the container, which a relaunch reads it from; an mp worker's is headless
 * and serves no API. Under the records' lock: the old record goes, a server left by a failed earlier `up` is stopped
 * (the port is free and create is repeatable), vLLM starts, and the record is written (components/plan/launches.ts).
 */
export function vllmLaunch(spec: ClusterSpec, host: HostSpec, serveArgv: string[], serves: boolean): CommandPlan {
    const { log, pidFile } = vllmFiles(spec);
    // The head's vLLM imports its key guard (KEYGUARD_MIDDLEWARE) from the helper program in logDir.
    const served = serves ? withPythonPath(spec.logDir, serveArgv) : serveArgv;
    // mp: each host's `vllm serve` runs its NCCL ranks itself, with this host's own NCCL_IB_GID_INDEX read at each start
    // (under Ray, Ray's start carries it: rayLaunch).
    const argv = spec.vllm.backend === "mp" && spec.hosts.length > 1 ? ncclGidExec(toolsPath(spec), host, served) : served;
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

export function memoryAfterLoad(spec: ClusterSpec, host: HostSpec): CommandPlan {
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
 * The memory gate (components/hostProgram/spark_vllm/memory.py): on the host, drop the page cache (with root, sudo -n,
 * or a throw-away privileged container of the pinned image); then, in this host's container, free memory as
 * CUDA reports it against gpuMemoryUtilization x total, which is what vLLM itself asks for at start-up.
 */
export function memoryGate(spec: ClusterSpec, host: HostSpec, owner?: Owner): CommandPlan {
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
export function fabricRank(spec: ClusterSpec, host: HostSpec, rank: number): CommandPlan {
    const args = {
        rank, worldSize: spec.hosts.length, masterAddr: spec.hosts[0].fabric.address, masterPort: spec.vllm.masterPort,
        // The rank runs with NCCL_IB_GID_INDEX from this host's own table: the GID of this address on these HCAs (gid.py).
        host: host.name, address: host.fabric.address, hcas: host.fabric.hcas, timeoutSeconds: spec.probes.fabricTimeoutSeconds, logDir: spec.logDir,
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

/** The head's container, where the cluster-wide checks and probes run. */
const headContainer = (spec: ClusterSpec) => containerName(spec.hosts[0].name);

/** Ray backend only: every host's node and GPUs joined the head (rayProbeArgs). */
export function rayProbe(spec: ClusterSpec): CommandPlan | undefined {
    if (spec.vllm.backend !== "ray") return undefined;
    return {
        create: withTimeout(spec.probes.rayTimeoutSeconds + 30, dockerExec(headContainer(spec), tools(spec, ["ray-probe", json(rayProbeArgs(spec, spec.probes.rayTimeoutSeconds))]))),
        timeoutSeconds: spec.probes.rayTimeoutSeconds + 30,
    };
}

/** The image runs on the head and its vLLM knows the model (compat.py). */
export function compat(spec: ClusterSpec): CommandPlan {
    return {
        create: withTimeout(120, dockerExec(headContainer(spec), tools(spec, ["compat", json(compatArgs(spec))]))),
        timeoutSeconds: 120,
    };
}

/**
 * The image proof on one host, before any container of the cluster is created or replaced: compat.py in a throw-away
 * container of the pulled image (`docker run --rm --pull never`: exactly the image the pull brought, never another
 * pull), with this host's GPU and the model's cache and the helper program read-only, and no network. On an image
 * change the old containers and vLLM keep serving while it runs; a refused image fails `up` here and leaves them as
 * they were (issue 46). It checks what needs no model load: the image's vLLM and its version, its CUDA build on this
 * GPU (a first kernel), what the backend needs (Ray, vLLM's mp launch) and, once the model's config.json is on the
 * host (every image change, a first `up` of weights already present), the architecture. The fabric all-reduce is not
 * part of it: beside a serving vLLM the rendezvous port (vllm.masterPort) is taken by an mp launch, and its traffic would
 * share the fabric with the serving cluster's; it runs, as before, once the new containers are up (docs/operations.md).
 */
export function imageCheck(spec: ClusterSpec, host: HostSpec, owner?: Owner): CommandPlan {
    const cache = spec.model.cacheDir, logDir = spec.logDir;
    const args = {
        ...compatArgs(spec),
        // A first `up` that downloads the weights has no config.json yet: the image is checked, the model after the download.
        modelIfPresent: true,
    };
    const run = [
        // `--pull never`: run only an image already in the local store, never pull one (docker run reference, `--pull`
        // always|missing|never, from Docker 20.10).
        "docker", "run", "--rm", "--pull", "never", "--gpus", "all", "--network", "none",
        ...(owner ? ownerLabels(owner, spec).flatMap(([k, v]) => ["--label", `${k}=${v}`]) : []),
        "--label", `spark-vllm.image-check=${host.name}`,
        // The same HF_HOME as the host's container (containers.ts containerEnv), offline: nothing is fetched.
        "-e", `HF_HOME=${cache}`, "-e", "HF_HUB_OFFLINE=1", "-e", `SPARK_VLLM_HOST=${host.name}`,
        "-v", `${cache}:${cache}:ro`, "-v", `${logDir}:${logDir}:ro`,
        "--entrypoint", "python3", spec.image.reference, toolsPath(spec), "compat", json(args),
    ];
    return { create: withTimeout(IMAGE_CHECK_SECONDS, argvLine(run)), timeoutSeconds: IMAGE_CHECK_SECONDS };
}

/** The image proof's bound: compat's own 120 s (compat below) and a container's start and removal. */
const IMAGE_CHECK_SECONDS = 180;

function compatArgs(spec: ClusterSpec) {
    return {
        model: spec.model.id,
        cacheDir: spec.model.cacheDir,
        trustRemoteCode: spec.model.trustRemoteCode,
        ...(spec.vllm.version ? { declaredVllmVersion: spec.vllm.version } : {}),
        // What the image must bring: Ray for the ray backend, vLLM's multi-node launch for mp.
        backend: spec.vllm.backend,
        // testBed.cpuVllm: no CUDA device, so no GPU kernel checks (compat.py image_checks).
        ...(spec.testBed?.cpuVllm ? { device: "cpu" } : {}),
    };
}

/** http, or https when endpoint.tls is set: how the proxy publishes vllm.port. */
export const endpointScheme = (spec: ClusterSpec) => spec.endpoint.tls === "none" ? "http" : "https";

/**
 * Through the proxy, as a client reaches it: /health, 401 without the key, /v1/models, one completion (probes.py).
 * `vllmItself`: the first of several replicas, whose proxy is the front: through it the probe would be answered by the
 * other replicas while this one is drained (components/plan/rollout.ts), so it asks this replica's vLLM on loopback,
 * whose key guard asks the key on every path but /health as the proxy does.
 */
export function endpointProbe(spec: ClusterSpec, owner?: Owner, opts: { vllmItself?: boolean } = {}): CommandPlan {
    const headSpec = spec.hosts[0];
    const { log: vllmLog, pidFile: vllmPidFile } = vllmFiles(spec);
    const scheme = opts.vllmItself ? "http" : endpointScheme(spec);
    const probeArgs = {
        host: headSpec.name,
        // Through the proxy, as a client would reach it (on the head's loopback, where it listens too).
        port: opts.vllmItself ? spec.vllm.internalPort : spec.vllm.port,
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
        // The marker the head's memory guard leaves when it stopped vLLM (supervise.py), for the probe to say so.
        guardMarker: `${RECORDS_DIR}/vllm.failed`,
        // What relaunches a vLLM that died after its launch succeeded (a plain re-run runs only this probe again).
        ...(owner ? { relaunch: replaceCommand(owner, memoryGateUrns(owner, spec.hosts.map(h => h.name))) } : {}),
    };
    return {
        create: withTimeout(
            spec.probes.endpointTimeoutSeconds + 60,
            dockerExec(headContainer(spec), tools(spec, ["endpoint-probe", json(probeArgs)]), { stdin: true }),
        ),
        stdin: "apiKey",
        timeoutSeconds: spec.probes.endpointTimeoutSeconds + 60,
    };
}

/** probes.serving: a short load on vLLM itself, its TTFT and tokens/s (serving.py). */
export function servingProof(spec: ClusterSpec): CommandPlan | undefined {
    if (!spec.probes.serving) return undefined;
    const headSpec = spec.hosts[0];
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
    return {
        create: withTimeout(servingSeconds, dockerExec(headContainer(spec), tools(spec, ["serving-proof", json(servingArgs)]), { stdin: true })),
        stdin: "apiKey",
        timeoutSeconds: servingSeconds,
    };
}
