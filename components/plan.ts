// spec → plan: every container, environment, command line and probe as plain data.
// Pure and deterministic: no Pulumi, no clock, no randomness. Components consume it.
import { ClusterSpec, HostSpec } from "./spec";
import { argvLine, dockerExec, dockerExecScript, detachedLaunch, ifContainerRunning, script, shq, stopByPidFile, withTimeout } from "./scripts";
import { findModel } from "./catalog";
import { TOOLS_FILE, toolsProgram } from "./toolsProgram";
import { containerName } from "./naming";

export { containerName, toolsProgram };

export type Role = "head" | "worker";

/** What a remote command does; the component makes one remote.Command from it. */
export interface CommandPlan {
    /** Runs on create (and on replacement). */
    create: string;
    /** Runs on destroy or before a replacement; stops what create started. */
    delete?: string;
    /** Which secret, if any, is piped to the command's stdin. */
    stdin?: "apiKey" | "hfToken";
    /** Upper bound enforced with `timeout` on the host, in seconds. */
    timeoutSeconds: number;
}

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

export interface HostPlan {
    host: HostSpec;
    role: Role;
    container: ContainerPlan;
    /** Writes the helper program to the host (content via stdin). */
    tools: CommandPlan & { content: string };
    /** Facts as JSON; fails with one line per problem. */
    preflight: CommandPlan;
    /** Puts the weights in place per the strategy (in the container) and prints the file manifest. */
    weights: CommandPlan;
    /**
     * imageSource "head" only: runs on the HEAD and prints this host's image ID — the head inspects
     * its own image, and copies it to a worker (docker save | ssh docker load) unless it is there.
     */
    imageFromHead?: CommandPlan;
    /** The exact `ray start` argv. */
    rayStartArgv: string[];
    rayLaunch: CommandPlan;
}

export interface ClusterPlan {
    spec: ClusterSpec;
    hosts: HostPlan[];
    head: HostPlan;
    rayProbe: CommandPlan;
    compat: CommandPlan;
    /** head-then-copy only: serves the head's weights to the workers over the fabric. */
    weightsSource?: CommandPlan;
    /** The exact `vllm serve` argv (no secrets in it: the API key travels in VLLM_API_KEY from stdin). */
    vllmServeArgv: string[];
    vllmLaunch: CommandPlan;
    endpointProbe: CommandPlan;
    /** http://<head ssh host>:<port>/v1 */
    endpoint: string;
    modelName: string;
    /** Where the head keeps the vLLM log and pid. */
    vllmLog: string;
    vllmPidFile: string;
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
    );
    return env;
}

function containerPlan(spec: ClusterSpec, host: HostSpec, role: Role): ContainerPlan {
    const sameDir = (p: string) => ({ hostPath: p, containerPath: p });
    return {
        name: containerName(host.name),
        image: spec.image.reference,
        platform: host.platform,
        env: containerEnv(spec, host),
        mounts: [sameDir(spec.model.cacheDir), sameDir(spec.logDir)],
        devices: host.fabric.hcas.length > 0 ? [sameDir("/dev/infiniband")] : [],
        ulimits: [
            { name: "memlock", soft: -1, hard: -1 },
            { name: "stack", soft: 67108864, hard: 67108864 },
        ],
        capabilities: ["IPC_LOCK"],
        shmSizeMb: spec.shmSizeMb,
        networkMode: "host",
        ipcMode: "host",
        gpus: "all",
        init: true,
        // An idle main process: Ray and vLLM are started by docker exec, so each has its own
        // lifecycle (and resource) while the container only holds the environment and devices.
        entrypoint: ["sleep"],
        command: ["infinity"],
        labels: [
            ["spark-vllm.host", host.name],
            ["spark-vllm.role", role],
            ["spark-vllm.gpus", String(host.gpus)],
        ],
    };
}

const toolsPath = (spec: ClusterSpec) => `${spec.logDir}/${TOOLS_FILE}`;

function tools(spec: ClusterSpec, args: readonly string[]): string[] {
    return ["python3", toolsPath(spec), ...args];
}

function json(value: unknown): string {
    return JSON.stringify(value);
}

function toolsInstall(spec: ClusterSpec, content: string): CommandPlan & { content: string } {
    const dir = shq(spec.logDir);
    return {
        content,
        create: script([`mkdir -p ${dir}`, `cat > ${shq(toolsPath(spec))}.tmp`, `mv -f ${shq(toolsPath(spec))}.tmp ${shq(toolsPath(spec))}`]),
        delete: `rm -f ${shq(toolsPath(spec))}`,
        timeoutSeconds: 30,
    };
}

function preflight(spec: ClusterSpec, host: HostSpec): CommandPlan {
    const args = {
        host: host.name,
        platform: host.platform,
        gpus: host.gpus,
        fabric: host.fabric,
        cacheDir: spec.model.cacheDir,
    };
    return { create: withTimeout(60, argvLine(tools(spec, ["preflight", json(args)]))), timeoutSeconds: 60 };
}

