// Each host's idle container as data: its environment (the fabric, the caches, Ray's token), mounts, devices, limits
// and labels. Pure: no Pulumi.
import { ClusterSpec, HostSpec } from "../spec/spec";
import { ContainerPlan, Role } from "./clusterPlan";
import { containerName } from "./naming";
import { proxyDir } from "./proxyPlan";
import { toolsPath } from "./toolsProgram";
import { RAY_NON_CARRY_OVER, rayAuthEnv } from "./rayAuth";
import { Owner, ownerEnv, ownerLabels } from "./ownership";
import { NCCL_GID_VARIABLE, supervisorEntrypoint } from "./launches";

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

/**
 * What the head lists in vLLM's ray_non_carry_over_env_vars.json: the API key, every per-host variable, and
 * NCCL_IB_GID_INDEX, which each host's Ray start reads from its own GID table (launches.ts ncclGidExec): vLLM copies every
 * NCCL_-prefixed variable of the driver to the workers unless listed (vllm/ray/ray_env.py DEFAULT_ENV_VAR_PREFIXES_TO_COPY,
 * get_env_vars_to_copy) into the actors' runtime environment, over what they inherit from Ray: the driver's value (the
 * image's own, if it sets one; the driver itself is not wrapped) would replace each worker's own.
 */
export function rayNonCarryOver(spec: ClusterSpec): string[] {
    const gid = spec.hosts.some(h => h.fabric.hcas.length > 0) ? [NCCL_GID_VARIABLE] : [];
    return [...new Set([...RAY_NON_CARRY_OVER, ...perHostEnvNames(spec), ...gid])].sort();
}

export function containerPlan(spec: ClusterSpec, host: HostSpec, role: Role, owner?: Owner): ContainerPlan {
    const sameDir = (p: string) => ({ hostPath: p, containerPath: p });
    return {
        name: containerName(host.name),
        image: spec.image.reference,
        platform: host.platform,
        // The owner in every process docker exec starts there (components/plan/ownership.ts).
        env: [...containerEnv(spec, host), ...(owner ? [ownerEnv(owner)] : [])],
        // logDir read-write (the helper program, the logs and pid files of what runs in it, the fabric check's verdicts),
        // and on the head the proxy's directory in it read-only at the same path: the endpoint probe reads tls.crt there,
        // and nothing in this container may write nginx.conf, api-key.map or replicas.conf, which nginx and status trust
        // (issue 50). Docker mounts a path below another after it (moby volume/mounts sortMounts, by depth), and a mount
        // point cannot be renamed or removed from inside (EBUSY); remounting it writable needs CAP_SYS_ADMIN, which
        // Docker's default capabilities lack.
        mounts: [sameDir(spec.model.cacheDir), sameDir(spec.logDir),
            ...(role === "head" ? [{ ...sameDir(proxyDir(spec)), readOnly: true }] : [])],
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
        ...supervisorEntrypoint(toolsPath(spec), undefined, spec.memoryGuard.floorGiB),
        labels: [
            ["spark-vllm.host", host.name],
            ["spark-vllm.role", role],
            ["spark-vllm.gpus", String(host.gpus)],
            ...(owner ? ownerLabels(owner, spec) : []),
        ],
    };
}
