// Root-cause finding in vLLM logs. Pure: no Pulumi, no I/O.
//
// The catalog below is the one source of truth: `diagnose` uses it here, and
// `diagnosisData()` hands it as JSON to the helper program's Python twin
// (components/hostProgram/spark_vllm/diagnosis.py) that runs on the host. Patterns are therefore written in
// the regex subset that means the same in JavaScript (compiled with the `s`
// flag, so `.` matches any character of a line, as in Python) and Python `re`:
// no \d \w \s \b (Unicode-aware in Python), no lookbehind, no named groups.
//
// How a log is read:
//  1. normalise: strip ANSI escapes, CRLF/CR → LF, cut each line at
//     maxLineChars (so matching stays linear), strip process prefixes
//     such as `(EngineCore_DP0 pid=456) ` or `[rank0]: ` (nested ones too);
//  2. the earliest line matching a firm pattern of an entry that names a cause
//     is the root cause; traceback frame lines and the source lines under them
//     are skipped (a source line such as `raise _format(GatedRepoError, ...)`
//     names the error before the error line itself);
//  3. else the earliest line matching an entry's `consequencePatterns`:
//     lines that say a collective, a worker or the engine failed because of
//     something else (`NCCL error: unhandled system error`, `DistBackendError`,
//     `A worker died or was killed`, `EngineDeadError`). Processes on several
//     hosts interleave their output, so the head's consequence is often printed
//     before the worker's cause; a cause anywhere in the log wins;
//  4. else the earliest line matching a weak pattern (warnings that also show
//     up in logs that go on to work, such as `NCCL WARN`);
//  5. else, if a wrapper line exists (`Engine core initialization failed. See
//     root cause above.`), kind `unknown-engine-failure`, whose line is the
//     last exception line printed before the last wrapper, or the wrapper
//     itself when there is none. Wrapper lines never win over a cause, even
//     one printed after them (processes interleave their output);
//  6. else undefined.
import { firstVllmWithMultiNodeMp } from "./images";

/** The root cause of a failed launch: a stable kind, the line from the log, and what to change. */
export interface Diagnosis {
    /** Stable slug, e.g. `kv-cache-insufficient`. */
    kind: string;
    /** The root-cause line: normalised, trimmed, without process prefix or vLLM logger header. */
    line: string;
    /** What to change. */
    hint: string;
}

export interface CatalogEntry {
    kind: string;
    /** Regex sources (JS/Python common subset); the earliest line matching one of them is the root cause. */
    patterns: string[];
    /** Regex sources consulted only when no entry's `patterns` match anywhere in the log. */
    weakPatterns?: string[];
    ignoreCase?: boolean;
    /** Lines that only say something failed further up; they are never a root cause. */
    wrapper?: boolean;
    /**
     * Regex sources: the entry applies only to a log where some line matches one of them (the evidence it needs).
     * Every line counts here, traceback frames and source lines included (`multiprocessing/synchronize.py` is a frame).
     */
    requires?: string[];
    /**
     * Regex sources for lines that name a consequence of a failure elsewhere (a rank that died, a collective that
     * failed): consulted only when no entry's `patterns` match anywhere in the log, and before any `weakPatterns`.
     */
    consequencePatterns?: string[];
    hint: string;
}

const MEMORY =
    "A DGX Spark's 128 GB is unified memory shared with the OS, Docker, Ray and the page cache (about 120 GiB usable): " +
    "lower `spark-vllm:vllm.gpuMemoryUtilization` (e.g. 0.85 to 0.80) or `spark-vllm:vllm.maxModelLen`, " +
    "stop other GPU processes on the host (`nvidia-smi`, leftover vLLM/EngineCore or Ray workers), " +
    "and drop the page cache (`sync; echo 3 | sudo tee /proc/sys/vm/drop_caches`) before retrying.";

const FABRIC =
    "Check `spark-vllm:hosts[].fabric.interface` and `.hcas` against `ip -br addr` and `ibdev2netdev` on every host: " +
    "the ConnectX-7 fabric is the twin netdevs enp1s0f1np1 / enP2p1s0f1np1 with HCAs rocep1s0f1 / roceP2p1s0f1 " +
    "(not the 10 GbE enP7s7), and both hosts must reach each other's fabric address. " +
    "The containers need IPC_LOCK, memlock unlimited and /dev/infiniband; `hcas: []` falls back to TCP.";

const ARCH =
    "The image's vLLM does not support this architecture. Copying model files from one vLLM version into another does not work: " +
    "set `spark-vllm:image` to an image (pinned by digest, the same on every host) whose vLLM supports the architecture " +
    "in the model's config.json (Qwen3_5MoeForConditionalGeneration is known to vLLM 0.17, not 0.14).";