const copySource = (spec: ClusterSpec) => `http://${spec.hosts[0].fabric.address}:${spec.model.copyPort}`;

function weights(spec: ClusterSpec, host: HostSpec, hasToken: boolean): CommandPlan {
    const isHead = host === spec.hosts[0];
    const strategy = spec.model.weights === "present" ? "present"
        : spec.model.weights === "download" || isHead ? "download" : "copy";
    const entry = findModel(spec.model.id);
    const args = {
        host: host.name,
        model: spec.model.id,
        cacheDir: spec.model.cacheDir,
        strategy,
        ...(strategy === "download" && hasToken ? { tokenOnStdin: true } : {}),
        ...(strategy === "download" && entry ? { expectedBytes: entry.weightBytes } : {}),
        ...(strategy === "copy" ? { source: copySource(spec) } : {}),
    };
    const seconds = strategy === "present" ? 120 : 4 * 3600;
    return {
        create: withTimeout(seconds, dockerExec(containerName(host.name), tools(spec, ["weights", json(args)]), { stdin: !!args.tokenOnStdin })),
        ...(args.tokenOnStdin ? { stdin: "hfToken" as const } : {}),
        timeoutSeconds: seconds,
    };
}

/** head-then-copy: a read-only file server for the head's snapshot on its fabric address. */
function weightsSource(spec: ClusterSpec): CommandPlan | undefined {
    if (spec.model.weights !== "head-then-copy" || spec.hosts.length < 2) return undefined;
    const head = spec.hosts[0];
    const log = `${spec.logDir}/weights-source.log`;
    const pid = `${spec.logDir}/weights-source.pid`;
    const args = { host: head.name, model: spec.model.id, cacheDir: spec.model.cacheDir, bind: head.fabric.address, port: spec.model.copyPort };
    const stop = stopByPidFile(pid, 10);
    return {
        create: withTimeout(60, dockerExecScript(containerName(head.name), script([
            ...stop,
            ...detachedLaunch(tools(spec, ["serve-weights", json(args)]), log, pid),
            `echo ${shq(`serving ${spec.model.id} on ${copySource(spec)}, log ${head.name}:${log}`)}`,
        ]))),
        delete: ifContainerRunning(containerName(head.name), withTimeout(60, dockerExecScript(containerName(head.name), script(stop)))),
        timeoutSeconds: 60,
    };
}

function imageFromHead(spec: ClusterSpec, host: HostSpec): CommandPlan | undefined {
    if (spec.imageSource !== "head") return undefined;
    const ref = spec.image.reference;
    if (host === spec.hosts[0])
        return { create: withTimeout(60, argvLine(["docker", "image", "inspect", "--format", "{\"imageId\":\"{{.Id}}\"}", ref])), timeoutSeconds: 60 };
    const args = { host: spec.hosts[0].name, image: ref, target: { name: host.name, user: host.ssh.user, address: host.fabric.address } };
    return { create: withTimeout(7200, argvLine(tools(spec, ["image-transfer", json(args)]))), timeoutSeconds: 7200 };
}

function rayStartArgv(spec: ClusterSpec, host: HostSpec, role: Role, head: HostSpec): string[] {
    const common = [`--node-ip-address=${host.fabric.address}`, `--num-gpus=${host.gpus}`, "--disable-usage-stats"];
    if (role === "head")
        return ["ray", "start", "--head", `--port=${spec.ray.port}`, ...common,
            // Ray has no authentication: the dashboard runs anyone's jobs, so it stays on loopback.
            "--dashboard-host=127.0.0.1", `--dashboard-port=${spec.ray.dashboardPort}`];
    return ["ray", "start", `--address=${head.fabric.address}:${spec.ray.port}`, ...common];
}

function rayLaunch(container: string, argv: string[]): CommandPlan {
    const stop = ifContainerRunning(container, withTimeout(60, dockerExec(container, ["ray", "stop", "--force"])));
    return {
        // A failed earlier `up` may have left Ray running: stop it first so create is repeatable.
        create: script([`${withTimeout(60, dockerExec(container, ["ray", "stop", "--force"]))} >/dev/null 2>&1 || true`, withTimeout(120, dockerExec(container, argv))]),
        delete: stop,
        timeoutSeconds: 120,
    };
}

export function vllmServeArgv(spec: ClusterSpec): string[] {
    const { vllm, model } = spec;
    return [
        "vllm", "serve", model.id,
        "--served-model-name", model.servedName,
        "--tensor-parallel-size", String(vllm.tensorParallelSize),
        "--pipeline-parallel-size", String(vllm.pipelineParallelSize),
        "--distributed-executor-backend", "ray",
        "--host", "0.0.0.0",
        "--port", String(vllm.port),
        "--gpu-memory-utilization", String(vllm.gpuMemoryUtilization),
        ...(vllm.maxModelLen !== undefined ? ["--max-model-len", String(vllm.maxModelLen)] : []),
        ...(model.trustRemoteCode ? ["--trust-remote-code"] : []),
        ...vllm.extraArgs,
    ];
}