const GID_HINT =
    "NCCL failed a system call while setting up the RoCE link. On two or more Sparks the usual cause is NCCL_IB_GID_INDEX: the " +
    "RoCE v2 GID that carries a host's fabric IPv4 address sits at different indexes on different kits (3 on some, 4 or 5 on " +
    "others) and moves when the interfaces are reconfigured, so one index for all hosts is wrong on some. spark-vllm sets it " +
    "per host: each process that runs NCCL (the fabric check's rank, Ray's start, `vllm serve` under mp) gets its own host's " +
    "index, read from that host's table each time it starts (the index whose /sys/class/infiniband/<hca>/ports/1/gids/<n> " +
    "is ::ffff:<fabric address> and whose gid_attrs/types/<n> is `RoCE v2`), and its log says which " +
    "(`spark-vllm: NCCL_IB_GID_INDEX=`). So on the failing host check that table: the fabric address on one of " +
    "`spark-vllm:hosts[].fabric.hcas`, and after an interface change restart the launches (a reboot does: the supervisor " +
    "relaunches them) so the index is read again. Outside spark-vllm, set it per host the same way, or leave it unset so NCCL picks it. If a " +
    "worker's log shows `ibv_reg_mr_iova2 failed with error Cannot allocate memory` instead, it is the host kernel (see " +
    "rdma-kernel-regression: `kho=off` or boot 6.17.0-1032); a missing interface shows `Unable to find address for`.";

/** Every diagnosis kind with its patterns and hint; the Python helper reads the same data (toolsProgram.ts). */
export const DIAGNOSIS_CATALOG: readonly CatalogEntry[] = [
    {
        kind: "arch-inspect-failed",
        patterns: ["Model architectures \\[[^\\]]*\\] failed to be inspected"],
        hint: ARCH + " The lines above it show why the model module failed to import.",
    },
    {
        kind: "arch-unsupported",
        patterns: [
            "Model architectures \\[[^\\]]*\\] are not supported for now",
            "Model architecture [^ ]+ was supported in vLLM until v",
        ],
        hint: ARCH,
    },
    {
        kind: "transformers-unknown-arch",
        patterns: ["but Transformers does not recognize this architecture"],
        // Old transformers raised a bare KeyError from CONFIG_MAPPING; too generic to be firm.
        weakPatterns: ["^KeyError: '[a-z0-9_]+'$"],
        hint:
            "The transformers library inside the image does not know the model's `model_type`. " +
            "Copying newer model or config files into the image does not work: use an image (`spark-vllm:image`) " +
            "whose vLLM and transformers support this model.",
    },
    {
        kind: "kv-cache-insufficient",
        patterns: [
            "max seq len \\([0-9]+\\) is larger than the maximum number of tokens that can be stored in KV cache",
            "GiB KV cache is needed, which is larger than the available KV cache memory",
        ],
        hint:
            "The KV cache left after loading the weights cannot hold one request of `spark-vllm:vllm.maxModelLen` tokens: " +
            "lower `spark-vllm:vllm.maxModelLen` (the message may state the largest length that fits), or free memory for the cache. " +
            MEMORY,
    },
    {
        kind: "no-cache-memory",
        patterns: ["No available memory for the cache blocks"],
        hint: "Nothing was left for the KV cache after the weights and activations. " + MEMORY,
    },
    {
        kind: "startup-free-memory",
        patterns: ["Free memory on device.* on startup is less than desired GPU memory utilization"],
        hint:
            "vLLM reserves `gpuMemoryUtilization` x total memory at start and less than that was free. " + MEMORY,
    },
    {
        kind: "cuda-oom",
        patterns: ["CUDA out of memory", "torch\\.(cuda\\.)?OutOfMemoryError", "CUDA error: out of memory"],
        hint: "An allocation failed while loading or warming up the model. " + MEMORY,
    },
    {
        // Kernel 7.0.0-1019-nvidia (an `apt upgrade`, DGX OS 7.5): NCCL's memory registration fails with ENOMEM on a rank
        // (`misc/ibvwrap.cc:217 (wrap_ibv_reg_mr_iova2) NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot
        // allocate memory`, eugr/spark-vllm-docker#389; then `ncclSystemError`, `DistBackendError`, "EngineCore fails to
        // start": MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259). Ports ACTIVE, nothing in dmesg or memlock; the tell
        // is CmaFree > CmaTotal in /proc/meminfo (`CmaTotal: 0 kB`, `CmaFree: 940604 kB`, #259): Kexec HandOver's scratch
        // area handed to the page allocator as CMA pageblocks the NIC cannot long-term pin. Fixes reported: the kernel
        // parameter `kho=off` where `kexec_crash_size` is 0 (#259), or booting 6.17.0-1032-nvidia
        // (MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks#14; NVIDIA forum thread "DGX Spark regression kernel 7.0.0-1019-nvidia
        // causes NCCL RoCE ibv_reg_mr_iova2 ENOMEM", linked from eugr/spark-vllm-docker#392). The same message with a
        // small `ulimit -l` is the older memlock cause (NVIDIA/nccl-tests#206).
        kind: "rdma-kernel-regression",
        patterns: ["ibv_reg_mr[_a-z0-9]* failed with (error )?([0-9]+ )?Cannot allocate memory"],
        hint:
            "NCCL could not register (pin) memory with the ConnectX-7 (ibv_reg_mr ENOMEM) although the ports are ACTIVE. On a Spark " +
            "running kernel 7.0.0-1019-nvidia this is a known host-kernel regression: the tell is `CmaFree` larger than `CmaTotal` in " +
            "/proc/meminfo (`grep -i cma /proc/meminfo` on every host). Fix it on each such host: add the kernel parameter `kho=off` " +
            "(only where `cat /sys/kernel/kexec_crash_size` is 0) and reboot, or boot the previous kernel 6.17.0-1032-nvidia " +
            "(`uname -r` to check). If the kernel is not 7.0.0-1019, check memlock: the containers need `ulimit -l unlimited` " +
            "(memlock unlimited, IPC_LOCK) and /dev/infiniband.",
    },
    {
        // NCCL's QP set-up with a GID index whose entry is empty or not the RoCE v2 IPv4 one fails `INIT -> RTR`:
        // `NCCL WARN Call to ibv_modify_qp failed with 61 No data available, on dev rocep1s0f0:1, curr state INIT, next
        // state RTR, local GID index 3, local GID ::, remote GID ::` then `RuntimeError: NCCL error: unhandled system error`
        // (a two-Spark incident note of 2026-09-02 on GitHub: the RoCE v2 IPv4 GID had moved from index 3 to 4). NVIDIA's
        // NCCL troubleshooting guide names `Call to ibv_modify_qp failed with error Invalid argument` for a wrong GID index.
        // Consequence: vLLM's pynccl wrapper raises `RuntimeError: NCCL error: unhandled system error` at
        // init_model_parallel_group when a rank's NCCL init fails a system call; with one NCCL_IB_GID_INDEX for hosts whose
        // RoCE v2 IPv4 GID sits at different indexes (4 on the head, 3 on the worker: MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#26;
        // per-node indexes: MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#10) that is all the head prints. A rank's own cause
        // (ibv_reg_mr ENOMEM, a missing interface) wins wherever it is in the log.
        kind: "roce-gid-index",
        patterns: [
            "Call to ibv_modify_qp failed with (error )?(61 )?No data available",
            "Call to ibv_modify_qp failed with (error )?(22 )?Invalid argument",
        ],
        // `ncclSystemError` is NCCL's name for the same result (NVIDIA/nccl docs, Troubleshooting: "ncclSystemError
        // indicate[s] that a call to an external library failed").
        consequencePatterns: ["NCCL error(:| in:) .*unhandled system error", "ncclSystemError"],
        hint: GID_HINT,
    },
    {
        // Gloo (torch's CPU groups) and NCCL's bootstrap cannot find the socket interface they were told to use:
        // `RuntimeError: [enforce fail at .../gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for:
        // bond1` (NVIDIA/Megatron-LM#436), `RuntimeError: Unable to find address for: eth0` on a DGX Spark, which has no eth0
        // (spark-arena/sparkrun#275), `Unable to find interface for: [0.0.0.189]` when Gloo resolves the hostname
        // (gpustack/gpustack#4128), and NCCL's `bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found`
        // (tests/fixtures/nccl/iface-missing.nccl.log, a real run).
        kind: "socket-iface-missing",
        patterns: [
            "Unable to find address for: ",
            "Unable to find interface for: ",
            "Bootstrap : no socket interface found",
        ],
        hint:
            "Gloo or NCCL was told to use a network interface that has no address on this host (or inside its container): " +
            "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME and TP_SOCKET_IFNAME come from `spark-vllm:hosts[].fabric.interface`, set per host, " +
            "and must name an interface that exists and carries `spark-vllm:hosts[].fabric.address` there (compare with `ip -br addr` " +
            "on that host; interface names differ between kits, e.g. enp1s0f1np1, enp1s0f0np0 or enP2p1s0f1np1, and a DGX Spark has " +
            "no eth0). Remove any GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME baked into the image or passed in `spark-vllm:vllm.extraArgs`.",
    },
    {
        // The GPU driver's own allocation failing: `NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY]
        // (0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359` in `journalctl -k`; on a GB10 the
        // host then wedges (ping answers, SSH does not, only a power cycle recovers: NVIDIA/open-gpu-kernel-modules#1358,
        // NVIDIA/dgx-spark-playbooks#97 and #116). Owners stop the job before it (a `MemAvailable` floor: #116 used 16 GiB;
        // eugr's `--earlyoom`; MiaAI-Lab's memguard). The line also shows up on runs that went on to serve
        // (vllm-project/vllm#56824): it is the cause when the host stopped answering or vLLM died with it.
        kind: "driver-oom",
        patterns: ["NVRM: .*NV_ERR_NO_MEMORY", "Out of memory \\[NV_ERR_NO_MEMORY\\]"],
        hint:
            "The NVIDIA driver itself ran out of memory (NVRM NV_ERR_NO_MEMORY in `journalctl -k`). On a DGX Spark the host often wedges " +
            "after this (ping answers, SSH does not): reboot (power-cycle if SSH hangs) this host before the next launch, then leave " +
            "the driver room: lower `spark-vllm:vllm.gpuMemoryUtilization` (e.g. 0.85 to 0.75) or `spark-vllm:vllm.maxModelLen`, " +
            "drop the page cache, and run a memory guard that stops vLLM when MemAvailable falls below a floor (owners use 16 GiB, " +
            "earlyoom or a memguard script). On kernel 7.0.0-1019-nvidia it came right after the NCCL rendezvous: boot 6.17.0-1032 " +
            "or set `kho=off` (see rdma-kernel-regression).",
    },
    {
        // vLLM's multiprocessing executor spawning its workers across hosts: a worker unpickles a semaphore that lives in
        // another host's /dev/shm: `FileNotFoundError: [Errno 2] No such file or directory` from
        // `multiprocessing/synchronize.py ... SemLock._rebuild`, then `Exception: WorkerProc initialization failed`
        // (spark-arena/recipe-registry#13: vLLM 0.20.1rc1 defaulted multi-node to mp; `--distributed-executor-backend ray`
        // fixed it).
        kind: "mp-across-nodes",
        patterns: ["^FileNotFoundError: \\[Errno 2\\] No such file or directory$"],
        requires: ["SemLock\\._rebuild", "multiprocessing/synchronize\\.py"],
        hint:
            "vLLM's multiprocessing executor tried to reach workers on another host through a semaphore in its own /dev/shm: one " +
            "`vllm serve` cannot spawn mp workers across hosts. Use `spark-vllm:vllm.backend: ray` (the launch passes " +
            "`--distributed-executor-backend ray`), or `spark-vllm:vllm.backend: mp`, which starts one `vllm serve` per host with " +
            "--nnodes/--node-rank/--master-addr/--headless; do not pass `--distributed-executor-backend mp` in " +
            "`spark-vllm:vllm.extraArgs`, and pin the image by digest so a new vLLM default does not change the executor.",
    },
    {
        kind: "nccl-timeout",
        patterns: [],
        consequencePatterns: ["Watchdog caught collective operation timeout"],
        hint:
            "A collective across the hosts never completed: usually one host cannot reach the other over the fabric, " +
            "or one rank died earlier (look for its error above). " + FABRIC,
    },
    {
        // NCCL 2.28 with HCAs it cannot use prints `NET/IB : No device found.`, then `Using network Socket`, and carries
        // on over TCP (tests/fixtures/nccl/hca-missing.nccl.log, a real run). Weak: a slower fabric is rarely why a
        // launch failed. The plan sets NCCL_IB_DISABLE=1 for `hcas: []`, and NCCL then never looks for devices
        // (src/transport/net_ib.cc), so in our logs the line appears only where IB/RoCE was wanted. components/knowledge/nccl.ts
        // (refineNcclDiagnosis) adds the transport NCCL used.
        kind: "nccl-socket-fallback",
        patterns: [],
        weakPatterns: ["NCCL INFO NET/IB : No device found"],
        // Judged by the transport NCCL used: a host without HCAs prints `No device found.` and `Using network Socket`
        // even when every channel runs `via P2P/…` (tests/fixtures/nccl/p2p.nccl.log, healthy). A fall-back is a
        // channel `via NET/Socket` (socket.nccl.log, hca-missing-net.nccl.log) or HCAs that were asked for
        // (`NCCL_IB_HCA set to`, NCCL src/transport/net_ib.cc; hca-missing.nccl.log).
        requires: ["NCCL INFO Channel [0-9]+/[0-9]+ : .* via NET/Socket", "NCCL INFO NCCL_IB_HCA set to "],
        hint:
            "NCCL looked for the IB/RoCE HCAs, found none it could use, and fell back to TCP sockets, which run tensor parallelism " +
            "many times slower (measured on two GPUs with NCCL 2.28: about 300 GB/s over NVLink, about 4 GB/s over sockets). " +
            "Check `spark-vllm:hosts[].fabric.hcas` against `ibdev2netdev` on every host (rocep1s0f1 / roceP2p1s0f1 on a Spark), " +
            "that each HCA is ACTIVE with a RoCE v2 GID carrying an IPv4 address, and that the containers see them " +
            "(/dev/infiniband, IPC_LOCK, memlock unlimited); `hcas: []` runs over TCP on purpose.",
    },
    {
        kind: "nccl-error",
        patterns: [],
        consequencePatterns: ["NCCL error(:| in:) ", "nccl(System|Internal|UnhandledCuda|Remote)Error"],
        weakPatterns: ["NCCL WARN"],
        hint: "NCCL could not set up or use the link between the hosts. " + FABRIC,
    },
    {
        kind: "ray-no-gpu",
        patterns: ["Current node has no GPU available"],
        hint:
            "Ray on the head reports no free GPU: a placement group from an earlier run still holds it, or the head " +
            "container does not see the GPU. Run `ray status` in the head container; re-create the Ray head and workers " +
            "(`ray stop --force` everywhere) and check the container has the GPU (`nvidia-smi` inside it).",
    },
    {
        kind: "ray-placement-group",
        patterns: [
            "Cannot provide a placement group of",
            // Current vLLM for any request of more than one GPU (vllm/v1/executor/ray_utils.py _wait_until_pg_ready:
            // `Cannot provide a placement group requiring {total_gpu_required} GPUs (placement_group_specs=…) within
            // {PG_WAIT_TIMEOUT} seconds.`).
            "Cannot provide a placement group requiring [0-9.]+ GPUs",
            "The number of required GPUs exceeds the total number of available GPUs in the cluster",
        ],
        weakPatterns: [
            // vLLM logs this as a warning and keeps waiting for the group.
            "The number of required GPUs exceeds the total number of available GPUs in the placement group",
            // Ray's autoscaler, every 30 s while a request cannot be placed on any node (ray-project/ray
            // python/ray/autoscaler/_private/autoscaler.py: `Error: No available node types can fulfill resource request
            // {}. Add suitable node types to this cluster to resolve this issue.`; "requests" in the v2 autoscaler).
            "No available node types can fulfill resource requests?",
        ],
        hint:
            "Ray cannot place one GPU per rank: `spark-vllm:vllm.tensorParallelSize` x `pipelineParallelSize` must equal the " +
            "GPUs of all hosts, and every worker must have joined the head (`ray status` in the head container shows the nodes " +
            "and GPUs). A vLLM that printed `Started a local Ray instance` did not find the cluster (RAY_ADDRESS).",
    },
    {
        kind: "port-in-use",
        patterns: ["\\[Errno 98\\]", "address already in use"],
        ignoreCase: true,
        hint:
            "Another process already listens on the port. Change `spark-vllm:vllm.port` or stop the leftover process: " +
            "check `ss -ltnp` on the head for an old `vllm serve` or another container using the host network.",
    },
    {
        kind: "trust-remote-code",
        patterns: [
            "contains custom code which must be executed to correctly load the model",
            "Please pass the argument .trust_remote_code=True.",
            "set the option .trust_remote_code=True. to remove this error",
            "If the model is a custom model not yet available in the HuggingFace transformers library",
        ],
        hint:
            "The model ships its own Python code. If you trust the repository, set `spark-vllm:model.trustRemoteCode: true`.",
    },
    {
        kind: "invalid-repo-or-path",
        patterns: [
            "RepositoryNotFoundError",
            "Repository Not Found for url",
            "Repo id must be in the form",
            "is not a local folder and is not a valid model identifier",
            "LocalEntryNotFoundError",
            "Cannot find any of \\[.config\\.json.",
            "Invalid repository ID or local directory specified",
        ],
        hint:
            "The model could not be found: check `spark-vllm:model.id` (namespace/name on Hugging Face, or a path inside the " +
            "container) and that the weights are in `spark-vllm:model.cacheDir` on every host (offline hosts cannot download).",
    },
    {
        kind: "gated-repo",
        patterns: ["GatedRepoError", "Cannot access gated repo for url", "You are trying to access a gated repo"],
        // Repository-not-found errors say `401 Client Error` too.
        weakPatterns: ["401 Client Error"],
        hint:
            "The model is gated: accept its licence on huggingface.co with the account whose token you use, then set the " +
            "token as the secret `spark-vllm:hfToken` (`pulumi config set --secret spark-vllm:hfToken hf_...`).",
    },
    {
        kind: "quantization-unsupported",
        patterns: [
            "The quantization method [^ ]+ is not supported for the current GPU",
            "quantization is currently not supported in",
            "Unknown quantization method",
            "does not match the quantization method specified in the .quantization. argument",
        ],
        hint:
            "The image's vLLM cannot run this checkpoint's quantization on the GB10 (compute capability 12.1, sm_121). " +
            "Use an image built for Blackwell/GB10 (`spark-vllm:image`) whose vLLM supports the method, or a checkpoint with a " +
            "supported quantization; do not force `--quantization` in `spark-vllm:vllm.extraArgs`.",
    },
    {
        kind: "tp-divisibility",
        patterns: ["must be divisible by tensor parallel size", "must be divisible by pipeline parallel size"],
        hint:
            "`spark-vllm:vllm.tensorParallelSize` must divide the model's attention heads (and pipelineParallelSize its layers); " +
            "TP x PP must still equal the GPUs of all hosts (two Sparks: TP=2, or TP=1 with PP=2).",
    },
    {
        // GB10 is sm_121: an image whose PyTorch/vLLM kernels were not built for it fails like this.
        kind: "cuda-kernel-image",
        patterns: ["no kernel image is available for execution on the device"],
        hint:
            "The image's PyTorch or vLLM kernels were not built for the GB10 (compute capability 12.1): no sm_121 or " +
            "sm_120 code (sm_120 runs on 12.1, same major, lower minor: components/knowledge/images.ts) and no PTX the driver can " +
            "compile. Use an image whose arch list includes 12.0 or 12.1 (CUDA 12.9 or newer; the known images are in " +
            "components/knowledge/images.ts) in `spark-vllm:image`, the same on every host.",
    },
    {
        kind: "cuda-error",
        patterns: ["CUDA error: "],
        hint:
            "A CUDA kernel faulted (e.g. an illegal memory access). On a Spark this is most often an image whose vLLM, " +
            "PyTorch and driver do not match GB10: use an image built for it, check `nvidia-smi` on every host, and retry " +
            "with `--enforce-eager` in `spark-vllm:vllm.extraArgs` to rule out CUDA graphs.",
    },
    {
        // vllm/v1/executor/ray_utils.py assert_ray_available (v0.11+: "Failed to import Ray: {err}.Please install Ray
        // with `pip install ray`."; earlier vllm/executor/ray_utils.py: "Failed to import Ray, please install Ray ...").
        kind: "ray-missing",
        patterns: ["Failed to import Ray[:,] "],
        hint:
            "The image's vLLM cannot import Ray, which `spark-vllm:vllm.backend: ray` needs (vLLM images dropped Ray from " +
            `0.18): set \`spark-vllm:vllm.backend\` to \`mp\` (vLLM ${firstVllmWithMultiNodeMp} or newer), or use an image that ships Ray.`,
    },
    {
        // A worker (on another host, usually) died or stalled and the head prints only the consequence: Ray's
        // `(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the
        // problem, check the logs for the dead worker.` (eugr/spark-vllm-docker#255, two Sparks), `The actor died
        // unexpectedly before finishing this task` (Ray's ActorDiedError), vLLM's mp executor `Worker proc VllmWorker-1 died
        // unexpectedly, shutting down executor.` (vllm/v1/executor/multiproc_executor.py) and `RayWorkerProc rank=[2] died
        // unexpectedly`, `EngineDeadError`, and a stalled worker: `No available shared memory broadcast block found in 60
        // seconds` repeating, then `TimeoutError: RPC call to sample_tokens timed out` (eugr/spark-vllm-docker#321 and #348,
        // MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#159). The broadcast-block line is weak: slow compilation prints it too.
        kind: "worker-died",
        patterns: [],
        consequencePatterns: [
            "A worker died or was killed while executing a task",
            "The actor died unexpectedly before finishing this task",
            "Worker proc [^ ]+ died unexpectedly",
            "WorkerProc rank=\\[[0-9, ]+\\] died unexpectedly",
            "RPC call to [a-z_]+ timed out",
            "EngineDeadError",
        ],
        weakPatterns: ["No available shared memory broadcast block found"],
        hint:
            "A vLLM worker died or stopped answering, and this log shows only the consequence. The cause is in the dead worker's own " +
            "log on its host: `spark-vllm diagnose --stack NAME` reads every host's vLLM log and the driver's kernel lines over SSH " +
            "and names the host and the line (`journalctl -k` there for the OOM killer: a worker killed for memory leaves no " +
            "traceback). Fix what that log names; " +
            "a worker that ran out of host memory needs a lower `spark-vllm:vllm.gpuMemoryUtilization` or `spark-vllm:vllm.maxModelLen`.",
    },
    {
        // torch/csrc/distributed/c10d/TCPStore.cpp TCPStore::waitForWorkers: the store on the head gave up on the ranks
        // that never connected ("Timed out after {} seconds waiting for clients. {}/{} clients joined.").
        kind: "rendezvous-timeout",
        patterns: ["Timed out after [0-9]+ seconds waiting for clients\\. [0-9]+/[0-9]+ clients joined"],
        hint:
            "The head waited for every host's vLLM to join its rendezvous and some never did: a worker's vLLM died first " +
            "(its own log on that host has the root cause), or it cannot reach the head's fabric address on " +
            "`spark-vllm:vllm.masterPort` (a firewall, or a wrong `hosts[].fabric.address`). Fix that, then relaunch every " +
            "host together with the `pulumi up --replace` of every host's memory gate that `spark-vllm status` prints (a " +
            "plain `pulumi up` re-runs only the failed probe).",
    },
    {
        kind: "unknown-engine-failure",
        wrapper: true,
        patterns: [
            "Engine core initialization failed",
            "WorkerProc initialization failed",
            "EngineCore failed to start",
            "Engine process failed to start",
            "^RuntimeError: .*[Ff]ailed",
        ],
        hint:
            "vLLM's engine failed for a reason not in the catalog. The line shown is the last exception printed before the " +
            "engine gave up; read the whole log around it (the wrapper `Engine core initialization failed` is never the cause).",
    },
];