/** Builds the whole plan. Deterministic: the same spec gives the same plan, byte for byte. */
export function planCluster(spec: ClusterSpec, toolsContent: string = toolsProgram(), opts: { hfToken?: boolean } = {}): ClusterPlan {
    const headSpec = spec.hosts[0];
    const hosts: HostPlan[] = spec.hosts.map((host, i) => {
        const role: Role = i === 0 ? "head" : "worker";
        const argv = rayStartArgv(spec, host, role, headSpec);
        return {
            host,
            role,
            container: containerPlan(spec, host, role),
            tools: toolsInstall(spec, toolsContent),
            preflight: preflight(spec, host),
            weights: weights(spec, host, opts.hfToken ?? false),
            imageFromHead: imageFromHead(spec, host),
            rayStartArgv: argv,
            rayLaunch: rayLaunch(containerName(host.name), argv),
        };
    });
    const head = hosts[0];
    const headContainer = head.container.name;
    const totalGpus = spec.hosts.reduce((n, h) => n + h.gpus, 0);

    const rayProbeArgs = {
        address: `${headSpec.fabric.address}:${spec.ray.port}`,
        nodes: spec.hosts.map(h => ({ name: h.name, address: h.fabric.address, gpus: h.gpus })),
        gpus: totalGpus,
        timeoutSeconds: spec.probes.rayTimeoutSeconds,
        intervalSeconds: spec.probes.intervalSeconds,
    };
    const rayProbe: CommandPlan = {
        create: withTimeout(spec.probes.rayTimeoutSeconds + 30, dockerExec(headContainer, tools(spec, ["ray-probe", json(rayProbeArgs)]))),
        timeoutSeconds: spec.probes.rayTimeoutSeconds + 30,
    };

    const compatArgs = {
        model: spec.model.id,
        cacheDir: spec.model.cacheDir,
        trustRemoteCode: spec.model.trustRemoteCode,
        ...(spec.vllm.version ? { declaredVllmVersion: spec.vllm.version } : {}),
    };
    const compat: CommandPlan = {
        create: withTimeout(120, dockerExec(headContainer, tools(spec, ["compat", json(compatArgs)]))),
        timeoutSeconds: 120,
    };

    const vllmLog = `${spec.logDir}/vllm-serve.log`;
    const vllmPidFile = `${spec.logDir}/vllm-serve.pid`;
    const serveArgv = vllmServeArgv(spec);
    const stopVllm = stopByPidFile(vllmPidFile, 60);
    const launchBody = script([
        "set -e",
        // The key arrives on stdin so it never appears in command text, diffs or errors.
        "IFS= read -r VLLM_API_KEY",
        "export VLLM_API_KEY",
        // A failed earlier `up` may have left a server running: stop it so the port is free.
        ...stopVllm,
        ...detachedLaunch(serveArgv, vllmLog, vllmPidFile),
        `echo "vllm serve started, pid $(cat ${shq(vllmPidFile)}), log ${shq(vllmLog)} on ${shq(headSpec.name)}"`,
    ]);
    const vllmLaunch: CommandPlan = {
        create: withTimeout(90, dockerExecScript(headContainer, launchBody, { stdin: true })),
        delete: ifContainerRunning(headContainer, withTimeout(90, dockerExecScript(headContainer, script(stopVllm)))),
        stdin: "apiKey",
        timeoutSeconds: 90,
    };

    const probeArgs = {
        host: headSpec.name,
        port: spec.vllm.port,
        servedName: spec.model.servedName,
        log: vllmLog,
        pidFile: vllmPidFile,
        timeoutSeconds: spec.probes.endpointTimeoutSeconds,
        intervalSeconds: spec.probes.intervalSeconds,
    };
    const endpointProbe: CommandPlan = {
        create: withTimeout(
            spec.probes.endpointTimeoutSeconds + 60,
            dockerExec(headContainer, tools(spec, ["endpoint-probe", json(probeArgs)]), { stdin: true }),
        ),
        stdin: "apiKey",
        timeoutSeconds: spec.probes.endpointTimeoutSeconds + 60,
    };

    return {
        spec,
        hosts,
        head,
        rayProbe,
        compat,
        weightsSource: weightsSource(spec),
        vllmServeArgv: serveArgv,
        vllmLaunch,
        endpointProbe,
        endpoint: `http://${headSpec.ssh.host}:${spec.vllm.port}/v1`,
        modelName: spec.model.servedName,
        vllmLog,
        vllmPidFile,
    };
}