/**
 * Lines are cut to this many characters (code points, as Python's `line[:n]` counts) right after the log is split,
 * before any pattern sees them: a pattern that scans a line for each of its starts costs the square of the
 * line's length, so an uncut line of megabytes took minutes; cut, every line costs at most a constant and
 * diagnosing is linear in the log's size (worst case, a 2 MB log of lines built to make the catalog's `[^\]]*` and
 * `.*` patterns scan: about half a second). Root-cause lines are a few hundred characters and match near their
 * start; longer lines are configuration dumps. The Python twin cuts at the same length (it takes this from the diagnosis data).
 */
export const maxLineChars = 2048;

/** Line-level regexes shared with the Python port (see `diagnosisData`). */
export const LOG_SYNTAX = {
    /**
     * An OSC sequence (`ESC ] …` ended by BEL or `ESC \`) is at most 256 characters of one line: unbounded, every
     * unterminated one was scanned to the end of the log (quadratic), and one could swallow the lines up to a later BEL.
     */
    ansi: "\\x1b(?:\\[[0-9;?]*[ -/]*[@-~]|\\][^\\x07\\x1b\\n]{0,256}(?:\\x07|\\x1b\\\\)|[@-Z\\\\-_])",
    /** One process prefix; stripped repeatedly, as prefixes nest. */
    prefix:
        "^(?:\\((?:[A-Za-z0-9_.:-]+ )?pid=[0-9]+(?:, ip=[0-9A-Fa-f.:]+)?\\) |\\((?:raylet|gcs_server)(?:, ip=[0-9A-Fa-f.:]+)?\\) |\\[rank[0-9]+\\]: ?)",
    /** Ray's de-duplication suffix. */
    repeated: " ?\\[repeated [0-9]+x across cluster\\]$",
    /** vLLM's logger header, new (`[file.py:123] `) and old (`file.py:123] `) style. */
    header:
        "^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]+)? (?:\\[[^\\]]*\\] |[A-Za-z0-9_.]+:[0-9]+\\] )?",
    /** A traceback frame line (trimmed); the line after it is source code unless it is a frame or exception. */
    frame: '^File "[^"]*", line [0-9]+',
    /** A Python exception line, e.g. `ray.exceptions.RayTaskError(ValueError): …`. */
    exception: "^[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Exit|Interrupt)(?:\\([A-Za-z0-9_.]*\\))?: .",
};

const re = (source: string, ignoreCase = false) => new RegExp(source, ignoreCase ? "si" : "s");
const ANSI = new RegExp(LOG_SYNTAX.ansi, "g");
const PREFIX = re(LOG_SYNTAX.prefix);
const REPEATED = re(LOG_SYNTAX.repeated);
const HEADER = re(LOG_SYNTAX.header);
const EXCEPTION = re(LOG_SYNTAX.exception);
const FRAME = re(LOG_SYNTAX.frame);

interface Compiled {
    entry: CatalogEntry;
    firm: RegExp[];
    consequence: RegExp[];
    weak: RegExp[];
    requires: RegExp[];
}
const COMPILED: Compiled[] = DIAGNOSIS_CATALOG.map(entry => ({
    entry,
    firm: entry.patterns.map(p => re(p, entry.ignoreCase)),
    consequence: (entry.consequencePatterns ?? []).map(p => re(p, entry.ignoreCase)),
    weak: (entry.weakPatterns ?? []).map(p => re(p, entry.ignoreCase)),
    requires: (entry.requires ?? []).map(p => re(p, entry.ignoreCase)),
}));

const isBlank = (c: number) => c === 32 || c === 9;
/** Without trailing spaces and tabs. A loop, not /[ \t]+$/: that regex retries every run of blanks from each of its starts (quadratic). */
const trimBlanksEnd = (s: string) => {
    let end = s.length;
    while (end > 0 && isBlank(s.charCodeAt(end - 1))) end--;
    return end === s.length ? s : s.slice(0, end);
};
const stripBlanks = (s: string) => {
    let start = 0;
    while (start < s.length && isBlank(s.charCodeAt(start))) start++;
    return trimBlanksEnd(start === 0 ? s : s.slice(start));
};

/** The first maxLineChars code points of a line (Python's `line[:maxLineChars]`). */
function capLine(line: string): string {
    if (line.length <= maxLineChars) return line;
    let i = 0;
    for (let n = 0; n < maxLineChars && i < line.length; n++) i += line.codePointAt(i)! > 0xffff ? 2 : 1;
    return line.slice(0, i);
}

/** The log as lines: no ANSI escapes, LF only, at most maxLineChars each, no process prefixes, no trailing blanks (indentation kept). */
export function normaliseLog(log: string): string[] {
    const text = log.replace(ANSI, "").replace(/\r\n?/g, "\n");
    return text.split("\n").map(raw => {
        let line = capLine(raw);
        for (let m = PREFIX.exec(line); m; m = PREFIX.exec(line)) line = line.slice(m[0].length);
        return trimBlanksEnd(line.replace(REPEATED, ""));
    });
}

/** A normalised line's message: trimmed, without vLLM's `LEVEL MM-DD hh:mm:ss [file.py:N] ` header. */
function messageOf(line: string): string {
    return stripBlanks(stripBlanks(line).replace(HEADER, ""));
}

/** Whether a message is traceback frame or source code rather than output. */
function isCode(messages: string[], i: number): boolean {
    if (FRAME.test(messages[i])) return true;
    return i > 0 && FRAME.test(messages[i - 1]) && !EXCEPTION.test(messages[i]);
}

/** The root cause in a whole vLLM log (normalised; causes, then consequences, then weak patterns; wrappers last), or undefined. */
export function diagnose(log: string): Diagnosis | undefined {
    return diagnoseTiered(log)?.diagnosis;
}

/**
 * How firmly a diagnosis was found, strongest first (the order `diagnose` tries): a line that names a cause, a line that
 * names only the consequence of a failure elsewhere, a weak pattern, a wrapper line. Across several hosts' logs the
 * strongest wins (`spark-vllm diagnose --stack`: a dead worker's own cause over the head's consequence).
 */
export const DIAGNOSIS_TIERS = ["firm", "consequence", "weak", "wrapper"] as const;
export type DiagnosisTier = typeof DIAGNOSIS_TIERS[number];

/** `diagnose`, and the tier its line was found in. */
export function diagnoseTiered(log: string): { diagnosis: Diagnosis; tier: DiagnosisTier } | undefined {
    const messages = normaliseLog(log).map(messageOf);
    const code = messages.map((_, i) => isCode(messages, i));
    const found = (entry: CatalogEntry, line: string, tier: DiagnosisTier = "wrapper") => ({ diagnosis: { kind: entry.kind, line, hint: entry.hint }, tier });
    const evidenced = (c: Compiled) => c.requires.length === 0 || messages.some(m => c.requires.some(r => r.test(m)));
    const candidates = COMPILED.filter(c => !c.entry.wrapper && evidenced(c));
    for (const tier of ["firm", "consequence", "weak"] as const) {
        for (const [i, message] of messages.entries()) {
            if (code[i]) continue;
            const hit = candidates.find(c => c[tier].some(r => r.test(message)));
            if (hit) return found(hit.entry, message, tier);
        }
    }
    const wrapper = COMPILED.find(c => c.entry.wrapper)!;
    const isWrapper = (m: string) => wrapper.firm.some(r => r.test(m));
    let last = -1;
    messages.forEach((m, i) => { if (!code[i] && isWrapper(m)) last = i; });
    if (last < 0) return undefined;
    for (let i = last - 1; i >= 0; i--) {
        if (EXCEPTION.test(messages[i]) && !isWrapper(messages[i])) return found(wrapper.entry, messages[i]);
    }
    return found(wrapper.entry, messages.find((m, i) => !code[i] && isWrapper(m))!);
}

/** Normalised lines around the first line whose message is `lineText` (or that contains it); [] if absent. */
export function contextAround(log: string, lineText: string, before = 10, after = 4): string[] {
    const lines = normaliseLog(log);
    let at = lines.findIndex(l => messageOf(l) === lineText);
    if (at < 0) at = lines.findIndex(l => l.includes(lineText));
    if (at < 0) return [];
    return lines.slice(Math.max(0, at - before), at + after + 1);
}

/** A host kernel owners found broken, checked by the preflight on every host before anything launches. */
export interface KnownBadKernel {
    /** `uname -r`, exactly. */
    release: string;
    /** The diagnosis kind its failure shows up as, when it does launch. */
    kind: string;
    /**
     * When the preflight refuses the host: `cmaFreeAboveTotal` (/proc/meminfo's CmaFree larger than CmaTotal, the tell
     * owners found) refuses with it and warns without it; `always` refuses.
     */
    refuse: "cmaFreeAboveTotal" | "always";
    symptom: string;
    fix: string;
    source: string;
}

/** Known-bad host kernels (issue 47); the preflight (components/hostProgram/spark_vllm/preflight.py) reads this table. */
export const KNOWN_BAD_KERNELS: readonly KnownBadKernel[] = [
    {
        release: "7.0.0-1019-nvidia",
        kind: "rdma-kernel-regression",
        refuse: "cmaFreeAboveTotal",
        symptom: "NCCL's ibv_reg_mr_iova2 fails with ENOMEM (Cannot allocate memory) at init, so no model can load across hosts",
        fix: "add the kernel parameter kho=off (only where /sys/kernel/kexec_crash_size is 0) and reboot, or boot 6.17.0-1032-nvidia",
        source: "MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259, eugr/spark-vllm-docker#389 and #392, MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks#14",
    },
];

/** The catalog and line syntax as JSON data, for the helper's Python twin (components/hostProgram/spark_vllm/diagnosis.py). */
export function diagnosisData(): {
    catalog: readonly CatalogEntry[];
    syntax: typeof LOG_SYNTAX;
    maxLineChars: number;
    knownBadKernels: readonly KnownBadKernel[];
} {
    return { catalog: DIAGNOSIS_CATALOG, syntax: LOG_SYNTAX, maxLineChars, knownBadKernels: KNOWN_BAD_KERNELS };
}
